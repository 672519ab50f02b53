#!/usr/bin/env bash
# layoutopt launch script for instance prefill-h200-sxm-tp1-ep8-dp8-fp8-kvbf16-0
# engine: vllm 0.13.0 (flags checked against layoutopt/report/data/vllm_0.13.0_flags.txt)
# model: Qwen/Qwen3-235B-A22B (plan model: qwen3-235b-a22b)
# pool: prefill-h200-sxm-tp1-ep8-dp8-fp8-kvbf16 (role prefill, H200-SXM, tp1-ep8-dp8-fp8-kvbf16, 8 GPUs per instance)
# runs on: node-0 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8000
# disaggregated serving: a router that sends each request to a prefill and then a decode instance (KV moves over NIXL) is deployed separately
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
exec vllm serve Qwen/Qwen3-235B-A22B \
  --port 8000 \
  --tensor-parallel-size 1 \
  --pipeline-parallel-size 1 \
  --data-parallel-size 8 \
  --enable-expert-parallel \
  --quantization fp8 \
  --max-num-seqs 32 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
