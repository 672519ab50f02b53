"""What placement returns: the plan with ``placement`` filled, and the links it implies.

Statuses stay distinct: ``optimal`` (placed, objective proven best), ``feasible`` (placed, time ran
out before the proof), ``infeasible`` (proven impossible; ``reasons`` say why), ``timeout`` (no
placement found in time). Bandwidths are GB/s per GPU per direction unless the name says otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InfeasibleError
from layoutopt.plan import Plan
from layoutopt.plan import Role
from layoutopt.perf_model.links import Link
from layoutopt.topology.cluster import GpuId
from layoutopt.topology.links import KvScope

PlacementStatus = Literal["optimal", "feasible", "infeasible", "timeout"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstanceAssignment(_Frozen):
    """Every GPU of one instance, stage by stage, and the slowest link between its stages."""

    instance_id: str
    role: Role
    pool_index: int = Field(ge=0, description="position of the instance's pool in plan.pools")
    stages: tuple[tuple[GpuId, ...], ...] = Field(description="GPUs of pipeline stage 0, 1, ...")
    pipeline_link: Link | None = Field(default=None, description="slowest stage-to-stage link; None when pp = 1")

    @property
    def gpus(self) -> list[GpuId]:
        return [gpu for stage in self.stages for gpu in stage]


class KvPairing(_Frozen):
    """One prefill -> decode pairing and the path its KV cache travels."""

    prefill_instance: str
    decode_instance: str
    scope: KvScope
    bandwidth_gb_per_s: float = Field(ge=0, description="bottleneck fair share along the path, per GPU")
    latency_us: float = Field(ge=0)


class RackKvTraffic(_Frozen):
    """KV bytes/s that must cross one rack's uplink when decode traffic is routed rack-locally first."""

    rack: str
    egress_gb_per_s: float = Field(ge=0, description="produced by the rack's prefill minus consumed by its decode")
    ingress_gb_per_s: float = Field(ge=0)
    uplink_gb_per_s: float = Field(gt=0)

    @property
    def fits(self) -> bool:
        return max(self.egress_gb_per_s, self.ingress_gb_per_s) <= self.uplink_gb_per_s * (1 + 1e-9)


class ObjectiveProof(_Frozen):
    """One lexicographic objective of the placement: its value and how far it is proven."""

    name: str
    value: int = Field(description="the objective term's value in the reported placement (solver units)")
    lower_bound: int = Field(description="no placement can do better, given the earlier objectives")
    proven_by: Literal["bound", "search", "none"] = Field(
        description="bound: the value meets a lower bound, no search needed; search: CP-SAT proved it "
                    "(KV traffic to within 1% of all KV); none: time ran out first")


class RuleRefusal(_Frozen):
    """A pool the engine's node-split rule left no placement: which pool, which rule, why, and how
    many of its instances the free GPUs could hold in splits the rule accepts."""

    pool_index: int = Field(ge=0, description="index into plan.pools")
    rule: Literal["uneven_nodes"] = Field(description="the engine rule (engines.rules.check_node_split)")
    reason: str = Field(description="the rule, its engine source line and the split placement tried")
    legal_instances: int = Field(ge=0, description="at most how many instances of the pool's layout the free GPUs "
                                 "hold alone in equal parts the rule accepts (node_rule.legal_instances: exact with "
                                 "one legal part size, an upper bound with several)")
    part_gpus: int = Field(ge=0, description="fewest GPUs one part of a legal split puts in one domain (node_rule."
                           "legal_part_gpus); 0 when no split holds an instance")


class PlacementResult(_Frozen):
    """The placed plan (``plan.placement`` filled when placed) and what the placement implies."""

    status: PlacementStatus
    plan: Plan
    instances: list[InstanceAssignment] = Field(default_factory=list)
    kv_pairings: list[KvPairing] = Field(default_factory=list)
    kv_link: Link | None = Field(default=None, description="slowest prefill->decode path; None without KV transfer")
    pipeline_links: dict[int, Link] = Field(
        default_factory=dict, description="pool index -> slowest stage-to-stage link of its instances (pp > 1)"
    )
    rack_kv_traffic: list[RackKvTraffic] = Field(default_factory=list, description="empty without kv_bytes_per_request")
    objectives: list[ObjectiveProof] = Field(default_factory=list, description="in priority order; "
                                             "status is optimal only when every one is proven")
    reasons: list[str] = Field(default_factory=list, description="why no placement exists (infeasible, timeout)")
    rule_refusals: list[RuleRefusal] = Field(
        default_factory=list, description="infeasible only: pools the engine's node-split rule (uneven_nodes) left "
        "no placement the free GPUs hold; the optimizer re-solves with fewer of their instances")
    notes: list[str] = Field(default_factory=list)
    wall_time_s: float = Field(ge=0)

    @property
    def rule_refused_pools(self) -> list[int]:
        return [r.pool_index for r in self.rule_refusals]

    @property
    def placed(self) -> bool:
        return self.status in ("optimal", "feasible")

    def raise_if_unplaced(self) -> Plan:
        """The placed plan, or ``InfeasibleError`` carrying the reasons."""
        if self.placed:
            return self.plan
        headline = "no placement on the cluster" if self.status == "infeasible" else "placement timed out"
        raise InfeasibleError(headline, self.reasons)
