"""How a MoE router spreads a step's tokens over the experts: the share of experts a batch touches
(with the routers' popularity skew), the distinct experts the busiest expert-parallel rank reads,
and the routed-pair imbalance across ranks. ``compute.forward_pass_costs`` turns these into weight
reads and grouped-GEMM work."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import ndtri


# Skew of the routers' expert popularity within a step: the i-th most popular of E experts takes a
# share of the routed pairs proportional to i^-s (Zipf). Real routers are not uniform over the tokens of
# one step: the experts a handful of sequences use cluster (a profile of Qwen3.5-35B-A3B's 256 experts
# leaves 77 of them unused on average per layer over 5 prompts, 1.5 over 100, where uniform routing of
# those tokens would touch them all; baa.ai/articles/46-moe-routing-256-experts.html), so a decode batch
# reads fewer distinct experts' weights than uniform routing gives, most of all at batches that touch a
# part of the experts (tokens x k ~ E). Uniform routing is the upper bound (the distinct count is concave
# in the popularities), s = 0 recovers it. [fit evidence, one constant for every engine, GPU and model,
# not fitted per row: B200 TPOT MdAPE 10.2 % at s = 0, 10.1 % at 0.3, 9.9 % at 0.4, 10.0 % at 0.5, 9.8 % at
# 0.6 with the profiles fitted at s = 0; 0.4 keeps the H100 rows (6.8 %) and both leave-one-GPU-out figures
# within 0.1 point, where 0.5-0.6 cost the B200 rows from the H100 fit 0.6-0.8 point of TPOT]
EXPERT_POPULARITY_ZIPF = 0.4


# Popularity classes the touched share sums over: the experts in rank order, cut at geometric ranks, so
# the head (where popularities differ most) is resolved expert by expert and the flat tail in groups.
POPULARITY_CLASSES = 24


@lru_cache(maxsize=256)
def _untouched_log_by_class(num_experts: int, experts_per_token: int, skew: float) -> tuple[np.ndarray, np.ndarray]:
    """(log(1 - k p) of each popularity class, the share of the experts in it), p the Zipf(skew)
    popularity averaged over the class's experts."""
    weights = np.arange(1, num_experts + 1, dtype=float) ** -skew
    picked = np.minimum(experts_per_token * weights / weights.sum(), 1.0 - 1e-9)
    edges = np.unique(np.round(np.geomspace(1, num_experts + 1, POPULARITY_CLASSES + 1)).astype(int)) - 1
    sizes = np.diff(edges).astype(float)
    means = np.add.reduceat(picked, edges[:-1]) / sizes
    return np.log1p(-means), sizes / num_experts


def touched_expert_share(num_experts: int, experts_per_token: int, tokens, skew: float = EXPERT_POPULARITY_ZIPF):
    """Expected share of ``num_experts`` that ``tokens`` routed tokens touch, each picking
    ``experts_per_token`` of them with the Zipf popularity ``skew`` (:data:`EXPERT_POPULARITY_ZIPF`):
    mean over experts of 1 - (1 - k p_i)^tokens; 1 - (1 - k/E)^tokens when ``skew`` is 0 (uniform)."""
    if skew <= 0.0:
        return 1.0 - (1.0 - experts_per_token / num_experts) ** tokens
    if isinstance(tokens, np.ndarray):
        log_untouched, share = _untouched_log_by_class(int(num_experts), int(experts_per_token), float(skew))
        return 1.0 - np.exp(np.multiply.outer(tokens, log_untouched)) @ share
    return _touched_share_of(int(num_experts), int(experts_per_token), float(tokens), float(skew))


@lru_cache(maxsize=4096)
def _touched_share_of(num_experts: int, experts_per_token: int, tokens: float, skew: float) -> float:
    """``touched_expert_share`` of one token count, remembered: a search's prefill passes ask for a
    few hundred token counts (prompt lengths x batches) some ten thousand times."""
    log_untouched, share = _untouched_log_by_class(num_experts, experts_per_token, skew)
    return 1.0 - float(np.exp(tokens * log_untouched) @ share)


