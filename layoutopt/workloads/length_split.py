"""A workload split at a prompt-length threshold into two length classes, each a workload of its own.

``split_by_input_length(workload, t)`` gives the short class (input <= t tokens) and the long
class (input > t), each with its conditional input-length distribution, and the short class's
share of the requests p = P(input <= t). The output lengths stay as they were (input and output
are independent in a distribution workload); a trace keeps its (input, output) pairs, so a
correlation between them carries into each class.

Per distribution kind:
    fixed       cannot be split (every request is on one side); None
    histogram, empirical, trace   exact: the entries on each side, renormalised
    lognormal   the truncated lognormal, discretised into ``LOGNORMAL_BINS`` equally likely
                lengths at the midpoints of its conditional quantiles (a histogram), so the mean
                and spread of each class follow the distribution to within a bin

``class_slos`` gives each class an SLO of its own whose mixture meets the workload's: a share of
requests meets a latency target overall when p x (share of short requests meeting it) +
(1 - p) x (share of long ones) reaches it, so the long class may meet each percentile target at
a quantile lowered by a shift d while the short class meets it at one raised by d (1 - p) / p
(both rounded up to 0.1 percentile points, the safe side); attainment shifts the same way.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.workloads.distributions import EmpiricalLength, FixedLength, HistogramLength, LognormalLength
from layoutopt.workloads.slo import SLO, percentile_of_key
from layoutopt.workloads.workload import Workload

LOGNORMAL_BINS = 64
MAX_CLASS_QUANTILE = 0.999  # the tightest per-class percentile a shifted SLO may ask for (p99.9)
MIN_CLASS_FRACTION = 0.01  # a class with fewer requests than this is not worth pools of its own


class LengthSplit(BaseModel):
    """The two classes of one threshold: short (input <= threshold_tokens) and long."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold_tokens: int = Field(ge=1, description="short: input <= this; long: input > this")
    short_fraction: float = Field(gt=0, lt=1, description="share of requests in the short class")
    short: Workload
    long: Workload


def _histogram(tokens: np.ndarray, weights: np.ndarray) -> HistogramLength:
    merged: dict[int, float] = {}
    for t, w in zip(tokens.tolist(), weights.tolist()):
        merged[int(t)] = merged.get(int(t), 0.0) + float(w)
    keys = sorted(merged)
    return HistogramLength(tokens=tuple(keys), weights=tuple(merged[k] for k in keys))


def _split_discrete(tokens: np.ndarray, probs: np.ndarray, threshold: int):
    below = tokens <= threshold
    short_p = float(probs[below].sum())
    if not 0 < short_p < 1:
        return None
    return short_p, _histogram(tokens[below], probs[below]), _histogram(tokens[~below], probs[~below])


def _split_lognormal(dist: LognormalLength, threshold: int):
    from scipy.special import ndtr, ndtri

    mu, sigma = dist._params()
    if dist.max_tokens is not None and threshold >= dist.max_tokens:
        return None
    short_p = float(ndtr((math.log(threshold + 0.5) - mu) / sigma))  # lengths are rounded to whole tokens
    if not 0 < short_p < 1:
        return None

    def bins(low_q: float, high_q: float, cap_low: float, cap_high: float) -> HistogramLength:
        qs = low_q + (high_q - low_q) * (np.arange(LOGNORMAL_BINS) + 0.5) / LOGNORMAL_BINS
        values = np.exp(mu + sigma * ndtri(qs))
        values = np.clip(np.rint(values), cap_low, cap_high).astype(np.int64)
        return _histogram(values, np.ones(LOGNORMAL_BINS))

    top = float(dist.max_tokens) if dist.max_tokens is not None else float(np.iinfo(np.int32).max)
    return short_p, bins(0.0, short_p, 1, threshold), bins(short_p, 1.0, threshold + 1, top)


