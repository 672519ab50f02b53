"""Instance capacity at the SLO: the optimizer's entry point into the performance model.

For one candidate (model, GPU, layout, role, engine) and a workload and SLO, :func:`instance_capacity`
returns the request rate one instance sustains with every SLO percentile met, times a utilization
headroom (default rho <= 0.7, seeds/002 section 6.1), plus the latencies predicted there.

How the SLO is split by role (disaggregated serving):

- ``prefill``: TTFT = queue + prefill + KV transfer over ``kv_link`` must meet every TTFT target;
  TPOT is not this instance's business (reported as 0).
- ``decode``: TPOT (memory-limited batch, Little's law) must meet every TPOT target; its TTFT is the
  first decode step only (prefill excluded).
- ``colocated``: both, with chunked prefill riding in the decode steps (raises TPOT).

Every load level of the open-loop model is evaluated at once on a grid (:mod:`load`), the largest
rate meeting the targets is located, then refined by one more vectorized pass; there is no
per-rate iteration, so a call costs a few step-time evaluations plus numpy work.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Percentiles
from layoutopt.perf_model.calibration import EngineLike
from layoutopt.perf_model.colocated_bounds import batch_key, colocated_tpot_ceilings_rps
from layoutopt.perf_model.costs import PhaseCosts, phase_costs
from layoutopt.plan import Layout, Role
from layoutopt.perf_model.links import Link
from layoutopt.perf_model.load import (
    Rows, colocated_rates_rps, colocated_rows, decode_rate_bound_rps, decode_rows, prefill_rate_ceiling_rps,
    prefill_rows, rows_for,
)
from layoutopt.perf_model.load_colocated import colocated_tpot_floors, service_quantiles
from layoutopt.perf_model.load_rows import batch_grid
from layoutopt.perf_model.queueing import pd_ratio
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

__all__ = ["InstancePerf", "CapacityBound", "capacity_upper_bound", "capacity_upper_bounds", "instance_capacity", "pd_ratio", "pool_capacities_rps"]

# Load levels of the first pass (geometric from idle to saturation) and of the refinement between
# the last row meeting the SLO and the first missing it: capacity to about 1/(32 x 12) of the range.
_COARSE_POINTS = 32
_FINE_POINTS = 12


class InstancePerf(BaseModel):
    """What one instance of a candidate delivers under the SLO."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    gpu: str
    layout: Layout
    engine: str
    max_batch_size: int = Field(ge=0, description="sequences per instance: decoding (memory- and SLO-limited), or "
                                               "prompts of the pp prefill steps in flight (prefill role)")
    capacity_rps: float = Field(ge=0, description="requests/s one instance sustains at the SLO, x headroom")
    ttft_ms: Percentiles = Field(description="at capacity_rps; decode role: first decode step only")
    tpot_ms: Percentiles = Field(description="at capacity_rps; prefill role: 0")
    unloaded_ttft_ms: float = Field(ge=0, description="one request alone, SLO-percentile prompt length")
    unloaded_tpot_ms: float = Field(ge=0, description="one sequence alone")
    prefill_tok_per_s: float = Field(ge=0, description="prompt tokens/s per instance at capacity")
    decode_tok_per_s: float = Field(ge=0, description="output tokens/s per instance at capacity")
    bottleneck: str = Field(description="compute | memory | communication | queueing | kv_capacity")
    feasible: bool
    reason: str | None = None


def _percentiles(q_s: np.ndarray, quantiles: tuple[float, ...]) -> Percentiles:
    pick = {q: float(q_s[quantiles.index(q)]) * 1e3 for q in (0.5, 0.9, 0.99)}
    return Percentiles(p50=pick[0.5], p90=pick[0.9], p99=pick[0.99])


def _targets(slo: SLO, role: Role) -> tuple[dict[float, float], dict[float, float]]:
    """(TTFT, TPOT) targets in seconds by quantile that this role must meet."""
    ttft = {SLO.percentile_fraction(k): v / 1e3 for k, v in slo.ttft_ms.items()}
    tpot = {SLO.percentile_fraction(k): v / 1e3 for k, v in slo.tpot_ms.items()}
    if role == "prefill":
        return ttft, {}
    if role == "decode":
        return {}, tpot
    return ttft, tpot


def _quantiles(ttft: dict[float, float], tpot: dict[float, float]) -> tuple[float, ...]:
    """The load rows' quantile columns: p50/p90/p99 and every target's."""
    return tuple(sorted({0.5, 0.9, 0.99} | set(ttft) | set(tpot)))


