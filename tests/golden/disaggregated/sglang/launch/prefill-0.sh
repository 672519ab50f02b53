#!/usr/bin/env bash
# layoutopt launch script for instance prefill-0
# engine: sglang 0.5.3 (flags checked against layoutopt/report/data/sglang_0.5.3_flags.txt)
# model: meta-llama/Llama-3.1-70B (plan model: llama-3.1-70b)
# pool: prefill-h100-sxm-tp2-pcp2-fp8-kvbf16 (role prefill, H100-SXM, tp2-pcp2-fp8-kvbf16, 4 GPUs per instance)
# runs on: gpu-node-01 (GPUs 0,1,2,3); serves http on port 8000
# disaggregated serving: a router that sends each request to a prefill and then a decode instance (KV moves over NIXL) is deployed separately
set -euo pipefail
# NOTE: prefill context parallel pcp_size=2 is not available in SGLang 0.5.3: the engine uses 2 of the instance's 4 GPUs and prefill is slower than planned; re-plan without PCP or use --engine vllm
export CUDA_VISIBLE_DEVICES=0,1,2,3
exec python3 -m sglang.launch_server \
  --model-path meta-llama/Llama-3.1-70B \
  --port 8000 \
  --tp-size 2 \
  --quantization fp8 \
  --max-running-requests 16 \
  --disaggregation-mode prefill \
  --disaggregation-transfer-backend nixl
