"""Processes that check request bodies and run solves, estimates, simulations and jobs, stoppable mid-run.

CP-SAT and the simulator hold a thread until they finish, so work that must end at a deadline,
on a client's disconnect or on a cancel runs in a process: a ``pebble.ProcessPool`` whose running
task is cancelled by terminating its worker (the pool starts a fresh one). Request bodies are
checked in a pool of their own (``parsers``), so neither parsing a hostile 1 MB body nor a queue
of solves ever runs on the event loop, and a bad body is answered without waiting for a solver.
Processes start from a fork server that has imported the solver, so a replacement is ready in a
fraction of a second.

``reserve`` counts requests in flight and raises ``Busy`` at once (the app answers 503 with
``Retry-After``) beyond ``max_pending``, or when the requests queued ahead would, at the recent
mean run time, keep a new one waiting past its deadline: a request is refused while the client
can still go elsewhere, rather than accepted and answered 504 after the whole deadline.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import sys
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any, Literal

import pebble.common
from pebble import ProcessPool
from pebble.common import ProcessExpired

from layoutopt.service import jobs

JOIN_TIMEOUT_S = 10.0
RUN_TIME_SMOOTHING = 0.2  # weight of the latest run in the moving mean of run times
ADMISSION_FRACTION = 0.8  # refuse when the expected time exceeds this share of the deadline (runs vary)
PARSE_PROCESSES = 1
WARM_UP_TIMEOUT_S = 120.0
# Seconds a stopped worker gets to exit on SIGTERM before SIGKILL (see WorkerPool.start).
STOP_GRACE_S = 0.25


class Busy(Exception):
    """More work in flight than the pool accepts; ``wait_s`` is how long the queue ahead should take."""

    def __init__(self, message: str, wait_s: float = 0.0):
        self.wait_s = wait_s
        super().__init__(message)


class DeadlineExceeded(Exception):
    """The work ran past its deadline and was stopped."""

    def __init__(self, deadline_s: float):
        self.deadline_s = deadline_s
        super().__init__(f"stopped after its {deadline_s:g} s deadline")


class WorkerDied(Exception):
    """The worker process ended without an answer (killed, out of memory)."""


def _context() -> multiprocessing.context.BaseContext:
    method = "forkserver" if sys.platform != "win32" else "spawn"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["layoutopt.service.jobs", *jobs.HEAVY_MODULES])
    return context


def _timed(target: Callable[..., Any], args: tuple) -> tuple[float, Any]:
    """``target(*args)`` and the seconds it took, measured in the worker (queueing excluded)."""
    start_s = time.perf_counter()
    result = target(*args)
    return time.perf_counter() - start_s, result


class WorkerPool:
    def __init__(self, max_workers: int, max_pending: int, deadline_s: float = math.inf):
        self.max_workers = max_workers
        self.max_pending = max_pending
        self.deadline_s = deadline_s
        self.mean_run_s = 0.0  # moving mean of measured request run times; 0 until one finished
        self.in_flight = 0
        self.num_stopped = 0  # tasks whose process was terminated (deadline, disconnect, cancel)
        self._pools: dict[str, ProcessPool] = {}

    def start(self) -> None:
        """Start the processes and wait until each has imported the solver (the service is ready then)."""
        # A stopped worker gets SIGTERM, whose handler runs only once CP-SAT or numpy hands the
        # interpreter back, then SIGKILL after pebble's term_timeout (3 s by default): the slot
        # would stay taken past the deadline that stopped it. Nothing is lost by killing sooner.
        pebble.common.CONSTS.term_timeout = STOP_GRACE_S
        context = _context()
        self._pools = {"work": ProcessPool(max_workers=self.max_workers, context=context,
                                           initializer=jobs.worker_started),
                       "parse": ProcessPool(max_workers=PARSE_PROCESSES, context=context)}
        warming = [pool.schedule(jobs.warm_up) for name, pool in self._pools.items()
                   for _ in range(self.max_workers if name == "work" else PARSE_PROCESSES)]
        for future in warming:
            future.result(timeout=WARM_UP_TIMEOUT_S)

    def stop(self) -> None:
        """End every process now (running work is abandoned) and wait for them."""
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.stop()
        for pool in pools.values():
            pool.join(timeout=JOIN_TIMEOUT_S)

    def queue_wait_s(self) -> float:
        """Seconds a request arriving now would wait for a worker, at the recent mean run time."""
        ahead = max(0, self.in_flight + 1 - self.max_workers)
        return ahead / self.max_workers * self.mean_run_s

    def reserve(self) -> None:
        """Count a request about to be served; ``Busy`` when it cannot be, or not within the deadline.

        A request that finds a free worker is always taken: the mean run time only judges queues.
        """
        if self.in_flight >= self.max_pending:
            raise Busy(f"{self.in_flight} requests in flight (at most {self.max_pending})",
                       self.queue_wait_s())
        wait_s = self.queue_wait_s()
        if wait_s > 0 and wait_s + self.mean_run_s > ADMISSION_FRACTION * self.deadline_s:
            raise Busy(f"the {self.in_flight} requests in flight would keep this one about "
                       f"{wait_s + self.mean_run_s:.0f} s, near the {self.deadline_s:g} s deadline", wait_s)
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1

    async def run(self, target: Callable[..., Any], args: tuple, *, deadline_s: float,
                  stop: asyncio.Event | None = None, pool: Literal["work", "parse"] = "work",
                  measure: bool = False) -> Any:
        """``target(*args)`` in a process of ``pool``, stopped at ``deadline_s`` or when ``stop`` is set.

        ``measure``: count its run time in the moving mean that ``reserve`` uses.

        Raises ``DeadlineExceeded``, ``asyncio.CancelledError`` (stopped by ``stop`` or by
        cancelling the calling task) or ``WorkerDied``.
        """
        if pool not in self._pools:
            raise WorkerDied("the worker pool is not running")
        future = self._pools[pool].schedule(_timed, args=(target, args))
        waiter = asyncio.wrap_future(future)
        stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
        try:
            waiting = {waiter} if stopper is None else {waiter, stopper}
            done, _ = await asyncio.wait(waiting, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                if stopper is not None and stopper in done:
                    raise asyncio.CancelledError("stopped: the client went away or the job was cancelled")
                if measure:
                    self._count_run(deadline_s)  # at least this long: admission must see it
                raise DeadlineExceeded(deadline_s)
            try:
                run_s, result = waiter.result()
            except ProcessExpired as error:
                raise WorkerDied(f"the worker process ended (exit code {error.exitcode})") from None
            except CancelledError:
                raise asyncio.CancelledError("stopped") from None
            if measure:
                self._count_run(run_s)
            return result
        finally:
            if not future.done():
                future.cancel()  # terminates the process running it, or drops it from the queue
                self.num_stopped += 1
            if stopper is not None:
                stopper.cancel()

    def _count_run(self, run_s: float) -> None:
        if self.mean_run_s == 0.0:
            self.mean_run_s = run_s
        else:
            self.mean_run_s += RUN_TIME_SMOOTHING * (run_s - self.mean_run_s)


__all__ = ["Busy", "DeadlineExceeded", "WorkerDied", "WorkerPool"]
