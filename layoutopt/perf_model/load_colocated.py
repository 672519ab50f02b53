"""Open-loop colocated instances: decode with chunked prefill riding in its steps (see :mod:`layoutopt.perf_model.load`)."""


from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.special import pdtrc

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.memo import KeepAliveMemo
from layoutopt.perf_model.load_rows import (
    Rows,
    _decode_steps,
    _slot_wait,
    _with_defaults,
    _z,
    batch_grid,
    seen_batch,
)
from layoutopt.perf_model.queueing import (
    normal_cdf_array,
    wait_plus_service_quantiles,
)

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


def colocated_rows(costs: PhaseCosts, batch: np.ndarray | None = None, arrival_scv: float = 1.0,
                   quantiles: tuple[float, ...] = QUANTILES, population: float | None = None,
                   instances: int = 1, tpot_floor: bool = False) -> Rows:
    """Colocated instance with chunked prefill at each decode batch size ``n``.

    ``tpot_floor`` replaces the TPOT quantiles by values they never exceed, at a fraction of the
    cost (for capacity upper bounds): each the smallest over output lengths of that length's own
    quantile, which bounds the mixture's from below, without solving for the mixture's.

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
    core = _shared_core(costs, n, population)
    steps, weights = core.steps, costs.input_weights
    tau, rate = core.tau, core.rate
    prompts_per_step, busy, delay = core.prompts_per_step, core.busy, core.delay
    service = core.service_s()  # the TTFT without waits (see _Core.service_s); the riders are ``delay``
    residence = steps * tau + (service * weights).sum(axis=1) + delay
    # With every slot held the steps run at the full batch, so a sequence resides longer (as for
    # decode_rows); the slot wait's drain and its pull back to the mean use that residence.
    full_residence = residence + steps * np.maximum(core.tau_full - tau, 0.0)
    p_slot, cond_slot = _slot_wait(costs, rate, residence, full_residence, population, instances)
    rho, occupancy, tail = core.rho, core.occupancy, core.tail
    with np.errstate(divide="ignore", invalid="ignore"):
        queue_wait = (rate * (occupancy**2 * weights).sum(axis=1) * tail * (arrival_scv + 1.0) / 4.0
                      / (1.0 - rho))
    queue_wait = np.where(rho < 1.0, queue_wait, np.inf)
    p_queue = np.minimum(rho, 1.0)
    p_wait = 1.0 - (1.0 - busy) * (1.0 - p_slot) * (1.0 - p_queue)
    with np.errstate(invalid="ignore"):
        cond = np.where(p_wait > 0, (delay + p_slot * cond_slot + queue_wait) / np.maximum(p_wait, 1e-12), 0.0)
    ttft_q = wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    tpot_q = core.tpot_quantiles(quantiles, tpot_floor)
    stable = core.stable
    util = np.minimum(prompts_per_step, 1.0)
    return Rows(quantiles, rate, n, np.where(stable, ttft_mean, np.inf), ttft_q, tau, tpot_q, util, stable,
                p_wait, np.where(stable, cond, np.inf), service)


def colocated_tpot_floors(costs: PhaseCosts, batch: np.ndarray, quantiles: tuple[float, ...] = QUANTILES,
                          probe: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(TPOT floors (rows, quantiles), stable, rates at the ``probe`` batches, TTFT floors of the
    first row (quantiles)) of :func:`colocated_rows(tpot_floor=True)` at the same batches and
    quantiles, without the TTFT's waits (no slot wait, no prompt queue): what a capacity bound
    that ignores the TTFT targets beyond the first row needs. The probe rates are
    :func:`colocated_rates_rps`', computed in the same pass; the first row's TTFT floors are the
    quantiles of its service alone (a wait only adds to it)."""
    quantiles = _with_defaults(quantiles)
    core = _Core(costs, np.asarray(batch, dtype=float), None, probe)
    first = service_quantiles(core.service_s(slice(0, 1))[0], costs.input_weights, quantiles)
    return core.tpot_quantiles(quantiles, True), core.stable, core.probe_rate, first


