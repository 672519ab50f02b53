"""Schemas of the hardware catalog: GPUs, node types and their prices.

Rows are data (``data/*.yaml``), each with its source; these frozen models only validate them.
Units are in every field name: ``_tflops`` dense tera floating-point operations per second,
``_gib`` binary gigabytes, ``_gb_per_s`` decimal gigabytes (1e9 bytes) per second,
``_gbit_per_s`` gigabits per second, ``_usd_per_hour`` dollars per GPU-hour.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from layoutopt.bounds import MAX_GPUS

# Weight (and KV) storage formats. ``fp4`` is NVFP4 (FP8 scale per 16 values), ``mxfp4`` the OCP
# format (E8M0 scale per 32: gpt-oss), ``int4`` weight-only INT4 with a BF16 scale per group of 32
# (compressed-tensors pack-quantized: Kimi-K2.5). A format the GPU has no tensor-core math for is
# served weight-only (dequantized into BF16 GEMMs), see perf_model.precision.
Precision = Literal["bf16", "fp8", "fp4", "int4", "mxfp4"]
# The compute precisions a search tries when asked for 'auto' (the weight-only formats are the
# checkpoint's choice, not the planner's).
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "fp4")
# Architecture generation of a GPU: what its kernels' efficiency, in-switch reduction and
# precision support follow (sm_80 Ampere, sm_89 Ada, sm_90 Hopper, sm_100/103 Blackwell, gfx942
# CDNA3, gfx950 CDNA4).
Generation = Literal["ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"]
GENERATIONS: tuple[Generation, ...] = ("ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4")


# Upper bounds of catalog numbers: orders of magnitude above any GPU built, so a typo
# (an extra 000, 1e30) is an error instead of an overflow in the solver's integer tables.
MAX_USD_PER_GPU_HOUR = 10_000.0
MAX_TFLOPS = 1e6
MAX_MEMORY_GIB = 1e5
MAX_GB_PER_S = 1e6
MAX_GBIT_PER_S = 1e7
MAX_TDP_W = 1e5
MAX_GPUS_PER_NODE = 10_000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class GpuPrice(_Frozen):
    """On-demand price of one GPU-hour, with the observed spread and when it was observed.

    ``typical_usd_per_hour`` is what the optimizer charges; ``low``/``high`` bound the observed
    spread (spot and contract prices included in ``low``) for sensitivity sweeps.
    Invariant: low <= typical <= high.
    """

    typical_usd_per_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    low_usd_per_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    high_usd_per_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    as_of: str = Field(description="date (YYYY-MM or YYYY-MM-DD) of the observations")
    source: str

    @model_validator(mode="after")
    def _check_order(self) -> "GpuPrice":
        if not self.low_usd_per_hour <= self.typical_usd_per_hour <= self.high_usd_per_hour:
            raise ValueError(
                f"prices must satisfy low <= typical <= high; got low {self.low_usd_per_hour}, "
                f"typical {self.typical_usd_per_hour}, high {self.high_usd_per_hour} $/GPU-hour"
            )
        return self


# GPUs a PCIe-only server (scale-up domain 1) holds behind its PCIe switches [estimate: 8-GPU boxes].
PCIE_SERVER_GPUS = 8


class GpuSpec(_Frozen):
    """Peak numbers of one GPU model, as the vendor or a measurement reports them."""

    name: str = Field(description="canonical catalog name, e.g. 'H100-SXM'")
    aliases: tuple[str, ...] = ()
    vendor: Literal["nvidia", "amd"]
    generation: Generation | None = Field(
        default=None, description="architecture generation (ampere, ada, hopper, blackwell, cdna3, cdna4); "
        "performance constants follow it; unknown GPUs are costed as hopper")
    compute_capability: float | None = Field(
        default=None, ge=1, le=20, description="CUDA compute capability major.minor (e.g. 9.0); None for non-NVIDIA GPUs")
    bf16_tflops: float = Field(gt=0, le=MAX_TFLOPS, description="dense BF16 peak")
    fp8_tflops: float | None = Field(default=None, gt=0, le=MAX_TFLOPS, description="dense FP8 peak; None if unsupported")
    fp4_tflops: float | None = Field(default=None, gt=0, le=MAX_TFLOPS, description="dense FP4 peak; None if unsupported")
    memory_gib: float = Field(gt=0, le=MAX_MEMORY_GIB, description="HBM/GDDR capacity the runtime can see")
    memory_bandwidth_gb_per_s: float = Field(gt=0, le=MAX_GB_PER_S)
    scaleup_gb_per_s: float = Field(
        ge=0, le=MAX_GB_PER_S, description="scale-up (NVLink/xGMI) bandwidth per GPU per direction; 0 when none"
    )
    scaleup_domain_gpus: int = Field(ge=1, le=MAX_GPUS, description="GPUs in one scale-up domain in its usual node")
    pcie_gb_per_s: float = Field(gt=0, le=MAX_GB_PER_S, description="host PCIe bandwidth per direction")
    nic_gbit_per_s: float = Field(gt=0, le=MAX_GBIT_PER_S, description="scale-out NIC bandwidth per GPU")
    tdp_w: float = Field(gt=0, le=MAX_TDP_W)
    price: GpuPrice | None = None
    source: str

    def peak_tflops(self, precision: Precision) -> float | None:
        """Dense peak for a compute precision, or None when the GPU lacks it."""
        # MXFP4 runs on the FP4 tensor cores where they exist; INT4 has no dense-math peak here
        # (weight-only: GEMMs in BF16).
        return {"bf16": self.bf16_tflops, "fp8": self.fp8_tflops, "fp4": self.fp4_tflops,
                "mxfp4": self.fp4_tflops, "int4": None}[precision]

    def supports(self, precision: Precision) -> bool:
        return self.peak_tflops(precision) is not None

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30

    @property
    def local_domain_gpus(self) -> int:
        """GPUs of one local domain: the scale-up (NVLink, xGMI) domain, else one PCIe server."""
        return self.scaleup_domain_gpus if self.scaleup_gb_per_s > 0 and self.scaleup_domain_gpus > 1 \
            else PCIE_SERVER_GPUS

    @property
    def cuda_major(self) -> int | None:
        """An NVIDIA GPU's compute capability major (9 Hopper, 10 Blackwell B200/GB200), which engines
        pick kernels and defaults by; None for other vendors."""
        return int(self.compute_capability) if self.vendor == "nvidia" and self.compute_capability is not None \
            else None

    @property
    def compute_capability_x10(self) -> int | None:
        """Compute capability as engines compare it (9.0 -> 90, 8.9 -> 89), None when not CUDA."""
        return None if self.compute_capability is None else int(round(self.compute_capability * 10))


class NodeType(_Frozen):
    """A server (or rack-scale system) shape: how many GPUs, how they are linked."""

    name: str
    gpu: str = Field(description="canonical GPU name")
    gpus_per_node: int = Field(ge=1, le=MAX_GPUS_PER_NODE)
    nvlink_domain_gpus: int = Field(
        ge=1, le=MAX_GPUS, description="GPUs sharing one scale-up domain (8 on HGX, 72 on NVL72, 1 on PCIe)"
    )
    gpus_per_tray: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_NODE, description="GPUs per compute tray (NVL72)")
    nics_per_node: int = Field(ge=0, le=MAX_GPUS_PER_NODE)
    nic_gbit_per_s: float = Field(gt=0, le=MAX_GBIT_PER_S, description="bandwidth of one NIC")
    default_for_gpu: bool = Field(default=False, description="used when a budget names only the GPU")
    source: str

    @model_validator(mode="after")
    def _check_shape(self) -> "NodeType":
        small, large = sorted((self.gpus_per_node, self.nvlink_domain_gpus))
        if large % small:
            raise ValueError(
                f"nvlink_domain_gpus {self.nvlink_domain_gpus} and gpus_per_node {self.gpus_per_node} "
                "must divide one another (a domain is part of a node or a whole number of nodes)"
            )
        if self.gpus_per_tray is not None and self.gpus_per_node % self.gpus_per_tray:
            raise ValueError(
                f"gpus_per_node {self.gpus_per_node} is not a multiple of gpus_per_tray {self.gpus_per_tray}"
            )
        return self

    @property
    def nodes_per_nvlink_domain(self) -> int:
        """Nodes that share one scale-up domain: 18 trays on NVL72, 1 on HGX and PCIe servers."""
        return max(1, self.nvlink_domain_gpus // self.gpus_per_node)

    @property
    def nic_gbit_per_s_per_gpu(self) -> float:
        """Scale-out bandwidth per GPU in Gb/s: all NICs of the node shared by its GPUs."""
        return self.nics_per_node * self.nic_gbit_per_s / self.gpus_per_node
