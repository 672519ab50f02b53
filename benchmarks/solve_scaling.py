"""Solve-time scaling: process wall time, candidate evaluation and solver time of whole solves.

    python benchmarks/solve_scaling.py [--cases deepseek,2048,fleet] [--sizes 8,32,128,512] [--stages]

Cases (issue 13 targets in brackets):
- deepseek: deepseek-v3 on '$400/h' over every priced GPU type of the catalog       [< 3 s]
- 2048:     qwen3-32b on 2,048 GPUs over H100, H200 and B200                        [< 2 s]
- fleet:    four models (qwen3-8b, qwen3-32b, llama-3.1-8b, llama-3.1-70b) min-cost on 1,024 GPUs
            over H100, H200 and B200, one CP-SAT model                              [< 10 s]
- sizes:    qwen3-32b, one and three GPU types, at each --sizes GPU count

Each row: the process wall time of the solve (a fresh per-process cache: the first solve of a
model pays for its candidate evaluation), its CPU time (this process and the evaluation workers:
on a shared machine wall time mostly measures the load), the solver's wall time (its limit is
CP-SAT deterministic time, so the plan does not depend on the load), status and gap. Evaluation runs in worker processes on every CPU this
process may use (``layoutopt.optimizer.evaluation``); the CPU count is printed. ``--stages`` adds,
for the deepseek case, wall and CPU seconds per stage: the structural and engine-rule screens,
the capacity bounds and full evaluations, the pool capacities, and the rest (CP-SAT, plan building),
and the start-up a ``layoutopt solve`` process pays before any of them: its imports, timed in a fresh
interpreter (``STARTUP_IMPORTS``).
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import subprocess
import sys
import time
from contextlib import contextmanager

from layoutopt.optimizer import enumeration, evaluation

from layoutopt.optimizer.evaluation import available_workers
from layoutopt.optimizer.fleet import solve_fleet
from layoutopt.optimizer.fleet_spec import fleet_from_dict
from layoutopt.optimizer.solve import solve
from layoutopt.workloads.slo import SLO

SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
THREE_TYPES = ("H100", "H200", "B200")
FLEET = {"objective": "min-cost", "models": [
    {"model": "qwen3-8b", "workload": {"preset": "chat"}, "rate_rps": 40,
     "slo": {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}},
    {"model": "qwen3-32b", "workload": {"preset": "rag"}, "rate_rps": 20,
     "slo": {"ttft_ms": {"p90": 2000}, "tpot_ms": {"p90": 50}}},
    {"model": "llama-3.1-8b", "workload": {"preset": "chat"}, "rate_rps": 30,
     "slo": {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}},
    {"model": "llama-3.1-70b", "workload": {"preset": "chat"}, "rate_rps": 10,
     "slo": {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 40}}},
]}


def budget_text(num_gpus: int, gpu_types: tuple[str, ...]) -> str:
    """Split ``num_gpus`` over the types, the remainder to the first."""
    share, extra = divmod(num_gpus, len(gpu_types))
    counts = [share + (extra if i == 0 else 0) for i in range(len(gpu_types))]
    return "+".join(f"{n}x{gpu}" for n, gpu in zip(counts, gpu_types) if n)


def row(label: str, timing: tuple[float, float], solver, extra: str = "") -> None:
    wall_s, cpu_s = timing
    gap = f"{solver.gap:.2%}" if solver.gap is not None else "-"
    print(f"{label:44s} {wall_s:>8.2f} {cpu_s:>8.2f} {solver.wall_time_s:>8.2f} "
          f"{solver.status:9s} {gap:>7s} {solver.num_candidates:>6d} {solver.num_layouts_considered:>7d} {extra}",
          flush=True)


def _live_children_cpu_s() -> float:
    """CPU seconds of this process's running children (a candidate table's evaluation workers live
    until the table is built, so their time is not in RUSAGE_CHILDREN yet); 0 where /proc has no
    children lists."""
    total = 0.0
    for listing in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            pids = open(listing).read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:  # it ended meanwhile: RUSAGE_CHILDREN has it once it is reaped
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def _cpu_s() -> float:
    """CPU seconds of this process and its children (the evaluation workers), finished or running."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + _live_children_cpu_s()


def timed(fn, *args, **kwargs):
    """(result, (wall s, CPU s)): CPU time is what a shared, loaded machine distorts least."""
    started, cpu = time.perf_counter(), _cpu_s()
    result = fn(*args, **kwargs)
    return result, (time.perf_counter() - started, _cpu_s() - cpu)


