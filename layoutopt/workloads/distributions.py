"""Token-length distributions: fixed, histogram, lognormal (from mean and p90), and traces.

Every distribution answers ``mean_tokens``, ``quantile_tokens(q)`` and ``sample_tokens(rng, n)``;
lengths are whole tokens >= 1.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

# z such that Phi(z) = 0.9, to turn a lognormal's p90 into its sigma.
_Z90 = 1.2815515655446004


class _Dist(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FixedLength(_Dist):
    """Every request has the same length."""

    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(ge=1)

    @property
    def mean_tokens(self) -> float:
        return float(self.tokens)

    def quantile_tokens(self, q: float) -> float:
        return float(self.tokens)

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)


class HistogramLength(_Dist):
    """Discrete lengths with weights (need not sum to 1)."""

    kind: Literal["histogram"] = "histogram"
    tokens: list[int] = Field(min_length=1)
    weights: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "HistogramLength":
        if len(self.tokens) != len(self.weights):
            raise ValueError(f"tokens has {len(self.tokens)} entries but weights has {len(self.weights)}")
        if any(t < 1 for t in self.tokens):
            raise ValueError("every length in tokens must be >= 1")
        if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError("weights must be >= 0 and not all zero")
        return self

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.tokens)
        tokens = np.asarray(self.tokens, dtype=np.int64)[order]
        probs = np.asarray(self.weights, dtype=float)[order]
        return tokens, probs / probs.sum()

    @property
    def mean_tokens(self) -> float:
        tokens, probs = self._sorted()
        return float((tokens * probs).sum())

    def quantile_tokens(self, q: float) -> float:
        tokens, probs = self._sorted()
        idx = int(np.searchsorted(np.cumsum(probs), q - 1e-12))
        return float(tokens[min(idx, len(tokens) - 1)])

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        tokens, probs = self._sorted()
        return rng.choice(tokens, size=n, p=probs)


class LognormalLength(_Dist):
    """Lognormal lengths given by their mean and 90th percentile (p90 > mean), clipped to [1, max_tokens]."""

    kind: Literal["lognormal"] = "lognormal"
    mean: float = Field(gt=0, description="mean length in tokens")
    p90: float = Field(gt=0, description="90th-percentile length in tokens")
    max_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> "LognormalLength":
        if self.p90 <= self.mean:
            raise ValueError(f"p90 ({self.p90}) must exceed mean ({self.mean}) for a lognormal")
        self._params()  # raises when no lognormal has this mean and p90
        return self

    def _params(self) -> tuple[float, float]:
        # mean = exp(mu + s^2/2), p90 = exp(mu + z s)  =>  s^2/2 - z s + ln(p90/mean) = 0
        c = math.log(self.p90 / self.mean)
        disc = _Z90**2 - 2 * c
        if disc < 0:
            raise ValueError(f"no lognormal has mean {self.mean} and p90 {self.p90}; p90 is too far above the mean")
        sigma = _Z90 - math.sqrt(disc)
        mu = math.log(self.mean) - sigma**2 / 2
        return mu, sigma

    @property
    def mean_tokens(self) -> float:
        return float(self.mean)

    def quantile_tokens(self, q: float) -> float:
        from statistics import NormalDist

        mu, sigma = self._params()
        value = math.exp(mu + sigma * NormalDist().inv_cdf(min(max(q, 1e-9), 1 - 1e-9)))
        return float(min(value, self.max_tokens) if self.max_tokens else value)

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        mu, sigma = self._params()
        values = np.rint(rng.lognormal(mu, sigma, size=n)).astype(np.int64)
        return np.clip(values, 1, self.max_tokens or np.iinfo(np.int64).max)


LengthDistribution = Annotated[
    Union[FixedLength, HistogramLength, LognormalLength], Field(discriminator="kind")
]
