"""Build the ``CandidateTable``: propose layouts, filter them, ask the performance model.

Proposals come from ``space`` (as columns, ``proposal_columns``); the structural filters and the
engine rules drop those that cannot run, all proposals of a GPU type at once; every survivor gets
an ``InstancePerf`` (capacity at the SLO with headroom, latency percentiles, unloaded latencies);
the latency floor and the capacity check drop those that cannot meet the SLO; dominated
candidates go last. Every drop is counted under its filter's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.engines import EngineRef, check_layout, engine_ref_of, first_broken_rules
from layoutopt.optimizer.candidates import (
    Candidate, CandidateTable, FilterRecord, LatencyFloor, ModeChoice, OverBudget,
)
from layoutopt.optimizer.engine_rules import RULE_PREFIX, incompatible_pairs, pairing_signatures, prune_with_pairing
from layoutopt.optimizer.filters import (
    STRUCTURAL_FILTERS, STRUCTURAL_MASKS, FilterContext, dominates_strictly, latency_floor,
)
from layoutopt.plan import Percentiles
from layoutopt.optimizer.pooling import with_pool_capacities
from layoutopt.optimizer.pre_cuts import DEFAULT_PRE_CUTS, PreCuts
from layoutopt.optimizer.space import LAYOUT_DEGREES, Proposal, ProposalColumns, proposal_columns, proposal_count
from layoutopt.perf_model.calibration import LINK_EFFICIENCY, EngineProfile
from layoutopt.perf_model.capacity import InstancePerf
from layoutopt.optimizer.evaluation import Dominated, capacities, parallel_map, pruned_capacities
from layoutopt.optimizer.workers import worker_pool
from layoutopt.perf_model.kv_transfer import kv_transfer_bytes
from layoutopt.plan import Layout, Role
from layoutopt.perf_model.links import Link, inter_node_link
from layoutopt.perf_model.spans import local_domain_gpus, stage_unit_gpus
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

# Lengths a sequence must fit at in memory: the long requests of the workload, not the mean.
FIT_QUANTILE = 0.99
# Proposals (all GPU types) from which screening them in worker processes pays for starting them:
# the screens take about 5 us a proposal (deepseek-v3 over the catalog: 50,832 in 0.3 CPU s on
# one core, 0.6 CPU s in two workers that each load the engine data again).
MIN_PARALLEL_SCREEN_PROPOSALS = 400_000


class _Tally:
    """Drop counts and one example reason per filter, in first-seen order."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.fastest_ttft: LatencyFloor | None = None
        self.fastest_tpot: LatencyFloor | None = None
        self._ranks: dict[str, float] = {}
        self.smallest_over_budget: OverBudget | None = None

    def over_budget(self, proposal: Proposal) -> None:
        """Remember the smallest (then cheapest) instance the budget cannot hold."""
        gpus = proposal.layout.gpus_per_instance
        usd = proposal.gpu.price.typical_usd_per_hour * gpus if proposal.gpu.price is not None else 0.0
        best = self.smallest_over_budget
        if best is None or (gpus, usd) < (best.gpus_per_instance, best.cost_usd_per_hour):
            self.smallest_over_budget = OverBudget(candidate=proposal.name, gpu=proposal.gpu.name,
                                                   gpus_per_instance=gpus, cost_usd_per_hour=usd)

    def observe(self, proposal: Proposal, perf) -> None:
        """Remember the fastest unloaded TTFT and TPOT seen, for infeasibility reports."""
        if proposal.role != "decode" and perf.unloaded_ttft_ms > 0 and (
                self.fastest_ttft is None or perf.unloaded_ttft_ms < self.fastest_ttft.latency_ms):
            self.fastest_ttft = self._floor(proposal, perf.unloaded_ttft_ms)
        if proposal.role != "prefill" and perf.unloaded_tpot_ms > 0 and (
                self.fastest_tpot is None or perf.unloaded_tpot_ms < self.fastest_tpot.latency_ms):
            self.fastest_tpot = self._floor(proposal, perf.unloaded_tpot_ms)

    @staticmethod
    def _floor(proposal: Proposal, latency_ms: float) -> LatencyFloor:
        return LatencyFloor(candidate=proposal.name, role=proposal.role, gpu=proposal.gpu.name,
                            layout=proposal.layout, latency_ms=latency_ms)

    def drop(self, name: str, reason: str, rank: float | None = None, count: int = 1) -> None:
        """Count ``count`` drops (``reason`` that of the first, or of the lowest-``rank`` one); the
        example is the first reason, or the lowest-``rank`` one when ranks are given."""
        self.counts[name] = self.counts.get(name, 0) + count
        if rank is None:
            self.examples.setdefault(name, reason)
        elif name not in self._ranks or rank < self._ranks[name]:
            self._ranks[name] = rank
            self.examples[name] = reason

    def merge(self, later: "_Tally") -> None:
        """Add the tally of proposals that come after this one's (the same as one tally over both)."""
        for name, count in later.counts.items():
            self.counts[name] = self.counts.get(name, 0) + count
            if name in later._ranks:
                if name not in self._ranks or later._ranks[name] < self._ranks[name]:
                    self._ranks[name] = later._ranks[name]
                    self.examples[name] = later.examples[name]
            else:
                self.examples.setdefault(name, later.examples[name])
        for attr in ("fastest_ttft", "fastest_tpot"):
            mine, theirs = getattr(self, attr), getattr(later, attr)
            if theirs is not None and (mine is None or theirs.latency_ms < mine.latency_ms):
                setattr(self, attr, theirs)
        best, other = self.smallest_over_budget, later.smallest_over_budget
        if other is not None and (best is None or (other.gpus_per_instance, other.cost_usd_per_hour)
                                  < (best.gpus_per_instance, best.cost_usd_per_hour)):
            self.smallest_over_budget = other

    def records(self) -> tuple[FilterRecord, ...]:
        return tuple(FilterRecord(name=n, num_dropped=c, example=self.examples[n]) for n, c in self.counts.items())


