"""``capacity_upper_bound`` never falls below ``instance_capacity``: the optimizer skips full
evaluations on its word (``optimizer.evaluation.pruned_capacities``), so a bound below the
capacity would silently lose plans. Also: the pruned table equals the unpruned one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.perf_model.capacity import instance_capacity
from layoutopt.perf_model.capacity_bounds import capacity_upper_bound
from layoutopt.perf_model.links import inter_node_link
from layoutopt.plan import Layout
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

CASES = [
    ("qwen3-32b", "H100", Layout(tp_size=1, weight_precision="fp8")),
    ("qwen3-32b", "B200", Layout(tp_size=2, weight_precision="fp4", kv_precision="fp8")),
    ("llama-3.1-70b", "H100", Layout(tp_size=4, pp_size=2, weight_precision="fp8")),
    ("qwen3-30b-a3b", "H200", Layout(tp_size=1, dp_size=2, ep_size=2)),
    ("deepseek-v3", "H200", Layout(tp_size=8, weight_precision="fp8")),
    ("deepseek-v3", "B200", Layout(tp_size=1, dp_size=8, ep_size=8, weight_precision="fp4", kv_precision="fp8")),
    ("gpt-oss-120b", "H100", Layout(tp_size=2)),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), role=st.sampled_from(["prefill", "decode", "colocated"]),
       preset=st.sampled_from(["chat", "rag", "code"]),
       ttft_ms=st.sampled_from([150.0, 400.0, 1000.0, 3000.0]), tpot_ms=st.sampled_from([8.0, 20.0, 50.0, 200.0]),
       tpot_key=st.sampled_from(["p50", "p90", "p99", "p25"]), headroom=st.sampled_from([0.5, 0.7, 1.0]))
def test_bound_is_never_below_the_capacity(case, role, preset, ttft_ms, tpot_ms, tpot_key, headroom):
    name, gpu_name, layout = case
    model, gpu = get_model(name), get_gpu(gpu_name)
    slo = SLO(ttft_ms={"p90": ttft_ms}, tpot_ms={tpot_key: tpot_ms})
    workload = preset_workload(preset)
    link = inter_node_link(gpu) if role == "prefill" else None
    perf = instance_capacity(model, gpu, layout, role, workload, slo, headroom=headroom, kv_link=link)
    bound = capacity_upper_bound(model, gpu, layout, role, workload, slo, headroom=headroom, kv_link=link)
    floors, cheapest = (capacity_upper_bound(model, gpu, layout, role, workload, slo, headroom=headroom,
                                             kv_link=link, tier=tier) for tier in ("floors", "tpot"))
    assert perf.capacity_rps <= bound.capacity_rps * (1 + 1e-12)
    # The cheaper tiers (TPOT floors, every refinement interval below their first miss; then the
    # same without the TTFT targets) are looser.
    assert bound.capacity_rps <= floors.capacity_rps * (1 + 1e-12)
    assert floors.capacity_rps <= cheapest.capacity_rps * (1 + 1e-12)
    assert cheapest.unloaded_ttft_ms == floors.unloaded_ttft_ms == bound.unloaded_ttft_ms
    assert bound.unloaded_ttft_ms == pytest.approx(perf.unloaded_ttft_ms)
    assert bound.unloaded_tpot_ms == pytest.approx(perf.unloaded_tpot_ms)


@pytest.mark.parametrize("model_name,gpus", [("qwen3-32b", ("H100", "B200")), ("qwen3-30b-a3b", ("H200",))])
def test_pruned_table_equals_the_unpruned_one(model_name, gpus):
    """Skipping the proposals a bound proves dominated leaves the same candidates, capacities and
    pairs as evaluating every proposal and pruning afterwards."""
    from layoutopt.optimizer import enumeration

    specs = [get_gpu(g) for g in gpus]
    args = dict(gpu_limits={g.name: 16 for g in specs}, max_usd_per_hour=None, min_rate_rps=None,
                pool_capacities=False)
    workload, slo = preset_workload("chat"), SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
    pruned = build_candidate_table(get_model(model_name), specs, workload, slo, **args)
    original = enumeration.pruned_capacities

    def evaluate_all(model, workload, slo, engine, headroom, jobs, shapes, groups, dominates, eligible, workers=None):
        return enumeration.capacities(model, workload, slo, engine, headroom, jobs, workers)

    enumeration.pruned_capacities = evaluate_all
    try:
        full = build_candidate_table(get_model(model_name), specs, workload, slo, **args)
    finally:
        enumeration.pruned_capacities = original
    assert [c.name for c in pruned.candidates] == [c.name for c in full.candidates]
    assert [c.capacity_rps for c in pruned.candidates] == [c.capacity_rps for c in full.candidates]
    assert pruned.incompatible_pairs == full.incompatible_pairs
    assert pruned.dropped_by("dominated") == full.dropped_by("dominated")
    assert sum(f.num_dropped for f in pruned.filters) == sum(f.num_dropped for f in full.filters)


def test_tpot_floors_never_exceed_the_tpot_quantiles():
    """The cheap bound's premise: ``colocated_rows(tpot_floor=True)`` has the same TTFT and
    stability and TPOT quantiles at or below the mixture's, row by row."""
    from layoutopt.perf_model.costs import phase_costs
    from layoutopt.perf_model.load import colocated_rates_rps, colocated_rows
    from layoutopt.perf_model.load_colocated import colocated_tpot_floors
    from layoutopt.perf_model.load_rows import batch_grid

    for name, gpu_name, layout in CASES:
        for preset in ("chat", "rag"):
            try:
                costs = phase_costs(get_model(name), get_gpu(gpu_name), layout, "colocated", preset_workload(preset))
            except Exception:  # a layout that does not fit this workload
                continue
            grid = batch_grid(costs, 32)
            quantiles = (0.25, 0.5, 0.9, 0.99)
            rows = colocated_rows(costs, grid, 1.0, quantiles)
            floors = colocated_rows(costs, grid, 1.0, quantiles, tpot_floor=True)
            assert (floors.tpot_q_s <= rows.tpot_q_s * (1 + 1e-9)).all()
            assert (floors.ttft_q_s == rows.ttft_q_s).all() and (floors.stable == rows.stable).all()
            assert (floors.tpot_q_s < rows.tpot_q_s * 0.999).any()  # a floor, not the same numbers
            # The TTFT-free version computes the same floors, stability and rates.
            probe = np.linspace(1.0, float(costs.max_batch_size), 7)
            tpot_q, stable, rates, first_ttft = colocated_tpot_floors(costs, grid, quantiles, probe=probe)
            assert (tpot_q == floors.tpot_q_s).all() and (stable == floors.stable).all()
            assert (first_ttft <= rows.ttft_q_s[0] * (1 + 1e-12)).all()  # the first row's TTFT, waits left out
            assert (rates == colocated_rates_rps(costs, probe)).all()


