"""Open-loop load rows: the shared result types and the decode-pool model (see :mod:`layoutopt.perf_model.load`)."""


from __future__ import annotations

from dataclasses import dataclass

from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.queueing import (
    normal_quantile,
    slot_wait_arrays,
    wait_plus_service_quantiles,
)
from layoutopt.perf_model.grids import geometric_grid

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
_GRID_POINTS = 96


class LatencyStats(BaseModel):
    """Mean and percentiles of one latency, milliseconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float
    p50: float
    p90: float
    p99: float


class LoadPoint(BaseModel):
    """Steady state of one instance at one load."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    throughput_rps: float = Field(ge=0, description="completed requests/s")
    ttft_ms: LatencyStats
    tpot_ms: LatencyStats
    decode_batch: float = Field(ge=0, description="mean sequences decoding")
    prefill_utilization_fraction: float = Field(ge=0, description="busy share of the prefill server")
    stable: bool = Field(description="False when the offered load exceeds what the instance drains")
    bottleneck: str = Field(description="compute | memory | communication | queueing | kv_capacity")


@dataclass(frozen=True, eq=False)
class Rows:
    """One row per load level; latencies in seconds, quantile columns follow ``quantiles``."""

    quantiles: tuple[float, ...]
    rate_rps: np.ndarray
    batch: np.ndarray
    ttft_mean_s: np.ndarray
    ttft_q_s: np.ndarray   # (rows, quantiles)
    tpot_mean_s: np.ndarray
    tpot_q_s: np.ndarray   # (rows, quantiles)
    prefill_utilization: np.ndarray
    stable: np.ndarray
    # TTFT = W + S: W is 0 with probability 1 - ttft_wait_probability, else exponential with mean
    # ttft_wait_conditional_s; S takes ttft_service_s (rows, prompt lengths) with the input weights.
    # Kept so that stages in series (prefill pool, then decode slot) can be combined.
    ttft_wait_probability: np.ndarray | None = None
    ttft_wait_conditional_s: np.ndarray | None = None
    ttft_service_s: np.ndarray | None = None

    def point(self, index: int, costs: PhaseCosts, phase: str) -> LoadPoint:
        """Row ``index`` as a :class:`LoadPoint` (p50/p90/p99 taken from the quantile columns)."""
        def stats(mean: np.ndarray, q: np.ndarray) -> LatencyStats:
            cols = [self.quantiles.index(x) for x in QUANTILES]
            return LatencyStats(mean=float(mean[index]) * 1e3, p50=float(q[index, cols[0]]) * 1e3,
                                p90=float(q[index, cols[1]]) * 1e3, p99=float(q[index, cols[2]]) * 1e3)

        util = float(self.prefill_utilization[index])
        batch = float(self.batch[index])
        if batch >= 0.95 * costs.max_batch_size and phase != "prefill":
            bottleneck = "kv_capacity"
        elif util > 0.7:
            bottleneck = "queueing"
        else:
            bottleneck = costs.prefill_bottleneck if phase == "prefill" else costs.decode_bottleneck
        return LoadPoint(throughput_rps=float(self.rate_rps[index]), ttft_ms=stats(self.ttft_mean_s, self.ttft_q_s),
                         tpot_ms=stats(self.tpot_mean_s, self.tpot_q_s), decode_batch=batch,
                         prefill_utilization_fraction=min(util, 1.0), stable=bool(self.stable[index]),
                         bottleneck=bottleneck)


