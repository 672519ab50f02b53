"""Named filters that drop proposals before (structural) or after (performance) the perf model.

Each filter returns None to keep a proposal or a one-line reason to drop it; enumeration counts
the drops per filter name and keeps the first reason as an example, which the explanations and
the infeasibility diagnosis read. Structural filters run in ``STRUCTURAL_FILTERS`` order, so a
proposal is charged to the first rule it breaks. ``STRUCTURAL_MASKS`` holds each structural filter
for all proposals of one GPU type at once (``space.ProposalColumns``); the screen runs those and
asks the per-proposal filter only for the reasons it quotes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.errors import LayoutError
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import Candidate
from layoutopt.optimizer.scaling import cost_units, rate_units
from layoutopt.optimizer.space import Proposal, ProposalColumns, stage_span_problem, stage_spans_allowed
from layoutopt.perf_model import memory
from layoutopt.perf_model.calibration import EngineLike
from layoutopt.perf_model.precision import weight_precision_supported
from layoutopt.perf_model.spans import stage_unit_gpus
from layoutopt.plan import Layout
from layoutopt.workloads.slo import SLO


class FilterContext(BaseModel):
    """What the filters need besides the proposal: model, SLO, lengths, engine."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: ModelSpec
    slo: SLO
    engine: EngineLike = "vllm"
    fit_context_tokens: float = 1.0
    prefill_fit_context_tokens: float = 1.0
    p90_input_tokens: float = 1.0
    max_stage_gpus: dict[str, int] = {}  # GPU type -> most free GPUs in one local domain (cluster file)
    gpu_limits: dict[str, int] = {}  # GPU type -> GPUs the budget allows (types absent: $ cap only)
    max_usd_per_hour: float | None = None

    def context_tokens(self, proposal: Proposal) -> float:
        """Context one sequence must fit at: the long requests of the workload (p99 lengths)."""
        return self.prefill_fit_context_tokens if proposal.role == "prefill" else self.fit_context_tokens

    def context_tokens_of(self, columns: ProposalColumns) -> np.ndarray:
        """``context_tokens`` of each proposal of ``columns``."""
        return np.where(columns.role == "prefill", self.prefill_fit_context_tokens, self.fit_context_tokens)

    def max_batch(self, proposal: Proposal, layout: Layout | None = None) -> int:
        return memory.max_batch_size(self.model, proposal.gpu, layout or proposal.layout,
                                     self.context_tokens(proposal), self.engine)


StructuralFilter = Callable[[FilterContext, Proposal], "str | None"]


def precision_support(ctx: FilterContext, p: Proposal) -> str | None:
    """The GPU must compute in the weight precision or serve it weight-only (dequantized into BF16
    GEMMs: INT4/MXFP4/FP4/FP8 weights on Hopper and Ampere); no FP4 tensor cores before Blackwell."""
    if not weight_precision_supported(p.gpu, p.layout.weight_precision):
        return f"{p.gpu.name} has no {p.layout.weight_precision} support"
    return None


def scaleup_domain(ctx: FilterContext, p: Proposal) -> str | None:
    """A pipeline stage (tp x dp x pcp GPUs) talks every layer: it stays in one local domain or
    spreads over whole ones as the search allows (``space.stage_span_problem``)."""
    return stage_span_problem(ctx.model, p.gpu, p.layout)


def cluster_free_domain(ctx: FilterContext, p: Proposal) -> str | None:
    """On a cluster file, a stage's unit (the stage, or one domain of a spread stage) needs that
    many free GPUs in one local domain."""
    free = ctx.max_stage_gpus.get(p.gpu.name)
    unit = stage_unit_gpus(p.gpu, p.layout.gpus_per_stage)
    if free is not None and unit > free:
        return (f"{p.layout.short_name()}: {unit} GPUs of a stage in one domain but no local domain of the "
                f"cluster has more than {free} free {p.gpu.name}")
    return None


def divisibility(ctx: FilterContext, p: Proposal) -> str | None:
    """Heads, KV heads, experts and layers must split evenly (the perf model's layout rules)."""
    try:
        memory.check_layout(ctx.model, p.gpu, p.layout, allow_cross_domain=True)
    except LayoutError as error:
        return f"{p.layout.short_name()}: {error.allowed}"
    return None


def context_parallel_role(ctx: FilterContext, p: Proposal) -> str | None:
    """DCP shards the cache decode steps read; PCP splits the prompt prefill computes: each has a role."""
    layout = p.layout
    if layout.dcp_size > 1 and p.role == "prefill":
        return f"{layout.short_name()}: DCP shards the decode KV cache; a prefill instance runs no decode step"
    if layout.pcp_size > 1 and p.role == "decode":
        return f"{layout.short_name()}: PCP splits prompts; a decode instance prefills none"
    return None