def service_quantiles(service_s: np.ndarray, weights: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """Quantiles of a discrete service time alone: ``wait_plus_service_quantiles`` with no wait
    (the smallest value whose cumulative weight exceeds q)."""
    order = np.argsort(service_s)
    cum = np.cumsum(weights[order] / weights.sum())
    first = np.minimum(np.searchsorted(cum, np.asarray(quantiles) + 1e-12, side="right"), len(cum) - 1)
    return service_s[order][first]


# _Core objects remembered (by table identity and batches; each keeps its table alive).
_core_memo = KeepAliveMemo(max_entries=64)


def _shared_core(costs: PhaseCosts, n: np.ndarray, population: float | None) -> "_Core":
    """``_Core(costs, n, population)``, remembered for the last 64 of them (``_core_memo``): a
    pool's capacity search (``capacity.pool_capacities_rps``) asks for the same batches at every
    pool size, and only the slot wait depends on the size. The core is read, never written."""
    return _core_memo.get((id(costs), n.tobytes(), population), costs, lambda: _Core(costs, n, population))


class _Core:
    """What the TTFT and the TPOT of a colocated instance at batches ``n`` share: the step, rate
    and the prompts riding in the steps, the prompt queue's load, and stability."""

    def __init__(self, costs: PhaseCosts, n: np.ndarray, population: float | None, probe: np.ndarray | None = None):
        self.costs, self.n = costs, n
        self._tpot: dict[tuple, np.ndarray] = {}   # tpot_quantiles by (quantiles, floor)
        self.steps = steps = _decode_steps(costs)
        weights = costs.input_weights
        # One pass over the batches, the full batch (tau_full), the batches 2 % up (stability) and
        # the probe batches (rates only; every quantity is computed row by row).
        rows = len(n)
        parts = [n, [float(costs.max_batch_size)], n * 1.02 + 1e-3] + ([] if probe is None else [probe])
        tau_every, rate_every, d_every, extra_every, effective_every = _colocated_tau(
            costs, np.concatenate(parts), steps, population)
        self.tau, self.rate, self.d, self.extra = tau, rate, d, extra = (
            tau_every[:rows], rate_every[:rows], d_every[:rows], extra_every[:rows])
        # What a prompt adds to the shared steps (lockstep DP ranks, a once-per-step launch floor):
        # the riders' load, its square weighted as a thinned compound Poisson (own x effective).
        effective = effective_every[:rows]
        self.tau_full, rate_up = tau_every[rows:rows + 1], rate_every[rows + 1:2 * rows + 1]
        self.probe_rate = rate_every[2 * rows + 1:]
        self.mean_extra = mean_extra = (effective * weights).sum(axis=1)
        self.extra_sq = (extra * effective * weights).sum(axis=1)
        self.prompts_per_step = prompts_per_step = rate * tau                  # lambda tau
        self.busy = busy = np.minimum(n, 1.0)
        self.delay = prompts_per_step * mean_extra * busy
        # Prompt chunks go in arrival order, so a prompt also queues behind the backlog of earlier
        # prompts (a long prompt holds the budget for several steps): M/G/1 over the budget left by
        # decode tokens, each prompt occupying its own work plus its token share of a step's decode.
        budget = np.maximum(costs.chunk_tokens - n, 1.0)
        self.occupancy = occupancy = effective + (d * busy)[:, None] * np.minimum(
            costs.input_tokens_uncached[None, :] / budget[:, None], 1.0)
        self.rho = rho = rate * (occupancy * weights).sum(axis=1)
        self.tail = costs.prefill_tail_factor
        # Stable while the rate still grows with the batch, the budget holds the prompt tokens of a
        # step, and the batch fits.
        prompt_tokens = n * costs.mean_input_tokens / steps
        self.stable = ((rate_up > rate) & (prompt_tokens <= budget) & (rho < 1.0)
                       & (n <= costs.max_batch_size * (1 + 1e-9)))

    def service_s(self, rows: slice = slice(None)) -> np.ndarray:
        """A prompt's TTFT without its waits (rows, length bins): the rest of the step in progress
        (length-biased: E[T^2] / (2 E[T]) over decode-only and prompt steps), its own mixed step and
        the request overhead. The prompts that arrive meanwhile ride in its step (lambda tau of
        them, each adding E[W]); their number varies, so they are the exponential part of the wait
        (``delay``), as the rest of a step, bounded by one step, is not."""
        d, tau, busy = self.d[rows], self.tau[rows], self.busy[rows]
        second = d**2 + self.prompts_per_step[rows] * (2.0 * d * self.mean_extra[rows] + self.extra_sq[rows])
        rest_of_step = 0.5 * second / tau * busy
        return (d + rest_of_step)[:, None] * busy[:, None] + self.extra[rows] + self.costs.request_overhead_s

    def tpot_quantiles(self, quantiles: tuple[float, ...], floor: bool) -> np.ndarray:
        """TPOT quantiles (rows, quantiles), or floors of them (``floor``); computed once per core."""
        key = (quantiles, floor)
        if key not in self._tpot:
            self._tpot[key] = self._tpot_quantiles(quantiles, floor)
        return self._tpot[key]

    def _tpot_quantiles(self, quantiles: tuple[float, ...], floor: bool) -> np.ndarray:
        costs, busy = self.costs, self.busy
        own_step = (self.d + self.mean_extra + self.delay) * busy + self.extra.min(axis=1) * (1.0 - busy)
        return np.maximum(_colocated_tpot_quantiles(costs, self.rate, self.tau, self.mean_extra,
                                                    self.extra_sq * self.tail, own_step,
                                                    costs.decode_spread_at(self.n), quantiles, floor),
                          costs.decode_at(1.0))


def colocated_rates_rps(costs: PhaseCosts, batch: np.ndarray, population: float | None = None) -> np.ndarray:
    """Requests/s of a colocated instance at decode batches ``batch``: the ``rate_rps`` column of
    :func:`colocated_rows` at the same batches, without the latencies."""
    return _colocated_tau(costs, np.asarray(batch, dtype=float), _decode_steps(costs), population)[1]


def _colocated_tpot_quantiles(costs: PhaseCosts, rate: np.ndarray, tau: np.ndarray, mean_extra: np.ndarray,
                              extra_sq: np.ndarray, own_step: np.ndarray, decode_spread: np.ndarray,
                              quantiles: tuple[float, ...], floor: bool = False) -> np.ndarray:
    """TPOT quantiles (rows, quantiles) of a colocated request: its m = O - 1 decode steps plus the
    prompts whose chunks ride in them.

    Every prompt that arrives while the request decodes adds W to its life, and so do those that
    arrive meanwhile: the life is an M/G/1 busy period started by the request's own decode work
    (prompt load rho = lambda E[W]), mean m d / (1 - rho), variance m d lambda E[W^2] / (1 - rho)^3.
    It also starts behind the prompts that arrived during the step that finished its own prompt
    (b, compound Poisson over that step), which weigh more on short outputs (b / m). Given m,
    TPOT = life / m is right-skewed (a compound-Poisson sum): lognormal matched on its mean and
    variance (the batch's spread added); the quantiles are those of the mixture over output lengths
    (``floor``: the smallest component quantile instead, a lower bound of the mixture's).
    """
    if costs.output_steps is None:
        steps = np.array([_decode_steps(costs)])
        weights = np.ones(1)
    else:
        steps, weights = costs.output_steps, costs.output_weights
    rho = np.minimum(np.maximum(rate * mean_extra, 0.0), 0.99)[:, None]  # np.clip's numbers, faster
    inv = 1.0 / steps[None, :]
    backlog = (rate * own_step * mean_extra)[:, None] / (1.0 - rho)          # mean, busy period included
    backlog_var = (rate * own_step * extra_sq)[:, None] / (1.0 - rho) ** 2
    mean = tau[:, None] + backlog * inv                                        # (rows, output bins)
    var = (decode_spread[:, None] ** 2 + (rate * extra_sq * tau)[:, None] * inv / (1.0 - rho) ** 2
           + backlog_var * inv**2)
    sigma = np.sqrt(np.log1p(var / np.maximum(mean, 1e-12) ** 2))
    mu = np.log(np.maximum(mean, 1e-12)) - 0.5 * sigma**2
    if floor:
        # Below every component's q-quantile each component CDF is under q, so the mixture's is too.
        return np.exp((mu[:, None, :] + _z(quantiles)[:, :, None] * np.maximum(sigma, 1e-9)[:, None, :]).min(axis=2))
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
    x = np.minimum(np.maximum((np.log(m1) - 0.5 * s2)[:, None] + _z(quantiles) * np.sqrt(s2)[:, None], low), high)
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


def _colocated_tau(costs: PhaseCosts, n: np.ndarray, steps: float, population: float | None):
    """(tau, rate, decode-only step, extra seconds per prompt length, the step time each prompt
    adds on average) at decode batches ``n``.

    The first extra is a prompt's own mixed step (its TTFT); the second what it costs the steps
    everyone shares (the mean TPOT): with k ~ Poisson(mu) prompts arriving per step (mu = lambda tau
    = n / (O - 1)),

    - attention-DP ranks step in lockstep and the router spreads the k prompts over the dp ranks,
      so a step lasts as long as its most loaded rank, ceil(k / dp) prompts: each costs its own
      work times ``lockstep_share(mu, dp)`` = E[ceil(k / dp)] / E[k] (1 without DP, 1/dp when
      every rank has prompts), and it shares a rank with another only at mu / dp per rank; prompts
      that arrive in groups of one per rank (``PhaseCosts.prompts_in_rank_groups``) share 1/dp;
    - an eager launch floor (``prompt_floor_at``) is paid once by a step however many prompts it
      carries: (1 - e^-mu) F per step, F (1 - e^-mu) / mu per prompt.
    """
    d = costs.decode_at(seen_batch(costs, n, population))
    extra = costs.prompt_extra_at(n)
    per_step = n / steps
    ranks = max(costs.prefill_servers, 1)
    floor = costs.prompt_floor_at(n)
    extra = extra + _sharing_penalty(costs, n, extra, per_step / ranks if ranks > 1 else per_step, floor)[:, None]
    if ranks <= 1:
        share = None
    elif costs.prompts_in_rank_groups:
        share = np.full_like(per_step, 1.0 / ranks)[:, None]  # every step with prompts has one on each rank
    else:
        share = lockstep_share(per_step, ranks)[:, None]
    return tau_from_extras(d, n, steps, per_step, extra, share, floor, costs.input_weights)


def tau_from_extras(d: np.ndarray, n: np.ndarray, steps: float, per_step: np.ndarray, extra: np.ndarray,
                    share: np.ndarray | None, floor: np.ndarray | None, input_weights: np.ndarray):
    """``_colocated_tau``'s last part, shared with ``colocated_bounds`` (which stacks many tables'
    rows): the step time each prompt adds on average (its work times the lockstep share, the
    launch floor once per step) and the mean step tau at decode batches ``n``."""
    effective = extra if share is None else extra * share
    if floor is not None:
        mu = np.maximum(per_step, 1e-12)
        once = (-np.expm1(-mu) / mu)[:, None]
        effective = effective - (floor if share is None else floor * share) + floor * once
    tau = d + n * (effective * input_weights).sum(axis=1) / steps
    return tau, n / (steps * tau), d, extra, effective


def lockstep_share(prompts_per_step: np.ndarray, ranks: int) -> np.ndarray:
    """E[ceil(K / ranks)] / E[K], K ~ Poisson(``prompts_per_step``): the share of its own work a
    prompt adds to a lockstep step whose ``ranks`` attention-DP ranks each take an equal share of
    the step's prompts (the most loaded rank takes ceil(K / ranks)). 1 for one rank or a trickle of
    prompts, 1 / ranks when every rank has many.

    A smooth function of mu, read from a cubic spline in log mu through its exact values
    (``_lockstep_exact``, within 1e-7 relative; tests/test_perf_load.py); outside the spline's
    range the exact sum. The sum costs a Poisson tail per rank multiple, which made it a fifth of
    the search's colocated bounds."""
    mu = np.maximum(np.asarray(prompts_per_step, dtype=float), 1e-12)
    if ranks <= 1:
        return np.ones_like(mu)
    inside = (mu >= _LOCKSTEP_MU[0]) & (mu <= _LOCKSTEP_MU[-1])
    if not inside.all():
        # The exact sum for the rows outside only (a third of a colocated grid: its lowest
        # batches), each row's sum on its own (the values do not depend on the other rows).
        out = np.empty_like(mu)
        outside = ~inside
        out[outside] = _lockstep_exact(mu[outside], ranks)
        if inside.any():
            out[inside] = _lockstep_spline(ranks)(np.log(mu[inside]))
        return out
    return _lockstep_spline(ranks)(np.log(mu))


# mu of the spline's knots: 0.6 % apart, from a trickle to more prompts per step than any grid asks.
_LOCKSTEP_MU = np.geomspace(1e-3, 1024.0, 6145)


@lru_cache(maxsize=64)
def _lockstep_spline(ranks: int) -> CubicSpline:
    values = np.concatenate([_lockstep_exact(chunk, ranks) for chunk in np.array_split(_LOCKSTEP_MU, 24)])
    return CubicSpline(np.log(_LOCKSTEP_MU), values)


def _lockstep_exact(mu: np.ndarray, ranks: int, width: int | None = None) -> np.ndarray:
    """E[ceil(K / r)] / mu = sum_{j >= 0} P(K > j r) / mu. Terms with j r below mu - 9 sqrt(mu) - 9
    are 1 (P(K <= j r) < 1e-17) and are counted, not computed; terms past mu + 9 sqrt(mu) + 9 vanish.
    ``width``: the terms summed per row (default ``lockstep_window(mu.max(), ranks)``); each row's
    value depends on its own mu and the width only."""
    mu = np.asarray(mu, dtype=float)
    if not mu.size:
        return mu.copy()
    lo = np.maximum(np.floor((mu - 9.0 * np.sqrt(mu) - 9.0) / ranks), 0.0)
    if width is None:
        width = lockstep_window(float(mu.max()), ranks)
    j = lo[:, None] + np.arange(width)[None, :]
    return (lo + pdtrc(j * ranks, mu[:, None]).sum(axis=1)) / mu


def lockstep_window(mu_max: float, ranks: int) -> int:
    """Terms ``_lockstep_exact`` sums per row for rows whose largest mu is ``mu_max``."""
    return int(math.ceil((18.0 * math.sqrt(mu_max) + 18.0) / ranks)) + 2


def _sharing_penalty(costs: PhaseCosts, n: np.ndarray, extra: np.ndarray, per_step: np.ndarray,
                     floor: np.ndarray | None = None) -> np.ndarray:
    """Seconds added per prompt (rows) because prompts that arrive together share one mixed step.

    W(L, n) is a lone prompt's extra; the mixed step is roofline-shaped (the first prompt tokens
    fill the memory-bound decode step's idle compute nearly free), so two prompts in one step cost
    W(L1 + L2) > W(L1) + W(L2): each co-rider forfeits that slack once. A step takes the prompts
    that arrived during the previous one, k ~ Poisson(mu), mu = lambda tau = n / (O - 1), so per
    prompt the penalty is E[W(L1 + L2) - W(L1) - W(L2); L1 + L2 within the budget] E[(k - 1)^+] / E[k].
    W is ``extra`` without its eager launch ``floor`` (None: none): the floor is paid once per step
    whatever the prompts (``tau_from_extras``), so in W it would count that saving twice and can take
    a prompt's extra below zero.
    """
    if floor is not None:
        extra = extra - floor
    tokens, w = costs.input_tokens, costs.input_weights
    if len(tokens) < 2 or not np.any(extra):
        return np.zeros(len(n))
    pair, cumulative = _pair_terms(tokens.tobytes(), w.tobytes())
    # Only prompts that fit the step's token budget together share it; longer ones run as their
    # own chunks, in steps of their own (and their attention stays within each prompt).
    fitting = np.searchsorted(pair, np.maximum(costs.chunk_tokens - np.asarray(n, dtype=float), 0.0), side="right")
    gap = (extra * cumulative[fitting]).sum(axis=1)
    mu = np.maximum(np.asarray(per_step, dtype=float), 1e-12)
    shared = 1.0 - (-np.expm1(-mu)) / mu
    return gap * shared


@lru_cache(maxsize=256)
def _pair_terms(tokens_bytes: bytes, weights_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(L1 + L2 of every pair of length bins, ascending; (pairs + 1, bins) running sums over those
    pairs of pair weight x the coefficients of W(L1 + L2) - W(L1) - W(L2) in the bins' W).

    W at a pair's total is linear in L between the bins and beyond the last. Row k of the sums
    holds the k shortest pairs: the pairs that fit a budget B are the first
    ``searchsorted(pairs, B, 'right')``, so the penalty at any budget is one row times W.
    """
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
    order = np.argsort(pair, kind="stable")
    weighted = (coefficients * pair_w[None, :])[:, order].T
    cumulative = np.vstack([np.zeros((1, bins)), np.cumsum(weighted, axis=0)])
    return pair[order], cumulative
