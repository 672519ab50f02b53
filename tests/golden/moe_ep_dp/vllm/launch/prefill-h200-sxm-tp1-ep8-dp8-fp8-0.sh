#!/usr/bin/env bash
# layoutopt launch script for instance prefill-h200-sxm-tp1-ep8-dp8-fp8-0
# engine: vllm 0.33.0 (flags checked against layoutopt/engines/data/vllm-0.33.0.yaml)
# model: Qwen/Qwen3-235B-A22B-FP8 (plan model: qwen3-235b-a22b)
# pool: prefill-h200-sxm-tp1-ep8-dp8-fp8 (role prefill, H200-SXM, tp1-ep8-dp8-fp8, 8 GPUs per instance)
# runs on: node-0 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export VLLM_NIXL_SIDE_CHANNEL_HOST="${NODE_IP:-node-0}"
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
exec vllm serve Qwen/Qwen3-235B-A22B-FP8 \
  --host 0.0.0.0 \
  --port 8000 \
  --tensor-parallel-size 1 \
  --pipeline-parallel-size 1 \
  --data-parallel-size 8 \
  --enable-expert-parallel \
  --kv-cache-dtype fp8 \
  --max-num-seqs 4 \
  --gpu-memory-utilization 0.92 \
  --max-num-batched-tokens 8192 \
  --max-cudagraph-capture-size 512 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
