"""Rule rounds cap a refused layout at the instances legal splits hold, rather than dropping it
(optimizer/rule_rounds.py), checked against brute force on small fragmented clusters.

The table: colocated SGLang instances on H100, TP1 x PP4 (4 GPUs, 3 req/s), TP2 (2 GPUs, 1.2 req/s)
and TP1 (1 GPU, 0.5 req/s), objective max-goodput. The layout CP-SAT model only sees how many GPUs
each node has free, not that SGLang needs the same GPUs on every node of an instance, so on a
fragmented cluster its plan can ask for more TP1 x PP4 instances than place legally. The brute
force places every plan of the table, best first, and keeps the first that places: the best plan
the cluster can run.
"""

from __future__ import annotations

import itertools
import json

import pytest
from synthetic_candidates import make_candidate
from test_placement_node_rule import cluster_with_free

from layoutopt.engines import check_node_split
from layoutopt.hardware_catalog.budget import parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.assemble import pools_of
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.cluster_fit import cluster_budget, cluster_limits
from layoutopt.optimizer.plan_builder import build_plan
from layoutopt.optimizer.rule_rounds import Cap, capped, label_replanned, replan_around_rule
from layoutopt.optimizer.scaling import rate_units, to_integer_table
from layoutopt.optimizer.search import search
from layoutopt.topology import place
from layoutopt.topology.placement.node_rule import legal_instances
from layoutopt.topology.placement.data import prepare
from layoutopt.workloads.presets import default_workload
from layoutopt.workloads.slo import SLO

ENGINE = "sglang==0.5.23"
CANDIDATES = (make_candidate("colocated", pp_size=4, capacity_rps=3.0),
              make_candidate("colocated", tp_size=2, capacity_rps=1.2),
              make_candidate("colocated", tp_size=1, capacity_rps=0.5))
PP4 = CANDIDATES[0].name
# Every multiset of 2 or 3 nodes' free GPUs (1..8 each): 36 + 120 = 156 clusters.
FREE = [list(f) for n in (2, 3) for f in itertools.combinations_with_replacement(range(8, 0, -1), n)]


def _table(cluster) -> CandidateTable:
    limits = cluster_limits(cluster, cluster_budget(cluster, None))
    return CandidateTable(candidates=CANDIDATES, gpu_limits=dict(limits.gpu_limits),
                          domain_capacity_gpus=limits.domain_capacity_gpus)


def _context(cluster) -> dict:
    return dict(model=get_model("qwen3-32b"), slo=SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}, attainment=0.9),
                workload=default_workload(), objective="max-goodput", engine=ENGINE, headroom=0.7,
                budget=parse_budget(f"{cluster.budget(None).gpu_counts['H100-SXM']}xH100", load_catalog()),
                defaults_used=[], time_limit_s=10)


def _score(plan) -> tuple[int, float]:
    """max-goodput's order: rate units, then less cost."""
    if not plan.pools:
        return (-1, 0.0)
    rate = sum(rate_units(c.capacity_rps) * p.instances for p in plan.pools for c in CANDIDATES
               if c.layout.short_name() == p.layout.short_name())
    return (rate, -round(plan.totals.cost_usd_per_hour, 6))


def _replan(cluster, keep_legal_instances: bool):
    """What solve does after placement refused a split: (first plan, final plan, rounds)."""
    table, context = _table(cluster), _context(cluster)

    def resolve(t, caps):
        return search(capped(to_integer_table(t), caps), "max-goodput", 10.0, 0, 0.0)

    def build(found, t):
        return build_plan(found, table=t, **context)

    def place_plan(plan, t, found):
        result = place(plan.model_copy(update={"engine": ENGINE}), cluster)
        return result, result.plan if result.placed else plan

    found = resolve(table, {})
    first = build(found, table)
    result, placed = place_plan(first, table, found)
    if result.placed or not result.rule_refusals:
        return first, placed if result.placed else first.model_copy(update={"pools": []}), None
    rounds = replan_around_rule(first.model_copy(update={"pools": []}), result, table, found, resolve=resolve,
                                build=build, place_plan=place_plan, keep_legal_instances=keep_legal_instances)
    final = rounds.plan if rounds.result.placed else first.model_copy(update={"pools": []})
    return first, label_replanned(final, first, rounds.final_caps), rounds


