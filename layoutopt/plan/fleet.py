"""FleetPlan: several models planned together on one budget, as one typed result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.plan.schema import SCHEMA_VERSION, Objective, Plan, SolverInfo, SolverStatus


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SplitMember(_Out):
    """One model solved alone on its share of the budget (the naive split the fleet is compared with)."""

    model: str
    budget: str = Field(description="the model's share: each GPU count and the $ cap in proportion to its token load")
    share_fraction: float = Field(ge=0, le=1)
    status: SolverStatus
    cost_usd_per_hour: float | None = Field(default=None, description="None when the share serves no plan")
    goodput_rps: float | None = None


class FleetTotals(_Out):
    gpus: int
    gpus_by_type: dict[str, int]
    cost_usd_per_hour: float
    goodput_rps_by_model: dict[str, float]


class FleetPlan(_Out):
    """Per-model plans from one CP-SAT model over the shared budget, and the naive split's cost."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "fleet"
    status: SolverStatus
    objective: Objective
    budget: str
    plans: list[Plan] = Field(description="one plan per model, in the fleet file's order (placement not included)")
    totals: FleetTotals | None
    solver: SolverInfo
    split: list[SplitMember] = Field(default_factory=list)
    split_cost_usd_per_hour: float | None = Field(
        default=None, description="sum over the models alone on their shares; None when a share serves no plan")
    saving_usd_per_hour: float | None = Field(default=None, description="split cost - fleet cost (min-cost)")
    saving_fraction: float | None = None
    notes: list[str] = Field(default_factory=list)
