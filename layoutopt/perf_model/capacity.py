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

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Percentiles
from layoutopt.perf_model.calibration import EngineLike
from layoutopt.perf_model.costs import PhaseCosts, phase_costs
from layoutopt.plan import Layout, Role
from layoutopt.perf_model.links import Link
from layoutopt.perf_model.grids import geometric_grid
from layoutopt.perf_model.load import (
    Rows, colocated_rows, decode_rows, prefill_rate_ceiling_rps, prefill_rows, rows_for,
)
from layoutopt.perf_model.load_prefill import stacked_prefill_rows
from layoutopt.perf_model.memo import KeepAliveMemo, identity_memo
from layoutopt.perf_model.queueing import pd_ratio
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

__all__ = ["InstancePerf", "instance_capacity", "pd_ratio", "pool_capacities_rps"]

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


@identity_memo  # the search asks for every proposal's role and the same SLO object: read-only dicts
def _targets(slo: SLO, role: Role) -> tuple[dict[float, float], dict[float, float]]:
    """(TTFT, TPOT) targets in seconds by quantile that this role must meet (shared: do not change them)."""
    ttft = {SLO.percentile_fraction(k): v / 1e3 for k, v in slo.ttft_ms.items()}
    tpot = {SLO.percentile_fraction(k): v / 1e3 for k, v in slo.tpot_ms.items()}
    if role == "prefill":
        return ttft, {}
    if role == "decode":
        return {}, tpot
    return ttft, tpot


@identity_memo  # of ``_targets``' dicts, remembered
def _quantiles(ttft: dict[float, float], tpot: dict[float, float]) -> tuple[float, ...]:
    """The load rows' quantile columns: p50/p90/p99 and every target's."""
    return tuple(sorted({0.5, 0.9, 0.99} | set(ttft) | set(tpot)))


def _unloaded_miss(costs: PhaseCosts, role: Role, slo: SLO, unloaded: tuple[float, float]) -> tuple[str, str] | None:
    """(reason, bottleneck) when one request alone already misses the strictest target of ``role``."""
    (q_ttft, target_ttft), (q_tpot, target_tpot) = _strictest(slo)
    if role != "decode" and unloaded[0] * 1e3 > target_ttft:
        return (f"unloaded TTFT p{q_ttft * 100:g} {unloaded[0] * 1e3:.0f} ms > SLO {target_ttft:g} ms",
                costs.prefill_bottleneck)
    if role != "prefill" and unloaded[1] * 1e3 > target_tpot:
        return (f"unloaded TPOT {unloaded[1] * 1e3:.1f} ms > SLO p{q_tpot * 100:g} {target_tpot:g} ms",
                costs.decode_bottleneck)
    return None


@identity_memo
def _strictest(slo: SLO) -> tuple[tuple[float, float], tuple[float, float]]:
    """(``slo.strictest_ttft``, ``slo.strictest_tpot``), remembered for the search's one SLO object."""
    return slo.strictest_ttft, slo.strictest_tpot


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

    Remembered for the last 256 step tables (``_coarse_memo``) (by identity; the entry keeps the
    table alive): the search's ``"grid"`` bound computes the very grid a full evaluation of the
    same candidate then starts from."""
    def compute() -> tuple[Rows, int] | None:
        rows = rows_for(costs, role, 1.0, quantiles, _COARSE_POINTS, instances=instances)
        ok = _violation(rows, ttft, tpot) <= 1.0
        return (rows, _last_meeting(ok)) if ok[0] else None

    key = (id(costs), role, quantiles, tuple(ttft.items()), tuple(tpot.items()), instances)
    return _coarse_memo.get(key, costs, compute)


# Coarse grids remembered (each a few kB); cleared when full.
_coarse_memo = KeepAliveMemo(max_entries=256)


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
    idx = _quantile_bin(costs.input_weights, q_ttft)
    ttft = float(costs.prefill_s[idx] + costs.kv_transfer_s[idx] + costs.request_overhead_s)
    tpot = costs.decode_at_one(1.0)
    if role == "decode":
        ttft = tpot
    return ttft, tpot


# The bin of a quantile by (weights array, quantile): every table of a workload shares its weights.
_quantile_bins = KeepAliveMemo(256)


def _quantile_bin(weights: np.ndarray, q: float) -> int:
    """Index of the length bin holding quantile ``q`` of the bins' ``weights``."""
    def find() -> int:
        cum = np.cumsum(weights)
        return min(int(np.searchsorted(cum, q - 1e-12)), len(cum) - 1)
    if weights.flags.writeable:  # only a read-only array keeps the values its id was remembered with
        return find()
    return _quantile_bins.get((id(weights), q), weights, find)


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
    unloaded = _unloaded(costs, role, _strictest(slo)[0][0])
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
    if role == "prefill":
        return _prefill_pools_rps(costs, quantiles, ttft_t, tpot_t, num_instances, headroom)
    result = []
    for n in num_instances:
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
            finer = _evaluate(costs, role, np.linspace(axis[k], axis[k + 1], _FINE_POINTS), quantiles, n)
            ok = _violation(finer, ttft_t, tpot_t) <= 1.0
            rows, k = finer, _last_meeting(ok)
        result.append(float(rows.rate_rps[k]) * per_pool * headroom)
    return result


def _prefill_pools_rps(costs: PhaseCosts, quantiles, ttft, tpot, num_instances: Sequence[int],
                       headroom: float) -> list[float]:
    """``pool_capacities_rps`` of a prefill table: for each n, ``_best_row`` of the pool (``costs``
    with n times the prefill servers, one queue; its rows' rate is the whole pool's) and one more
    refinement, each step's rows of every pool in one ``stacked_prefill_rows`` call (the numbers
    of each pool's own ``prefill_rows``)."""
    servers = [costs.prefill_servers * n for n in num_instances]
    grids = [geometric_grid(1e-4, 0.999, _COARSE_POINTS) * prefill_rate_ceiling_rps(costs, s) for s in servers]  # rows_for
    state: dict[int, tuple[Rows, int]] = {}  # pool -> (rows, highest row meeting the SLO); absent: none meets
    for i, rows in enumerate(stacked_prefill_rows(costs, grids, servers, quantiles)):
        ok = _violation(rows, ttft, tpot) <= 1.0
        if ok[0]:
            state[i] = (rows, _last_meeting(ok))
    for _ in range(2):  # _best_row's refinement, then pool_capacities_rps' own
        axes = {i: np.linspace(rows.rate_rps[k], rows.rate_rps[k + 1], _FINE_POINTS)
                for i, (rows, k) in state.items() if k + 1 < len(rows.rate_rps)}
        if axes:
            finer = stacked_prefill_rows(costs, list(axes.values()), [servers[i] for i in axes], quantiles)
            for i, rows in zip(axes, finer):
                state[i] = (rows, _last_meeting(_violation(rows, ttft, tpot) <= 1.0))
    return [float(state[i][0].rate_rps[state[i][1]]) * headroom if i in state else 0.0
            for i in range(len(servers))]
