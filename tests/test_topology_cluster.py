"""Cluster files, the cluster graph, paths and the KV links a cluster offers."""

from __future__ import annotations

from pathlib import Path

import pytest

from layoutopt.errors import InputError
from layoutopt.hardware_catalog import parse_budget
from layoutopt.topology import (
    GpuId,
    cluster_from_budget,
    kv_link_for_pools,
    load_cluster,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"


def example(name: str):
    return load_cluster(EXAMPLES / f"{name}.yaml")


@pytest.mark.parametrize(
    ("name", "num_gpus", "free", "gpu", "domain_gpus"),
    [
        ("hgx-h100-rack", 32, {"H100-SXM": 32}, "H100-SXM", 8),
        ("two-rack-h100-oversubscribed", 64, {"H100-SXM": 64}, "H100-SXM", 8),
        ("gb200-nvl72", 72, {"GB200": 72}, "GB200", 72),
        ("fragmented-h100", 40, {"H100-SXM": 12}, "H100-SXM", 8),
    ],
)
def test_examples_load(name, num_gpus, free, gpu, domain_gpus):
    cluster = example(name)
    assert cluster.num_gpus == num_gpus
    assert cluster.gpu_counts_by_type() == free
    assert cluster.max_scaleup_domain(gpu) == domain_gpus
    assert cluster.budget().gpu_counts == free


def test_graph_has_every_kind_with_bandwidth_and_latency_on_edges():
    graph = example("two-rack-h100-oversubscribed").graph
    kinds = {data["kind"] for _, data in graph.nodes(data=True)}
    assert kinds == {"gpu", "node", "nvswitch", "nic", "rack", "spine"}
    assert sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "gpu") == 64
    for _, _, data in graph.edges(data=True):
        assert data["bandwidth_gb_per_s"] > 0 and data["latency_us"] >= 0


def test_nvl72_is_one_domain_over_18_trays():
    cluster = example("gb200-nvl72")
    (domain,) = cluster.domains.values()
    assert domain.num_gpus == 72 and len(domain.nodes) == 18
    a, b = GpuId("nvl72-0-n0", 0), GpuId("nvl72-0-n17", 3)
    assert cluster.path(a, b) == ["gpu:nvl72-0-n0/0", f"nvswitch:{domain.name}", "gpu:nvl72-0-n17/3"]
    assert cluster.path_bandwidth_gb_per_s(a, b) == 900.0


def test_path_bandwidth_by_scope_with_4_to_1_oversubscription():
    cluster = example("two-rack-h100-oversubscribed")
    a0, a0b, a1, b0 = GpuId("a0", 0), GpuId("a0", 5), GpuId("a1", 0), GpuId("b0", 0)
    assert cluster.path_bandwidth_gb_per_s(a0, a0b) == 450.0          # NVLink
    assert cluster.path_bandwidth_gb_per_s(a0, a1) == 50.0            # 400 Gb/s NIC
    assert cluster.path_bandwidth_gb_per_s(a0, b0) == pytest.approx(12.5)  # 50 / 4
    assert cluster.path_latency_us(a0, a0b) < cluster.path_latency_us(a0, a1) < cluster.path_latency_us(a0, b0)


def test_pcie_nodes_have_one_gpu_domains():
    cluster = cluster_from_budget(parse_budget("8xL40S"))
    assert cluster.max_scaleup_domain("L40S") == 1
    assert cluster.kv_link("same_domain").kind == "pcie"


def test_free_gpus_skip_in_use_down_and_failed_nodes():
    cluster = example("fragmented-h100")
    free = cluster.free_gpus()
    assert GpuId("f0", 0) not in free and GpuId("f0", 5) in free
    assert GpuId("f2", 7) not in free and cluster.gpu_state(GpuId("f2", 7)) == "down"
    assert all(g.node != "f4" for g in free)
    assert {g.node for g in free} == {"f0", "f1", "f2", "f3"}
    assert cluster.stage_group_capacity("H100-SXM", 2) == 4
    assert cluster.stage_group_capacity("H100-SXM", 4) == 0


