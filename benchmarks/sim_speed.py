"""Simulator speed: simulated requests per second of wall time on one core (target >= 20,000).

    python benchmarks/sim_speed.py [--requests 50000]

Each scenario is a hand-built plan at about 70 % of its capacity with a chat-like workload; the
step-time tables are built once before timing (they are cached per instance type) and their
build time is printed separately. The simulator is single-threaded, so on an idle core its
wall time equals its CPU time; on a shared machine the wall time also counts other processes,
so the verdict uses the CPU time of this process (both are printed).
"""

from __future__ import annotations

import argparse
import os
import time

# One core: keep numpy's thread pools from spreading the table builds.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from layoutopt.plan import Explanation, Plan, Pool, SolverInfo  # noqa: E402
from layoutopt.simulator.perf_tables import plan_pool_specs  # noqa: E402
from layoutopt.simulator.run import simulate  # noqa: E402
from layoutopt.workloads.slo import SLO  # noqa: E402
from layoutopt.workloads.workload import Workload  # noqa: E402

TARGET_REQUESTS_PER_S = 20_000
CHAT = Workload(input_tokens={"kind": "lognormal", "mean": 1500, "p90": 3000},
                output_tokens={"kind": "lognormal", "mean": 250, "p90": 500})
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50})


def _pool(role: str, instances: int, tp: int) -> Pool:
    return Pool(role=role, gpu="H100-SXM", instances=instances, gpus_per_instance=tp, tp_size=tp, pp_size=1,
                ep_size=1, dp_size=1, dcp_size=1, pcp_size=1, precision="bf16", kv_precision="bf16",
                max_batch_size=256, capacity_rps=1.0, cost_usd_per_hour=1.0)


def _plan(model: str, pools: list[Pool]) -> Plan:
    return Plan(status="feasible", objective="goodput-per-dollar", mode=None, model=model, engine="vllm",
                workload={"workload": CHAT.model_dump(mode="json"), "slo": SLO_CHAT.model_dump(mode="json")},
                pools=pools, totals=None, latency=None,
                solver=SolverInfo(status="feasible", wall_time_s=0.0, objective_value=None, best_bound=None,
                                  gap=None, num_candidates=1),
                explanation=Explanation(binding_constraints=[], notes=[]))


# (name, plan, rate in req/s): about 70 % of what the plan drains.
SCENARIOS = [
    ("qwen3-32b colocated 4 x TP2", _plan("qwen3-32b", [_pool("colocated", 4, 2)]), 14.0),
    ("qwen3-32b 2P2D TP2", _plan("qwen3-32b", [_pool("prefill", 2, 2), _pool("decode", 2, 2)]), 12.0),
    ("qwen3-30b-a3b colocated 8 x TP1", _plan("qwen3-30b-a3b", [_pool("colocated", 8, 1)]), 40.0),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    args = parser.parse_args()
    slowest = float("inf")
    print(f"{'scenario':34} {'requests':>9} {'tables s':>9} {'wall s':>7} {'cpu s':>6} {'req/s wall':>11} "
          f"{'req/s cpu':>10} {'p90 TTFT ms':>12}")
    for name, plan, rate in SCENARIOS:
        start = time.perf_counter()
        plan_pool_specs(plan)  # builds and caches the step-time tables
        tables_s = time.perf_counter() - start
        start, start_cpu = time.perf_counter(), time.process_time()
        result = simulate(plan, rate_rps=rate, num_requests=args.requests, seed=0)
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
        speed = args.requests / cpu_s
        slowest = min(slowest, speed)
        print(f"{name:34} {args.requests:>9,} {tables_s:>9.2f} {wall_s:>7.2f} {cpu_s:>6.2f} "
              f"{args.requests / wall_s:>11,.0f} {speed:>10,.0f} {result.ttft_ms.p90:>12.0f}")
    verdict = "meets" if slowest >= TARGET_REQUESTS_PER_S else "misses"
    print(f"slowest: {slowest:,.0f} simulated requests per second of one core ({verdict} the "
          f"{TARGET_REQUESTS_PER_S:,} target)")
    return 0 if slowest >= TARGET_REQUESTS_PER_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
