"""Queueing formulas: pure functions of rates and service times, no model or GPU knowledge.

Notation: ``rate_rps`` is the Poisson arrival rate lambda (requests/s), ``service_s`` a service
time S (seconds), ``rho = lambda E[S] / c`` the utilization of ``c`` servers.

- M/G/1 mean wait (Pollaczek-Khinchine): ``Wq = lambda E[S^2] / (2 (1 - rho))``.
- M/M/c probability of waiting (Erlang C) and the Allen-Cunneen M/G/c approximation
  ``Wq(M/G/c) ~ Wq(M/M/c) (1 + cv_S^2) / 2``.
- Waiting-time distribution: an atom at 0 of mass ``1 - P(wait)`` and an exponential tail with mean
  ``Wq / P(wait)`` (exact for M/M/c, the usual heavy-traffic approximation otherwise).
- The seeds' prefill:decode sizing rule ``N_p : N_d = (T_in / P) : (T_out / D)``
  (seeds/002, section 6.1), which holds for any arrival rate.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr
from pydantic import BaseModel, ConfigDict, Field


def pd_ratio(
    isl_tokens: float, osl_tokens: float, prefill_tok_per_s_per_gpu: float, decode_tok_per_s_per_gpu: float
) -> float:
    """Prefill GPUs per decode GPU, N_p / N_d = (T_in / P) / (T_out / D); independent of the rate."""
    if min(isl_tokens, osl_tokens, prefill_tok_per_s_per_gpu, decode_tok_per_s_per_gpu) <= 0:
        raise ValueError("lengths and per-GPU throughputs must be > 0")
    return (isl_tokens / prefill_tok_per_s_per_gpu) / (osl_tokens / decode_tok_per_s_per_gpu)


def gpus_needed(rate_rps: float, tokens_per_request: float, tok_per_s_per_gpu: float,
                utilization_fraction: float = 0.7) -> float:
    """GPUs of one phase for a rate: N = lambda T / (throughput per GPU x rho) (seeds/002, 6.1)."""
    if not 0 < utilization_fraction <= 1:
        raise ValueError(f"utilization_fraction must be in (0, 1], got {utilization_fraction}")
    return rate_rps * tokens_per_request / (tok_per_s_per_gpu * utilization_fraction)


def erlang_c(num_servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load a = lambda E[S] (Erlang C)."""
    c = int(num_servers)
    if offered_load <= 0:
        return 0.0
    if offered_load >= c:
        return 1.0
    # Iterative Erlang B, numerically stable for large c, then B -> C.
    erlang_b = 1.0
    for k in range(1, c + 1):
        erlang_b = offered_load * erlang_b / (k + offered_load * erlang_b)
    rho = offered_load / c
    return erlang_b / (1.0 - rho + rho * erlang_b)


def mg1_mean_wait_s(rate_rps: float, mean_service_s: float, second_moment_service_s2: float) -> float:
    """Pollaczek-Khinchine mean wait in queue of M/G/1, seconds; inf when rho >= 1."""
    rho = rate_rps * mean_service_s
    if rho >= 1.0:
        return math.inf
    return rate_rps * second_moment_service_s2 / (2.0 * (1.0 - rho))


class WaitDistribution(BaseModel):
    """Waiting time before service: P(W = 0) = 1 - wait_probability, else exponential."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wait_probability: float = Field(ge=0, le=1)
    conditional_mean_s: float = Field(ge=0, description="mean wait of those who wait, seconds")

    @property
    def mean_s(self) -> float:
        return self.wait_probability * self.conditional_mean_s

    @property
    def stable(self) -> bool:
        return math.isfinite(self.conditional_mean_s)

    def cdf(self, t_s: np.ndarray) -> np.ndarray:
        """P(W <= t) for an array of times in seconds (0 for t < 0)."""
        t_s = np.asarray(t_s, dtype=float)
        if not self.stable:
            return np.zeros_like(t_s)
        if self.wait_probability <= 0 or self.conditional_mean_s <= 0:
            return (t_s >= 0).astype(float)
        tail = self.wait_probability * np.exp(-np.maximum(t_s, 0.0) / self.conditional_mean_s)
        return np.where(t_s < 0, 0.0, 1.0 - tail)

    def quantile_s(self, q: float) -> float:
        """Smallest t with P(W <= t) >= q."""
        if not self.stable:
            return math.inf
        if q <= 1.0 - self.wait_probability or self.conditional_mean_s <= 0:
            return 0.0
        return self.conditional_mean_s * math.log(self.wait_probability / (1.0 - q))


NO_WAIT = WaitDistribution(wait_probability=0.0, conditional_mean_s=0.0)


def erlang_c_array(num_servers: "int | np.ndarray", offered_load: np.ndarray) -> np.ndarray:
    """Erlang C for an array of offered loads (1 where a >= c); ``num_servers`` an int or one
    count per load (each element then gets the numbers of its own count's call: the recursion
    stops at its count)."""
    a = np.asarray(offered_load, dtype=float)
    erlang_b = np.ones_like(a)
    if np.ndim(num_servers):
        erlang_b = _erlang_b_by_count(np.broadcast_to(num_servers, a.shape), a)
    else:
        for k in range(1, int(num_servers) + 1):
            erlang_b = a * erlang_b / (k + a * erlang_b)
    rho = a / num_servers
    with np.errstate(divide="ignore", invalid="ignore"):
        out = erlang_b / (1.0 - rho + rho * erlang_b)
    return np.where(a >= num_servers, 1.0, np.where(a <= 0, 0.0, out))


def _erlang_b_by_count(counts: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Erlang B of each load ``a`` over its own server count: the loads sorted by count, most
    first, so that step k of the recursion updates the prefix of those with k servers or more
    (each load gets the updates of its own count's recursion, in the same order)."""
    flat, order = a.ravel(), np.argsort(-counts.ravel(), kind="stable")
    loads, sorted_counts = flat[order], counts.ravel()[order]
    b = np.ones_like(loads)
    top = int(sorted_counts[0]) if len(loads) else 0
    ends = np.searchsorted(-sorted_counts, -np.arange(1, top + 1), side="right").tolist()
    for k, end in zip(range(1, top + 1), ends):
        head, load = b[:end], loads[:end]
        b[:end] = load * head / (k + load * head)
    out = np.empty_like(flat)
    out[order] = b
    return out.reshape(a.shape)


