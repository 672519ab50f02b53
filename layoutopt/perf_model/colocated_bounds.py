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
    _lockstep_exact,
    _lockstep_spline,
    _sharing_penalty,
    lockstep_window,
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
    steps = _decode_steps(first)
    weights = first.input_weights
    # Per table, the rows _Core puts through _colocated_tau: the grid, the full batch, the grid
    # 2 % up (stability) and the probe batches. Their lockstep windows follow all of them; the
    # rows themselves are computed where they are read: the grid and the grid up first, then the
    # probe batches of the intervals below each table's first miss (each row's numbers depend on
    # its batch and its table's window only).
    windows = _lockstep_windows(np.concatenate([grids, full, grids * 1.02 + 1e-3, points], axis=1), steps,
                                max(first.prefill_servers, 1))
    parts = np.concatenate([grids, grids * 1.02 + 1e-3], axis=1)                                # (L, width)
    width = parts.shape[1]
    stack = _Stack(tables)
    tau_all, rate_all, d_all, extra_all, effective_all = _stacked_tau(tables, stack, parts, steps, windows)
    shape = (count, width)
    tau_all, rate_all, d_all = tau_all.reshape(shape), rate_all.reshape(shape), d_all.reshape(shape)
    bins = extra_all.shape[1]
    extra_all, effective_all = extra_all.reshape(count, width, bins), effective_all.reshape(count, width, bins)
    tau, rate, d = tau_all[:, :rows].ravel(), rate_all[:, :rows].ravel(), d_all[:, :rows].ravel()
    extra = extra_all[:, :rows].reshape(-1, bins)
    effective = effective_all[:, :rows].reshape(-1, bins)
    rate_up = rate_all[:, rows:].ravel()
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
    max_batch = per_row(stack.max_batch, rows)
    stable = (rate_up > rate) & (prompt_tokens <= budget) & (rho < 1.0) & (n <= max_batch * (1 + 1e-9))

    quantiles = _with_defaults(quantiles)
    own_step = (d + mean_extra + delay) * busy + extra.min(axis=1) * (1.0 - busy)
    spread = stack.decode_spread_at(grids).ravel()
    alone = per_row(stack.decode_at(np.ones((count, 1))).ravel(), rows)[:, None]
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
    tops: dict[int, int] = {}
    for k in range(count):
        alone_q = service_quantiles(services[k], weights, quantiles)
        if not ok[k, 0] or any(alone_q[quantiles.index(q)] > target * (1.0 + 1e-9) for q, target in ttft.items()):
            continue
        flags = ok[k]
        last = int(np.argmin(flags)) - 1 if not flags.all() else rows - 1
        tops[k] = min(last + 1, rows - 1)
    out = [0.0] * count
    if tops:
        # The probe batches of every interval below each table's first miss (and a few more of the
        # tables with fewer: one rectangle).
        probed = list(tops)
        columns = max(tops.values()) * fine_points
        subset = [tables[k] for k in probed]
        probe_rate = _stacked_tau(subset, _Stack(subset), points[probed, :columns], steps,
                                  None if windows is None else [windows[k] for k in probed])[1].reshape(len(probed), -1)
        for row, k in enumerate(probed):
            out[k] = float(probe_rate[row, :tops[k] * fine_points].max()) * (1.0 + 1e-9)
    return out


def _stacked_tau(tables: Sequence[PhaseCosts], stack: "_Stack", parts: np.ndarray, steps: float,
                 windows: Sequence[int] | None):
    """``load_colocated._colocated_tau`` of every table at its row of ``parts``, rows stacked;
    ``windows``: each table's lockstep window (``_lockstep_windows``; None with one rank)."""
    first = tables[0]
    n = parts.ravel()
    d = stack.decode_at(np.minimum(1.0 + parts, np.maximum(stack.max_batch[:, None], parts))).ravel()  # seen_batch
    extra = stack.prompt_extra_at(parts)
    per_step = n / steps
    ranks = max(first.prefill_servers, 1)
    width = parts.shape[1]
    view = SimpleNamespace(input_tokens=first.input_tokens, input_weights=first.input_weights,
                           chunk_tokens=np.repeat(np.array([float(t.chunk_tokens) for t in tables]), width))
    floor = None
    if first.prompt_floor_s is not None:
        floor = stack.prompt_floor_at(parts)
    extra = extra + _sharing_penalty(view, n, extra, per_step / ranks if ranks > 1 else per_step, floor)[:, None]
    share = _stacked_lockstep_share(per_step, ranks, width, windows)[:, None] if ranks > 1 else None
    return tau_from_extras(d, n, steps, per_step, extra, share, floor, first.input_weights)


