"""Placement at scale: 1,024 H100 GPUs (128 HGX nodes in 8 racks) placed in under 30 s.

    python benchmarks/placement_scaling.py [--scale 64] [--time-limit 30]   # 64: 65,536 GPUs, 512 racks

``--scale K`` multiplies the racks and every pool's instance count by K (the issue 13 target:
65,536 GPUs placed in < 3 s). ``--time-limit`` is the placement's CP-SAT budget in deterministic
seconds. Each line also says how every objective was proven: by a lower bound the greedy
placement meets (no search), by CP-SAT search, or not at all (the search did not fit the
budget: status feasible).

Four cases on 8 racks x 16 ``hgx-h100-8`` nodes with 2:1 leaf oversubscription: an empty
cluster, the same with rack spreading, and a fragmented one (a fixed pseudo-random 10% of the GPUs
in use, two nodes down) with and without rack spreading. Where the spread fixes every rack's
share of all pools but one (--scale 64), the rack programs (``placement.rack_dp``) prove the
NVLink-domain objectives; elsewhere the rack LP bound or CP-SAT search (where the model fits the
budget) does, and what neither proves is reported ``feasible`` with its bound. Each places prefill TP2 x 160, decode PP2 x TP4 x 40 and colocated TP8 x 24
(~900 GPUs) with the KV uplink constraint on, checks the result with ``validate_placement`` and
prints wall time (with the process's CPU time, which a loaded shared machine distorts less) and
status. Exits non-zero when a case is not placed, is invalid or takes 30 s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from layoutopt.plan import Explanation, Plan, Pool, SolverInfo
from layoutopt.topology import cluster_from_spec, place, validate_placement
from layoutopt.topology.spec import (
    ClusterSpec,
    NetworkSpec,
    NodeGroupSpec,
    RackSpec,
    UnavailableSpec,
)

NUM_RACKS = 8
NODES_PER_RACK = 16
GPUS_PER_NODE = 8
LIMIT_S = 30.0
SEED = 7
# KV cache of a 4k-token prompt of a 70B-class GQA model in bf16: 4096 x 320 KiB.
KV_BYTES_PER_REQUEST = 4096 * 327_680


def cluster_spec(fragmented: bool, scale: int = 1) -> ClusterSpec:
    racks = [RackSpec(name=f"r{r}", nodes=[NodeGroupSpec(type="hgx-h100-8", count=NODES_PER_RACK)])
             for r in range(NUM_RACKS * scale)]
    unavailable = UnavailableSpec()
    if fragmented:
        rng = random.Random(SEED)
        names = [f"r{r}-n{i}" for r in range(NUM_RACKS * scale) for i in range(NODES_PER_RACK)]
        in_use: dict[str, list[int]] = {}
        for _ in range(NUM_RACKS * scale * NODES_PER_RACK * GPUS_PER_NODE // 10):
            node = rng.choice(names)
            in_use.setdefault(node, [])
            index = rng.randrange(GPUS_PER_NODE)
            if index not in in_use[node]:
                in_use[node].append(index)
        unavailable = UnavailableSpec(nodes_down=[names[5], names[77]], gpus_in_use=in_use)
    return ClusterSpec(name="bench-1024", network=NetworkSpec(oversubscription=2.0), racks=racks,
                       unavailable=unavailable)


def pool(role: str, instances: int, tp: int, pp: int, capacity_rps: float) -> Pool:
    return Pool(role=role, gpu="H100-SXM", instances=instances, gpus_per_instance=tp * pp, tp_size=tp,
                pp_size=pp, ep_size=1, dp_size=1, dcp_size=1, pcp_size=1, precision="bf16",
                kv_precision="bf16", max_batch_size=64, capacity_rps=capacity_rps, cost_usd_per_hour=0.0)


def bench_plan(scale: int = 1) -> Plan:
    pools = [pool("prefill", 160 * scale, 2, 1, 1.0), pool("decode", 40 * scale, 4, 2, 4.0),
             pool("colocated", 24 * scale, 8, 1, 2.0)]
    return Plan(status="optimal", objective="goodput-per-dollar", mode="mixed", model="bench", engine="vllm",
                workload={}, pools=pools, totals=None, latency=None,
                solver=SolverInfo(status="optimal", wall_time_s=0.0, objective_value=None, best_bound=None,
                                  gap=None, num_candidates=0),
                explanation=Explanation(binding_constraints=[], notes=[]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1, help="racks and instances x this factor")
    parser.add_argument("--time-limit", type=float, default=LIMIT_S, help="CP-SAT deterministic seconds")
    args = parser.parse_args()
    failures = 0
    plan = bench_plan(args.scale)
    for label, fragmented, spread in (("empty", False, False), ("empty, spread racks", False, True),
                                      ("fragmented, spread racks", True, True), ("fragmented", True, False)):
        built_s = time.perf_counter()
        cluster = cluster_from_spec(cluster_spec(fragmented, args.scale))
        print(f"{label:26s} cluster built in {time.perf_counter() - built_s:.2f} s")
        start_s, start_cpu_s = time.perf_counter(), time.process_time()
        result = place(plan, cluster, spread_racks=spread, time_limit_s=args.time_limit,
                       kv_bytes_per_request=KV_BYTES_PER_REQUEST)
        elapsed_s, cpu_s = time.perf_counter() - start_s, time.process_time() - start_cpu_s
        violations = validate_placement(result.plan, cluster, KV_BYTES_PER_REQUEST) if result.placed else []
        cross = sum(r.egress_gb_per_s for r in result.rack_kv_traffic)
        print(f"{label:26s} {cluster.num_gpus} GPUs ({len(cluster.free_gpus())} free), "
              f"{sum(p.instances for p in plan.pools)} instances: {result.status} in {elapsed_s:.2f} s "
              f"({cpu_s:.2f} CPU s), "
              f"{len(violations)} violations, cross-rack KV {cross:.1f} GB/s")
        proofs = ", ".join(f"{o.name} {o.value} ({o.proven_by}, bound {o.lower_bound})" for o in result.objectives)
        print(f"  objectives: {proofs}")
        for reason in result.reasons:
            print(f"  reason: {reason}")
        failures += (not result.placed) or bool(violations) or elapsed_s >= LIMIT_S
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
