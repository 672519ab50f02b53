#!/usr/bin/env bash
# layoutopt launch script for instance decode-h100-sxm-tp1-ep16-dp16-fp8-0
# engine: vllm 0.33.0 (flags checked against layoutopt/engines/data/vllm-0.33.0.yaml)
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
    # NOTE: expert parallelism over 16 ranks spans nodes: vLLM's default --all2all-backend allgather_reducescatter all-gathers every DP rank's tokens to all 16 MoE ranks and reduce-scatters the expert outputs back, over the NICs; the plan's numbers cost exactly that. --all2all-backend deepep_low_latency sends each token only to the ranks of its routed experts and may be faster at this size, but it needs DeepEP with NVSHMEM/IBGDA set up on every host (the engines' images build DeepEP; the hosts' RDMA and GPU driver setup is not checked here), so the plan does not count on it
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    export VLLM_NIXL_SIDE_CHANNEL_HOST="${NODE_IP:-node-1}"
    export VLLM_NIXL_SIDE_CHANNEL_PORT=5608
    exec vllm serve Qwen/Qwen3-235B-A22B-FP8 \
      --host 0.0.0.0 \
      --port 8001 \
      --tensor-parallel-size 1 \
      --pipeline-parallel-size 1 \
      --data-parallel-size 16 \
      --enable-expert-parallel \
      --kv-cache-dtype fp8 \
      --max-num-seqs 32 \
      --gpu-memory-utilization 0.92 \
      --max-num-batched-tokens 8192 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
      --data-parallel-size-local 8 \
      --data-parallel-address node-1 \
      --data-parallel-rpc-port 13346
    ;;
  1)  # node-2
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    export VLLM_NIXL_SIDE_CHANNEL_HOST="${NODE_IP:-node-2}"
    export VLLM_NIXL_SIDE_CHANNEL_PORT=5608
    exec vllm serve Qwen/Qwen3-235B-A22B-FP8 \
      --host 0.0.0.0 \
      --port 8001 \
      --tensor-parallel-size 1 \
      --pipeline-parallel-size 1 \
      --data-parallel-size 16 \
      --enable-expert-parallel \
      --kv-cache-dtype fp8 \
      --max-num-seqs 32 \
      --gpu-memory-utilization 0.92 \
      --max-num-batched-tokens 8192 \
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
      --data-parallel-size-local 8 \
      --data-parallel-address node-1 \
      --data-parallel-rpc-port 13346 \
      --headless \
      --data-parallel-start-rank 8
    ;;
  *) echo "NODE_RANK must be 0..1" >&2; exit 2 ;;
esac
