"""``solve()``: the public entry point — inputs in, a typed ``Plan`` out (infeasible included).

Defaults, for the command people already write (``layoutopt solve --budget 32xH100 --slo slo.yaml``):
the model defaults to ``DEFAULT_MODEL``, the workload to ``presets.default_workload()`` (chat),
the SLO to ``DEFAULT_SLO`` (the interactive-chat targets of ``examples/slo.yaml``); every default
taken is listed in ``Plan.defaults_used``.
"""

from __future__ import annotations

import time
from pathlib import Path

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import HardwareCatalog, load_catalog
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.plan import Objective, Plan
from layoutopt.optimizer.plan_builder import build_plan, infeasible_plan
from layoutopt.optimizer.scaling import to_integer_table
from layoutopt.optimizer.search import search
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

DEFAULT_MODEL = "qwen3-32b"
DEFAULT_SLO = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}, attainment=0.9)
OBJECTIVES: tuple[Objective, ...] = ("goodput-per-dollar", "max-goodput", "min-cost")
MODES = ("auto", "colocated", "disaggregated")
PRECISION_CHOICES = ("auto", "bf16", "fp8", "fp4")


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InputError(field, value, f"one of {', '.join(allowed)}")
    return value


def _resolve_model(model: str | ModelSpec | None, defaults: list[str]) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    from layoutopt.model_catalog.catalog import get_model

    if model is None:
        defaults.append(f"model: {DEFAULT_MODEL}")
        model = DEFAULT_MODEL
    return get_model(model)


def _resolve_slo(slo: SLO | str | Path | None, defaults: list[str]) -> SLO:
    if isinstance(slo, SLO):
        return slo
    if slo is None:
        defaults.append("slo: TTFT p90 <= 1000 ms, TPOT p90 <= 30 ms, attainment 0.9 (examples/slo.yaml)")
        return DEFAULT_SLO
    from layoutopt.workloads.loaders import load_slo

    return load_slo(slo)


def _resolve_workload(workload: Workload | str | Path | None, isl: int | None, osl: int | None,
                      rate_rps: float | None, defaults: list[str]) -> Workload:
    from layoutopt.workloads.presets import default_workload, workload_from_lengths

    if (isl is None) != (osl is None):
        raise InputError("--isl/--osl", isl if osl is None else osl, "give both --isl and --osl, or neither")
    if isl is not None and workload is not None:
        raise InputError("--workload", workload, "give either a workload file or --isl/--osl, not both")
    if isl is not None:
        if isl < 1 or osl < 1:
            raise InputError("--isl/--osl", (isl, osl), "token counts >= 1")
        resolved = workload_from_lengths(isl, osl)
    elif isinstance(workload, Workload):
        resolved = workload
    elif workload is None:
        resolved = default_workload()
        defaults.append(f"workload: {resolved.name} preset (mean {resolved.mean_input_tokens:.0f} in / "
                        f"{resolved.mean_output_tokens:.0f} out tokens)")
    else:
        from layoutopt.workloads.loaders import load_workload

        resolved = load_workload(workload)
    if rate_rps is not None:
        if not rate_rps > 0:
            raise InputError("--rate", rate_rps, "a request rate > 0 req/s")
        resolved = resolved.model_copy(update={"arrival_rate_rps": float(rate_rps)})
    return resolved


def _budget_gpus(budget: Budget, catalog: HardwareCatalog):
    if budget.gpu_counts:
        return [catalog.gpu(name) for name in budget.gpu_counts]
    return [g for g in catalog.gpus if g.price is not None]


def solve(model: str | ModelSpec | None, budget: str | Budget, slo: SLO | str | Path | None = None,
          workload: Workload | str | Path | None = None, *, isl: int | None = None, osl: int | None = None,
          rate_rps: float | None = None, objective: str = "goodput-per-dollar", mode: str = "auto",
          engine: str = "vllm", precision: str = "auto", headroom: float = 0.7, top_k: int = 0,
          time_limit_s: float = 10.0, gpus_path: str | Path | None = None,
          prices_path: str | Path | None = None) -> Plan:
    """The serving plan that optimizes ``objective`` for ``model`` within ``budget`` under ``slo``.

    ``budget`` is a string such as '32xH100', '16xH100+16xH200' or '$400/h' (or a parsed Budget);
    ``rate_rps`` (or the workload's arrival rate) is the traffic the plan must serve. Returns a
    Plan whose ``status`` is optimal, feasible, timeout (best plan so far, with its gap) or
    infeasible (with reasons and suggestions); raises InputError for invalid input.
    """
    started = time.perf_counter()
    _choice("--objective", objective, OBJECTIVES)
    _choice("--mode", mode, MODES)
    _choice("--precision", precision, PRECISION_CHOICES)
    if not 0 < headroom <= 1:
        raise InputError("--headroom", headroom, "a utilization fraction in (0, 1]")
    if top_k < 0:
        raise InputError("--top-k", top_k, "an integer >= 0")
    if not time_limit_s > 0:
        raise InputError("--time-limit", time_limit_s, "seconds > 0")
    defaults: list[str] = []
    spec = _resolve_model(model, defaults)
    catalog = load_catalog(gpus_path=gpus_path, prices_path=prices_path)
    parsed = budget if isinstance(budget, Budget) else parse_budget(budget, catalog)
    resolved_slo = _resolve_slo(slo, defaults)
    resolved_workload = _resolve_workload(workload, isl, osl, rate_rps, defaults)
    target = resolved_workload.arrival_rate_rps
    if objective == "min-cost" and target is None:
        raise InputError("--rate", None, "min-cost needs the rate to serve: give --rate or a workload arrival rate")
    gpus = _budget_gpus(parsed, catalog)

    def table_for(gpu_list, gpu_limits: dict[str, int] | None = None) -> CandidateTable:
        return build_candidate_table(
            spec, gpu_list, resolved_workload, resolved_slo,
            gpu_limits=dict(parsed.gpu_counts) if gpu_limits is None else gpu_limits,
            max_usd_per_hour=parsed.max_usd_per_hour, min_rate_rps=target, mode=mode, engine=engine,
            precision=precision, headroom=headroom)

    table = table_for(gpus)
    remaining_s = max(0.1, time_limit_s - (time.perf_counter() - started))
    found = search(to_integer_table(table), objective, remaining_s, top_k)
    context = dict(model=spec, table=table, slo=resolved_slo, workload=resolved_workload, objective=objective,
                   engine=engine, headroom=headroom, budget=parsed, defaults_used=defaults,
                   time_limit_s=time_limit_s)
    if not found.best.has_plan:
        return infeasible_plan(found.best, gpus=gpus, other_gpus=list(catalog.gpus), table_for=table_for,
                               precision=precision, **context)
    return build_plan(found, **context)
