"""The search's cheapest colocated capacity bound for many step tables at once.

``capacity_bounds.capacity_upper_bound(tier="tpot")`` of a colocated candidate costs about as much as
its step tables: some sixty numpy operations on a (grid rows x prompt lengths) array, each paying
its call overhead on a small array, for every one of the thousands of colocated proposals a
search bounds before it evaluates any. :func:`colocated_tpot_ceilings_rps` computes the same
numbers for a batch of tables that share the workload, the attention-DP rank count and whether
an eager launch floor applies, one operation for all their rows: every row is computed exactly as
``load_colocated._Core`` computes it (the same operations in the same order, per row, so the
same floats; tests/test_colocated_bounds.py checks them equal), and only the table lookups
(decode step, prompt extras, spreads) run per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np

from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.load_colocated import (
    _LOCKSTEP_MU,
    _colocated_tpot_quantiles,
    _lockstep_spline,
    _sharing_penalty,
    lockstep_share,
    service_quantiles,
    tau_from_extras,
)
from layoutopt.perf_model.load_rows import _decode_steps, _with_defaults, batch_grid, seen_batch


def batch_key(costs: PhaseCosts) -> tuple:
    """Tables with equal keys may share one batch: the workload's arrays (by identity: one
    workload's tables share them), the rank count and whether a launch floor applies."""
    return (id(costs.input_tokens), id(costs.input_weights), id(costs.input_tokens_uncached),
            id(costs.output_steps), costs.output_tokens_mean, max(costs.prefill_servers, 1),
            costs.prompt_floor_s is None)


def colocated_tpot_ceilings_rps(tables: Sequence[PhaseCosts], quantiles: tuple[float, ...], ttft: dict[float, float],
                                tpot: dict[float, float], coarse_points: int, fine_points: int) -> list[float]:
    """``capacity_bounds._colocated_rate_ceiling_rps(costs, quantiles, ttft, tpot, every_ttft_row=False)``
    of every table (equal ``batch_key``s), in order, before headroom."""
    first = tables[0]
    count = len(tables)
    rows = coarse_points
    grids = np.stack([batch_grid(t, coarse_points) for t in tables])                       # (L, rows)
    start, stop = grids[:, :-1, None], grids[:, 1:, None]
    points = (start + (stop - start) * np.linspace(0.0, 1.0, fine_points)[None, None, :]).reshape(count, -1)
    full = np.array([[float(t.max_batch_size)] for t in tables])
    # Per table, the rows _Core puts through _colocated_tau: the grid, the full batch, the grid
    # 2 % up (stability) and the probe batches.
    parts = np.concatenate([grids, full, grids * 1.02 + 1e-3, points], axis=1)              # (L, width)
    width = parts.shape[1]
    steps = _decode_steps(first)
    weights = first.input_weights
    tau_all, rate_all, d_all, extra_all, effective_all = _stacked_tau(tables, parts, steps)
    shape = (count, width)
    tau_all, rate_all, d_all = tau_all.reshape(shape), rate_all.reshape(shape), d_all.reshape(shape)
    bins = extra_all.shape[1]
    extra_all, effective_all = extra_all.reshape(count, width, bins), effective_all.reshape(count, width, bins)
    tau, rate, d = tau_all[:, :rows].ravel(), rate_all[:, :rows].ravel(), d_all[:, :rows].ravel()
    extra = extra_all[:, :rows].reshape(-1, bins)
    effective = effective_all[:, :rows].reshape(-1, bins)
    rate_up = rate_all[:, rows + 1:2 * rows + 1].ravel()
    probe_rate = rate_all[:, 2 * rows + 1:]
    n = grids.ravel()
    per_row = np.repeat

    mean_extra = (effective * weights).sum(axis=1)
    extra_sq = (extra * effective * weights).sum(axis=1)
    prompts_per_step = rate * tau
    busy = np.minimum(n, 1.0)
    delay = prompts_per_step * mean_extra * busy
    chunk = per_row(np.array([float(t.chunk_tokens) for t in tables]), rows)
    budget = np.maximum(chunk - n, 1.0)
    occupancy = effective + (d * busy)[:, None] * np.minimum(first.input_tokens_uncached[None, :] / budget[:, None], 1.0)
    rho = rate * (occupancy * weights).sum(axis=1)
    tail = per_row(np.array([t.prefill_tail_factor for t in tables]), rows)
    prompt_tokens = n * first.mean_input_tokens / steps
    max_batch = per_row(np.array([float(t.max_batch_size) for t in tables]), rows)
    stable = (rate_up > rate) & (prompt_tokens <= budget) & (rho < 1.0) & (n <= max_batch * (1 + 1e-9))

    quantiles = _with_defaults(quantiles)
    own_step = (d + mean_extra + delay) * busy + extra.min(axis=1) * (1.0 - busy)
    spread = np.concatenate([t.decode_spread_at(g) for t, g in zip(tables, grids)])
    alone = per_row(np.array([float(t.decode_at(1.0)) for t in tables]), rows)[:, None]
    floors_q = np.maximum(_colocated_tpot_quantiles(first, rate, tau, mean_extra, extra_sq * tail, own_step, spread,
                                                    quantiles, True), alone)
    # _worst_ratio with the TPOT targets only, then the TTFT of each table's first row alone.
    worst = np.zeros(len(n))
    for q, target in tpot.items():
        worst = np.maximum(worst, floors_q[:, quantiles.index(q)] / target)
    ok = (np.where(stable, worst, np.inf) <= 1.0 + 1e-9).reshape(count, rows)
    # _Core.service_s of every table's first row (a prompt's TTFT without its waits).
    d0, tau0, busy0, pps0 = d[::rows], tau[::rows], busy[::rows], prompts_per_step[::rows]
    second = d0**2 + pps0 * (2.0 * d0 * mean_extra[::rows] + extra_sq[::rows])
    rest_of_step = 0.5 * second / tau0 * busy0
    overhead = np.array([t.request_overhead_s for t in tables])[:, None]
    services = (d0 + rest_of_step)[:, None] * busy0[:, None] + extra[::rows] + overhead
    out = []
    for k in range(count):
        alone_q = service_quantiles(services[k], weights, quantiles)
        if not ok[k, 0] or any(alone_q[quantiles.index(q)] > target * (1.0 + 1e-9) for q, target in ttft.items()):
            out.append(0.0)
            continue
        flags = ok[k]
        last = int(np.argmin(flags)) - 1 if not flags.all() else rows - 1
        top = min(last + 1, rows - 1)
        out.append(float(probe_rate[k].reshape(-1, fine_points)[:top].max()) * (1.0 + 1e-9))
    return out


