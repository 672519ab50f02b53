"""The batched colocated "tpot" bound gives exactly the numbers of the one-table path: the search
bounds thousands of colocated proposals with it (``capacity_bounds.capacity_upper_bounds``) and prunes on
them, so any drift would change which proposals are evaluated."""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model import capacity, capacity_bounds
from layoutopt.perf_model.colocated_bounds import batch_key, colocated_tpot_ceilings_rps
from layoutopt.perf_model.costs import phase_costs
from layoutopt.perf_model.links import inter_node_link
from layoutopt.plan import Layout
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

# Layouts of one model and GPU with and without attention DP (the batch key's rank count), small
# and large batch limits, several precisions.
LAYOUTS = {
    ("deepseek-v3", "B200"): [
        Layout(tp_size=8, weight_precision="fp8"),
        Layout(tp_size=8, weight_precision="fp4", kv_precision="fp8"),
        Layout(tp_size=4, pp_size=2, weight_precision="fp8"),
        Layout(tp_size=1, dp_size=8, ep_size=8, weight_precision="fp8"),
        Layout(tp_size=1, dp_size=8, ep_size=8, weight_precision="fp4", kv_precision="fp8"),
        Layout(tp_size=2, dp_size=4, ep_size=8, weight_precision="fp8"),
        Layout(tp_size=1, dp_size=16, ep_size=16, weight_precision="fp8"),
    ],
    ("qwen3-30b-a3b", "H100"): [
        Layout(tp_size=1), Layout(tp_size=2), Layout(tp_size=1, weight_precision="fp8"),
        Layout(tp_size=1, dp_size=2, ep_size=2), Layout(tp_size=1, dp_size=4, ep_size=4, weight_precision="fp8"),
        Layout(tp_size=2, pp_size=2),
    ],
}
SLOS = [SLO(ttft_ms={"p90": 1000.0}, tpot_ms={"p90": 30.0}),
        SLO(ttft_ms={"p90": 300.0, "p99": 2000.0}, tpot_ms={"p50": 15.0, "p99": 80.0}),
        SLO(ttft_ms={"p90": 5000.0}, tpot_ms={"p90": 200.0})]


@pytest.mark.parametrize("preset", ["chat", "rag", "code"])
@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_batched_tpot_bound_equals_the_one_table_bound(preset, engine):
    workload = preset_workload(preset)
    for (model_name, gpu_name), layouts in LAYOUTS.items():
        model, gpu = get_model(model_name), get_gpu(gpu_name)
        tables = []
        for layout in layouts:
            try:
                tables.append(phase_costs(model, gpu, layout, "colocated", workload, engine))
            except Exception:  # a layout that does not fit
                continue
        batches: dict[tuple, list] = {}
        for table in tables:
            batches.setdefault(batch_key(table), []).append(table)
        assert len(batches) >= 2  # with and without DP: more than one batch
        for slo in SLOS:
            ttft, tpot = capacity._targets(slo, "colocated")
            quantiles = capacity._quantiles(ttft, tpot)
            for members in batches.values():
                batched = colocated_tpot_ceilings_rps(members, quantiles, ttft, tpot, capacity._COARSE_POINTS,
                                                      capacity._FINE_POINTS)
                alone = [capacity_bounds._colocated_rate_ceiling_rps(t, quantiles, ttft, tpot, every_ttft_row=False)
                         for t in members]
                assert batched == alone
                assert any(rate > 0 for rate in alone) or slo is SLOS[1]


