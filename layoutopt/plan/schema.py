"""Plan: the optimizer's answer, as a typed, versioned result.

``Plan.model_dump(mode="json")`` is the documented JSON output (``schema_version`` 2); key order
follows field order here. Units are in key names.

Schema versions: 2 records ``ep_exchange``, the expert-parallel exchange the plan's numbers cost
(a ``--profile`` may cost another than the engine's built-in one), so ``emit`` selects the backend
that runs it. 1 has no such field; such a plan is still read, and ``emit`` takes the engine's
built-in exchange for it, which is what a plan solved without ``--profile`` cost.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import Precision
from layoutopt.plan.error_band import ErrorBand
from layoutopt.plan.layout import Layout, Role

SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)

SolverStatus = Literal["optimal", "feasible", "infeasible", "timeout", "model_invalid"]
Objective = Literal["goodput-per-dollar", "max-goodput", "min-cost"]
Mode = Literal["colocated", "disaggregated", "mixed"]
# How attention-DP ranks exchange tokens with expert-parallel MoE layers; the same choices as
# perf_model.calibration.EngineProfile.ep_exchange (a test keeps the two equal).
EpExchange = Literal["allgather_reducescatter", "dp_gather", "alltoall"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Percentiles(_Out):
    p50: float
    p90: float
    p99: float


class Pool(_Out):
    """All instances of one kind: role, GPU type, degrees and how many."""

    role: Role
    gpu: str
    instances: int = Field(ge=1)
    gpus_per_instance: int = Field(ge=1)
    tp_size: int
    pp_size: int
    ep_size: int
    dp_size: int
    dcp_size: int
    pcp_size: int
    precision: Precision
    kv_precision: Precision
    max_batch_size: int = Field(ge=1, description="sequences one instance decodes at once (--max-num-seqs)")
    capacity_rps: float = Field(ge=0, description="requests/s one instance sustains at the SLO, with headroom")
    cost_usd_per_hour: float = Field(ge=0, description="cost of the whole pool")

    @property
    def layout(self) -> Layout:
        return Layout(tp_size=self.tp_size, pp_size=self.pp_size, ep_size=self.ep_size, dp_size=self.dp_size,
                      dcp_size=self.dcp_size, pcp_size=self.pcp_size, weight_precision=self.precision,
                      kv_precision=self.kv_precision)

    @property
    def num_gpus(self) -> int:
        return self.instances * self.gpus_per_instance


class Totals(_Out):
    gpus: int
    gpus_by_type: dict[str, int]
    cost_usd_per_hour: float
    goodput_rps: float = Field(description="request rate the plan serves within the SLO")
    output_tok_per_s: float
    tok_per_s_per_gpu: float = Field(description="output tokens/s per GPU at the goodput rate")
    requests_per_usd: float


class Latency(_Out):
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    slo_attainment: float = Field(ge=0, le=1, description="predicted fraction of requests meeting both targets")


class SolverInfo(_Out):
    status: SolverStatus
    wall_time_s: float
    objective_value: float | None
    best_bound: float | None
    gap: float | None = Field(description="relative gap between the reported plan's objective and the proven bound "
                              "(optimal: at most tolerance_fraction)")
    num_candidates: int
    num_iterations: int = Field(default=1, description="Dinkelbach iterations for the ratio objective")
    objective_unit: str = Field(default="", description="unit of objective_value and best_bound: "
                                "requests/$ (goodput-per-dollar), req/s (max-goodput), $/h (min-cost)")
    time_limit_s: float | None = None
    num_layouts_considered: int = Field(default=0, description="proposals enumerated before any filter")
    tolerance_fraction: float | None = Field(default=None, description="optimal = proven within this fraction")
    proof: str = Field(default="", description="what the status proves about the reported plan, in words")


class RatioCheck(_Out):
    """The plan's prefill:decode split compared with the seeds' formula (Tin/P) : (Tout/D)."""

    plan_prefill_gpus: int
    plan_decode_gpus: int
    formula_prefill_to_decode: float = Field(description="N_p / N_d from (Tin/P) / (Tout/D)")
    plan_prefill_to_decode: float
    prefill_tok_per_s_per_gpu: float = Field(description="P: best prompt tok/s per GPU of any prefill candidate at "
                                             "the TTFT target (independent of the plan)")
    decode_tok_per_s_per_gpu: float = Field(description="D: best output tok/s per GPU of any decode candidate at "
                                            "the TPOT target (independent of the plan)")
    best_prefill_candidate: str = ""
    best_decode_candidate: str = ""
    plan_prefill_tok_per_s_per_gpu: float | None = Field(default=None, description="the plan's prefill pool's own rate")
    plan_decode_tok_per_s_per_gpu: float | None = Field(default=None, description="the plan's decode pool's own rate")
    formula_at_plan_rates: float | None = Field(default=None, description="the formula with the pools' own rates")
    note: str


class Explanation(_Out):
    binding_constraints: list[str]
    notes: list[str]
    ratio_check: RatioCheck | None = None
    candidates_dropped: dict[str, int] = Field(default_factory=dict, description="filter name -> proposals it dropped")
    reasons: list[str] = Field(default_factory=list, description="why no plan exists (infeasible only)")
    suggestions: list[str] = Field(default_factory=list, description="nearest changes that would make it feasible")


class PlacedInstance(_Out):
    instance_id: str
    role: Role
    node: str
    gpus: list[int] = Field(description="GPU indices on the node (first stage when PP spans nodes)")
    nodes: list[str] = Field(default_factory=list, description="every node the instance spans, in stage order")
    cuda_visible_devices: str = Field(description="'0,1' on one node; 'node-a:0,1;node-b:0,1' over several")
    pool_index: int | None = Field(default=None, ge=0, description="position of the instance's pool in plan.pools")
    gpus_by_node: dict[str, list[int]] = Field(
        default_factory=dict, description="GPU indices the instance uses on each of its nodes, in stage order")


class Verification(_Out):
    """The plan replayed in the discrete-event simulator at its planned rate (``solve --verify``)."""

    rate_rps: float
    num_requests: int
    seed: int
    analytic_ttft_ms: Percentiles
    simulated_ttft_ms: Percentiles
    analytic_tpot_ms: Percentiles
    simulated_tpot_ms: Percentiles
    analytic_slo_attainment: float
    simulated_slo_attainment: float
    simulated_goodput_rps: float
    meets_slo: bool = Field(description="the simulation holds every percentile target and the attainment")


class Alternative(_Out):
    """A next-best distinct plan, for --top-k."""

    rank: int
    mode: Mode
    pools: list[Pool]
    totals: Totals
    latency: Latency | None = None
    objective_value: float = Field(description="in the plan's solver.objective_unit")


class Plan(_Out):
    schema_version: int = SCHEMA_VERSION
    status: SolverStatus
    objective: Objective
    mode: Mode | None = Field(description="None when no plan was found")
    model: str
    engine: str
    ep_exchange: EpExchange | None = Field(
        default=None, description="the EP exchange of attention DP + EP the plan's numbers cost (the engine "
        "profile's ep_exchange: allgather_reducescatter, dp_gather or alltoall, the DeepEP-style all-to-all); "
        "emit selects the backend that runs it. None: the engine's built-in profile's (schema 1 plans)")
    workload: dict = Field(description="the workload and SLO the plan was made for, as given")
    pools: list[Pool]
    totals: Totals | None
    latency: Latency | None
    solver: SolverInfo
    explanation: Explanation
    placement: list[PlacedInstance] = Field(default_factory=list)
    alternatives: list[Alternative] = Field(default_factory=list)
    defaults_used: list[str] = Field(default_factory=list, description="inputs that fell back to defaults")
    verification: Verification | None = Field(default=None, description="simulator check, when asked for")
    error_bands: list[ErrorBand] | None = Field(
        default=None, description="expected error of the predicted latencies per GPU generation and mode, from "
        "the calibration residuals of the profile used")
    cluster: str | None = Field(default=None, description="name of the --cluster file whose real nodes placement[] "
                                "names; None when the nodes are a plain budget's idealised ones")
