"""Worker processes for the optimizer's parallel stages: ``parallel_map`` and the pool it runs on.

The structural screens, the candidate evaluation and the pool capacities of one candidate table
are pure functions of their inputs, so running them in worker processes gives exactly the results
of one process, in the same order: the plan does not depend on how many CPUs the machine has.

Inside a :func:`worker_pool` block every ``parallel_map`` of this thread runs on one set of worker
processes, started at the block's first parallel dispatch and stopped when it ends, instead of a
fresh pool per call: a candidate table's three stages start their workers once, and the later
stages find the perf model's memos the earlier ones filled in the workers. Outside a block each
call starts and stops its own pool, as before.

Workers are forked from this process when it runs no other thread (they share the imported
package for free), else started as fresh interpreters: a fork could copy a lock another thread
holds (the HTTP service). The parent's objects are frozen out of the cyclic garbage collector while
it forks (``gc.freeze``), so the workers' collections do not walk, and copy, the pages of the
parent's heap they inherited. While a block runs, the cyclic collector's youngest generation is
collected every ``BLOCK_GC_THRESHOLD[0]`` net allocations instead of Python's 700, in this process
and in the block's workers (:func:`_relaxed_collector`): the perf model's memos fill with
long-lived tables, coefficient sets and keys, and the default thresholds walk them again and again
(deepseek-v3 on '$400/h': 0.69 s of collections over the three processes, 0.26 s relaxed) to find
almost nothing (the evaluation makes little cyclic garbage).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager


def available_workers() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


# False in processes that must not start evaluation workers of their own (the service's workers:
# the service runs requests side by side in processes it can stop, and a stopped process must not
# leave workers behind that keep computing). ``single_process()`` sets it.
_worker_processes_allowed = True


def single_process() -> None:
    """Evaluate in this process from now on (for process pools whose workers are stopped mid-run)."""
    global _worker_processes_allowed
    _worker_processes_allowed = False


def processes_allowed() -> bool:
    """Whether ``parallel_map`` may start worker processes in this process."""
    return _worker_processes_allowed and not multiprocessing.current_process().daemon


def _context():
    # fork copies the imported package for free; with other threads running (the HTTP service) a
    # fork could copy a held lock, so a fresh interpreter is started instead.
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


# gc.set_threshold inside a worker_pool block and in its workers (Python's default: 700, 10, 10).
BLOCK_GC_THRESHOLD = (10_000, 10, 10)
_collector_lock = threading.Lock()
_relaxed_blocks = 0
_saved_threshold: tuple[int, ...] = ()


@contextmanager
def _relaxed_collector() -> Iterator[None]:
    """``BLOCK_GC_THRESHOLD`` while any thread runs a ``worker_pool`` block (the thresholds are the
    process's); the ones before when the last such block ends."""
    global _relaxed_blocks, _saved_threshold
    with _collector_lock:
        if _relaxed_blocks == 0:
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(*BLOCK_GC_THRESHOLD)
        _relaxed_blocks += 1
    try:
        yield
    finally:
        with _collector_lock:
            _relaxed_blocks -= 1
            if _relaxed_blocks == 0:
                gc.set_threshold(*_saved_threshold)


def _start(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes, started now (a forked pool starts all of them at its first
    submit, so one no-op task starts them while the parent's heap is frozen); a block's workers
    collect with ``BLOCK_GC_THRESHOLD`` (a forked worker would inherit the parent's, a fresh
    interpreter not)."""
    relaxed = _shared.depth > 0
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(),
                               initializer=gc.set_threshold if relaxed else None,
                               initargs=BLOCK_GC_THRESHOLD if relaxed else ())
    gc.freeze()
    try:
        pool.submit(int).result()
    finally:
        gc.unfreeze()
    return pool


class _Shared(threading.local):
    """This thread's pool while a ``worker_pool`` block runs."""

    depth = 0
    pool: ProcessPoolExecutor | None = None
    workers = 0


_shared = _Shared()


def _drop_shared_pool(cancel: bool) -> None:
    pool, _shared.pool, _shared.workers = _shared.pool, None, 0
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=cancel)


@contextmanager
def worker_pool() -> Iterator[None]:
    """Run every ``parallel_map`` of this thread inside the block on one pool of worker processes
    (started at the first parallel dispatch, stopped at the end of the outermost block)."""
    _shared.depth += 1
    try:
        with _relaxed_collector():
            yield
    finally:
        _shared.depth -= 1
        if _shared.depth == 0:
            _drop_shared_pool(cancel=True)


def _pool_for(workers: int) -> tuple[ProcessPoolExecutor, bool]:
    """(pool, whether the caller owns it): the block's pool when one is open for this many workers."""
    if _shared.depth == 0:
        return _start(workers), True
    if _shared.pool is None:
        _shared.pool, _shared.workers = _start(workers), workers
    if _shared.workers != workers:
        return _start(workers), True
    return _shared.pool, False


def parallel_map(function: Callable, shared, tasks: Sequence, sizes: Sequence[int], parallel: bool,
                 workers: int | None = None) -> list:
    """``[function(shared, task) for task in tasks]``, in worker processes when ``parallel`` and
    more than one CPU may be used (``workers`` None: every available one); the largest tasks
    (by ``sizes``) are submitted first, so the workers finish at about the same time. The
    results are the same either way."""
    workers = available_workers() if workers is None else max(1, workers)
    # A daemonic process (a multiprocessing.Pool worker) may not start children; the service's
    # workers call single_process().
    if not parallel or workers < 2 or len(tasks) < 2 or not processes_allowed():
        return [function(shared, task) for task in tasks]
    order = sorted(range(len(tasks)), key=lambda t: -sizes[t])
    pool, owned = _pool_for(workers if _shared.depth else min(workers, len(tasks)))
    futures: dict[int, Future] = {}
    try:
        futures = {t: pool.submit(function, shared, tasks[t]) for t in order}
        return [futures[t].result() for t in range(len(tasks))]
    except BrokenProcessPool:
        if not owned:
            _drop_shared_pool(cancel=True)  # a worker died: the block's next dispatch starts a new pool
        raise
    finally:
        for future in futures.values():
            future.cancel()  # after an error: the tasks not started yet
        if owned:
            pool.shutdown(wait=True, cancel_futures=True)

