#!/usr/bin/env bash
# layoutopt launch script for instance colocated-h100-sxm-tp2-fp8-0
# engine: vllm 0.33.0 (flags checked against layoutopt/engines/data/vllm-0.33.0.yaml)
# model: Qwen/Qwen3-32B-FP8 (plan model: qwen3-32b)
# pool: colocated-h100-sxm-tp2-fp8 (role colocated, H100-SXM, tp2-fp8, 2 GPUs per instance)
# runs on: node-0 (GPUs 0,1); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1
exec vllm serve Qwen/Qwen3-32B-FP8 \
  --host 0.0.0.0 \
  --port 8000 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --kv-cache-dtype fp8 \
  --max-num-seqs 128 \
  --gpu-memory-utilization 0.92 \
  --max-num-batched-tokens 8192 \
  --max-cudagraph-capture-size 512
