"""Each constraint module on its own: one tiny feasible and one tiny infeasible model."""

from __future__ import annotations

import itertools
import random

import pytest
from ortools.sat.python import cp_model

from layoutopt.optimizer.constraints import (
    ColocatedCapacity, CostCap, DecodeCapacity, EnginePairs, ExcludePlanStructure, GpuBudget, KvTransferBandwidth,
    ModeChoice, PrefillCapacity, RateBalance,
)
from layoutopt.optimizer.constraints.engine_pairs import refusal_classes
from layoutopt.optimizer.objectives import PositiveRate, RatioFloor
from layoutopt.optimizer.scaling import RATE_SCALE_PER_RPS, IntegerCandidate, IntegerTable
from layoutopt.optimizer.variables import LayoutVariables


def row(name: str, role: str, gpus: int = 1, cost: int = 1000, capacity: int = 10, kv_kb: int = 0,
        nic_kb_per_s: int = 0, gpu: str = "H100", max_instances: int = 10) -> IntegerCandidate:
    return IntegerCandidate(name=name, role=role, gpu=gpu, gpus_per_instance=gpus, cost_units=cost,
                            capacity_rate_units=capacity, kv_kb_per_request=kv_kb, nic_kb_per_s=nic_kb_per_s,
                            max_instances=max_instances)


def table(*rows: IntegerCandidate, gpu_limits=None, max_cost=None, min_rate=0, mode="auto", max_rate=1000):
    return IntegerTable(candidates=rows, gpu_limits=gpu_limits or {}, max_cost_units=max_cost,
                        min_rate_units=min_rate, mode=mode, max_rate_units=max_rate)