def _lockstep_windows(parts: np.ndarray, steps: float, ranks: int) -> list[int] | None:
    """Per table (rows of ``parts``, decode batches), the window of ``lockstep_share``'s exact sum over
    the table's rows outside the spline's range as that function computes it for all of them at
    once (it follows the largest such mu); 0 where none is outside; None with one rank."""
    if ranks <= 1:
        return None
    mu = np.maximum(parts / steps, 1e-12)
    outside = ~((mu >= _LOCKSTEP_MU[0]) & (mu <= _LOCKSTEP_MU[-1]))
    return [lockstep_window(float(m[o].max()), ranks) if o.any() else 0 for m, o in zip(mu, outside)]


def _stacked_lockstep_share(prompts_per_step: np.ndarray, ranks: int, width: int, windows: Sequence[int]) -> np.ndarray:
    """``lockstep_share`` of each table's ``width`` rows as that function computes them for the
    table's rows alone, the exact sum outside the spline's range over the table's window
    (``windows``): the spline inside its range for every row at once, the exact sum outside it
    for the tables of one window together (each row's sum depends on its mu and the window only)."""
    mu = np.maximum(np.asarray(prompts_per_step, dtype=float), 1e-12)
    inside = (mu >= _LOCKSTEP_MU[0]) & (mu <= _LOCKSTEP_MU[-1])
    if inside.all():
        return _lockstep_spline(ranks)(np.log(mu))
    out = np.empty_like(mu)
    if inside.any():
        out[inside] = _lockstep_spline(ranks)(np.log(mu[inside]))
    outside = (~inside).reshape(-1, width)
    mu_tables = mu.reshape(-1, width)
    by_window: dict[int, list[int]] = {}
    for table in np.flatnonzero(outside.any(axis=1)):
        by_window.setdefault(windows[table], []).append(int(table))
    out_tables = out.reshape(-1, width)
    for window, tables in by_window.items():
        rows = outside[tables]
        values = _lockstep_exact(mu_tables[tables][rows], ranks, window)
        block = out_tables[tables]
        block[rows] = values
        out_tables[tables] = block
    return out


def _padded(arrays: Sequence[np.ndarray], fill: float) -> np.ndarray:
    """The 1-d ``arrays`` as the rows of one array, each padded with ``fill`` to the longest."""
    out = np.full((len(arrays), max(len(a) for a in arrays)), fill)
    for row, a in zip(out, arrays):
        row[:len(a)] = a
    return out


def _stacked_interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray, last: np.ndarray) -> np.ndarray:
    """``np.interp(x[t], xp[t, :last[t] + 1], fp[t, :last[t] + 1])`` of every table t (rows of ``x``;
    ``xp`` padded with +inf), with numpy's operations: ``fp[0]`` below the first point, ``fp[j]`` on
    a point and at or past the last, else ``slope_j (x - xp[j]) + fp[j]`` with
    ``slope_j = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])`` (numpy/_core/src/multiarray/compiled_base.c, arr_interp)."""
    rows = np.arange(len(x))[:, None]
    j = (xp[:, None, :] <= x[:, :, None]).sum(axis=2) - 1           # xp[j] <= x < xp[j + 1]
    below = j < 0
    j = np.maximum(j, 0)
    following = np.minimum(j + 1, last[:, None])
    xj, fj = xp[rows, j], fp[rows, j]
    exact = below | (j == last[:, None]) | (xj == x)
    slope = (fp[rows, following] - fj) / np.where(exact, 1.0, xp[rows, following] - xj)
    return np.where(exact, fj, slope * (x - xj) + fj)