def roles_for_mode(mode: ModeChoice) -> list[Role]:
    return {"auto": ["prefill", "decode", "colocated"], "colocated": ["colocated"],
            "disaggregated": ["prefill", "decode"]}[mode]


def filter_context(model: ModelSpec, workload: Workload, slo: SLO, engine: "str | EngineProfile",
                   max_stage_gpus: Mapping[str, int] | None = None, gpu_limits: Mapping[str, int] | None = None,
                   max_usd_per_hour: float | None = None) -> FilterContext:
    p_in = workload.input_tokens.quantile_tokens(FIT_QUANTILE)
    p_out = workload.output_tokens.quantile_tokens(FIT_QUANTILE)
    return FilterContext(model=model, slo=slo, engine=engine, fit_context_tokens=p_in + p_out,
                         prefill_fit_context_tokens=p_in, p90_input_tokens=workload.input_tokens.quantile_tokens(0.9),
                         max_stage_gpus=dict(max_stage_gpus or {}), gpu_limits=dict(gpu_limits or {}),
                         max_usd_per_hour=max_usd_per_hour)


def kv_link_of(gpu: GpuSpec, kv_links: Mapping[str, Link] | None) -> Link:
    """The KV link a prefill instance on ``gpu`` counts on: the cluster's, else the GPU's own NIC."""
    if kv_links and gpu.name in kv_links:
        return kv_links[gpu.name]
    return inter_node_link(gpu)


@dataclass(frozen=True)
class _Screen:
    """What the structural and engine-rule screens of every GPU type share."""

    ctx: FilterContext
    engine: EngineRef | None
    roles: tuple[Role, ...]
    precision: str
    cuts: PreCuts


def _first_drops(screen: _Screen, columns: ProposalColumns) -> tuple[list[str], np.ndarray]:
    """(the structural filters in order, the index of the first one that drops each proposal; -1: none)."""
    masks = STRUCTURAL_MASKS | screen.cuts.masks()
    names = [name for name, _ in STRUCTURAL_FILTERS] + [name for name, _ in screen.cuts.filters()]
    first = np.full(len(columns), -1)
    alive = np.ones(len(columns), dtype=bool)
    for i, name in enumerate(names):
        drops = masks[name](screen.ctx, columns, alive) & alive
        first[drops] = i
        alive &= ~drops
    return names, first


def _tally_structural(screen: _Screen, columns: ProposalColumns, names: list[str], first: np.ndarray,
                      tally: _Tally) -> None:
    """Record the structural drops as one pass over the proposals in order records them: names in
    the order of their first drop, the first one's reason (the budget's: the smallest instance's).
    The reasons come from the per-proposal filters (``STRUCTURAL_FILTERS``)."""
    checks = dict(STRUCTURAL_FILTERS) | dict(screen.cuts.filters())

    def reason(name: str, row: int) -> str:
        proposal = columns.proposal(row)
        found = checks[name](screen.ctx, proposal)
        if not found:
            raise RuntimeError(f"filter {name!r} keeps {proposal.name}, which its mask drops")
        return f"{proposal.role} on {proposal.gpu.name}: {found}"

    dropped = [(int(rows[0]), i, rows) for i in range(len(names)) if len(rows := np.flatnonzero(first == i))]
    gpus = columns.gpus_per_instance
    for _, i, rows in sorted(dropped, key=lambda d: d[0]):
        name = names[i]
        if name != "budget":
            tally.drop(name, reason(name, int(rows[0])), count=len(rows))
            continue
        # The budget's example is the smallest instance it cannot hold (diagnosis quotes it): the
        # first of the fewest GPUs, and for ``over_budget`` the first of the fewest GPUs, then dollars.
        price = columns.gpu.price.typical_usd_per_hour if columns.gpu.price is not None else 0.0
        tally.over_budget(columns.proposal(int(rows[np.lexsort((rows, price * gpus[rows], gpus[rows]))[0]])))
        row = int(rows[np.argmin(gpus[rows])])
        tally.drop(name, reason(name, row), int(gpus[row]), count=len(rows))


