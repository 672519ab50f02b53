"""Validated request bodies -> keyword arguments of the API functions, with the service's rules.

The service reads no file it is sent the name of: models and GPUs are catalog names, a workload
is a preset or an inline mapping (no ``trace``), an SLO is inline, a sweep names no catalog
override files. Everything here runs in a parsing process (``check``) and in the worker (``prepare``), so a bad
budget or workload is answered at once instead of after the queue; failures are ``InputError``
or ``ServiceError`` 422. ``prepare`` is the whole way from body bytes to arguments.
"""

from __future__ import annotations

import tempfile
from typing import Any

from layoutopt.errors import InputError, unknown_name_error
from layoutopt.plan import Plan
from layoutopt.service.bodies import check_tree, load_json, parse_body, precheck
from layoutopt.service.problems import ServiceError, from_input_error, input_error_payload, item
from layoutopt.service.schemas import (
    MAX_INSTANCES,
    MAX_TIME_LIMIT_S,
    EmitRequest,
    EstimateRequest,
    FleetRequest,
    LengthRoutingRequest,
    SimulateRequest,
    SolveRequest,
    WorkloadInput,
)
from layoutopt.service.settings import ServiceSettings
from layoutopt.workloads.workload import Workload


def _find_key(value: Any, key: str, loc: tuple = ()) -> tuple | None:
    """The loc of the first mapping key ``key`` anywhere in ``value``, or None."""
    if isinstance(value, dict):
        if key in value:
            return (*loc, key)
        for name, child in value.items():
            found = _find_key(child, key, (*loc, name))
            if found:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = _find_key(child, key, (*loc, index))
            if found:
                return found
    return None


def resolve_workload(value: WorkloadInput, field: str = "workload") -> Workload | None:
    """A preset name or a ``workload.yaml``-shaped mapping as a Workload; no file is read."""
    from layoutopt.workloads.loaders import workload_from_dict
    from layoutopt.workloads.presets import preset_workload

    if value is None:
        return None
    if isinstance(value, str):
        return preset_workload(value)
    trace = _find_key(value, "trace")
    if trace is not None:
        raise InputError(".".join(map(str, (field, *trace))), "(a file name)",
                         "trace_pairs given inline: the service reads no files")
    return workload_from_dict(value, field=field)


