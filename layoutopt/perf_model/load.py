"""Open-loop load models: latencies of one instance (or pool) at a Poisson rate, vectorized over loads.

Inputs are :class:`~layoutopt.perf_model.costs.PhaseCosts` step-time tables (seconds); outputs are
:class:`Rows` (arrays, seconds) or :class:`LoadPoint` (milliseconds, req/s). Notation, per instance:

- ``lam`` arrival rate (req/s); ``I`` mean uncached prompt tokens, ``O`` output tokens;
- ``n`` sequences decoding; ``d(n)`` decode step time; ``tau`` mean step time while decoding,
  which is the mean TPOT; ``C`` chunked-prefill budget (prompt + decode tokens per step);
- ``W(L, n)`` seconds a prompt of L tokens adds to the decode steps its chunks ride in.

Decode (Little's law): ``n = lam (E[O] - 1) tau``. A decode instance has ``tau = d(n)``; a colocated
one also carries the prompts, ``tau = d(n) + lam tau E[W] = d(n) + n E[W] / (E[O] - 1)``. Both are
closed forms in ``n``, so every quantity is computed on a grid of batch sizes and the rate follows
as ``lam = n / ((E[O] - 1) tau)``; no fixed-point iteration. Near the batch limit a request waits
for a sequence slot (many-server Erlang C over the slots).

Prefill pool: batch service. A free prefill server takes every waiting prompt up to the token
budget, so the batch (and each prompt's share of the step's fixed cost) grows with the load; the
step-length recursion gives the steps' mean and spread (:func:`prefill_steps`), and a prompt that
finds every server busy waits for the rest of a step, the prompts gathered with it, and any
overflow of the budget (:func:`prefill_rows`); with ``c`` instances an arrival waits only when all
are busy (Erlang C; the simulator's least-outstanding-work router behaves so). TTFT percentiles combine the exponential-tail wait with the prompt-length
distribution exactly (:func:`~layoutopt.perf_model.queueing.wait_plus_service_quantiles`). Decode
TPOT quantiles are normal around the mean with the spread of the batch; colocated ones add the
prompts riding in a request's steps (a busy period, right-skewed: a lognormal per output length,
mixed over output lengths).

The models live in three modules: :mod:`~layoutopt.perf_model.load_rows` (result types, decode),
:mod:`~layoutopt.perf_model.load_prefill` and :mod:`~layoutopt.perf_model.load_colocated`; this
module turns them into load grids and single operating points.
"""

from __future__ import annotations

import numpy as np

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.load_colocated import colocated_rates_rps, colocated_rows
from layoutopt.perf_model.load_prefill import _full_batch_occupancy, prefill_rows
from layoutopt.perf_model.load_rows import (
    _GRID_POINTS,
    LatencyStats,
    LoadPoint,
    Rows,
    batch_grid,
    decode_rate_bound_rps,
    decode_rows,
)
from layoutopt.perf_model.queueing import (
    wait_plus_service_quantiles,
)
from layoutopt.perf_model.grids import geometric_grid

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


def rows_for(costs: PhaseCosts, phase: str, arrival_scv: float = 1.0,
             quantiles: tuple[float, ...] = QUANTILES, points: int = _GRID_POINTS, instances: int = 1) -> Rows:
    """The load grid of a phase ('prefill', 'decode' or 'colocated') with ``points`` rows, per
    instance of a pool of ``instances`` that share their decode slots (:func:`_slot_wait`)."""
    if phase == "prefill":
        return prefill_rows(costs, geometric_grid(1e-4, 0.999, points) * prefill_rate_ceiling_rps(costs), arrival_scv,
                            quantiles)
    if phase == "decode":
        return decode_rows(costs, batch_grid(costs, points), quantiles, instances=instances)
    return colocated_rows(costs, batch_grid(costs, points), arrival_scv, quantiles, instances=instances)


def prefill_rate_ceiling_rps(costs: PhaseCosts, servers: int | None = None) -> float:
    """The rate at which the prefill servers (the table's, or ``servers`` of them) are busy all the
    time with full steps: the top of the prefill load grid (every rate the prefill rows evaluate lies
    below it)."""
    return max(costs.prefill_servers if servers is None else servers, 1) / _full_batch_occupancy(costs)