def budget_holds_one(ctx: FilterContext, p: Proposal) -> str | None:
    """Exact: an instance needing more GPUs (or dollars) than the budget has can be in no plan."""
    gpus = p.layout.gpus_per_instance
    limit = ctx.gpu_limits.get(p.gpu.name)
    if limit is not None and gpus > limit:
        return f"{p.layout.short_name()} needs {gpus} {p.gpu.name} GPUs per instance; the budget has {limit}"
    if ctx.max_usd_per_hour is not None and p.gpu.price is not None:
        usd = p.gpu.price.typical_usd_per_hour * gpus
        if usd > ctx.max_usd_per_hour * (1 + 1e-9):
            return (f"{p.layout.short_name()} on {gpus} {p.gpu.name} costs ${usd:.2f}/h per instance, over the "
                    f"${ctx.max_usd_per_hour:.2f}/h cap")
    return None


def memory_fit(ctx: FilterContext, p: Proposal) -> str | None:
    """Weights, activations, reserve and the KV of ``memory.MIN_KV_SEQUENCES_PER_RANK`` long
    sequences per scheduler (attention-DP rank) fit in each GPU."""
    per_rank = ctx.max_batch(p) // p.layout.dp_size
    if per_rank >= memory.MIN_KV_SEQUENCES_PER_RANK:
        return None
    try:
        memory.check_fits(ctx.model, p.gpu, p.layout, ctx.context_tokens(p), ctx.engine)
    except LayoutError as error:
        return error.allowed
    return (f"{p.layout.short_name()} on {p.gpu.name}: each scheduler's KV cache holds {per_rank} sequences of "
            f"{ctx.context_tokens(p):.0f} tokens, fewer than the {memory.MIN_KV_SEQUENCES_PER_RANK} a deployable "
            "pool needs")


STRUCTURAL_FILTERS: tuple[tuple[str, StructuralFilter], ...] = (
    ("precision support", precision_support),
    ("scale-up domain", scaleup_domain),
    ("free GPUs per domain", cluster_free_domain),
    ("divisibility", divisibility),
    ("context parallelism", context_parallel_role),
    ("memory fit", memory_fit),
    ("budget", budget_holds_one),
)


# ----------------------------------------------------------------------------------------------
# The structural filters over all proposals of one GPU type: ``drops(ctx, columns, alive)`` marks
# the proposals the filter drops, read only where ``alive`` (no earlier filter dropped them).

StructuralMask = Callable[[FilterContext, ProposalColumns, np.ndarray], np.ndarray]


def _per_value(column: np.ndarray, value_of: Callable) -> np.ndarray:
    distinct, inverse = np.unique(column, return_inverse=True)
    return np.array([value_of(str(v)) for v in distinct], dtype=bool)[inverse.reshape(-1)]


def precision_support_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    return _per_value(c.weight_precision, lambda w: not weight_precision_supported(c.gpu, w))


def scaleup_domain_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    return ~stage_spans_allowed(ctx.model, c.gpu, c.degree("tp_size"), c.degree("dp_size"), c.degree("pcp_size"),
                                c.degree("ep_size"))


def cluster_free_domain_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    free = ctx.max_stage_gpus.get(c.gpu.name)
    return stage_unit_gpus(c.gpu, c.gpus_per_stage) > free if free is not None else np.zeros(len(c), dtype=bool)


def divisibility_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    return ~memory.layouts_pass_check(ctx.model, c.gpu, c.layouts(), allow_cross_domain=True)


def context_parallel_role_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    return (((c.degree("dcp_size") > 1) & (c.role == "prefill"))
            | ((c.degree("pcp_size") > 1) & (c.role == "decode")))


def memory_fit_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    drops = np.zeros(len(c), dtype=bool)
    rows = np.flatnonzero(alive)
    drops[rows] = ~memory.fits_sequences(ctx.model, c.gpu, c.layouts(rows), ctx.context_tokens_of(c)[rows],
                                            ctx.engine)
    return drops


def budget_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    gpus = c.gpus_per_instance
    limit = ctx.gpu_limits.get(c.gpu.name)
    drops = gpus > limit if limit is not None else np.zeros(len(c), dtype=bool)
    if ctx.max_usd_per_hour is not None and c.gpu.price is not None:
        drops |= c.gpu.price.typical_usd_per_hour * gpus > ctx.max_usd_per_hour * (1 + 1e-9)
    return drops


