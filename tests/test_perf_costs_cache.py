"""The step tables' shared pieces give the numbers numpy's own routines give, and the facts only
reports read are computed on first use with the values computing them at once would give."""

from __future__ import annotations

import numpy as np
import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model import step
from layoutopt.perf_model.costs import _phase_costs, phase_costs
from layoutopt.perf_model.workload_grids import Interpolation, decode_batch_grid, output_moments
from layoutopt.plan import Layout
from layoutopt.workloads.presets import preset_workload


def test_interpolation_is_numpys():
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(1.0, 5000.0, 14))
    for picks in ([0, 13], [0, 3, 6, 10, 13], list(range(14))):
        interpolate = Interpolation(x, x[picks])
        fp = rng.uniform(0.0, 1.0, (5, len(picks)))
        assert (interpolate(fp) == np.stack([np.interp(x, x[picks], row) for row in fp])).all()


@pytest.mark.parametrize("batch_cap", [1, 2, 3, 4, 5, 7, 16, 20, 21, 33, 100, 257, 1000, 4096, 100_000])
def test_decode_grid_gradient_is_numpys(batch_cap):
    grid = decode_batch_grid(batch_cap)
    f = np.sqrt(grid.values) * 1e-3 + grid.values**1.3 * 1e-6
    expected = np.gradient(f, grid.values) if len(f) > 1 else f
    assert (grid.gradient(f) == expected).all()
    assert not grid.values.flags.writeable and not grid.batches.flags.writeable


@pytest.mark.parametrize("role", ["prefill", "decode", "colocated"])
def test_step_facts_are_the_direct_computation(role):
    model, gpu = get_model("qwen3-32b"), get_gpu("H100")
    layout = Layout(tp_size=2, weight_precision="fp8")
    workload = preset_workload("chat")
    # A fresh table (not the cached one other tests may have read): nothing computed before it is read.
    costs = _phase_costs.__wrapped__.__wrapped__(model, gpu, layout, role, workload, "vllm", None, None, False)
    assert not {"prefill_bottleneck", "decode_bottleneck", "chunk_s_per_token"} & set(costs.step_facts.__dict__)
    median = float(costs.input_tokens[np.searchsorted(np.cumsum(costs.input_weights), 0.5)])
    context = float(costs.input_tokens @ costs.input_weights) + output_moments(workload)[1] / 2.0
    expected_prefill = (step.prefill_time(model, gpu, layout, int(round(median))).bottleneck
                        if role != "decode" else "memory")
    expected_decode = (step.decode_step_time(model, gpu, layout, max(costs.max_batch_size // 2, 1), context).bottleneck
                       if role != "prefill" else "memory")
    assert costs.prefill_bottleneck == expected_prefill
    assert costs.decode_bottleneck == expected_decode
    if role == "colocated":
        reference = min(costs.max_batch_size, 16)
        cached = int(round(float(costs.input_tokens @ costs.input_weights) * workload.prefix_cache_hit_fraction))
        full = step.mixed_step_time(model, gpu, layout, costs.chunk_tokens - reference, cached, reference,
                                    context).total_s
        expected = (full - float(np.interp(reference, costs.batch_grid, costs.decode_step_s))) / (
            costs.chunk_tokens - reference)
        assert costs.chunk_s_per_token == pytest.approx(expected, rel=1e-12)
    else:
        assert costs.chunk_s_per_token == 0.0


def test_workload_arrays_are_shared_read_only():
    model, gpu, workload = get_model("qwen3-32b"), get_gpu("H100"), preset_workload("rag")
    a = phase_costs(model, gpu, Layout(tp_size=1, weight_precision="fp8"), "colocated", workload)
    b = phase_costs(model, gpu, Layout(tp_size=2, weight_precision="fp8"), "decode", workload)
    assert a.input_tokens is b.input_tokens and not a.input_tokens.flags.writeable
    with pytest.raises(ValueError):
        a.input_weights[0] = 0.0


def test_quadratic_horner_is_numpys_polyval():
    from layoutopt.perf_model.costs import _polyval2

    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(1.0, 60_000.0, 14))
    for poly in (rng.normal(0.0, 1e-3, 3) * np.array([1e-9, 1e-5, 1.0]), np.array([0.0, 0.0, 0.25]),
                 np.array([0.0, 3e-6, 0.0])):
        assert _polyval2(poly, x).tobytes() == np.polyval(poly, x).tobytes()


def test_decode_and_colocated_tables_share_one_decode_table():
    """A layout's decode and colocated tables have the same batch limit and mean context: they read
    one memoized decode table, equal to the vectorized step it stands for."""
    model, gpu, workload = get_model("qwen3-32b"), get_gpu("H100"), preset_workload("chat")
    layout = Layout(tp_size=2, pp_size=2, weight_precision="fp8")
    args = (model, gpu, layout, "decode", workload, "vllm", None, None, False)
    decode = _phase_costs.__wrapped__.__wrapped__(*args)
    colocated = _phase_costs.__wrapped__.__wrapped__(*args[:3], "colocated", *args[4:])
    assert decode.max_batch_size == colocated.max_batch_size
    assert decode.decode_step_s.base is colocated.decode_step_s.base is not None
    context = float(decode.input_tokens @ decode.input_weights) + output_moments(workload)[1] / 2.0
    fresh = step.decode_step_time_array(model, gpu, layout, decode.batch_grid[:, None],
                                        np.array([[context, 2.0 * context]]), "vllm")
    assert (decode.decode_step_s == fresh[:, 0]).all()
    assert not decode.decode_step_s.flags.writeable


def test_decode_at_extends_the_last_interval_as_before():
    costs = phase_costs(get_model("qwen3-32b"), get_gpu("H100"), Layout(tp_size=2, weight_precision="fp8"),
                        "colocated", preset_workload("chat"))
    grid, values = costs.batch_grid, costs.decode_step_s
    batch = np.array([0.5, 1.0, 3.7, grid[-1], grid[-1] + 0.5, 3.0 * grid[-1]])
    slope = (values[-1] - values[-2]) / max(grid[-1] - grid[-2], 1e-9)
    expected = np.where(batch > grid[-1], values[-1] + slope * (batch - grid[-1]), np.interp(batch, grid, values))
    assert costs.decode_at(batch).tobytes() == expected.tobytes()
    assert float(costs.decode_at(1.0)) == float(np.interp(1.0, grid, values))


def test_quantile_bin_is_the_cumulative_search():
    from layoutopt.perf_model.capacity import _quantile_bin
    from layoutopt.perf_model.workload_grids import read_only

    weights = read_only(np.array([0.1, 0.2, 0.3, 0.25, 0.15]))
    for q in (0.0, 0.1, 0.3, 0.5, 0.9, 0.99, 1.0):
        expected = min(int(np.searchsorted(np.cumsum(weights), q - 1e-12)), len(weights) - 1)
        assert _quantile_bin(weights, q) == expected == _quantile_bin(weights.copy(), q)
