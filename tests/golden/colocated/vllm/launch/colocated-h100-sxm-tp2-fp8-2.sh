#!/usr/bin/env bash
# layoutopt launch script for instance colocated-h100-sxm-tp2-fp8-2
# engine: vllm 0.13.0 (flags checked against layoutopt/report/data/vllm_0.13.0_flags.txt)
# model: Qwen/Qwen3-32B (plan model: qwen3-32b)
# pool: colocated-h100-sxm-tp2-fp8 (role colocated, H100-SXM, tp2-fp8, 2 GPUs per instance)
# runs on: node-0 (GPUs 4,5); serves http on port 8002
set -euo pipefail
export CUDA_VISIBLE_DEVICES=4,5
exec vllm serve Qwen/Qwen3-32B \
  --port 8002 \
  --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 \
  --quantization fp8 \
  --kv-cache-dtype fp8 \
  --max-num-seqs 128
