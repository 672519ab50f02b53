"""Fit per-engine calibration constants on measured latencies and write them back.

For each engine: fit DEFAULT_PARAMETERS (GEMM/HBM/attention efficiency, step and per-layer
overhead, all-reduce latency, closed-loop cohort constants) with
:func:`layoutopt.perf_model.fit.fit_profile` (``scipy.optimize.least_squares``, soft-L1 loss on
the log ratios of TTFT and TPOT) on all rows but one held-out model and report the held-out error;
then fit on every row of the engine and write the result, with provenance and standard errors,
into ``layoutopt/perf_model/data/engine_profiles.yaml``, the one home of the calibration constants.

    python benchmarks/fit_calibration.py [CSV] [--engine trtllm] [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from accuracy import measurements_dir  # noqa: E402

from layoutopt.perf_model.fit import (  # noqa: E402
    DEFAULT_PARAMETERS,
    error_summary,
    fit_cases,
    fit_profile,
    load_cases,
    predict_all,
)

DATA = REPO / "layoutopt" / "perf_model" / "data"
DEFAULT_CSV = measurements_dir() / "h100_sxm.csv"


def _scores(cases, engine) -> str:
    ttft, tpot, _ = predict_all(cases, engine)
    t = error_summary(ttft, np.array([c.ttft_ms for c in cases]))
    p = error_summary(tpot, np.array([c.tpot_ms for c in cases]))
    return (f"rows {t['rows']}: TTFT MdAPE {t['mdape']:.1f}% (signed {t['median_signed']:+.1f}%), "
            f"TPOT MdAPE {p['mdape']:.1f}% (signed {p['median_signed']:+.1f}%)")


def _held_out_model(cases) -> str | None:
    """The smallest model with >= 10 rows, when at least two models have that many."""
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.model_id] = counts.get(c.model_id, 0) + 1
    big = sorted((n, m) for m, n in counts.items() if n >= 10)
    return big[0][1] if len(big) >= 2 else None


def _replace_block(text: str, engine: str, values: dict[str, float], source: str) -> str:
    """Rewrite ``engine``'s numeric keys and its source in a profiles YAML, keeping everything else."""
    start = re.search(rf"^{re.escape(engine)}:\s*$", text, re.M)
    if start is None:
        raise SystemExit(f"engine {engine} not found in profiles file")
    nxt = re.search(r"^\S", text[start.end():], re.M)
    end = start.end() + (nxt.start() if nxt else len(text) - start.end())
    block = text[start.end():end]
    for key, value in values.items():
        block = re.sub(rf"^(  {key}:).*$", lambda m: f"{m.group(1)} {value:.4g}", block, flags=re.M)
    old = re.search(r"^  source:(.*\n(?:    .*\n)*)", block, re.M)
    previous = " ".join(old.group(1).replace(">-", " ").split()) if old else ""
    # Keep the first-principles provenance of the fields the fit does not move.
    previous = previous.split(_BEFORE, 1)[-1].strip()
    text_source = source + (f" {_BEFORE} {previous}" if previous else "")
    block = re.sub(r"^  source:(?:.*\n)(?:    .*\n)*", lambda _: "  source: >-\n" + _wrap(text_source), block,
                   flags=re.M)
    # One blank line between engines, however often the file is rewritten.
    return re.sub(r"\n{3,}", "\n\n", text[:start.end()] + block + text[end:])


_BEFORE = "Before fitting:"


def _wrap(text: str, width: int = 96) -> str:
    words, lines, line = text.split(), [], "   "
    for word in words:
        if len(line) + len(word) + 1 > width:
            lines.append(line)
            line = "   "
        line += " " + word
    lines.append(line)
    return "\n".join(lines) + "\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(DEFAULT_CSV))
    parser.add_argument("--engine", action="append", help="engines to fit (default: all in the CSV)")
    parser.add_argument("--loss", default="soft_l1", help="least_squares loss (soft_l1, huber, linear, ...)")
    parser.add_argument("--dry-run", action="store_true", help="report only; do not write the profiles")
    args = parser.parse_args()
    if not Path(args.csv).is_file():
        parser.error(f"measurement CSV not found: {args.csv} (pass its path as the first argument)")
    cases, _ = load_cases(Path(args.csv))
    engines = args.engine or sorted({c.engine for c in cases})
    today = datetime.date.today().isoformat()
    for engine in engines:
        every = [c for c in cases if c.engine == engine]
        mine = fit_cases(every)
        print(f"== {engine}: {len(every)} rows, {len(mine)} fitted (each measurement once, none with guessed "
              f"worker counts); before: {_scores(mine, engine)}")
        held = _held_out_model(mine)
        if held:
            train = [c for c in mine if c.model_id != held]
            test = [c for c in mine if c.model_id == held]
            trained = fit_profile(train, engine, DEFAULT_PARAMETERS, loss=args.loss)
            held_scores = _scores(test, trained.profile)
            print(f"   held out {held} ({len(test)} rows): cost {trained.cost:.3f}; held-out {held_scores}")
        result = fit_profile(mine, engine, DEFAULT_PARAMETERS, loss=args.loss)
        print(f"   fitted rows: cost {result.cost:.3f} after {result.num_evaluations} evaluations "
              f"({result.message}); {_scores(mine, result.profile)}")
        print(f"   every row: {_scores(every, result.profile)}")
        print("   fitted: " + ", ".join(f"{k}={v:.4g} +- {result.standard_errors[k]:.2g}"
                                       for k, v in result.values.items()))
        if args.dry_run:
            continue
        provenance = (f"Fitted on {Path(args.csv).name} ({len(mine)} {engine} measurements, agg and disagg; "
                      f"repeated runs once, disagg rows without worker counts left out), {today}, by "
                      f"benchmarks/fit_calibration.py: scipy least_squares, {args.loss} loss on the log ratios of "
                      "TTFT and TPOT over all rows of the engine (one constant set per engine; no per-model terms)"
                      + (f"; held-out model {held}: {held_scores}" if held
                         else "; no held-out model (fewer than two models with >= 10 rows)") + ". Fitted (+- one "
                      "standard error): " + ", ".join(f"{k} {v:.4g} +- {result.standard_errors[k]:.2g}"
                                                      for k, v in sorted(result.values.items())) + ".")
        path = DATA / "engine_profiles.yaml"
        path.write_text(_replace_block(path.read_text(), engine, result.values, provenance))
        print(f"   wrote {', '.join(sorted(result.values))} for {engine}")


if __name__ == "__main__":
    main()
