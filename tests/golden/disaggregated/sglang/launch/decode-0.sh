#!/usr/bin/env bash
# layoutopt launch script for instance decode-0
# engine: sglang 0.5.3 (flags checked against layoutopt/report/data/sglang_0.5.3_flags.txt)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: decode-h100-sxm-tp8-fp8 (role decode, H100-SXM, tp8-fp8, 8 GPUs per instance)
# runs on: gpu-node-02 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8002
# disaggregated serving: a router that sends each request to a prefill and then a decode instance (KV moves over NIXL) is deployed separately
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
exec python3 -m sglang.launch_server \
  --model-path meta-llama/Llama-3.1-70B \
  --port 8002 \
  --tp-size 8 \
  --quantization fp8 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 256 \
  --disaggregation-mode decode \
  --disaggregation-transfer-backend nixl
