"""The sweep file (``sweep.yaml``) and its expansion into cells, one solve each.

Shape (every list is one axis of the grid; the grid is their product)::

    name: h100-vs-h200                  # optional, shown in the summary
    models: [qwen3-8b, llama-3.1-70b]   # catalog names, HuggingFace ids or config.json paths
    gpus: [H100, H200]                  # GPU types, each as a budget of max_gpus_per_type GPUs ...
    max_gpus_per_type: 32
    # budgets: ["32xH100", "16xH100+16xH200", "$300/h"]   # ... or budget strings (not both)
    rates_rps: [1, 2, 5, 10, 20]        # planned request rates; null: let the solver find the highest
    workloads: [chat, workload-rag.yaml, {preset: code, prefix_cache_hit_fraction: 0.5}]
    slos: [slo.yaml, {ttft_ms: {p90: 500}, tpot_ms: {p90: 25}}]
    objectives: [min-cost, goodput-per-dollar]
    solver:                             # the same for every cell
      time_limit_s: 10
      mode: auto                        # auto | colocated | disaggregated
      engine: vllm
      precision: auto
      headroom: 0.7
      gpus_path: my-gpus.yaml           # optional catalog overrides
      prices_path: my-prices.yaml

Workloads are preset names, workload files (relative to the sweep file) or inline mappings in the
``workload.yaml`` shape; SLOs are files or inline mappings in the ``slo.yaml`` shape. Each cell's
``rate_rps`` replaces the workload's own arrival rate. A cell is keyed by a stable hash of its
resolved inputs (the workload and SLO contents, not their file names, and the contents of the
catalog override files), so a rerun into the same output folder skips the cells already done.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import product
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from layoutopt.errors import InputError
from layoutopt.workloads.loaders import (
    input_error_from_validation,
    load_slo,
    load_workload,
    read_yaml,
    slo_from_dict,
    workload_from_dict,
)
from layoutopt.workloads.presets import preset_workload

Objective = Literal["goodput-per-dollar", "max-goodput", "min-cost"]
SolveMode = Literal["auto", "colocated", "disaggregated"]
MAX_CELLS = 100_000
CELL_ID_HEX_CHARS = 16


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SolverSettings(_Frozen):
    """Solver options shared by every cell of a sweep."""

    time_limit_s: float = Field(default=10.0, gt=0, le=3600, description="solver wall-time limit per cell")
    mode: SolveMode = "auto"
    engine: str = Field(default="vllm", description="vllm, vllm==0.13.0, sglang, sglang==0.5.3 or trtllm; the "
                        "version selects the engine rules (layoutopt catalog engines)")
    precision: Literal["auto", "bf16", "fp8", "fp4"] = "auto"
    headroom: float = Field(default=0.7, gt=0, le=1, description="utilization ceiling per instance")
    gpus_path: str | None = Field(default=None, description="GPU catalog override file, relative to the sweep file")
    prices_path: str | None = Field(default=None, description="price override file, relative to the sweep file")


    @field_validator("engine")
    @classmethod
    def _known_engine(cls, engine: str) -> str:
        from layoutopt.engines import parse_engine_ref

        parse_engine_ref(engine, field="solver.engine")  # an InputError (a ValueError) names what is allowed
        return engine


class SweepSpec(_Frozen):
    """A grid of solves: models x fleet options x workloads x SLOs x objectives x rates."""

    name: str = "sweep"
    models: list[str] = Field(min_length=1)
    gpus: list[str] | None = Field(default=None, min_length=1, description="GPU types, each a budget of "
                                   "max_gpus_per_type GPUs")
    max_gpus_per_type: int | None = Field(default=None, ge=1)
    budgets: list[str] | None = Field(default=None, min_length=1, description="budget strings (see parse_budget)")
    rates_rps: list[float | None] = Field(default_factory=lambda: [None], min_length=1)
    workloads: list[str | dict[str, Any]] = Field(default_factory=lambda: ["chat"], min_length=1)
    slos: list[str | dict[str, Any]] = Field(min_length=1)
    objectives: list[Objective] = Field(default_factory=lambda: ["goodput-per-dollar"], min_length=1)
    solver: SolverSettings = SolverSettings()

    @field_validator("rates_rps")
    @classmethod
    def _positive_rates(cls, rates: list[float | None]) -> list[float | None]:
        for rate in rates:
            if rate is not None and not (math.isfinite(rate) and rate > 0):
                raise ValueError(f"rates must be finite numbers of requests/s > 0, or null; got {rate}")
        return rates

    @model_validator(mode="after")
    def _check_axes(self) -> "SweepSpec":
        # Messages start with the field they are about; sweep_spec_from_dict reports that field.
        if (self.gpus is None) == (self.budgets is None):
            raise ValueError("budgets: give either gpus (with max_gpus_per_type) or budgets, not both and not neither")
        if self.gpus is not None and self.max_gpus_per_type is None:
            raise ValueError("max_gpus_per_type: required with gpus (the GPUs of each type a fleet may use)")
        if "min-cost" in self.objectives and None in self.rates_rps:
            raise ValueError("rates_rps: objective min-cost needs a rate in every cell; remove null")
        for axis in ("models", "budgets", "gpus", "objectives"):
            values = getattr(self, axis)
            if values is not None and len(set(values)) != len(values):
                raise ValueError(f"{axis}: a value is listed twice")
        return self

    @property
    def budget_texts(self) -> list[str]:
        """The fleet options as budget strings."""
        if self.budgets is not None:
            return list(self.budgets)
        return [f"{self.max_gpus_per_type}x{gpu}" for gpu in self.gpus or []]


class Cell(_Frozen):
    """One solve of a sweep, with every input resolved (no file is read to run it)."""

    cell_id: str = Field(description="stable hash of the inputs below")
    cell_index: int = Field(ge=0, description="position in the grid's expansion order")
    model: str
    budget: str
    workload_name: str
    workload: dict[str, Any] = Field(description="Workload.model_dump() at this cell's rate")
    slo_name: str
    slo: dict[str, Any] = Field(description="SLO.model_dump()")
    objective: Objective
    rate_rps: float | None
    solver: SolverSettings = Field(description="paths in it are absolute")
    catalog_digest: str = Field(default="", description="hash of the catalog override files' contents")


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def cell_key(cell_inputs: dict[str, Any]) -> str:
    """The id of a cell: the leading hex digits of a SHA-256 over its canonical JSON inputs."""
    return _digest(cell_inputs)[:CELL_ID_HEX_CHARS]


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read a ``sweep.yaml``; a bad key or value is an ``InputError`` naming ``sweep.<field>``."""
    return sweep_spec_from_dict(read_yaml(path, "sweep"))