def test_service_quantiles_are_those_of_the_service_alone():
    """The cheapest colocated tier's TTFT floor at the lowest load: the quantiles of the service
    alone, as ``wait_plus_service_quantiles`` gives them with no wait."""
    from layoutopt.perf_model.load_colocated import service_quantiles
    from layoutopt.perf_model.queueing import wait_plus_service_quantiles

    service = np.array([0.9, 0.2, 0.4, 1.5, 0.3])
    weights = np.array([0.1, 0.3, 0.2, 0.05, 0.35])
    quantiles = (0.25, 0.5, 0.9, 0.99)
    alone = wait_plus_service_quantiles(np.zeros(1), np.zeros(1), service, weights, quantiles)[0]
    assert (service_quantiles(service, weights, quantiles) == alone).all()


def test_cheapest_tier_is_zero_where_the_lowest_load_misses_ttft():
    """A colocated layout whose TTFT misses at every load gets bound 0 from every tier, as the full
    evaluation finds it infeasible (so pruning charges it to the SLO, not to dominance)."""
    model, gpu, layout = get_model("llama-3.1-70b"), get_gpu("H100"), Layout(tp_size=4, pp_size=2, weight_precision="fp8")
    workload = preset_workload("rag")
    perf = instance_capacity(model, gpu, layout, "colocated", workload, SLO(ttft_ms={"p90": 10_000}, tpot_ms={"p90": 200}))
    # A TTFT target between the unloaded prefill and the service at the lowest load (which adds
    # the request overhead and the step it rides in): the unloaded check passes, every load misses.
    unloaded = perf.unloaded_ttft_ms
    slo = SLO(ttft_ms={"p90": unloaded * 1.0001}, tpot_ms={"p90": 200})
    assert instance_capacity(model, gpu, layout, "colocated", workload, slo).capacity_rps == 0.0
    for tier in ("tpot", "floors", "grid"):
        assert capacity_upper_bound(model, gpu, layout, "colocated", workload, slo, tier=tier).capacity_rps == 0.0


