"""The seeds' suggested layouts (seeds/000) against layoutopt's plans, both judged by the performance model.

Prints, per seed row: the seed layout's goodput and requests per dollar when its instances fill the
budget (colocated, as the seed deploys it), and layoutopt's goodput-per-dollar plan and max-goodput
plan. The rows are the ones tests/test_optimizer_seeds.py asserts on.

    python benchmarks/seed_layouts.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_optimizer_seeds import SEED_ROWS, seed_baseline  # noqa: E402

from layoutopt.optimizer.solve import solve  # noqa: E402
from layoutopt.workloads.presets import default_workload  # noqa: E402


def describe(plan) -> str:
    parts = []
    for pool in plan.pools:
        parts.append(f"{pool.instances}x {pool.role} {pool.layout.short_name()}")
    return " + ".join(parts)


def main() -> None:
    print(f"{'seed row':34} {'seed req/s':>10} {'seed req/$':>10} {'plan req/s':>10} {'plan req/$':>10} "
          f"{'max req/s':>10}  plan (goodput per dollar)")
    for row_id, model, num_gpus, precision, layouts, workload, slo in SEED_ROWS:
        workload = workload or default_workload()
        seed_rate, seed_per_usd = seed_baseline(model, num_gpus, layouts, workload, slo)
        plan = solve(model, f"{num_gpus}xH100", slo, workload, precision=precision, time_limit_s=10)
        best = solve(model, f"{num_gpus}xH100", slo, workload, precision=precision, objective="max-goodput",
                     time_limit_s=10)
        print(f"{row_id:34} {seed_rate:10.2f} {seed_per_usd:10.0f} {plan.totals.goodput_rps:10.2f} "
              f"{plan.totals.requests_per_usd:10.0f} {best.totals.goodput_rps:10.2f}  {describe(plan)}")


if __name__ == "__main__":
    main()
