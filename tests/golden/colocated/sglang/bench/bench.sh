#!/usr/bin/env bash
# layoutopt benchmark; engine: sglang 0.5.23
# Replays the plan's traffic (6 req/s Poisson, input mean 2000 / p90 2000 tokens, output mean 400 / p90 400) through the router, then compares with the prediction:
#   layoutopt check-bench plan.json bench/result-<router>.json (.jsonl for SGLang)
# ROUTER_HOST: where the router listens (default localhost; in Kubernetes, port-forward svc/<router>).
set -euo pipefail
ROUTER_HOST="${ROUTER_HOST:-localhost}"
cd "$(dirname "$0")"
# router: 100% of the planned traffic
python3 -m sglang.benchmark.serving \
  --backend sglang \
  --base-url "http://${ROUTER_HOST}:30000" \
  --model Qwen/Qwen3-32B-FP8 \
  --dataset-name random \
  --random-input-len 2000 \
  --random-output-len 400 \
  --random-range-ratio 1 \
  --request-rate 6 \
  --num-prompts 1800 \
  --seed 0 \
  --output-file result-router.jsonl \
  --output-details \
  --goodput ttft:1000 tpot:40
