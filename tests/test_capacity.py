"""instance_capacity: the optimizer's view of one candidate (real catalog, real step physics)."""

from __future__ import annotations


import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.capacity import InstancePerf, instance_capacity, pd_ratio
from layoutopt.plan import Layout
from layoutopt.perf_model.links import inter_node_link
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

MODEL = get_model("llama-3.1-70b")
GPU = get_gpu("H100")
CHAT = Workload(input_tokens={"kind": "lognormal", "mean": 2000, "p90": 4000},
                output_tokens={"kind": "fixed", "tokens": 300})
SLO_90 = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
FP8 = dict(weight_precision="fp8")


def _capacity(role, tp=4, slo=SLO_90, **kwargs) -> InstancePerf:
    return instance_capacity(MODEL, GPU, Layout(tp_size=tp, **FP8), role, CHAT, slo,
                             kv_link=inter_node_link(GPU), **kwargs)


@pytest.mark.parametrize("role", ["prefill", "decode", "colocated"])
def test_feasible_candidate_meets_its_slo_at_capacity(role):
    perf = _capacity(role)
    assert perf.feasible and perf.capacity_rps > 0
    if role != "decode":
        assert perf.ttft_ms.p90 <= 1000
    if role != "prefill":
        assert perf.tpot_ms.p90 <= 30
        assert 1 <= perf.max_batch_size
    assert perf.bottleneck in ("compute", "memory", "communication", "queueing", "kv_capacity")


@pytest.mark.parametrize("role,tighter", [
    ("prefill", SLO(ttft_ms={"p90": 500}, tpot_ms={"p90": 30})),
    ("decode", SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 20})),
    ("colocated", SLO(ttft_ms={"p90": 600}, tpot_ms={"p90": 25})),
])
def test_capacity_decreases_when_the_slo_tightens(role, tighter):
    assert _capacity(role, slo=tighter).capacity_rps < _capacity(role).capacity_rps


def test_headroom_scales_capacity():
    full, headroom = _capacity("decode", headroom=1.0), _capacity("decode", headroom=0.5)
    assert headroom.capacity_rps == pytest.approx(full.capacity_rps * 0.5, rel=1e-9)


def test_unloaded_ttft_over_the_slo_is_infeasible_with_the_numbers():
    perf = _capacity("prefill", tp=2, slo=SLO(ttft_ms={"p90": 50}, tpot_ms={"p90": 30}))
    assert not perf.feasible and perf.capacity_rps == 0
    assert perf.reason.startswith("unloaded TTFT p90") and "> SLO 50 ms" in perf.reason


@pytest.mark.parametrize("role", ["prefill", "colocated"])
def test_unloaded_ttft_includes_the_request_overhead(role):
    """A prompt alone pays the API server and tokenizer too: the unloaded TTFT is the SLO-percentile
    prompt's prefill (and KV transfer) plus the engine's request overhead, which every loaded TTFT
    also carries, so it never exceeds the TTFT at capacity."""
    from layoutopt.perf_model.calibration import resolve_engine
    from layoutopt.perf_model.costs import phase_costs

    layout = Layout(tp_size=4, **FP8)
    link = inter_node_link(GPU) if role == "prefill" else None
    costs = phase_costs(MODEL, GPU, layout, role, CHAT, "vllm", link)
    overhead_ms = resolve_engine("vllm", GPU).request_overhead_ms
    assert overhead_ms > 0
    perf = _capacity(role)
    bins = [float((costs.prefill_s[i] + costs.kv_transfer_s[i]) * 1e3) + overhead_ms
            for i in range(len(costs.prefill_s))]
    assert any(value == pytest.approx(perf.unloaded_ttft_ms, rel=1e-9) for value in bins)
    assert perf.unloaded_ttft_ms <= perf.ttft_ms.p90 * (1 + 1e-9)


def test_layout_that_does_not_fit_is_infeasible_not_an_exception():
    perf = instance_capacity(MODEL, GPU, Layout(tp_size=1), "decode", CHAT, SLO_90)
    assert not perf.feasible and "misses by" in perf.reason


def test_deterministic():
    assert _capacity("colocated") == _capacity("colocated")


def test_more_gpus_never_lower_per_gpu_capacity_absurdly():
    per_gpu = {tp: _capacity("decode", tp=tp).capacity_rps / tp for tp in (2, 4, 8)}
    assert min(per_gpu.values()) > 0.3 * max(per_gpu.values())
    total = [_capacity("decode", tp=tp).capacity_rps for tp in (2, 4, 8)]
    assert total == sorted(total)


def test_pd_ratio_is_exported_for_the_optimizer():
    assert pd_ratio(4000, 500, 8000, 2000) == pytest.approx(2.0)
