"""Placement honours the engine's node-split rule (``uneven_nodes``, engines.rules.check_node_split).

A fragmented cluster let the rule-free placement split an SGLang PP4 instance 3 + 1 over two nodes,
which ``emit`` then refused; placement now splits it evenly (or says which rule leaves no room).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from test_placement_fixtures import plan, pool
from test_report_helpers import fixture_plan
from test_report_matrix import _pool, check_emitted_files

from layoutopt.engines import check_node_split
from layoutopt.engines.plan_rules import plan_rule_violations
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.report.emit import render
from layoutopt.topology import load_cluster, place, validate_placement
from layoutopt.topology.placement.node_rule import arrange_parts
from layoutopt.topology.cluster import GpuId

RELEASE = {"vllm": "0.33.0", "sglang": "0.5.23"}
FRAGMENTED = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "fragmented-h100.yaml"


def cluster_with_free(tmp_path: Path, free: list[int]):
    """One rack of HGX H100 nodes n0, n1, ... with ``free[i]`` free GPUs on node i (the rest in use)."""
    in_use = "".join(f"    n{i}: [{', '.join(str(g) for g in range(8 - f))}]\n" for i, f in enumerate(free) if f < 8)
    path = tmp_path / f"free-{'-'.join(map(str, free))}.yaml"
    path.write_text("name: test-free\nracks:\n  - name: r0\n    nodes:\n"
                    f"      - {{type: hgx-h100-8, count: {len(free)}, names: [{', '.join(f'n{i}' for i in range(len(free)))}]}}\n"
                    + (f"unavailable:\n  gpus_in_use:\n{in_use}" if in_use else ""))
    return load_cluster(path)


def on(engine: str, *pools):
    return plan(*pools).model_copy(update={"engine": engine})


def splits(result) -> list[list[int]]:
    return [[len(g) for g in p.gpus_by_node.values()] for p in result.plan.placement]


def test_sglang_pp4_on_the_fragmented_cluster_is_split_evenly_and_emits():
    cluster = load_cluster(FRAGMENTED)
    sglang = on("sglang", pool("colocated", tp=1, pp=4, instances=3))
    result = place(sglang, cluster)
    assert result.placed and validate_placement(result.plan, cluster) == []
    # 3 free GPUs on each of four nodes: 2 + 2 twice and 1 + 1 + 1 + 1 is out of one part size, so 1 x 4
    assert all(len(set(s)) == 1 for s in splits(result)), splits(result)
    assert all(not check_node_split("sglang", sglang.pools[0].layout, s) for s in splits(result))
    # the rule-free placement (vLLM without DP has no such rule) keeps the 3 + 1 split it always made
    assert [3, 1] in splits(place(on("vllm", pool("colocated", tp=1, pp=4, instances=3)), cluster))


def test_a_placement_that_splits_evenly_still_proves_its_objectives():
    cluster = load_cluster(FRAGMENTED)
    result = place(on("sglang", pool("colocated", tp=1, pp=4)), cluster)
    assert splits(result) == [[2, 2]]
    assert result.status == "optimal" and all(o.proven_by != "none" for o in result.objectives)


def test_instances_of_one_pool_may_split_in_different_part_sizes(tmp_path):
    """1 + 3 + 3 + 3 free GPUs hold two SGLang PP4 instances only as 2 + 2 and 1 + 1 + 1 + 1 (both
    2 + 2 needs four nodes with 2 free, both 1 + 1 + 1 + 1 two GPUs on the first node)."""
    cluster = cluster_with_free(tmp_path, [1, 3, 3, 3])
    result = place(on("sglang", pool("colocated", tp=1, pp=4, instances=2)), cluster)
    assert result.placed and validate_placement(result.plan, cluster) == []
    assert sorted(splits(result)) == [[1, 1, 1, 1], [2, 2]]
    assert [p.instance_id for p in result.plan.placement] == ["colocated-0-0", "colocated-0-1"]


def test_no_even_split_is_infeasible_naming_the_rule(tmp_path):
    cluster = cluster_with_free(tmp_path, [3, 1])
    result = place(on("sglang", pool("colocated", tp=1, pp=4)), cluster)
    assert result.status == "infeasible" and not result.plan.placement
    assert any("uneven_nodes" in r and "sglang" in r and "engine.py:" in r for r in result.reasons), result.reasons
    # vLLM runs TP1 x PP4 (no DP) over 3 + 1 GPUs (one Ray placement group over the nodes)
    assert splits(place(on("vllm", pool("colocated", tp=1, pp=4)), cluster)) == [[3, 1]]


def test_a_tp_group_over_the_trays_of_an_nvl72_domain_splits_evenly_for_sglang(tmp_path):
    """One GPU of each of the 18 trays (4 GPUs each) in use: a TP4 group takes 3 + 1 GPUs of two
    trays rule-free (what vLLM runs), 2 + 2 for SGLang; TP8 2 + 2 + 2 + 2."""
    trays = ", ".join(f"t{i}" for i in range(18))
    path = tmp_path / "nvl72-busy.yaml"
    path.write_text("name: nvl72-busy\nracks:\n  - name: nvl72-0\n    nodes:\n"
                    f"      - {{type: gb200-nvl72-tray, count: 18, names: [{trays}]}}\n"
                    "unavailable:\n  gpus_in_use:\n" + "".join(f"    t{i}: [0]\n" for i in range(18)))
    cluster = load_cluster(path)
    assert splits(place(on("vllm", pool("decode", gpu="GB200", tp=4, instances=3)), cluster)) == [[3, 1]] * 3
    for tp, expected in ((4, [2, 2]), (8, [2, 2, 2, 2])):
        result = place(on("sglang", pool("decode", gpu="GB200", tp=tp, instances=2)), cluster)
        assert result.status == "optimal" and validate_placement(result.plan, cluster) == []
        assert splits(result) == [expected] * 2


def test_vllm_dp_ranks_stay_whole_on_each_node(tmp_path):
    # TP1 x PP2 ranks, DP2: 3 + 1 puts half a rank on the second node; 2 + 2 keeps each rank whole.
    cluster = cluster_with_free(tmp_path, [3, 3])
    layout = pool("colocated", tp=1, pp=2, dp=2)
    result = place(on("vllm", layout), cluster)
    assert result.placed
    assert all(not check_node_split("vllm", layout.layout, s) for s in splits(result)), splits(result)


def test_the_placed_sglang_plan_emits():
    """The placement emit used to refuse (3 + 1) is now 2 + 2, which emit writes and the engine
    flag checker accepts."""
    cluster = load_cluster(FRAGMENTED)
    placed = place(on("sglang", pool("colocated", tp=1, pp=4)), cluster).plan.placement
    assert [[len(g) for g in p.gpus_by_node.values()] for p in placed] == [[2, 2]]
    base = fixture_plan("disaggregated")
    emitted = base.model_validate({**base.model_dump(), "model": "qwen3-32b", "mode": "colocated",
                                   "pools": [_pool("colocated", tp=1, pp=4, precision="bf16", kv="bf16")],
                                   "placement": [p.model_dump() for p in placed], "cluster": "fragmented-h100"})
    files = render(emitted, engine="sglang", model_id=None, plots=False)
    check_emitted_files(files, "sglang", "0.5.23")
    assert "--nnodes 2" in files["launch/colocated-0-0.sh"].replace(" \\\n", " ").replace("=", " ")


def test_arrange_parts_never_gives_an_instance_two_parts_of_one_domain():
    rng = random.Random(7)
    for _ in range(200):
        instances, per_instance = rng.randint(1, 5), rng.randint(2, 4)
        domains = [f"d{i}" for i in range(rng.randint(per_instance, 7))]
        counts = dict.fromkeys(domains, 0)
        for _ in range(instances * per_instance):   # random counts with at most `instances` per domain
            counts[rng.choice([d for d in domains if counts[d] < instances])] += 1
        parts = [(d, (GpuId(d, j),)) for d in domains for j in range(counts[d])]
        groups = arrange_parts(parts, per_instance, 1)
        assert sorted(groups) == sorted(g for _, g in parts)
        for k in range(instances):
            mine = [g[0].node for g in groups[k * per_instance:(k + 1) * per_instance]]
            assert len(set(mine)) == per_instance


def _valid_placement_exists(engine, layout, stage_gpus: int, stages: int, instances: int, free: list[int]) -> bool:
    """Brute force: per-node stage counts for each instance (stages of one instance on one node
    together) fitting the free GPUs, every instance's split accepted by the rule."""
    shapes = [c for c in itertools.product(range(stages + 1), repeat=len(free)) if sum(c) == stages
              and not check_node_split(engine, layout, [n * stage_gpus for n in c if n])]

    def fits(left: int, room: tuple[int, ...], start: int) -> bool:
        if not left:
            return True
        for i in range(start, len(shapes)):   # instances are interchangeable: shapes in order
            after = tuple(r - n * stage_gpus for r, n in zip(room, shapes[i]))
            if min(after) >= 0 and fits(left - 1, after, i):
                return True
        return False

    return fits(instances, tuple(free), 0)


