"""How one pipeline stage sits on local domains: inside one, or spread evenly over whole ones.

A local domain is what ``links.local_domain`` says: the scale-up (NVLink) domain, or a PCIe
server for GPUs without one. A stage (tp x dp x pcp GPUs) of at most one domain sits inside one;
a larger stage is cut into *units* of one domain each, spread over ``stage / domain`` domains, as
``links.SpanningGroup`` costs it (TP16 over two HGX nodes; DEP32 over four). Placement places
units: each unit's GPUs share one local domain (``topology.placement``), and the optimizer's
packing counts them (``Candidate.domain_group_gpus``).
"""

from __future__ import annotations

import numpy as np

from layoutopt.hardware_catalog.schemas import GpuSpec


def local_domain_gpus(gpu: GpuSpec) -> int:
    """GPUs of one local domain of ``gpu``: its scale-up domain, else a PCIe server."""
    return gpu.local_domain_gpus


def stage_unit_gpus(gpu: GpuSpec, gpus_per_stage):
    """GPUs of a stage that must share one local domain: the whole stage when it fits one, else
    one whole domain (int in, int out; numpy arrays element-wise)."""
    domain = local_domain_gpus(gpu)
    if isinstance(gpus_per_stage, np.ndarray):
        return np.minimum(gpus_per_stage, domain)
    return min(int(gpus_per_stage), domain)


def spans_domains(gpu: GpuSpec, gpus_per_stage: int) -> bool:
    """Whether a stage of ``gpus_per_stage`` GPUs spreads over more than one local domain."""
    return gpus_per_stage > local_domain_gpus(gpu)


def units_per_stage(gpu: GpuSpec, gpus_per_stage: int) -> int:
    """Local domains one stage takes (1 when it fits one)."""
    unit = stage_unit_gpus(gpu, gpus_per_stage)
    return -(-int(gpus_per_stage) // unit)