def _screen_gpu(screen: _Screen, gpu: GpuSpec) -> tuple[list[Proposal], _Tally, _Tally, int]:
    """(proposals of ``gpu`` that pass the structural filters and the engine rules, the drops of
    each stage, how many were proposed): each filter and rule over all proposals at once
    (``filters.STRUCTURAL_MASKS``, ``engines.first_broken_rules``); ``Proposal`` objects only for
    the survivors and the quoted examples."""
    structural, rules = _Tally(), _Tally()
    columns = proposal_columns(screen.ctx.model, gpu, list(screen.roles), screen.precision)
    names, first = _first_drops(screen, columns)
    _tally_structural(screen, columns, names, first, structural)
    rows = np.flatnonzero(first < 0)
    broken: list[str | None] = [None] * len(rows)
    if screen.engine is not None:
        broken = first_broken_rules(screen.engine, screen.ctx.model, gpu,
                                    columns.layouts(rows) | {"role": columns.role[rows]})
    rule_drops: dict[str, list[int]] = {}
    passing = []
    for row, rule in zip(rows.tolist(), broken):
        if rule is None:
            passing.append(row)
        else:
            rule_drops.setdefault(rule, []).append(row)
    # One Layout object per layout of this GPU, whatever the role (the memos downstream look
    # arguments up by identity first); the Proposal fields are validated already (the columns).
    layouts: dict[tuple, Layout] = {}
    kept: list[Proposal] = []
    for degrees, weight, kv, role in zip(columns.degrees[passing].tolist(), columns.weight_precision[passing].tolist(),
                                         columns.kv_precision[passing].tolist(), columns.role[passing].tolist()):
        key = (*degrees, weight, kv)
        layout = layouts.get(key)
        if layout is None:
            layout = layouts[key] = Layout(**dict(zip(LAYOUT_DEGREES, degrees)), weight_precision=weight,
                                           kv_precision=kv)
        kept.append(Proposal.model_construct(role=role, gpu=gpu, layout=layout))
    for rule, dropped in rule_drops.items():
        proposal = columns.proposal(dropped[0])
        first_violation = check_layout(screen.engine, screen.ctx.model, gpu, proposal.layout, proposal.role)[0]
        rules.drop(RULE_PREFIX + rule, f"{proposal.name}: {first_violation}", count=len(dropped))
    return kept, structural, rules, len(columns)


def screened_proposals(screen: _Screen, gpus: Sequence[GpuSpec], tally: _Tally) -> tuple[list[Proposal], int]:
    """(every surviving proposal in enumeration order, number proposed): one screen per GPU type,
    in worker processes when the space is large. The drops are merged into ``tally`` as one pass
    over the whole space records them: every structural drop in GPU order, then the rules'."""
    sizes = [proposal_count(screen.ctx.model, gpu, list(screen.roles), screen.precision) for gpu in gpus]
    outputs = parallel_map(_screen_gpu, screen, list(gpus), sizes, sum(sizes) >= MIN_PARALLEL_SCREEN_PROPOSALS)
    for _, structural, _, _ in outputs:
        tally.merge(structural)
    for _, _, rules, _ in outputs:
        tally.merge(rules)
    return [p for kept, *_ in outputs for p in kept], sum(count for *_, count in outputs)


def _percentiles(value) -> Percentiles | None:
    if value is None:
        return None
    return Percentiles(p50=float(value.p50), p90=float(value.p90), p99=float(value.p99))


