"""Back to the candidate table when placement finds no legal split for a pool's layout.

The layout CP-SAT model does not see how a cluster's free GPUs are spread over nodes, so its best
plan can pick a layout the engine's node-split rule (``uneven_nodes``, ``engines.rules.
check_node_split``) cannot place: an SGLang instance of 4 GPUs whose only free GPUs are 3 + 1 on
two nodes. Placement then names the pools it refused (``PlacementResult.rule_refused_pools``).
``replan_around_rule`` drops those pools' candidates from the table, solves again and places
again, at most ``MAX_RULE_ROUNDS`` times, each solve out of the same solver budget (the caller's
``resolve`` spends ``SolverClock``). Excluding a whole candidate is conservative (fewer of its
instances might have placed), which is why a plan found this way is proven optimal only over the
candidates left, and ``label_replanned`` says so: status ``feasible`` (never ``optimal``), a note
naming each excluded layout with the placement's reason (the rule and its engine source line), and
the first plan's objective and proven bound, which bound what the full table can reach;
``solver.best_bound`` and ``solver.gap`` are against that bound (the real gap of the reported plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from layoutopt.optimizer.assemble import used_candidates
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.search import SearchResult
from layoutopt.plan import Plan
from layoutopt.topology import PlacementResult

# Re-solves after a refused split before the answer stays infeasible (each drops at least one candidate).
MAX_RULE_ROUNDS = 4


@dataclass(frozen=True)
class Exclusion:
    candidate: str
    pool: str       # e.g. "colocated H100 tp1-pp4 x 1"
    reason: str     # the placement's reason: names the rule and the engine's source line


@dataclass
class Replanned:
    """The last round's plan (placed, or the unplaced answer), with what it ran on."""

    plan: Plan
    result: PlacementResult
    table: CandidateTable
    found: SearchResult
    excluded: list[Exclusion] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def without(table: CandidateTable, names: set[str]) -> CandidateTable:
    """``table`` less the candidates named (pairs naming them drop with them in ``scaling``)."""
    if not names:
        return table
    return table.model_copy(update={"candidates": tuple(c for c in table.candidates if c.name not in names)})


def replan_around_rule(unplaced: Plan, result: PlacementResult, table: CandidateTable, found: SearchResult, *,
                       resolve: Callable[[CandidateTable], SearchResult],
                       build: Callable[[SearchResult, CandidateTable], Plan],
                       place_plan: Callable[[Plan, CandidateTable, SearchResult], tuple[PlacementResult, Plan]],
                       max_rounds: int | None = None) -> Replanned:
    """Re-solve without the candidates whose pools ``result`` says the rule left no room, and place
    again, until a plan places, the refusal is not the rule's, no plan is left, or ``max_rounds``
(default ``MAX_RULE_ROUNDS``).
    ``unplaced`` is the answer for the first plan (infeasible with the placement's reasons)."""
    state = Replanned(plan=unplaced, result=result, table=table, found=found)
    for _ in range(MAX_RULE_ROUNDS if max_rounds is None else max_rounds):
        if state.result.placed or not state.result.rule_refused_pools:
            break
        used = used_candidates(state.table, state.found.best)
        rule_reasons = [r for r in state.result.reasons if "uneven_nodes" in r] or list(state.result.reasons)
        for index in state.result.rule_refused_pools:
            candidate, count = used[index]
            state.excluded.append(Exclusion(candidate.name, f"{candidate.role} {candidate.gpu} "
                                            f"{candidate.layout.short_name()} x {count}", rule_reasons[0]))
        table_left = without(table, {e.candidate for e in state.excluded})
        found_left = resolve(table_left)
        names = ", ".join(e.candidate for e in state.excluded)
        if not found_left.best.has_plan:
            state.failures.append(f"re-solved without {names}: no plan ({found_left.best.status})")
            break
        placed_result, placed_plan = place_plan(build(found_left, table_left), table_left, found_left)
        state.result, state.table, state.found = placed_result, table_left, found_left
        if placed_result.placed:
            state.plan = placed_plan
        else:
            state.failures.append(f"re-solved without {names}: its plan cannot be placed either: "
                                  + "; ".join(placed_result.reasons))
    return state


def label_replanned(plan: Plan, first: Plan, excluded: list[Exclusion]) -> Plan:
    """``plan`` (found after ``excluded``) with an honest status and a note; ``first`` is the first,
    unplaceable plan as solved (its objective and bound hold over the full table)."""
    if not excluded or not plan.pools:
        return plan
    info = first.solver
    unit = info.objective_unit or "objective units"
    status = "feasible" if plan.status == "optimal" else plan.status
    bound = ""
    if info.objective_value is not None:
        bound = f"; the first plan, which could not be placed, had objective {info.objective_value:.4g} {unit}"
        if info.best_bound is not None:
            direction = "costs less than" if plan.objective == "min-cost" else "reaches more than"
            bound += f", and no plan of the full candidate table {direction} {info.best_bound:.4g} {unit}"
    full_table = _full_table_gap(plan, info)
    if "gap" in full_table:
        bound += f" (so the plan's gap to that bound is {full_table['gap']:.2%})"
    layouts = "; ".join(f"{e.candidate} ({e.pool}): {e.reason}" for e in excluded)
    plural = "s" if len(excluded) != 1 else ""
    note = (f"status {status}: the plan is {plan.solver.status} over the candidate table without {len(excluded)} "
            f"layout{plural} the engine's node-split rule left no placement on the cluster, not over the full "
            f"table: {layouts}{bound}")
    solver = plan.solver.model_copy(update={
        **full_table, "status": "feasible" if plan.solver.status == "optimal" else plan.solver.status,
        "proof": (plan.solver.proof + "; " if plan.solver.proof else "") + "over the candidates left after "
                 f"excluding {', '.join(e.candidate for e in excluded)} (no legal split on the cluster)"})
    explanation = plan.explanation.model_copy(update={"notes": list(plan.explanation.notes) + [note]})
    return plan.model_copy(update={"status": status, "solver": solver, "explanation": explanation})


def _full_table_gap(plan: Plan, first_info) -> dict:
    """``best_bound`` and ``gap`` against the full table's bound (the first plan's), which holds for
    every plan the user could run; the re-solve's own bound only covers the candidates left."""
    value, bound = plan.solver.objective_value, first_info.best_bound
    if value is None or bound is None:
        return {}
    if plan.objective == "min-cost":
        bound = min(bound, plan.solver.best_bound if plan.solver.best_bound is not None else bound)
        gap = (value - bound) / value if value > 0 else 0.0
    else:
        bound = max(bound, plan.solver.best_bound if plan.solver.best_bound is not None else bound)
        gap = (bound - value) / bound if bound > 0 else 0.0
    return {"best_bound": bound, "gap": max(gap, 0.0)}


def with_failures(unplaced: Plan, failures: list[str]) -> Plan:
    """The first plan's infeasible answer with each round's reason added."""
    if not failures or unplaced.pools:
        return unplaced
    explanation = unplaced.explanation.model_copy(update={"reasons": list(unplaced.explanation.reasons) + failures})
    return unplaced.model_copy(update={"explanation": explanation})
