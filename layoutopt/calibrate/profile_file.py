"""Profile files: one engine x GPU-generation calibration as YAML, with provenance and errors.

    schema_version: 1
    engine: vllm
    gpu_generation: hopper
    gpus: [H100-SXM]                 # GPUs the rows were measured on
    constants: {gemm_efficiency: 0.64, memory_efficiency: 0.88, ...}   # every EngineProfile constant
    fitted:                          # the constants the fit moved, with one-sigma standard errors
      - {name: memory_efficiency, value: 0.88, std_err: 0.01, before: 0.89}
    provenance: {created_utc: ..., tool: layoutopt 0.1.0, sources: [...], num_rows: 40, ...}
    errors: {before: {...}, after: {...}, kfold: {...}}   # MdAPE, bias, within-20 % of TTFT and TPOT
    bands: [...]                     # ErrorBand per mode (layoutopt.plan.ErrorBand)
    rows: [...]                      # every row with measured and predicted latencies before and after

``load_profile`` reads and validates one (a bad file gets one message naming the field);
``write_profile`` writes it atomically (a crash never leaves half a file).
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from layoutopt import io_safe
from layoutopt.errors import InputError
from layoutopt.perf_model.calibration import EngineProfile
from layoutopt.plan import ErrorBand

PROFILE_SCHEMA_VERSION = 1
# EngineProfile fields that are not constants: the profile file says them itself.
NOT_CONSTANTS = ("name", "source", "generation")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FittedConstant(_Frozen):
    name: str
    value: float
    std_err: float | None = Field(description="one-sigma standard error; None when the rows do not constrain it")
    before: float = Field(description="value in the base profile the fit started from")


class MetricErrors(_Frozen):
    """Accuracy of one latency over a set of rows (percent)."""

    rows: int = Field(ge=0)
    mdape_pct: float | None = Field(description="median absolute % error")
    bias_pct: float | None = Field(description="median signed % error (predicted above measured is positive)")
    within_20_pct: float | None = Field(description="share of rows within 20 %")


class ErrorSummary(_Frozen):
    ttft: MetricErrors
    tpot: MetricErrors


class Errors(_Frozen):
    before: ErrorSummary = Field(description="base profile on the calibration rows")
    after: ErrorSummary = Field(description="fitted profile on the same rows (in-sample)")
    kfold: ErrorSummary | None = Field(default=None, description="each row predicted by a fit without its fold")
    folds: int = Field(default=0, ge=0, description="k of the k-fold figure; 0 when not computed")


class ProfileRow(_Frozen):
    """One calibration row and the latencies predicted for it."""

    row_id: str
    source: str
    mode: Literal["agg", "disagg"]
    model: str
    gpu: str
    isl: int
    osl: int
    concurrency: float
    measured_ttft_ms: float
    measured_tpot_ms: float
    before_ttft_ms: float | None = Field(description="predicted by the base profile; None when not modelled")
    before_tpot_ms: float | None
    after_ttft_ms: float | None = Field(description="predicted by the fitted profile")
    after_tpot_ms: float | None
    kfold_ttft_ms: float | None = Field(default=None, description="predicted by the fit without this row's fold")
    kfold_tpot_ms: float | None = None


class Provenance(_Frozen):
    created_utc: datetime
    tool: str = Field(description="layoutopt version that fitted the profile")
    command: str = Field(description="the command line, for refitting")
    sources: list[str] = Field(description="measurement files the rows came from")
    num_rows: int = Field(ge=0)
    rows_left_out: dict[str, str] = Field(default_factory=dict, description="row id -> why it was not used")
    base_profile: str = Field(description="the profile the fit started from")
    loss: str
    rule: str = Field(description="the minimum-rows rule applied")


class ProfileFile(_Frozen):
    """One engine x GPU-generation profile: constants, their uncertainty, provenance and errors."""

    schema_version: Literal[1] = PROFILE_SCHEMA_VERSION
    engine: Literal["vllm", "sglang", "trtllm"]
    gpu_generation: str
    gpus: list[str] = Field(min_length=1, description="catalog GPUs the rows were measured on")
    constants: dict[str, Any] = Field(description="every EngineProfile constant (the fitted ones included)")
    fitted: list[FittedConstant]
    provenance: Provenance
    errors: Errors
    bands: list[ErrorBand] = Field(default_factory=list)
    rows: list[ProfileRow] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "ProfileFile":
        self.engine_profile()  # the constants must form a valid EngineProfile
        for constant in self.fitted:
            if constant.name not in self.constants:
                raise ValueError(f"fitted constant {constant.name!r} is not among the constants")
        for band in self.bands:
            if band.engine != self.engine or band.gpu_generation != self.gpu_generation:
                raise ValueError(f"band for {band.engine} {band.gpu_generation} in a profile for "
                                 f"{self.engine} {self.gpu_generation}")
        return self

    def engine_profile(self) -> EngineProfile:
        """The perf model's profile object; its name is the engine's, so plans name the engine."""
        values = {k: v for k, v in self.constants.items() if k not in NOT_CONSTANTS}
        source = (f"profile file: {self.engine} {self.gpu_generation} fitted "
                  f"{self.provenance.created_utc:%Y-%m-%d} on {self.provenance.num_rows} rows")
        try:
            return EngineProfile(name=self.engine, generation=self.gpu_generation, source=source, **values)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"constants.{field}: {first['msg']} (got {first.get('input')!r})") from None

    def band(self, mode: str) -> ErrorBand | None:
        return next((b for b in self.bands if b.mode == mode), None)


def load_profile(path: str | Path) -> ProfileFile:
    """Read a profile YAML; any problem becomes one InputError naming the file, field and value."""
    path = Path(path)
    return parse_profile(io_safe.read_text(path, "--profile", "profile YAML file"), str(path))


def parse_profile(text: str, where: str = "profile") -> ProfileFile:
    """A profile from YAML (or JSON) text, e.g. sent in a request body."""
    # the shared reader: duplicate keys, finite numbers, nesting and alias caps (YAML holds JSON too)
    return profile_from_mapping(io_safe.parse_yaml_text(text, "profile", where), where)


def profile_from_mapping(raw: object, where: str = "profile") -> ProfileFile:
    if not isinstance(raw, dict):
        raise InputError(where, type(raw).__name__, "a mapping written by layoutopt calibrate (engine, "
                         "gpu_generation, constants, ...)")
    try:
        return ProfileFile.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "profile"
        got = first.get("input")
        shown = got if not isinstance(got, (dict, list)) else type(got).__name__
        raise InputError(f"{where}: {field}", shown, first["msg"].removeprefix("Value error, ")) from None


def profile_yaml(profile: ProfileFile) -> str:
    return yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, width=110)


def write_profile(profile: ProfileFile, path: str | Path) -> Path:
    """Write ``profile`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(profile_yaml(profile))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