def sweep_spec_from_dict(data: Any) -> SweepSpec:
    if not isinstance(data, dict):
        raise InputError("sweep", data, "a mapping with models, gpus or budgets, rates_rps, workloads, slos")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        if not first["loc"] and first["type"] == "value_error":
            field, _, problem = first["msg"].removeprefix("Value error, ").partition(": ")
            raise InputError(f"sweep.{field}", data.get(field), problem) from None
        raise input_error_from_validation(error, "sweep") from None


@contextmanager
def _renamed_field(old_prefix: str, new_prefix: str) -> Iterator[None]:
    """Report an InputError about ``workload.x`` (from a loader) as ``sweep.workloads[i].x``."""
    try:
        yield
    except InputError as error:
        if not error.field.startswith(old_prefix):
            raise
        field = new_prefix + error.field.removeprefix(old_prefix)
        raise InputError(field, error.value, error.allowed, error.hint) from None


def _resolve_workload(item: str | dict, base_dir: Path, field: str) -> tuple[str, dict]:
    if isinstance(item, dict):
        if "trace" in item:
            item = {**item, "trace": str(base_dir / item["trace"])}
        workload = workload_from_dict(item, base_dir=base_dir, field=field)
        return workload.name, workload.model_dump(mode="json")
    path = base_dir / item
    if item.endswith((".yaml", ".yml")) or path.is_file():
        workload = load_workload(path)
        return workload.name, workload.model_dump(mode="json")
    workload = preset_workload(item)
    return workload.name, workload.model_dump(mode="json")


def _resolve_slo(item: str | dict, base_dir: Path, index: int) -> tuple[str, dict]:
    slo = slo_from_dict(item, f"sweep.slos[{index}]") if isinstance(item, dict) else load_slo(base_dir / item)
    targets = [f"TTFT {k} {v:g} ms" for k, v in slo.ttft_ms.items()]
    targets += [f"TPOT {k} {v:g} ms" for k, v in slo.tpot_ms.items()]
    name = Path(item).stem if isinstance(item, str) else ", ".join(targets) + f" @ {slo.attainment:g}"
    return name, slo.model_dump(mode="json")


def _with_rate(workload: dict, rate_rps: float | None) -> dict:
    return {**workload, "arrival_rate_rps": rate_rps}


