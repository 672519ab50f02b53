"""Open-loop load models: latencies of one instance at a Poisson request rate, vectorized over loads.

Inputs are :class:`~layoutopt.perf_model.costs.PhaseCosts` step-time tables (seconds); outputs are
:class:`Rows` (arrays, seconds) or :class:`LoadPoint` (milliseconds, req/s). Notation, per instance:

- ``lam`` arrival rate (req/s); ``I`` mean uncached prompt tokens, ``O`` mean output tokens;
- ``n`` sequences decoding; ``d(n)`` decode step time; ``tau`` mean step time while decoding,
  which is the mean TPOT; ``C`` chunked-prefill budget (prompt + decode tokens per step);
- ``kappa(p)`` seconds per prompt token riding in a step that carries ``p`` prompt tokens.

Decode (Little's law): ``n = lam (O - 1) tau``. A decode instance has ``tau = d(n)``; a colocated
one also carries the prompts, ``p = lam I tau = n I / (O - 1)`` tokens per step, so
``tau = d(n) + kappa(p) p``. Both are closed forms in ``n``, so every quantity is computed on a
grid of batch sizes and the rate follows as ``lam = n / ((O - 1) tau)``; no fixed-point iteration.

Prefill queue: G/G/c by Allen-Cunneen (DistServe models a prefill instance as M/D/1; Zhong et al.,
OSDI'24, section 3.1), ``c`` = attention-DP ranks, service = a prompt's server occupancy (batched
with others up to the token budget, divided by ``pp_size`` because pipelined prompts overlap).
Colocated, the prefill server is the budget left after decode tokens, ``C - n`` tokens per step.
TTFT percentiles combine the exponential-tail wait with the prompt-length distribution exactly
(:func:`~layoutopt.perf_model.queueing.wait_plus_service_quantiles`). A request's TPOT averages
the batch it sees over its life, ~ Poisson(n), so its quantiles use ``n + z sqrt(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.queueing import mgc_wait_arrays, normal_quantile, wait_plus_service_quantiles

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
    return np.geomspace(1e-3, float(costs.max_batch_size), points)


def _kappa(costs: PhaseCosts, prompt_tokens_per_step: np.ndarray) -> np.ndarray:
    """Seconds per prompt token in a step carrying ``p`` of them (log-interpolated one prompt .. full chunk)."""
    one = max(costs.mean_input_tokens, 1.0)
    full = max(float(costs.chunk_tokens), one + 1.0)
    x = np.log(np.clip(prompt_tokens_per_step, one, full))
    return np.interp(x, [np.log(one), np.log(full)], [costs.prefill_s_per_token, costs.chunk_s_per_token])


def _decode_steps(costs: PhaseCosts) -> float:
    return max(costs.output_tokens_mean - 1.0, 1.0)


def _tpot_quantiles(costs: PhaseCosts, batch: np.ndarray, per_token_prompt: np.ndarray,
                    quantiles: tuple[float, ...]) -> np.ndarray:
    """TPOT quantiles (s) at each batch: the batch a request sees is ~ Poisson(n)."""
    z = np.array([normal_quantile(q) for q in quantiles])[None, :]
    n = batch[:, None]
    n_q = np.clip(n + z * np.sqrt(n), 1.0, float(costs.max_batch_size))
    prompt = per_token_prompt[:, None] * n_q
    return costs.decode_at(n_q) + _kappa(costs, prompt) * prompt


def decode_rows(costs: PhaseCosts, batch: np.ndarray | None = None,
                quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """Decode-role instance at each batch size; TTFT is its first decode step (prefill excluded)."""
    quantiles = _with_defaults(quantiles)
    n = batch_grid(costs) if batch is None else np.asarray(batch, dtype=float)
    tau = costs.decode_at(np.maximum(n, 1.0))
    rate = n / (_decode_steps(costs) * tau)
    tpot_q = _tpot_quantiles(costs, n, np.zeros_like(n), quantiles)
    first_q = np.repeat(tau[:, None], len(quantiles), axis=1)
    return Rows(quantiles, rate, n, tau, first_q, tau, tpot_q, np.zeros_like(n),
                n <= costs.max_batch_size * (1 + 1e-9))


def prefill_rows(costs: PhaseCosts, rate_rps: np.ndarray | None = None, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """Prefill-role instance at each rate: TTFT = queue + prefill + KV transfer."""
    quantiles = _with_defaults(quantiles)
    weights = costs.input_weights
    occupancy = costs.prefill_occupancy_s
    mean_occ = float((occupancy * weights).sum())
    if rate_rps is None:
        rate_rps = np.geomspace(1e-4, 0.999, _GRID_POINTS) / mean_occ
    rate = np.asarray(rate_rps, dtype=float)
    servers = costs.prefill_servers
    scv = max(float((occupancy**2 * weights).sum()) / mean_occ**2 - 1.0, 0.0)
    p_wait, cond = mgc_wait_arrays(rate, mean_occ * servers, scv, servers, arrival_scv)
    service = costs.prefill_s + costs.kv_transfer_s + costs.request_overhead_s
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + float((service * weights).sum())
    zeros = np.zeros_like(rate)
    zq = np.zeros((len(rate), len(quantiles)))
    util = rate * mean_occ
    return Rows(quantiles, rate, zeros, np.where(util < 1, ttft_mean, np.inf), ttft_q, zeros, zq, util, util < 1)


def colocated_rows(costs: PhaseCosts, batch: np.ndarray | None = None, arrival_scv: float = 1.0,
                   quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """Colocated instance with chunked prefill at each decode batch size."""
    quantiles = _with_defaults(quantiles)
    n = batch_grid(costs) if batch is None else np.asarray(batch, dtype=float)
    steps = _decode_steps(costs)
    prompt_per_step = n * costs.mean_input_tokens / steps          # p = n I / (O - 1)
    tau = costs.decode_at(np.maximum(n, 1.0)) + _kappa(costs, prompt_per_step) * prompt_per_step
    rate = n / (steps * tau)
    # Prefill server: the budget left after decode tokens, at the cost of a full chunk.
    budget = np.maximum(costs.chunk_tokens - n, 1.0)
    decode_share = costs.decode_at(np.maximum(n, 1.0)) * np.minimum(n, 1.0)
    token_rate = budget / (decode_share + costs.chunk_s_per_token * budget)
    lengths = costs.input_tokens_uncached
    weights = costs.input_weights
    servers = costs.prefill_servers
    mean_occ = costs.mean_input_tokens / token_rate
    scv = max(float((lengths**2 * weights).sum()) / costs.mean_input_tokens**2 - 1.0, 0.0)
    p_wait, cond = mgc_wait_arrays(rate, mean_occ * servers, scv, servers, arrival_scv)
    # Own prefill: alone it takes prefill_s; each of its steps also carries the decode batch's extra
    # cost over a batch of one; it starts at the next step boundary, half a step away on average.
    busy = np.minimum(n, 1.0)  # share of steps with a decode batch at all (light load: few)
    extra_decode = np.maximum(costs.decode_at(np.maximum(n, 1.0)) - costs.decode_at(1.0), 0.0) * busy
    chunks = np.maximum(lengths[None, :] / budget[:, None], 1.0)
    service = (costs.prefill_s[None, :] + chunks * extra_decode[:, None] + 0.5 * (tau * busy)[:, None]
               + costs.request_overhead_s)
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    util = rate * mean_occ
    tpot_q = _tpot_quantiles(costs, n, costs.mean_input_tokens / steps * np.ones_like(n), quantiles)
    stable = (util < 1.0) & (prompt_per_step <= budget) & (n <= costs.max_batch_size * (1 + 1e-9))
    return Rows(quantiles, rate, n, np.where(stable, ttft_mean, np.inf), ttft_q, tau, tpot_q, util, stable)


def rows_for(costs: PhaseCosts, phase: str, arrival_scv: float = 1.0,
             quantiles: tuple[float, ...] = QUANTILES, points: int = _GRID_POINTS) -> Rows:
    """The load grid of a phase ('prefill', 'decode' or 'colocated') with ``points`` rows."""
    if phase == "prefill":
        mean_occ = float((costs.prefill_occupancy_s * costs.input_weights).sum())
        return prefill_rows(costs, np.geomspace(1e-4, 0.999, points) / mean_occ, arrival_scv, quantiles)
    if phase == "decode":
        return decode_rows(costs, batch_grid(costs, points), quantiles)
    return colocated_rows(costs, batch_grid(costs, points), arrival_scv, quantiles)


def rows_at_rate(costs: PhaseCosts, phase: str, rate_rps: float, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """One row at ``rate_rps``: the batch is interpolated from the monotone rate(batch) curve."""
    if phase == "prefill":
        return prefill_rows(costs, np.array([rate_rps]), arrival_scv, quantiles)
    grid = rows_for(costs, phase, arrival_scv, quantiles)
    rates = np.maximum.accumulate(grid.rate_rps)
    if rate_rps > rates[grid.stable].max(initial=0.0):
        n = float(costs.max_batch_size) * 1.5  # beyond the stable range: report the overload
        rows = (decode_rows(costs, np.array([n]), quantiles) if phase == "decode"
                else colocated_rows(costs, np.array([n]), arrival_scv, quantiles))
        inf = np.array([np.inf])
        return Rows(rows.quantiles, np.array([rate_rps]), rows.batch, inf, rows.ttft_q_s * np.inf, rows.tpot_mean_s,
                    rows.tpot_q_s, np.array([1.0]), np.array([False]))
    n = float(np.interp(rate_rps, rates, grid.batch))
    if phase == "decode":
        return decode_rows(costs, np.array([n]), quantiles)
    return colocated_rows(costs, np.array([n]), arrival_scv, quantiles)


def load_at_rate(costs: PhaseCosts, phase: str, rate_rps: float, arrival_scv: float = 1.0) -> LoadPoint:
    """Open-loop steady state of one instance of ``phase`` at ``rate_rps`` (Poisson by default)."""
    return rows_at_rate(costs, phase, rate_rps, arrival_scv).point(0, costs, phase)


def max_stable_rate_rps(rows: Rows) -> float:
    """Highest rate on the grid at which the instance is still stable."""
    return float(rows.rate_rps[rows.stable].max(initial=0.0))
