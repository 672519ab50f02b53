"""Which weight formats a GPU serves and how: native tensor-core math, or weight-only.

A format the GPU computes in natively (FP8 on Hopper, FP4/MXFP4 on Blackwell) runs its GEMMs at
that precision's peak. A 4-bit or 8-bit format it has no math for is served *weight-only*: the
weights stay packed in HBM (the memory-bound decode reads their bytes) and the GEMM kernel
dequantizes them into BF16 tiles (Marlin / Machete-style mixed-input kernels), at the BF16 peak
times ``weight_only_dequant_scale`` (data/generations.yaml). INT4 is always weight-only.
Weight-only kernels of this kind exist for NVIDIA GPUs from Ampere on; other GPUs are refused.
"""

from __future__ import annotations

from layoutopt.hardware_catalog.schemas import GpuSpec

# Formats the GEMM can dequantize into BF16 on a GPU without native math for them.
WEIGHT_ONLY_FORMATS: tuple[str, ...] = ("int4", "mxfp4", "fp4", "fp8")
_WEIGHT_ONLY_GENERATIONS: tuple[str, ...] = ("ampere", "ada", "hopper", "blackwell")


def is_weight_only(gpu: GpuSpec, weight_precision: str) -> bool:
    """True when ``weight_precision`` is served dequantized into BF16 GEMMs on ``gpu``."""
    return weight_precision != "bf16" and not gpu.supports(weight_precision)  # type: ignore[arg-type]


def compute_precision(gpu: GpuSpec, weight_precision: str) -> str:
    """The precision ``gpu``'s GEMMs run in for weights stored in ``weight_precision``."""
    return "bf16" if is_weight_only(gpu, weight_precision) else weight_precision


def weight_precision_supported(gpu: GpuSpec, weight_precision: str) -> bool:
    """Whether ``gpu`` can serve weights stored in ``weight_precision`` at all."""
    if not is_weight_only(gpu, weight_precision):
        return True
    return (gpu.vendor == "nvidia" and (gpu.generation or "hopper") in _WEIGHT_ONLY_GENERATIONS
            and weight_precision in WEIGHT_ONLY_FORMATS)
