"""Twin measurements: rows the performance model cannot tell apart, measured differently.

Two rows are twins when everything the model reads is the same: GPU, engine, mode, the model's
architecture (DeepSeek-R1 and DeepSeek-V3 share one), the layouts, worker counts, ISL, OSL and
concurrency. Whatever separates their measured latencies (engine build, launch flags, the day of
the run) is outside the model, so no set of constants predicts both: the spread of twins is a floor
under the error any one prediction per twin group reaches.

    python benchmarks/twin_rows.py [CSV ...] [--metric tpot|ttft] [--top 15] [--min-spread 0.2]

Prints, per GPU and engine, the twin groups whose rows differ (a row repeated with the same
latencies is one measurement, not a twin), the median spread (largest / smallest - 1), and the
median absolute % error the best single prediction per group (the geometric mean of its rows)
leaves on them; then the most divergent groups with each row's build and date.
Without CSVs: ``reference/measurements/h100_sxm.csv`` and ``b200_sxm.csv``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from accuracy import DEFAULT_CSVS  # noqa: E402

# ModelSpec fields that name or cite a model rather than describe its architecture.
_NAMING_FIELDS = frozenset({"name", "hf_id", "source", "user_checkpoints"})


def architecture_key(model) -> tuple:
    """The fields of a ModelSpec the performance model reads, without its name and provenance."""
    return tuple(sorted((k, repr(v)) for k, v in model.model_dump().items() if k not in _NAMING_FIELDS))


def twin_key(case, model) -> tuple:
    """Everything of a case the model's prediction depends on."""
    return (case.gpu, case.engine, case.mode, architecture_key(model), case.layout, case.prefill_layout,
            case.prefill_instances, case.decode_layout, case.decode_instances, case.decode_batch, case.isl,
            case.osl, case.concurrency, case.step_token_budget)


def twin_groups(cases, model_of, metric: str = "tpot") -> list[list]:
    """Groups of at least two distinct measurements of the same twin key (``model_of(model_id)`` gives
    the ModelSpec); rows repeating another row's TTFT and TPOT count once."""
    groups: dict[tuple, dict[tuple, object]] = defaultdict(dict)
    for case in cases:
        measurement = (round(case.ttft_ms, 6), round(case.tpot_ms, 6))
        groups[twin_key(case, model_of(case.model_id))].setdefault(measurement, case)
    value = _metric(metric)
    out = []
    for rows in groups.values():
        distinct = list(rows.values())
        if len(distinct) > 1 and len({value(c) for c in distinct}) > 1:
            out.append(sorted(distinct, key=value))
    return out


def _metric(metric: str):
    if metric not in ("tpot", "ttft"):
        raise ValueError(f"metric must be 'tpot' or 'ttft', got {metric!r}")
    return (lambda c: c.tpot_ms) if metric == "tpot" else (lambda c: c.ttft_ms)


def spread(values) -> float:
    """Largest / smallest - 1 of positive values."""
    return max(values) / min(values) - 1.0


def floor_errors(values) -> list[float]:
    """Absolute % errors of the geometric mean of ``values`` against each of them: what the best
    single prediction for the group leaves (it minimizes the largest log error)."""
    centre = math.exp(float(np.mean(np.log(values))))
    return [abs(centre / v - 1.0) * 100.0 for v in values]


def summarize(groups, metric: str = "tpot") -> dict[tuple[str, str], dict]:
    """Per (GPU, engine): twin groups, rows in them, median spread (%) and the median floor error (%)."""
    value = _metric(metric)
    by: dict[tuple[str, str], list] = defaultdict(list)
    for group in groups:
        by[(group[0].gpu, group[0].engine)].append(group)
    out = {}
    for key, items in sorted(by.items()):
        values = [[value(c) for c in g] for g in items]
        errors = [e for v in values for e in floor_errors(v)]
        out[key] = {"groups": len(items), "rows": len(errors),
                    "median_spread_pct": float(np.median([spread(v) for v in values]) * 100.0),
                    "median_floor_ape_pct": float(np.median(errors))}
    return out


def row_facts(paths) -> dict[str, tuple[str, str]]:
    """Row id -> (engine build, measured date) as the CSVs write them ("?" where empty)."""
    out = {}
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                out[row["id"]] = ((row.get("backend_version") or "").strip() or "?",
                                  (row.get("measured_date") or "").strip() or "?")
    return out


def main(argv: list[str] | None = None) -> int:
    from layoutopt.perf_model.fit import _model, load_cases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="*", type=Path)
    parser.add_argument("--metric", default="tpot", choices=("tpot", "ttft"))
    parser.add_argument("--top", type=int, default=15, help="most divergent groups to list")
    parser.add_argument("--min-spread", type=float, default=0.2, help="list groups spread at least this much")
    args = parser.parse_args(argv)
    paths = args.csv or DEFAULT_CSVS
    cases = []
    for path in paths:
        cases += [c for c in load_cases(path)[0] if not c.worker_counts_assumed]
    groups = twin_groups(cases, _model, args.metric)
    value = _metric(args.metric)
    print(f"twin {args.metric.upper()} measurements (same GPU, engine, mode, architecture, layouts, lengths, "
          "concurrency)")
    print(f"{'gpu/engine':<20} {'groups':>6} {'rows':>5} {'median spread':>14} {'floor MdAPE':>12}")
    for (gpu, engine), s in summarize(groups, args.metric).items():
        print(f"{gpu + '/' + engine:<20} {s['groups']:>6} {s['rows']:>5} {s['median_spread_pct']:>13.1f}% "
              f"{s['median_floor_ape_pct']:>11.1f}%")
    facts = row_facts(paths)
    wide = sorted((g for g in groups if spread([value(c) for c in g]) >= args.min_spread),
                  key=lambda g: -spread([value(c) for c in g]))[: args.top]
    if wide:
        print(f"\nmost divergent twins (spread >= {args.min_spread:.0%}): "
              f"{args.metric.upper()} ms, model, build, date")
    for group in wide:
        first = group[0]
        layout = first.layout or first.decode_layout
        print(f"{first.gpu}/{first.engine}/{first.mode} tp{layout.tp_size} dp{layout.dp_size} ep{layout.ep_size} "
              f"{layout.weight_precision} {first.isl}/{first.osl} N{first.concurrency:g}: "
              f"spread {spread([value(c) for c in group]):.0%}")
        for case in group:
            build, date = facts.get(case.row_id, ("?", "?"))
            print(f"    {value(case):9.2f}  {case.model_id:<28} {build:<16} {date}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
