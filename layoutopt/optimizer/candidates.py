"""The candidate table: everything the solver needs, prepared before any variable exists.

A ``Candidate`` is one kind of instance the plan may run any number of: a role, a GPU type, a
``Layout`` (degrees and precisions) and the performance model's numbers for it at the SLO.
A ``CandidateTable`` adds the budget, the target rate, the mode restriction and the record of
what enumeration dropped and why (explanations read it). The solver sees floats only through
``layoutopt.optimizer.scaling``, which turns this table into integers in one place.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from layoutopt.plan import Percentiles
from layoutopt.plan import Layout, Role

ModeChoice = Literal["auto", "colocated", "disaggregated"]
DISAGGREGATED_ROLES: tuple[Role, ...] = ("prefill", "decode")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Candidate(_Frozen):
    """One instance kind: role x GPU type x layout, with its capacity at the SLO.

    ``capacity_rps`` is what one instance sustains while the SLO percentiles hold, with the
    utilization headroom already applied: prefill requests/s for a prefill instance, decode
    requests/s for a decode instance, whole requests/s for a colocated one.
    """

    name: str = Field(description="readable unique key, e.g. 'prefill-H100-SXM-tp2-fp8'")
    role: Role
    gpu: str = Field(description="canonical GPU name")
    layout: Layout
    cost_usd_per_hour: float = Field(gt=0, description="price of one instance (all its GPUs)")
    capacity_rps: float = Field(gt=0)
    max_batch_size: int = Field(ge=1)
    kv_bytes_per_request: float = Field(
        default=0.0, ge=0, description="KV cache a prefill instance ships to decode per request (0 otherwise)"
    )
    nic_gb_per_s: float = Field(
        default=0.0, ge=0, description="usable scale-out bandwidth of one instance for KV transfer, 1e9 bytes/s"
    )
    ttft_ms: Percentiles | None = Field(default=None, description="at capacity; None for decode instances")
    tpot_ms: Percentiles | None = Field(default=None, description="at capacity; None for prefill instances")
    unloaded_ttft_ms: float | None = None
    unloaded_tpot_ms: float | None = None
    prefill_tok_per_s: float = Field(default=0.0, ge=0, description="prompt tokens/s one instance sustains")
    decode_tok_per_s: float = Field(default=0.0, ge=0, description="output tokens/s one instance sustains")
    bottleneck: str = Field(default="", description="what limits capacity, e.g. 'TTFT p90', 'decode KV capacity'")
    nvlink_group_gpus: int = Field(
        default=0, ge=0, description="GPUs that must share one local domain (NVLink domain, or PCIe server): the "
        "whole instance when the perf model put its pipeline stages on the local fabric, else one stage, or one "
        "whole domain of a stage spread over several (0: one stage)")

    pool_rps_per_instance: tuple[tuple[int, float], ...] = Field(
        default=(), description="(n, requests/s per instance when n instances share the router's queue, x headroom) "
        "on a grid of n, non-decreasing; empty: every instance has its own queue (n x capacity_rps)")

    def pool_capacity_rps(self, num_instances: int) -> float:
        """Requests/s ``num_instances`` instances sustain together: n x the per-instance rate of the
        largest grid point <= n (pooling only helps, so this is exact at grid points, below between)."""
        per_instance = self.capacity_rps
        for n, rate in self.pool_rps_per_instance:
            if n <= num_instances:
                per_instance = max(per_instance, rate)
        return num_instances * per_instance

    @property
    def domain_group_gpus(self) -> int:
        """GPUs of this instance that must sit in one local domain, as the perf model assumed."""
        return self.nvlink_group_gpus or self.layout.gpus_per_stage

    @property
    def gpus_per_instance(self) -> int:
        return self.layout.gpus_per_instance

    @property
    def is_disaggregated(self) -> bool:
        return self.role in DISAGGREGATED_ROLES


class FilterRecord(_Frozen):
    """How many enumerated candidates one named filter dropped, with one example reason."""

    name: str
    num_dropped: int = Field(ge=0)
    example: str = ""


class LatencyFloor(_Frozen):
    """The lowest unloaded latency any evaluated proposal reached, and which one reached it."""

    candidate: str
    role: Role
    gpu: str
    layout: Layout
    latency_ms: float = Field(ge=0)


class OverBudget(_Frozen):
    """The smallest instance that fits in memory but not in the budget (fewest GPUs, then cheapest)."""

    candidate: str
    gpu: str
    gpus_per_instance: int = Field(ge=1)
    cost_usd_per_hour: float = Field(ge=0)


class CandidateTable(_Frozen):
    """The solver's whole input: candidates, limits and the enumeration record.

    ``gpu_limits`` caps GPUs per type; a type in the table but absent from ``gpu_limits`` is
    bounded by ``max_usd_per_hour`` only (a dollar budget over the catalog).
    """

    candidates: tuple[Candidate, ...]
    gpu_limits: dict[str, int] = Field(default_factory=dict, description="GPU type -> GPUs available")
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    min_rate_rps: float | None = Field(default=None, gt=0, description="rate the plan must serve, if given")
    mode: ModeChoice = "auto"
    mean_input_tokens: float = Field(default=1.0, gt=0)
    mean_output_tokens: float = Field(default=1.0, gt=0)
    num_considered: int = Field(default=0, ge=0, description="candidates enumerated before filtering")
    filters: tuple[FilterRecord, ...] = ()
    fastest_ttft: LatencyFloor | None = Field(default=None, description="over prefilling proposals evaluated")
    fastest_tpot: LatencyFloor | None = Field(default=None, description="over decoding proposals evaluated")
    smallest_over_budget: OverBudget | None = Field(
        default=None, description="the smallest instance the budget filter dropped (diagnosis quotes it)")
    domain_capacity_gpus: dict[str, dict[int, int]] = Field(
        default_factory=dict, description="GPU type -> {s: GPUs stage groups of s or more GPUs can fill in the "
        "cluster's NVLink domains}; empty without a cluster file")
    disaggregated_gpu_limits: dict[str, int] | None = Field(
        default=None, description="GPU type -> most GPUs the prefill and decode pools may use together (one rack); "
        "None when they may spread over racks")
    incompatible_pairs: tuple[tuple[str, str], ...] = Field(
        default=(), description="(prefill, decode) candidate names the engine cannot connect (P/D TP or PP rule)")

    @model_validator(mode="after")
    def _check(self) -> "CandidateTable":
        names = [c.name for c in self.candidates]
        if len(set(names)) != len(names):
            duplicated = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"candidate names must be unique; repeated: {duplicated[:3]}")
        unbounded = {c.gpu for c in self.candidates if c.gpu not in self.gpu_limits}
        if unbounded and self.max_usd_per_hour is None:
            raise ValueError(f"GPU types {sorted(unbounded)} have no count limit and there is no $ cap")
        return self

    def by_role(self, role: Role) -> list[Candidate]:
        return [c for c in self.candidates if c.role == role]

    @property
    def gpu_types(self) -> list[str]:
        return sorted({c.gpu for c in self.candidates} | set(self.gpu_limits))

    def max_instances(self, candidate: Candidate) -> int:
        """Most instances of ``candidate`` any plan can hold, from its GPU type and the $ cap."""
        bound = None
        if candidate.gpu in self.gpu_limits:
            bound = self.gpu_limits[candidate.gpu] // candidate.gpus_per_instance
        if self.max_usd_per_hour is not None:
            by_cost = int(self.max_usd_per_hour / candidate.cost_usd_per_hour + 1e-9)
            bound = by_cost if bound is None else min(bound, by_cost)
        return int(bound or 0)

    def dropped_by(self, filter_name: str) -> int:
        return sum(f.num_dropped for f in self.filters if f.name == filter_name)
