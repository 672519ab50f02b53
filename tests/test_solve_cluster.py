"""``solve`` on a cluster (issue 5): domain sizes, fragmentation, KV over racks, placement of every plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_placement_fixtures import plan as hand_plan
from test_placement_fixtures import pool

from layoutopt import api
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import parse_budget
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer import solve as solve_module
from layoutopt.perf_model.kv_transfer import kv_transfer_bytes
from layoutopt.report.launch import expand_instances
from layoutopt.topology import (
    cluster_from_budget,
    load_cluster,
    place,
    validate_placement,
)
from layoutopt.topology.placement.encoding import instance_gpus
from layoutopt.workloads.slo import SLO

CLUSTERS = Path(__file__).resolve().parents[1] / "examples" / "clusters"
HGX = CLUSTERS / "hgx-h100-rack.yaml"
TWO_RACKS = CLUSTERS / "two-rack-h100-oversubscribed.yaml"
FRAGMENTED = CLUSTERS / "fragmented-h100.yaml"
NVL72 = CLUSTERS / "gb200-nvl72.yaml"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def gb200_in_hgx_domains(tmp_path: Path) -> Path:
    """72 GB200 GPUs in 8-GPU NVLink domains (an HGX-style box), to compare with one NVL72."""
    return _write(tmp_path, "gb200-8", (
        "name: gb200-in-8-gpu-domains\n"
        "node_types:\n"
        "  - {name: gb200-8, gpu: GB200, gpus_per_node: 8, nvlink_domain_gpus: 8, nics_per_node: 8,\n"
        "     nic_gbit_per_s: 400, source: test}\n"
        "racks:\n"
        "  - {name: r0, nodes: [{type: gb200-8, count: 9}]}\n"))


def one_node_racks(tmp_path: Path, oversubscription: float) -> Path:
    """Two racks of one HGX H100 each: a prefill and a decode instance of 8 GPUs must cross racks."""
    return _write(tmp_path, f"one-node-racks-{oversubscription:g}", (
        f"name: one-node-racks\nnetwork: {{oversubscription: {oversubscription}}}\n"
        "racks:\n"
        "  - {name: a, nodes: [{type: hgx-h100-8, count: 1, names: [a0]}]}\n"
        "  - {name: b, nodes: [{type: hgx-h100-8, count: 1, names: [b0]}]}\n"))


def stage_gpus(pool_) -> int:
    return pool_.layout.gpus_per_stage


def assert_placed_validly(plan, cluster, kv_bytes_per_request=None):
    """Every instance placed once, on free GPUs of its type, no GPU shared (the independent validator)."""
    assert plan.pools and len(plan.placement) == sum(p.instances for p in plan.pools)
    assert validate_placement(plan, cluster, kv_bytes_per_request) == []
    gpus = [g for placed in plan.placement for g in instance_gpus(placed)]
    assert len(gpus) == len(set(gpus)) == plan.totals.gpus
    for placed in plan.placement:
        assert placed.pool_index is not None and plan.pools[placed.pool_index].role == placed.role
        assert sum(len(v) for v in placed.gpus_by_node.values()) == plan.pools[placed.pool_index].gpus_per_instance


def test_a_plain_budget_is_placed_on_standard_nodes():
    plan = api.solve(None, "32xH100")
    assert plan.status == "optimal"
    assert_placed_validly(plan, cluster_from_budget(parse_budget("32xH100")))
    assert all(p.cuda_visible_devices for p in plan.placement)
    assert any(n.startswith("placed ") and "budget 32xH100" in n for n in plan.explanation.notes)


def test_tp16_is_allowed_on_nvl72_but_not_on_hgx_domains(tmp_path):
    # Llama 3.1 405B in bf16 decodes a token in ~22 ms with TP8 and ~14 ms with TP16 on GB200:
    # an 18 ms TPOT target needs a TP16 group, which only the 72-GPU domain holds.
    kwargs = dict(precision="bf16", isl=2000, osl=200, slo=SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 18}))
    nvl72 = api.solve("llama-3.1-405b", cluster=NVL72, **kwargs)
    hgx = api.solve("llama-3.1-405b", cluster=gb200_in_hgx_domains(tmp_path), **kwargs)
    assert nvl72.status == "optimal"
    assert min(stage_gpus(p) for p in nvl72.pools if p.role != "prefill") >= 16
    assert_placed_validly(nvl72, load_cluster(NVL72))
    wide = [p for p in nvl72.placement if stage_gpus(nvl72.pools[p.pool_index]) >= 16]
    assert wide and all(len(p.nodes) >= 4 for p in wide)         # 4 GPUs per tray: one group spans trays
    assert hgx.status == "infeasible" and hgx.pools == []
    # On 8-GPU domains TP16 spreads over two of them and pays its all-reduces over the NICs: too slow.
    assert any("TPOT p90 18 ms" in r and "tp16" in r for r in hgx.explanation.reasons), hgx.explanation.reasons


def test_nvl72_plan_is_at_least_as_good_as_hgx_domains(tmp_path):
    kwargs = dict(precision="bf16", isl=2000, osl=200)
    nvl72 = api.solve("llama-3.1-405b", cluster=NVL72, **kwargs)
    hgx = api.solve("llama-3.1-405b", cluster=gb200_in_hgx_domains(tmp_path), **kwargs)
    # Across 8-GPU domains only in whole domains (TP16 over two, its all-reduces over the NICs).
    assert all(stage_gpus(p) <= 8 or (stage_gpus(p) % 8 == 0 and p.pp_size == 1) for p in hgx.pools)
    # Same GPUs and prices, more layouts: never worse by the model.
    assert nvl72.totals.requests_per_usd >= hgx.totals.requests_per_usd * (1 - 1e-6)


def test_hgx_cluster_spreads_a_wider_stage_over_whole_nodes():
    plan = api.solve("llama-3.1-405b", cluster=HGX, precision="fp8", isl=2000, osl=200)
    assert plan.pools and all(stage_gpus(p) <= 8 or (stage_gpus(p) % 8 == 0 and p.pp_size == 1) for p in plan.pools)
    assert_placed_validly(plan, load_cluster(HGX))
    for placed in plan.placement:
        pool_ = plan.pools[placed.pool_index]
        if stage_gpus(pool_) > 8:   # one whole 8-GPU node per part of the stage
            assert len(placed.nodes) == stage_gpus(pool_) // 8
            assert all(len(placed.gpus_by_node[n]) == 8 for n in placed.nodes)


@pytest.mark.parametrize("model", ["qwen3-32b", "llama-3.1-70b"])
def test_fragmented_cluster_gets_a_valid_placement(model):
    cluster = load_cluster(FRAGMENTED)
    plan = api.solve(model, cluster=FRAGMENTED, isl=2000, osl=200)
    assert plan.status == "optimal"
    assert_placed_validly(plan, cluster)
    assert max(stage_gpus(p) for p in plan.pools) <= 2          # 3 free GPUs per node: no group of 4
    assert any("at most 3 free H100-SXM GPUs in one NVLink domain" in n for n in plan.explanation.notes)
    # A pipeline instance that fits one node stays in one node (the perf model assumed NVLink there).
    for placed in plan.placement:
        pool_ = plan.pools[placed.pool_index]
        if pool_.pp_size > 1 and pool_.gpus_per_instance <= 3:
            assert len(placed.nodes) == 1


def test_fragmented_cluster_too_small_says_why():
    plan = api.solve("deepseek-v3", cluster=FRAGMENTED, isl=2000, osl=200)
    assert plan.status == "infeasible" and plan.pools == [] and plan.placement == []
    assert any("needs 16 H100-SXM GPUs" in r and "12" in r for r in plan.explanation.reasons), plan.explanation.reasons


def _kv_racks(plan, cluster) -> set[str]:
    return {cluster.rack_of(p.node).name for p in plan.placement if p.role in ("prefill", "decode")}


@pytest.mark.parametrize("isl, osl", [(8000, 300), (2000, 200)])
def test_oversubscribed_uplinks_keep_kv_inside_one_rack(tmp_path, isl, osl):
    # One prefill and one decode instance fill a node each; only the spine joins the two nodes.
    plain_path, tight_path = one_node_racks(tmp_path, 1.0), one_node_racks(tmp_path, 64.0)
    plain = api.solve("qwen3-235b-a22b", cluster=plain_path, isl=isl, osl=osl)
    tight = api.solve("qwen3-235b-a22b", cluster=tight_path, isl=isl, osl=osl)
    assert plain.mode == "disaggregated" and _kv_racks(plain, load_cluster(plain_path)) == {"a", "b"}
    # 64:1 leaves 0.8 GB/s per GPU across racks: the re-solve keeps KV in one rack or colocates
    # (all of prefill and decode in one rack, or each prefill paired with a decode in its own domain).
    kv_path = next((n for n in tight.explanation.notes if n.startswith("KV prefill->decode")), "")
    assert len(_kv_racks(tight, load_cluster(tight_path))) <= 1 or "pairs placed: same domain)" in kv_path
    # Either the re-solve ran, or the first placement already paired each prefill with a decode in its domain.
    assert any(n.startswith("second stage:") for n in tight.explanation.notes) or "pairs placed: same domain)" in kv_path
    pools = [p for p in tight.pools if p.role == "prefill"]
    kv_bytes = max((kv_transfer_bytes(get_model("qwen3-235b-a22b"), p.kv_precision, isl) for p in pools), default=None)
    assert_placed_validly(tight, load_cluster(tight_path), kv_bytes)


def test_second_stage_is_skipped_when_kv_stays_local():
    plan = api.solve(None, cluster=TWO_RACKS)
    assert plan.status == "optimal" and not any(n.startswith("second stage") for n in plan.explanation.notes)
    assert_placed_validly(plan, load_cluster(TWO_RACKS))


def test_spread_racks_spreads_every_pool():
    cluster = load_cluster(TWO_RACKS)
    plan = api.solve(None, cluster=TWO_RACKS, spread_racks=True)
    assert_placed_validly(plan, cluster)
    for index, pool_ in enumerate(plan.pools):
        racks = {cluster.rack_of(p.node).name for p in plan.placement if p.pool_index == index}
        assert racks == ({"rack-a", "rack-b"} if pool_.instances > 1 else racks)
    assert any("spread over racks" in n for n in plan.explanation.notes)


@pytest.mark.parametrize("path", [HGX, TWO_RACKS, FRAGMENTED, NVL72])
def test_solved_plans_never_share_a_gpu(path):
    plan = api.solve(None, cluster=path, isl=2000, osl=200)
    assert_placed_validly(plan, load_cluster(path))


def test_a_budget_with_a_cluster_restricts_it():
    counted = api.solve(None, "16xH100", cluster=TWO_RACKS)
    assert counted.totals.gpus <= 16 and "at most 16xH100" in counted.workload["budget"]
    capped = api.solve(None, "$40/h", cluster=TWO_RACKS)
    assert capped.totals.cost_usd_per_hour <= 40
    with pytest.raises(InputError, match="H200"):
        api.solve(None, "8xH200", cluster=TWO_RACKS)
    with pytest.raises(InputError) as error:
        api.solve(None)
    assert error.value.field == "--budget"


def test_a_plan_that_cannot_be_placed_is_infeasible_with_the_placement_reasons(monkeypatch, tmp_path):
    # Place on a cluster whose GPUs all became busy after the solve: the reasons must say so.
    busy = load_cluster(_write(tmp_path, "busy", (
        "racks: [{name: r, nodes: [{type: hgx-h100-8, count: 1, names: [n0]}]}]\n"
        "unavailable: {gpus_in_use: {n0: [0, 1, 2, 3, 4, 5, 6]}}\n")))
    real = solve_module.place_on_cluster
    monkeypatch.setattr(solve_module, "place_on_cluster", lambda plan, cluster, **kw: real(plan, busy, **kw))
    plan = api.solve(None, "8xH100")
    assert plan.status == "infeasible" and plan.pools == [] and plan.placement == []
    assert plan.explanation.reasons[0].startswith("the best plan found (")
    assert any("only 1 are free" in r for r in plan.explanation.reasons), plan.explanation.reasons


def test_launch_scripts_match_instances_to_pools_by_pool_index():
    cluster = load_cluster(HGX)
    placed = place(hand_plan(pool("prefill", tp=2), pool("prefill", tp=4)), cluster).plan
    shuffled = placed.model_copy(update={"placement": list(reversed(placed.placement))})
    specs = expand_instances(shuffled)
    assert sorted((s.pool_index, len(s.gpus)) for s in specs) == [(0, 2), (1, 4)]
