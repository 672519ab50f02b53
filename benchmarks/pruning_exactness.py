"""Dominance pruning at full scale: the pruned candidate table equals evaluating every proposal.

    python benchmarks/pruning_exactness.py [--model deepseek-v3] [--usd-per-hour 400]

Builds the candidate table of ``--model`` over every priced GPU type of the catalog under a dollar
cap twice: with the capacity-bound pruning the optimizer uses (``evaluation.pruned_capacities``:
cheap and tight bounds, full evaluation only where a bound could survive dominance) and with a full
evaluation of every proposal followed by the same dominance pruning. Prints both wall times and
whether the candidates, their capacities, the incompatible pairs and the drops after evaluation
agree (exit 1 when they do not). ``tests/test_capacity_bound.py`` checks the same on small tables.

The drops after evaluation are compared in total (dominated, capacity at SLO, latency floor): a
proposal that a bound proves dominated is not evaluated, so one that would also have missed the
SLO at every load could be counted as dominated rather than under the SLO's reason (the bounds
check the TTFT at the lowest load against the service alone, without its waits). Both reasons
would be true of it. The per-reason counts are printed where they differ.
"""

from __future__ import annotations

import argparse
import sys
import time

from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer import enumeration
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

# The filters that read a proposal's evaluation (or its bound): the proposals they drop are
# compared in total.
AFTER_EVALUATION = ("dominated", "capacity at SLO", "latency floor")


def _evaluate_all(model, workload, slo, engine, headroom, jobs, shapes, groups, dominates, eligible, workers=None):
    return enumeration.capacities(model, workload, slo, engine, headroom, jobs, workers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="deepseek-v3")
    parser.add_argument("--usd-per-hour", type=float, default=400.0)
    args = parser.parse_args()
    gpus = [g for g in load_catalog().gpus if g.price is not None]
    kwargs = dict(gpu_limits={}, max_usd_per_hour=args.usd_per_hour, min_rate_rps=None, pool_capacities=False)
    workload, slo = preset_workload("chat"), SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
    started = time.perf_counter()
    pruned = build_candidate_table(get_model(args.model), gpus, workload, slo, **kwargs)
    pruned_s = time.perf_counter() - started
    original = enumeration.pruned_capacities
    enumeration.pruned_capacities = _evaluate_all
    try:
        started = time.perf_counter()
        full = build_candidate_table(get_model(args.model), gpus, workload, slo, **kwargs)
        full_s = time.perf_counter() - started
    finally:
        enumeration.pruned_capacities = original
    after_pruned, after_full = ({name: table.dropped_by(name) for name in AFTER_EVALUATION} for table in (pruned, full))
    checks = {
        "candidates": [c.name for c in pruned.candidates] == [c.name for c in full.candidates],
        "capacities": [c.capacity_rps for c in pruned.candidates] == [c.capacity_rps for c in full.candidates],
        "pairs": pruned.incompatible_pairs == full.incompatible_pairs,
        "drops after evaluation": sum(after_pruned.values()) == sum(after_full.values()),
        "drops before evaluation": [(f.name, f.num_dropped) for f in pruned.filters if f.name not in AFTER_EVALUATION]
        == [(f.name, f.num_dropped) for f in full.filters if f.name not in AFTER_EVALUATION],
    }
    print(f"{args.model}, ${args.usd_per_hour:g}/h over {len(gpus)} GPU types: {pruned.num_considered} proposals, "
          f"{len(pruned.candidates)} candidates, {pruned.dropped_by('dominated')} dominated")
    print(f"pruned table {pruned_s:.1f} s, full evaluation {full_s:.1f} s; "
          + ", ".join(f"{name} {'equal' if ok else 'DIFFER'}" for name, ok in checks.items()))
    if after_pruned != after_full:
        print(f"drops after evaluation by reason: pruned {after_pruned}, full {after_full}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
