"""Capacity of every surviving proposal: the performance model, called in parallel when it pays.

``instance_capacity`` is a pure function of its inputs, so evaluating the proposals in worker
processes gives exactly the results of one process, in the same order: the plan does not depend
on how many CPUs the machine has. Small tables (a few hundred proposals) run in this process,
where starting workers would cost more than it saves. Results are memoized per process (an LRU
keyed by the inputs), so the second stage of a cluster solve, fleets and scenarios sharing a
model, and diagnosis re-runs do not pay twice.

:func:`pruned_capacities` evaluates only what dominance pruning could keep. Within a group of
proposals that differ in nothing the solver reads but GPUs and capacity (same role, GPU type and
engine pairing partners), a proposal is skipped when a smaller one already evaluated serves more,
k times over, than the proposal's upper bound (``perf_model.capacity_bounds.capacity_upper_bound``, a
fraction of a full evaluation's cost; one ``capacity_upper_bounds`` call bounds a whole group, the
colocated tables in batches): the full evaluation could only find it dominated. The
decision depends on bounds and capacities alone, so the table is the same on any machine and
whatever is cached. A skipped proposal is counted as dominated even where a full evaluation would
also have found it missing the SLO at every load (a bound that ignores the TTFT cannot tell).

Every layout evaluated here passed the structural screens, whose ``scale-up domain`` rule
(``space.stage_span_problem``) decides which stages may spread over whole local domains; the
capacity calls therefore pass ``allow_cross_domain`` and cost such stages over the NICs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.workers import available_workers, parallel_map, single_process  # noqa: F401 (API)
from layoutopt.perf_model.capacity import InstancePerf, instance_capacity, pool_capacities_rps
from layoutopt.perf_model.capacity_bounds import (
    ROLE_BOUND_TIERS, BoundTier, CapacityBound, capacity_upper_bound, capacity_upper_bounds,
)
from layoutopt.perf_model.links import Link
from layoutopt.plan import Layout, Role
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

# Below this many proposals one process is faster than starting workers.
MIN_PARALLEL_PROPOSALS = 400
# Proposals per task sent to a worker (amortizes pickling the shared inputs).
CHUNK_PROPOSALS = 64
CACHE_ENTRIES = 100_000
# GPU types per worker above which each GPU type's groups are one task (``_bundles``).
GPU_TASKS_PER_WORKER = 3

Job = tuple[GpuSpec, Layout, Role, "Link | None"]
# Whether shape ``better`` (real capacity) dominates shape ``worse`` (capacity: an upper bound).
Dominates = Callable[[object, object], bool]
# Whether an evaluated instance may stand as a dominator (it becomes a candidate at all).
Eligible = Callable[[InstancePerf], bool]


@dataclass(frozen=True)
class Dominated:
    """A proposal left unevaluated: ``factor`` instances of ``winner`` serve more than its bound."""

    winner: str
    factor: int
    bound: CapacityBound

    def __reduce__(self):
        # Most of a table's results come back from the workers as these: as plain fields they pickle
        # in half the bytes and a third of the time (deepseek-v3 on '$400/h': 5,273 of them).
        b = self.bound
        return _dominated, (self.winner, self.factor, b.capacity_rps, b.unloaded_ttft_ms, b.unloaded_tpot_ms)


def _dominated(winner: str, factor: int, capacity_rps: float, unloaded_ttft_ms: float,
               unloaded_tpot_ms: float) -> Dominated:
    """A pickled ``Dominated``."""
    return Dominated(winner, factor, CapacityBound(capacity_rps=capacity_rps, unloaded_ttft_ms=unloaded_ttft_ms,
                                                   unloaded_tpot_ms=unloaded_tpot_ms))


class _Shared:
    """Inputs every proposal of one table shares."""

    def __init__(self, model: ModelSpec, workload: Workload, slo: SLO, engine: str, headroom: float):
        self.model, self.workload, self.slo, self.engine, self.headroom = model, workload, slo, engine, headroom
        engine_key = engine if isinstance(engine, str) else repr(engine)  # a calibrated profile object
        self.key = (model.model_dump_json(), workload.model_dump_json(), slo.model_dump_json(), engine_key, headroom)


_cache: OrderedDict[tuple, InstancePerf] = OrderedDict()
_cache_lock = threading.Lock()


def _job_keys(shared_key: tuple, jobs: Sequence[Job]) -> list[tuple]:
    dumped: dict[int, str] = {}  # a table has a few GPUs and links, its roles share layouts: dump each once

    def dump(value) -> str | None:
        if value is None:
            return None
        if id(value) not in dumped:
            dumped[id(value)] = value.model_dump_json()
        return dumped[id(value)]

    return [(shared_key, dump(gpu), dump(layout), role, dump(link)) for gpu, layout, role, link in jobs]


def _evaluate_chunk(shared: _Shared, jobs: Sequence[Job]) -> list[InstancePerf]:
    return [instance_capacity(shared.model, gpu, layout, role, shared.workload, shared.slo, engine=shared.engine,
                              headroom=shared.headroom, kv_link=link, allow_cross_domain=True)
            for gpu, layout, role, link in jobs]


def capacities(model: ModelSpec, workload: Workload, slo: SLO, engine: str, headroom: float,
               jobs: Sequence[Job], workers: int | None = None) -> list[InstancePerf]:
    """``instance_capacity`` of every job, in order; ``workers`` None uses every available CPU."""
    shared = _Shared(model, workload, slo, engine, headroom)
    keys = _job_keys(shared.key, jobs)
    results: list[InstancePerf | None] = [None] * len(jobs)
    with _cache_lock:
        for i, key in enumerate(keys):
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                results[i] = hit
    missing = [i for i, r in enumerate(results) if r is None]
    chunks = [missing[i:i + CHUNK_PROPOSALS] for i in range(0, len(missing), CHUNK_PROPOSALS)]
    outputs = parallel_map(_evaluate_chunk, shared, [[jobs[i] for i in chunk] for chunk in chunks],
                           [len(chunk) for chunk in chunks], len(missing) >= MIN_PARALLEL_PROPOSALS, workers)
    for chunk, output in zip(chunks, outputs):
        for i, perf in zip(chunk, output):
            results[i] = perf
    _remember([(keys[i], results[i]) for i in missing])
    return results  # type: ignore[return-value]


def _remember(entries: Sequence[tuple[tuple, InstancePerf]]) -> None:
    """Cache evaluated capacities, dropping the oldest entries past ``CACHE_ENTRIES``."""
    with _cache_lock:
        for key, perf in entries:
            _cache[key] = perf
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)


def _bound(shared: _Shared, job: Job, tier: BoundTier) -> CapacityBound:
    gpu, layout, role, link = job
    return capacity_upper_bound(shared.model, gpu, layout, role, shared.workload, shared.slo, engine=shared.engine,
                                headroom=shared.headroom, kv_link=link, tier=tier, allow_cross_domain=True)


def _evaluate_group(shared: _Shared, jobs: Sequence[Job], known: dict[int, InstancePerf], shapes: Sequence,
                    dominates: Dominates, eligible: Eligible) -> list["InstancePerf | Dominated"]:
    """One group, smallest instances first and, among equals, the highest bound first: a proposal
    is evaluated unless an evaluated one dominates it at its upper bound (``known``: the capacities
    of the group's jobs, by index, that the calling process had cached).

    Colocated and prefill bounds come in tiers (``perf_model.capacity_bounds.ROLE_BOUND_TIERS``): the
    cheapest for every proposal, each tighter one only where the looser ones prove nothing
    (decode has one bound)."""
    # Every role's cheapest tier is "tpot" (ROLE_BOUND_TIERS): one call bounds the whole group.
    bounds = capacity_upper_bounds(shared.model, jobs, shared.workload, shared.slo, engine=shared.engine,
                                   headroom=shared.headroom, tier="tpot", allow_cross_domain=True)
    order = sorted(range(len(jobs)), key=lambda i: (shapes[i].gpus_per_instance, -bounds[i].capacity_rps,
                                                    shapes[i].name))
    results: list[InstancePerf | Dominated | None] = [None] * len(jobs)
    winners: list = []

    def dominated(i: int, bound: CapacityBound) -> Dominated | None:
        if bound.capacity_rps <= 0 or not winners:  # (no probe copy where nothing could dominate it)
            return None
        probe = shapes[i].model_copy(update={"capacity_rps": bound.capacity_rps})
        winner = next((w for w in winners if dominates(w, probe)), None)
        if winner is None:
            return None
        return Dominated(winner.name, shapes[i].gpus_per_instance // winner.gpus_per_instance, bound)

    for i in order:
        skip = dominated(i, bounds[i])
        if bounds[i].capacity_rps > 0 and winners:
            for tier in ROLE_BOUND_TIERS[jobs[i][2]][1:]:
                if skip is not None:
                    break
                skip = dominated(i, _bound(shared, jobs[i], tier))
        if skip is not None:
            results[i] = skip
            continue
        perf = known.get(i) or _evaluate_chunk(shared, [jobs[i]])[0]
        results[i] = perf
        if eligible(perf):
            winners.append(shapes[i].model_copy(update={"capacity_rps": perf.capacity_rps}))
    return results  # type: ignore[return-value]


def _evaluate_groups_task(shared: _Shared, task: Sequence[tuple]) -> list[list["InstancePerf | Dominated"]]:
    return [_evaluate_group(shared, *group) for group in task]


def _bundles(groups: Sequence[Sequence[int]], jobs: Sequence[Job], workers: int) -> list[list[int]]:
    """The groups (by index) each worker task evaluates: every group of one GPU type together
    when there are at least ``GPU_TASKS_PER_WORKER`` GPU types per worker, else one group a task.

    A GPU type's groups share the perf model's memos (a layout's prefill and colocated tables share
    their prefill passes, its decode and colocated tables one decode table), which a worker only
    finds when it evaluates them all: deepseek-v3 on '$400/h' runs 6.2 M Python calls in its groups
    in one process, 8.4 M as 36 tasks on cold workers, 6.7 M as 12 tasks, one per GPU type."""
    by_gpu: dict[str, list[int]] = {}
    for g, group in enumerate(groups):
        by_gpu.setdefault(jobs[group[0]][0].name, []).append(g)
    if len(by_gpu) >= GPU_TASKS_PER_WORKER * workers:
        return list(by_gpu.values())
    return [[g] for g in range(len(groups))]


def pruned_capacities(model: ModelSpec, workload: Workload, slo: SLO, engine: str, headroom: float,
                      jobs: Sequence[Job], shapes: Sequence, groups: Sequence[Sequence[int]],
                      dominates: Dominates, eligible: Eligible,
                      workers: int | None = None) -> list["InstancePerf | Dominated"]:
    """``instance_capacity`` of every job that dominance pruning could keep; a ``Dominated`` for the rest.

    ``shapes[i]`` is job i as the solver sees it (a ``Candidate`` whose capacity is replaced by the
    bound or the capacity); ``groups`` partition the job indices into sets within which
    ``dominates`` may compare (same role, GPU type and pairing partners); ``eligible`` says whether
    an evaluated job becomes a candidate (and so may dominate). Groups run in worker processes when
    there are enough jobs; the results are the same either way.
    """
    shared = _Shared(model, workload, slo, engine, headroom)
    keys = _job_keys(shared.key, jobs)
    groups = [g for g in groups if g]
    bundles = _bundles(groups, jobs, available_workers() if workers is None else max(1, workers))
    # The cache is looked up here, not in the workers: a task carries the few hits, not every job's key.
    with _cache_lock:
        hits = {i: perf for i, perf in ((i, _cache.get(key)) for i, key in enumerate(keys)) if perf is not None}
    tasks = [[([jobs[i] for i in groups[g]], {n: hits[i] for n, i in enumerate(groups[g]) if i in hits},
               [shapes[i] for i in groups[g]], dominates, eligible) for g in bundle] for bundle in bundles]
    # The biggest tasks first: the workers finish at about the same time.
    sizes = [sum(len(groups[g]) for g in bundle) for bundle in bundles]
    outputs = parallel_map(_evaluate_groups_task, shared, tasks, sizes, len(jobs) >= MIN_PARALLEL_PROPOSALS, workers)
    results: list[InstancePerf | Dominated | None] = [None] * len(jobs)
    for bundle, output in zip(bundles, outputs):
        for g, group_output in zip(bundle, output):
            for i, result in zip(groups[g], group_output):
                results[i] = result
    _remember([(keys[i], r) for i, r in enumerate(results) if isinstance(r, InstancePerf)])
    return results  # type: ignore[return-value]


PoolJob = tuple[GpuSpec, Layout, Role, "Link | None", tuple[int, ...]]
# Pool-capacity jobs (each about a dozen capacity searches) worth starting workers for.
MIN_PARALLEL_POOL_JOBS = 8


def _pool_job(shared: _Shared, job: "PoolJob") -> list[float]:
    gpu, layout, role, link, sizes = job
    return pool_capacities_rps(shared.model, gpu, layout, role, shared.workload, shared.slo, sizes,
                               engine=shared.engine, headroom=shared.headroom, kv_link=link, allow_cross_domain=True)


def pool_capacities(model: ModelSpec, workload: Workload, slo: SLO, engine: str, headroom: float,
                    jobs: Sequence[PoolJob], workers: int | None = None) -> list[list[float]]:
    """``pool_capacities_rps`` of every job (GPU, layout, role, KV link, pool sizes), in order,
    in worker processes when there are enough of them."""
    shared = _Shared(model, workload, slo, engine, headroom)
    return parallel_map(_pool_job, shared, jobs, [len(job[4]) for job in jobs], len(jobs) >= MIN_PARALLEL_POOL_JOBS,
                        workers)