def split_by_input_length(workload: Workload, threshold_tokens: int) -> LengthSplit | None:
    """The short and long classes of ``workload`` at ``threshold_tokens``; None when one side is empty."""
    threshold = int(threshold_tokens)
    name = workload.name
    if workload.trace_pairs is not None:
        pairs = np.asarray(workload.trace_pairs, dtype=np.int64)
        below = pairs[:, 0] <= threshold
        short_p = float(below.mean())
        if not 0 < short_p < 1:
            return None
        base = workload.model_dump(exclude={"trace_pairs", "input_tokens", "output_tokens", "name"})

        def part(rows: np.ndarray, suffix: str) -> Workload:
            return Workload.model_validate({**base, "name": f"{name}-{suffix}",
                                            "trace_pairs": [tuple(map(int, r)) for r in rows]})

        return LengthSplit(threshold_tokens=threshold, short_fraction=short_p, short=part(pairs[below], "short"),
                           long=part(pairs[~below], "long"))
    dist = workload.input_tokens
    if isinstance(dist, FixedLength):
        return None
    if isinstance(dist, HistogramLength):
        arrays = dist._derived.arrays
        found = _split_discrete(arrays["tokens"], arrays["probs"], threshold)
    elif isinstance(dist, EmpiricalLength):
        values = dist._derived.arrays["sorted"]
        found = _split_discrete(values, np.full(len(values), 1.0 / len(values)), threshold)
    else:
        found = _split_lognormal(dist, threshold)
    if found is None:
        return None
    short_p, short_dist, long_dist = found

    def part(dist_part: HistogramLength, suffix: str) -> Workload:
        return workload.model_copy(update={"input_tokens": dist_part, "name": f"{name}-{suffix}"})

    return LengthSplit(threshold_tokens=threshold, short_fraction=short_p, short=part(short_dist, "short"),
                       long=part(long_dist, "long"))


def _up(q: float) -> float:
    """q rounded up to 0.1 percentile points (the stricter side)."""
    return math.ceil(round(q * 1000, 6)) / 1000


def _key(q: float) -> str:
    return "p" + f"{q * 100:.1f}".rstrip("0").rstrip(".")


def _pair(q: float, p: float, shift: float, top: float) -> tuple[float, float]:
    """(short quantile, long quantile) for one target at quantile q: the long one lowered by at most
    ``shift``, the short one raised so that p q_short + (1 - p) q_long >= q, and q_short <= ``top``."""
    d = max(0.0, min(shift, (top - q) * p / (1 - p), q - 0.001))
    return min(top, _up(q + d * (1 - p) / p)), _up(q - d)


def class_slos(slo: SLO, short_fraction: float, long_shift: float) -> tuple[SLO, SLO]:
    """(short SLO, long SLO) whose mixture at ``short_fraction`` meets ``slo``, the long one looser by up to
    ``long_shift`` (a fraction of requests) per target; a target already near p99.9 shifts less."""
    if long_shift == 0:
        return slo, slo
    p = short_fraction
    sides: list[dict] = [{}, {}]
    for metric in ("ttft_ms", "tpot_ms"):
        short, long = {}, {}
        for key, ms in getattr(slo, metric).items():
            q_short, q_long = _pair(percentile_of_key(key) / 100, p, long_shift, MAX_CLASS_QUANTILE)
            for side, q in ((short, q_short), (long, q_long)):  # two targets on one key: the tighter holds both
                side[_key(q)] = min(ms, side.get(_key(q), ms))
        sides[0][metric], sides[1][metric] = short, long
    a_short, a_long = _pair(slo.attainment, p, long_shift, 1.0)
    return SLO(**sides[0], attainment=a_short), SLO(**sides[1], attainment=a_long)


def candidate_thresholds(workload: Workload, quantiles: tuple[float, ...]) -> list[tuple[float, int]]:
    """(quantile, threshold tokens) at the given prompt-length quantiles, distinct, each leaving both
    classes at least ``MIN_CLASS_FRACTION`` of the requests."""
    out: list[tuple[float, int]] = []
    seen: set[int] = set()
    for q in quantiles:
        threshold = int(math.floor(workload.input_tokens.quantile_tokens(q)))
        if threshold < 1 or threshold in seen:
            continue
        split = split_by_input_length(workload, threshold)
        if split is None or not MIN_CLASS_FRACTION <= split.short_fraction <= 1 - MIN_CLASS_FRACTION:
            continue
        seen.add(threshold)
        out.append((q, threshold))
    return out
