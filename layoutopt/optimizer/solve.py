"""``solve()``: the public entry point — inputs in, a typed ``Plan`` out (infeasible included).

Defaults, for the command people already write (``layoutopt solve --budget 32xH100 --slo slo.yaml``):
the model defaults to ``DEFAULT_MODEL``, the workload to ``presets.default_workload()`` (chat),
the SLO to ``DEFAULT_SLO`` (the interactive-chat targets of ``examples/slo.yaml``); every default
taken is listed in ``Plan.defaults_used``.

Stages:
1. the layout CP-SAT model (``search``) over candidates evaluated for the budget's GPUs; with a
   cluster file, for the cluster's free GPUs, NVLink domains, packing limits and same-rack KV link
   (``cluster_fit``);
2. placement (``placing``, the topology's CP-SAT model) on the cluster, or on standard nodes in
   one rack for a plain budget, which fills ``placement[]``;
3. with a cluster file only, when the placed prefill->decode path is slower than the KV link the
   candidates assumed (the pools crossed an oversubscribed spine), one re-solve that feeds this
   back: the better of (a) prefill and decode kept in one rack, with the same-rack link, and
   (b) every candidate re-evaluated with the cross-rack link; the result is placed again. The
   reported plan is always the placed one; a plan that cannot be placed comes back infeasible
   with the placement's reasons.
Between 2 and 3, when placement finds no split over nodes the engine's rule (``uneven_nodes``)
accepts for a pool, the optimizer solves again with fewer instances of that pool's layout (at most
as many as legal splits hold, none when no split does) and places again, a few rounds
(``rule_rounds``); such a plan is ``feasible``, optimal only over the table with those caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from layoutopt.engines import parse_engine_ref
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import HardwareCatalog, load_catalog
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.cluster_fit import ClusterLimits, cluster_budget, cluster_gpus, cluster_limits
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.placing import (
    budget_cluster, kv_bytes_per_request, kv_link_too_slow, place_on_cluster, placement_notes, slowest_link,
    unplaced_plan, with_placement,
)
from layoutopt.plan import Objective, Plan
from layoutopt.optimizer.rule_rounds import Cap, capped, label_replanned, replan_around_rule, with_failures
from layoutopt.optimizer.plan_builder import build_plan, infeasible_plan
from layoutopt.optimizer.scaling import to_integer_table
from layoutopt.optimizer.search import SearchResult, search
from layoutopt.perf_model.calibration import EngineProfile
from layoutopt.optimizer.solver import DEFAULT_TOLERANCE_FRACTION
from layoutopt.perf_model.links import Link
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload, check_fits_context

if TYPE_CHECKING:
    from layoutopt.topology import Cluster

DEFAULT_MODEL = "qwen3-32b"
MAX_TOLERANCE_FRACTION = 0.5
# Least solver time a later phase (placement, second stage) gets when the limit is spent.
MIN_PHASE_TIME_S = 0.1
DEFAULT_SLO = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}, attainment=0.9)
OBJECTIVES: tuple[Objective, ...] = ("goodput-per-dollar", "max-goodput", "min-cost")
MODES = ("auto", "colocated", "disaggregated")
PRECISION_CHOICES = ("auto", "bf16", "fp8", "fp4")


MAX_TIME_LIMIT_S = 3600.0  # one hour of solver (deterministic) time: longer is a typo, not a plan

def _choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InputError(field, value, f"one of {', '.join(allowed)}")
    return value


def _resolve_model(model: str | ModelSpec | None, defaults: list[str]) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    from layoutopt.model_catalog.catalog import get_model

    if model is None:
        defaults.append(f"model: {DEFAULT_MODEL}")
        model = DEFAULT_MODEL
    return get_model(model)


def _resolve_slo(slo: SLO | str | Path | None, defaults: list[str]) -> SLO:
    if isinstance(slo, SLO):
        return slo
    if slo is None:
        targets = [f"TTFT {k} <= {v:g} ms" for k, v in DEFAULT_SLO.ttft_ms.items()]
        targets += [f"TPOT {k} <= {v:g} ms" for k, v in DEFAULT_SLO.tpot_ms.items()]
        defaults.append(f"slo: the built-in default, {', '.join(targets)}, attainment {DEFAULT_SLO.attainment:g}")
        return DEFAULT_SLO
    from layoutopt.workloads.loaders import load_slo

    return load_slo(slo)


def _resolve_workload(workload: Workload | str | Path | None, isl: int | None, osl: int | None,
                      rate_rps: float | None, defaults: list[str]) -> Workload:
    from layoutopt.workloads.presets import default_workload, workload_from_lengths

    if (isl is None) != (osl is None):
        raise InputError("--isl/--osl", isl if osl is None else osl, "give both --isl and --osl, or neither")
    if isl is not None and workload is not None:
        raise InputError("--workload", workload, "give either a workload file or --isl/--osl, not both")
    if isl is not None:
        if isl < 1 or osl < 1:
            raise InputError("--isl/--osl", (isl, osl), "token counts >= 1")
        resolved = workload_from_lengths(isl, osl)
    elif isinstance(workload, Workload):
        resolved = workload
    elif workload is None:
        resolved = default_workload()
        defaults.append(f"workload: {resolved.name} preset (mean {resolved.mean_input_tokens:.0f} in / "
                        f"{resolved.mean_output_tokens:.0f} out tokens)")
    else:
        from layoutopt.workloads.loaders import load_workload

        resolved = load_workload(workload)
    if rate_rps is not None:
        if not rate_rps > 0:
            raise InputError("--rate", rate_rps, "a request rate > 0 req/s")
        resolved = resolved.model_copy(update={"arrival_rate_rps": float(rate_rps)})
    return resolved


def _budget_gpus(budget: Budget, catalog: HardwareCatalog):
    if budget.gpu_counts:
        return [catalog.gpu(name) for name in budget.gpu_counts]
    return [g for g in catalog.gpus if g.price is not None]


def _resolve_cluster(cluster: "str | Path | Cluster | None", catalog: HardwareCatalog) -> "Cluster | None":
    if cluster is None:
        return None
    from layoutopt.topology import Cluster, load_cluster

    return cluster if isinstance(cluster, Cluster) else load_cluster(cluster, catalog)


def _better(first: Plan, second: Plan, objective: str) -> Plan:
    """The plan that scores higher on ``objective`` (``first`` on ties)."""
    a, b = first.totals, second.totals
    if objective == "min-cost":
        return second if b.cost_usd_per_hour < a.cost_usd_per_hour * (1 - 1e-9) else first
    if objective == "max-goodput":
        return second if b.goodput_rps > a.goodput_rps * (1 + 1e-9) else first
    return second if b.requests_per_usd > a.requests_per_usd * (1 + 1e-9) else first


def solve(model: str | ModelSpec | None, budget: str | Budget | None = None, slo: SLO | str | Path | None = None,
          workload: Workload | str | Path | None = None, *, isl: int | None = None, osl: int | None = None,
          rate_rps: float | None = None, objective: str = "goodput-per-dollar", mode: str = "auto",
          engine: str = "vllm", precision: str = "auto", headroom: float = 0.7, top_k: int = 0,
          time_limit_s: float = 10.0, gpus_path: str | Path | None = None,
          prices_path: str | Path | None = None, cluster: "str | Path | Cluster | None" = None,
          spread_racks: bool = False, profile: EngineProfile | None = None,
          tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION) -> Plan:
    """The serving plan that optimizes ``objective`` for ``model`` within ``budget`` under ``slo``.

    ``budget`` is a string such as '32xH100', '16xH100+16xH200' or '$400/h' (or a parsed Budget);
    ``cluster`` a cluster file (or a loaded ``Cluster``) whose free GPUs become the budget, which a
    ``budget`` given too may cut further (counts per type, a $ cap); at least one of the two is
    needed. ``spread_racks`` spreads each pool's instances over the cluster's racks.
    ``time_limit_s`` bounds the solvers (CP-SAT deterministic time, so the same input gives the
    same plan on any machine), not the candidate evaluation before them. ``tolerance_fraction``:
    status ``optimal`` means the plan's objective is proven within this fraction of the best.
    ``rate_rps`` (or the workload's arrival rate) is the traffic the plan must serve. Returns a
    Plan whose ``status`` is optimal, feasible, timeout (best plan so far, with its gap) or
    infeasible (with reasons and suggestions); a plan found is placed GPU by GPU (``placement``).
    ``profile`` (constants from a profile file, ``layoutopt calibrate``) replaces the built-in
    performance-model profile of ``engine``. Raises InputError for invalid input.
    """
    _choice("--objective", objective, OBJECTIVES)
    _choice("--mode", mode, MODES)
    _choice("--precision", precision, PRECISION_CHOICES)
    if not 0 < headroom <= 1:
        raise InputError("--headroom", headroom, "a utilization fraction in (0, 1]")
    if top_k < 0:
        raise InputError("--top-k", top_k, "an integer >= 0")
    if not 0 < time_limit_s <= MAX_TIME_LIMIT_S:  # also refuses NaN and inf
        raise InputError("--time-limit", time_limit_s, f"seconds in (0, {MAX_TIME_LIMIT_S:g}]")
    if not 0 <= tolerance_fraction <= MAX_TOLERANCE_FRACTION:
        raise InputError("--tolerance", tolerance_fraction, f"a fraction in [0, {MAX_TOLERANCE_FRACTION:g}]")
    if budget is None and cluster is None:
        raise InputError("--budget", None, "a budget such as 32xH100 or '$400/h', or a --cluster file")
    if isinstance(engine, str):  # 'vllm' -> 'vllm==0.33.0': the plan records the rules' version
        engine = str(parse_engine_ref(engine))
    defaults: list[str] = []
    spec = _resolve_model(model, defaults)
    catalog = load_catalog(gpus_path=gpus_path, prices_path=prices_path)
    given = None if budget is None else budget if isinstance(budget, Budget) else parse_budget(budget, catalog)
    resolved_cluster = _resolve_cluster(cluster, catalog)
    limits: ClusterLimits | None = None
    if resolved_cluster is not None:
        parsed = cluster_budget(resolved_cluster, given)
        limits = cluster_limits(resolved_cluster, parsed)
    else:
        parsed = given
    resolved_slo = _resolve_slo(slo, defaults)
    resolved_workload = _resolve_workload(workload, isl, osl, rate_rps, defaults)
    # The API, sweeps and the service reach here without the CLI's check: a request must fit the context.
    check_fits_context(resolved_workload, spec.max_context_tokens, spec.name, "workload")
    target = resolved_workload.arrival_rate_rps
    if objective == "min-cost" and target is None:
        raise InputError("--rate", None, "min-cost needs the rate to serve: give --rate or a workload arrival rate")
    gpus = _budget_gpus(parsed, catalog)
    if limits is not None:
        gpus = cluster_gpus(limits, gpus)

    def table_for(gpu_list, gpu_limits: dict[str, int] | None = None,
                  kv_links: Mapping[str, Link] | None = None, pool_capacities: bool = True) -> CandidateTable:
        cluster_args = {}
        if limits is not None:
            cluster_args = dict(kv_links=limits.same_rack_links if kv_links is None else kv_links,
                                max_stage_gpus=limits.max_stage_gpus, domain_capacity_gpus=limits.domain_capacity_gpus)
        return build_candidate_table(
            spec, gpu_list, resolved_workload, resolved_slo,
            gpu_limits=dict(parsed.gpu_counts) if gpu_limits is None else gpu_limits,
            max_usd_per_hour=parsed.max_usd_per_hour, min_rate_rps=target, mode=mode, engine=engine,
            precision=precision, headroom=headroom, profile=profile, pool_capacities=pool_capacities,
            **cluster_args)

    clock = SolverClock(time_limit_s)
    remaining_s = clock.left

    context = dict(model=spec, slo=resolved_slo, workload=resolved_workload, objective=objective,
                   engine=engine, headroom=headroom, budget=parsed, defaults_used=defaults,
                   time_limit_s=time_limit_s)
    table = table_for(gpus)
    found = clock.spend(search(to_integer_table(table), objective, remaining_s(), top_k, tolerance_fraction))
    cluster_notes = limits.notes() if limits is not None else []
    if not found.best.has_plan:
        plan = infeasible_plan(found.best, gpus=gpus, other_gpus=list(catalog.gpus), table_for=table_for,
                               precision=precision, table=table, **context)
        return _with_notes(plan, cluster_notes, as_reasons=True)
    plan = build_plan(found, table=table, **context)
    target_cluster = resolved_cluster if resolved_cluster is not None else budget_cluster(parsed, plan, catalog)
    gpu_specs = {g.name: g for g in gpus}

    def placed(plan: Plan, table: CandidateTable, found: SearchResult, assumed_kv: Link | None,
               extra_notes: list[str]):
        result = place_on_cluster(plan, target_cluster, kv_bytes=kv_bytes_per_request(table, found.best),
                                  spread_racks=spread_racks, time_limit_s=remaining_s())
        if not result.placed:
            return result, unplaced_plan(plan, result, target_cluster, extra_notes)
        notes = extra_notes + placement_notes(result, target_cluster, gpu_specs, assumed_kv, spread_racks)
        placed_plan = with_placement(plan, result, notes)
        if resolved_cluster is not None:  # real node names: deployment files may pin pods to them
            placed_plan = placed_plan.model_copy(update={"cluster": resolved_cluster.name})
        return result, placed_plan

    def assumed_kv(plan: Plan) -> Link | None:
        if limits is None:
            return None
        return slowest_link(limits.same_rack_links, {p.gpu for p in plan.pools if p.role == "prefill"})

    first_plan = plan
    result, first = placed(plan, table, found, assumed_kv(plan), cluster_notes)
    rounds = replan_around_rule(
        first, result, table, found,
        resolve=lambda t, caps: clock.spend(search(capped(to_integer_table(t), caps), objective, remaining_s(),
                                                   top_k, tolerance_fraction)),
        build=lambda f, t: build_plan(f, table=t, **context),
        place_plan=lambda p, t, f: placed(p, t, f, assumed_kv(p), cluster_notes))
    if rounds.caps:   # the rounds ran: their placed plan goes on, or the first answer with their reasons
        if not rounds.result.placed:
            return with_failures(first, rounds.failures)
        plan, table, found, result, first = rounds.plan, rounds.table, rounds.found, rounds.result, rounds.plan
    assumed = assumed_kv(plan)
    needs_feedback = limits is not None and limits.kv_crosses_racks_slower and any(
        p.role == "prefill" for p in plan.pools) and (not result.placed or kv_link_too_slow(result, assumed))
    if needs_feedback:
        first = _second_stage(first, result, limits, table, table_for, gpus, objective, top_k, clock, placed,
                              context, cluster_notes, tolerance_fraction, rounds.final_caps)
    return label_replanned(first, first_plan, rounds.final_caps)


class SolverClock:
    """The solvers' share of ``--time-limit``: CP-SAT deterministic seconds spent so far."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.used_s = 0.0

    def left(self) -> float:
        return max(MIN_PHASE_TIME_S, self.limit_s - self.used_s)

    def spend(self, found: SearchResult) -> SearchResult:
        self.used_s += found.best.deterministic_time + sum(a.deterministic_time for a in found.alternatives)
        return found


def _with_notes(plan: Plan, notes: list[str], as_reasons: bool = False) -> Plan:
    """``plan`` with ``notes`` added to its explanation (and to its reasons when it has no pools)."""
    if not notes:
        return plan
    update = {"notes": list(plan.explanation.notes) + notes}
    if as_reasons and not plan.pools:
        update["reasons"] = list(plan.explanation.reasons) + notes
    return plan.model_copy(update={"explanation": plan.explanation.model_copy(update=update)})


def _second_stage(first: Plan, first_result, limits: ClusterLimits, table: CandidateTable, table_for, gpus,
                  objective: str, top_k: int, clock: "SolverClock", placed, context: dict, cluster_notes: list[str],
                  tolerance_fraction: float, rule_caps: Sequence[Cap] = ()) -> Plan:
    """Re-solve once with what the placement showed: KV crossing racks is slower than assumed.

    Two ways out, each solved and placed; the better placed plan wins: (a) prefill and decode
    kept in one rack, where the same-rack link the candidates assumed holds; (b) every candidate
    re-evaluated with the cross-rack link, which any placement delivers. ``rule_caps``: the caps
    on candidates placement found too few legal splits for (``rule_rounds``), in both.
    """
    if first_result.kv_link is not None:
        seen = f"the first plan's KV path crossed racks at {first_result.kv_link.bandwidth_gb_per_s:.1f} GB/s per GPU"
    else:
        seen = "the first plan's KV traffic did not fit the rack uplinks"
    in_rack = table.model_copy(update={"disaggregated_gpu_limits": dict(limits.rack_gpus)})
    options = [("prefill and decode kept in one rack", in_rack, limits.same_rack_links, clock.left() / 2)]
    options.append(("capacities re-evaluated with the cross-rack KV link",
                    table_for(gpus, kv_links=limits.cross_rack_links),
                    limits.cross_rack_links, None))
    best: Plan | None = None
    for label, option_table, links, share_s in options:
        found = clock.spend(search(capped(to_integer_table(option_table), rule_caps), objective,
                                   share_s or clock.left(), top_k, tolerance_fraction))
        if not found.best.has_plan:
            continue
        candidate = build_plan(found, table=option_table, **context)
        assumed = slowest_link(links, {p.gpu for p in candidate.pools if p.role == "prefill"})
        stage_note = f"second stage: {seen}; re-solved with {label}"
        result, placed_plan = placed(candidate, option_table, found, assumed, cluster_notes + [stage_note])
        if not placed_plan.pools or kv_link_too_slow(result, assumed):
            continue
        best = placed_plan if best is None else _better(best, placed_plan, objective)
    if best is not None:
        return best
    reasons = [seen, ("re-solving with prefill and decode in one rack, or with the cross-rack KV link, found no "
                      "plan that places"), *first_result.reasons]
    return first.model_copy(update={
        "status": "infeasible", "mode": None, "pools": [], "totals": None, "latency": None, "placement": [],
        "alternatives": [], "solver": first.solver.model_copy(update={"status": "infeasible"}),
        "explanation": first.explanation.model_copy(update={
            "binding_constraints": [], "reasons": reasons,
            "suggestions": ["--mode colocated (no KV transfer between instances)",
                            "a cluster with less oversubscribed rack uplinks"]})})
