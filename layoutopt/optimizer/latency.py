"""Plan-level latency: mix the pools' percentiles by the share of traffic each pool serves.

Each pool reports p50/p90/p99 at its capacity. Its latency distribution is taken as the one
whose quantile function is piecewise linear in the normal score z between those three points
(z = 0, 1.2816, 2.3263) and extended linearly beyond them; for one pool the mixture returns its
own percentiles exactly. A plan's TTFT mixes its prefilling pools (colocated and prefill), its
TPOT its decoding pools (colocated and decode), each weighted by the requests it serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

from layoutopt.plan import Percentiles

_NORMAL = NormalDist()
_KNOT_Z = (0.0, _NORMAL.inv_cdf(0.9), _NORMAL.inv_cdf(0.99))
_BISECTION_STEPS = 80

WeightedPercentiles = tuple[float, Percentiles]


def _knots(p: Percentiles) -> tuple[float, float, float]:
    # Monotone by construction, even if a caller's percentiles tie.
    return p.p50, max(p.p90, p.p50), max(p.p99, p.p90, p.p50)


def _z_of(p: Percentiles, value_ms: float) -> float:
    """Normal score of ``value_ms`` under the piecewise-linear quantile function of ``p``."""
    xs = _knots(p)
    segments = ((0, 1), (1, 2))
    if value_ms <= xs[1]:
        i, j = segments[0]
    else:
        i, j = segments[1]
    dx = xs[j] - xs[i]
    if dx <= 0:
        # A flat segment: every request at that value; step the CDF there.
        return _KNOT_Z[j] + 8.0 if value_ms >= xs[j] else _KNOT_Z[i] - 8.0
    return _KNOT_Z[i] + (value_ms - xs[i]) / dx * (_KNOT_Z[j] - _KNOT_Z[i])


def fraction_within(components: Sequence[WeightedPercentiles], threshold_ms: float) -> float:
    """Share of requests with latency <= ``threshold_ms`` under the weighted mixture."""
    total = sum(w for w, _ in components)
    if total <= 0:
        return 0.0
    return sum(w * _NORMAL.cdf(_z_of(p, threshold_ms)) for w, p in components) / total


def mixture_quantile(components: Sequence[WeightedPercentiles], q: float) -> float:
    """The q-quantile (ms) of the mixture, by bisection on its CDF."""
    low = 0.0
    high = max(_knots(p)[2] for _, p in components) * 4.0 + 1.0
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        if fraction_within(components, mid) < q:
            low = mid
        else:
            high = mid
    return high


def combine(components: Sequence[WeightedPercentiles]) -> Percentiles:
    """p50/p90/p99 of the traffic-weighted mixture of pools."""
    active = [(w, p) for w, p in components if w > 0]
    if not active:
        raise ValueError("no pool carries traffic")
    if len({p for _, p in active}) == 1:
        return active[0][1]
    return Percentiles(p50=mixture_quantile(active, 0.5), p90=mixture_quantile(active, 0.9),
                       p99=mixture_quantile(active, 0.99))