def check_plan(plan: Plan, loc: tuple[str | int, ...] = ("body", "plan")) -> None:
    """A plan sent over HTTP names a built-in model and catalog GPUs only (never a path on the server)."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import catalog_names, is_catalog_model
    from layoutopt.plan.schema import READABLE_SCHEMA_VERSIONS

    if plan.schema_version not in READABLE_SCHEMA_VERSIONS:
        versions = ", ".join(map(str, READABLE_SCHEMA_VERSIONS))
        raise ServiceError(422, [item("input_error", [*loc, "schema_version"], plan.schema_version,
                                      f"schema_version {versions} (plans this layoutopt reads)")])
    if not is_catalog_model(plan.model):
        error = unknown_name_error("model", plan.model, catalog_names())
        raise ServiceError(422, [item("input_error", [*loc, "model"], plan.model,
                                      f"a built-in model: the service reads no model files; {error.allowed}",
                                      hint=error.hint)])
    trace = _find_key(plan.workload, "trace")
    if trace is not None:
        raise ServiceError(422, [item("input_error", [*loc, "workload", *trace], "(a file name)",
                                      "trace_pairs given inline: the service reads no files")])
    num_instances = sum(pool.instances for pool in plan.pools)
    if num_instances > MAX_INSTANCES:
        raise ServiceError(422, [item("input_error", [*loc, "pools"], num_instances,
                                      f"at most {MAX_INSTANCES} instances in all")])
    pools = [([*loc, "pools", i], pool) for i, pool in enumerate(plan.pools)]
    pools += [([*loc, "alternatives", a, "pools", i], pool) for a, alt in enumerate(plan.alternatives)
              for i, pool in enumerate(alt.pools)]
    for pool_loc, pool in pools:
        try:
            get_gpu(pool.gpu)
        except InputError as error:
            raise ServiceError(422, [item("input_error", [*pool_loc, "gpu"], pool.gpu,
                                          f"a catalog GPU; {error.allowed}", hint=error.hint)]) from None


def solve_kwargs(request: SolveRequest) -> dict[str, Any]:
    """Arguments of ``solve`` for ``request``; raises InputError for a bad budget or workload."""
    from layoutopt.hardware_catalog.budget import parse_budget

    parse_budget(request.budget)
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    if kwargs["profile"] is None:
        del kwargs["profile"]
    kwargs["workload"] = resolve_workload(request.workload)
    return kwargs


def estimate_kwargs(request: EstimateRequest) -> dict[str, Any]:
    """Arguments of ``estimate`` for ``request`` (``rate_rps`` is the API's ``rate``)."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    get_gpu(request.gpu)
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    if kwargs["profile"] is None:
        del kwargs["profile"]
    kwargs["rate"] = kwargs.pop("rate_rps")
    kwargs["workload"] = resolve_workload(request.workload)
    return kwargs


def simulate_kwargs(request: SimulateRequest) -> dict[str, Any]:
    """Arguments of ``simulate`` for ``request``, its plan checked to name catalog entries only."""
    check_plan(request.plan)
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    kwargs["workload"] = resolve_workload(request.workload)
    return kwargs


def emit_kwargs(request: EmitRequest) -> dict[str, Any]:
    """Arguments of ``jobs.default_emit`` for ``request``."""
    check_plan(request.plan)
    if not request.plan.pools or request.plan.totals is None:
        raise ServiceError(422, [item("input_error", ["body", "plan", "status"], request.plan.status,
                                      "a plan with pools (the solver found none for this one)")])
    kwargs = request.model_dump(mode="json", exclude_none=True)
    return kwargs


def fleet_kwargs(request: FleetRequest) -> dict[str, Any]:
    """Arguments of ``solve_fleet`` for ``request``: its fleet as a ``FleetSpec``, each workload resolved without files.

    The members go through ``fleet_from_dict``, the reader of ``fleet.yaml``, so the file and the
    body follow one set of rules (min-cost needs every rate; context lengths fit each model).
    """
    from layoutopt.hardware_catalog.budget import parse_budget
    from layoutopt.optimizer.fleet_spec import check_fleet_contexts, fleet_from_dict

    parse_budget(request.budget)
    members = []
    for index, member in enumerate(request.models):
        workload = {"preset": "chat"} if member.workload is None else member.workload
        if isinstance(workload, str):
            workload = {"preset": workload}
        trace = _find_key(workload, "trace")
        if trace is not None:
            raise InputError(".".join(map(str, (f"fleet.models[{index}].workload", *trace))), "(a file name)",
                             "trace_pairs given inline: the service reads no files")
        members.append({"model": member.model, "workload": workload, "slo": member.slo.model_dump(mode="json"),
                        "rate_rps": member.rate_rps, "weight": member.weight})
    spec = fleet_from_dict({"budget": request.budget, "objective": request.objective, "models": members},
                           base_dir=None, field="fleet")
    check_fleet_contexts(spec)
    options = {name: getattr(request, name) for name in ("engine", "precision", "headroom", "time_limit_s",
                                                          "tolerance_fraction")}
    return {"fleet": spec, **options}


def length_routing_kwargs(request: LengthRoutingRequest) -> dict[str, Any]:
    """Arguments of ``solve_length_routed`` for ``request``, its lengths checked against the model's context."""
    from layoutopt.hardware_catalog.budget import parse_budget
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.optimizer.solve import DEFAULT_SLO
    from layoutopt.workloads.presets import default_workload
    from layoutopt.workloads.workload import check_fits_context

    parse_budget(request.budget)
    kwargs = {name: getattr(request, name) for name in type(request).model_fields}
    kwargs["slo"] = request.slo or DEFAULT_SLO
    kwargs["workload"] = resolve_workload(request.workload) or default_workload()
    spec = get_model(request.model)
    check_fits_context(kwargs["workload"], spec.max_context_tokens, spec.name, "workload")
    if kwargs["rate_rps"] is None and kwargs["workload"].arrival_rate_rps is None:
        raise InputError("rate_rps", None, "the rate to serve (req/s), here or as the workload's arrival_rate_rps")
    return kwargs


def sweep_kwargs(data: Any, max_cells: int) -> tuple[dict[str, Any], int]:
    """A sweep body (the ``sweep.yaml`` shape) checked for the service: (spec as data, number of cells).

    Models are catalog names, workloads presets or inline mappings, SLOs inline, no catalog
    files, per-cell time limits within the service's cap, at most ``max_cells`` cells.
    """
    from layoutopt.model_catalog.catalog import catalog_names, is_catalog_model
    from layoutopt.sweep.spec import expand_cells, sweep_spec_from_dict
    from layoutopt.workloads.presets import PRESETS

    spec = sweep_spec_from_dict(data)
    for index, model in enumerate(spec.models):
        if not is_catalog_model(model):
            error = unknown_name_error("model", model, catalog_names())
            raise InputError(f"sweep.models[{index}]", model, f"a built-in model: the service reads no model files; "
                             f"{error.allowed}", error.hint)
    for index, workload in enumerate(spec.workloads):
        if isinstance(workload, str) and workload.strip().lower() not in PRESETS:
            raise InputError(f"sweep.workloads[{index}]", workload, f"a preset name ({', '.join(PRESETS)}) or an inline "
                             "mapping: the service reads no workload files")
        if isinstance(workload, dict) and _find_key(workload, "trace"):
            raise InputError(f"sweep.workloads[{index}].trace", "(a file name)", "trace_pairs given inline: the service "
                             "reads no files")
    for index, slo in enumerate(spec.slos):
        if not isinstance(slo, dict):
            raise InputError(f"sweep.slos[{index}]", slo, "an inline SLO mapping such as {ttft_ms: {p90: 1000}, "
                             "tpot_ms: {p90: 30}}: the service reads no SLO files")
    for key in ("gpus_path", "prices_path"):
        if getattr(spec.solver, key) is not None:
            raise InputError(f"sweep.solver.{key}", getattr(spec.solver, key), "null: the service reads no catalog files")
    if spec.solver.time_limit_s > MAX_TIME_LIMIT_S:
        raise InputError("sweep.solver.time_limit_s", spec.solver.time_limit_s, f"at most {MAX_TIME_LIMIT_S:g} s per cell")
    with tempfile.TemporaryDirectory(prefix="layoutopt-sweep-check-") as empty:
        cells = expand_cells(spec, empty)  # an empty folder: no relative name can reach a file
    if len(cells) > max_cells:
        raise InputError("sweep", f"{len(cells)} cells", f"at most {max_cells} cells per sweep job; split the sweep")
    return spec.model_dump(mode="json"), len(cells)




# endpoint -> (request model, its arguments); the sweep body is a SweepSpec checked by sweep_kwargs
_ENDPOINTS = {
    "solve": (SolveRequest, solve_kwargs),
    "estimate": (EstimateRequest, estimate_kwargs),
    "simulate": (SimulateRequest, simulate_kwargs),
    "emit": (EmitRequest, emit_kwargs),
    "fleet": (FleetRequest, fleet_kwargs),
    "length-routing": (LengthRoutingRequest, length_routing_kwargs),
}
# Error fields named after CLI flags or API arguments, mapped to the request field that carries them.
FIELD_ALIASES = {"rate": "rate_rps", "time_limit": "time_limit_s", "isl/osl": "isl", "concurrency/rate": "concurrency"}


def prepare(endpoint: str, raw: bytes, settings: ServiceSettings) -> tuple[dict[str, Any], int]:
    """A request body as (API keyword arguments, units of work); ServiceError 422 when it is invalid.

    Pure apart from reading the built-in catalogs: it runs in a parsing process to answer bad
    input at once, and again in the worker that does the work (the event loop never parses).
    """
    try:
        if endpoint == "sweep":
            precheck(raw, settings)
            data = load_json(raw)
            check_tree(data, settings)
            spec, num_cells = sweep_kwargs(data, settings.max_sweep_cells)
            return {"spec": spec}, num_cells
        model, to_kwargs = _ENDPOINTS[endpoint]
        return to_kwargs(parse_body(raw, model, settings)), 1
    except InputError as error:
        payload = input_error_payload(error)
        if endpoint in ("sweep", "fleet"):  # the file readers name fields from the file's top: sweep.x, fleet.x
            payload["field"] = payload["field"].removeprefix(endpoint).lstrip(".")
            payload["message"] = payload["message"].removeprefix(f"{endpoint}.")
        raise ServiceError(422, [from_input_error(payload, aliases=FIELD_ALIASES)]) from None


def check(endpoint: str, raw: bytes, settings: ServiceSettings) -> tuple[str, Any]:
    """("ok", units of work) or ("invalid", (status, error items as data)): what a parsing process returns."""
    try:
        _, units = prepare(endpoint, raw, settings)
    except ServiceError as error:
        return "invalid", (error.status_code, [i.model_dump(mode="json") for i in error.items])
    return "ok", units


__all__ = ["check", "check_plan", "emit_kwargs", "estimate_kwargs", "fleet_kwargs", "length_routing_kwargs", "prepare",
           "resolve_workload", "simulate_kwargs", "solve_kwargs", "sweep_kwargs"]
