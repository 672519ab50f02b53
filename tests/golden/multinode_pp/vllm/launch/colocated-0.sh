#!/usr/bin/env bash
# layoutopt launch script for instance colocated-0
# engine: vllm 0.33.0 (flags checked against layoutopt/engines/data/vllm-0.33.0.yaml)
# model: meta-llama/Llama-3.1-405B (plan model: llama-3.1-405b)
# pool: colocated-h100-sxm-tp8-pp2-bf16 (role colocated, H100-SXM, tp8-pp2-bf16, 16 GPUs per instance)
# runs on: gpu-node-01 (GPUs 0,1,2,3,4,5,6,7), gpu-node-02 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8000
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
set -euo pipefail
# This instance spans 2 nodes. Run this script on each of them with NODE_RANK set
# (0 = gpu-node-01, the head); start NODE_RANK=0 first.
NODE_RANK="${NODE_RANK:?set NODE_RANK to 0..1}"
case "$NODE_RANK" in
  0)  # gpu-node-01
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    ray start --head --port=6379 --num-gpus=8
    exec vllm serve meta-llama/Llama-3.1-405B \
      --host 0.0.0.0 \
      --port 8000 \
      --tensor-parallel-size 8 \
      --pipeline-parallel-size 2 \
      --max-num-seqs 64 \
      --gpu-memory-utilization 0.92 \
      --max-num-batched-tokens 8192 \
      --max-cudagraph-capture-size 512 \
      --distributed-executor-backend ray
    ;;
  1)  # gpu-node-02
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    ray start --address=gpu-node-01:6379 --num-gpus=8 --block
    ;;
  *) echo "NODE_RANK must be 0..1" >&2; exit 2 ;;
esac
