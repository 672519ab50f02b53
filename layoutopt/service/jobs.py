"""The work behind ``/v1/solve``, ``/v1/estimate`` and ``/v1/simulate``, run in worker processes.

Requests become API arguments in the server (``*_kwargs``, cheap, so bad input is answered at
once); the API call runs in a worker process (``run_job``), which returns plain data: exceptions
with custom constructors such as ``InputError`` do not survive pickling, so they travel as tagged
dictionaries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from layoutopt.errors import InfeasibleError, InputError
from layoutopt.service.schemas import EstimateRequest, SimulateRequest, SolveRequest, WorkloadInput
from layoutopt.workloads.workload import Workload

JobStatus = Literal["ok", "input_error", "infeasible", "error"]
JobResult = tuple[JobStatus, Any]
ApiFunction = Callable[..., BaseModel]


def default_solve(**kwargs: Any) -> BaseModel:
    from layoutopt.optimizer.solve import solve

    return solve(**kwargs)


def default_estimate(**kwargs: Any) -> BaseModel:
    from layoutopt.perf_model.estimate import estimate

    return estimate(**kwargs)


def default_simulate(**kwargs: Any) -> BaseModel:
    from layoutopt.simulator.run import simulate

    return simulate(**kwargs)


# Imported once by the fork server, so that every worker starts with them loaded.
HEAVY_MODULES = ("layoutopt.optimizer.solve", "layoutopt.perf_model.estimate", "layoutopt.simulator.run")


def warm_up() -> None:
    """Import the solver, performance model and simulator so a worker's first request is not slow."""
    import importlib

    for name in HEAVY_MODULES:
        importlib.import_module(name)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def input_error_payload(error: InputError) -> dict[str, Any]:
    return {"field": error.field, "value": _jsonable(error.value), "allowed": error.allowed, "hint": error.hint,
            "message": str(error)}


def run_job(function: ApiFunction, kwargs: dict[str, Any]) -> JobResult:
    """Call ``function(**kwargs)``; returns ("ok", result as JSON data) or a tagged failure."""
    try:
        result = function(**kwargs)
    except InputError as error:
        return "input_error", input_error_payload(error)
    except InfeasibleError as error:
        return "infeasible", {"message": str(error), "reasons": list(error.reasons)}
    except Exception as error:  # noqa: BLE001 - reported to the client as a 500, the worker lives on
        return "error", f"{type(error).__name__}: {error}"
    return "ok", result.model_dump(mode="json")


def resolve_workload(value: WorkloadInput) -> Workload | None:
    """A preset name or a ``workload.yaml``-shaped mapping as a Workload; no file is read."""
    from layoutopt.workloads.loaders import workload_from_dict
    from layoutopt.workloads.presets import preset_workload

    if value is None:
        return None
    if isinstance(value, str):
        return preset_workload(value)
    if "trace" in value:
        raise InputError("workload.trace", value["trace"], "trace_pairs given inline: the service reads no files")
    return workload_from_dict(value, field="workload")


def solve_kwargs(request: SolveRequest) -> dict[str, Any]:
    """Arguments of ``solve`` for ``request``; raises InputError for a bad budget or workload."""
    from layoutopt.hardware_catalog.budget import parse_budget

    parse_budget(request.budget)  # answer a bad budget at once instead of after the queue
    kwargs = request.model_dump(exclude={"workload", "slo", "model"})
    return {**kwargs, "model": request.model, "slo": request.slo, "workload": resolve_workload(request.workload)}


def estimate_kwargs(request: EstimateRequest) -> dict[str, Any]:
    """Arguments of ``estimate`` for ``request`` (``rate_rps`` is the API's ``rate``)."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    get_gpu(request.gpu)
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    kwargs["rate"] = kwargs.pop("rate_rps")
    kwargs["workload"] = resolve_workload(request.workload)
    return kwargs


def simulate_kwargs(request: SimulateRequest) -> dict[str, Any]:
    """Arguments of ``simulate`` for ``request``."""
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    kwargs["workload"] = resolve_workload(request.workload)
    return kwargs