def _unloaded_miss(costs: PhaseCosts, role: Role, slo: SLO, unloaded: tuple[float, float]) -> tuple[str, str] | None:
    """(reason, bottleneck) when one request alone already misses the strictest target of ``role``."""
    q_ttft, target_ttft = slo.strictest_ttft
    q_tpot, target_tpot = slo.strictest_tpot
    if role != "decode" and unloaded[0] * 1e3 > target_ttft:
        return (f"unloaded TTFT p{q_ttft * 100:g} {unloaded[0] * 1e3:.0f} ms > SLO {target_ttft:g} ms",
                costs.prefill_bottleneck)
    if role != "prefill" and unloaded[1] * 1e3 > target_tpot:
        return (f"unloaded TPOT {unloaded[1] * 1e3:.1f} ms > SLO p{q_tpot * 100:g} {target_tpot:g} ms",
                costs.decode_bottleneck)
    return None


def _violation(rows: Rows, ttft: dict[float, float], tpot: dict[float, float]) -> np.ndarray:
    """Largest ratio latency / target per row (<= 1 means every target is met); inf if unstable."""
    return _worst_ratio(rows.quantiles, rows.stable, rows.tpot_q_s, tpot, rows.ttft_q_s, ttft)


def _worst_ratio(quantiles: tuple[float, ...], stable: np.ndarray, tpot_q: np.ndarray, tpot: dict[float, float],
                 ttft_q: np.ndarray | None = None, ttft: dict[float, float] | None = None) -> np.ndarray:
    worst = np.zeros(len(stable))
    for q, target in (ttft or {}).items():
        worst = np.maximum(worst, ttft_q[:, quantiles.index(q)] / target)
    for q, target in tpot.items():
        worst = np.maximum(worst, tpot_q[:, quantiles.index(q)] / target)
    return np.where(stable, worst, np.inf)


def _misses_alone(alone_q: np.ndarray, quantiles: tuple[float, ...], ttft: dict[float, float]) -> bool:
    """Whether TTFT quantiles of a prompt's service alone (no waits; every load adds them) already
    miss a target: then no load meets the SLO (the bounds' lowest-load check)."""
    return any(alone_q[quantiles.index(q)] > target * (1.0 + 1e-9) for q, target in ttft.items())


def _last_meeting(ok: np.ndarray) -> int:
    """Index of the row before the first one missing the targets (the last row when none misses)."""
    return int(np.argmin(ok)) - 1 if not ok.all() else len(ok) - 1


def _evaluate(costs: PhaseCosts, role: Role, load: np.ndarray, quantiles: tuple[float, ...],
              instances: int = 1) -> Rows:
    if role == "prefill":
        return prefill_rows(costs, load, 1.0, quantiles)
    if role == "decode":
        return decode_rows(costs, load, quantiles, instances=instances)
    return colocated_rows(costs, load, 1.0, quantiles, instances=instances)


def _load_axis(rows: Rows, role: Role) -> np.ndarray:
    return rows.rate_rps if role == "prefill" else rows.batch


def _coarse_rows(costs: PhaseCosts, role: Role, quantiles, ttft, tpot, instances: int = 1) -> tuple[Rows, int] | None:
    """(coarse load grid, index of its highest row meeting the targets); None if even the first misses.

    Remembered for the last ``_COARSE_MEMO_ENTRIES`` step tables (by identity; the entry keeps the
    table alive): the search's ``"grid"`` bound computes the very grid a full evaluation of the
    same candidate then starts from."""
    key = (id(costs), role, quantiles, tuple(ttft.items()), tuple(tpot.items()), instances)
    hit = _coarse_memo.get(key)
    if hit is not None:
        return hit[1]
    rows = rows_for(costs, role, 1.0, quantiles, _COARSE_POINTS, instances=instances)
    ok = _violation(rows, ttft, tpot) <= 1.0
    result = (rows, _last_meeting(ok)) if ok[0] else None
    if len(_coarse_memo) >= _COARSE_MEMO_ENTRIES:
        _coarse_memo.clear()
    _coarse_memo[key] = (costs, result)
    return result


# Coarse grids remembered (each a few kB); cleared when full.
_COARSE_MEMO_ENTRIES = 256
_coarse_memo: dict[tuple, tuple[PhaseCosts, "tuple[Rows, int] | None"]] = {}


def _fine_axis(rows: Rows, role: Role, last: int) -> np.ndarray | None:
    """Load-axis values of the refinement between coarse rows ``last`` and ``last + 1`` (None at the top)."""
    axis = _load_axis(rows, role)
    if last + 1 >= len(axis):
        return None
    return np.linspace(axis[last], axis[last + 1], _FINE_POINTS)


