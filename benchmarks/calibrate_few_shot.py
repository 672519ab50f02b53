"""Few-shot calibration: ``layoutopt calibrate`` on 10 % of one GPU's measured rows, error on the other 90 %.

Takes the rows of one engine on one GPU from ``reference/measurements`` (those a fit uses: each
measurement once, no guessed disaggregated worker counts), draws a fixed-seed 10 % sample, writes
it as a measurement CSV, runs ``layoutopt calibrate`` on it, and predicts the held-out 90 % with
the built-in profile and with the fitted one. Prints MdAPE, median signed error (bias) and the
share within 20 % of TTFT and TPOT, per mode and overall.

    python benchmarks/calibrate_few_shot.py [--gpu B200] [--engine vllm] [--fraction 0.1] [--seed 0]
        [--parameters memory_efficiency,step_overhead_ms,gemm_efficiency,request_overhead_ms] [--folds 5]
        [--from-other-generation]

The built-in profile of the GPU's own generation was fitted on every row of that GPU, the held-out
90 % included, so it is a hard baseline that no user has for a GPU of their own. With
``--from-other-generation`` both sides start where such a user starts: the engine's profile fitted
on the *other* generation (B200 rows from the Hopper profile, H100 rows from the Blackwell one,
carried over by data/generations.yaml, as accuracy.py --leave-one-gpu-out predicts them), and the
calibration fits the sample from there (``calibrate_cases(..., base=...)``; ``layoutopt calibrate
--base PROFILE`` starts from a profile file the same way).
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

from accuracy import measurements_dir, other_generation_profile  # noqa: E402

from layoutopt.calibrate.fitting import DEFAULT_PARAMETERS, calibrate_cases, error_summary  # noqa: E402
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
    parser.add_argument("--from-other-generation", action="store_true",
                        help="start from the profile fitted on the other GPU generation (see the module doc)")
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

    if args.from_other_generation:
        base = other_generation_profile(train[0])
        chosen = tuple(args.parameters.split(",")) if args.parameters else DEFAULT_PARAMETERS
        start = time.perf_counter()
        result = calibrate_cases(train, args.engine, parameters=chosen, folds=args.folds, base=base)
        print(f"calibrate_cases from the {base.generation} profile took {time.perf_counter() - start:.1f} s: "
              + ", ".join(f"{c.name} {c.before:.4g} -> {c.value:.4g}" for c in result.profile.fitted))
        fitted, baseline = result.profile.engine_profile(), f"{base.generation} profile"
    else:
        fitted, base, baseline = _calibrate_with_cli(path, train_ids, args), None, "built-in profile"

    modes = [c.mode for c in test]
    print(f"\nHeld-out {len(test)} rows ({100 - args.fraction * 100:.0f} %):")
    _print_errors(baseline, log_residuals(test, base), modes)
    _print_errors("calibrated on the sample", log_residuals(test, fitted), modes)


def _calibrate_with_cli(path: Path, train_ids: set[str], args):
    """``layoutopt calibrate`` on the rows of ``path`` named in ``train_ids``: the fitted engine profile."""
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
        return load_profile(out).engine_profile()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
