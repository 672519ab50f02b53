#!/usr/bin/env bash
# layoutopt benchmark; engine: vllm 0.33.0
# Replays the plan's traffic (6 req/s Poisson, input mean 2000 / p90 2000 tokens, output mean 400 / p90 400) through the router, then compares with the prediction:
#   layoutopt check-bench plan.json bench/result-<router>.json (.jsonl for SGLang)
# ROUTER_HOST: where the router listens (default localhost; in Kubernetes, port-forward svc/<router>).
set -euo pipefail
ROUTER_HOST="${ROUTER_HOST:-localhost}"
cd "$(dirname "$0")"
# router: 100% of the planned traffic
vllm bench serve \
  --backend openai \
  --base-url "http://${ROUTER_HOST}:30000" \
  --endpoint /v1/completions \
  --model meta-llama/Llama-3.1-70B \
  --dataset-name random \
  --random-input-len 2000 \
  --random-output-len 400 \
  --random-range-ratio '{"input":0,"output":0}' \
  --ignore-eos \
  --request-rate 6 \
  --num-prompts 1800 \
  --seed 0 \
  --percentile-metrics ttft,tpot,itl,e2el \
  --metric-percentiles 50,90,99 \
  --save-result \
  --save-detailed \
  --result-filename result-router.json \
  --goodput ttft:1000 tpot:40
