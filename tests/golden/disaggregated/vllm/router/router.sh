#!/usr/bin/env bash
# layoutopt router for 1 front door(s); engine: vllm 0.33.0
# router: vllm-router 0.1.17 (pip install vllm-router==0.1.17); start it after the instances.
# router: prefill -> decode (KV over NIXL) over 3 instances on port 30000; 100% of the planned traffic
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real); the URLs below name them
set -euo pipefail
exec vllm-router \
  --host 0.0.0.0 \
  --port 30000 \
  --vllm-pd-disaggregation \
  --prefill http://gpu-node-01:8000 \
  --prefill http://gpu-node-01:8001 \
  --decode http://gpu-node-02:8002
