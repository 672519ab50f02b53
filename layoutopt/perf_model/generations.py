"""Efficiency of a GPU generation relative to Hopper, per compute precision (``data/generations.yaml``).

Engine profiles are Hopper-equivalent; :func:`generation_scales` says how a GPU's generation and
the served precision scale them (large-GEMM efficiency, the rows a GEMM needs to approach it, HBM
and attention efficiency), and whether its scale-up fabric reduces in the switch. The numbers
come from published microbenchmarks (see the data file), not from fits to serving rows.

A GEMM of M rows reaches ``asymptote x M / (M + half_rows)`` of its precision's peak (the
saturation curve the performance model applies, compute.py ``_gemm_time_s``). The data file also
keeps the measured series some scales are derived from (:func:`gemm_series`), and
:func:`gemm_saturation` fits that curve to one, so a test can check the derivation; likewise the
memory-bound kernel figures (decode attention, small-M weight GEMMs) ``hbm_scale`` comes from where
they exist (:func:`memory_kernels`, :func:`kernel_hbm_scale`).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.io_safe import load_package_yaml

REFERENCE_GENERATION = "hopper"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PrecisionScale(_Frozen):
    gemm_scale: float = Field(gt=0, description="large-M GEMM fraction of this precision's peak / Hopper FP8's")
    half_rows_scale: float = Field(gt=0, description="rows to reach half of it / Hopper FP8's")


class PeakRateSplit(_Frozen):
    """How a generation's large-M GEMM fraction changes with a GPU's peak for one precision.

    A GEMM tile's time is tensor-core time, FLOPs / (peak x ``tensor_core_fraction``), plus work
    that does not run on the tensor cores and does not speed up with them (epilogue, barriers, tile
    scheduling), FLOPs / ``other_work_tflops``. So the fraction of peak is
    1 / (1 / tensor_core_fraction + peak / other_work_tflops), and a GPU of the generation with a
    faster precision (B300's 14 PF FP4 against B200's 9 PF, same FP8) keeps a smaller share of it
    than the GPU the generation's scales describe (``reference_tflops``, per precision).
    """

    tensor_core_fraction: float = Field(gt=0, le=1)
    other_work_tflops: float = Field(gt=0)
    reference_tflops: dict[str, float] = Field(description="the peak per precision of the GPU the scales "
                                               "and the generation's engine fits describe")
    source: str

    def fraction(self, peak_tflops: float) -> float:
        """Large-M fraction of ``peak_tflops`` a GEMM reaches."""
        return 1.0 / (1.0 / self.tensor_core_fraction + peak_tflops / self.other_work_tflops)


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
    peak_rate_split: PeakRateSplit | None = Field(default=None, description="the GEMM fraction's dependence "
                                                  "on a GPU's peak within the generation (None: the same fraction "
                                                  "on every GPU of it)")
    source: str
    estimate: bool


class GemmSeries(_Frozen):
    """Measured throughput of one GEMM kernel on one GPU by rows M, at a fixed N and K (or square)."""

    name: str
    gpu: str
    precision: str
    kernel: str
    n: int | None = Field(default=None, gt=0, description="output columns (None when square)")
    k: int | None = Field(default=None, gt=0, description="reduction depth (None when square)")
    square: bool = Field(default=False, description="M = N = K: N and K grow with M (a cross-check, not a "
                         "half-saturation M)")
    peak_tflops: float = Field(gt=0, description="the precision's dense peak on that GPU")
    tflops_by_rows: dict[int, float]
    source: str


class MemoryKernel(_Frozen):
    """Achieved HBM bandwidth of one published memory-bound serving kernel (decode attention, a small-M
    weight GEMM) on one GPU: the figures a generation's ``hbm_scale`` is derived from."""

    name: str
    generation: str
    role: Literal["reference", "corroborates"] = Field(description="reference: the figure hbm_scale is "
                                                       "derived from; corroborates: a cross-check")
    kernel: str
    spec_tb_per_s: float = Field(gt=0, description="the GPU's catalog HBM bandwidth")
    achieved_tb_per_s: float = Field(gt=0)
    source: str

    @property
    def fraction(self) -> float:
        return self.achieved_tb_per_s / self.spec_tb_per_s


# A row whose time is within this factor of the series' smallest time sits on the flat launch and
# pipeline-fill floor (time independent of M), not on the saturation curve: it is not fitted.
LAUNCH_FLOOR_FACTOR = 1.3


class Saturation(_Frozen):
    """Least-squares fit of fraction(M) = asymptote x M / (M + half_rows) to a GemmSeries."""

    asymptote_fraction: float = Field(description="large-M fraction of the precision's peak")
    half_rows: float = Field(description="rows at which the fraction is half the asymptote")
    max_error_fraction: float = Field(description="largest |fitted / measured - 1| over the fitted rows")
    fitted_rows: tuple[int, ...]


class Scales(_Frozen):
    """Multipliers of a Hopper-equivalent engine profile on one GPU at one compute precision."""

    generation: str
    gemm: float
    half_rows: float
    hbm: float
    attention: float


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, GenerationSpec], float, tuple[GemmSeries, ...], tuple[MemoryKernel, ...]]:
    raw = load_package_yaml(resources.files("layoutopt.perf_model").joinpath("data/generations.yaml").read_text())
    dequant = float(raw.pop("weight_only")["dequant_scale"])
    series = tuple(GemmSeries(**fields) for fields in raw.pop("gemm_series"))
    kernels = tuple(MemoryKernel(**fields) for fields in raw.pop("memory_kernels"))
    return {name: GenerationSpec(name=name, **fields) for name, fields in raw.items()}, dequant, series, kernels


