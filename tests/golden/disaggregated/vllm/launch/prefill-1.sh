#!/usr/bin/env bash
# layoutopt launch script for instance prefill-1
# engine: vllm 0.33.0 (flags checked against layoutopt/engines/data/vllm-0.33.0.yaml)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: prefill-h100-sxm-tp4-fp8 (role prefill, H100-SXM, tp4-fp8, 4 GPUs per instance)
# runs on: gpu-node-01 (GPUs 4,5,6,7); serves http on port 8001
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
# NOTE: vllm==0.33.0 quantizes the 16-bit weights of meta-llama/Llama-3.1-70B to fp8 at load time (--quantization fp8_per_tensor, vllm/config/quantization.py:196)
export CUDA_VISIBLE_DEVICES=4,5,6,7
export VLLM_NIXL_SIDE_CHANNEL_HOST="${NODE_IP:-gpu-node-01}"
export VLLM_NIXL_SIDE_CHANNEL_PORT=5601
exec vllm serve meta-llama/Llama-3.1-70B \
  --host 0.0.0.0 \
  --port 8001 \
  --tensor-parallel-size 4 \
  --pipeline-parallel-size 1 \
  --quantization fp8_per_tensor \
  --kv-cache-dtype fp8 \
  --max-num-seqs 16 \
  --gpu-memory-utilization 0.92 \
  --max-num-batched-tokens 8192 \
  --max-cudagraph-capture-size 512 \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
