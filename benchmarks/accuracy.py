"""Performance-model accuracy against measured serving latencies (H100 SXM, three engines).

Replays every row of the measurement CSV through layoutopt's closed-loop estimate and prints, per
engine and mode: rows predicted, rows not supported (with reasons), median and mean absolute %
error of TTFT and TPOT, share within 20 %, and median signed error. Disaggregated rows whose worker
counts the CSV leaves blank replay a guessed one prefill and one decode worker; groups holding
such rows also print the figures over the rows whose deployment is fully described.

    python benchmarks/accuracy.py [path/to/h100_sxm.csv] [--engine vllm] [--json]

Targets: >= 90 % of rows supported, TPOT MdAPE <= 15 %, TTFT MdAPE <= 25 %.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from layoutopt.perf_model.fit import error_summary, load_cases, predict_all  # noqa: E402

DEFAULT_CSV = REPO / ".." / "shared" / "reference" / "measurements" / "h100_sxm.csv"


def evaluate(csv_path: Path, engine: str | None = None) -> dict:
    """Per (engine, mode) error statistics and unsupported-row reasons."""
    cases, unsupported = load_cases(csv_path)
    if engine:
        cases = [c for c in cases if c.engine == engine]
        unsupported = [u for u in unsupported if u[1] == engine]
    ttft, tpot, reasons = predict_all(cases)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        groups[(case.engine, case.mode)].append(i)
    skipped: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for _, eng, mode, reason in unsupported:
        skipped[(eng, mode)][reason] += 1
    for i, reason in enumerate(reasons):
        if reason:
            skipped[(cases[i].engine, cases[i].mode)][reason] += 1
    report = {}
    keys = sorted(set(groups) | set(skipped))
    all_idx = np.arange(len(cases))
    for key in keys + [("all", "all")]:
        idx = np.array(groups.get(key, []), dtype=int) if key != ("all", "all") else all_idx
        meas_ttft = np.array([cases[i].ttft_ms for i in idx])
        meas_tpot = np.array([cases[i].tpot_ms for i in idx])
        skip = skipped.get(key, Counter()) if key != ("all", "all") else sum(skipped.values(), Counter())
        predicted = int(np.isfinite(ttft[idx]).sum()) if len(idx) else 0
        report["/".join(key)] = {
            "rows": len(idx) + sum(1 for u in unsupported if key == ("all", "all") or (u[1], u[2]) == key),
            "predicted": predicted, "not_supported": dict(skip),
            "ttft": error_summary(ttft[idx], meas_ttft) if len(idx) else {},
            "tpot": error_summary(tpot[idx], meas_tpot) if len(idx) else {},
        }
        assumed = np.array([cases[i].worker_counts_assumed for i in idx], dtype=bool)
        if assumed.any():
            known = idx[~assumed]
            report["/".join(key)]["described"] = {
                "rows": len(known), "guessed_worker_counts": int(assumed.sum()),
                "ttft": error_summary(ttft[known], meas_ttft[~assumed]) if len(known) else {},
                "tpot": error_summary(tpot[known], meas_tpot[~assumed]) if len(known) else {},
            }
    return report


def render(report: dict) -> str:
    lines = [f"{'engine/mode':<16}{'rows':>6}{'pred':>6}  {'TTFT MdAPE':>10}{'MAPE':>8}{'<=20%':>7}{'signed':>8}"
             f"  {'TPOT MdAPE':>10}{'MAPE':>8}{'<=20%':>7}{'signed':>8}"]
    for key, r in report.items():
        t, p = r["ttft"], r["tpot"]

        def cols(s: dict) -> str:
            if not s or not s.get("rows"):
                return f"{'-':>10}{'-':>8}{'-':>7}{'-':>8}"
            return f"{s['mdape']:>9.1f}%{s['mape']:>7.0f}%{s['within_20']:>6.0f}%{s['median_signed']:>+7.1f}%"

        lines.append(f"{key:<16}{r['rows']:>6}{r['predicted']:>6}  {cols(t)}  {cols(p)}")
        if "described" in r:
            d = r["described"]
            lines.append(f"{'  described':<16}{d['rows']:>6}{'':>6}  {cols(d['ttft'])}  {cols(d['tpot'])}")
            lines.append(f"{'':<18}({d['guessed_worker_counts']} rows without worker counts replay 1 prefill + "
                         "1 decode worker; 'described' leaves them out)")
        for reason, count in sorted(r["not_supported"].items(), key=lambda kv: -kv[1]):
            lines.append(f"{'':<18}not supported x{count}: {reason}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(DEFAULT_CSV), help="measurement CSV")
    parser.add_argument("--engine", help="only this engine (vllm, sglang, trtllm)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    if not Path(args.csv).is_file():
        parser.error(f"measurement CSV not found: {args.csv} (pass its path as the first argument)")
    report = evaluate(Path(args.csv), args.engine)
    print(json.dumps(report, indent=2) if args.json else render(report))


if __name__ == "__main__":
    main()
