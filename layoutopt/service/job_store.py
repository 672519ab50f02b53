"""Asynchronous jobs (sweeps, emits): submitted, polled for status and progress, cancelled.

A job runs in a worker process of the shared ``WorkerPool`` (at most ``max_running_jobs`` at
once, the rest wait as ``queued``), so cancelling it or passing its ``job_deadline_s`` terminates
that process. Jobs live in memory: at most ``max_stored_jobs``; the oldest finished ones make room
for new ones and every finished job is forgotten ``job_ttl_s`` after it ended.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from layoutopt.service import jobs
from layoutopt.service.problems import REPORT_BUGS, ErrorItem, from_input_error, item
from layoutopt.service.schemas import Job, JobKind, JobProgress, JobState
from layoutopt.service.workers import Busy, DeadlineExceeded, WorkerDied, WorkerPool

FINISHED: frozenset[JobState] = frozenset({"succeeded", "failed", "cancelled"})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class _Record:
    id: str
    kind: JobKind
    total: int
    deadline_s: float
    progress: Callable[[], int] | None
    scratch_dir: str | None
    status: JobState = "queued"
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    started_s: float | None = None
    finished_s: float | None = None
    done: int = 0
    result: dict[str, Any] | None = None
    error: list[ErrorItem] | None = None
    notes: list[str] = field(default_factory=list)
    task: asyncio.Task | None = None


class JobStore:
    def __init__(self, pool: WorkerPool, *, max_running: int, max_stored: int, deadline_s: float, ttl_s: float):
        self.pool = pool
        self.max_stored = max_stored
        self.deadline_s = deadline_s
        self.ttl_s = ttl_s
        self._records: dict[str, _Record] = {}
        self._running = asyncio.Semaphore(max_running)

    @property
    def num_unfinished(self) -> int:
        return sum(record.status not in FINISHED for record in self._records.values())

    def _make_room(self) -> None:
        now_s = time.monotonic()
        for key, record in list(self._records.items()):
            if record.finished_s is not None and now_s - record.finished_s > self.ttl_s:
                del self._records[key]
        finished = sorted((r for r in self._records.values() if r.status in FINISHED), key=lambda r: r.finished_s)
        while len(self._records) >= self.max_stored and finished:
            del self._records[finished.pop(0).id]
        if len(self._records) >= self.max_stored:
            raise Busy(f"{len(self._records)} jobs unfinished (at most {self.max_stored})")

    def submit(self, kind: JobKind, args: tuple, *, total: int = 1, progress: Callable[[], int] | None = None,
               scratch_dir: str | None = None) -> _Record:
        """Queue ``jobs.run_job(*args)`` as a job; ``Busy`` when the store is full of unfinished jobs.

        ``progress`` counts finished units (it is called from a thread); ``scratch_dir`` is removed
        when the job ends.
        """
        try:
            self._make_room()
        except Busy:
            if scratch_dir:
                shutil.rmtree(scratch_dir, ignore_errors=True)
            raise
        record = _Record(id=secrets.token_hex(8), kind=kind, total=max(1, total), deadline_s=self.deadline_s,
                         progress=progress, scratch_dir=scratch_dir)
        self._records[record.id] = record
        record.task = asyncio.create_task(self._run(record, args), name=f"layoutopt-job-{record.id}")
        return record

    def get(self, job_id: str) -> _Record | None:
        self._make_room_quietly()
        return self._records.get(job_id)

    def list(self) -> list[_Record]:
        self._make_room_quietly()
        return list(self._records.values())

    def _make_room_quietly(self) -> None:
        try:
            self._make_room()
        except Busy:
            pass

    def cancel(self, record: _Record) -> None:
        """Stop ``record`` (terminating its worker if it runs); a finished job stays as it is."""
        if record.status in FINISHED:
            return
        self._finish(record, "cancelled")
        if record.task is not None:
            record.task.cancel()

    def _finish(self, record: _Record, status: JobState) -> None:
        if record.status in FINISHED:
            return
        if status == "succeeded":
            record.done = record.total
        else:
            record.done = self._count(record)
        record.status = status
        record.finished_at = _now()
        record.finished_s = time.monotonic()
        if record.scratch_dir:
            shutil.rmtree(record.scratch_dir, ignore_errors=True)

    @staticmethod
    def _count(record: _Record) -> int:
        if record.progress is None or record.status != "running":
            return record.done
        try:
            return max(record.done, min(record.total, record.progress()))
        except Exception:  # noqa: BLE001 - a progress file being written is read again on the next poll
            return record.done

    async def _run(self, record: _Record, args: tuple) -> None:
        async with self._running:
            if record.status != "queued":
                return
            record.status, record.started_at, record.started_s = "running", _now(), time.monotonic()
            try:
                status, payload = await self.pool.run(jobs.run_job, args, deadline_s=record.deadline_s)
            except asyncio.CancelledError:
                self._finish(record, "cancelled")
                return
            except DeadlineExceeded as error:
                record.error = [item("deadline_exceeded", ["job"], record.deadline_s,
                                     f"a job that ends within {error.deadline_s:g} s", f"job: {error}")]
                self._finish(record, "failed")
                return
            except WorkerDied as error:
                record.error = [item("internal_error", ["job"], None, REPORT_BUGS, f"job: {error}")]
                self._finish(record, "failed")
                return
            if status == "ok":
                record.result = payload["data"]
                if payload["non_finite"]:
                    places = ", ".join(".".join(map(str, p["loc"])) + f" ({p['value']})" for p in payload["non_finite"])
                    record.notes.append(f"not finite, given as null: {places}")
                self._finish(record, "succeeded")
                return
            if status == "invalid":
                record.error = [ErrorItem(**entry) for entry in payload[1]]
            elif status == "input_error":
                record.error = [from_input_error(payload, ("body",))]
            elif status == "infeasible":
                record.error = [item("infeasible", ["body"], None, "a feasible request; "
                                     + "; ".join(payload["reasons"])[:2000], payload["message"])]
            else:
                record.error = [item("internal_error", ["job"], None, REPORT_BUGS, f"job: {payload}")]
            self._finish(record, "failed")

    def view(self, record: _Record) -> Job:
        """The job as its answer body; reads its progress (call from a thread: it may read a file)."""
        done = self._count(record)
        record.done = done
        end_s = record.finished_s if record.finished_s is not None else time.monotonic()
        elapsed_s = 0.0 if record.started_s is None else max(0.0, end_s - record.started_s)
        return Job(id=record.id, kind=record.kind, status=record.status,
                   progress=JobProgress(done=done, total=record.total, fraction=done / record.total),
                   created_at=record.created_at, started_at=record.started_at, finished_at=record.finished_at,
                   elapsed_s=elapsed_s, deadline_s=record.deadline_s, result=record.result, error=record.error,
                   notes=list(record.notes))

    def cancel_all(self) -> None:
        for record in list(self._records.values()):
            self.cancel(record)


__all__ = ["JobStore"]