def rows_at_rate(costs: PhaseCosts, phase: str, rate_rps: float, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES, instances: int = 1) -> Rows:
    """One row at ``rate_rps`` (per instance of a pool of ``instances``): the batch is interpolated
    from the monotone rate(batch) curve."""
    if phase == "prefill":
        return prefill_rows(costs, np.array([rate_rps]), arrival_scv, quantiles)
    grid = rows_for(costs, phase, arrival_scv, quantiles, instances=instances)
    rates = np.maximum.accumulate(grid.rate_rps)
    if rate_rps > rates[grid.stable].max(initial=0.0):
        n = float(costs.max_batch_size) * 1.5  # beyond the stable range: report the overload
        rows = (decode_rows(costs, np.array([n]), quantiles, instances=instances) if phase == "decode"
                else colocated_rows(costs, np.array([n]), arrival_scv, quantiles, instances=instances))
        inf = np.array([np.inf])
        return Rows(rows.quantiles, np.array([rate_rps]), rows.batch, inf, rows.ttft_q_s * np.inf, rows.tpot_mean_s,
                    rows.tpot_q_s, np.array([1.0]), np.array([False]), np.array([1.0]), inf, rows.ttft_service_s)
    n = float(np.interp(rate_rps, rates, grid.batch))
    if phase == "decode":
        return decode_rows(costs, np.array([n]), quantiles, instances=instances)
    return colocated_rows(costs, np.array([n]), arrival_scv, quantiles, instances=instances)


def load_at_rate(costs: PhaseCosts, phase: str, rate_rps: float, arrival_scv: float = 1.0,
                 instances: int = 1) -> LoadPoint:
    """Open-loop steady state of one instance of ``phase`` at ``rate_rps`` (Poisson by default),
    one of a pool of ``instances`` behind one router."""
    return rows_at_rate(costs, phase, rate_rps, arrival_scv, instances=instances).point(0, costs, phase)


def series_ttft(first: Rows, second: Rows, weights: np.ndarray) -> LatencyStats:
    """TTFT (ms) of a request that passes two stages in series, row 0 of each (a prefill pool, then
    a decode instance's slot wait and first step); ``weights`` are the prompt lengths' of ``first``.

    The two waits (each an atom at 0 plus an exponential) become one with the same mean whose
    tail is the slower stage's (the sum's tail decays at the slower rate), at most as likely as
    waiting at either; the services add.
    """
    p1, c1 = float(first.ttft_wait_probability[0]), float(first.ttft_wait_conditional_s[0])
    p2, c2 = float(second.ttft_wait_probability[0]), float(second.ttft_wait_conditional_s[0])
    service = first.ttft_service_s[:1] + float((second.ttft_service_s[0]).mean())
    if not (np.isfinite(c1) and np.isfinite(c2)):
        inf = float("inf")
        return LatencyStats(mean=inf, p50=inf, p90=inf, p99=inf)
    mean_wait = p1 * c1 + p2 * c2
    # p1 + p2 - p1 p2, not 1 - (1 - p1)(1 - p2): at a very low rate both are tiny and the
    # subtraction rounds to 0 while mean_wait does not.
    p_any = p1 + p2 - p1 * p2
    cond = max(c1, c2)
    p = mean_wait / cond if cond > 0 else 0.0
    if p > p_any > 0:
        p, cond = p_any, mean_wait / p_any
    q = wait_plus_service_quantiles(np.array([p]), np.array([cond]), service, weights, QUANTILES)[0] * 1e3
    mean = (mean_wait + float((service[0] * weights).sum())) * 1e3
    return LatencyStats(mean=mean, p50=float(q[0]), p90=float(q[1]), p99=float(q[2]))


__all__ = [
    "LatencyStats", "LoadPoint", "Rows", "colocated_rates_rps", "colocated_rows", "decode_rate_bound_rps",
    "decode_rows", "load_at_rate",
    "prefill_rate_ceiling_rps", "prefill_rows", "rows_at_rate", "rows_for", "series_ttft",
]
