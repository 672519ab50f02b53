"""Open-loop prefill pool as a chunked batch service (see :mod:`layoutopt.perf_model.load`)."""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.load_rows import _GRID_POINTS, Rows, _with_defaults
from layoutopt.perf_model.queueing import (
    mgc_wait_arrays,
    normal_cdf_array,
    wait_plus_service_quantiles,
)
from layoutopt.perf_model.grids import geometric_grid

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


@dataclass(frozen=True, eq=False)
class PrefillSteps:
    """Steady state of one prefill server's steps at each rate (server-time units, s)."""

    batch: np.ndarray        # mean prompts per step
    step_s: np.ndarray       # mean server time of a step
    step_scv: np.ndarray     # squared coefficient of variation of a step
    busy: np.ndarray         # share of time the server runs steps


def prefill_steps(costs: PhaseCosts, rate_rps: np.ndarray, iterations: int = 14,
                  servers: "int | np.ndarray | None" = None) -> PrefillSteps:
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
    ``servers``: the pool's prefill servers (default the table's), or one count per rate.
    """
    rate = np.asarray(rate_rps, dtype=float) / (max(costs.prefill_servers, 1) if servers is None else servers)
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
    top = max(float(costs.server_budget_tokens) / (costs.mean_input_tokens / chunks), 1.0)
    rho = rate * t
    full = fixed + top * t

    def moments(step):
        k = np.minimum(np.maximum((step - fixed) / t, 1.0), top)  # np.clip's numbers, without its overhead
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
    # Loop-invariant factors, computed as the expressions below would (same operations, same order).
    arrivals_t2, idle_share = t * t * rate, 1.0 - rho
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        p0 = (1.0 + rate * mid * scv) ** (-1.0 / scv)
        k = np.minimum(np.maximum((mid - fixed) / t, 1.0), top)
        var = (k * t_var + arrivals_t2 * mid) / np.maximum(1.0 - (rho * (1.0 - p0)) ** 2, 1e-6)
        scv = np.maximum(var / mid**2, 1e-3)
        above = mid * idle_share - fixed - t * p0 > 0.0
        low, high = np.where(above, low, mid), np.where(above, mid, high)
    step = 0.5 * (low + high)
    k, scv, _ = moments(step)
    busy = np.minimum(rate * step / k, 1.0)
    return PrefillSteps(k, step, scv, busy)


def prefill_rows(costs: PhaseCosts, rate_rps: np.ndarray | None = None, arrival_scv: float = 1.0,
                 quantiles: tuple[float, ...] = QUANTILES, servers: "np.ndarray | None" = None,
                 blocks: Sequence[int] = ()) -> Rows:
    """Prefill pool at each rate: TTFT = wait + the batch step the prompt rides in + KV transfer.

    A server takes every waiting prompt up to the token budget (:func:`prefill_steps`). A prompt
    that finds every server busy (Erlang C over the servers' busy share; the router sends it to
    the server with the least work) waits for the rest of that server's step (length-biased,
    E[S^2] / 2 E[S]), for the prompts gathered with it in its own step (the arrivals of that
    length-biased step, up to the room its last chunk leaves in the budget), and, when the tokens
    gathered ahead of it exceed the budget, for further full steps queueing at the full-batch
    rate. That wait is far less variable than an exponential: its spread stays the exponential
    part, the rest is a fixed delay in the service (mean kept). An idle server starts it at once.

    ``servers`` (one count per rate, with ``blocks``: the row counts of the calls stacked) gives
    each block of rows the numbers of its own call on the table with that many servers
    (:func:`stacked_prefill_rows`).
    """
    quantiles = _with_defaults(quantiles)
    weights = costs.input_weights
    stacked = servers is not None
    if not stacked:
        servers = max(costs.prefill_servers, 1)
    if rate_rps is None:
        rate_rps = geometric_grid(1e-4, 0.999, _GRID_POINTS) * servers / _full_batch_occupancy(costs)
    rate = np.asarray(rate_rps, dtype=float)
    steps = prefill_steps(costs, rate, servers=servers)
    per_server = rate / servers
    own_mean = float(((costs.prefill_s - costs.prefill_step_fixed_s) * weights).sum())
    depth = costs.pipeline_depth
    # A full step spends the whole token budget.
    full_step = (costs.prefill_step_fixed_s + costs.server_budget_tokens * own_mean / costs.mean_input_tokens) / depth
    rho_full = rate * _full_batch_occupancy(costs) / servers
    util = steps.busy
    biased = steps.step_s * (1.0 + steps.step_scv)    # the step an arrival falls in (length-biased)
    residual = 0.5 * biased
    mean_tokens = costs.mean_input_tokens
    budget = float(costs.server_budget_tokens)
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
    if not stacked and servers == 1:
        p_wait = util
    else:  # (one count per row when stacked: the single-server rows keep util, as their own call does)
        p_wait = np.where(servers == 1, util, mgc_wait_arrays(rate, util * servers / np.maximum(rate, 1e-300), 0.0,
                                                              servers, arrival_scv)[0])
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
    ttft_q = _quantiles_by_block(p_wait, cond, service, weights, quantiles, blocks)
    ttft_mean = p_wait * cond + (service * weights[None, :]).sum(axis=1)
    stable = ~unstable
    zeros = np.zeros_like(rate)
    zq = np.zeros((len(rate), len(quantiles)))
    return Rows(quantiles, rate, zeros, np.where(stable, ttft_mean, np.inf), ttft_q, zeros, zq, util, stable,
                p_wait, np.where(stable, cond, np.inf), service)


def _quantiles_by_block(p_wait, cond, service, weights, quantiles, blocks: Sequence[int]) -> np.ndarray:
    """``wait_plus_service_quantiles`` of each block of rows as its own call computes it: that function
    sorts every row by its first row's service order, so blocks whose first rows sort otherwise
    (a tie one shift rounds away) go alone."""
    if len(blocks) < 2:
        return wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    starts = np.cumsum([0, *blocks])[:-1]
    orders = [np.argsort(service[start]) for start in starts]
    if all(np.array_equal(order, orders[0]) for order in orders[1:]):
        return wait_plus_service_quantiles(p_wait, cond, service, weights, quantiles)
    return np.concatenate([wait_plus_service_quantiles(p_wait[a:a + n], cond[a:a + n], service[a:a + n], weights,
                                                       quantiles) for a, n in zip(starts, blocks)])


def stacked_prefill_rows(costs: PhaseCosts, rates: Sequence[np.ndarray], servers: Sequence[int],
                         quantiles: tuple[float, ...] = QUANTILES) -> list[Rows]:
    """``prefill_rows(pool_i, rates[i], 1.0, quantiles)`` of every pool i, ``costs`` with
    ``servers[i]`` prefill servers (``dataclasses.replace(costs, prefill_servers=servers[i])``), in
    one pass: every row's numbers depend on its rate and its pool's server count only (the same
    operations, per row, as each pool's own call; tests/test_perf_stacked_prefill.py checks them equal)."""
    blocks = [len(r) for r in rates]
    counts = np.repeat(np.array([max(s, 1) for s in servers], dtype=float), blocks)
    rows = prefill_rows(costs, np.concatenate(rates), 1.0, quantiles, servers=counts, blocks=blocks)
    out, start = [], 0
    for n in blocks:
        part = slice(start, start + n)
        out.append(Rows(rows.quantiles, *(getattr(rows, f.name)[part] for f in fields(Rows)[1:])))
        start += n
    return out


def _chunk_items(costs: PhaseCosts) -> tuple[float, float]:
    """(chunks per prompt, item scv / prompt scv) when prompts are cut at the token budget, from
    the prompt-length bins (own work about proportional to tokens)."""
    tokens, w = costs.input_tokens_uncached, costs.input_weights
    budget = float(costs.server_budget_tokens)
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
