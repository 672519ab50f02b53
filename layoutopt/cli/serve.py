"""``layoutopt serve``: the HTTP service (solve, estimate, simulate; sweep and emit jobs; catalogs; /healthz)."""

from __future__ import annotations

import click


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="interface to listen on (0.0.0.0: all)")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(min=0, max=65535))
@click.option("--workers", type=click.IntRange(min=1, max=64),
              help="worker processes running solves and jobs (default: CPUs - 1, at most 8)")
@click.option("--max-body-bytes", type=click.IntRange(min=1024, max=64 << 20), default=1 << 20, show_default=True,
              help="larger request bodies get 413")
@click.option("--max-pending", type=click.IntRange(min=1, max=100_000),
              help="solve/estimate/simulate requests running or queued; more get 503 with Retry-After "
              "(default: 5 per worker: one running, four waiting)")
@click.option("--deadline-s", type=click.FloatRange(min=0, max=3600, min_open=True), default=90.0, show_default=True,
              help="wall-clock cap of one solve/estimate/simulate request; its work is stopped past it (504)")
@click.option("--job-deadline-s", type=click.FloatRange(min=0, max=86_400, min_open=True), default=1800.0,
              show_default=True, help="wall-clock cap of one sweep or emit job")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
def command(host: str, port: int, workers: int | None, max_body_bytes: int, max_pending: int | None, deadline_s: float,
            job_deadline_s: float, log_level: str) -> None:
    """Serve the Python API over HTTP (FastAPI on uvicorn); OpenAPI schema at /openapi.json."""
    from layoutopt.service.server import serve
    from layoutopt.service.settings import ServiceSettings, default_max_workers

    settings = ServiceSettings(max_body_bytes=max_body_bytes, max_workers=workers or default_max_workers(),
                               max_pending=max_pending, request_deadline_s=deadline_s, job_deadline_s=job_deadline_s)
    serve(host, port, settings, log_level=log_level)
