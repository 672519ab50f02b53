"""Where sweep cells run: in this process, in local worker processes, or as Ray tasks.

Every executor yields ``(row, plan_json)`` pairs as cells finish, in completion order; the
caller sorts by cell index, so the results do not depend on the executor. Each executor keeps a
bounded number of cells in flight, so a grid of 100,000 cells is not serialized up front.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Literal

from layoutopt.errors import InputError, LayoutoptError
from layoutopt.sweep.cell import SolveFn, error_row, run_cell
from layoutopt.sweep.results import CellResult
from layoutopt.sweep.spec import Cell

ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")
CellOutput = tuple[CellResult, str | None]
# Cells handed to the workers ahead of time, per worker: enough to keep every worker busy.
IN_FLIGHT_PER_WORKER = 2


def default_workers() -> int:
    """One worker per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform has sched_getaffinity
        return max(1, os.cpu_count() or 1)


def run_serial(cells: Sequence[Cell], solve_fn: SolveFn | None) -> Iterator[CellOutput]:
    """Run the cells one after another in this process."""
    for cell in cells:
        yield run_cell(cell, solve_fn)


def _process_context() -> multiprocessing.context.BaseContext:
    # fork from a process with a progress-bar thread can deadlock a child; forkserver forks
    # from a clean server that imports layoutopt once, which is nearly as fast.
    if sys.platform != "win32" and "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["layoutopt.sweep.cell", "layoutopt.optimizer.solve"])
        return context
    return multiprocessing.get_context("spawn")


def run_local_processes(cells: Sequence[Cell], solve_fn: SolveFn | None, workers: int) -> Iterator[CellOutput]:
    """Run the cells in ``workers`` local processes. ``solve_fn`` must be picklable (module level)."""
    queue = list(reversed(cells))
    in_flight: dict[Future, Cell] = {}
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_process_context())
    try:
        yield from _drain(pool, queue, in_flight, solve_fn, workers)
    except BrokenProcessPool as error:
        raise LayoutoptError(
            "sweep: the worker processes died. A script that calls sweep(..., workers > 1) must do so under "
            "`if __name__ == '__main__':` (each worker imports the main module); otherwise a worker ran out of "
            "memory or crashed - rerun with workers=1 to see the error"
        ) from error
    finally:
        # On an interrupt, cells not yet started are dropped; running ones finish within their limit.
        pool.shutdown(wait=True, cancel_futures=True)


def _drain(pool: ProcessPoolExecutor, queue: list[Cell], in_flight: dict[Future, Cell], solve_fn: SolveFn | None,
           workers: int) -> Iterator[CellOutput]:
    """Keep the pool fed and yield each cell's output as it completes."""
    while queue or in_flight:
        while queue and len(in_flight) < workers * IN_FLIGHT_PER_WORKER:
            cell = queue.pop()
            in_flight[pool.submit(run_cell, cell, solve_fn)] = cell
        done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
        for future in done:
            cell = in_flight.pop(future)
            try:
                yield future.result()
            except BrokenProcessPool:
                raise
            except Exception as error:  # noqa: BLE001 - a failing cell is recorded, not the sweep's end
                yield error_row(cell, f"worker failed: {type(error).__name__}: {error}"), None


def _ray_task(cell: Cell, solve_fn: SolveFn | None) -> CellOutput:
    return run_cell(cell, solve_fn)


def run_ray(cells: Sequence[Cell], solve_fn: SolveFn | None, address: str | None,
            workers: int | None) -> Iterator[CellOutput]:
    """Run the cells as Ray tasks of one CPU each.

    Uses the Ray instance this process is already connected to; otherwise connects to
    ``address`` (``auto``, ``ray://host:10001``, ...) or, without one, starts a local instance
    with ``workers`` CPUs, and disconnects at the end. ``workers`` also caps the cells in flight.
    Workers must be able to import layoutopt (install it on every node of a cluster).
    """
    try:
        import ray
    except ImportError:
        raise InputError("--executor", "ray", "Ray installed: pip install 'layoutopt[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        options = {"address": address} if address else {"num_cpus": workers or default_workers()}
        try:
            ray.init(**options, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise InputError("--ray-address", address, "the address of a running Ray cluster: 'auto' on a node "
                             "that joined it with `ray start`, host:6379, or ray://head:10001",
                             f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    try:
        cluster_cpus = int(ray.cluster_resources().get("CPU", 0))
        if cluster_cpus < 1:
            raise InputError("--ray-address", address, "a Ray cluster with at least one CPU for sweep tasks")
        limit = (workers or cluster_cpus) * IN_FLIGHT_PER_WORKER
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        queue = list(reversed(cells))
        in_flight: dict = {}
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                cell = queue.pop()
                in_flight[task.remote(cell, solve_fn)] = cell
            done, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                cell = in_flight.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as error:  # noqa: BLE001 - a lost task fails its cell, not the sweep
                    yield error_row(cell, f"ray task failed: {type(error).__name__}: {error}"), None
    finally:
        if started_here:
            ray.shutdown()


def run_cells(cells: Sequence[Cell], solve_fn: SolveFn | None, executor: str, address: str | None,
              workers: int | None) -> Iterator[CellOutput]:
    """Dispatch to the executor named ``executor`` (``local`` or ``ray``)."""
    if executor == "ray":
        return run_ray(cells, solve_fn, address, workers)
    if executor != "local":
        raise InputError("executor", executor, f"one of {', '.join(EXECUTORS)}")
    if address is not None:
        raise InputError("address", address, "only with executor ray")
    num_workers = min(workers or default_workers(), max(1, len(cells)))
    if num_workers == 1:
        return run_serial(cells, solve_fn)
    return run_local_processes(cells, solve_fn, num_workers)
