"""Token-length distributions: fixed, histogram, lognormal (from mean and p90), and empirical.

Every distribution answers ``mean_tokens``, ``quantile_tokens(q)`` (q in [0, 1]) and
``sample_tokens(rng, n)``; lengths are whole tokens >= 1. ``EmpiricalLength`` holds the observed
lengths of a trace (one marginal of its (input, output) pairs). Quantiles and the lognormal's
normal CDF and quantile come from ``scipy.special`` (``frozen()`` gives the ``scipy.stats`` object).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

import numpy as np
from layoutopt.bounds import MAX_TOKENS, TokenCount
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

# z such that Phi(z) = 0.9 (scipy.special.ndtri(0.9)), to turn a lognormal's p90 into its sigma.
_Z90 = 1.2815515655446004
# Largest p90 / mean of any lognormal: p90 / mean = exp(z s - s^2 / 2) peaks at s = z.
MAX_LOGNORMAL_P90_OVER_MEAN = math.exp(_Z90**2 / 2)  # about 2.27

# 1 .. 2^31 - 1 tokens, never true/false (see layoutopt.bounds)
PositiveTokens = TokenCount


def _check_q(q: float) -> float:
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    return q


class _DerivedArrays:
    """Holds arrays derived from a model's fields; equality-neutral so model ``==`` compares fields."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DerivedArrays)

    __hash__ = None  # type: ignore[assignment]


class _Dist(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class FixedLength(_Dist):
    """Every request has the same length."""

    kind: Literal["fixed"] = "fixed"
    tokens: PositiveTokens

    @property
    def mean_tokens(self) -> float:
        return float(self.tokens)

    def quantile_tokens(self, q: float) -> float:
        _check_q(q)
        return float(self.tokens)

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)


class HistogramLength(_Dist):
    """Discrete lengths with weights (need not sum to 1; zero weights allowed, not all zero)."""

    kind: Literal["histogram"] = "histogram"
    # Tuples, not lists: a frozen workload must be hashable (the performance model caches on it).
    tokens: tuple[PositiveTokens, ...] = Field(min_length=1)
    weights: tuple[Annotated[float, Field(ge=0, allow_inf_nan=False)], ...] = Field(min_length=1)
    _derived: _DerivedArrays = PrivateAttr()

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, weights: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        tokens = info.data.get("tokens")
        if tokens is not None and len(tokens) != len(weights):
            raise ValueError(f"needs one weight per entry of tokens: {len(tokens)} tokens, {len(weights)} weights")
        if sum(weights) <= 0:
            raise ValueError("weights must not all be zero")
        return weights

    def model_post_init(self, context: Any) -> None:
        tokens = np.asarray(self.tokens, dtype=np.int64)
        probs = np.asarray(self.weights, dtype=float)
        keep = probs > 0  # a zero-weight length can never be drawn, nor be a quantile
        order = np.argsort(tokens[keep], kind="stable")
        probs = probs[keep][order]
        self._derived = _DerivedArrays({"tokens": tokens[keep][order], "probs": probs / probs.sum()})

    @property
    def mean_tokens(self) -> float:
        d = self._derived.arrays
        return float(np.average(d["tokens"], weights=d["probs"]))

    def quantile_tokens(self, q: float) -> float:
        """Smallest length whose cumulative probability reaches q (the weighted inverted CDF)."""
        _check_q(q)
        d = self._derived.arrays
        idx = int(np.searchsorted(np.cumsum(d["probs"]), q - 1e-12))
        return float(d["tokens"][min(idx, len(d["tokens"]) - 1)])

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        d = self._derived.arrays
        return rng.choice(d["tokens"], size=n, p=d["probs"])


class EmpiricalLength(_Dist):
    """Observed lengths, each equally likely (the marginal of a trace)."""

    kind: Literal["empirical"] = "empirical"
    tokens: tuple[PositiveTokens, ...] = Field(min_length=1, description="observed lengths in tokens")
    _derived: _DerivedArrays = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._derived = _DerivedArrays({"sorted": np.sort(np.asarray(self.tokens, dtype=np.int64))})

    @property
    def mean_tokens(self) -> float:
        return float(self._derived.arrays["sorted"].mean())

    def quantile_tokens(self, q: float) -> float:
        """Inverted empirical CDF: the smallest observed length with at least a fraction q at or below it."""
        _check_q(q)
        values = self._derived.arrays["sorted"]
        # np.quantile(method="inverted_cdf") without the tolerance: 0.3 x 10 is 3.0000000000000004 there
        idx = math.ceil(q * len(values) - 1e-9) - 1
        return float(values[min(max(idx, 0), len(values) - 1)])

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.choice(self._derived.arrays["sorted"], size=n)


