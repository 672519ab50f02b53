"""Few-shot calibration: ``layoutopt calibrate`` on 10 % of one GPU's measured rows, error on the other 90 %.

Takes the rows of one engine on one GPU from ``reference/measurements`` (those a fit uses: each
measurement once, no guessed disaggregated worker counts), draws a fixed-seed 10 % sample, writes
it as a measurement CSV, runs ``layoutopt calibrate`` on it, and predicts the held-out 90 % with
the built-in profile and with the fitted one. Prints MdAPE, median signed error (bias) and the
share within 20 % of TTFT and TPOT, per mode and overall.

    python benchmarks/calibrate_few_shot.py [--gpu B200] [--engine vllm] [--fraction 0.1] [--seed 0]
        [--parameters memory_efficiency,step_overhead_ms,gemm_efficiency,request_overhead_ms] [--folds 5]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from accuracy import measurements_dir  # noqa: E402

from layoutopt.calibrate.fitting import error_summary  # noqa: E402
from layoutopt.calibrate.profile_file import load_profile  # noqa: E402
from layoutopt.cli import cli  # noqa: E402
from layoutopt.cli.common import run_guarded  # noqa: E402
from layoutopt.perf_model.fit import fit_cases, load_cases, log_residuals  # noqa: E402

FILES = {"H100": "h100_sxm.csv", "B200": "b200_sxm.csv"}


def _print_errors(label: str, residuals: np.ndarray, modes: list[str]) -> None:
    for mode in ("agg", "disagg", "all"):
        mask = np.array([mode in ("all", m) for m in modes])
        if not mask.any():
            continue
        s = error_summary(residuals[mask])
        metrics = "   ".join(f"{name} MdAPE {e.mdape_pct:6.1f} % bias {e.bias_pct:+6.1f} % within20 "
                               f"{e.within_20_pct:5.1f} %" for name, e in (("TTFT", s.ttft), ("TPOT", s.tpot)))
        print(f"  {label:28} {mode:6} rows {s.ttft.rows:4d}   {metrics}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=sorted(FILES), default="B200")
    parser.add_argument("--engine", choices=["vllm", "sglang", "trtllm"], default="vllm")
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parameters", default=None, help="constants to fit (default: calibrate's)")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()

    path = measurements_dir() / FILES[args.gpu]
    cases, _ = load_cases(path)
    cases = fit_cases([c for c in cases if c.engine == args.engine])
    order = np.random.default_rng(args.seed).permutation(len(cases))
    num_train = max(1, round(args.fraction * len(cases)))
    train_ids = {cases[i].row_id for i in order[:num_train]}
    train = [c for c in cases if c.row_id in train_ids]
    test = [c for c in cases if c.row_id not in train_ids]
    print(f"{args.engine} on {args.gpu}: {len(cases)} rows; calibrate on {len(train)} "
          f"({args.fraction:.0%}, seed {args.seed}), predict the other {len(test)}")

    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.csv"
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = [r for r in reader if r["id"] in train_ids]
            fields = reader.fieldnames
        with open(sample, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
        out = Path(tmp) / "profile.yaml"
        argv = ["layoutopt", "calibrate", str(sample), "--engine", args.engine, "--gpu", args.gpu,
                "--folds", str(args.folds), "--aiconfigurator-launch", "--output", str(out)]
        if args.parameters:
            argv += ["--parameters", args.parameters]
        sys.argv = argv
        start = time.perf_counter()
        code = run_guarded(cli)
        print(f"layoutopt calibrate exited {code} in {time.perf_counter() - start:.1f} s")
        if code != 0:
            sys.exit(code)
        profile = load_profile(out)

    modes = [c.mode for c in test]
    print(f"\nHeld-out {len(test)} rows ({100 - args.fraction * 100:.0f} %):")
    _print_errors("built-in profile", log_residuals(test), modes)
    _print_errors("calibrated on the sample", log_residuals(test, profile.engine_profile()), modes)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