def candidate_shape(proposal: Proposal, model: ModelSpec, workload: Workload, headroom: float,
                    kv_links: Mapping[str, Link] | None, capacity_rps: float) -> Candidate:
    """A ``Candidate`` with what the solver reads of ``proposal`` apart from the perf model (price,
    GPUs, KV bytes and NIC, NVLink group) and the given capacity; no latencies."""
    gpu, layout, role = proposal.gpu, proposal.layout, proposal.role
    link = kv_link_of(gpu, kv_links)
    # KV leaves over the instance's NICs; keep the same utilization headroom as the GPUs.
    nic_gb_per_s = layout.gpus_per_instance * link.bandwidth_gb_per_s * LINK_EFFICIENCY[link.kind] * headroom
    kv_bytes = kv_transfer_bytes(model, layout.kv_precision, workload.mean_input_tokens) if role == "prefill" else 0.0
    return Candidate(
        name=proposal.name, role=role, gpu=gpu.name, layout=layout,
        cost_usd_per_hour=gpu.price.typical_usd_per_hour * layout.gpus_per_instance,
        capacity_rps=capacity_rps, max_batch_size=1, kv_bytes_per_request=kv_bytes, nic_gb_per_s=nic_gb_per_s,
        # pipeline_link() puts an instance that fits one local domain on its fabric, so placement must
        # keep it there; a stage spread over domains needs one whole domain per unit (perf_model.spans).
        nvlink_group_gpus=(layout.gpus_per_instance if layout.gpus_per_instance <= local_domain_gpus(gpu)
                           else stage_unit_gpus(gpu, layout.gpus_per_stage)),
    )


def candidate_from_perf(proposal: Proposal, perf, model: ModelSpec, workload: Workload, headroom: float,
                        kv_links: Mapping[str, Link] | None = None) -> Candidate:
    """A ``Candidate`` from the perf model's ``InstancePerf`` and the GPU's price and KV link."""
    role = proposal.role
    shape = candidate_shape(proposal, model, workload, headroom, kv_links, float(perf.capacity_rps))
    return shape.model_copy(update=dict(
        max_batch_size=max(1, int(perf.max_batch_size)),
        ttft_ms=_percentiles(perf.ttft_ms) if role != "decode" else None,
        tpot_ms=_percentiles(perf.tpot_ms) if role != "prefill" else None,
        unloaded_ttft_ms=perf.unloaded_ttft_ms if role != "decode" else None,
        unloaded_tpot_ms=perf.unloaded_tpot_ms if role != "prefill" else None,
        prefill_tok_per_s=float(perf.prefill_tok_per_s or 0.0), decode_tok_per_s=float(perf.decode_tok_per_s or 0.0),
        bottleneck=str(perf.bottleneck or "")))


def _becomes_candidate(ctx: FilterContext, perf: InstancePerf) -> bool:
    """The evaluated instance passes the latency floor and serves some rate at the SLO."""
    return (perf.feasible and perf.capacity_rps > 0
            and latency_floor(ctx, perf.role, perf.unloaded_ttft_ms, perf.unloaded_tpot_ms) is None)


def evaluate(ctx: FilterContext, proposals: Sequence[Proposal], workload: Workload, headroom: float,
             tally: _Tally, kv_links: Mapping[str, Link] | None = None, engine: EngineRef | None = None,
             prune_dominated: bool = True) -> list[Candidate]:
    """InstancePerf for each proposal; drop those that miss the SLO unloaded or at any load.

    ``kv_links`` (GPU type -> Link) is the KV path a prefill instance counts on; its NIC by default.
    With ``prune_dominated`` a proposal whose capacity bound a smaller evaluated one beats is not
    evaluated (``evaluation.pruned_capacities``) and is counted as dominated; ``engine`` gives the
    pairing rules that keep such comparisons between proposals with the same partners.
    """
    priced = []
    for proposal in proposals:
        if proposal.gpu.price is None:
            tally.drop("price", f"{proposal.gpu.name} has no price in the catalog (pass a prices file)")
        else:
            priced.append(proposal)
    jobs = [(p.gpu, p.layout, p.role, kv_link_of(p.gpu, kv_links) if p.role == "prefill" else None) for p in priced]
    if prune_dominated:
        shapes = [candidate_shape(p, ctx.model, workload, headroom, kv_links, 1.0) for p in priced]
        signatures = pairing_signatures(engine, ctx.model, priced)
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(priced):
            groups.setdefault((p.role, p.gpu.name, signatures[p.name]), []).append(i)
        perfs = pruned_capacities(ctx.model, workload, ctx.slo, ctx.engine, headroom, jobs, shapes,
                                  list(groups.values()), dominates_strictly, partial(_becomes_candidate, ctx))
    else:
        perfs = capacities(ctx.model, workload, ctx.slo, ctx.engine, headroom, jobs)
    candidates = []
    for proposal, perf in zip(priced, perfs):
        tally.observe(proposal, perf.bound if isinstance(perf, Dominated) else perf)
        if isinstance(perf, Dominated):
            tally.drop("dominated", f"{proposal.name}: {perf.factor} x {perf.winner} serve more for the same GPUs "
                                    f"than its capacity can reach ({perf.bound.capacity_rps:.3g} req/s at most)")
            continue
        reason = latency_floor(ctx, proposal.role, perf.unloaded_ttft_ms, perf.unloaded_tpot_ms)
        if reason:
            tally.drop("latency floor", f"{proposal.name}: {reason}")
            continue
        if not perf.feasible or perf.capacity_rps <= 0:
            tally.drop("capacity at SLO", f"{proposal.name}: {perf.reason or 'no rate meets the SLO'}")
            continue
        candidates.append(candidate_from_perf(proposal, perf, ctx.model, workload, headroom, kv_links))
    return candidates