def expected_distinct_experts(num_experts: int, experts_per_token: int, tokens):
    """Experts a layer touches when ``tokens`` each pick ``experts_per_token`` of ``num_experts``
    (:func:`touched_expert_share`; uniform routing: E (1 - (1 - k/E)^tokens))."""
    return num_experts * touched_expert_share(num_experts, experts_per_token, tokens)


@lru_cache(maxsize=64)
def expected_max_of_normals(count: int) -> float:
    """Expected maximum of ``count`` independent standard normals (Blom's approximation)."""
    return float(ndtri((count - 0.375) / (count + 0.25)))


def max_rank_touched_experts(num_experts: int, experts_per_token: int, tokens, ep: int):
    """Distinct experts the busiest of ``ep`` expert-parallel ranks reads in one MoE layer, when
    ``tokens`` each pick ``experts_per_token`` of ``num_experts`` (E / ep on each rank).

    A rank's weight reads follow the distinct experts its tokens touch, not the pairs routed to
    them: each of its m = E / ep experts is touched with probability q, the layer's touched share
    (:func:`touched_expert_share`: 1 - (1 - k/E)^tokens under uniform routing, less with the routers'
    popularity skew), so
    the count is about Binomial(m, q) and its maximum over ep ranks m q + z_ep sqrt(m q (1 - q)),
    at most m, with z_ep the expected maximum of ep standard normals (Blom's approximation,
    ndtri((ep - 0.375) / (ep + 0.25)): 1.43 for 8 ranks, where sqrt(2 ln ep) would give 2.04 and
    overshoot a simulated routing by 10 %; tests/test_perf_moe_precision.py). Hot experts
    (the profile's ``moe_imbalance``) pile pairs on the busiest rank (:func:`expert_load_imbalance`);
    the popularity skew of the share q lowers the count of every rank alike. Without EP: E q, the whole layer.
    """
    if ep <= 1:
        return expected_distinct_experts(num_experts, experts_per_token, tokens)
    touched_share = touched_expert_share(num_experts, experts_per_token, tokens)
    local = num_experts / ep
    spread = expected_max_of_normals(ep) * math.sqrt(local)
    variance = touched_share * (1.0 - touched_share)
    sd = np.sqrt(variance) if isinstance(variance, np.ndarray) else math.sqrt(variance)
    busiest = local * touched_share + spread * sd
    return np.minimum(busiest, local) if isinstance(busiest, np.ndarray) else min(busiest, local)


def expert_load_imbalance(routed_pairs, ep: int, skew: float):
    """Max / mean routed (token, expert) pairs over ``ep`` expert-parallel ranks.

    Two causes multiply: ``skew``, the engine-observed hot-expert ratio of large batches (the
    profile's ``moe_imbalance``), and sampling noise of a finite batch: with ``P`` pairs spread
    uniformly the per-rank load is about Binomial(P, 1/ep), whose maximum over ep ranks exceeds the
    mean by ~sqrt(2 ln ep) standard deviations, 1 + sqrt(2 ln(ep) (ep - 1) / P) of it (extreme
    value of ep near-normal loads). Small decode batches therefore see much more imbalance than
    large prefill chunks; the ratio never exceeds ep (every pair on one rank). 1 without EP.
    """
    if ep <= 1:
        return 1.0
    # skew (1 + sqrt(spread / P)) = skew + sqrt(skew^2 spread / P)
    spread = skew * skew * (2.0 * math.log(ep) * (ep - 1.0))
    if isinstance(routed_pairs, np.ndarray):
        return np.minimum(skew + np.sqrt(spread / np.maximum(routed_pairs, 1.0)), float(ep))
    return min(skew + math.sqrt(spread / max(routed_pairs, 1.0)), float(ep))
