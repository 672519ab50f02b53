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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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


@dataclass(frozen=True, eq=False)
class PrefillSteps:
    """Steady state of one prefill server's steps at each rate (server-time units, s)."""

    batch: np.ndarray        # mean prompts per step
    step_s: np.ndarray       # mean server time of a step
    step_scv: np.ndarray     # squared coefficient of variation of a step
    busy: np.ndarray         # share of time the server runs steps


def prefill_steps(costs: PhaseCosts, rate_rps: np.ndarray, iterations: int = 14) -> PrefillSteps:
    """Steps of a prefill server that takes every waiting prompt (up to ``prompts_per_step``).

    A step of k prompts lasts S = T0 + sum t_i; the next holds the A(S) prompts that arrived
    meanwhile, or, when none did (probability P0 = E[e^-lambda S]), one prompt after an idle
    spell. So E[k] = lambda E[S] + P0 and E[S] = (T0 + t P0) / (1 - rho), rho = lambda t: the
    steps lengthen as 1 / (1 - rho) until the token budget caps them. P0 is taken over the spread
    of S (gamma, E[e^-lambda S] = (1 + lambda E[S] v)^(-1/v), v its scv; steps vary a lot, and
    e^-lambda E[S] would understate the idle restarts), and v follows from the same recursion:
    Var S = (k Var t + t^2 lambda E[S]) / (1 - (rho (1 - P0))^2) (the arrivals of one step make
    the next, which an idle restart breaks). E[S] solves the monotone equation by bisection.
    Prompts longer than the token budget count as their chunks (a step holds at most the budget).
    """
    rate = np.asarray(rate_rps, dtype=float) / max(costs.prefill_servers, 1)
    depth = costs.pipeline_depth
    fixed = costs.prefill_step_fixed_s / depth
    own_mean, own_second = costs.prefill_moments(-costs.prefill_step_fixed_s)
    # A step holds at most the token budget, so a longer prompt enters the recursion as its chunks
    # (items): more items per prompt, each less work and far less variable than whole prompts.
    chunks, item_var_ratio = _chunk_items(costs)
    rate = rate * chunks
    # (A prompt whose whole cost is the step's fixed part still takes a sliver of own time.)
    own_mean = max(float(own_mean), 1e-9)
    t = own_mean / chunks / depth
    t_var = t * t * max(own_second / own_mean**2 - 1.0, 0.0) * item_var_ratio
    top = max(float(costs.chunk_tokens) / (costs.mean_input_tokens / chunks), 1.0)
    rho = rate * t
    full = fixed + top * t

    def moments(step):
        k = np.clip((step - fixed) / t, 1.0, top)
        scv = np.ones_like(step)
        p0 = np.exp(-rate * step)
        for _ in range(3):
            p0 = (1.0 + rate * step * scv) ** (-1.0 / scv)
            var = (k * t_var + t * t * rate * step) / np.maximum(1.0 - (rho * (1.0 - p0)) ** 2, 1e-6)
            scv = np.maximum(var / step**2, 1e-3)
        return k, scv, p0

    low = np.full_like(rate, fixed + t)
    high = np.full_like(rate, full)
    # Bisection on E[S]; the step's scv is carried from one probe to the next (it moves little
    # between probes) rather than re-solved at each, then settled at the root.
    scv = np.ones_like(rate)
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        p0 = (1.0 + rate * mid * scv) ** (-1.0 / scv)
        k = np.clip((mid - fixed) / t, 1.0, top)
        var = (k * t_var + t * t * rate * mid) / np.maximum(1.0 - (rho * (1.0 - p0)) ** 2, 1e-6)
        scv = np.maximum(var / mid**2, 1e-3)
        above = mid * (1.0 - rho) - fixed - t * p0 > 0.0
        low, high = np.where(above, low, mid), np.where(above, mid, high)
    step = 0.5 * (low + high)
    k, scv, _ = moments(step)
    busy = np.minimum(rate * step / k, 1.0)
    return PrefillSteps(k, step, scv, busy)


