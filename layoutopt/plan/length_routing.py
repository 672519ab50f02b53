"""LengthRoutedPlan: a plan whose router sends short and long prompts to different pools."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.plan.schema import SCHEMA_VERSION, Plan, SolverInfo, SolverStatus
from layoutopt.workloads.slo import SLO


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LengthClass(_Out):
    """Requests whose prompt length lies in [min_input_tokens, max_input_tokens], and the pools serving them."""

    name: str = Field(description="short, long, or all (no split)")
    min_input_tokens: int = Field(ge=0)
    max_input_tokens: int = Field(ge=1, description="the model's context for the long class")
    rate_share_fraction: float = Field(gt=0, le=1, description="share of the requests in this class")
    rate_rps: float = Field(gt=0)
    mean_input_tokens: float
    slo: SLO = Field(description="the SLO this class meets on its own; the classes' mixture meets the plan's SLO")
    plan: Plan = Field(description="the pools that serve this class (placement not included)")


class ThresholdOption(_Out):
    """One threshold tried (None: no split) and what its CP-SAT model proved."""

    threshold_tokens: int | None
    quantile: float | None = Field(default=None, description="the prompt-length quantile the threshold is at")
    short_fraction: float | None = None
    long_shift_fraction: float = Field(default=0.0, description="the long class's percentiles and attainment "
                                       "lowered by this share, the short class's raised to compensate")
    status: SolverStatus
    cost_usd_per_hour: float | None = Field(default=None, description="its cheapest plan found")
    bound_usd_per_hour: float | None = Field(default=None, description="proven lower bound on its cost")


class LengthRoutedPlan(_Out):
    """The cheapest plan over the thresholds tried, each solved as one CP-SAT model over its length classes."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "length-routed"
    status: SolverStatus
    objective: str = "min-cost"
    model: str
    budget: str
    rate_rps: float
    slo: SLO = Field(description="the SLO the whole traffic must meet (each class meets classes[].slo)")
    threshold_tokens: int | None = Field(description="the chosen split: short = input <= this; None = no split")
    long_shift_fraction: float = Field(default=0.0, description="the chosen split's SLO shift (ThresholdOption)")
    classes: list[LengthClass] = Field(description="one per class of the chosen split (one, 'all', for no split)")
    cost_usd_per_hour: float | None
    gpus_by_type: dict[str, int] = Field(default_factory=dict)
    no_split_cost_usd_per_hour: float | None = Field(description="the cheapest plan without routing by length")
    saving_usd_per_hour: float | None = Field(description="no-split cost - chosen plan's cost")
    saving_fraction: float | None = None
    options: list[ThresholdOption]
    solver: SolverInfo
    notes: list[str] = Field(default_factory=list)
