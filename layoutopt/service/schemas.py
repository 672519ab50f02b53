"""Request and answer bodies of the HTTP service: the arguments of the API functions, and jobs.

The fields mirror the Python API's arguments (same names, units in names), with the differences
a network service needs: a model is a catalog name or an inline ``ModelSpec`` (never a server
path), a plan names catalog models and GPUs, a workload is a preset name or an inline mapping in
the ``workload.yaml`` shape (without ``trace`` files; ``trace_pairs`` inline are fine), strings,
counts and run times are capped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from layoutopt.bounds import MIN_RATE_RPS
from layoutopt.calibrate.profile_file import ProfileFile
from layoutopt.errors import unknown_name_error
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.fleet_spec import MAX_FLEET_MODELS
from layoutopt.plan import Objective, Plan
from layoutopt.plan import Layout
from layoutopt.service.problems import ErrorItem
from layoutopt.workloads.slo import SLO

MAX_TIME_LIMIT_S = 60.0
MAX_TOP_K = 10
MAX_INSTANCES = 10_000
MAX_SIMULATED_REQUESTS = 200_000
MAX_SIMULATED_S = 3600.0
MAX_NAME_CHARS = 200
MAX_TOKENS = 10_000_000
MAX_BATCH = 65_536
MAX_CONCURRENCY = 1_000_000.0
MAX_RATE_RPS = 1_000_000.0
MAX_WEIGHT = 1_000_000.0


def _engine_ref(value: str) -> str:
    """'vllm', 'sglang', 'trtllm' or a release with generated engine data ('vllm==0.13.0')."""
    from layoutopt.engines import parse_engine_ref
    from layoutopt.errors import InputError

    try:
        parse_engine_ref(value, field="engine")
    except InputError as error:
        raise ValueError(f"unknown engine {value!r}; {error.allowed}" + (f" ({error.hint})" if error.hint else ""))
    return value


# A release is checked against the engine data the package ships (the CLI's --engine engine==version).
Engine = Annotated[str, Field(max_length=40, pattern=r"^[a-z]+(==[0-9][0-9A-Za-z.+-]*)?$",
                              examples=["vllm", "vllm==0.13.0", "sglang==0.5.23", "trtllm"]),
                   AfterValidator(_engine_ref)]

PROFILE_DESCRIPTION = ("a profile written by layoutopt calibrate, by content (the YAML file as JSON), replacing the "
                       "built-in constants of its engine on GPUs of its generation; never a server path")
WorkloadInput = Annotated[str, Field(max_length=MAX_NAME_CHARS)] | dict[str, Any] | None
CatalogName = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
# Options the solving endpoints share (one declaration each; the defaults stay at the fields).
PrecisionChoice = Literal["auto", "bf16", "fp8", "fp4"]
Headroom = Annotated[float, Field(gt=0, le=1, description="utilization ceiling per instance")]
Tolerance = Annotated[float, Field(ge=0, le=0.5, description="status optimal = proven within this fraction of the "
                                   "best")]
WORKLOAD_DESCRIPTION = ("a preset name (chat, rag, agent, summarization, code) or a mapping in the workload.yaml "
                        "shape, e.g. {preset: chat, arrival_rate_rps: 5} or {input_tokens: {lognormal: {mean: 2000, "
                        "p90: 4000}}, output_tokens: 256}; trace files are not read, give trace_pairs inline")


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _catalog_model(value: str | ModelSpec) -> str | ModelSpec:
    """A model name must name a built-in model: the service never reads paths it is sent."""
    from layoutopt.model_catalog.catalog import catalog_names, is_catalog_model

    if isinstance(value, str) and not is_catalog_model(value):
        error = unknown_name_error("model", value, catalog_names())
        raise ValueError(f"unknown model {value!r}; {error.allowed}" + (f" ({error.hint})" if error.hint else ""))
    return value


class SolveRequest(_Request):
    """Body of ``POST /v1/solve``: the arguments of :func:`layoutopt.api.solve`."""

    model: CatalogName | ModelSpec = Field(description="catalog name or HuggingFace id of a built-in model, or a "
                                           "ModelSpec")
    budget: str = Field(max_length=MAX_NAME_CHARS, description="e.g. 32xH100, 16xH100+16xH200, $400/h",
                        examples=["8xH100"])
    slo: SLO | None = Field(default=None, description="default: p90 TTFT <= 1000 ms, p90 TPOT <= 30 ms, 0.9")
    workload: WorkloadInput = Field(default=None, description=WORKLOAD_DESCRIPTION)
    isl: int | None = Field(default=None, ge=1, le=MAX_TOKENS, description="fixed input tokens per request (with osl)")
    osl: int | None = Field(default=None, ge=1, le=MAX_TOKENS, description="fixed output tokens per request (with isl)")
    rate_rps: float | None = Field(default=None, ge=MIN_RATE_RPS, le=MAX_RATE_RPS, allow_inf_nan=False,
                                   description="request rate to serve")
    objective: Objective = "goodput-per-dollar"
    mode: Literal["auto", "colocated", "disaggregated"] = "auto"
    engine: Engine = "vllm"
    profile: ProfileFile | None = Field(default=None, description=PROFILE_DESCRIPTION)
    precision: PrecisionChoice = "auto"
    headroom: Headroom = 0.7
    top_k: int = Field(default=0, ge=0, le=MAX_TOP_K, description="next-best distinct plans to return")
    time_limit_s: float = Field(default=10.0, gt=0, le=MAX_TIME_LIMIT_S,
                                description=f"solver wall-time limit, at most {MAX_TIME_LIMIT_S:g} s")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | ModelSpec) -> str | ModelSpec:
        return _catalog_model(value)


class EstimateRequest(_Request):
    """Body of ``POST /v1/estimate``: the arguments of :func:`layoutopt.api.estimate`.

    ``rate_rps`` is the API's ``rate``. Give ``layout`` (colocated) or both ``prefill_layout`` and
    ``decode_layout`` (disaggregated); ``concurrency`` (closed loop) or ``rate_rps`` (open loop).
    """

    model: CatalogName | ModelSpec
    gpu: str = Field(max_length=MAX_NAME_CHARS, examples=["H100"])
    engine: Engine = "vllm"
    profile: ProfileFile | None = Field(default=None, description=PROFILE_DESCRIPTION)
    workload: WorkloadInput = Field(default=None, description=WORKLOAD_DESCRIPTION)
    isl: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    osl: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    layout: Layout | None = None
    instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    prefill_layout: Layout | None = None
    prefill_instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    decode_layout: Layout | None = None
    decode_instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    concurrency: float | None = Field(default=None, gt=0, le=MAX_CONCURRENCY, allow_inf_nan=False,
                                      description="requests in flight")
    rate_rps: float | None = Field(default=None, ge=MIN_RATE_RPS, le=MAX_RATE_RPS, allow_inf_nan=False,
                                   description="Poisson arrival rate")
    max_batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH, description="decode sequences per instance cap")
    allow_cross_domain: bool = Field(default=True, description="spread a pipeline stage larger than the GPU's local domain over whole domains (collectives over the NICs), as solve does; false refuses it")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | ModelSpec) -> str | ModelSpec:
        return _catalog_model(value)


class SimulateRequest(_Request):
    """Body of ``POST /v1/simulate``: the arguments of :func:`layoutopt.api.simulate`."""

    plan: Plan = Field(description="a plan as /v1/solve returns it")
    workload: WorkloadInput = Field(default=None, description="default: the workload recorded in the plan; "
                                    + WORKLOAD_DESCRIPTION)
    slo: SLO | None = Field(default=None, description="default: the SLO recorded in the plan")
    rate_rps: float | None = Field(default=None, ge=MIN_RATE_RPS, le=MAX_RATE_RPS, allow_inf_nan=False)
    num_requests: int | None = Field(default=None, ge=1, le=MAX_SIMULATED_REQUESTS)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_SIMULATED_S)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)


class EmitRequest(_Request):
    """Body of ``POST /v1/emit``: a plan and the options of :func:`layoutopt.api.emit`."""

    plan: Plan = Field(description="a plan as /v1/solve returns it, with pools")
    engine: Engine = "vllm"
    model_id: str | None = Field(default=None, max_length=MAX_NAME_CHARS, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
                                 description="the model id the launch lines serve (default: the catalog's HF id)")
    namespace: str = Field(default="default", max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                           description="Kubernetes namespace of the manifests")
    image: str | None = Field(default=None, max_length=MAX_NAME_CHARS, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$",
                              description="container image of the manifests (default: the engine's)")
    plots: bool = Field(default=True, description="also the plan's plots (PNG and SVG)")


class FleetMemberRequest(_Request):
    """One model of a fleet: what a ``models`` entry of ``fleet.yaml`` holds."""

    model: CatalogName = Field(description="catalog name or HuggingFace id of a built-in model")
    workload: WorkloadInput = Field(default=None, description="default: the chat preset; " + WORKLOAD_DESCRIPTION)
    slo: SLO = Field(description="the model's SLO, e.g. {ttft_ms: {p90: 1000}, tpot_ms: {p90: 30}}")
    rate_rps: float | None = Field(default=None, ge=MIN_RATE_RPS, le=MAX_RATE_RPS, allow_inf_nan=False,
                                   description="traffic the plan must serve (required with min-cost)")
    weight: float = Field(default=1.0, gt=0, le=MAX_WEIGHT, allow_inf_nan=False,
                          description="value of one req/s of this model in max-goodput and goodput-per-dollar")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        return _catalog_model(value)


class FleetRequest(_Request):
    """Body of ``POST /v1/fleets``: a ``fleet.yaml`` as JSON and the options of :func:`layoutopt.api.solve_fleet`."""

    budget: str = Field(max_length=MAX_NAME_CHARS, description="shared by every model, e.g. 64xH100+32xH200, $400/h",
                        examples=["16xH100+8xH200"])
    objective: Objective = "min-cost"
    models: list[FleetMemberRequest] = Field(min_length=1, max_length=MAX_FLEET_MODELS)
    engine: Engine = "vllm"
    precision: PrecisionChoice = "auto"
    headroom: Headroom = 0.7
    time_limit_s: float = Field(default=10.0, gt=0, le=MAX_TIME_LIMIT_S,
                                description=f"solver time limit (CP-SAT deterministic time), at most "
                                f"{MAX_TIME_LIMIT_S:g} s; the naive split solved for comparison gets as much again")
    tolerance_fraction: Tolerance = 0.02


class LengthRoutingRequest(_Request):
    """Body of ``POST /v1/length-routing``: the arguments of :func:`layoutopt.api.solve_length_routed`.

    The cheapest plan for ``rate_rps``, with short and long prompts on pools of their own when that
    is cheaper (``solve --route-by-length``).
    """

    model: CatalogName = Field(description="catalog name or HuggingFace id of a built-in model")
    budget: str = Field(max_length=MAX_NAME_CHARS, description="e.g. 32xH100+32xH200, $400/h",
                        examples=["32xH100+32xH200"])
    slo: SLO | None = Field(default=None, description="default: p90 TTFT <= 1000 ms, p90 TPOT <= 30 ms, 0.9")
    workload: WorkloadInput = Field(default=None, description="default: the chat preset; a spread of prompt "
                                    "lengths to split; " + WORKLOAD_DESCRIPTION)
    rate_rps: float | None = Field(default=None, ge=MIN_RATE_RPS, le=MAX_RATE_RPS, allow_inf_nan=False,
                                   description="request rate to serve (default: the workload's arrival rate)")
    mode: Literal["auto", "colocated", "disaggregated"] = "auto"
    engine: Engine = "vllm"
    precision: PrecisionChoice = "auto"
    headroom: Headroom = 0.7
    time_limit_s: float = Field(default=10.0, gt=0, le=MAX_TIME_LIMIT_S,
                                description=f"CP-SAT deterministic time shared by the thresholds' models, at most "
                                f"{MAX_TIME_LIMIT_S:g} s; candidate evaluation (per class and threshold) comes on top")
    tolerance_fraction: Tolerance = 0.02

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        return _catalog_model(value)


class Health(_Request):
    status: Literal["ok"] = "ok"
    version: str
    jobs_running: int = Field(description="synchronous requests (solve, estimate, simulate) in progress or queued")
    async_jobs: int = Field(default=0, description="sweep and emit jobs queued or running")
    workers: int


JobKind = Literal["sweep", "emit"]
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobProgress(_Request):
    done: int = Field(ge=0, description="units finished: sweep cells, or 1 when an emit is done")
    total: int = Field(ge=1, description="units in the job: the sweep's cells, or 1")
    fraction: float = Field(ge=0, le=1)


class EmittedFile(_Request):
    encoding: Literal["utf-8", "base64"] = Field(description="utf-8 for text; base64 for binary files (PNG plots)")
    content: str
    size_bytes: int = Field(ge=0)


class EmitResult(_Request):
    """The files ``layoutopt emit`` would write, as relative path -> file (nothing is kept on the server)."""

    num_files: int
    total_bytes: int
    files: dict[str, EmittedFile]


class Job(_Request):
    """An asynchronous job: ``GET /v1/jobs/{id}`` polls it, ``DELETE /v1/jobs/{id}`` cancels it."""

    id: str
    kind: JobKind
    status: JobState
    progress: JobProgress
    created_at: str = Field(description="ISO 8601, UTC")
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_s: float = Field(ge=0, description="running time so far (or in all, once finished)")
    deadline_s: float = Field(description="the job is stopped and failed past this running time")
    result: dict[str, Any] | None = Field(default=None, description="when succeeded: for a sweep the SweepResult "
                                          "(rows, summary, counts; no server paths), for an emit an EmitResult")
    error: list[ErrorItem] | None = Field(default=None, description="when failed: what went wrong, as in 4xx bodies")
    notes: list[str] = Field(default_factory=list, description="e.g. numbers replaced by null and why")


class JobList(_Request):
    jobs: list[Job]


__all__ = ["MAX_TIME_LIMIT_S", "EmitRequest", "EmitResult", "EstimateRequest", "FleetMemberRequest", "FleetRequest",
           "Health", "Job", "JobList", "LengthRoutingRequest",
           "SimulateRequest", "SolveRequest"]
