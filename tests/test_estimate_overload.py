"""An overloaded deployment reports what it really serves, not the offered rate."""

from __future__ import annotations

import math

from layoutopt.perf_model.estimate import estimate
from layoutopt.plan import Layout


def test_colocated_overload_reports_the_drained_rate_and_a_feasible_batch():
    light = estimate("qwen3-8b", "H100", isl=2000, osl=200, layout=Layout(), rate=1.0)
    heavy = estimate("qwen3-8b", "H100", isl=2000, osl=200, layout=Layout(), rate=500.0)
    assert light.stable and not heavy.stable
    assert math.isinf(heavy.ttft_ms.p90)
    assert light.request_throughput_rps < heavy.request_throughput_rps < 500.0
    assert heavy.decode_batch_per_instance <= heavy.memory[0].max_batch_size
    # Just below the drained rate the deployment is stable: the figure is the real limit.
    below = estimate("qwen3-8b", "H100", isl=2000, osl=200, layout=Layout(),
                     rate=0.97 * heavy.request_throughput_rps)
    assert below.stable


def test_disaggregated_overload_reports_the_drained_rate():
    kwargs = dict(isl=4000, osl=500, prefill_layout=Layout(weight_precision="fp8"), prefill_instances=2,
                  decode_layout=Layout(tp_size=2, weight_precision="fp8"), decode_instances=1)
    heavy = estimate("qwen3-32b", "H100", rate=200.0, **kwargs)
    assert not heavy.stable and heavy.request_throughput_rps < 200.0
    below = estimate("qwen3-32b", "H100", rate=0.97 * heavy.request_throughput_rps, **kwargs)
    assert below.stable