def _with_defaults(quantiles: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(sorted(set(QUANTILES) | set(quantiles)))


def batch_grid(costs: PhaseCosts, points: int = _GRID_POINTS) -> np.ndarray:
    """Decode batch sizes from nearly idle to the memory limit (geometric)."""
    return geometric_grid(1e-3, float(costs.max_batch_size), points)


def _decode_steps(costs: PhaseCosts) -> float:
    return max(costs.output_tokens_mean - 1.0, 1.0)


@lru_cache(maxsize=256)
def _z(quantiles: tuple[float, ...]) -> np.ndarray:
    """Standard normal quantiles, shape (1, quantiles) (shared, read-only)."""
    z = np.array([normal_quantile(q) for q in quantiles])[None, :]
    z.setflags(write=False)
    return z


def seen_batch(costs: PhaseCosts, n: np.ndarray, population: float | None = None) -> np.ndarray:
    """Batch a decoding request sees when ``n`` sequences decode on average: itself plus the others.

    Open loop (Poisson arrivals, ``population`` None) the others are ~ Poisson(n) whatever the
    tagged request does (arrival theorem of M/G/inf), so it sees 1 + n on average; a closed loop of
    ``population`` clients leaves N - 1 others, each decoding n / N of the time. The step time at
    this batch is the request's TPOT, which matters at small batches where d(n) is steep (MoE
    models read a new set of experts for every sequence added).
    """
    others = n if population is None else n * (1.0 - 1.0 / max(population, 1.0))
    return np.minimum(1.0 + others, np.maximum(float(costs.max_batch_size), n))


def _slot_wait(costs: PhaseCosts, rate: np.ndarray, residence_s: np.ndarray, full_residence_s: np.ndarray,
               population: float | None, instances: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Wait for one of the instance's ``max_batch_size`` sequence slots (KV memory, --max-num-seqs);
    ``full_residence_s`` is a sequence's residence when every slot is held (slower steps).

    ``rate`` is per instance. With ``instances`` > 1 behind the router (fewest outstanding requests) the
    slots of the pool act as one many-server resource (the router sends an arrival to the instance
    with room), so the wait is that of ``instances`` x slots at the pool's rate.

    A closed loop never holds more requests than slots here (the rest wait outside, see
    ``closed_loop``), so only open-loop arrivals wait for a slot.
    """
    if population is not None:
        return np.zeros_like(rate), np.zeros_like(rate)
    k = max(int(instances), 1)
    return slot_wait_arrays(rate * k, residence_s, float(costs.max_batch_size) * k, costs.reservation_scv,
                            full_residence_s)


_BOUND_GRID_POINTS = 384


def decode_rate_bound_rps(costs: PhaseCosts, max_mean_step_s: float | None = None) -> float:
    """Most requests/s a decode instance drains at any batch up to its memory limit, counting only
    batches whose mean step (the TPOT a request sees, tau) is at most ``max_mean_step_s``.

    The rate is n / ((E[O] - 1) tau(n)) as in :func:`decode_rows`; tau grows with n, so on each
    interval [a, b] of a fine geometric grid it is at most b / ((E[O] - 1) tau(a)), and an
    interval can hold an admissible batch only if tau(a) is admissible.
    """
    grid = geometric_grid(1e-3, float(costs.max_batch_size), _BOUND_GRID_POINTS)
    tau = costs.decode_at(seen_batch(costs, grid))
    bound = grid[1:] / (_decode_steps(costs) * tau[:-1])
    if max_mean_step_s is not None:
        bound = bound[tau[:-1] <= max_mean_step_s]
    return float(bound.max(initial=0.0))


def decode_rows(costs: PhaseCosts, batch: np.ndarray | None = None,
                quantiles: tuple[float, ...] = QUANTILES, population: float | None = None,
                instances: int = 1) -> Rows:
    """Decode-role instance at each batch size.

    TTFT is the wait for a sequence slot, the rest of the step in progress and the first decode
    step (prefill excluded). A
    request's TPOT averages the steps of its life; the batch it sees varies ~ Poisson(n) with
    spread contexts, so TPOT quantiles are tau + z sd, sd = ``decode_spread_at(n)``; tau is the
    step at the batch a request sees (:func:`seen_batch`).
    """
    quantiles = _with_defaults(quantiles)
    n = batch_grid(costs) if batch is None else np.asarray(batch, dtype=float)
    tau = costs.decode_at(seen_batch(costs, n, population))
    steps = _decode_steps(costs)
    rate = n / (steps * tau)
    spread = costs.decode_spread_at(n)
    tpot_q = np.maximum(tau[:, None] + _z(quantiles) * spread[:, None], costs.decode_at(1.0))
    tau_full = costs.decode_at(float(costs.max_batch_size))
    p_wait, cond = _slot_wait(costs, rate, steps * tau + tau, (steps + 1.0) * tau_full, population, instances)
    # A sequence whose KV has arrived joins the batch at the next step boundary (half a step on
    # average while the instance decodes), then its first step produces the first token.
    first = tau * (1.0 + 0.5 * np.minimum(n, 1.0))
    first_q = wait_plus_service_quantiles(p_wait, cond, first[:, None], np.ones(1), quantiles)
    return Rows(quantiles, rate, n, p_wait * cond + first, first_q, tau, tpot_q, np.zeros_like(n),
                n <= costs.max_batch_size * (1 + 1e-9), p_wait, cond, first[:, None])