def _best_row(costs: PhaseCosts, role: Role, quantiles, ttft, tpot,
              instances: int = 1) -> tuple[Rows, int, Rows] | None:
    """(rows, index of the highest-rate row meeting the targets, coarse grid), refined once."""
    coarse = _coarse_rows(costs, role, quantiles, ttft, tpot, instances)
    if coarse is None:
        return None
    rows, last = coarse
    fine = _fine_axis(rows, role, last)
    if fine is None:
        return rows, last, rows
    refined = _evaluate(costs, role, fine, quantiles, instances)
    fine_ok = _violation(refined, ttft, tpot) <= 1.0
    return refined, _last_meeting(fine_ok), rows


def _unloaded(costs: PhaseCosts, role: Role, q_ttft: float) -> tuple[float, float]:
    """(TTFT s of a prompt at the SLO's TTFT percentile, alone; TPOT s of one sequence alone).

    A prompt alone still pays the request overhead (API server, tokenization; 0 for the decode
    role), as every TTFT the load models give does."""
    cum = np.cumsum(costs.input_weights)
    idx = min(int(np.searchsorted(cum, q_ttft - 1e-12)), len(cum) - 1)
    ttft = float(costs.prefill_s[idx] + costs.kv_transfer_s[idx] + costs.request_overhead_s)
    tpot = float(costs.decode_at(1.0))
    if role == "decode":
        ttft = tpot
    return ttft, tpot


def _name(engine: EngineLike) -> str:
    """The engine's name (a profile object, e.g. from a profile file, carries it)."""
    return engine if isinstance(engine, str) else engine.name


def _infeasible(model, gpu: GpuSpec, layout: Layout, role: Role, engine: EngineLike, reason: str,
                max_batch: int = 0, unloaded=(0.0, 0.0), bottleneck: str = "memory") -> InstancePerf:
    zero = Percentiles(p50=0.0, p90=0.0, p99=0.0)
    return InstancePerf(role=role, gpu=gpu.name, layout=layout, engine=_name(engine), max_batch_size=max_batch,
                        capacity_rps=0.0, ttft_ms=zero, tpot_ms=zero, unloaded_ttft_ms=unloaded[0] * 1e3,
                        unloaded_tpot_ms=unloaded[1] * 1e3, prefill_tok_per_s=0.0, decode_tok_per_s=0.0,
                        bottleneck=bottleneck, feasible=False, reason=reason)


