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
budget, so the batch (and each prompt's share of the step's fixed cost) grows with the load
(:func:`prefill_batching`); the queue is G/G/c by Allen-Cunneen (DistServe models a prefill
instance as M/D/1; Zhong et al., OSDI'24, section 3.1) with ``c`` instances sharing the queue
(the simulator's least-outstanding-work router behaves so), and a prompt's first token waits for
its whole batch step. TTFT percentiles combine the exponential-tail wait with the prompt-length
distribution exactly (:func:`~layoutopt.perf_model.queueing.wait_plus_service_quantiles`). Decode
TPOT quantiles are normal around the mean with the spread of the batch; colocated ones add the
prompts riding in a request's steps (a busy period, right-skewed: a lognormal per output length,
mixed over output lengths).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.queueing import (
    mgc_wait_arrays,
    normal_cdf_array,
    normal_quantile,
    slot_wait_arrays,
    wait_plus_service_quantiles,
)

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
    return np.geomspace(1e-3, float(costs.max_batch_size), points)


def _decode_steps(costs: PhaseCosts) -> float:
    return max(costs.output_tokens_mean - 1.0, 1.0)


def _z(quantiles: tuple[float, ...]) -> np.ndarray:
    return np.array([normal_quantile(q) for q in quantiles])[None, :]


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
               population: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Wait for one of the instance's ``max_batch_size`` sequence slots (KV memory, --max-num-seqs);
    ``full_residence_s`` is a sequence's residence when every slot is held (slower steps).

    A closed loop never holds more requests than slots here (the rest wait outside, see
    ``closed_loop``), so only open-loop arrivals wait for a slot.
    """
    if population is not None:
        return np.zeros_like(rate), np.zeros_like(rate)
    return slot_wait_arrays(rate, residence_s, float(costs.max_batch_size), costs.reservation_scv,
                            full_residence_s)


def decode_rows(costs: PhaseCosts, batch: np.ndarray | None = None,
                quantiles: tuple[float, ...] = QUANTILES, population: float | None = None) -> Rows:
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
    p_wait, cond = _slot_wait(costs, rate, steps * tau + tau, (steps + 1.0) * tau_full, population)
    # A sequence whose KV has arrived joins the batch at the next step boundary (half a step on
    # average while the instance decodes), then its first step produces the first token.
    first = tau * (1.0 + 0.5 * np.minimum(n, 1.0))
    first_q = wait_plus_service_quantiles(p_wait, cond, first[:, None], np.ones(1), quantiles)
    return Rows(quantiles, rate, n, p_wait * cond + first, first_q, tau, tpot_q, np.zeros_like(n),
                n <= costs.max_batch_size * (1 + 1e-9), p_wait, cond, first[:, None])


def prefill_batching(costs: PhaseCosts, rate_rps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean prompts per step, mean prompts arriving during one step) of a prefill server at each rate.

    A free server takes every waiting prompt (up to ``prompts_per_step``), so a step holds the
    arrivals of the step before it, or one prompt after an idle spell: with m arrivals per step
    (Poisson), the share of steps that start after an idle spell is e^-m and the mean batch is
    k = m + e^-m. m itself grows with k (a fuller step lasts longer): m = lambda T(k) / pp per
    server, T(k) = T0 + k t; the fixed point is found by a few substitutions.
    """
    rate = np.asarray(rate_rps, dtype=float) / max(costs.prefill_servers, 1)
    own_mean = float(((costs.prefill_s - costs.prefill_step_fixed_s) * costs.input_weights).sum())
    a = rate * (costs.prefill_step_fixed_s / costs.pipeline_depth)   # m = a + b k
    b = rate * (own_mean / costs.pipeline_depth)
    # Start from the busy-server solution k = a / (1 - b) (e^-m ~ 0) and substitute; the map
    # contracts (slope b (1 - e^-m) < 1 while stable), so a few substitutions settle it.
    top = costs.prompts_per_step
    k = np.minimum(np.maximum(a / np.maximum(1.0 - b, 1e-9), 1.0), top)
    for _ in range(4):
        m = a + b * k
        k = np.minimum(np.maximum(m + np.exp(-m), 1.0), top)
    m = a + b * k
    return k, m


def prefill_rows(costs: PhaseCosts, rate_rps: np.ndarray | None = None, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """Prefill pool at each rate: TTFT = queue + the batch step the prompt rides in + KV transfer.

    ``prefill_servers`` instances share one queue (the router sends each prompt to the instance
    with the least outstanding work, which behaves like one G/G/c queue). A server's occupancy per
    prompt is its own work plus its share of the step's fixed cost at the batch formed at this
    load (:func:`prefill_batching`); those who wait, wait for the step in progress, stretched by
    1 / (1 - rho) as full steps approach what the pool drains. A prompt's first token comes when
    its whole step ends: its own prefill plus the work of the prompts that arrived while it waited
    (or while its earlier chunks ran), up to the token budget.
    """
    quantiles = _with_defaults(quantiles)
    weights = costs.input_weights
    servers = max(costs.prefill_servers, 1)
    if rate_rps is None:
        rate_rps = np.geomspace(1e-4, 0.999, _GRID_POINTS) * servers / _full_batch_occupancy(costs)
    rate = np.asarray(rate_rps, dtype=float)
    k, m = prefill_batching(costs, rate)
    own = costs.prefill_s - costs.prefill_step_fixed_s
    own_mean = float((own * weights).sum())
    # Occupancy per prompt: its own work plus its share of the step's fixed cost; moments over the
    # fine length grid (the heavy tail of long prompts dominates the second moment).
    mean_occ, second_occ = costs.prefill_moments(-costs.prefill_step_fixed_s * (1.0 - 1.0 / k))
    mean_occ, second_occ = mean_occ / costs.pipeline_depth, second_occ / costs.pipeline_depth**2
    scv = np.maximum(second_occ / mean_occ**2 - 1.0, 0.0)
    util = rate * mean_occ / servers
    if servers == 1:
        p_wait = np.minimum(util, 1.0)  # Erlang C with one server: the utilization
    else:
        p_wait, _ = mgc_wait_arrays(rate, mean_occ, 0.0, servers, arrival_scv)
    # Those who wait, wait for the rest of the step in progress (a free server takes every waiting
    # prompt, so the backlog rides in the next step and shows in its length, see ``riders``), and
    # for the steps before theirs once full steps no longer drain the arrivals: the step of k
    # prompts x (ca^2 + cs^2 / k) / 2 (Allen-Cunneen; a step of k prompts varies less than one
    # prompt) / (c (1 - rho)), rho the utilization of full steps. With one prompt per step this
    # is M/G/c.
    step_occ = (costs.prefill_step_fixed_s + k * own_mean) / costs.pipeline_depth
    rho = rate * _full_batch_occupancy(costs) / servers
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = step_occ / (servers * (1.0 - rho)) * (arrival_scv + scv / k) / 2.0
    cond = np.where((util >= 1.0) | (rho >= 1.0), np.inf, np.where(rate <= 0, 0.0, cond))
    # The step holding a prompt's last tokens also carries the prompts that arrived while it waited
    # and while its earlier chunks ran (a free server takes every waiting prompt, up to the token
    # budget), and its first token waits for that whole step.
    mean_tokens = costs.mean_input_tokens
    budget = float(costs.chunk_tokens)
    tail = np.mod(costs.input_tokens_uncached, budget)
    room = np.where(tail > 0, budget - tail, 0.0)
    earlier_s = costs.prefill_s * np.maximum(costs.input_tokens_uncached - tail, 0.0) / costs.input_tokens_uncached
    with np.errstate(invalid="ignore"):
        mean_wait = np.where(np.isfinite(cond), p_wait * cond, 0.0)
    arrived = (rate / servers * mean_tokens)[:, None] * (mean_wait[:, None] + earlier_s[None, :])
    riders_tokens = np.minimum(room[None, :], arrived)
    service = (costs.prefill_s[None, :] + riders_tokens * (own_mean / mean_tokens) + costs.kv_transfer_s[None, :]
               + costs.request_overhead_s)
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    zeros = np.zeros_like(rate)
    zq = np.zeros((len(rate), len(quantiles)))
    return Rows(quantiles, rate, zeros, np.where(util < 1, ttft_mean, np.inf), ttft_q, zeros, zq, util, util < 1,
                p_wait, np.where(util < 1, cond, np.inf), service)


def _full_batch_occupancy(costs: PhaseCosts) -> float:
    """Mean server time per prompt when every step is full (the pool's capacity bound)."""
    return float((costs.prefill_occupancy_s * costs.input_weights).sum())


def colocated_rows(costs: PhaseCosts, batch: np.ndarray | None = None, arrival_scv: float = 1.0,
                   quantiles: tuple[float, ...] = QUANTILES, population: float | None = None) -> Rows:
    """Colocated instance with chunked prefill at each decode batch size ``n``.

    A prompt of length L adds W(L, n) seconds to the decode steps its chunks ride in
    (``prompt_extra_at``). Over a long run, steps advance the batch by one token each and prompts
    arrive at lambda: tau = d(n) + lambda tau E[W], and Little's law n = lambda (O - 1) tau gives
    tau = d(n) + n E[W] / (O - 1) and the rate, both closed forms in n.

    A request's TPOT adds the prompts that arrive during its life, ~ Poisson(lambda (O_i - 1) tau),
    each adding W / (O_i - 1): variance lambda tau E[W^2] E[1 / (O - 1)], on top of the batch's
    spread. Its TTFT: the rest of the step in progress (length-biased), its own mixed step
    d(n) + W(L, n), the wait for a sequence slot near the batch limit, the request overhead.
    """
    quantiles = _with_defaults(quantiles)
    n = batch_grid(costs) if batch is None else np.asarray(batch, dtype=float)
    steps = _decode_steps(costs)
    weights = costs.input_weights
    tau, rate, d, extra = _colocated_tau(costs, n, steps, population)
    mean_extra = (extra * weights).sum(axis=1)
    extra_sq = (extra**2 * weights).sum(axis=1)
    prompts_per_step = rate * tau                                   # lambda tau
    # Before its own step a prompt waits for the rest of the step in progress (length-biased:
    # E[T^2] / (2 E[T]) over decode-only and prompt steps) and rides with the prompts that arrive
    # meanwhile (lambda tau of them, each adding E[W]). The rest of a step is bounded by one step
    # (steps vary little), so it counts with its mean in the service, not with an exponential tail;
    # the riders, whose number varies, are the exponential part of the delay.
    second = d**2 + prompts_per_step * (2.0 * d * mean_extra + extra_sq)
    busy = np.minimum(n, 1.0)
    rest_of_step = 0.5 * second / tau * busy
    delay = prompts_per_step * mean_extra * busy
    service = (d + rest_of_step)[:, None] * busy[:, None] + extra + costs.request_overhead_s
    residence = steps * tau + (service * weights).sum(axis=1) + delay
    p_slot, cond_slot = _slot_wait(costs, rate, residence, residence, population)
    # Prompt chunks go in arrival order, so a prompt also queues behind the backlog of earlier
    # prompts (a long prompt holds the budget for several steps): M/G/1 over the budget left by
    # decode tokens, each prompt occupying its own work plus its token share of a step's decode.
    budget = np.maximum(costs.chunk_tokens - n, 1.0)
    occupancy = extra + (d * busy)[:, None] * np.minimum(costs.input_tokens_uncached[None, :] / budget[:, None], 1.0)
    rho = rate * (occupancy * weights).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        queue_wait = (rate * (occupancy**2 * weights).sum(axis=1) * _tail_factor(costs) * (arrival_scv + 1.0) / 4.0
                      / (1.0 - rho))
    queue_wait = np.where(rho < 1.0, queue_wait, np.inf)
    p_queue = np.minimum(rho, 1.0)
    p_wait = 1.0 - (1.0 - busy) * (1.0 - p_slot) * (1.0 - p_queue)
    with np.errstate(invalid="ignore"):
        cond = np.where(p_wait > 0, (delay + p_slot * cond_slot + queue_wait) / np.maximum(p_wait, 1e-12), 0.0)
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    own_step = (d + mean_extra + delay) * busy + extra.min(axis=1) * (1.0 - busy)
    tpot_q = np.maximum(_colocated_tpot_quantiles(costs, rate, tau, mean_extra, extra_sq * _tail_factor(costs),
                                                  own_step, costs.decode_spread_at(n), quantiles),
                        costs.decode_at(1.0))
    # Stable while the rate still grows with the batch, the budget holds the prompt tokens of a
    # step, and the batch fits.
    tau_up, rate_up, _, _ = _colocated_tau(costs, n * 1.02 + 1e-3, steps, population)
    prompt_tokens = n * costs.mean_input_tokens / steps
    stable = ((rate_up > rate) & (prompt_tokens <= budget) & (rho < 1.0)
              & (n <= costs.max_batch_size * (1 + 1e-9)))
    util = np.minimum(prompts_per_step, 1.0)
    return Rows(quantiles, rate, n, np.where(stable, ttft_mean, np.inf), ttft_q, tau, tpot_q, util, stable,
                p_wait, np.where(stable, cond, np.inf), service)


def _colocated_tpot_quantiles(costs: PhaseCosts, rate: np.ndarray, tau: np.ndarray, mean_extra: np.ndarray,
                              extra_sq: np.ndarray, own_step: np.ndarray, decode_spread: np.ndarray,
                              quantiles: tuple[float, ...]) -> np.ndarray:
    """TPOT quantiles (rows, quantiles) of a colocated request: its m = O - 1 decode steps plus the
    prompts whose chunks ride in them.

    Every prompt that arrives while the request decodes adds W to its life, and so do those that
    arrive meanwhile: the life is an M/G/1 busy period started by the request's own decode work
    (prompt load rho = lambda E[W]), mean m d / (1 - rho), variance m d lambda E[W^2] / (1 - rho)^3.
    It also starts behind the prompts that arrived during the step that finished its own prompt
    (b, compound Poisson over that step), which weigh more on short outputs (b / m). Given m,
    TPOT = life / m is right-skewed (a compound-Poisson sum): lognormal matched on its mean and
    variance (the batch's spread added); the quantiles are those of the mixture over output lengths.
    """
    if costs.output_steps is None:
        steps = np.array([_decode_steps(costs)])
        weights = np.ones(1)
    else:
        steps, weights = costs.output_steps, costs.output_weights
    rho = np.clip(rate * mean_extra, 0.0, 0.99)[:, None]
    inv = 1.0 / steps[None, :]
    backlog = (rate * own_step * mean_extra)[:, None] / (1.0 - rho)          # mean, busy period included
    backlog_var = (rate * own_step * extra_sq)[:, None] / (1.0 - rho) ** 2
    mean = tau[:, None] + backlog * inv                                        # (rows, output bins)
    var = (decode_spread[:, None] ** 2 + (rate * extra_sq * tau)[:, None] * inv / (1.0 - rho) ** 2
           + backlog_var * inv**2)
    sigma = np.sqrt(np.log1p(var / np.maximum(mean, 1e-12) ** 2))
    mu = np.log(np.maximum(mean, 1e-12)) - 0.5 * sigma**2
    return _lognormal_mixture_quantiles(mu, np.maximum(sigma, 1e-9), weights, quantiles)


def _lognormal_mixture_quantiles(mu: np.ndarray, sigma: np.ndarray, weights: np.ndarray,
                                 quantiles: tuple[float, ...], iterations: int = 40) -> np.ndarray:
    """Quantiles (rows, quantiles) of sum_j w_j LogNormal(mu_ij, sigma_ij): bisection in log time
    between the smallest and largest component quantile (the mixture's lies between them)."""
    z = _z(quantiles)[:, :, None]                                     # (1, q, 1)
    comp = mu[:, None, :] + z * sigma[:, None, :]                     # (rows, q, bins)
    low, high = comp.min(axis=2), comp.max(axis=2)
    w = (weights / weights.sum())[None, None, :]
    q = np.asarray(quantiles)[None, :]
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        cdf = (w * normal_cdf_array((mid[:, :, None] - mu[:, None, :]) / sigma[:, None, :])).sum(axis=2)
        below = cdf < q
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return np.exp(0.5 * (low + high))


def _tail_factor(costs: PhaseCosts) -> float:
    """E[S^2] of prefill time over the fine length grid / over the quantile bins (>= 1): what the
    bins' truncated tail leaves out of a second moment."""
    _, fine = costs.prefill_moments(0.0)
    binned = float((costs.prefill_s**2 * costs.input_weights).sum())
    return max(float(fine) / binned, 1.0) if binned > 0 else 1.0


def _colocated_tau(costs: PhaseCosts, n: np.ndarray, steps: float, population: float | None):
    """(tau, rate, decode-only step, extra seconds per prompt length) at decode batches ``n``."""
    d = costs.decode_at(seen_batch(costs, n, population))
    extra = costs.prompt_extra_at(n)
    tau = d + n * (extra * costs.input_weights).sum(axis=1) / steps
    return tau, n / (steps * tau), d, extra


def rows_for(costs: PhaseCosts, phase: str, arrival_scv: float = 1.0,
             quantiles: tuple[float, ...] = QUANTILES, points: int = _GRID_POINTS) -> Rows:
    """The load grid of a phase ('prefill', 'decode' or 'colocated') with ``points`` rows."""
    if phase == "prefill":
        top = max(costs.prefill_servers, 1) / _full_batch_occupancy(costs)
        return prefill_rows(costs, np.geomspace(1e-4, 0.999, points) * top, arrival_scv, quantiles)
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
                    rows.tpot_q_s, np.array([1.0]), np.array([False]), np.array([1.0]), inf, rows.ttft_service_s)
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
    p_any = 1.0 - (1.0 - p1) * (1.0 - p2)
    cond = max(c1, c2)
    p = mean_wait / cond if cond > 0 else 0.0
    if p > p_any:
        p, cond = p_any, mean_wait / p_any
    q = wait_plus_service_quantiles(np.array([p]), np.array([cond]), service, weights, QUANTILES)[0] * 1e3
    mean = (mean_wait + float((service[0] * weights).sum())) * 1e3
    return LatencyStats(mean=mean, p50=float(q[0]), p90=float(q[1]), p99=float(q[2]))
