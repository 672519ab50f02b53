#!/usr/bin/env bash
# layoutopt launch script for instance prefill-h200-sxm-tp1-ep8-dp8-fp8-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
# model: Qwen/Qwen3-235B-A22B-FP8 (plan model: qwen3-235b-a22b)
# pool: prefill-h200-sxm-tp1-ep8-dp8-fp8 (role prefill, H200-SXM, tp1-ep8-dp8-fp8, 8 GPUs per instance)
# runs on: node-0 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export SGLANG_HOST_IP="${NODE_IP:-node-0}"
exec python3 -m sglang.launch_server \
  --model-path Qwen/Qwen3-235B-A22B-FP8 \
  --host 0.0.0.0 \
  --port 8000 \
  --tp-size 8 \
  --attn-dp-size 8 \
  --ep-size 8 \
  --kv-cache-dtype fp8_e4m3 \
  --max-running-requests 32 \
  --mem-fraction-static 0.77 \
  --chunked-prefill-size 8192 \
  --disaggregation-mode prefill \
  --disaggregation-transfer-backend nixl \
  --page-size 1 \
  --disaggregation-bootstrap-port 8998
