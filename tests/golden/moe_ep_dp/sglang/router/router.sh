#!/usr/bin/env bash
# layoutopt router for 1 front door(s); engine: sglang 0.5.23
# router: sglang-router 0.3.2 (pip install sglang-router==0.3.2); start it after the instances.
# router: prefill -> decode (KV over NIXL) over 2 instances on port 30000; 100% of the planned traffic
# node names are the standard nodes of a plain budget, not your hosts: run each script on a host of that shape and name (or plan with --cluster, whose nodes are real); the URLs below name them
set -euo pipefail
exec python3 -m sglang_router.launch_router \
  --host 0.0.0.0 \
  --port 30000 \
  --pd-disaggregation \
  --prefill http://node-0:8000 8998 \
  --decode http://node-1:8001