def _resolved_solver(settings: SolverSettings, base_dir: Path) -> tuple[SolverSettings, str]:
    """Settings with absolute catalog paths, and a hash of those files' contents."""
    updates: dict[str, str] = {}
    contents: dict[str, str] = {}
    for key in ("gpus_path", "prices_path"):
        value = getattr(settings, key)
        if value is None:
            continue
        path = (base_dir / value).resolve()
        try:
            contents[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as error:
            raise InputError(f"sweep.solver.{key}", value, "a readable file", str(error)) from None
        updates[key] = str(path)
    return settings.model_copy(update=updates), (_digest(contents) if contents else "")


def _resolve_models(models: list[str], base_dir: Path) -> tuple[list[str], dict[str, str]]:
    """Catalog names as given and config files as absolute paths; digests of those files' contents.

    Every model is loaded once here, so a misspelled name stops the sweep before any cell runs.
    """
    from layoutopt.model_catalog.catalog import get_model, is_catalog_model

    resolved, digests = [], {}
    for index, model in enumerate(models):
        if not is_catalog_model(model):
            path = (base_dir / model).expanduser().resolve()
            config = path / "config.json" if path.is_dir() else path
            if config.is_file():
                model = str(path)
                digests[model] = hashlib.sha256(config.read_bytes()).hexdigest()
        try:
            get_model(model)
        except InputError as error:
            raise InputError(f"sweep.models[{index}]", error.value, error.allowed, error.hint) from None
        resolved.append(model)
    return resolved, digests


def _check_budgets(budgets: list[str], solver: SolverSettings) -> None:
    from layoutopt.hardware_catalog.budget import parse_budget
    from layoutopt.hardware_catalog.catalog import load_catalog

    catalog = load_catalog(gpus_path=solver.gpus_path, prices_path=solver.prices_path)
    for index, budget in enumerate(budgets):
        try:
            parse_budget(budget, catalog)
        except InputError as error:
            raise InputError(f"sweep.budgets[{index}]", budget, error.allowed, error.hint) from None


def expand_cells(spec: SweepSpec, base_dir: str | Path = ".") -> list[Cell]:
    """The grid's cells in expansion order: model, budget, workload, SLO, objective, then rate.

    Files named in the spec are read relative to ``base_dir``. Raises ``InputError`` naming the
    spec field for an unknown model, a bad budget, workload, SLO or catalog file, or a grid larger
    than ``MAX_CELLS``.
    """
    base = Path(base_dir)
    workloads, slos = [], []
    for index, item in enumerate(spec.workloads):
        with _renamed_field("workload", f"sweep.workloads[{index}]"):
            workloads.append(_resolve_workload(item, base, f"sweep.workloads[{index}]"))
    for index, item in enumerate(spec.slos):
        with _renamed_field("slo", f"sweep.slos[{index}]"):
            slos.append(_resolve_slo(item, base, index))
    solver, catalog_digest = _resolved_solver(spec.solver, base)
    models, model_digests = _resolve_models(spec.models, base)
    _check_budgets(spec.budget_texts, solver)
    axes = (models, spec.budget_texts, workloads, slos, spec.objectives, spec.rates_rps)
    num_cells = math.prod(len(axis) for axis in axes)
    if num_cells > MAX_CELLS:
        raise InputError("sweep", f"{num_cells} cells", f"at most {MAX_CELLS} cells; split the sweep")
    # The hashed inputs leave out file locations so moving the sweep folder keeps its results.
    hashed_solver = solver.model_dump(exclude={"gpus_path", "prices_path"})
    cells: list[Cell] = []
    first_index_of: dict[str, int] = {}
    for index, (model, budget, (w_name, workload), (s_name, slo), objective, rate) in enumerate(product(*axes)):
        workload_at_rate = _with_rate(workload, rate)
        # A config file counts by its contents, so moving it keeps the results and editing it does not.
        model_key = model_digests.get(model, model)
        key = cell_key({"model": model_key, "budget": budget, "workload": workload_at_rate, "slo": slo,
                        "objective": objective, "rate_rps": rate, "solver": hashed_solver,
                        "catalog": catalog_digest})
        if key in first_index_of:
            raise InputError("sweep", f"cells {first_index_of[key]} and {index}",
                             "a grid without repeated cells; two workloads or SLOs have the same contents")
        first_index_of[key] = index
        cells.append(Cell(cell_id=key, cell_index=index, model=model, budget=budget, workload_name=w_name,
                          workload=workload_at_rate, slo_name=s_name, slo=slo, objective=objective,
                          rate_rps=rate, solver=solver, catalog_digest=catalog_digest))
    return cells
