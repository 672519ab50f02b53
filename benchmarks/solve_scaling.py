"""Solve-time scaling of the CP-SAT layout optimizer.

Prints, for 8 to 2048 GPUs, one and three GPU types, a dense and a MoE model: the enumeration
time (candidates from the performance model), the solver's wall time, status, gap, candidates
and Dinkelbach iterations, for the default goodput-per-dollar objective on one worker.

    python benchmarks/solve_scaling.py [--time-limit 30] [--sizes 8,32,128,512,2048]

Targets (issue 4): 32 GPUs of one type optimal in < 2 s; 2048 GPUs over three types in < 30 s
with a gap <= 1 %.
"""

from __future__ import annotations

import argparse
import time

from layoutopt.optimizer.solve import solve
from layoutopt.workloads.slo import SLO

MODELS = {"dense": "qwen3-32b", "moe": "qwen3.5-35b-a3b"}
GPU_SETS = {"1 type": ("H100",), "3 types": ("H100", "H200", "B200")}
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})


def budget_text(num_gpus: int, gpu_types: tuple[str, ...]) -> str:
    """Split ``num_gpus`` over the types, the remainder to the first."""
    share, extra = divmod(num_gpus, len(gpu_types))
    counts = [share + (extra if i == 0 else 0) for i in range(len(gpu_types))]
    return "+".join(f"{n}x{gpu}" for n, gpu in zip(counts, gpu_types) if n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--sizes", default="8,32,128,512,2048")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header = (f"{'model':6} {'GPUs':>5} {'types':8} {'enum s':>7} {'solve s':>8} {'status':9} {'gap':>7} "
              f"{'cands':>5} {'iters':>5} {'used':>5} {'req/s':>9} {'req/$':>8}")
    print(header)
    print("-" * len(header))
    for kind, model in MODELS.items():
        for label, gpu_types in GPU_SETS.items():
            for num_gpus in sizes:
                if num_gpus < len(gpu_types) * 8 and len(gpu_types) > 1:
                    continue
                started = time.perf_counter()
                plan = solve(model, budget_text(num_gpus, gpu_types), SLO_CHAT, time_limit_s=args.time_limit)
                total_s = time.perf_counter() - started
                s = plan.solver
                used = plan.totals.gpus if plan.totals else 0
                rate = plan.totals.goodput_rps if plan.totals else 0.0
                per_usd = plan.totals.requests_per_usd if plan.totals else 0.0
                gap = f"{s.gap:.2%}" if s.gap is not None else "-"
                print(f"{kind:6} {num_gpus:>5} {label:8} {total_s - s.wall_time_s:>7.2f} {s.wall_time_s:>8.2f} "
                      f"{s.status:9} {gap:>7} {s.num_candidates:>5} {s.num_iterations:>5} {used:>5} "
                      f"{rate:>9.1f} {per_usd:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