def instance_capacity(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload, slo: SLO,
                      engine: EngineLike = "vllm", headroom: float = 0.7, kv_link: Link | None = None,
                      allow_cross_domain: bool = False) -> InstancePerf:
    """Requests/s one instance sustains with the SLO met (x ``headroom``), and its latencies there.

    Never raises for a layout that does not fit: the candidate comes back ``feasible=False`` with
    the reason, so the optimizer can drop it and explain why. ``allow_cross_domain`` admits a stage
    spread over whole local domains (``memory.check_layout``), costed over the NICs.
    """
    if not 0 < headroom <= 1:
        raise ValueError(f"headroom must be in (0, 1], got {headroom}")
    try:
        costs = phase_costs(model, gpu, layout, role, workload, engine, kv_link,
                            allow_cross_domain=allow_cross_domain)
    except LayoutError as error:
        return _infeasible(model, gpu, layout, role, engine, str(error))
    ttft_t, tpot_t = _targets(slo, role)
    quantiles = _quantiles(ttft_t, tpot_t)
    unloaded = _unloaded(costs, role, slo.strictest_ttft[0])
    miss = _unloaded_miss(costs, role, slo, unloaded)
    if miss is not None:
        return _infeasible(model, gpu, layout, role, engine, miss[0], costs.max_batch_size, unloaded, miss[1])
    best = _best_row(costs, role, quantiles, ttft_t, tpot_t)
    if best is None:
        return _infeasible(model, gpu, layout, role, engine, "the SLO is missed even at the lowest load",
                           costs.max_batch_size, unloaded, "queueing")
    rows, k, coarse = best
    capacity = float(rows.rate_rps[k]) * headroom
    at_capacity = _evaluate(costs, role, _at_rate(coarse, role, capacity), quantiles)
    binding = _binding(rows, k, costs, role, ttft_t, tpot_t)
    if role == "prefill":
        # Prompts one step holds at the mean length, times the pp steps in flight (the engine's
        # --max-num-seqs for this pool counts every request of the batches in flight, vLLM
        # v1/core/sched/scheduler.py:1072): fewer would serialize prefills the model batches.
        batch_limit = max(1, int(math.ceil(costs.chunk_tokens / max(costs.mean_input_tokens, 1.0))))
        batch_limit *= costs.pipeline_depth
    else:
        batch_limit = max(1, min(costs.max_batch_size, int(math.ceil(float(rows.batch[k])))))
    tpot = (Percentiles(p50=0.0, p90=0.0, p99=0.0) if role == "prefill"
            else _percentiles(at_capacity.tpot_q_s[0], quantiles))
    return InstancePerf(
        role=role, gpu=gpu.name, layout=layout, engine=_name(engine), max_batch_size=batch_limit,
        capacity_rps=capacity, ttft_ms=_percentiles(at_capacity.ttft_q_s[0], quantiles), tpot_ms=tpot,
        unloaded_ttft_ms=unloaded[0] * 1e3, unloaded_tpot_ms=unloaded[1] * 1e3,
        prefill_tok_per_s=capacity * costs.mean_input_tokens if role != "decode" else 0.0,
        decode_tok_per_s=capacity * costs.output_tokens_mean if role != "prefill" else 0.0,
        bottleneck=binding, feasible=capacity > 0, reason=None if capacity > 0 else "no load meets the SLO")


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
    unloaded = _unloaded(costs, role, slo.strictest_ttft[0])

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
    (``colocated_bounds.colocated_tpot_ceilings_rps``), a fraction of their cost one at a time."""
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


def _at_rate(grid: Rows, role: Role, rate: float) -> np.ndarray:
    """The load-axis value (rate for prefill, batch otherwise) giving ``rate``, from a load grid."""
    if role == "prefill":
        return np.array([rate])
    rates = np.maximum.accumulate(grid.rate_rps)
    # The batch grows about linearly with the rate; interpolate in log-log between grid rows.
    return np.array([float(np.exp(np.interp(np.log(max(rate, 1e-12)), np.log(rates), np.log(grid.batch))))])


def _binding(rows: Rows, k: int, costs: PhaseCosts, role: Role, ttft: dict, tpot: dict) -> str:
    """What stops the rate growing past row k: KV capacity, queueing (TTFT), or the step's limit (TPOT)."""
    nxt = min(k + 1, len(rows.rate_rps) - 1)
    if role != "prefill" and float(rows.batch[nxt]) >= 0.99 * costs.max_batch_size:
        return "kv_capacity"
    ttft_ratio = max((rows.ttft_q_s[nxt, rows.quantiles.index(q)] / t for q, t in ttft.items()), default=0.0)
    tpot_ratio = max((rows.tpot_q_s[nxt, rows.quantiles.index(q)] / t for q, t in tpot.items()), default=0.0)
    if not rows.stable[nxt] or ttft_ratio >= tpot_ratio:
        return "queueing" if role != "decode" else costs.decode_bottleneck
    return costs.decode_bottleneck


def pool_capacities_rps(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload, slo: SLO,
                        num_instances: Sequence[int], engine: EngineLike = "vllm", headroom: float = 0.7,
                        kv_link: Link | None = None, allow_cross_domain: bool = False) -> list[float]:
    """Requests/s a pool of n instances sustains at the SLO (x ``headroom``), for each n given.

    The pool is the one ``estimate`` models behind the router: prefill instances share one queue
    (G/G/c with c = n x servers), decode and colocated instances share their slots (``instances=n``).
    n = 1 gives :func:`instance_capacity`'s ``capacity_rps``; 0.0 where no load meets the SLO.
    """
    costs = phase_costs(model, gpu, layout, role, workload, engine, kv_link, allow_cross_domain=allow_cross_domain)
    ttft_t, tpot_t = _targets(slo, role)
    quantiles = _quantiles(ttft_t, tpot_t)
    result = []
    for n in num_instances:
        pool = costs
        if role == "prefill":
            pool = dataclasses.replace(costs, prefill_servers=costs.prefill_servers * n)
            best = _best_row(pool, role, quantiles, ttft_t, tpot_t)
            per_pool = 1.0  # the pooled prefill rows' rate is the whole pool's
        else:
            best = _best_row(costs, role, quantiles, ttft_t, tpot_t, instances=n)
            per_pool = float(n)  # decode/colocated rows are per instance of the pool
        if best is None:
            result.append(0.0)
            continue
        rows, k = best[0], best[1]
        if k + 1 < len(rows.rate_rps):
            # One more refinement between the last row meeting the SLO and the next: pool gains of
            # a few percent are below the first refinement's step (about 3 % of the rate).
            axis = _load_axis(rows, role)
            finer = _evaluate(pool if role == "prefill" else costs, role,
                              np.linspace(axis[k], axis[k + 1], _FINE_POINTS), quantiles, n)
            ok = _violation(finer, ttft_t, tpot_t) <= 1.0
            rows, k = finer, _last_meeting(ok)
        result.append(float(rows.rate_rps[k]) * per_pool * headroom)
    return result
