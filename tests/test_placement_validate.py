"""The validator catches hand-made violations, and agrees with the solver on random inputs."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_placement_fixtures import plan, pool

from layoutopt.plan import PlacedInstance
from layoutopt.topology import (
    GpuId,
    cluster_from_spec,
    load_cluster,
    place,
    validate_placement,
)
from layoutopt.topology.placement.encoding import instance_gpus, placed_instance
from layoutopt.topology.spec import (
    ClusterSpec,
    NodeGroupSpec,
    RackSpec,
    UnavailableSpec,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"
TWO_RACKS = load_cluster(EXAMPLES / "two-rack-h100-oversubscribed.yaml")
FRAGMENTED = load_cluster(EXAMPLES / "fragmented-h100.yaml")


def placed(instance_id: str, role: str, *gpus: tuple[str, int]) -> PlacedInstance:
    return placed_instance(instance_id, role, [GpuId(node, index) for node, index in gpus])


def with_placement(base, *rows: PlacedInstance):
    return base.model_copy(update={"placement": list(rows)})


def test_valid_hand_placement_passes():
    good = with_placement(plan(pool("decode", tp=2, instances=2)),
                          placed("decode-0-0", "decode", ("a0", 0), ("a0", 1)),
                          placed("decode-0-1", "decode", ("b3", 6), ("b3", 7)))
    assert validate_placement(good, TWO_RACKS) == []


def test_two_instances_on_one_gpu():
    bad = with_placement(plan(pool("decode", tp=2, instances=2)),
                         placed("decode-0-0", "decode", ("a0", 0), ("a0", 1)),
                         placed("decode-0-1", "decode", ("a0", 1), ("a0", 2)))
    assert validate_placement(bad, TWO_RACKS) == ["decode-0-1: GPU a0/1 is also used by decode-0-0"]


def test_tp_group_across_nodes():
    bad = with_placement(plan(pool("decode", tp=8)),
                         placed("decode-0-0", "decode", *[("a0", i) for i in range(4)], *[("a1", i) for i in range(4)]))
    (violation,) = validate_placement(bad, TWO_RACKS)
    assert "pipeline stage 0 (8 GPUs) spans local domains (a0 4, a1 4)" in violation


def test_pp_stages_may_span_nodes():
    good = with_placement(plan(pool("decode", tp=4, pp=2)),
                          placed("decode-0-0", "decode", *[("a0", i) for i in range(4)], *[("b1", i) for i in range(4)]))
    assert validate_placement(good, TWO_RACKS) == []


def test_busy_down_and_missing_gpus():
    bad = with_placement(plan(pool("decode", tp=1, instances=3)),
                         placed("decode-0-0", "decode", ("f0", 0)),
                         placed("decode-0-1", "decode", ("f4", 1)),
                         placed("decode-0-2", "decode", ("f0", 9)))
    assert validate_placement(bad, FRAGMENTED) == [
        "decode-0-0: GPU f0/0 is in use",
        "decode-0-1: GPU f4/1 is down",
        "decode-0-2: GPU f0/9 does not exist in the cluster",
    ]


def test_counts_sizes_types_and_fields():
    base = plan(pool("decode", tp=2, instances=2), pool("prefill", gpu="H200-SXM", tp=1))
    bad = with_placement(base,
                         placed("decode-0-0", "decode", ("a0", 0)),
                         placed("prefill-1-0", "prefill", ("a0", 4)),
                         PlacedInstance(instance_id="decode-0-1", role="decode", node="a1", gpus=[0, 1], nodes=["a1"],
                                        cuda_visible_devices="0,2"))
    assert validate_placement(bad, TWO_RACKS) == [
        "decode-0-0: 1 GPUs but tp2-bf16 needs 2",
        "prefill-1-0: GPU a0/4 is a H100-SXM, the pool needs H200-SXM",
        "decode-0-1: cuda_visible_devices '0,2' does not list gpus [0, 1]",
    ]


def test_missing_instances_and_unknown_pool():
    bad = with_placement(plan(pool("decode", tp=1, instances=2)),
                         placed("decode-0-0", "decode", ("a0", 0)),
                         placed("decode-0-0", "decode", ("a0", 1)),
                         placed("prefill-3-0", "prefill", ("a0", 2)))
    violations = validate_placement(bad, TWO_RACKS)
    assert "instance id 'decode-0-0' is used 2 times" in violations
    assert "prefill-3-0: pool index 3 but the plan has 1 pools" in violations


def test_kv_overflowing_an_uplink():
    # 16 GB/s of KV from rack a to rack b; each uplink carries 1,600 GB/s / 4 = 400 GB/s.
    kv_plan = plan(pool("prefill", tp=8, capacity_rps=16), pool("decode", tp=8, capacity_rps=16))
    across = with_placement(kv_plan, placed("prefill-0-0", "prefill", *[("a0", i) for i in range(8)]),
                            placed("decode-1-0", "decode", *[("b0", i) for i in range(8)]))
    assert validate_placement(across, TWO_RACKS, kv_bytes_per_request=1e9) == []
    out_of_a, into_b = validate_placement(across, TWO_RACKS, kv_bytes_per_request=30e9)
    assert out_of_a.startswith("rack rack-a: KV traffic out 480.00 GB/s")
    assert into_b.startswith("rack rack-b: KV traffic out 0.00 GB/s, in 480.00 GB/s exceeds its uplink 400.00")


def test_encoding_round_trips_multi_node_instances():
    gpus = [GpuId("a0", 4), GpuId("a0", 5), GpuId("b2", 0), GpuId("b2", 1)]
    row = placed_instance("decode-0-0", "decode", gpus)
    assert (row.node, row.gpus, row.nodes) == ("a0", [4, 5], ["a0", "b2"])
    assert row.cuda_visible_devices == "a0:4,5;b2:0,1"
    assert instance_gpus(row) == gpus


@st.composite
def clusters_and_plans(draw):
    num_racks = draw(st.integers(1, 3))
    racks, in_use = [], {}
    for r in range(num_racks):
        count = draw(st.integers(1, 3))
        racks.append(RackSpec(name=f"r{r}", nodes=[NodeGroupSpec(type="hgx-h100-8", count=count)]))
        for n in range(count):
            taken = draw(st.lists(st.integers(0, 7), max_size=6, unique=True))
            if taken:
                in_use[f"r{r}-n{n}"] = taken
    cluster = cluster_from_spec(ClusterSpec(racks=racks, unavailable=UnavailableSpec(gpus_in_use=in_use)))
    roles = draw(st.lists(st.sampled_from(["prefill", "decode", "colocated"]), min_size=1, max_size=3))
    pools = [pool(role, tp=draw(st.sampled_from([1, 2, 4, 8])), pp=draw(st.sampled_from([1, 1, 2])),
                  instances=draw(st.integers(1, 4)), capacity_rps=draw(st.sampled_from([0.5, 1.0, 3.0])))
             for role in roles]
    return cluster, plan(*pools), draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters_and_plans())
def test_solver_placements_always_validate(case):
    cluster, random_plan, spread = case
    result = place(random_plan, cluster, spread_racks=spread, time_limit_s=5.0)
    if not result.placed:
        assert result.status == "infeasible" and result.reasons
        assert not _first_fit_places(random_plan, cluster), "a greedy packing exists, yet the solver refused"
        return
    assert validate_placement(result.plan, cluster) == []
    used = [gpu for row in result.plan.placement for gpu in instance_gpus(row)]
    assert len(used) == len(set(used)) == sum(p.num_gpus for p in random_plan.pools)


def _first_fit_places(random_plan, cluster) -> bool:
    """Whether first-fit decreasing packs every stage group into the free GPUs of the domains."""
    free = {name: len(cluster.free_in_domain(name)) for name in cluster.domains}
    groups = sorted((p.layout.gpus_per_stage for p in random_plan.pools for _ in range(p.instances * p.pp_size)),
                    reverse=True)
    for size in groups:
        home = next((name for name, room in free.items() if room >= size), None)
        if home is None:
            return False
        free[home] -= size
    return True
