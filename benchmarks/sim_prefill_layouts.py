"""Prefill pools with pipeline and attention-DP layouts: the analytic model against the simulator.

    python benchmarks/sim_prefill_layouts.py [--requests 8000] [--seeds 2] [--only TEXT]

Each scenario is one disaggregated deployment whose prefill instance is deep-PP or attention-DP
and whose decode pool is sized far beyond the rate (so the prefill side decides TTFT). The
prefill pool's --max-num-seqs is the one ``solve`` writes (``instance_capacity(...)
.max_batch_size``: prompts per step x the pp steps in flight). At 50 %, 75 % and 95 % of the
analytic capacity (the highest rate at which ``estimate`` meets p90 TTFT) it prints the analytic
and simulated p90 TTFT and the simulated prefill queue growth; a scenario agrees when the p90s are
within 15 % (the tolerance of ``benchmarks/sim_vs_analytic.py``) and no queue grows.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.capacity import instance_capacity
from layoutopt.perf_model.estimate import estimate
from layoutopt.plan import Explanation, Layout, Plan, Pool, SolverInfo
from layoutopt.simulator.perf_tables import kv_link
from layoutopt.simulator.run import simulate
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

GPU = "H100-SXM"
LOADS = (0.5, 0.75, 0.95)
REL_TOLERANCE = 0.15
DECODE_MAX_NUM_SEQS = 512
CHAT = Workload(name="chat", input_tokens={"kind": "lognormal", "mean": 1000, "p90": 2000},
                output_tokens={"kind": "lognormal", "mean": 100, "p90": 200})
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50}, attainment=0.9)
# (model, prefill layout, decode layout, decode instances)
SCENARIOS = [
    ("qwen3-32b", Layout(tp_size=1, weight_precision="fp8"), Layout(tp_size=1, weight_precision="fp8"), 16),
    ("qwen3-32b", Layout(tp_size=1, pp_size=2, weight_precision="fp8"), Layout(tp_size=1, weight_precision="fp8"), 16),
    ("qwen3-32b", Layout(tp_size=1, pp_size=8, weight_precision="fp8"), Layout(tp_size=1, weight_precision="fp8"), 32),
    ("llama-3.1-70b", Layout(tp_size=2, pp_size=4, weight_precision="fp8"),
     Layout(tp_size=2, weight_precision="fp8"), 16),
    ("qwen3-30b-a3b", Layout(tp_size=1, weight_precision="fp8"), Layout(tp_size=1, dp_size=2, weight_precision="fp8"), 8),
    ("qwen3-30b-a3b", Layout(tp_size=1, ep_size=4, dp_size=4, weight_precision="fp8"),
     Layout(tp_size=1, dp_size=2, weight_precision="fp8"), 8),
    ("qwen3-30b-a3b", Layout(tp_size=1, ep_size=2, dp_size=2, weight_precision="fp8"),
     Layout(tp_size=1, dp_size=2, weight_precision="fp8"), 8),
]


def _pool(role: str, layout: Layout, instances: int, max_batch: int) -> Pool:
    return Pool(role=role, gpu=GPU, instances=instances, gpus_per_instance=layout.gpus_per_instance,
                tp_size=layout.tp_size, pp_size=layout.pp_size, ep_size=layout.ep_size, dp_size=layout.dp_size,
                dcp_size=layout.dcp_size, pcp_size=layout.pcp_size, precision=layout.weight_precision,
                kv_precision=layout.kv_precision, max_batch_size=max_batch, capacity_rps=1.0,
                cost_usd_per_hour=1.0)


def prefill_max_num_seqs(model: str, layout: Layout) -> int:
    """The prefill pool's batch limit as ``solve`` writes it."""
    return instance_capacity(get_model(model), get_gpu(GPU), layout, "prefill", CHAT, SLO_CHAT).max_batch_size


def plan_of(model: str, prefill: Layout, decode: Layout, num_decode: int) -> Plan:
    pools = [_pool("prefill", prefill, 1, prefill_max_num_seqs(model, prefill)),
             _pool("decode", decode, num_decode, DECODE_MAX_NUM_SEQS)]
    return Plan(status="feasible", objective="goodput-per-dollar", mode="disaggregated", model=model, engine="vllm",
                workload={"workload": CHAT.model_dump(mode="json"), "slo": SLO_CHAT.model_dump(mode="json")},
                pools=pools, totals=None, latency=None,
                solver=SolverInfo(status="feasible", wall_time_s=0.0, objective_value=None, best_bound=None,
                                  gap=None, num_candidates=1),
                explanation=Explanation(binding_constraints=[], notes=[]))


def analytic_ttft_p90_ms(model: str, prefill: Layout, decode: Layout, num_decode: int, rate_rps: float) -> float:
    gpu = get_gpu(GPU)
    e = estimate(model, GPU, workload=CHAT, rate=rate_rps, prefill_layout=prefill, decode_layout=decode,
                 decode_instances=num_decode, max_batch_size=DECODE_MAX_NUM_SEQS,
                 kv_link=kv_link([(gpu, prefill)], gpu, decode))
    return e.ttft_ms.p90 if e.stable else math.inf


def analytic_capacity_rps(model: str, prefill: Layout, decode: Layout, num_decode: int) -> float:
    """Highest rate at which the analytic p90 TTFT meets the SLO (bisection in log rate)."""
    target = SLO_CHAT.strictest_ttft[1]

    def meets(rate: float) -> bool:
        return analytic_ttft_p90_ms(model, prefill, decode, num_decode, rate) <= target

    low, high = 1e-2, 1.0
    while meets(high) and high < 1e5:
        low, high = high, high * 2.0
    for _ in range(25):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    header = f"{'prefill instance':34} {'seqs':>4} {'load':>4} {'rate':>7} | {'TTFT90 an':>9} {'sim':>8} {'err':>6} | {'queue/s':>7} | ok"
    print(header)
    print("-" * len(header))
    agree = total = 0
    for model, prefill, decode, num_decode in SCENARIOS:
        name = f"{model} {prefill.short_name()}"
        if args.only not in name:
            continue
        capacity = analytic_capacity_rps(model, prefill, decode, num_decode)
        plan = plan_of(model, prefill, decode, num_decode)
        for load in LOADS:
            rate = capacity * load
            analytic = analytic_ttft_p90_ms(model, prefill, decode, num_decode, rate)
            runs = [simulate(plan, rate_rps=rate, num_requests=args.requests, seed=k) for k in range(args.seeds)]
            sim = float(np.mean([r.ttft_ms.p90 for r in runs]))
            growth = max(r.pools[0].queue_growth_per_s for r in runs)
            err = (analytic - sim) / sim
            ok = abs(err) <= REL_TOLERANCE and growth < 1.0
            agree, total = agree + ok, total + 1
            print(f"{name:34} {plan.pools[0].max_batch_size:>4} {load:>4.2f} {rate:>7.2f} | {analytic:>9.0f} "
                  f"{sim:>8.0f} {err:>+6.0%} | {growth:>7.2f} | {'yes' if ok else 'NO'}")
    print(f"\nagree: {agree} of {total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
