"""Capacity of every surviving proposal: the performance model, called in parallel when it pays.

``instance_capacity`` is a pure function of its inputs, so evaluating the proposals in worker
processes gives exactly the results of one process, in the same order: the plan does not depend
on how many CPUs the machine has. Small tables (a few hundred proposals) run in this process,
where starting workers would cost more than it saves. Results are memoized per process (an LRU
keyed by the inputs), so the second stage of a cluster solve, fleets and scenarios sharing a
model, and diagnosis re-runs do not pay twice.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model.capacity import InstancePerf, instance_capacity
from layoutopt.perf_model.links import Link
from layoutopt.plan import Layout, Role
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

# Below this many proposals one process is faster than starting workers.
MIN_PARALLEL_PROPOSALS = 400
# Proposals per task sent to a worker (amortizes pickling the shared inputs).
CHUNK_PROPOSALS = 64
CACHE_ENTRIES = 100_000

Job = tuple[GpuSpec, Layout, Role, "Link | None"]


class _Shared:
    """Inputs every proposal of one table shares."""

    def __init__(self, model: ModelSpec, workload: Workload, slo: SLO, engine: str, headroom: float):
        self.model, self.workload, self.slo, self.engine, self.headroom = model, workload, slo, engine, headroom
        engine_key = engine if isinstance(engine, str) else repr(engine)  # a calibrated profile object
        self.key = (model.model_dump_json(), workload.model_dump_json(), slo.model_dump_json(), engine_key, headroom)


_cache: OrderedDict[tuple, InstancePerf] = OrderedDict()
_cache_lock = threading.Lock()


def _job_keys(shared_key: tuple, jobs: Sequence[Job]) -> list[tuple]:
    dumped: dict[int, str] = {}  # a table has a few GPUs and links: dump each once

    def dump(value) -> str | None:
        if value is None:
            return None
        if id(value) not in dumped:
            dumped[id(value)] = value.model_dump_json()
        return dumped[id(value)]

    return [(shared_key, dump(gpu), layout.model_dump_json(), role, dump(link)) for gpu, layout, role, link in jobs]


def _evaluate_chunk(shared: _Shared, jobs: Sequence[Job]) -> list[InstancePerf]:
    return [instance_capacity(shared.model, gpu, layout, role, shared.workload, shared.slo, engine=shared.engine,
                              headroom=shared.headroom, kv_link=link) for gpu, layout, role, link in jobs]


def available_workers() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


def _context():
    # fork copies the imported package for free; with other threads running (the HTTP service) a
    # fork could copy a held lock, so a fresh interpreter is started instead.
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


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
    workers = available_workers() if workers is None else max(1, workers)
    # A daemonic process (a worker of the service or a multiprocessing.Pool) may not start children.
    if workers > 1 and len(missing) >= MIN_PARALLEL_PROPOSALS and not multiprocessing.current_process().daemon:
        chunks = [missing[i:i + CHUNK_PROPOSALS] for i in range(0, len(missing), CHUNK_PROPOSALS)]
        with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=_context()) as pool:
            futures = [pool.submit(_evaluate_chunk, shared, [jobs[i] for i in chunk]) for chunk in chunks]
            for chunk, future in zip(chunks, futures):
                for i, perf in zip(chunk, future.result()):
                    results[i] = perf
    else:
        for i, perf in zip(missing, _evaluate_chunk(shared, [jobs[i] for i in missing])):
            results[i] = perf
    with _cache_lock:
        for i in missing:
            _cache[keys[i]] = results[i]
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return results  # type: ignore[return-value]
