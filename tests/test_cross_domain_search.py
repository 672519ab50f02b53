"""Stages spread over local domains, end to end: the search proposes them (DEP16-DEP128 across HGX
nodes, TP16 over two, TP inside a PCIe server), the solver may choose them, placement puts each
on whole domains (budget clusters and cluster files), and the emitted files pass the engine flag
data, ``bash -n`` and the Kubernetes schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from layoutopt.engines import engine_ref_of
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import _Screen, _Tally, candidate_shape, filter_context, screened_proposals
from layoutopt.optimizer.pre_cuts import PreCuts
from layoutopt.optimizer.solve import solve
from layoutopt.optimizer.space import Proposal
from layoutopt.plan import Layout
from layoutopt.report.emit import render
from layoutopt.topology import cluster_from_budget, load_cluster, place, validate_placement
from layoutopt.topology.placement.encoding import instance_gpus
from layoutopt.hardware_catalog.budget import parse_budget
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO
from test_placement_fixtures import plan, pool
from test_report_matrix import check_emitted_files
from test_report_helpers import engine_commands

SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _survivors(model: str, gpu: str, count: int) -> set[tuple[str, str]]:
    """(role, layout short name) of every proposal that passes the screens on ``count`` GPUs."""
    spec = get_gpu(gpu)
    ctx = filter_context(get_model(model), preset_workload("chat"), SLO_CHAT, "vllm", gpu_limits={spec.name: count})
    screen = _Screen(ctx, engine_ref_of("vllm"), ("colocated", "prefill", "decode"), "fp8", PreCuts())
    kept, _ = screened_proposals(screen, [spec], _Tally())
    return {(p.role, p.layout.short_name()) for p in kept}


def test_deepseek_on_64_h100_gets_dep16_and_dep32_for_every_role():
    kept = _survivors("deepseek-v3", "H100", 64)
    for role in ("colocated", "prefill", "decode"):
        assert (role, "tp1-ep16-dp16-fp8-kvbf16") in kept, role
        assert (role, "tp2-ep32-dp16-fp8-kvbf16") in kept, role
        assert (role, "tp1-ep32-dp32-fp8-kvbf16") in kept, role
    names = {name for _, name in kept}
    assert not any("tp16" in n for n in names)          # MoE: each DP rank's TP inside one node
    assert "tp1-ep128-dp128-fp8-kvbf16" not in names        # over the 64-GPU budget


def test_llama_70b_on_8_l40s_gets_tp_inside_the_pcie_server():
    names = {name for _, name in _survivors("llama-3.1-70b", "L40S", 8)}
    assert {"tp4-fp8-kvbf16", "tp8-fp8-kvbf16", "tp4-pp2-fp8-kvbf16"} <= names
    assert not any(n.startswith("tp16") for n in names)  # 16 GPUs: over the budget


def test_a_spread_stage_packs_one_whole_domain_per_unit():
    h100 = get_gpu("H100")
    shape = candidate_shape(Proposal(role="decode", gpu=h100, layout=Layout(tp_size=2, dp_size=16, ep_size=32)),
                            get_model("deepseek-v3"), preset_workload("chat"), 0.7, None, 1.0)
    assert shape.domain_group_gpus == 8
    l40s = get_gpu("L40S")
    shape = candidate_shape(Proposal(role="colocated", gpu=l40s, layout=Layout(tp_size=4, pp_size=2)),
                            get_model("llama-3.1-70b"), preset_workload("chat"), 0.7, None, 1.0)
    assert shape.domain_group_gpus == 8                  # the PP link is PCIe: one server


def test_deepseek_on_64_h100_solves_places_and_emits_a_spread_stage():
    # Each engine plans with its own profile and rules (SGLang's static memory fraction leaves a TP32
    # server no KV cache on H100, so a vLLM plan is not an SGLang plan).
    cluster = cluster_from_budget(parse_budget("64xH100"))
    for release in ("vllm==0.33.0", "sglang==0.5.23"):
        solved = solve("deepseek-v3", "64xH100", EXAMPLES / "slo.yaml", engine=release)
        assert solved.status == "optimal"
        spread = [p for p in solved.pools if p.layout.gpus_per_stage > 8]
        assert spread, [p.layout.short_name() for p in solved.pools]   # the model finds DEP across nodes pays
        assert validate_placement(solved, cluster) == []
        pools = {id(p): i for i, p in enumerate(solved.pools)}
        for pool_ in spread:
            index = pools[id(pool_)]
            for placed in [p for p in solved.placement if p.pool_index == index]:
                assert len(placed.nodes) == pool_.layout.gpus_per_stage // 8
                assert all(len(placed.gpus_by_node[n]) == 8 for n in placed.nodes)
        files = render(solved, engine=release, plots=False)
        assert check_emitted_files(files, *release.split("==")) >= len(solved.pools)
        _check_multi_node_ep_launch(files, release)


def test_llama_70b_on_8_l40s_solves_with_tp_and_places_on_one_server():
    solved = solve("llama-3.1-70b", "8xL40S", EXAMPLES / "slo.yaml")
    assert solved.status in ("optimal", "feasible") and all(p.tp_size > 1 for p in solved.pools)
    assert all(len(p.nodes) == 1 for p in solved.placement)
    files = render(solved, engine="vllm", plots=False)
    assert check_emitted_files(files, "vllm", "0.33.0") >= 1


@pytest.mark.parametrize(("layout", "nodes"), [(dict(tp=16), 2), (dict(tp=2, dp=16), 4)])
def test_cluster_file_places_spread_stages_on_whole_nodes(layout, nodes):
    cluster = load_cluster(EXAMPLES / "clusters" / "hgx-h100-rack.yaml")
    result = place(plan(pool("decode", **layout)), cluster)
    assert result.placed and validate_placement(result.plan, cluster) == []
    (placed,) = result.plan.placement
    assert len(placed.nodes) == nodes and len(instance_gpus(placed)) == 8 * nodes


def test_a_pcie_node_is_one_local_domain_for_the_cluster_limits():
    from layoutopt.optimizer.cluster_fit import cluster_limits

    cluster = cluster_from_budget(parse_budget("12xL40S"))   # one node of 8 free, one of 4
    limits = cluster_limits(cluster, cluster.budget())
    assert limits.max_stage_gpus == {"L40S": 8}
    assert limits.domain_capacity_gpus["L40S"] == {1: 12, 2: 12, 4: 12, 8: 8}
    # The GPU keeps its 1-GPU scale-up domain: its local domain is the PCIe server (links.local_domain).
    assert limits.gpu_spec(get_gpu("L40S")).scaleup_domain_gpus == 1


def test_estimate_costs_a_stage_over_whole_nodes_and_says_so():
    """``estimate`` takes the cross-node layouts ``solve`` proposes (a DEP32 decode instance on four
    8-GPU H100 nodes), costed over the NICs with a note; allow_cross_domain=False refuses it."""
    from layoutopt.api import estimate
    from layoutopt.errors import LayoutError

    dep32 = Layout(tp_size=4, dp_size=8, ep_size=32, weight_precision="fp8")
    result = estimate("deepseek-v3", "H100", isl=1400, osl=250, layout=dep32, rate=5.0)
    assert any("spans 4 local domains of 8 H100-SXM" in note for note in result.notes)
    inside = estimate("deepseek-v3", "H100", isl=1400, osl=250, layout=Layout(tp_size=8, pp_size=2, weight_precision="fp8"),
                      rate=5.0)
    assert not any("spans" in note for note in inside.notes)
    with pytest.raises(LayoutError, match="local domain"):
        estimate("deepseek-v3", "H100", isl=1400, osl=250, layout=dep32, rate=5.0, allow_cross_domain=False)


def _check_multi_node_ep_launch(files: dict[str, str], release: str) -> None:
    """The launch scripts of an EP instance over nodes: multi-node flags, and the engine's default EP
    exchange (what the model costs) kept, with a note naming DeepEP as the faster option it does not
    count on."""
    text = "\n".join(t for p, t in files.items() if p.startswith("launch/"))
    if release.startswith("vllm"):
        assert "--data-parallel-size-local" in text and "--headless" in text
        assert "# NOTE: expert parallelism over" in text and "cost exactly that" in text
        assert "--all2all-backend deepep_" in text
        assert not any("--all2all-backend" in command for command in engine_commands(text))
    else:
        assert "--nnodes" in text and "--attn-dp-size" in text
        assert "cost exactly that" in text and "--moe-a2a-backend deepep" in text
        assert not any("--moe-a2a-backend" in command for command in engine_commands(text))
