"""Efficiency of a GPU generation relative to Hopper, per compute precision (``data/generations.yaml``).

Engine profiles are Hopper-equivalent; :func:`generation_scales` says how a GPU's generation and
the served precision scale them (large-GEMM efficiency, the rows a GEMM needs to approach it, HBM
and attention efficiency), and whether its scale-up fabric reduces in the switch. The numbers
come from published microbenchmarks (see the data file), not from fits to serving rows.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.io_safe import load_package_yaml

REFERENCE_GENERATION = "hopper"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PrecisionScale(_Frozen):
    gemm_scale: float = Field(gt=0, description="large-M GEMM fraction of this precision's peak / Hopper FP8's")
    half_rows_scale: float = Field(gt=0, description="rows to reach half of it / Hopper FP8's")


class GenerationSpec(_Frozen):
    name: str
    hbm_scale: float = Field(gt=0)
    attention_scale: float = Field(gt=0)
    nvls: bool = Field(description="the scale-up switch reduces all-reduce payloads in the switch")
    allreduce_link_efficiency: float = Field(gt=0, description="large all-reduce bus bandwidth / line rate")
    link_efficiency: float = Field(gt=0, description="other large collectives (ring, all-to-all) / line rate")
    scaleup_mesh: bool = Field(default=False, description="switchless full mesh (xGMI): a GPU has one link per "
                               "peer, so a smaller group uses only part of its scale-up bandwidth")
    precisions: dict[str, PrecisionScale]
    source: str
    estimate: bool


class Scales(_Frozen):
    """Multipliers of a Hopper-equivalent engine profile on one GPU at one compute precision."""

    generation: str
    gemm: float
    half_rows: float
    hbm: float
    attention: float


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, GenerationSpec], float]:
    raw = load_package_yaml(resources.files("layoutopt.perf_model").joinpath("data/generations.yaml").read_text())
    dequant = float(raw.pop("weight_only")["dequant_scale"])
    return {name: GenerationSpec(name=name, **fields) for name, fields in raw.items()}, dequant


def generation_spec(gpu: GpuSpec) -> GenerationSpec:
    """The generation of ``gpu`` (a GPU without one is costed as the Hopper reference)."""
    specs, _ = _load()
    return specs.get(gpu.generation or REFERENCE_GENERATION, specs[REFERENCE_GENERATION])


def weight_only_dequant_scale() -> float:
    """Fraction of the activation-precision GEMM efficiency a weight-only 4-bit GEMM keeps."""
    return _load()[1]


@lru_cache(maxsize=256)
def generation_scales(gpu: GpuSpec, compute_precision: str) -> Scales:
    """Scales for ``gpu`` running GEMMs in ``compute_precision`` (a precision the generation lacks a
    figure for takes its BF16 one)."""
    spec = generation_spec(gpu)
    scale = spec.precisions.get(compute_precision) or spec.precisions["bf16"]
    return Scales(generation=spec.name, gemm=scale.gemm_scale, half_rows=scale.half_rows_scale,
                  hbm=spec.hbm_scale, attention=spec.attention_scale)
