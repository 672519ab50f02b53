"""Limits of one service instance: body sizes, timeouts, deadlines, concurrency, workers.

Every limit the service enforces is a field here, so ``layoutopt serve`` flags, tests and
``docs/api.md`` name the same numbers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


# Requests waiting per worker by default: a short queue keeps the wait of the last one a few run
# times long, so an accepted request ends well within its deadline even when runs slow down
# several-fold under load; the rest are told to come back (503 + Retry-After) while they can.
QUEUED_PER_WORKER = 4


class ServiceSettings(BaseModel):
    """Limits and the worker pool of one service instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(default=1 << 20, ge=1024, le=64 << 20, description="larger request bodies get 413")
    max_json_depth: int = Field(default=32, ge=4, le=128, description="deeper nesting of arrays and objects gets 422")
    max_json_values: int = Field(default=100_000, ge=100, description="bodies with more JSON values get 422")
    max_string_chars: int = Field(default=10_000, ge=100, description="longer strings anywhere in a body get 422")
    max_workers: int = Field(default=4, ge=1, le=64, description="worker processes running solves and jobs")
    max_pending: int | None = Field(default=None, ge=1, description="synchronous requests running or queued; "
                                    "beyond: 503. Default: QUEUED_PER_WORKER + 1 per worker")
    retry_after_s: int = Field(default=5, ge=1, description="the Retry-After of a 503")
    request_deadline_s: float = Field(default=90.0, gt=0, le=3600,
                                      description="wall-clock cap of one synchronous request, queueing included; "
                                      "past it the work is stopped and the answer is 504")
    header_timeout_s: float = Field(default=10.0, gt=0, le=300,
                                    description="a request line and headers not complete within this: connection "
                                    "answered 408 and closed")
    body_timeout_s: float = Field(default=30.0, gt=0, le=600, description="a body not received within this: 408")
    keep_alive_timeout_s: int = Field(default=5, ge=1, le=120, description="idle keep-alive connections are closed")
    max_connections: int = Field(default=512, ge=8, description="open connections beyond this get 503 and are closed")
    max_header_bytes: int = Field(default=16 << 10, ge=4096, description="request line and headers over this: 400")
    max_running_jobs: int = Field(default=1, ge=1, description="asynchronous jobs (sweeps, emits) running at once")
    max_stored_jobs: int = Field(default=32, ge=1,
                                 description="jobs kept (queued, running or finished); with all unfinished: 503")
    job_deadline_s: float = Field(default=1800.0, gt=0, le=86_400, description="wall-clock cap of one job")
    job_ttl_s: float = Field(default=3600.0, gt=0, description="finished jobs are forgotten after this")
    max_sweep_cells: int = Field(default=500, ge=1, description="cells one sweep job may have")


    @property
    def pending_limit(self) -> int:
        """``max_pending``, or room for each worker's running request and QUEUED_PER_WORKER waiting ones."""
        return self.max_pending or (QUEUED_PER_WORKER + 1) * self.max_workers


def default_max_workers() -> int:
    from layoutopt.sweep.executors import default_workers

    return max(1, min(8, default_workers() - 1))


__all__ = ["ServiceSettings", "default_max_workers"]
