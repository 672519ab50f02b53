"""Request bodies of the HTTP service: the arguments of ``solve``, ``estimate`` and ``simulate``.

The fields mirror the Python API's arguments (same names, units in names), with three
differences a network service needs: a model is a catalog name or an inline ``ModelSpec`` (never a
server path), a workload is a preset name or an inline mapping in the ``workload.yaml`` shape
(without ``trace`` files; ``trace_pairs`` inline are fine), and run times are capped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from layoutopt.errors import unknown_name_error
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Objective, Plan
from layoutopt.plan import Layout
from layoutopt.workloads.slo import SLO

MAX_TIME_LIMIT_S = 60.0
MAX_TOP_K = 10
MAX_INSTANCES = 10_000
MAX_SIMULATED_REQUESTS = 200_000
MAX_SIMULATED_S = 3600.0
Engine = Literal["vllm", "sglang", "trtllm"]

WorkloadInput = str | dict[str, Any] | None
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

    model: str | ModelSpec = Field(description="catalog name or HuggingFace id of a built-in model, or a ModelSpec")
    budget: str = Field(description="e.g. 32xH100, 16xH100+16xH200, $400/h", examples=["8xH100"])
    slo: SLO | None = Field(default=None, description="default: p90 TTFT <= 1000 ms, p90 TPOT <= 30 ms, 0.9")
    workload: WorkloadInput = Field(default=None, description=WORKLOAD_DESCRIPTION)
    isl: int | None = Field(default=None, ge=1, description="fixed input tokens per request (with osl)")
    osl: int | None = Field(default=None, ge=1, description="fixed output tokens per request (with isl)")
    rate_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="request rate to serve")
    objective: Objective = "goodput-per-dollar"
    mode: Literal["auto", "colocated", "disaggregated"] = "auto"
    engine: Engine = "vllm"
    precision: Literal["auto", "bf16", "fp8", "fp4"] = "auto"
    headroom: float = Field(default=0.7, gt=0, le=1, description="utilization ceiling per instance")
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

    model: str | ModelSpec
    gpu: str = Field(examples=["H100"])
    engine: Engine = "vllm"
    workload: WorkloadInput = Field(default=None, description=WORKLOAD_DESCRIPTION)
    isl: int | None = Field(default=None, ge=1)
    osl: int | None = Field(default=None, ge=1)
    layout: Layout | None = None
    instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    prefill_layout: Layout | None = None
    prefill_instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    decode_layout: Layout | None = None
    decode_instances: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    concurrency: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="requests in flight")
    rate_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="Poisson arrival rate")
    max_batch_size: int | None = Field(default=None, ge=1, description="decode sequences per instance cap")
    allow_cross_domain: bool = False

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
    rate_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    num_requests: int | None = Field(default=None, ge=1, le=MAX_SIMULATED_REQUESTS)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_SIMULATED_S)
    seed: int = 0


class Health(_Request):
    status: Literal["ok"] = "ok"
    version: str
    jobs_running: int = Field(description="solve, estimate and simulate requests in progress or queued")
    workers: int


__all__ = ["MAX_TIME_LIMIT_S", "EstimateRequest", "Health", "SimulateRequest", "SolveRequest"]
