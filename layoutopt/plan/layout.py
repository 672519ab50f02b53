"""Layout: the parallel degrees and precisions of one instance, with vLLM's invariants.

Names follow vLLM's ``ParallelConfig``: GPUs per instance = tp x pp x pcp x dp; DCP reuses the
TP GPUs (tp % dcp == 0); the MoE layers are split over tp x dp ranks, ``ep_size`` of them by
expert and ``moe_tp_size`` by tensor slices (vLLM with --enable-expert-parallel: ep = tp x dp).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from layoutopt.hardware_catalog.schemas import Precision

Role = Literal["prefill", "decode", "colocated"]
ROLES: tuple[Role, ...] = ("prefill", "decode", "colocated")


class Layout(BaseModel):
    """Parallel degrees and precisions of one instance (one copy of the model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp_size: int = Field(default=1, ge=1)
    pp_size: int = Field(default=1, ge=1)
    ep_size: int = Field(default=1, ge=1, description="ranks the routed experts are spread over; 1 = no EP")
    dp_size: int = Field(default=1, ge=1, description="attention data-parallel ranks inside the instance")
    dcp_size: int = Field(default=1, ge=1, description="decode context parallel, inside the TP group")
    pcp_size: int = Field(default=1, ge=1, description="prefill context parallel, extra GPUs")
    weight_precision: Precision = "bf16"
    kv_precision: Precision = "bf16"

    @model_validator(mode="after")
    def _check(self) -> "Layout":
        if self.tp_size % self.dcp_size:
            raise ValueError(f"tp_size {self.tp_size} is not divisible by dcp_size {self.dcp_size}")
        if (self.tp_size * self.dp_size) % self.ep_size:
            raise ValueError(
                f"ep_size {self.ep_size} must divide tp_size x dp_size = {self.tp_size * self.dp_size} "
                "(the MoE layers run on the same GPUs as attention; vLLM uses ep = tp x dp)"
            )
        if self.kv_precision == "fp4":
            raise ValueError("kv_precision fp4 is not supported; use bf16 or fp8")
        return self

    @property
    def gpus_per_instance(self) -> int:
        return self.tp_size * self.pp_size * self.pcp_size * self.dp_size

    @property
    def gpus_per_stage(self) -> int:
        """GPUs of one pipeline stage: the group that must share a scale-up domain."""
        return self.tp_size * self.pcp_size * self.dp_size

    @property
    def moe_tp_size(self) -> int:
        """Tensor-parallel split of each expert: the MoE ranks not used for expert parallelism."""
        return self.tp_size * self.dp_size // self.ep_size

    @property
    def expert_parallel(self) -> bool:
        return self.ep_size > 1

    def short_name(self) -> str:
        """A compact readable key such as 'tp2-pp1-ep4-dp2-fp8'."""
        parts = [f"tp{self.tp_size}"]
        for label, value in (("pp", self.pp_size), ("ep", self.ep_size), ("dp", self.dp_size),
                             ("dcp", self.dcp_size), ("pcp", self.pcp_size)):
            if value > 1:
                parts.append(f"{label}{value}")
        parts.append(self.weight_precision)
        if self.kv_precision != self.weight_precision:
            parts.append(f"kv{self.kv_precision}")
        return "-".join(parts)
