"""Routing by prompt length: what a split saves against none, and what it costs in time.

    python benchmarks/length_routing.py

Per case: the plain min-cost solve (cost, process wall time) and ``solve_length_routed`` over no
split and the p50/p75/p90 thresholds, each with the long-class SLO shifts 0 and 0.1 (chosen threshold, cost, no-split cost, saving, each
threshold's cost, status, solver and process wall time). The no-split option is the one-member
fleet model, so its cost must equal the plain solve's.
"""

from __future__ import annotations

import time

from layoutopt.optimizer.length_routing import solve_length_routed
from layoutopt.optimizer.solve import solve
from layoutopt.workloads.loaders import workload_from_dict
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

MIXED = workload_from_dict({"input_tokens": {"histogram": {"tokens": [1000, 60000], "weights": [3, 1]}},
                            "output_tokens": 300, "name": "mixed-lengths"})
CASES = [
    ("README: llama-3.1-70b, 3:1 1k/60k prompts", "llama-3.1-70b", "32xH100+32xH200", MIXED, 4.0,
     SLO(ttft_ms={"p90": 10000}, tpot_ms={"p90": 50})),
    ("same on H100 only", "llama-3.1-70b", "64xH100", MIXED, 4.0, SLO(ttft_ms={"p90": 10000}, tpot_ms={"p90": 50})),
    ("qwen3-8b chat (a split needs a GPU more)", "qwen3-8b", "8xH100+8xL40S", preset_workload("chat"), 20.0,
     SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 40})),
    ("qwen3-32b rag, TTFT 800 ms (long class alone infeasible)", "qwen3-32b", "64xH100", preset_workload("rag"),
     50.0, SLO(ttft_ms={"p90": 800}, tpot_ms={"p90": 30})),
]


def main() -> None:
    for title, model, budget, workload, rate, slo in CASES:
        start = time.perf_counter()
        plain = solve(model, budget, slo, workload, rate_rps=rate, objective="min-cost", time_limit_s=10)
        plain_s = time.perf_counter() - start
        start = time.perf_counter()
        routed = solve_length_routed(model, budget, slo, workload, rate, time_limit_s=10)
        routed_s = time.perf_counter() - start
        plain_cost = plain.totals.cost_usd_per_hour if plain.totals else None
        print(f"{title}: {model} on {budget} at {rate:g} req/s")
        print(f"  plain solve: {plain.status}, ${plain_cost or 0:,.2f}/h, {plain_s:.1f} s")
        split = "no split" if routed.threshold_tokens is None else f"split at {routed.threshold_tokens:,} tokens"
        saving = "" if routed.saving_fraction is None else f", saving {routed.saving_fraction:.1%}"
        cost = "no plan" if routed.cost_usd_per_hour is None else f"${routed.cost_usd_per_hour:,.2f}/h"
        print(f"  route by length: {routed.status}, {split}, {cost}{saving}; solver {routed.solver.wall_time_s:.2f} s, "
              f"process {routed_s:.1f} s")
        for option in routed.options:
            where = ("no split" if option.threshold_tokens is None else
                     f"at {option.threshold_tokens:,}, long-class SLO shift {option.long_shift_fraction:g}")
            shown = "no plan" if option.cost_usd_per_hour is None else f"${option.cost_usd_per_hour:,.2f}/h"
            print(f"    {where}: {shown} ({option.status})")


if __name__ == "__main__":
    main()