def test_capacity_upper_bounds_equal_one_call_each():
    """Mixed roles, layouts that do not fit and several batches: each bound as its own call gives."""
    model, gpu = get_model("deepseek-v3"), get_gpu("B200")
    workload, slo = preset_workload("chat"), SLOS[0]
    layouts = LAYOUTS[("deepseek-v3", "B200")] + [Layout(tp_size=1)]  # tp1 does not fit
    jobs = [(gpu, layout, role, inter_node_link(gpu) if role == "prefill" else None)
            for layout in layouts for role in ("colocated", "prefill", "decode")]
    together = capacity_bounds.capacity_upper_bounds(model, jobs, workload, slo, tier="tpot", allow_cross_domain=True)
    one_by_one = [capacity_bounds.capacity_upper_bound(model, g, layout, role, workload, slo, kv_link=link, tier="tpot",
                                                allow_cross_domain=True) for g, layout, role, link in jobs]
    assert together == one_by_one
    assert any(b.capacity_rps > 0 for b in together) and any(b.capacity_rps == 0 for b in together)


def test_pool_sizes_share_one_core_and_get_what_a_fresh_one_gives():
    """A pool's capacity search asks colocated_rows for the same batches at every pool size; the
    remembered core (load_colocated._shared_core) gives every row exactly as a fresh one does."""
    import dataclasses

    import numpy as np

    from layoutopt.perf_model import load_colocated
    from layoutopt.perf_model.load_rows import batch_grid

    model, gpu = get_model("qwen3-30b-a3b"), get_gpu("H100")
    costs = phase_costs(model, gpu, Layout(tp_size=1, dp_size=2, ep_size=2), "colocated", preset_workload("chat"))
    grid = batch_grid(costs, 32)
    quantiles = (0.5, 0.9, 0.99)
    load_colocated._core_memo.clear()
    warm = [load_colocated.colocated_rows(costs, grid, 1.0, quantiles, instances=n) for n in (1, 4, 16)]
    assert len(load_colocated._core_memo) == 1
    for n, rows in zip((1, 4, 16), warm):
        load_colocated._core_memo.clear()
        fresh = load_colocated.colocated_rows(costs, grid, 1.0, quantiles, instances=n)
        for field in dataclasses.fields(rows):
            a, b = getattr(rows, field.name), getattr(fresh, field.name)
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    # The pool sizes differ where they should (the slot wait), so the check above compares something.
    assert not np.array_equal(warm[0].ttft_q_s, warm[2].ttft_q_s)


def test_stacked_lookups_equal_each_tables_own():
    """colocated_bounds._Stack reads the decode step, its spread and the prompt extras and floors of
    tables with grids and anchors of different lengths exactly as each table's own methods do."""
    import numpy as np

    from layoutopt.perf_model.colocated_bounds import _Stack

    model, gpu = get_model("deepseek-v3"), get_gpu("B200")
    for engine in ("vllm", "trtllm"):
        tables = []
        for layout in LAYOUTS[("deepseek-v3", "B200")]:
            try:
                tables.append(phase_costs(model, gpu, layout, "colocated", preset_workload("chat"), engine))
            except Exception:  # a layout that does not fit
                continue
        assert len(tables) >= 4
        assert len({len(t.batch_grid) for t in tables}) > 1 or len({len(t.prompt_batches) for t in tables}) > 1
        stack = _Stack(tables)
        # Below, on and between the grid points, past the last one (the tail line) and at 1.
        batch = np.stack([np.concatenate([[1e-3, 0.5, 1.0], t.batch_grid[:5], t.batch_grid[-5:] * 1.37,
                                          [t.max_batch_size * 3.0]]) for t in tables])
        assert (stack.decode_at(batch) == np.stack([t.decode_at(b) for t, b in zip(tables, batch)])).all()
        assert (stack.decode_spread_at(batch) == np.stack([t.decode_spread_at(b) for t, b in zip(tables, batch)])).all()
        assert (stack.prompt_extra_at(batch) == np.concatenate([t.prompt_extra_at(b) for t, b in zip(tables, batch)])).all()
        if engine == "trtllm":  # an eager launch floor
            assert (stack.prompt_floor_at(batch)
                    == np.concatenate([t.prompt_floor_at(b) for t, b in zip(tables, batch)])).all()
