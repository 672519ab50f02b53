#!/usr/bin/env bash
# layoutopt launch script for instance decode-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: decode-h100-sxm-tp8-fp8 (role decode, H100-SXM, tp8-fp8, 8 GPUs per instance)
# runs on: gpu-node-02 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8002
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
# NOTE: sglang==0.5.23 quantizes the 16-bit weights of meta-llama/Llama-3.1-70B to fp8 at load time (--quantization fp8, sglang/srt/layers/quantization/fp8.py:1150)
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export SGLANG_HOST_IP="${NODE_IP:-gpu-node-02}"
exec python3 -m sglang.launch_server \
  --model-path meta-llama/Llama-3.1-70B \
  --host 0.0.0.0 \
  --port 8002 \
  --tp-size 8 \
  --quantization fp8 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 256 \
  --mem-fraction-static 0.81 \
  --chunked-prefill-size 8192 \
  --disaggregation-mode decode \
  --disaggregation-transfer-backend nixl \
  --page-size 1