STRUCTURAL_MASKS: dict[str, StructuralMask] = {
    "precision support": precision_support_drops,
    "scale-up domain": scaleup_domain_drops,
    "free GPUs per domain": cluster_free_domain_drops,
    "divisibility": divisibility_drops,
    "context parallelism": context_parallel_role_drops,
    "memory fit": memory_fit_drops,
    "budget": budget_drops,
}


def latency_floor(ctx: FilterContext, candidate_role: str, unloaded_ttft_ms: float | None,
                  unloaded_tpot_ms: float | None) -> str | None:
    """An instance whose unloaded latency already misses the strictest SLO target cannot serve it."""
    _, ttft_target = ctx.slo.strictest_ttft
    _, tpot_target = ctx.slo.strictest_tpot
    if candidate_role != "decode" and unloaded_ttft_ms is not None and unloaded_ttft_ms > ttft_target:
        return f"unloaded TTFT {unloaded_ttft_ms:.0f} ms > target {ttft_target:g} ms"
    if candidate_role != "prefill" and unloaded_tpot_ms is not None and unloaded_tpot_ms > tpot_target:
        return f"unloaded TPOT {unloaded_tpot_ms:.1f} ms > target {tpot_target:g} ms"
    return None


def _dominates(better: Candidate, worse: Candidate) -> bool:
    """k instances of ``better`` replace one of ``worse`` in every coefficient the CP-SAT model reads.

    Same role and GPU type (budget, mode), ``k = gpus(worse) / gpus(better)`` whole instances (no
    more GPUs), and, in the solver's integers: no more cost, no less capacity, no less NIC
    bandwidth, no more KV bytes per request, NVLink groups no larger (domain packing).
    """
    return _factor_if_dominates(better, worse) > 0


def _factor_if_dominates(better: Candidate, worse: Candidate) -> int:
    """``k`` when ``_dominates(better, worse)``, else 0 (the hot loop of dominance pruning: each
    field read once)."""
    if better.role != worse.role or better.gpu != worse.gpu:
        return 0
    better_gpus, worse_gpus = better.layout.gpus_per_instance, worse.layout.gpus_per_instance
    if worse_gpus % better_gpus:
        return 0
    k = worse_gpus // better_gpus
    if better.kv_bytes_per_request > worse.kv_bytes_per_request:
        return 0
    if better.domain_group_gpus > worse.domain_group_gpus:
        return 0
    if k * better.nic_gb_per_s < worse.nic_gb_per_s * (1 - 1e-12):
        return 0
    if k * max(1, cost_units(better.cost_usd_per_hour)) > max(1, cost_units(worse.cost_usd_per_hour)):
        return 0
    if k * better.cost_usd_per_hour > worse.cost_usd_per_hour * (1 + 1e-9):
        return 0
    if k * rate_units(better.capacity_rps) >= rate_units(worse.capacity_rps) and (
            k * better.capacity_rps >= worse.capacity_rps):
        return k
    return 0


def dominates_strictly(better: Candidate, worse: Candidate) -> bool:
    """``_dominates`` with k instances of ``better`` serving strictly more: a candidate whose
    capacity is only bounded from above (``worse``) can then never tie with ``better`` and be kept
    in its place by ``drop_dominated``'s order."""
    k = _factor_if_dominates(better, worse)
    return k > 0 and k * better.capacity_rps > worse.capacity_rps


def drop_dominated(candidates: list[Candidate]) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """Remove candidates some other candidate dominates; ties keep the one listed first by size.

    Replacing one instance by ``k`` smaller ones with at least the same capacity keeps every
    constraint (same GPUs, price and NIC bandwidth, no more KV bytes), so a dominated candidate
    can never make a plan better; dropping it shrinks the model without losing optimality.
    """
    ordered = sorted(candidates, key=lambda c: (c.role, c.gpu, c.gpus_per_instance, -c.capacity_rps,
                                                   c.kv_bytes_per_request, c.cost_usd_per_hour, c.name))
    kept: list[Candidate] = []
    dropped: list[tuple[Candidate, str]] = []
    for candidate in ordered:
        winner = next((k for k in kept if _dominates(k, candidate)), None)
        if winner is None:
            kept.append(candidate)
        else:
            k = candidate.gpus_per_instance // winner.gpus_per_instance
            reason = f"{candidate.name}: {k} x {winner.name} serve at least as much for the same GPUs"
            dropped.append((candidate, reason))
    order = {c.name: i for i, c in enumerate(candidates)}
    return sorted(kept, key=lambda c: order[c.name]), dropped
