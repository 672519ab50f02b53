#!/usr/bin/env bash
# layoutopt launch script for instance prefill-0
# engine: vllm 0.13.0 (flags checked against layoutopt/report/data/vllm_0.13.0_flags.txt)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: prefill-h100-sxm-tp2-pcp2-fp8-kvbf16 (role prefill, H100-SXM, tp2-pcp2-fp8-kvbf16, 4 GPUs per instance)
# runs on: gpu-node-01 (GPUs 0,1,2,3); serves http on port 8000
# disaggregated serving: a router that sends each request to a prefill and then a decode instance (KV moves over NIXL) is deployed separately
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3
export VLLM_NIXL_SIDE_CHANNEL_PORT=5600
exec vllm serve meta-llama/Llama-3.1-70B \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --prefill-context-parallel-size 2 \
  --quantization fp8 \
  --max-num-seqs 16 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
