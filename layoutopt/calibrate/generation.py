"""GPU generation of a catalog GPU: the unit a profile (and its error band) is valid for."""

from __future__ import annotations

from layoutopt.errors import InputError


def gpu_generation(gpu: object) -> str:
    """Generation of a GpuSpec or catalog GPU name (``GpuSpec.generation``: hopper, blackwell, ...)."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    spec = get_gpu(gpu) if isinstance(gpu, str) else gpu
    generation = getattr(spec, "generation", None)
    if not generation:
        raise InputError("gpu", getattr(spec, "name", str(gpu)),
                         "a GPU whose catalog row names its generation (generation: hopper, blackwell, ...)")
    return str(generation).lower()
