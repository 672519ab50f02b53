"""Sweep throughput: cells solved per minute in-process, on local processes, and on Ray (a local
instance, and a Ray cluster reached by address), then a 2,000-cell procurement sweep.

    python benchmarks/sweep_throughput.py [--workers 2] [--skip-ray] [--skip-procurement]
    python benchmarks/sweep_throughput.py --procurement-only --out out/procurement   # resumable

Part 1 runs one grid of 96 real solves (2 models x 4 GPU types of 8 GPUs x 2 workloads x 6 rates,
min-cost, 5 s limit) from scratch with each executor and checks that they give the same rows
(timing columns aside). ``ray (address)`` starts a one-node cluster with ``ray start --head`` and
connects to it by address, as a sweep on a real cluster does.

Part 2 is the procurement sweep of issue 14: 5 models x 4 GPU types x 5 budgets x 4 rates x 5 SLOs
= 2,000 min-cost cells, on ``--workers`` local processes, written to ``--out`` (rerun the same
command to resume an interrupted run). It prints the wall time and cells per minute, and the sum
of the cells' own wall times over every cell in ``--out`` (divided by the workers: the wall time
the whole grid takes, also when it was run in pieces).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from layoutopt.sweep import SweepSpec, sweep
from layoutopt.sweep.results import TIMING_COLUMNS, read_journal

SPEC = SweepSpec.model_validate({
    "name": "throughput",
    "models": ["qwen3-8b", "llama-3.1-8b"],
    "gpus": ["H100", "H200", "A100", "L40S"],
    "max_gpus_per_type": 8,
    "rates_rps": [0.5, 2, 6, 12, 24, 32],
    "workloads": ["chat", "code"],
    "slos": [{"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}],
    "objectives": ["min-cost"],
    "solver": {"time_limit_s": 5},
})

GPU_TYPES = ["H100", "H200", "A100", "L40S"]
BUDGET_SIZES = [1, 2, 4, 8, 16]
PROCUREMENT = SweepSpec.model_validate({
    "name": "procurement-2000",
    "models": ["qwen3-8b", "llama-3.1-8b", "qwen3-30b-a3b", "qwen3-32b", "llama-3.1-70b"],
    # 4 GPU types x 5 budget sizes = 20 fleet options
    "budgets": [f"{size}x{gpu}" for gpu in GPU_TYPES for size in BUDGET_SIZES],
    "rates_rps": [1, 4, 16, 64],
    "workloads": ["chat"],
    "slos": [
        {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}},
        {"ttft_ms": {"p90": 500}, "tpot_ms": {"p90": 25}},
        {"ttft_ms": {"p90": 2000}, "tpot_ms": {"p90": 50}},
        {"ttft_ms": {"p99": 1500}, "tpot_ms": {"p99": 40}},
        {"ttft_ms": {"p90": 300}, "tpot_ms": {"p90": 20}},
    ],
    "objectives": ["min-cost"],
    "solver": {"time_limit_s": 5},
})


QUICK = SPEC.model_copy(update={"gpus": ["H100", "L40S"], "workloads": ["chat"]})  # 24 cells, for a loaded machine


def _run(label: str, out_dir: Path, spec: SweepSpec = SPEC, **options):
    start_s = time.perf_counter()
    result = sweep(spec, out_dir, plots=False, **options)
    elapsed_s = time.perf_counter() - start_s
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.summary.status_counts.items()))
    print(f"{label:28} {result.num_run:6d} {elapsed_s:9.1f} {result.num_run / elapsed_s * 60:12.0f}   {statuses}",
          flush=True)
    return result


def _ray_cluster_run(workers: int, out_dir: Path, spec: SweepSpec):
    """Start a one-node Ray cluster with `ray start --head` and sweep on it by address."""
    port = "6391"
    subprocess.run(["ray", "start", "--head", f"--port={port}", f"--num-cpus={workers}", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True)
    try:
        return _run(f"ray, address ({workers} CPUs)", out_dir, spec, executor="ray", address=f"127.0.0.1:{port}")
    finally:
        subprocess.run(["ray", "stop", "--force"], check=False, capture_output=True)


def executors(workers: int, skip_ray: bool, spec: SweepSpec) -> None:
    print(f"{'executor':28} {'cells':>6} {'wall s':>9} {'cells/min':>12}   statuses")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [_run("in process (1 worker)", Path(tmp) / "serial", spec, workers=1),
                _run(f"local processes ({workers})", Path(tmp) / "local", spec, workers=workers)]
        if not skip_ray:
            import ray

            start_s = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            print(f"{'(ray.init)':28} {'':6} {time.perf_counter() - start_s:9.1f}")
            try:
                runs.append(_run(f"ray, local ({workers} CPUs)", Path(tmp) / "ray", spec, executor="ray"))
            finally:
                ray.shutdown()
            runs.append(_ray_cluster_run(workers, Path(tmp) / "ray-address", spec))
    answers = [[row.model_dump(exclude=set(TIMING_COLUMNS)) for row in run.rows] for run in runs]
    same = all(answer == answers[0] for answer in answers[1:])
    print(f"rows identical across executors: {'yes' if same else 'NO'}")


def procurement(workers: int, out_dir: Path) -> None:
    from layoutopt.sweep import expand_cells

    num_cells = len(expand_cells(PROCUREMENT))
    done_before = len(read_journal(out_dir))
    print(f"procurement sweep: {num_cells} cells (5 models x 4 GPU types x 5 budgets x 4 rates x 5 SLOs), "
          f"{workers} workers, {done_before} already in {out_dir}", flush=True)
    result = _run("procurement (local)", out_dir, spec=PROCUREMENT, workers=workers)
    rows = read_journal(out_dir).values()
    cell_s = sum(row.cell_wall_time_s for row in rows)
    print(f"wall time of this run: {result.wall_time_s:,.0f} s for {result.num_run} cells; "
          f"sum of cell times over all {len(rows)} cells: {cell_s:,.0f} s "
          f"(= {cell_s / workers:,.0f} s of wall time on {workers} workers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="local processes and Ray CPUs")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-procurement", action="store_true")
    parser.add_argument("--quick", action="store_true", help="24 cells (2 GPU types, one workload) per executor")
    parser.add_argument("--procurement-only", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("out/procurement-2000"),
                        help="output folder of the procurement sweep (resumable)")
    args = parser.parse_args()
    if not args.procurement_only:
        executors(args.workers, args.skip_ray, QUICK if args.quick else SPEC)
    if not args.skip_procurement:
        procurement(args.workers, args.out)


if __name__ == "__main__":
    main()
