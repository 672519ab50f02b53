"""Rule rounds on fragmented clusters: capping a refused layout against dropping it, for a real model.

    python benchmarks/rule_rounds_caps.py [--model llama-3.1-70b] [--clusters 40] [--seed 7] [--max-free 7]

On pseudo-random fragmented racks of HGX H100 servers (4 to 6 servers, 1 to ``--max-free`` free
GPUs each, fixed seed), ``solve`` with SGLang (whose node-split rule wants the same GPUs on every node of an
instance) for max-goodput and goodput-per-dollar, once as it runs (``optimizer.rule_rounds`` caps a
refused layout at the instances legal splits hold) and once with the former behaviour (the layout
dropped: ``keep_legal_instances=False``). Prints each cluster where placement refused a split, with
both plans' goodput, cost and requests per dollar, then how often capping won, tied or lost.
Exits non-zero when capping loses anywhere (beyond the solver's tolerance).
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_placement_node_rule import cluster_with_free  # noqa: E402

from layoutopt import api  # noqa: E402
from layoutopt.optimizer import rule_rounds  # noqa: E402
from layoutopt.optimizer import solve as solve_module  # noqa: E402

TOLERANCE = 0.02  # the solver's default tolerance: plans within it are ties


def solve(model: str, cluster, objective: str, keep: bool):
    original = rule_rounds.replan_around_rule
    solve_module.replan_around_rule = functools.partial(original, keep_legal_instances=keep)
    try:
        return api.solve(model, cluster=cluster, engine="sglang", isl=2000, osl=200, objective=objective)
    finally:
        solve_module.replan_around_rule = original


def score(plan, objective: str) -> float:
    if not plan.pools:
        return 0.0
    return plan.totals.goodput_rps if objective == "max-goodput" else plan.totals.requests_per_usd


def describe(plan) -> str:
    if not plan.pools:
        return plan.status
    pools = " + ".join(f"{p.role[:4]} {p.layout.short_name()} x{p.instances}" for p in plan.pools)
    t = plan.totals
    return f"{t.goodput_rps:6.2f} req/s ${t.cost_usd_per_hour:6.2f}/h {t.requests_per_usd:6.0f} req/$  {pools}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--clusters", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-free", type=int, default=7, help="most free GPUs on one server (1-8)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp())
    seen: set[tuple[int, ...]] = set()
    tally = {"won": 0, "tied": 0, "lost": 0}
    start = time.perf_counter()
    while len(seen) < args.clusters:
        free = tuple(sorted((rng.randint(1, args.max_free) for _ in range(rng.randint(4, 6))), reverse=True))
        if free in seen:
            continue
        seen.add(free)
        cluster = cluster_with_free(folder, list(free))
        for objective in ("max-goodput", "goodput-per-dollar"):
            capped = solve(args.model, cluster, objective, True)
            if not any("node-split rule" in n for n in capped.explanation.notes) and capped.pools:
                continue  # the first plan placed: no rounds
            dropped = solve(args.model, cluster, objective, False)
            a, b = score(capped, objective), score(dropped, objective)
            verdict = "won" if a > b * (1 + TOLERANCE) else "lost" if a < b * (1 - TOLERANCE) else "tied"
            tally[verdict] += 1
            print(f"{'+'.join(map(str, free)):<16} {objective:<19} {verdict:<5} capped {describe(capped)}")
            print(f"{'':<16} {'':<19} {'':<5} dropped {describe(dropped)}", flush=True)
    refused = sum(tally.values())
    print(f"{args.model}, {len(seen)} clusters (1-{args.max_free} free GPUs per server) x 2 objectives: {refused} with a refused split; capping won "
          f"{tally['won']}, tied {tally['tied']}, lost {tally['lost']} ({time.perf_counter() - start:.0f} s)")
    return 1 if tally["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
