"""Upper bounds on one instance's capacity, at a fraction of :func:`capacity.instance_capacity`'s cost.

The search (``optimizer.evaluation``) bounds thousands of proposals before it evaluates any and
prunes on them, so each bound must never fall below the capacity ``instance_capacity`` finds.
Bounds come in tiers, cheapest and loosest first (``ROLE_BOUND_TIERS``); colocated ``"tpot"``
bounds of many step tables are computed together (:func:`capacity_upper_bounds`,
``colocated_bounds``). They share the capacity search's targets, grids and memo (:mod:`capacity`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model.calibration import EngineLike
from layoutopt.perf_model.capacity import (
    _COARSE_POINTS, _FINE_POINTS, _coarse_rows, _fine_axis, _last_meeting, _misses_alone, _quantiles, _strictest,
    _targets, _unloaded, _unloaded_miss, _violation, _worst_ratio,
)
from layoutopt.perf_model.colocated_bounds import batch_key, colocated_tpot_ceilings_rps
from layoutopt.perf_model.costs import PhaseCosts, phase_costs
from layoutopt.perf_model.links import Link
from layoutopt.perf_model.load import (
    colocated_rates_rps, colocated_rows, decode_rate_bound_rps, prefill_rate_ceiling_rps,
)
from layoutopt.perf_model.load_colocated import colocated_tpot_floors, service_quantiles
from layoutopt.perf_model.load_rows import batch_grid
from layoutopt.perf_model.stacked_tables import prefetch_step_tables
from layoutopt.plan import Layout, Role
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

__all__ = ["BOUND_TIERS", "ROLE_BOUND_TIERS", "BoundTier", "CapacityBound", "capacity_upper_bound",
           "capacity_upper_bounds"]


class CapacityBound(BaseModel):
    """An upper bound on one instance's capacity, with the unloaded latencies computed on the way."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    capacity_rps: float = Field(ge=0, description="instance_capacity's capacity_rps is at most this")
    unloaded_ttft_ms: float = Field(ge=0, description="as InstancePerf's (0 when the layout does not fit)")
    unloaded_tpot_ms: float = Field(ge=0, description="as InstancePerf's (0 when the layout does not fit)")


# Bounds, cheapest and loosest first. Colocated: TPOT floors and stability (the TTFT at the lowest
# load only); TPOT floors with the TTFT; the coarse load grid itself. Prefill: the full-step
# ceiling ("tpot" and "floors" alike), then the coarse load grid. Decode: one bound (every tier).
BoundTier = Literal["tpot", "floors", "grid"]
BOUND_TIERS: tuple[BoundTier, ...] = ("tpot", "floors", "grid")
ROLE_BOUND_TIERS: dict[str, tuple[BoundTier, ...]] = {
    "colocated": BOUND_TIERS, "prefill": ("tpot", "grid"), "decode": ("tpot",)}


def capacity_upper_bound(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload,
                         slo: SLO, engine: EngineLike = "vllm", headroom: float = 0.7,
                         kv_link: Link | None = None, tier: BoundTier = "grid",
                         allow_cross_domain: bool = False) -> CapacityBound:
    """A rate that :func:`instance_capacity`'s ``capacity_rps`` never exceeds, at a fraction of its cost.

    The optimizer evaluates a layout in full only when this bound could beat a smaller layout that
    already serves more (exact dominance, ``optimizer.evaluation``). 0.0 where the layout does not
    fit or misses the SLO unloaded (``instance_capacity`` answers those quickly). Per role:

    - prefill: the rate at which the prefill servers run full steps all the time, the top of the
      load grid (every rate evaluated lies below it); 0.0 where a prompt's service alone (prefill,
      KV transfer, request overhead) already misses a TTFT target; with ``tier="grid"`` the coarse
      load grid as ``instance_capacity`` computes it, then the top of its refinement (the
      capacity is one of the refinement's rates);
    - decode: the rate n / ((E[O] - 1) tau(n)) over batches up to the memory limit whose mean step
      tau(n) is within every TPOT target at the median or above (such a TPOT quantile is
      tau + z sd with z >= 0, never below the mean step); on each interval of a fine grid, the top
      batch over the step at its bottom (tau grows with n);
    - colocated, by ``tier``: ``"grid"``, the coarse load grid as ``instance_capacity`` computes
      it, then the rates of the refinement's own points (the capacity is one of them);
      ``"floors"``, the grid with TPOT floors instead (no quantile solves, about half the cost):
      the capacity lies below the first row whose floors miss, and the bound is the largest rate
      of every refinement point below; ``"tpot"``, the same with the TTFT targets checked at the
      lowest load only, against the service alone (no slot wait or prompt queue; the first miss
      comes later still, and a layout that misses TTFT at any load still gets 0.0).
    """
    found = _upper_bound(model, gpu, layout, role, workload, slo, engine, headroom, kv_link, tier,
                         allow_cross_domain, defer=False)
    assert isinstance(found, CapacityBound)
    return found