class _Stack:
    """The step tables of a batch, padded to common shapes, with ``PhaseCosts``' lookups (decode step,
    its spread, prompt extras and floors) for all tables at once: the same operations on the same
    numbers per table, so the same floats as each table's own method (tests/test_colocated_bounds.py)."""

    def __init__(self, tables: Sequence[PhaseCosts]):
        self.tables = tables
        self._weights: tuple | None = None
        self.max_batch = np.array([float(t.max_batch_size) for t in tables])
        self.grid_last = np.array([len(t.batch_grid) - 1 for t in tables])
        self.grid = _padded([t.batch_grid for t in tables], np.inf)
        self.decode_s = _padded([t.decode_step_s for t in tables], 0.0)
        tails = [t._decode_tail if len(t.batch_grid) > 1 else (np.inf, 0.0, 0.0) for t in tables]
        self.tail_batch, self.tail_s, self.tail_slope = (np.array(column)[:, None] for column in zip(*tails))

    def decode_at(self, batch: np.ndarray) -> np.ndarray:
        """``tables[t].decode_at(batch[t])`` for every row t."""
        inside = _stacked_interp(batch, self.grid, self.decode_s, self.grid_last)
        return np.where(batch > self.tail_batch, self.tail_s + self.tail_slope * (batch - self.tail_batch), inside)

    def decode_spread_at(self, batch: np.ndarray) -> np.ndarray:
        """``tables[t].decode_spread_at(batch[t])`` for every row t."""
        if any(t.decode_seq_spread_s is None for t in self.tables):
            return np.stack([t.decode_spread_at(b) for t, b in zip(self.tables, batch)])
        per_seq = _stacked_interp(batch, self.grid, _padded([t.decode_seq_spread_s for t in self.tables], 0.0),
                                  self.grid_last)
        return np.sqrt(np.maximum(batch, 0.0)) * per_seq

    def prompt_extra_at(self, batch: np.ndarray) -> np.ndarray:
        """``tables[t].prompt_extra_at(batch[t])`` of every row t, stacked: (tables x batches, lengths)."""
        return self._per_batch([t.prompt_extra_s for t in self.tables], batch)

    def prompt_floor_at(self, batch: np.ndarray) -> np.ndarray:
        """``tables[t].prompt_floor_at(batch[t])`` of every row t, stacked (every table has a floor)."""
        return self._per_batch([t.prompt_floor_s for t in self.tables], batch)

    def _per_batch(self, values: Sequence[np.ndarray | None], batch: np.ndarray) -> np.ndarray:
        """``PhaseCosts._per_batch``: between the two prompt-batch anchors around each batch, linearly,
        clipped to the anchors' range and to >= 0; one anchor's row as it is."""
        tables = self.tables
        if any(t.prompt_batches is None or v is None or len(t.prompt_batches) < 2 for t, v in zip(tables, values)):
            return np.concatenate([t._per_batch(v, b) for t, v, b in zip(tables, values, batch)])
        slots, at, w = self._anchor_weights(batch)
        # Every table's rows padded to ``slots`` anchors, one after the other: row gathers, as the
        # one-table path's table[i]. table[i] (1 - w) + table[i + 1] w, clipped at 0, in place.
        table = np.concatenate([np.concatenate([v, np.zeros((slots - len(v), v.shape[1]))]) for v in values])
        mixed = np.take(table, at, axis=0)
        mixed *= 1.0 - w
        upper = np.take(table, at + 1, axis=0)
        upper *= w
        mixed += upper
        return np.maximum(mixed, 0.0, out=mixed)

    def _anchor_weights(self, batch: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """(anchor slots, row of each batch's lower anchor in the padded tables, its weight (rows, 1))
        for ``_per_batch``: the same for the extras and the floors of one batch array (remembered
        for the last one)."""
        if self._weights is not None and self._weights[0] is batch:
            return self._weights[1]
        count = len(batch)
        anchors = _padded([t.prompt_batches for t in self.tables], np.inf)
        slots = anchors.shape[1]
        last = np.array([len(t.prompt_batches) - 2 for t in self.tables])[:, None]
        # np.searchsorted(anchors, batch) (side "left") counts the anchors below the batch.
        i = np.minimum(np.maximum((anchors[:, None, :] < batch[:, :, None]).sum(axis=2) - 1, 0), last)
        rows = np.arange(count)[:, None]
        low, high = anchors[rows, i], anchors[rows, i + 1]
        w = np.minimum(np.maximum((batch - low) / (high - low), 0.0), 1.0).reshape(-1, 1)
        self._weights = (batch, (slots, (rows * slots + i).ravel(), w))
        return self._weights[1]
