"""Placement on concrete GPUs: NVLink-domain rules, fragmentation, PP across nodes, KV and racks."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_placement_fixtures import plan, pool

from layoutopt.errors import InfeasibleError
from layoutopt.topology import load_cluster, place, validate_placement
from layoutopt.topology.cluster import GpuId
from layoutopt.topology.placement.encoding import instance_gpus, placed_instance

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"


def example(name: str):
    return load_cluster(EXAMPLES / f"{name}.yaml")


def test_tp16_fits_one_nvl72_domain():
    cluster = example("gb200-nvl72")
    result = place(plan(pool("decode", gpu="GB200", tp=16, instances=4)), cluster)
    assert result.status == "optimal"
    assert validate_placement(result.plan, cluster) == []
    first = result.plan.placement[0]
    assert len(first.nodes) == 4 and len(instance_gpus(first)) == 16   # four trays of 4


def test_tp16_spreads_over_two_whole_hgx_nodes():
    # The perf model costs a 16-GPU stage on 8-GPU domains as two domains of 8 (links.SpanningGroup).
    cluster = example("hgx-h100-rack")
    result = place(plan(pool("decode", tp=16, instances=2)), cluster)
    assert result.placed and validate_placement(result.plan, cluster) == []
    for placed in result.plan.placement:
        assert len(placed.nodes) == 2 and len(instance_gpus(placed)) == 16
        assert all(len(placed.gpus_by_node[n]) == 8 for n in placed.nodes)


def test_a_stage_split_unevenly_over_nodes_is_a_violation():
    cluster = example("hgx-h100-rack")
    result = place(plan(pool("decode", tp=16)), cluster)
    gpus = instance_gpus(result.plan.placement[0])
    nodes = sorted({g.node for g in gpus})
    # 8 + 4 + 4 GPUs over three nodes: not two whole domains of 8.
    other = next(n for n in cluster.nodes if n not in nodes)
    uneven = ([g for g in gpus if g.node == nodes[1]] + [GpuId(nodes[0], i) for i in range(4)]
              + [GpuId(other, i) for i in range(4)])
    first = result.plan.placement[0]
    broken = result.plan.model_copy(update={"placement": [placed_instance(
        first.instance_id, first.role, uneven, first.pool_index)]})
    problems = validate_placement(broken, cluster)
    assert any("spans local domains" in p and "2 whole groups of 8 GPUs" in p for p in problems), problems


def test_tp8_pp2_spans_two_hgx_nodes_and_reports_the_stage_link():
    cluster = example("hgx-h100-rack")
    result = place(plan(pool("decode", tp=8, pp=2, instances=2)), cluster)
    assert result.placed and validate_placement(result.plan, cluster) == []
    for placed in result.plan.placement:
        assert len(placed.nodes) == 2 and placed.nodes[0] != placed.nodes[1]
        assert ";" in placed.cuda_visible_devices
    link = result.pipeline_links[0]
    assert link.kind == "network" and link.bandwidth_gb_per_s == 50.0


@pytest.mark.parametrize(("tp", "instances"), [(1, 12), (2, 4), (1, 4)])
def test_fragmented_cluster_places_small_instances(tp, instances):
    cluster = example("fragmented-h100")
    result = place(plan(pool("decode", tp=tp, instances=instances)), cluster)
    assert result.placed
    assert validate_placement(result.plan, cluster) == []


@pytest.mark.parametrize("tp", [4, 8])
def test_fragmented_cluster_explains_why_large_instances_do_not_fit(tp):
    result = place(plan(pool("decode", tp=tp, instances=2)), example("fragmented-h100"))
    assert result.status == "infeasible"
    assert result.reasons[0].startswith(f"pool decode (H100-SXM tp{tp}-bf16) needs 2 groups of {tp} GPUs in one "
                                        f"NVLink domain; no node has {tp} free GPUs (free per node: f0 3, f1 3")


def test_pools_that_fit_alone_but_not_together():
    # Every node has 3 free GPUs: two TP2 pools of 4 instances each need 8 groups, 4 exist.
    result = place(plan(pool("prefill", tp=2, instances=2), pool("decode", tp=2, instances=3)),
                   example("fragmented-h100"))
    assert result.status == "infeasible"
    assert "do not pack" in result.reasons[0]


def test_spread_racks_puts_a_pool_on_both_racks():
    cluster = example("two-rack-h100-oversubscribed")
    for spread in (False, True):
        result = place(plan(pool("colocated", tp=8, instances=2), pool("colocated", tp=4, instances=2)), cluster,
                       spread_racks=spread)
        assert validate_placement(result.plan, cluster) == []
        if spread:
            for prefix in ("colocated-0-", "colocated-1-"):
                racks = {cluster.rack_of(p.node).name for p in result.plan.placement
                         if p.instance_id.startswith(prefix)}
                assert racks == {"rack-a", "rack-b"}


def test_prefill_and_decode_kept_in_one_rack_when_they_fit():
    cluster = example("two-rack-h100-oversubscribed")
    result = place(plan(pool("prefill", tp=2, instances=4, capacity_rps=2), pool("decode", tp=4, instances=2)),
                   cluster, kv_bytes_per_request=1e9)
    assert result.placed
    assert {p.scope for p in result.kv_pairings} <= {"same_domain", "same_rack"}
    assert all(r.egress_gb_per_s == 0 for r in result.rack_kv_traffic)
    assert result.kv_link is not None and result.kv_link.bandwidth_gb_per_s >= 50.0


def _one_node_racks(tmp_path, uplink_gbit_per_s: float):
    path = tmp_path / "one-node-racks.yaml"
    path.write_text(
        "racks:\n"
        f"  - {{name: a, uplink_gbit_per_s: {uplink_gbit_per_s}, nodes: [{{type: hgx-h100-8, count: 1}}]}}\n"
        f"  - {{name: b, uplink_gbit_per_s: {uplink_gbit_per_s}, nodes: [{{type: hgx-h100-8, count: 1}}]}}\n"
    )
    return load_cluster(path)


def test_kv_traffic_must_fit_the_rack_uplink(tmp_path):
    # One TP8 prefill and one TP8 decode, one node per rack: all KV crosses the 10 GB/s uplink.
    cluster = _one_node_racks(tmp_path, uplink_gbit_per_s=80)
    kv_plan = plan(pool("prefill", tp=8, capacity_rps=10), pool("decode", tp=8, capacity_rps=10))
    light = place(kv_plan, cluster, kv_bytes_per_request=0.5e9)        # 5 GB/s
    assert light.placed and validate_placement(light.plan, cluster, 0.5e9) == []
    assert sum(r.egress_gb_per_s for r in light.rack_kv_traffic) == pytest.approx(5.0)
    assert {p.scope for p in light.kv_pairings} == {"cross_rack"}
    heavy = place(kv_plan, cluster, kv_bytes_per_request=2e9)          # 20 GB/s
    assert heavy.status == "infeasible"
    assert "uplink" in heavy.reasons[0] and "colocated" in heavy.reasons[0]


def test_placement_is_deterministic():
    cluster = example("two-rack-h100-oversubscribed")
    mixed = plan(pool("prefill", tp=2, instances=6), pool("decode", tp=4, pp=2, instances=3),
                 pool("colocated", tp=8))
    first = place(mixed, cluster, spread_racks=True)
    second = place(mixed, cluster, spread_racks=True)
    assert first.plan.placement == second.plan.placement


def test_placement_leaves_the_input_plan_untouched():
    cluster = example("hgx-h100-rack")
    original = plan(pool("decode", tp=4, instances=2))
    result = place(original, cluster)
    assert original.placement == [] and len(result.plan.placement) == 2
    assert result.plan.pools == original.pools


def test_kv_link_for_plan_follows_the_pools_scope(tmp_path):
    from layoutopt.topology import kv_link_for_plan

    cluster = example("two-rack-h100-oversubscribed")
    assert kv_link_for_plan(cluster, plan(pool("colocated", tp=8))) is None
    small = kv_link_for_plan(cluster, plan(pool("prefill", tp=2, instances=4), pool("decode", tp=8, instances=2)))
    assert (small.kind, small.bandwidth_gb_per_s) == ("network", 50.0)
    large = kv_link_for_plan(cluster, plan(pool("prefill", tp=8, instances=3), pool("decode", tp=8, instances=3)))
    assert large.bandwidth_gb_per_s == pytest.approx(12.5)
