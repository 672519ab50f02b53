"""The optimizer's cluster parts on their own: limits from a cluster file, the filter, two constraints."""

from __future__ import annotations

from pathlib import Path

from ortools.sat.python import cp_model

from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.optimizer.cluster_fit import cluster_budget, cluster_limits
from layoutopt.optimizer.constraints import DisaggregatedInOneRack, DomainPacking
from layoutopt.optimizer.filters import cluster_free_domain
from layoutopt.optimizer.scaling import IntegerCandidate, IntegerTable
from layoutopt.optimizer.space import Proposal
from layoutopt.optimizer.variables import LayoutVariables
from layoutopt.plan import Layout
from layoutopt.topology import load_cluster

CLUSTERS = Path(__file__).resolve().parents[1] / "examples" / "clusters"


def limits_of(name: str):
    cluster = load_cluster(CLUSTERS / f"{name}.yaml")
    return cluster_limits(cluster, cluster_budget(cluster, None))


def test_fragmented_cluster_limits_by_hand():
    limits = limits_of("fragmented-h100")
    assert limits.gpu_limits == {"H100-SXM": 12}
    assert limits.scaleup_domain_gpus == {"H100-SXM": 8} and limits.max_stage_gpus == {"H100-SXM": 3}
    # Four servers with 3 free GPUs: 12 single GPUs, 4 pairs (8 GPUs), no group of 4.
    assert limits.domain_capacity_gpus == {"H100-SXM": {1: 12, 2: 8}}
    # f3 has one 400 Gb/s NIC per two GPUs: 25 GB/s per GPU is what every node can count on.
    assert limits.nic_gb_per_s_per_gpu == {"H100-SXM": 25.0}


def test_nvl72_and_oversubscribed_limits_by_hand():
    nvl72 = limits_of("gb200-nvl72")
    assert nvl72.scaleup_domain_gpus == {"GB200": 72} and nvl72.domain_capacity_gpus["GB200"][64] == 64
    gpu = load_catalog().gpu("GB200")
    assert nvl72.gpu_spec(gpu.model_copy(update={"scaleup_domain_gpus": 8})).scaleup_domain_gpus == 72
    two = limits_of("two-rack-h100-oversubscribed")
    assert two.rack_gpus == {"H100-SXM": 32} and two.num_racks == 2
    assert two.same_rack_links["H100-SXM"].bandwidth_gb_per_s == 50.0
    assert two.cross_rack_links["H100-SXM"].bandwidth_gb_per_s == 12.5     # 50 GB/s over a 4:1 uplink
    assert two.kv_crosses_racks_slower and not limits_of("hgx-h100-rack").kv_crosses_racks_slower


def test_free_domain_filter_names_the_cluster_limit():
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.optimizer.filters import FilterContext
    from layoutopt.workloads.slo import SLO

    ctx = FilterContext(model=get_model("qwen3-32b"), slo=SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}),
                        max_stage_gpus={"H100-SXM": 3})
    gpu = load_catalog().gpu("H100-SXM")
    tp4 = Proposal(role="decode", gpu=gpu, layout=Layout(tp_size=4))
    assert "no local domain of the cluster has more than 3 free H100-SXM" in cluster_free_domain(ctx, tp4)
    assert cluster_free_domain(ctx, Proposal(role="decode", gpu=gpu, layout=Layout(tp_size=2, pp_size=4))) is None


def row(name: str, role: str, gpus: int, stage: int, gpu: str = "H100") -> IntegerCandidate:
    return IntegerCandidate(name=name, role=role, gpu=gpu, gpus_per_instance=gpus, cost_units=1000,
                            capacity_rate_units=10, kv_kb_per_request=0, nic_kb_per_s=0, max_instances=10,
                            domain_group_gpus=stage)


def feasible(table: IntegerTable, module, **counts) -> bool:
    variables = LayoutVariables(cp_model.CpModel(), table)
    module.build(variables)
    for name, n in counts.items():
        variables.model.add(variables.num_instances[name] == n)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    return solver.solve(variables.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def test_domain_packing():
    # Four domains with 3 free GPUs each: capacity {1: 12, 2: 8}.
    rows = (row("tp1", "colocated", 1, 1), row("tp2", "colocated", 2, 2), row("tp2pp2", "colocated", 4, 2),
            row("tp4", "colocated", 4, 4))
    table = IntegerTable(candidates=rows, gpu_limits={"H100": 12}, max_cost_units=None, min_rate_units=0,
                         mode="auto", max_rate_units=100, domain_capacity_gpus={"H100": {1: 12, 2: 8}})
    assert feasible(table, DomainPacking(), tp2=4, tp1=4)
    assert feasible(table, DomainPacking(), tp2pp2=2)
    assert not feasible(table, DomainPacking(), tp2=3, tp2pp2=1)           # 10 GPUs in pairs > 8
    assert not feasible(table, DomainPacking(), tp4=1)                     # no domain has 4 free


def test_disaggregated_in_one_rack():
    rows = (row("p", "prefill", 2, 2), row("d", "decode", 4, 4), row("c", "colocated", 8, 8))
    table = IntegerTable(candidates=rows, gpu_limits={"H100": 64}, max_cost_units=None, min_rate_units=0,
                         mode="auto", max_rate_units=100, disaggregated_gpu_limits={"H100": 32})
    assert feasible(table, DisaggregatedInOneRack(), p=8, d=4, c=4)       # 32 GPUs of KV pools, colocated aside
    assert not feasible(table, DisaggregatedInOneRack(), p=10, d=4)       # 36 > one rack
    unlimited = table.model_copy(update={"disaggregated_gpu_limits": None})
    assert feasible(unlimited, DisaggregatedInOneRack(), p=10, d=4)