def build_candidate_table(model: ModelSpec, gpus: Sequence[GpuSpec], workload: Workload, slo: SLO, *,
                          gpu_limits: dict[str, int], max_usd_per_hour: float | None, min_rate_rps: float | None,
                          mode: ModeChoice = "auto", engine: str = "vllm", precision: str = "auto",
                          headroom: float = 0.7, kv_links: Mapping[str, Link] | None = None,
                          max_stage_gpus: Mapping[str, int] | None = None,
                          domain_capacity_gpus: Mapping[str, dict[int, int]] | None = None,
                          profile: EngineProfile | None = None, pre_cuts: PreCuts | None = None,
                          prune_dominated: bool = True, pool_capacities: bool = True) -> CandidateTable:
    """Enumerate, filter and evaluate every candidate for ``gpus``; the solver's whole input.

    ``profile`` (a profile file's constants, ``layoutopt calibrate``) replaces the built-in
    performance-model profile of ``engine``; the engine reference still picks the rules.

    A cluster file adds ``kv_links`` (GPU type -> the KV link prefill counts on),
    ``max_stage_gpus`` and ``domain_capacity_gpus`` (see ``cluster_fit``); ``gpus`` then already
    carry the cluster's NVLink domain size. ``pre_cuts`` chooses the former heuristics applied (default ``DEFAULT_PRE_CUTS``).
    ``prune_dominated=False`` keeps dominated candidates: plans robust across scenarios share one set
    of instances, and a layout dominated under one scenario's workload may not be under another's.
    ``pool_capacities=False`` skips the capacity-by-instance-count grid (a table only asked whether
    any layout serves, as the infeasibility diagnosis asks of other GPU types).
    """
    # The name (or a fitted profile) drives the perf model, the version the engine rules; a profile
    # given apart (a profile file) keeps the engine reference's rules.
    ref = engine_ref_of(engine)
    constants = profile or (ref.name if isinstance(engine, str) else engine)
    ctx = filter_context(model, workload, slo, constants, max_stage_gpus, gpu_limits, max_usd_per_hour)
    tally = _Tally()
    cuts = DEFAULT_PRE_CUTS if pre_cuts is None else pre_cuts
    screen = _Screen(ctx, ref, tuple(roles_for_mode(mode)), precision, cuts)
    # One set of worker processes for the screens, the evaluation and the pool capacities.
    with worker_pool():
        survivors, num_proposed = screened_proposals(screen, list(gpus), tally)
        candidates = evaluate(ctx, survivors, workload, headroom, tally, kv_links, ref, prune_dominated)
        gpu_specs = {g.name: g for g in gpus}
        if prune_dominated:
            candidates, dominated, pairs = prune_with_pairing(ref, model, candidates, gpu_specs)
        else:
            dominated, pairs = [], incompatible_pairs(ref, model, candidates, gpu_specs)
        for candidate, reason in dominated:
            tally.drop("dominated", reason)
        table = CandidateTable(
            candidates=tuple(candidates), gpu_limits=dict(gpu_limits), max_usd_per_hour=max_usd_per_hour,
            min_rate_rps=min_rate_rps, mode=mode, mean_input_tokens=workload.mean_input_tokens,
            mean_output_tokens=workload.mean_output_tokens, num_considered=num_proposed, filters=tally.records(),
            fastest_ttft=tally.fastest_ttft, fastest_tpot=tally.fastest_tpot,
            smallest_over_budget=tally.smallest_over_budget,
            domain_capacity_gpus={g: dict(c) for g, c in (domain_capacity_gpus or {}).items()},
            incompatible_pairs=pairs,
        )
        if not pool_capacities:
            return table
        # n instances behind the router share one queue: their capacity as a function of n.
        return with_pool_capacities(table, ctx.model, gpu_specs, workload, slo, constants, headroom,
                                    kv_links)