def mgc_wait_arrays(rate_rps: np.ndarray, mean_service_s: np.ndarray, service_scv: float,
                    num_servers: "int | np.ndarray" = 1, arrival_scv: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(P(wait), E[W | W > 0] in s) of G/G/c by Allen-Cunneen, for arrays of rates and mean services
    (``num_servers``: an int or one count per rate).

    E[W | W > 0] = E[S] / (c - a) x (ca^2 + cs^2) / 2 with a = lambda E[S]; Erlang C gives P(wait).
    Poisson arrivals have ca^2 = 1; the conditional mean is inf when a >= c (unstable).
    """
    rate = np.asarray(rate_rps, dtype=float)
    mean = np.broadcast_to(np.asarray(mean_service_s, dtype=float), rate.shape)
    offered = rate * mean
    p_wait = erlang_c_array(num_servers, offered)
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = mean / (num_servers - offered) * (arrival_scv + service_scv) / 2.0
    conditional = np.where(offered >= num_servers, np.inf, np.where(offered <= 0, 0.0, conditional))
    return p_wait, conditional


def mgc_wait(rate_rps: float, mean_service_s: float, service_scv: float, num_servers: int = 1,
             arrival_scv: float = 1.0) -> WaitDistribution:
    """Waiting time of G/G/c (Allen-Cunneen); for M/G/1 the P-K mean with P(wait) = rho."""
    if rate_rps <= 0 or mean_service_s <= 0:
        return NO_WAIT
    p_wait, conditional = mgc_wait_arrays(np.array([rate_rps]), np.array([mean_service_s]), service_scv,
                                          num_servers, arrival_scv)
    return WaitDistribution(wait_probability=float(p_wait[0]), conditional_mean_s=float(conditional[0]))


def wait_plus_service_quantiles(p_wait: np.ndarray, conditional_mean_s: np.ndarray, service_s: np.ndarray,
                                weights: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """Quantiles (s) of T = W + S, shape (rows, quantiles), W independent of a discrete S.

    ``service_s`` is one array of S values for every row, or one row of values per (p, m) row.

    W is 0 with probability 1 - p and exponential with mean m otherwise (one row per (p, m)). On
    the segment s_j <= t < s_j+1 the CDF is F_j - p exp(-t/m) A_j with F_j = sum_{i<=j} w_i and
    A_j = sum_{i<=j} w_i exp(s_i/m); solving it on every segment and taking the smallest valid
    root is exact, without iteration.
    """
    p = np.asarray(p_wait, dtype=float)[:, None, None]
    m = np.asarray(conditional_mean_s, dtype=float)[:, None, None]
    service = np.atleast_2d(np.asarray(service_s, dtype=float))
    order = np.argsort(service[0])  # rows share the order (service grows with prompt length)
    s = service[:, order][:, None, :]
    w = np.asarray(weights, dtype=float)[order]
    w = (w / w.sum())[None, None, :]
    q = np.asarray(quantiles, dtype=float)[None, :, None]
    cum = np.cumsum(w, axis=2)
    finite = np.isfinite(m)
    m_safe = np.where(finite & (m > 0), m, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        terms = np.log(w) + s / m_safe
        log_a = np.logaddexp.accumulate(np.broadcast_to(terms, np.broadcast_shapes(terms.shape, m.shape)), axis=2)
        roots = m_safe * (np.log(np.maximum(p, 1e-300)) + log_a - np.log(cum - q))
    waits = finite & (m > 0) & (p > 0)
    roots = np.where(waits, roots, -np.inf)
    candidates = np.where(cum > q + 1e-12, np.maximum(roots, s), np.inf)
    # Beyond the last atom the CDF is 1 - p exp(-t/m) A_J: the root above always exists when p > 0.
    answer = candidates.min(axis=2)
    last = np.where(waits[..., 0], roots[..., -1], -np.inf)
    tail = np.where(q[..., 0] >= 1.0 - 1e-12, np.inf, last)
    answer = np.where(np.isinf(answer), np.maximum(tail, s[..., -1]), answer)
    return np.where(finite[..., 0], answer, np.inf)


def quantiles_of_wait_plus_service(
    wait: WaitDistribution, service_s: np.ndarray, weights: np.ndarray, quantiles: tuple[float, ...]
) -> list[float]:
    """Quantiles (s) of W + S for one wait distribution (see :func:`wait_plus_service_quantiles`)."""
    rows = wait_plus_service_quantiles(np.array([wait.wait_probability]), np.array([wait.conditional_mean_s]),
                                       service_s, weights, quantiles)
    return [float(x) for x in rows[0]]


def normal_cdf_array(x: np.ndarray) -> np.ndarray:
    """Phi(x) for an array (scipy's ndtr, one ufunc: the load models call it in their inner loops)."""
    return ndtr(np.asarray(x, dtype=float))


def slot_wait_arrays(rate_rps: np.ndarray, residence_s: np.ndarray, num_slots: float,
                     size_scv: float = 0.0,
                     full_residence_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(P(wait), E[W | W > 0] in s) for a request that needs one of ``num_slots`` slots it holds
    for ``residence_s`` (KV slots of a decode batch), offered load ``a = lambda x residence``.

    Many-server diffusion (Halfin-Whitt) of the slots in use, x:

    - below ``c`` the slots drift back to ``a`` like an M/G/inf population (Ornstein-Uhlenbeck);
      when a fuller batch runs slower steps (``full_residence_s``, the residence with all ``c``
      slots held, exceeds ``residence_s``) the pull back weakens by ``1 - e``, e the elasticity
      of the residence in the batch between a and c, and the spread grows by ``1 / (1 - e)``;
    - above ``c`` requests queue and drain at ``delta = c / full_residence - lambda`` per s: the
      instance's throughput with every slot held, less the arrivals.

    Gluing the two densities at c gives ``P(wait) = 1 / (1 + Phi(beta) / phi(beta) x sqrt(v)
    delta / lambda)`` with ``v = a / (1 - e)`` and ``beta = (c - a) / sqrt(v)``, and an exponential
    excess whose wait has mean ``1 / delta``; with e = 0 this is the Halfin-Whitt
    approximation of Erlang C (``beta = (c - a) / sqrt(a)``, wait ``residence / (c - a)``).

    When the slots are bytes of KV and requests hold different amounts (squared coefficient of
    variation ``size_scv``) the occupied memory moves in bundles of ``z = 1 + size_scv`` slots
    (Hayward's peakedness approximation): every count above is divided by z and the wait of those
    who wait grows by z. inf when the full batch does not drain the arrivals."""
    rate = np.asarray(rate_rps, dtype=float)
    residence = np.broadcast_to(np.asarray(residence_s, dtype=float), rate.shape)
    full = residence if full_residence_s is None else np.broadcast_to(np.asarray(full_residence_s, dtype=float),
                                                                      rate.shape)
    full = np.maximum(full, residence)
    offered = rate * residence
    c = float(num_slots)
    z = 1.0 + size_scv
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.maximum(offered, 1e-12)
        elasticity = np.where(c > a * (1 + 1e-9), np.log(full / residence) / np.log(c / a), 0.0)
        elasticity = np.clip(elasticity, 0.0, 0.9)
        spread = np.sqrt(a * z / (1.0 - elasticity))
        drain = c / full - rate
        beta = (c - offered) / spread
        density = np.exp(-0.5 * beta**2) / math.sqrt(2.0 * math.pi)
        ratio = normal_cdf_array(beta) / np.maximum(density, 1e-300)
        p_wait = 1.0 / (1.0 + ratio * spread / z * drain / np.maximum(rate, 1e-300))
        conditional = z / drain
    unstable = (offered >= c) | (drain <= 0)
    p_wait = np.where(unstable, 1.0, np.where(offered <= 0, 0.0, np.clip(p_wait, 0.0, 1.0)))
    conditional = np.where(unstable, np.inf, np.where(offered <= 0, 0.0, conditional))
    return p_wait, conditional


def normal_quantile(q: float) -> float:
    """z with Phi(z) = q (standard normal)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(min(max(q, 1e-9), 1 - 1e-9))
