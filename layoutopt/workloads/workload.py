"""Workload: prompt and output length distributions, arrival rate, prefix-cache hits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.workloads.distributions import LengthDistribution


class Workload(BaseModel):
    """What the service must handle. ``arrival_rate_rps`` None means: find the highest rate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    arrival_rate_rps: float | None = Field(default=None, gt=0)
    arrival_process: Literal["poisson"] = "poisson"
    prefix_cache_hit_fraction: float = Field(
        default=0.0, ge=0, lt=1, description="share of prompt tokens served from the prefix cache"
    )

    @property
    def mean_input_tokens(self) -> float:
        return self.input_tokens.mean_tokens

    @property
    def mean_output_tokens(self) -> float:
        return self.output_tokens.mean_tokens

    @property
    def mean_uncached_input_tokens(self) -> float:
        """Prompt tokens that prefill must compute per request on average."""
        return self.mean_input_tokens * (1.0 - self.prefix_cache_hit_fraction)
