"""Sweeps on Ray: a small local Ray instance gives the same rows as local processes."""

from __future__ import annotations

import sys

import pytest

from layoutopt.sweep import SweepSpec, sweep
from layoutopt.sweep.results import TIMING_COLUMNS

ray = pytest.importorskip("ray")

SPEC = SweepSpec.model_validate({
    "name": "ray", "models": ["qwen3-8b"], "budgets": ["8xH100", "8xA100"], "rates_rps": [1.0, 10.0],
    "workloads": ["chat", "code"], "slos": [{"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}],
    # a limit no solve of these cells reaches even on a loaded machine: a timed-out cell's answer
    # depends on the machine's speed, not on the executor
    "objectives": ["min-cost"], "solver": {"time_limit_s": 60},
})


def _failing_solve(**kwargs):
    """Fails the A100 cells; Ray workers cannot import this test module, so it travels by value."""
    if kwargs["budget"] == "8xA100":
        raise ValueError("no A100 today")
    from layoutopt.optimizer.solve import solve

    return solve(**kwargs)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield ray
    finally:
        ray.shutdown()


def _answers(result):
    return [row.model_dump(exclude=set(TIMING_COLUMNS)) for row in result.rows]


def test_ray_and_local_processes_give_identical_rows(tmp_path, local_ray):
    on_ray = sweep(SPEC, tmp_path / "ray", executor="ray", plots=False)
    local = sweep(SPEC, tmp_path / "local", executor="local", workers=2, plots=False)
    assert on_ray.num_cells == 8 and on_ray.num_errors == 0
    assert _answers(on_ray) == _answers(local)
    assert (tmp_path / "ray" / "results.csv").read_text().splitlines()[0] == \
        (tmp_path / "local" / "results.csv").read_text().splitlines()[0]
    assert ray.is_initialized()  # a Ray instance the caller started is left running


def test_ray_records_failed_cells_and_resumes(tmp_path, local_ray):
    first = sweep(SPEC, tmp_path, executor="ray", solve_fn=_failing_solve, plots=False)
    # grid order: budget before workload before rate, so the A100 cells are the last four
    assert [row.status == "error" for row in first.rows] == [False] * 4 + [True] * 4
    assert all("no A100 today" in row.error for row in first.rows if row.status == "error")
    again = sweep(SPEC, tmp_path, executor="ray", solve_fn=_failing_solve, plots=False, retry_errors=True)
    assert (again.num_run, again.num_skipped) == (4, 4)
