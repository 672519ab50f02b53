"""Workload: prompt and output length distributions, arrival rate, prefix-cache hits.

A workload either gives independent input and output length distributions, or a trace of
(input_tokens, output_tokens) pairs; with a trace the two distributions are the trace's empirical
marginals (filled in automatically) and :meth:`Workload.sample_requests` replays joint pairs, so
the correlation between prompt and output length survives.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from layoutopt.workloads.distributions import EmpiricalLength, LengthDistribution, PositiveTokens, _DerivedArrays

TracePair = tuple[PositiveTokens, PositiveTokens]
"""(input_tokens, output_tokens) of one request."""


def _is_pair(pair: Any) -> bool:
    """Two whole token counts >= 1."""
    return isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
        isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in pair
    )


class Workload(BaseModel):
    """What the service must handle. ``arrival_rate_rps`` None means: find the highest rate."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = "custom"
    # Declared first so a bad pair is the error reported, not the marginals derived from it.
    trace_pairs: tuple[TracePair, ...] | None = Field(
        default=None, description="(input_tokens, output_tokens) per request of a trace, replayed jointly"
    )
    trace_source: str | None = Field(default=None, description="file the trace pairs were read from")
    input_tokens: LengthDistribution = Field(description="prompt length per request, tokens")
    output_tokens: LengthDistribution = Field(description="generated length per request, tokens")
    arrival_rate_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    arrival_process: Literal["poisson"] = "poisson"
    prefix_cache_hit_fraction: float = Field(
        default=0.0, ge=0, lt=1, description="share of prompt tokens served from the prefix cache"
    )
    _derived: _DerivedArrays | None = PrivateAttr(default=None)

    @field_validator("trace_pairs", mode="before")
    @classmethod
    def _check_pairs(cls, pairs: Any) -> Any:
        if pairs is None:
            return None
        if isinstance(pairs, np.ndarray):
            pairs = pairs.tolist()
        if not isinstance(pairs, (list, tuple)) or not pairs:
            raise ValueError("must be a non-empty list of (input_tokens, output_tokens) pairs")
        for index, pair in enumerate(pairs):
            if not _is_pair(pair):
                raise ValueError(f"pair {index} is {pair!r}; each pair must be two whole token counts >= 1")
        return pairs

    @model_validator(mode="before")
    @classmethod
    def _marginals_from_trace(cls, data: Any) -> Any:
        """With trace pairs and no length distributions, use the trace's marginals."""
        if not isinstance(data, dict) or data.get("trace_pairs") is None:
            return data
        pairs = data["trace_pairs"]
        if isinstance(pairs, np.ndarray):
            pairs = pairs.tolist()
        if not isinstance(pairs, (list, tuple)) or not pairs or not all(_is_pair(p) for p in pairs):
            return data  # the trace_pairs validator reports the problem
        filled = dict(data)
        filled.setdefault("input_tokens", {"kind": "empirical", "tokens": [int(p[0]) for p in pairs]})
        filled.setdefault("output_tokens", {"kind": "empirical", "tokens": [int(p[1]) for p in pairs]})
        return filled

    @model_validator(mode="after")
    def _check_trace_marginals(self) -> "Workload":
        if self.trace_pairs is None:
            return self
        for field, column in (("input_tokens", 0), ("output_tokens", 1)):
            dist = getattr(self, field)
            observed = sorted(p[column] for p in self.trace_pairs)
            if not isinstance(dist, EmpiricalLength) or sorted(dist.tokens) != observed:
                raise ValueError(f"{field} must be the trace's marginal; omit it when trace_pairs is given")
        return self

    def model_post_init(self, context: Any) -> None:
        if self.trace_pairs is not None:
            pairs = np.asarray(self.trace_pairs, dtype=np.int64).reshape(-1, 2)
            self._derived = _DerivedArrays({"input": pairs[:, 0], "output": pairs[:, 1]})

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

    @property
    def num_trace_requests(self) -> int:
        """Number of requests in the trace; 0 without one."""
        return 0 if self.trace_pairs is None else len(self.trace_pairs)

    def sample_requests(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(input_tokens, output_tokens) of ``n`` requests as int64 arrays.

        With a trace, whole pairs are drawn uniformly with replacement (joint distribution kept);
        otherwise input and output lengths are drawn independently.
        """
        if self._derived is not None:
            idx = rng.integers(0, self.num_trace_requests, size=n)
            return self._derived.arrays["input"][idx].copy(), self._derived.arrays["output"][idx].copy()
        return self.input_tokens.sample_tokens(rng, n), self.output_tokens.sample_tokens(rng, n)

    def with_arrival_rate(self, arrival_rate_rps: float | None) -> "Workload":
        """The same workload at another arrival rate (None: find the highest rate)."""
        return self.model_validate({**self.model_dump(), "arrival_rate_rps": arrival_rate_rps})

    def summary(self) -> dict[str, Any]:
        """A compact description for reports: means and p90s, not the trace itself."""
        return {
            "name": self.name,
            "input_tokens_kind": self.input_tokens.kind,
            "mean_input_tokens": round(self.mean_input_tokens, 1),
            "p90_input_tokens": round(self.input_tokens.quantile_tokens(0.9), 1),
            "output_tokens_kind": self.output_tokens.kind,
            "mean_output_tokens": round(self.mean_output_tokens, 1),
            "p90_output_tokens": round(self.output_tokens.quantile_tokens(0.9), 1),
            "num_trace_requests": self.num_trace_requests,
            "trace_source": self.trace_source,
            "arrival_rate_rps": self.arrival_rate_rps,
            "prefix_cache_hit_fraction": self.prefix_cache_hit_fraction,
        }


def check_fits_context(workload: Workload, max_context_tokens: int, model: str, field: str = "workload") -> None:
    """Refuse a workload whose requests do not fit the model's context (``max_position_embeddings``).

    A request needs input + output tokens of context. Fixed lengths are checked exactly; for a
    distribution its 90th percentiles (summed, so a little conservative): a workload whose p90
    request cannot be served is not one the engine would run.
    """
    from layoutopt.bounds import check_context_length

    if workload.input_tokens.kind == "fixed" and workload.output_tokens.kind == "fixed":
        shown_in, shown_out = workload.input_tokens.tokens, workload.output_tokens.tokens
    else:
        shown_in = workload.input_tokens.quantile_tokens(0.9)
        shown_out = workload.output_tokens.quantile_tokens(0.9)
    check_context_length(field, shown_in, max_context_tokens, model, output_tokens=shown_out)