class LognormalLength(_Dist):
    """Lognormal lengths given by their mean and 90th percentile, clipped to [1, max_tokens].

    ``mean`` and ``p90`` (tokens) describe the unclipped lognormal; ``mean_tokens`` accounts for
    the clip. Of the two lognormals with a given mean and p90 this is the lighter-tailed one
    (log-space sigma <= 1.28), which requires mean < p90 <= 2.27 x mean. Use
    :meth:`from_median_p90` when the median is what was measured.
    """

    kind: Literal["lognormal"] = "lognormal"
    mean: float = Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False, description="mean length in tokens")
    p90: float = Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False, description="90th-percentile length in tokens")
    max_tokens: PositiveTokens | None = Field(default=None, description="lengths above this are clipped to it")

    @field_validator("p90")
    @classmethod
    def _check_p90(cls, p90: float, info: ValidationInfo) -> float:
        mean = info.data.get("mean")
        if mean is None:
            return p90
        if p90 <= mean:
            raise ValueError(f"p90 must exceed the mean ({mean:g}) for a lognormal; use fixed for constant lengths")
        if p90 > mean * MAX_LOGNORMAL_P90_OVER_MEAN * (1 + 1e-12):
            raise ValueError(
                f"p90 is {p90 / mean:.2f}x the mean ({mean:g}); a lognormal's p90 is at most "
                f"{MAX_LOGNORMAL_P90_OVER_MEAN:.2f}x its mean. Lower p90, give median instead of mean, "
                "or use a histogram or a trace"
            )
        return p90

    @classmethod
    def from_median_p90(cls, median: float, p90: float, max_tokens: int | None = None) -> "LognormalLength":
        """The lognormal with this median and p90 (tokens); needs median < p90 <= 5.17 x median."""
        if not 0 < median < p90:
            raise ValueError(f"needs 0 < median < p90, got median {median:g} and p90 {p90:g}")
        sigma = math.log(p90 / median) / _Z90
        if sigma > _Z90:
            raise ValueError(
                f"p90 is {p90 / median:.2f}x the median; at most {math.exp(_Z90**2):.2f}x is supported "
                "(heavier tails: use a histogram or a trace)"
            )
        return cls(mean=median * math.exp(sigma**2 / 2), p90=p90, max_tokens=max_tokens)

    def _params(self) -> tuple[float, float]:
        """(mu, sigma) of the underlying normal."""
        # mean = exp(mu + s^2/2), p90 = exp(mu + z s)  =>  s^2/2 - z s + ln(p90/mean) = 0
        disc = max(_Z90**2 - 2 * math.log(self.p90 / self.mean), 0.0)
        sigma = _Z90 - math.sqrt(disc)
        return math.log(self.mean) - sigma**2 / 2, sigma

    def frozen(self):
        """The unclipped lognormal as a frozen ``scipy.stats.lognorm`` (shape sigma, scale e^mu)."""
        from scipy.stats import lognorm

        mu, sigma = self._params()
        return lognorm(s=sigma, scale=math.exp(mu))

    @property
    def mean_tokens(self) -> float:
        if self.max_tokens is None:
            return float(self.mean)
        from scipy.special import ndtr  # the standard normal CDF, a fast ufunc

        # E[min(X, M)] = E[X; X < M] + M P(X >= M) for X lognormal(mu, s)
        mu, sigma = self._params()
        log_cap = math.log(self.max_tokens)
        below = self.mean * ndtr((log_cap - mu - sigma**2) / sigma)
        return float(below + self.max_tokens * ndtr((mu - log_cap) / sigma))

    def quantile_tokens(self, q: float) -> float:
        from scipy.special import ndtri  # the standard normal quantile (frozen scipy.stats objects are 20x slower)

        _check_q(q)
        mu, sigma = self._params()
        value = math.exp(mu + sigma * ndtri(min(max(q, 1e-12), 1 - 1e-12)))
        return float(min(max(value, 1.0), self.max_tokens or math.inf))

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        mu, sigma = self._params()
        values = np.rint(rng.lognormal(mu, sigma, size=n)).astype(np.int64)
        return np.clip(values, 1, self.max_tokens or np.iinfo(np.int64).max)


LengthDistribution = Annotated[
    Union[FixedLength, HistogramLength, LognormalLength, EmpiricalLength], Field(discriminator="kind")
]

DISTRIBUTION_KINDS: dict[str, type[_Dist]] = {
    "fixed": FixedLength,
    "histogram": HistogramLength,
    "lognormal": LognormalLength,
    "empirical": EmpiricalLength,
}
