"""GPU generation of a catalog GPU: the unit a profile (and its error band) is valid for."""

from __future__ import annotations

from layoutopt.errors import InputError

# Catalog GPU -> architecture generation (vendor architecture names: NVIDIA Ampere/Ada/Hopper/
# Blackwell, AMD CDNA3/CDNA4), as reference/hardware_and_models.md lists the parts.
GENERATIONS: dict[str, str] = {
    "A100-80GB-SXM": "ampere", "L40S": "ada", "L4": "ada",
    "H100-SXM": "hopper", "H100-PCIe": "hopper", "H200-SXM": "hopper",
    "B200": "blackwell", "B300": "blackwell", "GB200": "blackwell", "GB300": "blackwell",
    "MI300X": "cdna3", "MI325X": "cdna3", "MI355X": "cdna4",
}


def gpu_generation(gpu: object) -> str:
    """Generation of a GpuSpec or catalog GPU name (the catalog's own field when it has one)."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    spec = get_gpu(gpu) if isinstance(gpu, str) else gpu
    own = getattr(spec, "generation", None)
    if isinstance(own, str) and own:
        return own.lower()
    name = getattr(spec, "name", str(gpu))
    if name not in GENERATIONS:
        raise InputError("gpu", name, "a GPU with a known generation: " + ", ".join(sorted(GENERATIONS)))
    return GENERATIONS[name]