@dataclasses.dataclass(frozen=True)
class _Deferred:
    """A colocated ``"tpot"`` bound left for a batch (``capacity_upper_bounds``)."""

    costs: PhaseCosts
    quantiles: tuple[float, ...]
    ttft: dict[float, float]
    tpot: dict[float, float]
    bound: "Callable[[float], CapacityBound]"


def _upper_bound(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload, slo: SLO,
                 engine: EngineLike, headroom: float, kv_link: Link | None, tier: BoundTier,
                 allow_cross_domain: bool, defer: bool) -> "CapacityBound | _Deferred":
    """``capacity_upper_bound``; with ``defer`` a colocated ``"tpot"`` bound comes back as the
    ``_Deferred`` inputs of its last step."""
    try:
        costs = phase_costs(model, gpu, layout, role, workload, engine, kv_link,
                            allow_cross_domain=allow_cross_domain)
    except LayoutError:
        return CapacityBound(capacity_rps=0.0, unloaded_ttft_ms=0.0, unloaded_tpot_ms=0.0)
    ttft_t, tpot_t = _targets(slo, role)
    unloaded = _unloaded(costs, role, _strictest(slo)[0][0])

    def bound(rate_rps: float) -> CapacityBound:
        return CapacityBound(capacity_rps=rate_rps * headroom, unloaded_ttft_ms=unloaded[0] * 1e3,
                             unloaded_tpot_ms=unloaded[1] * 1e3)

    if _unloaded_miss(costs, role, slo, unloaded) is not None:
        return bound(0.0)
    if role == "prefill":
        # At every rate a prompt's TTFT is at least its service alone: the prefill, the KV transfer
        # and the request overhead (prefill_rows adds waits and a fixed delay, both >= 0). Where
        # that misses a target no load meets the SLO, as the full evaluation finds.
        quantiles = _quantiles(ttft_t, tpot_t)
        alone = service_quantiles(costs.prefill_s + costs.kv_transfer_s + costs.request_overhead_s,
                                   costs.input_weights, quantiles)
        if _misses_alone(alone, quantiles, ttft_t):
            return bound(0.0)
        if tier != "grid":
            return bound(prefill_rate_ceiling_rps(costs))
        return bound(_grid_rate_bound_rps(costs, role, quantiles, ttft_t, tpot_t))
    if role == "decode":
        # TPOT targets at the median or above: tpot_q = max(tau + z sd, d(1)) with z >= 0 (load_rows.decode_rows).
        return bound(decode_rate_bound_rps(costs, min((t for q, t in tpot_t.items() if q >= 0.5), default=None)))
    quantiles = _quantiles(ttft_t, tpot_t)
    if defer and tier == "tpot":
        return _Deferred(costs, quantiles, ttft_t, tpot_t, bound)
    if tier != "grid":
        return bound(_colocated_rate_ceiling_rps(costs, quantiles, ttft_t, tpot_t, every_ttft_row=tier == "floors"))
    return bound(_grid_rate_bound_rps(costs, role, quantiles, ttft_t, tpot_t))


# Colocated tables whose "tpot" bounds one batch computes (more makes the arrays slower to walk).
BOUND_BATCH_TABLES = 32


