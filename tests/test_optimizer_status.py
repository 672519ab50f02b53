"""Honest status and determinism: what ``optimal`` promises, and the same plan from the same input."""

from __future__ import annotations

import json

import pytest

from layoutopt import api
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.plan_builder import _predicted_miss, build_plan
from layoutopt.optimizer.search import SearchResult
from layoutopt.optimizer.scaling import to_integer_table
from layoutopt.optimizer.solver import LayoutSolver
from layoutopt.plan import Latency, Percentiles
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.presets import default_workload
from synthetic_candidates import make_candidate
from test_optimizer_solver import random_table

CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}, attainment=0.9)


def _without_wall_times(value):
    if isinstance(value, dict):
        return {k: _without_wall_times(v) for k, v in value.items() if not k.endswith("wall_time_s")}
    if isinstance(value, list):
        return [_without_wall_times(v) for v in value]
    return value


def test_same_input_gives_byte_identical_plan_json():
    runs = [json.dumps(_without_wall_times(api.solve("qwen3-32b", "8xH100", CHAT).model_dump(mode="json")),
                       sort_keys=True) for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("objective", ["goodput-per-dollar", "max-goodput"])
def test_a_timed_out_search_is_deterministic_too(objective):
    # The limit is CP-SAT deterministic time, so where the search stops does not depend on load.
    table = to_integer_table(random_table(40))
    outcomes = [LayoutSolver(table, objective, time_limit_s=0.002).solve() for _ in range(2)]
    dumped = [o.model_dump(exclude={"wall_time_s", "wall_capped"}) for o in outcomes]
    assert dumped[0] == dumped[1]
    assert outcomes[0].deterministic_time <= 0.002 * 3 + 0.05


def test_optimal_means_within_the_tolerance():
    table = to_integer_table(random_table(3))
    for tolerance in (0.0, 0.01, 0.05):
        outcome = LayoutSolver(table, "goodput-per-dollar", time_limit_s=10, tolerance_fraction=tolerance).solve()
        assert outcome.status == "optimal" and outcome.gap <= tolerance + 1e-9
        assert "proven within" in outcome.proof


def _latency(ttft_p90: float, attainment: float) -> Latency:
    return Latency(ttft_ms=Percentiles(p50=100.0, p90=ttft_p90, p99=ttft_p90),
                   tpot_ms=Percentiles(p50=10.0, p90=20.0, p99=25.0), slo_attainment=attainment)


def test_a_plan_predicted_to_miss_the_slo_is_never_optimal():
    assert _predicted_miss(_latency(500.0, 0.95), CHAT) is None
    assert "infinite" in _predicted_miss(_latency(float("inf"), 0.95), CHAT)
    assert "below the SLO" in _predicted_miss(_latency(500.0, 0.85), CHAT)
    # A table proven optimal whose pools' own latencies miss a TTFT p90 of 300 ms (they predict 400).
    table = CandidateTable(candidates=(make_candidate("colocated", tp_size=1, capacity_rps=1.0),),
                           gpu_limits={"H100-SXM": 8})
    found = SearchResult(best=LayoutSolver(to_integer_table(table), "goodput-per-dollar").solve())
    assert found.best.status == "optimal"
    strict = SLO(ttft_ms={"p90": 300}, tpot_ms={"p90": 30}, attainment=0.9)
    plan = build_plan(found, model=get_model("qwen3-32b"), table=table, slo=strict, workload=default_workload(),
                      objective="goodput-per-dollar", engine="vllm", headroom=0.7,
                      budget=parse_budget("8xH100", load_catalog()), defaults_used=[], time_limit_s=10)
    assert plan.latency.slo_attainment < 0.9
    assert plan.status == "feasible" and plan.solver.status == "feasible"
    assert any("not optimal" in note for note in plan.explanation.notes)


def test_tolerance_is_validated():
    with pytest.raises(InputError, match="--tolerance"):
        api.solve("qwen3-32b", "8xH100", CHAT, tolerance_fraction=-0.1)
