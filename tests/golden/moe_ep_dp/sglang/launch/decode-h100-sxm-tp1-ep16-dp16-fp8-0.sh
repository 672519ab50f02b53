#!/usr/bin/env bash
# layoutopt launch script for instance decode-h100-sxm-tp1-ep16-dp16-fp8-0
# engine: sglang 0.5.23 (flags checked against layoutopt/engines/data/sglang-0.5.23.yaml)
# model: Qwen/Qwen3-235B-A22B-FP8 (plan model: qwen3-235b-a22b)
# pool: decode-h100-sxm-tp1-ep16-dp16-fp8 (role decode, H100-SXM, tp1-ep16-dp16-fp8, 16 GPUs per instance)
# runs on: node-1 (GPUs 0,1,2,3,4,5,6,7), node-2 (GPUs 0,1,2,3,4,5,6,7); serves http on port 8001
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real)
# disaggregated serving: router/router.sh sends each request to a prefill and then a decode instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network
set -euo pipefail
# This instance spans 2 nodes. Run this script on each of them with NODE_RANK set
# (0 = node-1, the head); start NODE_RANK=0 first.
NODE_RANK="${NODE_RANK:?set NODE_RANK to 0..1}"
case "$NODE_RANK" in
  0)  # node-1
    # NOTE: the planned batch of 512 exceeds the 464 sequences of 2400 tokens that fit in KV cache; the engine queues or preempts the rest
    # NOTE: expert parallelism over 16 ranks spans nodes: SGLang's default --moe-a2a-backend none gathers every DP rank's tokens to all 16 MoE ranks (an all-reduce of the summed buffer on prompt steps, an all-gather on decode steps) and reduce-scatters the expert outputs back, over the NICs; the plan's numbers cost exactly that. --moe-a2a-backend deepep sends each token only to the ranks of its routed experts and may be faster at this size, but it needs DeepEP with NVSHMEM/IBGDA set up on every host (the engines' images build DeepEP; the hosts' RDMA and GPU driver setup is not checked here), so the plan does not count on it
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    export SGLANG_HOST_IP="${NODE_IP:-node-1}"
    exec python3 -m sglang.launch_server \
      --model-path Qwen/Qwen3-235B-A22B-FP8 \
      --host 0.0.0.0 \
      --port 8001 \
      --tp-size 16 \
      --attn-dp-size 16 \
      --ep-size 16 \
      --kv-cache-dtype fp8_e4m3 \
      --max-running-requests 512 \
      --mem-fraction-static 0.35 \
      --chunked-prefill-size 8192 \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend nixl \
      --page-size 1 \
      --dist-init-addr node-1:20001 \
      --nnodes 2 \
      --node-rank 0
    ;;
  1)  # node-2
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    export SGLANG_HOST_IP="${NODE_IP:-node-2}"
    exec python3 -m sglang.launch_server \
      --model-path Qwen/Qwen3-235B-A22B-FP8 \
      --host 0.0.0.0 \
      --port 8001 \
      --tp-size 16 \
      --attn-dp-size 16 \
      --ep-size 16 \
      --kv-cache-dtype fp8_e4m3 \
      --max-running-requests 512 \
      --mem-fraction-static 0.35 \
      --chunked-prefill-size 8192 \
      --disaggregation-mode decode \
      --disaggregation-transfer-backend nixl \
      --page-size 1 \
      --dist-init-addr node-1:20001 \
      --nnodes 2 \
      --node-rank 1
    ;;
  *) echo "NODE_RANK must be 0..1" >&2; exit 2 ;;
esac