def capacity_upper_bounds(model: ModelSpec, jobs: Sequence[tuple[GpuSpec, Layout, Role, Link | None]],
                          workload: Workload, slo: SLO, engine: EngineLike = "vllm", headroom: float = 0.7,
                          tier: BoundTier = "grid", allow_cross_domain: bool = False) -> list[CapacityBound]:
    """``[capacity_upper_bound(model, gpu, layout, role, ..., kv_link=link) for gpu, layout, role,
    link in jobs]``, the same numbers: colocated ``"tpot"`` bounds of tables that can share a batch
    (``colocated_bounds.batch_key``) are computed together, in batches of ``BOUND_BATCH_TABLES``
    (``colocated_bounds.colocated_tpot_ceilings_rps``), a fraction of their cost one at a time; the
    decode tables and prompt extras of the jobs' layouts come from stacked roofline passes
    (``stacked_tables.prefetch_step_tables``, the same floats)."""
    prefetch_step_tables(model, jobs, workload, engine, allow_cross_domain)
    found = [_upper_bound(model, gpu, layout, role, workload, slo, engine, headroom, link, tier,
                          allow_cross_domain, defer=True) for gpu, layout, role, link in jobs]
    batches: dict[tuple, list[int]] = {}
    for i, item in enumerate(found):
        if isinstance(item, _Deferred):
            key = (batch_key(item.costs), item.quantiles, tuple(item.ttft.items()), tuple(item.tpot.items()))
            batches.setdefault(key, []).append(i)
    for members in batches.values():
        for start in range(0, len(members), BOUND_BATCH_TABLES):
            part = members[start:start + BOUND_BATCH_TABLES]
            first = found[part[0]]
            rates = colocated_tpot_ceilings_rps([found[i].costs for i in part], first.quantiles, first.ttft,
                                                first.tpot, _COARSE_POINTS, _FINE_POINTS)
            for i, rate in zip(part, rates):
                found[i] = found[i].bound(rate)
    return found  # type: ignore[return-value]


def _grid_rate_bound_rps(costs: PhaseCosts, role: Role, quantiles, ttft, tpot) -> float:
    """The ``"grid"`` bound (before headroom): ``_best_row``'s coarse load grid, then the largest
    rate of its refinement's points (the capacity is one of them); 0.0 where even the first row
    misses. The grid is the one the full evaluation starts from (``_coarse_rows`` remembers it)."""
    coarse = _coarse_rows(costs, role, quantiles, ttft, tpot)
    if coarse is None:
        return 0.0
    rows, last = coarse
    fine = _fine_axis(rows, role, last)
    if fine is None:
        return float(rows.rate_rps[last])
    # A prefill row's rate is its load-axis value; a colocated row's follows from its batch.
    return float(fine.max()) if role == "prefill" else float(colocated_rates_rps(costs, fine).max())


def _colocated_rate_ceiling_rps(costs: PhaseCosts, quantiles, ttft, tpot, every_ttft_row: bool = True) -> float:
    """A colocated rate (before headroom) that ``_best_row`` never exceeds, without TPOT quantile solves.

    The coarse grid with TPOT floors (``colocated_rows(tpot_floor=True)``: same TTFT and stability,
    TPOT never above the real one) misses the targets at the real grid's first missing row or
    later, so ``_best_row``'s refinement interval lies below the floors' first miss; its capacity is
    one of that interval's points. The largest rate over the points of every interval below that
    row bounds it (a hair of slack covers rounding between differently shaped arrays).
    ``every_ttft_row=False`` checks the TTFT targets at the first row only, against the service
    alone (``colocated_tpot_floors``; a wait only adds to it): fewer misses, a later first one, and
    still 0.0 where even the lowest load misses a TTFT target, as the full evaluation finds.
    ``quantiles`` are ``_quantiles``' (sorted, the load rows' default columns included).
    """
    grid = batch_grid(costs, _COARSE_POINTS)
    start, stop = grid[:-1, None], grid[1:, None]
    points = start + (stop - start) * np.linspace(0.0, 1.0, _FINE_POINTS)[None, :]  # (intervals, fine points)
    if not every_ttft_row:
        floors_q, stable, rates, first_ttft = colocated_tpot_floors(costs, grid, quantiles, probe=points.ravel())
        ok = _worst_ratio(quantiles, stable, floors_q, tpot) <= 1.0 + 1e-9
        ok[0] &= not _misses_alone(first_ttft, quantiles, ttft)
    else:
        floors = colocated_rows(costs, grid, 1.0, quantiles, tpot_floor=True)
        ok = _violation(floors, ttft, tpot) <= 1.0 + 1e-9
        rates = None
    if not ok[0]:
        return 0.0
    top = min(_last_meeting(ok) + 1, len(grid) - 1)
    if rates is None:
        rates = colocated_rates_rps(costs, points[:top].ravel())
    return float(rates.reshape(-1, _FINE_POINTS)[:top].max()) * (1.0 + 1e-9)
