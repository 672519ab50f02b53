"""The fleet file: several models, each with its workload, SLO and rate (or weight), one budget.

    budget: 64xH100+32xH200          # or --budget / --cluster on the command line
    objective: min-cost               # or goodput-per-dollar / max-goodput with weights
    models:
      - {model: llama-3.1-70b, workload: {preset: chat}, rate_rps: 20,
         slo: {ttft_ms: {p90: 1000}, tpot_ms: {p90: 40}, attainment: 0.9}}
      - {model: qwen3-32b, workload: {preset: rag}, rate_rps: 10,
         slo: {ttft_ms: {p90: 2000}, tpot_ms: {p90: 50}, attainment: 0.9}}

``workload`` and ``slo`` take what ``workload.yaml`` and ``slo.yaml`` take; ``weight`` (default 1)
scales a model's goodput in the max-goodput and goodput-per-dollar objectives.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.plan import Objective
from layoutopt.workloads.loaders import read_yaml, slo_from_dict, workload_from_dict
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

MAX_FLEET_MODELS = 16
_FLEET_KEYS = ("budget", "objective", "models")
_MEMBER_KEYS = ("model", "workload", "slo", "rate_rps", "weight")
OBJECTIVES: tuple[str, ...] = ("goodput-per-dollar", "max-goodput", "min-cost")


class FleetMember(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    workload: Workload
    slo: SLO
    rate_rps: float | None = Field(default=None, gt=0, description="traffic the plan must serve (req/s)")
    weight: float = Field(default=1.0, gt=0, description="value of one req/s of this model in the objective")


class FleetSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: str | None = None
    objective: Objective = "min-cost"
    models: tuple[FleetMember, ...] = Field(min_length=1, max_length=MAX_FLEET_MODELS)


def _finite_positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(field, value, "a finite number > 0")
    return float(value)


def fleet_from_dict(data: Any, base_dir: str | Path | None = None, field: str = "fleet") -> FleetSpec:
    """A ``FleetSpec`` from the mapping of a fleet file (errors name the field, e.g. fleet.models[1].slo)."""
    if not isinstance(data, dict):
        raise InputError(field, type(data).__name__, "a mapping with budget, objective and models")
    unknown = sorted(set(data) - set(_FLEET_KEYS))
    if unknown:
        raise InputError(f"{field}.{unknown[0]}", data[unknown[0]], f"one of the keys {', '.join(_FLEET_KEYS)}")
    objective = data.get("objective", "min-cost")
    if objective not in OBJECTIVES:
        raise InputError(f"{field}.objective", objective, f"one of {', '.join(OBJECTIVES)}")
    budget = data.get("budget")
    if budget is not None and not isinstance(budget, str):
        raise InputError(f"{field}.budget", budget, "a budget string such as 64xH100+32xH200 or '$400/h'")
    members = data.get("models")
    if not isinstance(members, list) or not 1 <= len(members) <= MAX_FLEET_MODELS:
        raise InputError(f"{field}.models", members, f"a list of 1 to {MAX_FLEET_MODELS} models")
    parsed = []
    for i, item in enumerate(members):
        where = f"{field}.models[{i}]"
        if not isinstance(item, dict):
            raise InputError(where, item, "a mapping with model, workload, slo and rate_rps")
        unknown = sorted(set(item) - set(_MEMBER_KEYS))
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", item[unknown[0]], f"one of the keys {', '.join(_MEMBER_KEYS)}")
        if not isinstance(item.get("model"), str):
            raise InputError(f"{where}.model", item.get("model"), "a model name from the catalog")
        if "slo" not in item:
            raise InputError(f"{where}.slo", None, "the model's SLO, e.g. {ttft_ms: {p90: 1000}, tpot_ms: {p90: 30}}")
        rate = item.get("rate_rps")
        rate = None if rate is None else _finite_positive(rate, f"{where}.rate_rps")
        if objective == "min-cost" and rate is None:
            raise InputError(f"{where}.rate_rps", None, "the rate to serve (req/s): min-cost needs one per model")
        workload = workload_from_dict(item.get("workload", {"preset": "chat"}), base_dir, f"{where}.workload")
        if rate is not None:
            workload = workload.model_copy(update={"arrival_rate_rps": rate})
        parsed.append(FleetMember(model=item["model"], workload=workload, slo=slo_from_dict(item["slo"], f"{where}.slo"),
                                  rate_rps=rate, weight=_finite_positive(item.get("weight", 1.0), f"{where}.weight")))
    return FleetSpec(budget=budget, objective=objective, models=tuple(parsed))


def check_fleet_contexts(spec: FleetSpec, field: str = "fleet") -> None:
    """Refuse a member whose requests do not fit its model's context (as ``solve`` does for one model)."""
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.workloads.workload import check_fits_context

    for index, member in enumerate(spec.models):
        model = get_model(member.model)
        check_fits_context(member.workload, model.max_context_tokens, model.name, f"{field}.models[{index}].workload")


def load_fleet(path: str | Path) -> FleetSpec:
    """Read a fleet YAML file (see the module docstring)."""
    return fleet_from_dict(read_yaml(path, "--fleet"), Path(path).parent, "fleet")
