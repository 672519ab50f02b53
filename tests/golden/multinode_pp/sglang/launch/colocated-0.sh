#!/usr/bin/env bash
# layoutopt launch script for instance colocated-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
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
    exec python3 -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-405B \
      --host 0.0.0.0 \
      --port 8000 \
      --tp-size 8 \
      --pp-size 2 \
      --max-running-requests 64 \
      --mem-fraction-static 0.80 \
      --chunked-prefill-size 8192 \
      --dist-init-addr gpu-node-01:20000 \
      --nnodes 2 \
      --node-rank 0
    ;;
  1)  # gpu-node-02
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    exec python3 -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-405B \
      --host 0.0.0.0 \
      --port 8000 \
      --tp-size 8 \
      --pp-size 2 \
      --max-running-requests 64 \
      --mem-fraction-static 0.80 \
      --chunked-prefill-size 8192 \
      --dist-init-addr gpu-node-01:20000 \
      --nnodes 2 \
      --node-rank 1
    ;;
  *) echo "NODE_RANK must be 0..1" >&2; exit 2 ;;
esac