def prefill_batching(costs: PhaseCosts, rate_rps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean prompts per step, mean prompts arriving during one step) at each rate (:func:`prefill_steps`)."""
    steps = prefill_steps(costs, rate_rps)
    return steps.batch, np.asarray(rate_rps, dtype=float) / max(costs.prefill_servers, 1) * steps.step_s


def prefill_rows(costs: PhaseCosts, rate_rps: np.ndarray | None = None, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES) -> Rows:
    """Prefill pool at each rate: TTFT = wait + the batch step the prompt rides in + KV transfer.

    A server takes every waiting prompt up to the token budget (:func:`prefill_steps`). A prompt
    that finds every server busy (Erlang C over the servers' busy share; the router sends it to
    the server with the least work) waits for the rest of that server's step (length-biased,
    E[S^2] / 2 E[S]), for the prompts gathered with it in its own step (the arrivals of that
    length-biased step, up to the room its last chunk leaves in the budget), and, when the tokens
    gathered ahead of it exceed the budget, for further full steps queueing at the full-batch
    rate. That wait is far less variable than an exponential: its spread stays the exponential
    part, the rest is a fixed delay in the service (mean kept). An idle server starts it at once.
    """
    quantiles = _with_defaults(quantiles)
    weights = costs.input_weights
    servers = max(costs.prefill_servers, 1)
    if rate_rps is None:
        rate_rps = np.geomspace(1e-4, 0.999, _GRID_POINTS) * servers / _full_batch_occupancy(costs)
    rate = np.asarray(rate_rps, dtype=float)
    steps = prefill_steps(costs, rate)
    per_server = rate / servers
    own_mean = float(((costs.prefill_s - costs.prefill_step_fixed_s) * weights).sum())
    depth = costs.pipeline_depth
    # A full step spends the whole token budget.
    full_step = (costs.prefill_step_fixed_s + costs.chunk_tokens * own_mean / costs.mean_input_tokens) / depth
    rho_full = rate * _full_batch_occupancy(costs) / servers
    util = steps.busy
    biased = steps.step_s * (1.0 + steps.step_scv)    # the step an arrival falls in (length-biased)
    residual = 0.5 * biased
    mean_tokens = costs.mean_input_tokens
    budget = float(costs.chunk_tokens)
    # Overflow: the tokens gathered during that step beyond one step's budget (E[(G - B)^+], G
    # gamma) are ahead of a prompt half the time (it sits halfway among them) and push it to later
    # full steps, which queue at the full-batch rate (1 / (1 - rho_full)).
    level = budget / np.maximum(per_server * mean_tokens, 1e-12)
    gathered_mean = per_server * biased * mean_tokens
    ahead_excess = 0.5 * gathered_mean * _gamma_excess_share(steps.step_s, steps.step_scv, level)
    overflow_s = ahead_excess / budget * full_step / np.maximum(1.0 - rho_full, 1e-6)
    # The step holding a prompt's last tokens also carries the prompts gathered with it: when the
    # server is busy, the arrivals of a length-biased step, up to the room its last chunk leaves.
    tail = np.mod(costs.input_tokens_uncached, budget)
    room = np.where(tail > 0, budget - tail, 0.0)
    gathered = (per_server * biased * mean_tokens)[:, None]
    riders_s = (np.minimum(room[None, :], gathered) * weights[None, :]).sum(axis=1) * (own_mean / mean_tokens)
    # Those who find every server busy wait for the rest of one server's step (the router sends
    # them to the one with the least work) and the riders gathered with them.
    busy_wait = residual + riders_s
    p_wait = util if servers == 1 else mgc_wait_arrays(rate, util * servers / np.maximum(rate, 1e-300), 0.0,
                                                          servers, arrival_scv)[0]
    unstable = (rho_full >= 1.0) | (util >= 1.0)
    # Rest of the step + riders = S* (U + r), U uniform, S* gamma: far less variable than an
    # exponential; only its standard deviation (and the overflow's) stays random, the
    # rest is a fixed delay of those who wait, counted in the mean service.
    shape = 1.0 / np.maximum(steps.step_scv, 1e-6) + 1.0
    r = riders_s / np.maximum(biased, 1e-12)
    scv_busy = (shape + 1.0) / shape * (1.0 / 3.0 + r + r * r) / (0.5 + r) ** 2 - 1.0
    spread = np.sqrt(np.maximum(scv_busy, 0.0) * busy_wait**2 + overflow_s**2)
    total = busy_wait + overflow_s
    cond = np.minimum(spread, total)
    fixed = (total - cond) * p_wait
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(unstable, np.inf, np.where(rate <= 0, 0.0, cond))
    service = costs.prefill_s[None, :] + costs.kv_transfer_s + costs.request_overhead_s + fixed[:, None]
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    stable = ~unstable
    zeros = np.zeros_like(rate)
    zq = np.zeros((len(rate), len(quantiles)))
    return Rows(quantiles, rate, zeros, np.where(stable, ttft_mean, np.inf), ttft_q, zeros, zq, util, stable,
                p_wait, np.where(stable, cond, np.inf), service)


def _chunk_items(costs: PhaseCosts) -> tuple[float, float]:
    """(chunks per prompt, item scv / prompt scv) when prompts are cut at the token budget, from
    the prompt-length bins (own work about proportional to tokens)."""
    tokens, w = costs.input_tokens_uncached, costs.input_weights
    budget = float(costs.chunk_tokens)
    full = np.floor(tokens / budget)
    tail = tokens - full * budget
    chunks = float(((full + (tail > 0)) * w).sum())
    if chunks <= 1.0 + 1e-12:
        return 1.0, 1.0
    mean = float((tokens * w).sum())
    item_scv = float(((full * budget**2 + tail**2) * w).sum()) * chunks / mean**2 - 1.0
    prompt_scv = float((tokens**2 * w).sum()) / mean**2 - 1.0
    return chunks, float(np.clip(item_scv / max(prompt_scv, 1e-12), 0.0, 1.0))


def _gamma_excess_share(mean: np.ndarray, scv: np.ndarray, level: np.ndarray) -> np.ndarray:
    """E[(X - b)^+] / E[X] for X the length-biased version of a gamma of this mean and scv
    (shape 1 / scv + 1, scale mean scv); upper incomplete gammas by Wilson-Hilferty."""
    a = 1.0 / np.maximum(scv, 1e-6) + 1.0
    theta = mean * np.maximum(scv, 1e-6)

    def upper(shape, x):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = ((x / shape) ** (1.0 / 3.0) - (1.0 - 1.0 / (9.0 * shape))) / np.sqrt(1.0 / (9.0 * shape))
        return 1.0 - normal_cdf_array(np.nan_to_num(z, nan=-10.0, posinf=10.0))

    x = level / np.maximum(theta, 1e-300)
    return np.maximum(upper(a + 1.0, x) - level / (a * theta) * upper(a, x), 0.0)


def _full_batch_occupancy(costs: PhaseCosts) -> float:
    """Mean server time per prompt when every step is full (the pool's capacity bound)."""
    return float((costs.prefill_occupancy_s * costs.input_weights).sum())


def colocated_rows(costs: PhaseCosts, batch: np.ndarray | None = None, arrival_scv: float = 1.0,
                   quantiles: tuple[float, ...] = QUANTILES, population: float | None = None,
                   instances: int = 1) -> Rows:
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
    # With every slot held the steps run at the full batch, so a sequence resides longer (as for
    # decode_rows); the slot wait's drain and its pull back to the mean use that residence.
    tau_full = _colocated_tau(costs, np.array([float(costs.max_batch_size)]), steps, population)[0]
    full_residence = residence + steps * np.maximum(tau_full - tau, 0.0)
    p_slot, cond_slot = _slot_wait(costs, rate, residence, full_residence, population, instances)
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
    _, rate_up, _, _ = _colocated_tau(costs, n * 1.02 + 1e-3, steps, population)
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
    """Quantiles (rows, quantiles) of sum_j w_j LogNormal(mu_ij, sigma_ij), all rows and quantiles
    at once: Newton steps in log time from the moment-matched lognormal's quantile, kept inside
    the smallest and largest component quantile (the mixture's lies between them)."""
    z = _z(quantiles)[:, :, None]                                     # (1, q, 1)
    comp = mu[:, None, :] + z * sigma[:, None, :]                     # (rows, q, bins)
    low, high = comp.min(axis=2), comp.max(axis=2)
    w = (weights / weights.sum())[None, :]
    q = np.asarray(quantiles)[None, :]
    # Start: the lognormal with the mixture's mean and variance (exact for one component).
    m1 = (w * np.exp(mu + 0.5 * sigma**2)).sum(axis=1)
    m2 = (w * np.exp(2.0 * mu + 2.0 * sigma**2)).sum(axis=1)
    s2 = np.log(np.maximum(m2 / m1**2, 1.0 + 1e-12))
    x = np.clip((np.log(m1) - 0.5 * s2)[:, None] + _z(quantiles) * np.sqrt(s2)[:, None], low, high)
    inv = (1.0 / sigma)[:, None, :]
    wq = w[:, None, :]
    mu3 = mu[:, None, :]
    for _ in range(iterations):
        u = (x[:, :, None] - mu3) * inv
        cdf = (wq * normal_cdf_array(u)).sum(axis=2)
        pdf = (wq * np.exp(-0.5 * u * u) * inv).sum(axis=2) * 0.3989422804014327
        # Done when every CDF is within 1e-5 of its target (the erf approximation is good to 1.5e-7)
        # or its bracket is narrower than 1e-4 in log time.
        if ((np.abs(cdf - q) < 1e-5) | (high - low < 1e-4)).all():
            break
        below = cdf < q
        low, high = np.where(below, x, low), np.where(below, high, x)
        step = x + (q - cdf) / np.maximum(pdf, 1e-300)
        # Newton inside the bracket, else bisect (the CDF is monotone, so the bracket shrinks).
        x = np.where((step > low) & (step < high), step, 0.5 * (low + high))
    return np.exp(x)


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
    extra = extra + _sharing_penalty(costs, n, extra, n / steps)[:, None]
    tau = d + n * (extra * costs.input_weights).sum(axis=1) / steps
    return tau, n / (steps * tau), d, extra


def _sharing_penalty(costs: PhaseCosts, n: np.ndarray, extra: np.ndarray, per_step: np.ndarray) -> np.ndarray:
    """Seconds added per prompt (rows) because prompts that arrive together share one mixed step.

    W(L, n) is a lone prompt's extra; the mixed step is roofline-shaped (the first prompt tokens
    fill the memory-bound decode step's idle compute nearly free), so two prompts in one step cost
    W(L1 + L2) > W(L1) + W(L2): each co-rider forfeits that slack once. A step takes the prompts
    that arrived during the previous one, k ~ Poisson(mu), mu = lambda tau = n / (O - 1), so per
    prompt the penalty is E[W(L1 + L2) - W(L1) - W(L2); L1 + L2 within the budget] E[(k - 1)^+] / E[k].
    """
    tokens, w = costs.input_tokens, costs.input_weights
    if len(tokens) < 2 or not np.any(extra):
        return np.zeros(len(n))
    pair, pair_w, coefficients = _pair_terms(tokens.tobytes(), w.tobytes())
    # Only prompts that fit the step's token budget together share it; longer ones run as their
    # own chunks, in steps of their own (and their attention stays within each prompt).
    fits = pair[None, :] <= np.maximum(costs.chunk_tokens - np.asarray(n, dtype=float), 0.0)[:, None]
    gap = ((extra @ coefficients) * (pair_w * fits)).sum(axis=1)
    mu = np.maximum(np.asarray(per_step, dtype=float), 1e-12)
    shared = 1.0 - (-np.expm1(-mu)) / mu
    return gap * shared


@lru_cache(maxsize=256)
def _pair_terms(tokens_bytes: bytes, weights_bytes: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(L1 + L2, pair weight, (bins, pairs) coefficients of W(L1 + L2) - W(L1) - W(L2)) over all
    pairs of length bins; W at a pair's total is linear in L between the bins and beyond the last."""
    tokens, w = np.frombuffer(tokens_bytes), np.frombuffer(weights_bytes)
    bins = len(tokens)
    pair = (tokens[:, None] + tokens[None, :]).ravel()
    pair_w = (w[:, None] * w[None, :]).ravel()
    i = np.clip(np.searchsorted(tokens, pair) - 1, 0, bins - 2)
    frac = (pair - tokens[i]) / (tokens[i + 1] - tokens[i])
    columns = np.arange(len(pair))
    coefficients = np.zeros((bins, len(pair)))
    np.add.at(coefficients, (i, columns), 1.0 - frac)
    np.add.at(coefficients, (i + 1, columns), frac)
    np.add.at(coefficients, (np.repeat(np.arange(bins), bins), columns), -1.0)
    np.add.at(coefficients, (np.tile(np.arange(bins), bins), columns), -1.0)
    return pair, pair_w, coefficients


def rows_for(costs: PhaseCosts, phase: str, arrival_scv: float = 1.0,
             quantiles: tuple[float, ...] = QUANTILES, points: int = _GRID_POINTS, instances: int = 1) -> Rows:
    """The load grid of a phase ('prefill', 'decode' or 'colocated') with ``points`` rows, per
    instance of a pool of ``instances`` that share their decode slots (:func:`_slot_wait`)."""
    if phase == "prefill":
        top = max(costs.prefill_servers, 1) / _full_batch_occupancy(costs)
        return prefill_rows(costs, np.geomspace(1e-4, 0.999, points) * top, arrival_scv, quantiles)
    if phase == "decode":
        return decode_rows(costs, batch_grid(costs, points), quantiles, instances=instances)
    return colocated_rows(costs, batch_grid(costs, points), arrival_scv, quantiles, instances=instances)


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
