#!/usr/bin/env bash
# layoutopt launch script for instance colocated-h100-sxm-tp2-fp8-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
# model: Qwen/Qwen3-32B-FP8 (plan model: qwen3-32b)
# pool: colocated-h100-sxm-tp2-fp8 (role colocated, H100-SXM, tp2-fp8, 2 GPUs per instance)
# runs on: node-0 (GPUs 0,1); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1
exec python3 -m sglang.launch_server \
  --model-path Qwen/Qwen3-32B-FP8 \
  --host 0.0.0.0 \
  --port 8000 \
  --tp-size 2 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 128 \
  --mem-fraction-static 0.83 \
  --chunked-prefill-size 8192
