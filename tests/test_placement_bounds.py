"""Greedy placement proven by lower bounds: same objective values as the full CP-SAT search,
deterministic, honest about what is proven."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from test_placement_fixtures import plan, pool

from layoutopt.topology import cluster_from_spec, place, validate_placement
from layoutopt.topology.placement.bounds import LowerBounds, spread_instances_per_rack, spread_lower_bound
from layoutopt.topology.placement.budget import SolveBudget
from layoutopt.topology.placement.data import prepare
from layoutopt.topology.placement.evaluate import model_violations, objective_values
from layoutopt.topology.placement.greedy import greedy_counts
from layoutopt.topology.placement.lp_bound import lp_lower_bound
from layoutopt.topology.placement.objectives import KvLocality
from layoutopt.topology.placement.rack_dp import rack_optimum
from layoutopt.topology.placement.solver import _objectives, _solve
from layoutopt.topology.spec import ClusterSpec, NodeGroupSpec, RackSpec, UnavailableSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import placement_scaling  # noqa: E402

KV_BYTES = 1e9


def _cluster(seed: int, num_racks: int, nodes: int, busy_fraction: float):
    rng = random.Random(seed)
    racks = [RackSpec(name=f"r{r}", nodes=[NodeGroupSpec(type="hgx-h100-8", count=nodes)]) for r in range(num_racks)]
    in_use: dict[str, list[int]] = {}
    for r in range(num_racks):
        for n in range(nodes):
            taken = sorted({rng.randrange(8) for _ in range(int(8 * busy_fraction))})
            if taken:
                in_use[f"r{r}-n{n}"] = taken
    return cluster_from_spec(ClusterSpec(racks=racks, unavailable=UnavailableSpec(gpus_in_use=in_use)))


def _cases():
    rng = random.Random(11)
    for seed in range(8):
        pools = [pool("prefill", tp=rng.choice([1, 2]), instances=rng.randint(2, 6), capacity_rps=1.0),
                 pool("decode", tp=rng.choice([2, 4]), pp=rng.choice([1, 2]), instances=rng.randint(1, 3),
                      capacity_rps=rng.choice([2.0, 3.0]))]
        if seed % 2:
            pools.append(pool("colocated", tp=rng.choice([4, 8]), instances=rng.randint(1, 2)))
        yield (seed, rng.randint(1, 3), rng.randint(2, 3), rng.choice([0.0, 0.25]), bool(seed % 3), plan(*pools))


def _values(data, outcome):
    values = objective_values(data, outcome.counts)
    return [values[o.key] for o in _objectives(data)]


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: f"seed{c[0]}")
def test_bounds_and_greedy_give_the_full_searchs_objective_values(case):
    seed, num_racks, nodes, busy, spread, small_plan = case
    cluster = _cluster(seed, num_racks, nodes, busy)
    data = prepare(small_plan, cluster, KV_BYTES, spread)
    fast = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True)
    full = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    assert fast.status == full.status
    if full.status not in ("optimal", "feasible"):
        return
    assert model_violations(data, fast.counts) == []
    assert full.status == "optimal"
    # The CP-SAT expressions and the evaluator agree on the same counts.
    assert [p.value for p in full.proofs] == _values(data, full)
    keys = [o.key for o in _objectives(data)]
    fast_values, full_values = _values(data, fast), _values(data, full)
    # KV is proven to within 1% of all KV traffic, so later terms are compared only when KV is equal.
    cut = keys.index("kv_egress") if "kv_egress" in keys else len(keys)
    assert fast_values[:cut] == full_values[:cut]
    if cut < len(keys):
        assert abs(fast_values[cut] - full_values[cut]) <= 1000
        if fast_values[cut] == full_values[cut]:
            assert fast_values == full_values
    # Every bound the fast path used is below the proven optimum.
    assert all(p.lower_bound <= v for p, v in zip(fast.proofs, full_values[:cut + 1]))


@pytest.mark.parametrize("case", list(_cases())[:4], ids=lambda c: f"seed{c[0]}")
def test_lower_bounds_never_exceed_the_optimum(case):
    seed, num_racks, nodes, busy, spread, small_plan = case
    cluster = _cluster(seed, num_racks, nodes, busy)
    data = prepare(small_plan, cluster, KV_BYTES, True)
    full = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    if full.status != "optimal":
        return
    values = dict(zip([o.key for o in _objectives(data)], _values(data, full)))
    assert spread_lower_bound(data) <= values["spread"]
    bounds = LowerBounds(data, SolveBudget(5.0))
    # Unconditional bounds (no earlier objective held) are bounds on the lexicographic optimum too.
    for key in ("pipelines_in_rack", "kv_egress", "domains"):
        if key in values:
            assert bounds.of(key, {}, values[key] + 1) <= values[key]


def test_benchmark_cluster_is_proven_by_bounds_without_search():
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=False, scale=2))
    result = place(placement_scaling.bench_plan(2), cluster, spread_racks=True,
                   kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST, time_limit_s=5.0)
    assert result.status == "optimal"
    assert {o.proven_by for o in result.objectives} == {"bound"}
    assert [o.value == o.lower_bound for o in result.objectives] == [True] * len(result.objectives)
    assert validate_placement(result.plan, cluster, placement_scaling.KV_BYTES_PER_REQUEST) == []


def test_fragmented_benchmark_cluster_is_placed_and_deterministic():
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=True, scale=1))
    runs = [place(placement_scaling.bench_plan(1), cluster, spread_racks=True,
                  kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST, time_limit_s=5.0) for _ in range(2)]
    assert runs[0].placed
    assert validate_placement(runs[0].plan, cluster, placement_scaling.KV_BYTES_PER_REQUEST) == []
    assert runs[0].plan.placement == runs[1].plan.placement
    assert runs[0].objectives == runs[1].objectives and runs[0].status == runs[1].status
    # optimal only when every objective is proven
    assert (runs[0].status == "optimal") == all(o.proven_by != "none" for o in runs[0].objectives)


def test_greedy_fills_every_stage_or_gives_up():
    cluster = _cluster(1, 1, 1, 0.5)   # one node with 4 free GPUs
    assert greedy_counts(prepare(plan(pool("decode", tp=2, instances=3)), cluster, None, False)) is None
    counts = greedy_counts(prepare(plan(pool("decode", tp=2, instances=2)), cluster, None, False))
    assert sum(counts.values()) == 2


def test_a_search_too_large_for_the_budget_reports_the_greedy_placement_unproven():
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=True, scale=1))
    result = place(placement_scaling.bench_plan(1), cluster, spread_racks=True,
                   kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST, time_limit_s=1.0)
    assert result.status == "feasible"
    assert validate_placement(result.plan, cluster, placement_scaling.KV_BYTES_PER_REQUEST) == []
    assert any(o.proven_by == "none" for o in result.objectives)
    assert all(o.lower_bound <= o.value for o in result.objectives)
    # The same input with a budget the search fits in is proven.
    proven = place(placement_scaling.bench_plan(1), cluster, spread_racks=True,
                   kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST, time_limit_s=10.0)
    assert proven.status == "optimal"
    assert [o.value for o in proven.objectives] <= [o.value for o in result.objectives]


@pytest.mark.parametrize("spread", [False, True])
def test_ordering_interchangeable_racks_keeps_the_optimum(monkeypatch, spread):
    from layoutopt.topology.placement import constraints, solver

    cluster = _cluster(0, 3, 2, 0.0)   # three identical racks of two empty nodes
    odd = plan(pool("prefill", tp=2, instances=5, capacity_rps=1.0), pool("decode", tp=4, pp=2, instances=2,
                                                                           capacity_rps=2.5))
    data = prepare(odd, cluster, KV_BYTES, spread)
    assert constraints.rack_classes(data) == [list(data.racks)]
    ordered = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    monkeypatch.setattr(solver, "default_constraints", lambda enforce: [
        constraints.EveryStagePlaced(), constraints.DomainCapacity(), constraints.KvUplink(enforce)])
    unordered = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    assert ordered.status == unordered.status == "optimal"
    assert _values(data, ordered) == _values(data, unordered)


def _random_cases(count: int):
    """Small fragmented clusters and plans (seeded): 1-3 racks of 2-4 HGX nodes, 0-25% busy."""
    rng = random.Random(2026)
    for seed in range(count):
        pools = [pool("prefill", tp=rng.choice([1, 2]), instances=rng.randint(1, 5), capacity_rps=1.0),
                 pool("decode", tp=rng.choice([2, 4]), pp=rng.choice([2, 4]), instances=rng.randint(1, 3),
                      capacity_rps=rng.choice([1.5, 2.0, 3.0]))]
        if rng.random() < 0.5:
            pools.append(pool("colocated", tp=rng.choice([4, 8]), pp=rng.choice([1, 2]), instances=rng.randint(1, 2)))
        yield seed, rng.randint(1, 3), rng.randint(2, 4), rng.choice([0.125, 0.25]), rng.random() < 0.5, plan(*pools)


@pytest.mark.parametrize("case", list(_random_cases(24)), ids=lambda c: f"seed{c[0]}")
def test_the_rack_lp_bound_never_exceeds_the_searched_optimum(case):
    seed, num_racks, nodes, busy, spread, small_plan = case
    data = prepare(small_plan, _cluster(100 + seed, num_racks, nodes, busy), KV_BYTES, spread)
    full = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    if full.status != "optimal":
        return
    values = dict(zip([o.key for o in _objectives(data)], _values(data, full)))
    held = {k: values[k] for k in ("spread", "kv_egress") if k in values}
    own = spread_instances_per_rack(data) if spread else {}
    gap = KvLocality.absolute_gap
    if "pipelines_in_domain" in values:
        bound = lp_lower_bound(data, "pipelines_in_domain", held, own, gap)
        assert bound is None or bound <= values["pipelines_in_domain"]
        held["pipelines_in_domain"] = values["pipelines_in_domain"]
    bound = lp_lower_bound(data, "domains", held, own, gap)
    assert bound is None or bound <= values["domains"]
    # The bounds the fast path reports hold as well.
    fast = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True)
    assert all(p.lower_bound <= values[o.key] for p, o in zip(fast.proofs, _objectives(data))
               if o.key != "kv_egress")


def test_the_rack_lp_bound_proves_what_the_pooled_one_cannot():
    # Fragmented benchmark, 4,096 GPUs: every rack must hold its share of each pool, so racks short
    # of empty nodes split PP instances; merging the racks (the pooled bound) does not see it.
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=True, scale=4))
    data = prepare(placement_scaling.bench_plan(4), cluster, placement_scaling.KV_BYTES_PER_REQUEST, True)
    held = {"spread": 29, "kv_egress": 640}
    racked = lp_lower_bound(data, "pipelines_in_domain", held, spread_instances_per_rack(data), KvLocality.absolute_gap)
    pooled_bound = LowerBounds(data, SolveBudget(5.0))._pooled_bound("pipelines_in_domain", {})
    assert racked == 68 > pooled_bound
    result = place(placement_scaling.bench_plan(4), cluster, spread_racks=True, time_limit_s=30.0,
                   kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST)
    proof = {o.name: o for o in result.objectives}["pipeline stages across NVLink domains"]
    assert proof.value == 68 and proof.proven_by == "bound"


def _forced_cases(count: int):
    """Spread plans whose pools split evenly over the racks (one colocated pool left free)."""
    rng = random.Random(4242)
    for seed in range(count):
        num_racks = rng.choice([2, 3])
        pools = [pool("prefill", tp=rng.choice([1, 2]), instances=num_racks * rng.randint(1, 2), capacity_rps=1.0),
                 pool("decode", tp=rng.choice([2, 4]), pp=2, instances=num_racks * rng.randint(1, 2), capacity_rps=2.0),
                 pool("colocated", tp=4, instances=rng.randint(1, num_racks + 1))]
        yield seed, num_racks, rng.randint(3, 4), plan(*pools)


def _mixed_cluster(seed: int, num_racks: int, nodes: int):
    """Nodes with 0-3 GPUs in use each (seeded), so some stay whole and some do not."""
    rng = random.Random(seed)
    racks = [RackSpec(name=f"r{r}", nodes=[NodeGroupSpec(type="hgx-h100-8", count=nodes)]) for r in range(num_racks)]
    in_use = {f"r{r}-n{n}": sorted(rng.sample(range(8), rng.choice([0, 1, 2, 3])))
              for r in range(num_racks) for n in range(nodes)}
    return cluster_from_spec(ClusterSpec(racks=racks, unavailable=UnavailableSpec(
        gpus_in_use={node: gpus for node, gpus in in_use.items() if gpus})))


@pytest.mark.parametrize("case", list(_forced_cases(32)), ids=lambda c: f"seed{c[0]}")
def test_the_rack_dynamic_program_is_the_searched_optimum(case):
    seed, num_racks, nodes, even_plan = case
    data = prepare(even_plan, _mixed_cluster(300 + seed, num_racks, nodes), None, True)
    full = _solve(data, SolveBudget(20.0), enforce_kv_capacity=True, use_bounds=False)
    if full.status != "optimal":
        return
    values = dict(zip([o.key for o in _objectives(data)], _values(data, full)))
    held = {k: values[k] for k in ("spread", "pipelines_in_rack")}
    exact = rack_optimum(data, held, spread_instances_per_rack(data))
    if exact is None:
        return
    assert (exact.split_stages, exact.domains) == (values["pipelines_in_domain"], values["domains"])
    # The placement read back attains it and breaks no constraint.
    assert model_violations(data, exact.counts) == []
    found = objective_values(data, exact.counts)
    assert [found[k] for k in values] == list(values.values())


def test_the_fragmented_65536_gpu_benchmark_is_proven_optimal():
    # Every rack holds 20 prefill and 5 decode instances (the spread forces it); the colocated
    # ones go where whole free nodes are left. The rack programs prove 1024 split stages (the
    # rack LP's bound is 1012, the pooled one 794) and 7733 domains, and their placement is
    # reported (the greedy one touches 7854).
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=True, scale=64))
    result = place(placement_scaling.bench_plan(64), cluster, spread_racks=True, time_limit_s=30.0,
                   kv_bytes_per_request=placement_scaling.KV_BYTES_PER_REQUEST)
    assert result.status == "optimal"
    assert {o.proven_by for o in result.objectives} == {"bound"}
    values = {o.name: o.value for o in result.objectives}
    assert values["pipeline stages across NVLink domains"] == 1024 and values["NVLink domains touched"] == 7733
    assert validate_placement(result.plan, cluster, placement_scaling.KV_BYTES_PER_REQUEST) == []


def test_greedy_places_tp8_instances_on_a_cluster_short_of_empty_nodes():
    # 2,048 GPUs, fragmented: 110 empty nodes for 48 TP8 and 80 TP4 x PP2 instances. Full racks
    # used to give up their TP8 instances (to keep their prefill:decode split), which then fit
    # nowhere; the retry keeps them and splits PP instances instead.
    cluster = cluster_from_spec(placement_scaling.cluster_spec(fragmented=True, scale=2))
    data = prepare(placement_scaling.bench_plan(2), cluster, placement_scaling.KV_BYTES_PER_REQUEST, True)
    counts = greedy_counts(data)
    assert counts is not None and model_violations(data, counts) == []
