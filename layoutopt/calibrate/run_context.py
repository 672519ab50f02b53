"""What a benchmark result file does not say about the run: model, GPU, engine and layout.

``vllm bench serve --save-result`` JSON and genai-perf / aiperf exports record latencies and
lengths but not the deployment that served them. The user supplies it with command-line options
or a small sidecar YAML next to the results (``RUN.json`` + ``RUN.yaml``, or ``--run-info FILE``):

    model: llama-3.1-70b          # catalog name or HuggingFace id
    gpu: H100
    engine: vllm
    layout: {tp_size: 4, weight_precision: fp8}
    # disaggregated instead of layout:
    # prefill: {instances: 2, layout: {tp_size: 2}}
    # decode: {instances: 1, layout: {tp_size: 4}, max_batch_size: 128}
    # concurrency: 32             # only when the result file lacks it (genai-perf/aiperf CSV)

Field names follow :class:`~layoutopt.plan.Layout` (``tp_size``, ``ep_size``, ``dp_size``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from layoutopt import io_safe
from layoutopt.errors import InputError
from layoutopt.plan import Layout

Engine = Literal["vllm", "sglang", "trtllm"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoolRun(_Frozen):
    """One pool of a disaggregated run: how many instances, their layout, their decode batch cap."""

    instances: int = Field(default=1, ge=1)
    layout: Layout = Field(default_factory=Layout)
    max_batch_size: int | None = Field(default=None, ge=1, description="--max-num-seqs of a decode instance")


class RunContext(_Frozen):
    """The deployment a benchmark result was measured on (what the result file lacks)."""

    model: str | None = Field(default=None, description="catalog name or HuggingFace id")
    gpu: str | None = Field(default=None, description="GPU catalog name, e.g. H100")
    engine: Engine | None = None
    layout: Layout | None = Field(default=None, description="colocated (aggregated) instance layout")
    prefill: PoolRun | None = None
    decode: PoolRun | None = None
    concurrency: float | None = Field(default=None, gt=0, description="requests in flight, if the file lacks it")

    @model_validator(mode="after")
    def _one_mode(self) -> "RunContext":
        if (self.prefill is None) != (self.decode is None):
            raise ValueError("give both prefill and decode (disaggregated) or neither")
        if self.prefill is not None and self.layout is not None:
            raise ValueError("give layout (colocated) or prefill and decode (disaggregated), not both")
        return self

    @property
    def disaggregated(self) -> bool:
        return self.prefill is not None

    def merged(self, other: "RunContext") -> "RunContext":
        """This context with every field ``other`` sets taking precedence."""
        values = {**self.model_dump(exclude_none=True), **other.model_dump(exclude_none=True)}
        if "layout" in other.model_fields_set and other.layout is not None:
            values.pop("prefill", None)
            values.pop("decode", None)
        if other.prefill is not None:
            values.pop("layout", None)
        return RunContext.model_validate(values)


def load_run_context(path: str | Path) -> RunContext:
    """Read a sidecar YAML; a bad file raises one InputError naming the field and the value."""
    path = Path(path)
    # the shared reader: size, UTF-8, duplicate keys, finite numbers, nesting
    raw = io_safe.parse_yaml_text(io_safe.read_text(path, "run facts", "YAML file"), "run facts", str(path))
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(str(path), type(raw).__name__, "a mapping with model, gpu, engine, layout or prefill/decode")
    try:
        return RunContext.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "run"
        raise InputError(f"{path}: {field}", first.get("input"),
                         first["msg"].removeprefix("Value error, ")) from None


def sidecar_for(result_path: Path) -> Path | None:
    """``RUN.yaml`` (or ``RUN.yml``) next to ``RUN.json`` / ``RUN.csv``, when it exists."""
    for suffix in (".yaml", ".yml"):
        candidate = result_path.with_suffix(suffix)
        if candidate.is_file() and candidate != result_path:
            return candidate
    return None