def test_prefill_bound_is_zero_where_the_service_alone_misses_ttft():
    """The request overhead counts in TTFT but not in the unloaded check: a TTFT target between the
    two gets a prefill bound of 0, as the full evaluation finds no load that meets it."""
    model, gpu, layout = get_model("qwen3-32b"), get_gpu("H100"), Layout(tp_size=2, weight_precision="fp8")
    workload, link = preset_workload("rag"), inter_node_link(get_gpu("H100"))
    loose = SLO(ttft_ms={"p90": 60_000}, tpot_ms={"p90": 200})
    unloaded = instance_capacity(model, gpu, layout, "prefill", workload, loose, kv_link=link).unloaded_ttft_ms
    slo = SLO(ttft_ms={"p90": unloaded * 1.0001}, tpot_ms={"p90": 200})
    assert instance_capacity(model, gpu, layout, "prefill", workload, slo, kv_link=link).capacity_rps == 0.0
    assert capacity_upper_bound(model, gpu, layout, "prefill", workload, slo, kv_link=link).capacity_rps == 0.0
    assert capacity_upper_bound(model, gpu, layout, "prefill", workload, loose, kv_link=link).capacity_rps > 0.0


@pytest.mark.parametrize("role", ["prefill", "colocated"])
def test_capacity_after_the_grid_bound_equals_a_fresh_one(role):
    """The ``"grid"`` bound leaves its coarse load grid for the full evaluation (``_coarse_rows``
    remembers it); the evaluation that starts from it gives exactly what one from scratch gives,
    and the prefill grid bound lies between the capacity and the full-step ceiling."""
    from layoutopt.perf_model import capacity

    workload, slo = preset_workload("chat"), SLO(ttft_ms={"p90": 1000.0}, tpot_ms={"p90": 30.0})
    for name, gpu_name, layout in CASES:
        model, gpu = get_model(name), get_gpu(gpu_name)
        link = inter_node_link(gpu) if role == "prefill" else None
        capacity._coarse_memo.clear()
        fresh = instance_capacity(model, gpu, layout, role, workload, slo, kv_link=link)
        capacity._coarse_memo.clear()
        grid = capacity_upper_bound(model, gpu, layout, role, workload, slo, kv_link=link, tier="grid")
        assert capacity._coarse_memo or grid.capacity_rps == 0.0
        warm = instance_capacity(model, gpu, layout, role, workload, slo, kv_link=link)
        assert warm == fresh
        ceiling = capacity_upper_bound(model, gpu, layout, role, workload, slo, kv_link=link, tier="tpot")
        assert fresh.capacity_rps <= grid.capacity_rps * (1 + 1e-12) <= ceiling.capacity_rps * (1 + 1e-9)
