#!/usr/bin/env bash
# layoutopt launch script for instance prefill-h200-sxm-tp1-ep8-dp8-fp8-kvbf16-0
# engine: sglang 0.5.3 (flags checked against layoutopt/report/data/sglang_0.5.3_flags.txt)
# model: Qwen/Qwen3-235B-A22B (plan model: qwen3-235b-a22b)
# pool: prefill-h200-sxm-tp1-ep8-dp8-fp8-kvbf16 (role prefill, H200-SXM, tp1-ep8-dp8-fp8-kvbf16, 8 GPUs per instance)
# runs on: node-0 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8000
# disaggregated serving: a router that sends each request to a prefill and then a decode instance (KV moves over NIXL) is deployed separately
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
exec python3 -m sglang.launch_server \
  --model-path Qwen/Qwen3-235B-A22B \
  --port 8000 \
  --tp-size 8 \
  --dp-size 8 \
  --enable-dp-attention \
  --ep-size 8 \
  --quantization fp8 \
  --max-running-requests 32 \
  --disaggregation-mode prefill \
  --disaggregation-transfer-backend nixl
