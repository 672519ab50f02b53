"""The HTTP service: FastAPI routes over the Python API (see ``docs/api.md`` for examples).

    POST /v1/solve      SolveRequest    -> 200 Plan (status optimal, feasible, timeout or infeasible)
    POST /v1/estimate   EstimateRequest -> 200 Estimate
    POST /v1/simulate   SimulateRequest -> 200 SimulationResult
    POST /v1/fleets     FleetRequest    -> 200 FleetPlan (several models on one budget; status as solve)
    POST /v1/length-routing LengthRoutingRequest -> 200 LengthRoutedPlan (short and long prompts on own pools)
    POST /v1/sweeps     SweepSpec       -> 202 Job (kind sweep)
    POST /v1/emit       EmitRequest     -> 202 Job (kind emit; result: EmitResult)
    GET  /v1/jobs, GET /v1/jobs/{id}, DELETE /v1/jobs/{id} (cancel)
    GET  /v1/catalog/gpus | /v1/catalog/models | /v1/catalog/nodes
    GET  /healthz, GET /openapi.json

How a request is served: the body is read under a size cap and a time cap (``limits.py``), then
checked in a parsing process (``bodies.py``, ``arguments.py``), so the event loop never parses
and keeps answering; the work runs in a worker process (``workers.py``) that parses the body
again and is terminated when the request's deadline passes (504), when its client disconnects,
or when its job is cancelled.
Every error answer has one shape (``problems.ErrorBody``); the OpenAPI document lists every status
each route can answer.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException

from layoutopt import __version__
from layoutopt.hardware_catalog.schemas import GpuSpec, NodeType
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model.estimate import Estimate
from layoutopt.plan import Plan
from layoutopt.plan.fleet import FleetPlan
from layoutopt.plan.length_routing import LengthRoutedPlan
from layoutopt.service import arguments, jobs
from layoutopt.service.job_store import JobStore
from layoutopt.service.limits import BodyLimits
from layoutopt.service.problems import (
    REPORT_BUGS,
    ErrorBody,
    ErrorItem,
    Infeasible,
    ServiceError,
    from_input_error,
    from_validation_error,
    item,
    responses,
)
from layoutopt.service.schemas import (
    EmitRequest,
    EstimateRequest,
    FleetRequest,
    Health,
    LengthRoutingRequest,
    Job,
    JobList,
    SimulateRequest,
    SolveRequest,
)
from layoutopt.service.settings import ServiceSettings, default_max_workers
from layoutopt.service.workers import Busy, DeadlineExceeded, WorkerDied, WorkerPool
from layoutopt.simulator.result import SimulationResult

FILE_THREADS = 2
SYNC_STATUSES = (408, 413, 422, 500, 503, 504)
MAX_RETRY_AFTER_S = 120


def _busy(settings: ServiceSettings, error: Busy) -> ServiceError:
    """503: Retry-After is the configured minimum or the expected wait of the queue, whichever is longer."""
    retry_s = int(min(MAX_RETRY_AFTER_S, max(settings.retry_after_s, math.ceil(error.wait_s))))
    return ServiceError(503, [item("busy", ["request"], None, f"retry after {retry_s} s",
                                   f"busy: {error}; retry after {retry_s} s")],
                        headers={"Retry-After": str(retry_s)})


def _deadline(settings: ServiceSettings, error: DeadlineExceeded) -> ServiceError:
    return ServiceError(504, [item(
        "deadline_exceeded", ["request"], settings.request_deadline_s,
        f"a request that ends within {settings.request_deadline_s:g} s (request_deadline_s); ask for less "
        "(a shorter time_limit_s, fewer requests, a smaller budget)", f"request: {error}")])


def _internal(message: str) -> ServiceError:
    return ServiceError(500, [item("internal_error", ["request"], None, REPORT_BUGS, f"internal error: {message}")])


def _non_finite(places: list[dict[str, Any]]) -> ServiceError:
    return ServiceError(422, [item(
        "non_finite_result", ["response", *place["loc"]], place["value"],
        "a result whose numbers are finite (JSON has no NaN or Infinity)",
        f"the result's {'.'.join(map(str, place['loc']))} came out {place['value']}: for a latency, the load "
        "exceeds what the deployment serves; lower the rate or add capacity") for place in places])


def _invalid(payload: tuple[int, list[dict[str, Any]]]) -> ServiceError:
    status, items = payload
    return ServiceError(status, [ErrorItem(**entry) for entry in items])


async def _watch_disconnect(request: Request, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client closes the connection (the body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


class _Service:
    """The state of one running service: processes, job store, catalogs, a scratch folder."""

    def __init__(self, settings: ServiceSettings, functions: dict[str, jobs.ApiFunction]):
        self.settings = settings
        self.functions = functions
        self.pool = WorkerPool(settings.max_workers, settings.pending_limit, settings.request_deadline_s)
        self.jobs: JobStore | None = None
        self.threads: ThreadPoolExecutor | None = None
        self.catalog: dict[str, list] = {}
        self.scratch: tempfile.TemporaryDirectory | None = None

    def start(self) -> None:
        from layoutopt.hardware_catalog.catalog import load_catalog
        from layoutopt.model_catalog.catalog import list_models

        hardware = load_catalog()
        self.catalog.update(gpus=list(hardware.gpus), nodes=list(hardware.node_types), models=list_models())
        self.threads = ThreadPoolExecutor(max_workers=FILE_THREADS, thread_name_prefix="layoutopt-files")
        self.scratch = tempfile.TemporaryDirectory(prefix="layoutopt-serve-")
        self.pool.start()
        s = self.settings
        self.jobs = JobStore(self.pool, max_running=s.max_running_jobs, max_stored=s.max_stored_jobs,
                             deadline_s=s.job_deadline_s, ttl_s=s.job_ttl_s)

    def stop(self) -> None:
        if self.jobs is not None:
            self.jobs.cancel_all()
        self.pool.stop()
        if self.threads is not None:
            self.threads.shutdown(wait=False, cancel_futures=True)
        if self.scratch is not None:
            self.scratch.cleanup()

    async def in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in a thread: for the small file reads of job progress."""
        return await asyncio.get_running_loop().run_in_executor(self.threads, function, *args)

    async def check(self, endpoint: str, raw: bytes, deadline_s: float, gone: asyncio.Event | None = None) -> int:
        """Units of work in a valid body; ServiceError 4xx for an invalid one (checked in a parsing process)."""
        try:
            status, payload = await self.pool.run(arguments.check, (endpoint, raw, self.settings),
                                                  deadline_s=deadline_s, stop=gone, pool="parse")
        except DeadlineExceeded as error:
            raise _deadline(self.settings, error) from None
        except WorkerDied as error:
            raise _internal(str(error)) from None
        if status == "invalid":
            raise _invalid(payload)
        return payload

    async def run_sync(self, request: Request, endpoint: str) -> Response:
        loop = asyncio.get_running_loop()
        start_s = loop.time()
        try:
            self.pool.reserve()
        except Busy as error:
            raise _busy(self.settings, error) from None
        gone = asyncio.Event()
        watcher: asyncio.Task | None = None
        try:
            raw = await request.body()
            watcher = asyncio.create_task(_watch_disconnect(request, gone))
            deadline_s = self.settings.request_deadline_s
            try:
                await self.check(endpoint, raw, deadline_s, gone)
                left_s = max(deadline_s - (loop.time() - start_s), 0.001)
                status, payload = await self.pool.run(jobs.run_job, (self.functions[endpoint], endpoint, raw,
                                                                     self.settings), deadline_s=left_s, stop=gone,
                                                      measure=True)
            except DeadlineExceeded as error:
                raise _deadline(self.settings, error) from None
            except asyncio.CancelledError:
                if gone.is_set():
                    return Response(status_code=499)  # nobody reads it: the client went away
                raise
            except WorkerDied as error:
                raise _internal(str(error)) from None
        finally:
            self.pool.release()
            if watcher is not None:
                watcher.cancel()
        if status == "ok":
            if payload["non_finite"]:
                raise _non_finite(payload["non_finite"])
            return JSONResponse(payload["data"])
        if status == "invalid":
            raise _invalid(payload)
        if status == "input_error":
            raise ServiceError(422, [from_input_error(payload, aliases=arguments.FIELD_ALIASES)])
        if status == "infeasible":
            return JSONResponse(Infeasible(**payload).model_dump(mode="json"), status_code=409)
        raise _internal(str(payload))

    async def submit(self, request: Request, kind: str, extra: dict[str, Any] | None = None,
                     progress: Callable[[str], Callable[[], int]] | None = None) -> Response:
        raw = await request.body()
        units = await self.check(kind, raw, self.settings.request_deadline_s)
        scratch_dir = out_dir = None
        if progress is not None:
            scratch_dir = tempfile.mkdtemp(prefix=f"{kind}-", dir=self.scratch.name)
            out_dir = str(Path(scratch_dir) / "out")
            extra = {**(extra or {}), "out_dir": out_dir}
        try:
            record = self.jobs.submit(kind, (self.functions[kind], kind, raw, self.settings, extra), total=units,
                                      progress=progress(out_dir) if progress else None, scratch_dir=scratch_dir)
        except Busy as error:
            raise _busy(self.settings, error) from None
        view = await self.in_thread(self.jobs.view, record)
        return JSONResponse(view.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{record.id}"})


def _sweep_progress(out_dir: str) -> Callable[[], int]:
    def count() -> int:
        from layoutopt.sweep.results import read_journal

        return len(read_journal(out_dir))

    return count


def _openapi(app: FastAPI, request_models: dict[str, type[BaseModel]]) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document, with the request bodies the routes parse themselves."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        models = list(dict.fromkeys(request_models.values()))
        _, definitions = models_json_schema([(m, "validation") for m in models],
                                            ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in definitions.get("$defs", {}).items():
            components.setdefault(name, definition)
        # FastAPI documents a 422 for path parameters; a job id is any string, so none can arise.
        for operations in schema["paths"].values():
            for operation in operations.values():
                entry = operation.get("responses", {}).get("422", {})
                if "HTTPValidationError" in str(entry):
                    del operation["responses"]["422"]
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        for path, model in request_models.items():
            schema["paths"][path]["post"]["requestBody"] = {
                "required": True, "content": {"application/json": {"schema": {
                    "$ref": f"#/components/schemas/{model.__name__}"}}}}
        app.openapi_schema = schema
        return schema

    return build


def create_app(settings: ServiceSettings | None = None, *, solve_fn: jobs.ApiFunction | None = None,
               estimate_fn: jobs.ApiFunction | None = None, simulate_fn: jobs.ApiFunction | None = None,
               sweep_fn: jobs.ApiFunction | None = None, emit_fn: jobs.ApiFunction | None = None,
               fleet_fn: jobs.ApiFunction | None = None, length_routing_fn: jobs.ApiFunction | None = None) -> FastAPI:
    """The service. ``*_fn`` replace the API functions (module-level, so worker processes can import them)."""
    from layoutopt.sweep.spec import SweepSpec

    settings = settings or ServiceSettings(max_workers=default_max_workers())
    service = _Service(settings, {
        "solve": solve_fn or jobs.default_solve, "estimate": estimate_fn or jobs.default_estimate,
        "simulate": simulate_fn or jobs.default_simulate, "sweep": sweep_fn or jobs.default_sweep,
        "emit": emit_fn or jobs.default_emit, "fleet": fleet_fn or jobs.default_fleet,
        "length-routing": length_routing_fn or jobs.default_length_routing})

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        service.start()
        try:
            yield
        finally:
            service.stop()

    # No /docs or /redoc: their pages load scripts from a CDN, and nothing here reaches outside.
    # redirect_slashes off: '/v1/jobs/' is a 404 like any unknown path, not an undocumented 307.
    app = FastAPI(title="layoutopt", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  redirect_slashes=False,
                  description="LLM serving layouts that maximize goodput per dollar under TTFT/TPOT SLOs. "
                  "Every error answer is an ErrorBody naming the field, the value and the rule.")
    app.add_middleware(BodyLimits, max_body_bytes=settings.max_body_bytes, body_timeout_s=settings.body_timeout_s)

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, error: ServiceError) -> JSONResponse:
        return error.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        items = [item(e.get("type", "invalid"), list(e["loc"]), e.get("input"), e["msg"]) for e in error.errors()]
        return ServiceError(422, items[:20]).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        allowed = {404: "a path listed in /openapi.json", 405: "a method the path has (see /openapi.json)"}
        answer = ServiceError(error.status_code, [item("http_error", ["request", "path"], request.url.path,
                                                       allowed.get(error.status_code, str(error.detail)),
                                                       f"{request.method} {request.url.path}: {error.detail}")])
        return answer.response()

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, error: Exception) -> JSONResponse:
        return ServiceError(500, [item("internal_error", ["request"], None, REPORT_BUGS,
                                       f"internal error ({type(error).__name__}): {REPORT_BUGS}")]).response()

    @app.get("/healthz", response_model=Health, tags=["service"], responses=responses(503))
    async def healthz() -> Health:
        unfinished = service.jobs.num_unfinished if service.jobs else 0
        return Health(version=__version__, jobs_running=service.pool.in_flight, async_jobs=unfinished,
                      workers=settings.max_workers)

    @app.post("/v1/solve", response_model=Plan, tags=["api"], responses=responses(409, *SYNC_STATUSES),
              summary="The serving plan that optimizes the objective within the budget under the SLO",
              description="200 with a Plan whose status is optimal, feasible, timeout (best plan at the time "
              "limit, with solver.gap) or infeasible (no pools; explanation.reasons and suggestions say why).")
    async def solve(request: Request) -> Response:
        return await service.run_sync(request, "solve")

    @app.post("/v1/estimate", response_model=Estimate, tags=["api"], responses=responses(409, *SYNC_STATUSES),
              summary="Predicted latency, throughput and memory of one deployment")
    async def estimate(request: Request) -> Response:
        return await service.run_sync(request, "estimate")

    @app.post("/v1/simulate", response_model=SimulationResult, tags=["api"], responses=responses(409, *SYNC_STATUSES),
              summary="Discrete-event replay of a workload on a plan (catalog models and GPUs only)")
    async def simulate(request: Request) -> Response:
        return await service.run_sync(request, "simulate")

    @app.post("/v1/fleets", response_model=FleetPlan, tags=["api"], responses=responses(409, *SYNC_STATUSES),
              summary="Several models, each with its workload, SLO and rate, planned together on one budget",
              description="One CP-SAT model assigns GPU types and counts to every model (a fleet.yaml as JSON). 200 "
              "with a FleetPlan: one Plan per model, the totals, and the naive split (each model alone on a share "
              "of the budget) it is compared with; status optimal, feasible, timeout or infeasible (no plans).")
    async def fleets(request: Request) -> Response:
        return await service.run_sync(request, "fleet")

    @app.post("/v1/length-routing", response_model=LengthRoutedPlan, tags=["api"],
              responses=responses(409, *SYNC_STATUSES),
              summary="The cheapest plan for a rate, with short and long prompts on pools of their own when cheaper",
              description="solve --route-by-length: no split and splits at the p50/p75/p90 prompt length, each one "
              "CP-SAT model over its length classes on the shared budget; the cheapest proven plan, its threshold, "
              "the pools of each class and the saving against no split. Status optimal means optimal over the "
              "thresholds tried.")
    async def length_routing(request: Request) -> Response:
        return await service.run_sync(request, "length-routing")

    @app.post("/v1/sweeps", response_model=Job, status_code=202, tags=["jobs"],
              responses=responses(408, 413, 422, 500, 503),
              summary="Start a sweep (a sweep.yaml as JSON) as a job; poll GET /v1/jobs/{id}",
              description="Models are catalog names, workloads presets or inline mappings, SLOs inline; no file "
              "is read. At most max_sweep_cells cells. The result is the SweepResult without server paths.")
    async def sweeps(request: Request) -> Response:
        return await service.submit(request, "sweep", progress=_sweep_progress)

    @app.post("/v1/emit", response_model=Job, status_code=202, tags=["jobs"],
              responses=responses(408, 413, 422, 500, 503),
              summary="Render a plan's deployment files as a job; its result is an EmitResult (path -> file)")
    async def emit(request: Request) -> Response:
        return await service.submit(request, "emit")

    @app.get("/v1/jobs", response_model=JobList, tags=["jobs"], responses=responses(500))
    async def list_jobs() -> JobList:
        records = service.jobs.list()
        return JobList(jobs=[await service.in_thread(service.jobs.view, r) for r in records])

    def _record(job_id: str):
        record = service.jobs.get(job_id)
        if record is None:
            raise ServiceError(404, [item("not_found", ["path", "job_id"], job_id,
                                          "the id of a job listed by GET /v1/jobs")])
        return record

    @app.get("/v1/jobs/{job_id}", response_model=Job, tags=["jobs"], responses=responses(404, 500),
             summary="A job's status, progress and (when succeeded) result")
    async def get_job(job_id: str) -> Job:
        return await service.in_thread(service.jobs.view, _record(job_id))

    @app.delete("/v1/jobs/{job_id}", response_model=Job, tags=["jobs"], responses=responses(404, 500),
                summary="Cancel a job (its worker process is stopped); a finished job is returned as it is")
    async def cancel_job(job_id: str) -> Job:
        record = _record(job_id)
        service.jobs.cancel(record)
        return await service.in_thread(service.jobs.view, record)

    @app.get("/v1/catalog/gpus", response_model=list[GpuSpec], tags=["catalog"])
    async def catalog_gpus() -> list[GpuSpec]:
        return service.catalog["gpus"]

    @app.get("/v1/catalog/nodes", response_model=list[NodeType], tags=["catalog"])
    async def catalog_nodes() -> list[NodeType]:
        return service.catalog["nodes"]

    @app.get("/v1/catalog/models", response_model=list[ModelSpec], tags=["catalog"])
    async def catalog_models() -> list[ModelSpec]:
        return service.catalog["models"]

    app.openapi = _openapi(app, {"/v1/solve": SolveRequest, "/v1/estimate": EstimateRequest,  # type: ignore[method-assign]
                                 "/v1/simulate": SimulateRequest, "/v1/fleets": FleetRequest,
                                 "/v1/length-routing": LengthRoutingRequest, "/v1/sweeps": SweepSpec,
                                 "/v1/emit": EmitRequest})
    app.state.service = service
    return app


__all__ = ["ErrorBody", "ServiceSettings", "create_app", "default_max_workers", "from_validation_error"]
