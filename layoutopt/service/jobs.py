"""The work behind the routes, as it runs inside a worker process.

``run_job`` parses the request body again (``arguments.prepare``: the server process only
checked it, in a parsing process, and never holds its objects), calls the API function and returns
plain, picklable, JSON-safe data: exceptions with custom constructors such as ``InputError`` do
not survive pickling, so failures travel as tagged dictionaries, and non-finite numbers in a
result are replaced by null with their places listed (the routes decide what to answer).
"""

from __future__ import annotations

import base64
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from layoutopt.errors import InfeasibleError, InputError

JobStatus = Literal["ok", "invalid", "input_error", "infeasible", "error"]
JobResult = tuple[JobStatus, Any]
ApiFunction = Callable[..., Any]
MAX_NON_FINITE_LISTED = 20


def default_solve(**kwargs: Any) -> BaseModel:
    from layoutopt.calibrate.apply import solve  # the optimizer's, with profile= and error bands

    return solve(**kwargs)


def default_estimate(**kwargs: Any) -> BaseModel:
    from layoutopt.calibrate.apply import estimate  # the perf model's, with profile= and the error band

    return estimate(**kwargs)


def default_fleet(**kwargs: Any) -> BaseModel:
    from layoutopt.optimizer.fleet import solve_fleet

    return solve_fleet(**kwargs)


def default_length_routing(**kwargs: Any) -> BaseModel:
    from layoutopt.optimizer.length_routing import solve_length_routed

    return solve_length_routed(**kwargs)


def default_simulate(**kwargs: Any) -> BaseModel:
    from layoutopt.simulator.run import simulate

    return simulate(**kwargs)


def default_sweep(*, spec: dict[str, Any], out_dir: str) -> dict[str, Any]:
    """Run a sweep (validated spec, files already excluded) serially into ``out_dir``; the result without paths."""
    from layoutopt.sweep.run import sweep
    from layoutopt.sweep.spec import sweep_spec_from_dict

    result = sweep(sweep_spec_from_dict(spec), out_dir, executor="local", workers=1, plots=False, base_dir=out_dir)
    data = result.model_dump(mode="json")
    return {key: value for key, value in data.items() if key != "out_dir" and not key.endswith("_path")}


def default_emit(*, plan: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Emit a plan's deployment files into a private folder and return them as path -> content.

    Text files come as UTF-8 strings, others (plots) as base64; nothing stays on the server.
    """
    from layoutopt.api import emit
    from layoutopt.plan import Plan

    with tempfile.TemporaryDirectory(prefix="layoutopt-emit-") as scratch:
        out_dir = Path(scratch) / "deploy"
        emit(Plan.model_validate(plan), out_dir, **options)
        files: dict[str, dict[str, Any]] = {}
        for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
            data = path.read_bytes()
            try:
                entry = {"encoding": "utf-8", "content": data.decode("utf-8")}
            except UnicodeDecodeError:
                entry = {"encoding": "base64", "content": base64.b64encode(data).decode("ascii")}
            files[path.relative_to(out_dir).as_posix()] = {**entry, "size_bytes": len(data)}
    return {"num_files": len(files), "total_bytes": sum(f["size_bytes"] for f in files.values()), "files": files}


# Imported once by the fork server, so that every worker starts with them loaded.
HEAVY_MODULES = ("layoutopt.optimizer.solve", "layoutopt.optimizer.fleet", "layoutopt.optimizer.length_routing",
                 "layoutopt.perf_model.estimate", "layoutopt.simulator.run", "layoutopt.calibrate.apply",
                 "layoutopt.service.arguments", "layoutopt.sweep.run")


def worker_started() -> None:
    """In each new worker process: evaluate in the worker itself. Requests already run side by side
    in the pool's processes, and a worker stopped at a deadline must not leave evaluation workers
    of its own running (pebble's workers are not daemonic, so they could start some)."""
    from layoutopt.optimizer.evaluation import single_process

    single_process()


def warm_up() -> None:
    """Import the solver, performance model and simulator so a worker's first request is not slow."""
    import importlib

    for name in HEAVY_MODULES:
        importlib.import_module(name)


def finite_copy(value: Any, loc: tuple = (), found: list | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """``value`` with every NaN/Infinity replaced by None, and the places (loc, value) that held one."""
    found = [] if found is None else found
    if isinstance(value, float) and not math.isfinite(value):
        if len(found) < MAX_NON_FINITE_LISTED:
            found.append({"loc": list(loc), "value": str(value)})
        return None, found
    if isinstance(value, dict):
        return {k: finite_copy(v, (*loc, k), found)[0] for k, v in value.items()}, found
    if isinstance(value, (list, tuple)):
        return [finite_copy(v, (*loc, i), found)[0] for i, v in enumerate(value)], found
    return value, found


def run_job(function: ApiFunction, endpoint: str, raw: bytes, settings: Any,
            extra: dict[str, Any] | None = None) -> JobResult:
    """Parse the body ``raw`` of ``endpoint`` and call ``function(**arguments, **extra)``.

    Returns ("ok", {"data", "non_finite"}) or a tagged failure: ("invalid", (status, items)),
    ("input_error", payload), ("infeasible", payload), ("error", text).
    """
    from layoutopt.service.arguments import prepare
    from layoutopt.service.problems import ServiceError, input_error_payload

    try:
        kwargs, _ = prepare(endpoint, raw, settings)
    except ServiceError as error:
        return "invalid", (error.status_code, [item.model_dump(mode="json") for item in error.items])
    try:
        result = function(**kwargs, **(extra or {}))
    except InputError as error:
        return "input_error", input_error_payload(error)
    except InfeasibleError as error:
        return "infeasible", {"message": str(error), "reasons": list(error.reasons)}
    except Exception as error:  # noqa: BLE001 - reported to the client as a 500, the worker lives on
        return "error", f"{type(error).__name__}: {str(error)[:2000]}"
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    data, non_finite = finite_copy(data)
    return "ok", {"data": data, "non_finite": non_finite}


__all__ = ["ApiFunction", "JobResult", "default_emit", "default_estimate", "default_fleet", "default_length_routing",
           "default_simulate",
           "default_solve", "default_sweep", "finite_copy", "run_job", "warm_up"]
