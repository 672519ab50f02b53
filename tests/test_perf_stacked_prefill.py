"""The prefill pools of one table in one stacked pass give each pool's own numbers: the pool
capacities the solver encodes come from them, so any drift could change a plan."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model import capacity
from layoutopt.perf_model.costs import phase_costs
from layoutopt.perf_model.links import inter_node_link
from layoutopt.perf_model.load_prefill import _quantiles_by_block, prefill_rows, stacked_prefill_rows
from layoutopt.perf_model.queueing import erlang_c_array, wait_plus_service_quantiles
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO
from test_perf_stacked_tables import _random_layouts

POOLS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def _tables(model_name: str, gpu_name: str, engine: str, workload: str, count: int = 12):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    for layout in _random_layouts(model, gpu, count, seed=len(model_name) * 7 + len(workload)):
        try:
            yield phase_costs(model, gpu, layout, "prefill", preset_workload(workload), engine, inter_node_link(gpu),
                              allow_cross_domain=True)
        except LayoutError:
            continue


CASES = [("deepseek-v3", "H200", "sglang", "chat"), ("deepseek-v3", "B200", "vllm", "rag"),
         ("qwen3-32b", "H100", "vllm", "chat"), ("llama-3.1-70b", "H100", "trtllm", "summarization"),
         ("gpt-oss-120b", "H100", "vllm", "code")]
QUANTILES = (0.5, 0.9, 0.99)


def _pool(costs, n: int):
    return dataclasses.replace(costs, prefill_servers=costs.prefill_servers * n)


def _assert_rows_equal(got, want):
    for field in dataclasses.fields(want):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if field.name == "quantiles":
            assert a == b
        else:
            np.testing.assert_array_equal(a, b, err_msg=field.name, strict=True)


@pytest.mark.parametrize("model_name,gpu_name,engine,workload", CASES)
def test_stacked_prefill_rows_are_each_pools_own(model_name, gpu_name, engine, workload):
    rng = np.random.default_rng(3)
    checked = 0
    for costs in _tables(model_name, gpu_name, engine, workload):
        servers = [costs.prefill_servers * n for n in POOLS]
        ceiling = [max(s, 1) / float((costs.prefill_occupancy_s * costs.input_weights).sum()) for s in servers]
        rates = [np.sort(rng.uniform(0.0, 1.2, int(rng.integers(1, 40)))) * top for top in ceiling]
        stacked = stacked_prefill_rows(costs, rates, servers, QUANTILES)
        for n, rate, rows in zip(POOLS, rates, stacked):
            _assert_rows_equal(rows, prefill_rows(_pool(costs, n), rate, 1.0, QUANTILES))
        checked += 1
    assert checked >= 3


def _reference_pools_rps(costs, slo, sizes, headroom):
    """pool_capacities_rps of a prefill table before the stacked pass: each pool on its own."""
    ttft, tpot = capacity._targets(slo, "prefill")
    quantiles = capacity._quantiles(ttft, tpot)
    out = []
    for n in sizes:
        pool = _pool(costs, n)
        best = capacity._best_row(pool, "prefill", quantiles, ttft, tpot)
        if best is None:
            out.append(0.0)
            continue
        rows, k = best[0], best[1]
        if k + 1 < len(rows.rate_rps):
            rows = prefill_rows(pool, np.linspace(rows.rate_rps[k], rows.rate_rps[k + 1], capacity._FINE_POINTS),
                                1.0, quantiles)
            k = capacity._last_meeting(capacity._violation(rows, ttft, tpot) <= 1.0)
        out.append(float(rows.rate_rps[k]) * 1.0 * headroom)
    return out


@pytest.mark.parametrize("model_name,gpu_name,engine,workload", CASES)
@pytest.mark.parametrize("ttft_ms", [300, 1000, 4000])
def test_prefill_pool_capacities_are_each_pools_own(model_name, gpu_name, engine, workload, ttft_ms):
    slo = SLO(ttft_ms={"p90": ttft_ms, "p99": 3 * ttft_ms}, tpot_ms={"p90": 40})
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    found = 0
    for costs in _tables(model_name, gpu_name, engine, workload, count=6):
        ttft, tpot = capacity._targets(slo, "prefill")
        got = capacity._prefill_pools_rps(costs, capacity._quantiles(ttft, tpot), ttft, tpot, POOLS, 0.7)
        want = _reference_pools_rps(costs, slo, POOLS, 0.7)
        assert got == want
        found += sum(r > 0 for r in got)
    # Through the public entry point too (it looks the same table up).
    layout = _random_layouts(model, gpu, 1, seed=1)[0]
    public = capacity.pool_capacities_rps(model, gpu, layout, "prefill", preset_workload(workload), slo, POOLS,
                                          engine=engine, kv_link=inter_node_link(gpu), allow_cross_domain=True)
    costs = phase_costs(model, gpu, layout, "prefill", preset_workload(workload), engine, inter_node_link(gpu),
                        allow_cross_domain=True)
    assert public == _reference_pools_rps(costs, slo, POOLS, 0.7)
    assert found or ttft_ms == 300


def test_erlang_c_with_a_count_per_load_is_each_counts_own():
    rng = np.random.default_rng(0)
    counts = rng.choice([1, 2, 3, 8, 24, 128], 400)
    loads = rng.uniform(0.0, 1.1, 400) * counts
    got = erlang_c_array(counts.astype(float), loads)
    for c in np.unique(counts):
        np.testing.assert_array_equal(got[counts == c], erlang_c_array(int(c), loads[counts == c]), strict=True)


def test_quantiles_by_block_keep_each_blocks_service_order():
    """Blocks whose first rows sort their services differently are each computed as their own call."""
    weights = np.array([0.6, 0.1, 0.3])
    service = np.array([[1.0, 2.0, 3.0], [1.5, 2.5, 3.5], [3.0, 1.0, 2.0], [3.5, 1.5, 2.5]])
    p, m = np.array([0.3, 0.5, 0.2, 0.9]), np.array([0.4, 1.0, 2.0, 0.1])
    got = _quantiles_by_block(p, m, service, weights, QUANTILES, [2, 2])
    want = np.concatenate([wait_plus_service_quantiles(p[:2], m[:2], service[:2], weights, QUANTILES),
                           wait_plus_service_quantiles(p[2:], m[2:], service[2:], weights, QUANTILES)])
    np.testing.assert_array_equal(got, want, strict=True)
