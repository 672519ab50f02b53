"""The HTTP service: FastAPI routes over the Python API (see ``docs/api.md`` for examples).

    POST /v1/solve      SolveRequest    -> Plan
    POST /v1/estimate   EstimateRequest -> Estimate
    POST /v1/simulate   SimulateRequest -> SimulationResult
    GET  /v1/catalog/gpus | /v1/catalog/models | /v1/catalog/nodes
    GET  /healthz
    GET  /openapi.json, /docs

Solves, estimates and simulations run in a pool of worker processes, so the event loop keeps
answering health checks and catalog requests while they run. Bodies over ``max_body_bytes`` get
413; invalid bodies and every layoutopt ``InputError`` get 422 with FastAPI's error shape
(``detail: [{loc, msg, type, ...}]``; input errors add ``field``, ``allowed`` and ``hint``); more
than ``max_pending_jobs`` jobs in flight get 503. A solve that reaches its time limit returns its
best plan with status ``timeout`` and the gap.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import sys
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from layoutopt import __version__
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.schemas import GpuSpec, NodeType
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Plan
from layoutopt.perf_model.estimate import Estimate
from layoutopt.service import jobs
from layoutopt.service.limits import BodySizeLimit
from layoutopt.service.schemas import EstimateRequest, Health, SimulateRequest, SolveRequest
from layoutopt.simulator.result import SimulationResult

# Error fields named after CLI flags, mapped to the request field that carries them.
_FIELD_ALIASES = {"rate": "rate_rps", "time_limit": "time_limit_s", "isl/osl": "isl", "concurrency/rate": "concurrency"}


class ServiceSettings(BaseModel):
    """Limits and the worker pool of one service instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="larger request bodies get 413")
    max_workers: int = Field(default=4, ge=1, description="worker processes (or threads) running jobs")
    max_pending_jobs: int = Field(default=256, ge=1, description="jobs in flight beyond this get 503")
    executor: Literal["process", "thread"] = "process"


def default_max_workers() -> int:
    from layoutopt.sweep.executors import default_workers

    return max(1, min(8, default_workers() - 1))


def input_error_detail(error: dict[str, Any]) -> dict[str, Any]:
    """One FastAPI-style error item for an ``InputError`` payload from :func:`jobs.input_error_payload`."""
    parts = [p for p in re.split(r"[.\[\]]+", error["field"].lstrip("-")) if p]
    if parts:
        head = parts[0].replace("-", "_")
        parts[0] = _FIELD_ALIASES.get(head, head)
    loc = ["body", *(int(p) if p.isdigit() else p for p in parts)]
    return {"type": "input_error", "loc": loc, "msg": error["message"], "input": error["value"],
            "field": error["field"], "allowed": error["allowed"], "hint": error["hint"]}


class _Jobs:
    """The worker pool and the count of jobs in flight."""

    def __init__(self, settings: ServiceSettings):
        self.settings = settings
        self.pool: Executor | None = None
        self.in_flight = 0

    def start(self) -> None:
        workers = self.settings.max_workers
        if self.settings.executor == "thread":
            self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="layoutopt-job")
            return
        method = "forkserver" if sys.platform != "win32" else "spawn"
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload(["layoutopt.service.jobs", *jobs.HEAVY_MODULES])
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        for _ in range(workers):
            self.pool.submit(jobs.warm_up)

    def stop(self) -> None:
        """Drop queued jobs, end the worker processes (abandoning running jobs) and wait for them."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        # The pool's own shutdown would wait for running solves (up to their time limit).
        processes = (getattr(pool, "_processes", None) or {}) if isinstance(pool, ProcessPoolExecutor) else {}
        workers = list(processes.values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()
        for process in workers:
            process.join(timeout=10)

    async def run(self, function: jobs.ApiFunction, kwargs: dict[str, Any]) -> JSONResponse:
        if self.in_flight >= self.settings.max_pending_jobs:
            raise HTTPException(503, f"busy: {self.in_flight} jobs in flight; retry later")
        self.in_flight += 1
        try:
            status, payload = await asyncio.wrap_future(self.pool.submit(jobs.run_job, function, kwargs))
        except BrokenProcessPool:
            self.stop()  # a worker died (out of memory, killed): start a fresh pool for the next job
            self.start()
            raise HTTPException(500, "the worker process running this request died") from None
        finally:
            self.in_flight -= 1
        if status == "ok":
            return JSONResponse(payload)
        if status == "input_error":
            return JSONResponse({"detail": [input_error_detail(payload)]}, status_code=422)
        if status == "infeasible":
            return JSONResponse({"detail": [{"type": "infeasible", "loc": ["body"], **payload}]}, status_code=422)
        raise HTTPException(500, payload)


def create_app(settings: ServiceSettings | None = None, *, solve_fn: jobs.ApiFunction | None = None,
               estimate_fn: jobs.ApiFunction | None = None,
               simulate_fn: jobs.ApiFunction | None = None) -> FastAPI:
    """The service. ``*_fn`` replace the API functions (module-level, so worker processes can import them)."""
    settings = settings or ServiceSettings(max_workers=default_max_workers())
    pool = _Jobs(settings)
    functions = {"solve": solve_fn or jobs.default_solve, "estimate": estimate_fn or jobs.default_estimate,
                 "simulate": simulate_fn or jobs.default_simulate}
    catalog: dict[str, list] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        from layoutopt.hardware_catalog.catalog import load_catalog
        from layoutopt.model_catalog.catalog import list_models

        hardware = load_catalog()
        catalog.update(gpus=list(hardware.gpus), nodes=list(hardware.node_types), models=list_models())
        pool.start()
        try:
            yield
        finally:
            pool.stop()

    # No /docs or /redoc: their pages load scripts from a CDN, and nothing here reaches outside.
    app = FastAPI(title="layoutopt", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="LLM serving layouts that maximize goodput per dollar under TTFT/TPOT SLOs.")
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes)

    @app.exception_handler(InputError)
    async def _input_error(_: Request, error: InputError) -> JSONResponse:
        return JSONResponse({"detail": [input_error_detail(jobs.input_error_payload(error))]}, status_code=422)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> Health:
        return Health(version=__version__, jobs_running=pool.in_flight, workers=settings.max_workers)

    @app.post("/v1/solve", response_model=Plan, tags=["api"],
              summary="The serving plan that optimizes the objective within the budget under the SLO")
    async def solve(request: SolveRequest) -> JSONResponse:
        return await pool.run(functions["solve"], jobs.solve_kwargs(request))

    @app.post("/v1/estimate", response_model=Estimate, tags=["api"],
              summary="Predicted latency, throughput and memory of one deployment")
    async def estimate(request: EstimateRequest) -> JSONResponse:
        return await pool.run(functions["estimate"], jobs.estimate_kwargs(request))

    @app.post("/v1/simulate", response_model=SimulationResult, tags=["api"],
              summary="Discrete-event replay of a workload on a plan")
    async def simulate(request: SimulateRequest) -> JSONResponse:
        return await pool.run(functions["simulate"], jobs.simulate_kwargs(request))

    @app.get("/v1/catalog/gpus", response_model=list[GpuSpec], tags=["catalog"])
    async def catalog_gpus() -> list[GpuSpec]:
        return catalog["gpus"]

    @app.get("/v1/catalog/nodes", response_model=list[NodeType], tags=["catalog"])
    async def catalog_nodes() -> list[NodeType]:
        return catalog["nodes"]

    @app.get("/v1/catalog/models", response_model=list[ModelSpec], tags=["catalog"])
    async def catalog_models() -> list[ModelSpec]:
        return catalog["models"]

    return app