def feasible(t: IntegerTable, modules, fix=None) -> bool:
    """Build only ``modules``, fix variables with ``fix(variables)``, and ask CP-SAT."""
    variables = LayoutVariables(cp_model.CpModel(), t)
    for module in modules:
        module.build(variables)
    if fix:
        fix(variables)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    return solver.solve(variables.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def instances(**counts):
    def fix(variables: LayoutVariables):
        for name, n in counts.items():
            variables.model.add(variables.num_instances[name] == n)
    return fix


def rates(disaggregated=None, colocated=None, **counts):
    def fix(variables: LayoutVariables):
        instances(**counts)(variables)
        if disaggregated is not None:
            variables.model.add(variables.disaggregated_rate == disaggregated)
        if colocated is not None:
            variables.model.add(variables.colocated_rate == colocated)
    return fix


def test_gpu_budget():
    t = table(row("a", "colocated", gpus=4), row("b", "colocated", gpus=2, gpu="H200"), gpu_limits={"H100": 8})
    assert feasible(t, [GpuBudget()], instances(a=2, b=9))
    assert not feasible(t, [GpuBudget()], instances(a=3))


def test_cost_cap():
    t = table(row("a", "colocated", cost=1500), max_cost=3000)
    assert feasible(t, [CostCap()], instances(a=2))
    assert not feasible(t, [CostCap()], instances(a=3))
    assert feasible(table(row("a", "colocated")), [CostCap()], instances(a=10))  # no cap given


@pytest.mark.parametrize("module, role", [(PrefillCapacity(), "prefill"), (DecodeCapacity(), "decode")])
def test_disaggregated_pool_capacity(module, role):
    t = table(row("x", role, capacity=10))
    assert feasible(t, [module], rates(disaggregated=30, x=3))
    assert not feasible(t, [module], rates(disaggregated=31, x=3))


def test_colocated_capacity():
    t = table(row("c", "colocated", capacity=7))
    assert feasible(t, [ColocatedCapacity()], rates(colocated=14, c=2))
    assert not feasible(t, [ColocatedCapacity()], rates(colocated=15, c=2))


def test_rate_balance_and_target():
    t = table(row("c", "colocated"), min_rate=20)
    assert feasible(t, [RateBalance()], rates(disaggregated=5, colocated=15))
    assert not feasible(t, [RateBalance()], rates(disaggregated=5, colocated=14))

    def total_mismatch(variables):
        rates(disaggregated=10, colocated=10)(variables)
        variables.model.add(variables.total_rate == 21)
    assert not feasible(t, [RateBalance()], total_mismatch)


def test_kv_transfer_bandwidth():
    # 1000 kB per request at 2 req/s is 2000 kB/s; each instance's NIC carries 1000 kB/s.
    t = table(row("p", "prefill", kv_kb=1000, nic_kb_per_s=1000), row("d", "decode", nic_kb_per_s=1000),
              max_rate=10 * RATE_SCALE_PER_RPS)
    two_rps = 2 * RATE_SCALE_PER_RPS
    assert feasible(t, [KvTransferBandwidth()], rates(disaggregated=two_rps, p=2, d=2))
    assert not feasible(t, [KvTransferBandwidth()], rates(disaggregated=two_rps, p=1, d=2))
    assert not feasible(t, [KvTransferBandwidth()], rates(disaggregated=two_rps, p=2, d=1))


@pytest.mark.parametrize("mode, coloc_ok, disagg_ok", [
    ("auto", True, True), ("colocated", True, False), ("disaggregated", False, True),
])
def test_mode_choice(mode, coloc_ok, disagg_ok):
    t = table(row("p", "prefill"), row("d", "decode"), row("c", "colocated"), mode=mode)
    assert feasible(t, [ModeChoice()], rates(colocated=5, c=1)) is coloc_ok
    assert feasible(t, [ModeChoice()], rates(disaggregated=5, p=1, d=1)) is disagg_ok


def test_mode_needs_both_disaggregated_roles_and_no_rate_without_instances():
    t = table(row("p", "prefill"), row("d", "decode"), row("c", "colocated"))
    assert not feasible(t, [ModeChoice()], instances(p=1, d=0))
    assert not feasible(t, [ModeChoice()], rates(disaggregated=5, p=0, d=0))
    assert feasible(t, [ModeChoice()], instances(p=0, d=0, c=0))


def test_exclude_plan_structure():
    t = table(row("a", "colocated"), row("b", "colocated"))
    cut = ExcludePlanStructure({"a"})
    assert not feasible(t, [cut], instances(a=3, b=0))  # same kinds, only a different count
    assert feasible(t, [cut], instances(a=0, b=1))
    assert feasible(t, [cut], instances(a=2, b=1))


def test_positive_rate_and_ratio_floor():
    t = table(row("c", "colocated", cost=1000, capacity=10))
    assert not feasible(t, [RateBalance(), PositiveRate()], rates(disaggregated=0, colocated=0))
    assert feasible(t, [RateBalance(), PositiveRate()], rates(disaggregated=0, colocated=1))
    # floor 1/100 rate unit per cost unit: 10 rate units at 1000 cost units is exactly on it
    floor = [RateBalance(), RatioFloor(1, 100)]
    assert feasible(t, floor, rates(disaggregated=0, colocated=10, c=1))
    assert not feasible(t, floor, rates(disaggregated=0, colocated=9, c=1))


@pytest.mark.parametrize("seed", range(6))
def test_engine_pairs_admit_exactly_the_unrefused_pairs(seed):
    """The class encoding (one boolean per class of candidates with the same refused partners) is
    feasible for a set of used candidates exactly when no used prefill-decode pair is refused."""
    rng = random.Random(seed)
    prefills, decodes = [f"p{i}" for i in range(4)], [f"d{i}" for i in range(4)]
    refused = {(p, d) for p in prefills for d in decodes if rng.random() < 0.4}
    rows = [row(name, "prefill") for name in prefills] + [row(name, "decode") for name in decodes]
    t = table(*rows).model_copy(update={"incompatible_pairs": tuple(sorted(refused))})
    for used in itertools.product([0, 2], repeat=len(rows)):
        counts = {r.name: n for r, n in zip(rows, used)}
        allowed = not any(counts[p] and counts[d] for p, d in refused)
        assert feasible(t, [EnginePairs()], instances(**counts)) == allowed, (refused, counts)


def test_refusal_classes_are_complete_blocks():
    refused = [("p0", "d0"), ("p0", "d1"), ("p1", "d0"), ("p1", "d1"), ("p2", "d2")]
    prefill_classes, decode_classes, blocks = refusal_classes(refused)
    assert prefill_classes == [["p0", "p1"], ["p2"]] and decode_classes == [["d0", "d1"], ["d2"]]
    assert blocks == [(0, 0), (1, 1)]
    covered = {(p, d) for a, b in blocks for p in prefill_classes[a] for d in decode_classes[b]}
    assert covered == set(refused)