def _stacked_tau(tables: Sequence[PhaseCosts], parts: np.ndarray, steps: float):
    """``load_colocated._colocated_tau`` of every table at its row of ``parts``, rows stacked."""
    first = tables[0]
    n = parts.ravel()
    d = np.concatenate([t.decode_at(seen_batch(t, p)) for t, p in zip(tables, parts)])
    extra = np.concatenate([t.prompt_extra_at(p) for t, p in zip(tables, parts)])
    per_step = n / steps
    ranks = max(first.prefill_servers, 1)
    width = parts.shape[1]
    view = SimpleNamespace(input_tokens=first.input_tokens, input_weights=first.input_weights,
                           chunk_tokens=np.repeat(np.array([float(t.chunk_tokens) for t in tables]), width))
    extra = extra + _sharing_penalty(view, n, extra, per_step / ranks if ranks > 1 else per_step)[:, None]
    floor = None
    if first.prompt_floor_s is not None:
        floor = np.concatenate([t.prompt_floor_at(p) for t, p in zip(tables, parts)])
    share = _stacked_lockstep_share(per_step, ranks, width)[:, None] if ranks > 1 else None
    return tau_from_extras(d, n, steps, per_step, extra, share, floor, first.input_weights)


def _stacked_lockstep_share(prompts_per_step: np.ndarray, ranks: int, width: int) -> np.ndarray:
    """``lockstep_share`` of each table's ``width`` rows as that function computes them for the
    table alone: the spline inside its range for every row at once, the exact sum outside it
    per table (the sum's window follows the largest of the table's rows outside the range)."""
    mu = np.maximum(np.asarray(prompts_per_step, dtype=float), 1e-12)
    inside = (mu >= _LOCKSTEP_MU[0]) & (mu <= _LOCKSTEP_MU[-1])
    if inside.all():
        return _lockstep_spline(ranks)(np.log(mu))
    out = np.empty_like(mu)
    if inside.any():
        out[inside] = _lockstep_spline(ranks)(np.log(mu[inside]))
    outside = ~inside
    for start in np.flatnonzero(outside.reshape(-1, width).any(axis=1)) * width:
        rows = slice(start, start + width)
        out[rows][outside[rows]] = lockstep_share(mu[rows][outside[rows]], ranks)
    return out
