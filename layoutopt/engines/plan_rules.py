"""The engine rules a whole plan breaks: each pool's layout, how a cluster placement splits each
instance over its nodes, and every prefill/decode pairing (emit refuses such a plan; simulate
and estimate report it)."""

from __future__ import annotations

from collections.abc import Sequence

from layoutopt.engines.pair_rules import check_pair
from layoutopt.engines.ref import EngineRef
from layoutopt.engines.rules import RuleViolation, check_layout, check_node_split
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Plan


def plan_rule_violations(engine: "str | EngineRef", plan: Plan, model: ModelSpec,
                         gpus: Sequence[GpuSpec]) -> list[RuleViolation]:
    """Every rule of ``engine`` the pools of ``plan`` break (``gpus[i]`` is pool i's GPU), each once."""
    found: list[RuleViolation] = []
    for pool, gpu in zip(plan.pools, gpus):
        found += check_layout(engine, model, gpu, pool.layout, pool.role)
    for placed in plan.placement:  # how a cluster file's placement splits each instance over its nodes
        if placed.pool_index is not None and placed.pool_index < len(plan.pools) and len(placed.gpus_by_node) > 1:
            found += check_node_split(engine, plan.pools[placed.pool_index].layout,
                                      [len(g) for g in placed.gpus_by_node.values()])
    pools = list(zip(plan.pools, gpus))
    for prefill, prefill_gpu in ((p, g) for p, g in pools if p.role == "prefill"):
        for decode, decode_gpu in ((p, g) for p, g in pools if p.role == "decode"):
            found += check_pair(engine, model, prefill.layout, decode.layout, prefill_gpu, decode_gpu)
    return list({str(v): v for v in found}.values())