def _brute_force_best(cluster, first) -> tuple[int, float]:
    """The best score of any plan of the table that places legally on ``cluster``."""
    free = cluster.budget(None).gpu_counts["H100-SXM"]
    plans = []
    for counts in itertools.product(*(range(free // c.gpus_per_instance + 1) for c in CANDIDATES)):
        if 0 < sum(n * c.gpus_per_instance for n, c in zip(counts, CANDIDATES)) <= free:
            pools = pools_of([(c, n) for c, n in zip(CANDIDATES, counts) if n])
            plans.append(first.model_copy(update={"pools": pools, "placement": []}))
    for plan in sorted(plans, key=lambda p: _score_pools(p), reverse=True):
        if place(plan, cluster).placed:
            return _score_pools(plan)
    return (-1, 0.0)


def _score_pools(plan) -> tuple[int, float]:
    rate = sum(rate_units(c.capacity_rps) * p.instances for p in plan.pools for c in CANDIDATES
               if c.layout.short_name() == p.layout.short_name())
    return (rate, -round(sum(p.cost_usd_per_hour for p in plan.pools), 6))


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """(free GPUs per node, capped plan, dropped plan, brute force's best score) where a split was refused."""
    folder = tmp_path_factory.mktemp("caps")
    found = []
    for free in FREE:
        cluster = cluster_with_free(folder, free)
        first, capped_plan, rounds = _replan(cluster, True)
        if rounds is None:
            continue
        _, dropped_plan, _ = _replan(cluster, False)
        found.append((free, capped_plan, dropped_plan, _brute_force_best(cluster, first), rounds))
    return found


def test_capping_is_never_worse_than_dropping_and_wins_where_a_better_plan_places(cases):
    assert len(cases) >= 20, "the sweep must hit refused splits"
    wins = []
    for free, capped_plan, dropped_plan, best, _ in cases:
        assert _score(capped_plan) >= _score(dropped_plan), free
        # the capped re-solve finds the best plan that places (brute force), dropping often does not
        assert _score(capped_plan) == best, (free, capped_plan.pools, best)
        if _score(dropped_plan) < best:
            wins.append(free)
        for assignment in capped_plan.placement:
            counts = [len(g) for g in assignment.gpus_by_node.values()]
            layout = capped_plan.pools[assignment.pool_index].layout
            assert not check_node_split(ENGINE, layout, counts), (free, counts)
    assert [4, 3, 1] in wins and len(wins) >= len(cases) - 5, wins


def test_the_cap_is_placements_legal_count_and_a_plan_keeps_that_many(tmp_path):
    """4 + 3 + 1 free: TP1 x PP4 splits legally as 4 on one node or 2 + 2 (once: one node has 3),
    never 1 + 1 + 1 + 1 (three nodes); the plan of 2 is refused, 1 is kept beside TP2 + TP1 + TP1."""
    cluster = cluster_with_free(tmp_path, [4, 3, 1])
    first, plan, rounds = _replan(cluster, True)
    assert [(p.layout.short_name(), p.instances) for p in first.pools] == [("tp1-pp4-fp8-kvbf16", 2)]
    cap, = rounds.caps  # one round: at most 1, in parts of >= 2 GPUs (4 on a node, or 2 + 2)
    assert (cap.legal_instances, cap.max_instances, cap.group_gpus) == (1, 1, 2)
    assert sorted((p.layout.short_name(), p.instances) for p in plan.pools) == [
        ("tp1-fp8-kvbf16", 2), ("tp1-pp4-fp8-kvbf16", 1), ("tp2-fp8-kvbf16", 1)]
    _, dropped, _ = _replan(cluster, False)
    assert _score(dropped) < _score(plan)
    assert plan.totals.goodput_rps == pytest.approx(3.0 + 1.2 + 2 * 0.5)
    assert dropped.totals.goodput_rps == pytest.approx(3 * 1.2 + 2 * 0.5)  # no PP4: TP2 x 3 + TP1 x 2


def test_refusal_is_structured_not_read_from_text(tmp_path):
    cluster = cluster_with_free(tmp_path, [4, 3, 1])
    pools = pools_of([(CANDIDATES[0], 2)])
    first, _, _ = _replan(cluster, True)
    result = place(first.model_copy(update={"pools": pools, "placement": []}), cluster)
    assert not result.placed
    refusal, = result.rule_refusals
    assert refusal.pool_index == 0 and refusal.rule == "uneven_nodes"
    assert (refusal.legal_instances, refusal.part_gpus) == (1, 2)
    assert refusal.reason == result.reasons[0] and "engine.py:" in refusal.reason
    assert result.rule_refused_pools == [0]
    data = prepare(result.plan, cluster, None, False)
    assert legal_instances(result.plan, data, 0) == 1


@pytest.mark.parametrize("free, pp, expected", [
    ([8], 4, 2), ([4, 4, 4], 4, 3), ([3, 3, 3, 3], 4, 3), ([4, 3, 1], 4, 1), ([3, 1, 2], 4, 1),
    ([3, 1], 4, 0), ([2, 2, 2, 2, 2], 4, 2), ([7, 3], 4, 2), ([1, 1, 1], 4, 0), ([7, 7], 8, 1), ([5, 3], 8, 0)])
def test_legal_instances_counts_equal_part_splits(tmp_path, free, pp, expected):
    """One part size per count: 3 + 3 + 3 + 3 holds three PP4 instances of 1 + 1 + 1 + 1 (an instance's
    parts on different nodes); 7 + 3 two (4 on one node, 2 + 2), 2 x 5 two; 7 + 7 one PP8 as 4 + 4."""
    cluster = cluster_with_free(tmp_path, free)
    candidate = make_candidate("colocated", pp_size=pp)
    first, _, _ = _replan(cluster, True)
    plan = first.model_copy(update={"pools": pools_of([(candidate, 1)]), "placement": []})
    assert legal_instances(plan, prepare(plan, cluster, None, False), 0) == expected


def test_caps_are_deterministic(tmp_path):
    cluster = cluster_with_free(tmp_path, [4, 3, 1])
    runs = [json.dumps(_replan(cluster, True)[1].model_dump(mode="json", exclude={"solver": {"wall_time_s"}}),
                       sort_keys=True) for _ in range(2)]
    assert runs[0] == runs[1]


def test_capped_table_bounds_the_instance_variable():
    table = to_integer_table(CandidateTable(candidates=CANDIDATES, gpu_limits={"H100-SXM": 16}))
    caps = [Cap(PP4, "", 2, 1, 1, 2, ""), Cap(CANDIDATES[2].name, "", 1, 0, 0, 1, "")]
    limited = capped(table, caps)
    by_name = {c.name: c for c in limited.candidates}
    assert by_name[PP4].max_instances == 1 and by_name[PP4].domain_group_gpus == 2
    assert CANDIDATES[2].name not in by_name
    assert by_name[CANDIDATES[1].name].max_instances == 8
    outcome = search(limited, "max-goodput", 5.0).best
    assert outcome.counts == {PP4: 1, CANDIDATES[1].name: 6}
