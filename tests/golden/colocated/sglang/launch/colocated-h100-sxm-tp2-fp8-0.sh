#!/usr/bin/env bash
# layoutopt launch script for instance colocated-h100-sxm-tp2-fp8-0
# engine: sglang 0.5.3 (flags checked against layoutopt/report/data/sglang_0.5.3_flags.txt)
# model: Qwen/Qwen3-32B (plan model: qwen3-32b)
# pool: colocated-h100-sxm-tp2-fp8 (role colocated, H100-SXM, tp2-fp8, 2 GPUs per instance)
# runs on: node-0 (GPUs 0,1); serves http on port 8000
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1
exec python3 -m sglang.launch_server \
  --model-path Qwen/Qwen3-32B \
  --port 8000 \
  --tp-size 2 \
  --quantization fp8 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 128
