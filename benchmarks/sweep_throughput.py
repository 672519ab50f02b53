"""Sweep throughput: cells solved per minute on local processes and on a local Ray instance.

Runs one grid of 240 real solves (2 models x 4 GPU types of 8 GPUs x 3 workloads x 10 rates,
min-cost, 5 s time limit) from scratch with each executor, and checks that the executors give
the same rows (timing columns aside).

    python benchmarks/sweep_throughput.py [--workers 2] [--skip-ray]

Target (issue 8): a grid of at least 200 cells; report cells/minute for local processes and for
Ray with two workers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from layoutopt.sweep import SweepSpec, sweep
from layoutopt.sweep.results import TIMING_COLUMNS

SPEC = SweepSpec.model_validate({
    "name": "throughput",
    "models": ["qwen3-8b", "llama-3.1-8b"],
    "gpus": ["H100", "H200", "A100", "L40S"],
    "max_gpus_per_type": 8,
    "rates_rps": [0.5, 1, 2, 4, 6, 8, 12, 16, 24, 32],
    "workloads": ["chat", "code", "rag"],
    "slos": [{"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}],
    "objectives": ["min-cost"],
    "solver": {"time_limit_s": 5},
})


def _run(label: str, out_dir: Path, **options):
    start_s = time.perf_counter()
    result = sweep(SPEC, out_dir, plots=False, **options)
    elapsed_s = time.perf_counter() - start_s
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.summary.status_counts.items()))
    print(f"{label:28} {result.num_cells:6d} {elapsed_s:9.1f} {result.num_cells / elapsed_s * 60:12.0f}   {statuses}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="local processes and Ray CPUs")
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    print(f"{'executor':28} {'cells':>6} {'wall s':>9} {'cells/min':>12}   statuses")
    with tempfile.TemporaryDirectory() as tmp:
        serial = _run("in process (1 worker)", Path(tmp) / "serial", workers=1)
        local = _run(f"local processes ({args.workers})", Path(tmp) / "local", workers=args.workers)
        runs = [serial, local]
        if not args.skip_ray:
            import ray

            start_s = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            print(f"{'(ray.init)':28} {'':6} {time.perf_counter() - start_s:9.1f}")
            try:
                runs.append(_run(f"ray, local ({args.workers} CPUs)", Path(tmp) / "ray", executor="ray"))
            finally:
                ray.shutdown()
    answers = [[row.model_dump(exclude=set(TIMING_COLUMNS)) for row in run.rows] for run in runs]
    same = all(answer == answers[0] for answer in answers[1:])
    print(f"rows identical across executors: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
