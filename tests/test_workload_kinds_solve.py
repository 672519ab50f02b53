"""Every kind of length distribution (fixed, lognormal, histogram, trace) goes through solve and estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from layoutopt import api
from layoutopt.workloads.distributions import EmpiricalLength, HistogramLength
from layoutopt.workloads.loaders import load_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_histogram_and_empirical_workloads_are_hashable():
    # The performance model caches per workload; list-valued fields made that raise TypeError.
    histogram = HistogramLength(tokens=[100, 200], weights=[1, 3])
    assert hash(histogram) == hash(HistogramLength(tokens=(100, 200), weights=(1.0, 3.0)))
    assert hash(EmpiricalLength(tokens=[5, 7, 9])) == hash(EmpiricalLength(tokens=(5, 7, 9)))


@pytest.mark.parametrize("name", ["workload-rag.yaml", "workload-trace.yaml", "workload-chat.yaml"])
def test_solve_accepts_every_example_workload(name):
    workload = load_workload(EXAMPLES / name).with_arrival_rate(None)
    plan = api.solve("qwen3-8b", "8xH100", EXAMPLES / "slo.yaml", workload, time_limit_s=5)
    assert plan.status in ("optimal", "feasible")
    assert plan.totals.goodput_rps > 0


def test_estimate_accepts_a_trace_workload():
    from layoutopt.plan import Layout

    workload = load_workload(EXAMPLES / "workload-trace.yaml")
    result = api.estimate("qwen3-8b", "H100", workload=workload, layout=Layout(tp_size=1), concurrency=8)
    assert result.tpot_ms.p50 > 0
