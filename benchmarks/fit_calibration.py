"""Fit per-engine calibration constants on the measured H100 latencies and write them back.

For each engine: fit FIT_PARAMETERS (GEMM/HBM/attention efficiency, step and per-layer overhead,
all-reduce latency, closed-loop cohort constants) on all rows but one held-out model and report the
held-out error; then fit on every row of the engine and write the result, with provenance, into
``layoutopt/perf_model/data/engine_profiles.yaml``, the one home of the calibration constants.

    python benchmarks/fit_calibration.py [path/to/h100_sxm.csv] [--engine trtllm] [--iterations 60] [--dry-run]
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

from layoutopt.perf_model.fit import (  # noqa: E402
    error_summary,
    fit_cases,
    fit_engine,
    load_cases,
    predict_all,
    trial_profile,
)

DATA = REPO / "layoutopt" / "perf_model" / "data"
DEFAULT_CSV = REPO / ".." / "shared" / "reference" / "measurements" / "h100_sxm.csv"


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
    parser.add_argument("--iterations", type=int, default=60, help="Nelder-Mead iterations")
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
            values, value = fit_engine(train, engine, args.iterations)
            held_scores = _scores(test, trial_profile(engine, values))
            print(f"   held out {held} ({len(test)} rows): train loss {value:.3f}; held-out {held_scores}")
        values, value = fit_engine(mine, engine, args.iterations)
        print(f"   fitted rows: loss {value:.3f}; {_scores(mine, trial_profile(engine, values))}")
        print(f"   every row: {_scores(every, trial_profile(engine, values))}")
        if held:
            print(f"   {held} in-sample (fitted with it): {_scores(test, trial_profile(engine, values))}")
        print("   fitted: " + ", ".join(f"{k}={v:.4g}" for k, v in values.items()))
        if args.dry_run:
            continue
        rows = len(mine)
        provenance = (f"Fitted on reference/measurements/h100_sxm.csv ({rows} {engine} measurements, agg and "
                      f"disagg; repeated runs once, disagg rows without worker counts left out), "
                      f"{today}, by benchmarks/fit_calibration.py: Nelder-Mead on the mean absolute log error of "
                      f"TTFT and TPOT over all rows of the engine (one constant set per engine; no per-model terms)"
                      + (f"; held-out model {held}: {held_scores}" if held
                         else "; no held-out model (fewer than two models with >= 10 rows)") + ". Fitted: "
                      + ", ".join(sorted(values)) + ".")
        path = DATA / "engine_profiles.yaml"
        path.write_text(_replace_block(path.read_text(), engine, values, provenance))
        print(f"   wrote {', '.join(sorted(values))} for {engine}")


if __name__ == "__main__":
    main()