def memory_kernels() -> dict[str, MemoryKernel]:
    """The published memory-bound kernel figures of the data file, by name."""
    return {k.name: k for k in _load()[3]}


def kernel_hbm_scale(generation: str) -> float | None:
    """``hbm_scale`` as the data file derives it from memory-bound kernels: the generation's reference
    kernel's fraction of its spec over Hopper's reference kernel's (None: no kernel figure, STREAM's
    ratio stands)."""
    refs = {k.generation: k for k in _load()[3] if k.role == "reference"}
    if generation not in refs:
        return None
    return refs[generation].fraction / refs[REFERENCE_GENERATION].fraction


def gemm_series() -> dict[str, GemmSeries]:
    """The measured GEMM series of the data file, by name."""
    return {s.name: s for s in _load()[2]}


def gemm_saturation(series: GemmSeries) -> Saturation:
    """Fit ``asymptote x M / (M + half_rows)`` to the series' fraction of peak (log residuals, so
    every row weighs by its relative error) on the rows off the launch floor: those whose time
    2 M N K / throughput exceeds ``LAUNCH_FLOOR_FACTOR`` x the series' smallest. Below that a GEMM of
    the size takes the same ~6-12 us whatever its rows (launch, pipeline fill), which the step and
    layer overheads model, not the tensor cores. A square series (N and K grow with M) has no
    half-saturation M of its own and is refused."""
    from scipy.optimize import least_squares  # only the derivation check needs scipy

    if series.square or series.n is None or series.k is None:
        raise ValueError(f"gemm series {series.name} is square (M = N = K): it has no half-saturation M")
    time_s = {m: 2.0 * m * series.n * series.k / (tflops * 1e12) for m, tflops in series.tflops_by_rows.items()}
    floor_s = min(time_s.values())
    rows = np.array(sorted(m for m, t in time_s.items() if t >= LAUNCH_FLOOR_FACTOR * floor_s), dtype=float)
    if len(rows) < 3:
        raise ValueError(f"gemm series {series.name}: {len(rows)} rows off the launch floor, need >= 3")
    fraction = np.array([series.tflops_by_rows[int(m)] for m in rows]) / series.peak_tflops

    def residuals(p):
        return np.log(p[0] * rows / (rows + p[1])) - np.log(fraction)

    fit = least_squares(residuals, x0=[min(1.0, fraction.max() * 1.2), float(np.median(rows))],
                        bounds=([1e-3, 1e-3], [1.0, 1e6]))
    return Saturation(asymptote_fraction=float(fit.x[0]), half_rows=float(fit.x[1]),
                      max_error_fraction=float(np.expm1(np.abs(fit.fun)).max()),
                      fitted_rows=tuple(int(m) for m in rows))


def generation_spec(gpu: GpuSpec) -> GenerationSpec:
    """The generation of ``gpu`` (a GPU without one is costed as the Hopper reference)."""
    specs = _load()[0]
    return specs.get(gpu.generation or REFERENCE_GENERATION, specs[REFERENCE_GENERATION])


def weight_only_dequant_scale() -> float:
    """Fraction of the activation-precision GEMM efficiency a weight-only 4-bit GEMM keeps."""
    return _load()[1]


def _precision_scale(spec: GenerationSpec, compute_precision: str) -> PrecisionScale:
    """The generation's scale for a precision: MXFP4 runs on the FP4 tensor cores (the same
    block-scaled MMA, one E8M0 scale per 32 values instead of an E4M3 one per 16) and takes FP4's
    figure where it has none of its own; a precision without a figure takes BF16's."""
    scale = spec.precisions.get(compute_precision) or spec.precisions.get(_tensor_core_precision(compute_precision))
    return scale or spec.precisions["bf16"]


def _tensor_core_precision(compute_precision: str) -> str:
    """The precision whose tensor cores run ``compute_precision``: MXFP4 runs on FP4's."""
    return "fp4" if compute_precision == "mxfp4" else compute_precision


def peak_rate_factor(gpu: GpuSpec, compute_precision: str) -> float:
    """The GEMM fraction of ``gpu``'s peak over that of the generation's reference GPU at the same
    precision (:class:`PeakRateSplit`); 1 where the generation has no split or the peaks agree."""
    split = generation_spec(gpu).peak_rate_split
    key = _tensor_core_precision(compute_precision)
    peak = gpu.peak_tflops(compute_precision)  # type: ignore[arg-type]
    if split is None or peak is None or key not in split.reference_tflops:
        return 1.0
    return split.fraction(peak) / split.fraction(split.reference_tflops[key])


@lru_cache(maxsize=256)
def generation_scales(gpu: GpuSpec, compute_precision: str) -> Scales:
    """Scales for ``gpu`` running GEMMs in ``compute_precision`` (a precision the generation lacks a
    figure for takes its BF16 one; MXFP4 its FP4 one), the GEMM one corrected for the GPU's peak
    within its generation (:func:`peak_rate_factor`)."""
    spec = generation_spec(gpu)
    scale = _precision_scale(spec, compute_precision)
    return Scales(generation=spec.name, gemm=scale.gemm_scale * peak_rate_factor(gpu, compute_precision),
                  half_rows=scale.half_rows_scale, hbm=spec.hbm_scale, attention=spec.attention_scale)