CASES = [(engine, tp, pp, dp, n, free)
         for engine in ("sglang", "vllm")
         for tp, pp, dp in ((1, 4, 1), (1, 3, 1), (2, 2, 1), (1, 2, 2), (1, 4, 2), (2, 3, 1))
         for n in (1, 2, 3)
         for free in ([3, 3, 3, 3], [3, 1], [4, 2, 2], [5, 3], [6, 2, 1, 3], [2, 2, 2], [1, 3, 3, 3])
         if tp * pp * dp * n <= sum(free)]


@pytest.mark.parametrize("engine, tp, pp, dp, n, free", CASES)
def test_every_placement_passes_the_rule_and_brute_force_agrees_where_one_exists(tmp_path, engine, tp, pp, dp, n,
                                                                                 free):
    cluster = cluster_with_free(tmp_path, free)
    the_pool = pool("colocated", tp=tp, pp=pp, dp=dp, instances=n)
    result = place(on(engine, the_pool), cluster)
    exists = _valid_placement_exists(engine, the_pool.layout, tp * dp, pp, n, free)
    if result.placed:
        assert validate_placement(result.plan, cluster) == []
        assert all(not check_node_split(engine, the_pool.layout, s) for s in splits(result)), splits(result)
        assert exists
    else:
        # Placement tries one part size per pool, then mixes of two (part_options): on these small
        # clusters that finds every placement the rule allows.
        assert not exists, (result.reasons, free)


@pytest.mark.parametrize("model", ["qwen3-32b", "llama-3.1-70b"])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_plan_solve_places_on_the_fragmented_cluster_passes_the_plan_rules_and_emits(model, engine):
    """E.g. llama-3.1-70b for SGLang (when written): 2 x prefill TP1 x PP4 and a TP2 decode on 3 + 3 + 3 + 3
    free GPUs, which the rule-free placement split 3 + 1 (emit refused the plan); now 2 + 2 and 1 + 1 + 1 + 1."""
    from layoutopt import api
    catalog = load_catalog()
    planned = api.solve(model, cluster=FRAGMENTED, isl=2000, osl=200, engine=engine)
    assert planned.status == "optimal" and planned.placement
    gpus = [catalog.gpu(p.gpu) for p in planned.pools]
    assert plan_rule_violations(engine, planned, get_model(model), gpus) == []
    files = render(planned, engine=engine, plots=False)
    check_emitted_files(files, engine, RELEASE[engine])
