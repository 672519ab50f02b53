"""``layoutopt serve``: the HTTP service (POST /v1/solve, /v1/estimate, /v1/simulate; catalogs; /healthz)."""

from __future__ import annotations

import click


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="interface to listen on (0.0.0.0: all)")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(min=0, max=65535))
@click.option("--workers", type=click.IntRange(min=1),
              help="worker processes running solves (default: CPUs - 1, at most 8)")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=1 << 20, show_default=True,
              help="larger request bodies get 413")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
def command(host: str, port: int, workers: int | None, max_body_bytes: int, log_level: str) -> None:
    """Serve the Python API over HTTP (FastAPI on uvicorn); OpenAPI schema at /openapi.json."""
    from layoutopt.service.app import ServiceSettings, default_max_workers
    from layoutopt.service.server import serve

    settings = ServiceSettings(max_body_bytes=max_body_bytes, max_workers=workers or default_max_workers())
    serve(host, port, settings, log_level=log_level)