@pytest.mark.parametrize("ratio", [1.0, 2.0, 4.0, 8.0])
def test_cross_rack_kv_bandwidth_is_nic_over_oversubscription(tmp_path, ratio):
    cluster = _two_racks(tmp_path, ratio)
    assert cluster.kv_link("same_rack").bandwidth_gb_per_s == 50.0
    assert cluster.kv_link("cross_rack").bandwidth_gb_per_s == pytest.approx(50.0 / ratio)


def test_kv_bandwidth_the_optimizer_can_count_on_drops_with_oversubscription(tmp_path):
    """Pools that fit one rack keep the NIC rate; pools that need both racks get the uplink share."""
    by_ratio = {}
    for ratio in (1.0, 4.0, 16.0):
        cluster = _two_racks(tmp_path, ratio)
        in_one_rack = kv_link_for_pools(cluster, 16, 16)
        both_racks = kv_link_for_pools(cluster, 24, 32)
        assert in_one_rack.bandwidth_gb_per_s == 50.0
        by_ratio[ratio] = both_racks.bandwidth_gb_per_s
    assert by_ratio[1.0] > by_ratio[4.0] > by_ratio[16.0]
    assert by_ratio[16.0] == pytest.approx(50.0 / 16)
    assert kv_link_for_pools(_two_racks(tmp_path, 4.0), 4, 4).kind == "nvlink"   # one HGX node


def test_budget_expands_to_default_nodes_in_one_rack():
    cluster = cluster_from_budget(parse_budget("32xH100"))
    assert len(cluster.nodes) == 4 and len(cluster.racks) == 1
    assert cluster.gpu_counts_by_type() == {"H100-SXM": 32}
    partial = cluster_from_budget(parse_budget("12xH100"))
    assert len(partial.nodes) == 2 and partial.gpu_counts_by_type() == {"H100-SXM": 12}
    nvl = cluster_from_budget(parse_budget("8xGB200"))
    assert len(nvl.nodes) == 18 and nvl.gpu_counts_by_type() == {"GB200": 8}
    assert nvl.max_scaleup_domain("GB200") == 72


BAD_FILES = [
    ("racks: [{name: r, nodes: [{type: hgx-h10-8, count: 1}]}]", "racks[0].nodes[0].type", "hgx-h100-8"),
    ("racks: [{name: r, nodes: [{type: gb200-nvl72-tray, count: 4}]}]", "racks[0].nodes[0].count", "multiple of 18"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 0}]}]", "racks[0].nodes[0].count", "greater than or equal"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 1, colour: red}]}]", "racks[0].nodes[0].colour", "Extra"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 2, names: [x]}]}]", "racks[0].nodes[0]", "names lists 1"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 1}]}, {name: r, nodes: [{type: hgx-h100-8, count: 1}]}]",
     "cluster", "unique"),
    ("network: {oversubscription: 0.5}\nracks: [{name: r, nodes: [{type: hgx-h100-8, count: 1}]}]",
     "network.oversubscription", "greater than or equal to 1"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 1}]}]\nunavailable: {gpus_in_use: {r-n0: [9]}}",
     "unavailable.gpus_in_use.r-n0[0]", "0..7"),
    ("racks: [{name: r, nodes: [{type: hgx-h100-8, count: 1}]}]\nunavailable: {nodes_down: [r-n1]}",
     "unavailable.nodes_down[0]", "r-n0"),
    (("node_types: [{name: box, gpu: H1000, gpus_per_node: 8, nvlink_domain_gpus: 8, nics_per_node: 8, "
      "nic_gbit_per_s: 400, source: x}]\nracks: [{name: r, nodes: [{type: box, count: 1}]}]"),
     "node_types[0].gpu", "H100"),
    ("- just a list", "", "mapping"),
]


@pytest.mark.parametrize(("text", "field", "message"), BAD_FILES)
def test_bad_cluster_files_name_the_field(tmp_path, text, field, message):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_cluster(path)
    assert field in caught.value.field
    assert message in str(caught.value)


def _two_racks(tmp_path, ratio: float):
    path = tmp_path / f"two-racks-{ratio}.yaml"
    path.write_text(
        f"network: {{oversubscription: {ratio}}}\n"
        "racks:\n"
        "  - {name: a, nodes: [{type: hgx-h100-8, count: 4}]}\n"
        "  - {name: b, nodes: [{type: hgx-h100-8, count: 4}]}\n"
    )
    return load_cluster(path)