# What ``layoutopt solve`` imports before it solves: the command line, the solve command, and the
# modules its body imports (api, optimizer, calibration, the plan table).
STARTUP_IMPORTS = ("import click, layoutopt.cli as cli; cli.cli.get_command(click.Context(cli.cli), 'solve'); "
                   "import layoutopt.api, layoutopt.calibrate.apply, layoutopt.optimizer.solve, "
                   "layoutopt.report.plan_table")


def startup_times() -> tuple[float, float]:
    """(wall s, CPU s) of a fresh interpreter importing what ``layoutopt solve`` imports."""
    started, cpu = time.perf_counter(), _cpu_s()
    subprocess.run([sys.executable, "-c", STARTUP_IMPORTS], check=True)
    return time.perf_counter() - started, _cpu_s() - cpu


_STAGE_NAMES = {"_screen_gpu": "screens", "_evaluate_groups_task": "bounds+evaluation", "_pool_job": "pool capacities",
                "_evaluate_chunk": "evaluation"}


@contextmanager
def stage_times(stages: dict[str, list[float]]):
    """Record wall and CPU seconds (this process and the workers) of every parallel dispatch by stage."""
    original = evaluation.parallel_map

    def timed_map(function, shared, tasks, sizes, parallel, workers=None):
        name = _STAGE_NAMES.get(function.__name__, function.__name__)
        started, cpu = time.perf_counter(), _cpu_s()
        try:
            return original(function, shared, tasks, sizes, parallel, workers)
        finally:
            wall_cpu = stages.setdefault(name, [0.0, 0.0])
            wall_cpu[0] += time.perf_counter() - started
            wall_cpu[1] += _cpu_s() - cpu

    evaluation.parallel_map = enumeration.parallel_map = timed_map
    try:
        yield stages
    finally:
        evaluation.parallel_map = enumeration.parallel_map = original


def stage_line(stages: dict[str, list[float]], timing: tuple[float, float]) -> str:
    rest = (timing[0] - sum(w for w, _ in stages.values()), timing[1] - sum(c for _, c in stages.values()))
    parts = [f"{name} {w:.2f} s ({c:.2f} CPU s)" for name, (w, c) in stages.items()]
    return "    stages: " + ", ".join(parts + [f"the rest {rest[0]:.2f} s ({rest[1]:.2f} CPU s)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--cases", default="deepseek,2048,fleet")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--stages", action="store_true",
                        help="also print wall and CPU seconds per stage (screens, bounds and evaluation, pool "
                             "capacities, the rest: CP-SAT, plan building, placement)")
    args = parser.parse_args()
    cases = set(args.cases.split(",")) if args.cases else set()
    print(f"CPUs for candidate evaluation: {available_workers()}")
    print(f"{'case':44s} {'wall s':>8s} {'CPU s':>8s} {'solver s':>8s} {'status':9s} {'gap':>7s} "
          f"{'cands':>6s} {'layouts':>7s}")
    if "deepseek" in cases:
        with stage_times({}) as stages:
            plan, wall_s = timed(solve, "deepseek-v3", "$400/h", time_limit_s=args.time_limit)
        row("deepseek-v3 '$400/h', all GPU types", wall_s, plan.solver)
        if args.stages:
            print(stage_line(stages, wall_s), flush=True)
            startup = startup_times()
            print(f"    start-up of a 'layoutopt solve' process (imports): {startup[0]:.2f} s ({startup[1]:.2f} CPU s)",
                  flush=True)
    if "2048" in cases:
        plan, wall_s = timed(solve, "qwen3-32b", budget_text(2048, THREE_TYPES), SLO_CHAT,
                             time_limit_s=args.time_limit)
        row("qwen3-32b 2,048 GPUs over H100/H200/B200", wall_s, plan.solver)
    if "fleet" in cases:
        fleet, wall_s = timed(solve_fleet, fleet_from_dict(FLEET), budget_text(1024, THREE_TYPES),
                              time_limit_s=args.time_limit)
        saving = f"saves {fleet.saving_fraction:.1%} vs split" if fleet.saving_fraction is not None else ""
        row("4-model fleet, 1,024 GPUs over 3 types", wall_s, fleet.solver, saving)
    for num_gpus in [int(s) for s in args.sizes.split(",") if s]:
        for gpu_types in (("H100",), THREE_TYPES):
            if num_gpus < 8 * len(gpu_types):
                continue
            plan, wall_s = timed(solve, "qwen3-32b", budget_text(num_gpus, gpu_types), SLO_CHAT,
                                 time_limit_s=args.time_limit)
            row(f"qwen3-32b {budget_text(num_gpus, gpu_types)}", wall_s, plan.solver)


if __name__ == "__main__":
    main()
