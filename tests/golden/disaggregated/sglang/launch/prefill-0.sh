#!/usr/bin/env bash
# layoutopt launch script for instance prefill-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: prefill-h100-sxm-tp4-fp8 (role prefill, H100-SXM, tp4-fp8, 4 GPUs per instance)
# runs on: gpu-node-01 (GPUs 0,1,2,3); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
# NOTE: sglang==0.5.23 quantizes the 16-bit weights of meta-llama/Llama-3.1-70B to fp8 at load time (--quantization fp8, sglang/srt/layers/quantization/fp8.py:1150)
export CUDA_VISIBLE_DEVICES=0,1,2,3
export SGLANG_HOST_IP="${NODE_IP:-gpu-node-01}"
exec python3 -m sglang.launch_server \
  --model-path meta-llama/Llama-3.1-70B \
  --host 0.0.0.0 \
  --port 8000 \
  --tp-size 4 \
  --quantization fp8 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 16 \
  --mem-fraction-static 0.82 \
  --chunked-prefill-size 8192 \
  --disaggregation-mode prefill \
  --disaggregation-transfer-backend nixl \
  --page-size 1 \
  --disaggregation-bootstrap-port 8998
