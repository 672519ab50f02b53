"""Back to the candidate table when placement finds no legal split for a pool's layout.

The layout CP-SAT model does not see how a cluster's free GPUs are spread over nodes, so its best
plan can pick a layout the engine's node-split rule (``uneven_nodes``, ``engines.rules.
check_node_split``) cannot place: SGLang instances of 4 GPUs whose free GPUs are 3 + 1 on two
nodes. Placement then says which pools it refused and why (``PlacementResult.rule_refusals``, a
``RuleRefusal`` each: the rule, the reason with its engine source line, ``legal_instances``, at
most how many instances of the pool's layout the free GPUs hold alone in splits the rule accepts,
and ``part_gpus``), a structured answer: nothing here reads the reason's text.

``replan_around_rule`` re-solves with that layout capped rather than removed, and places again, at
most ``MAX_RULE_ROUNDS`` times, each solve out of the same solver budget (the caller's ``resolve``
spends ``SolverClock``). A cap (``Cap``, applied by ``capped`` to the integer table the CP-SAT model
reads) bounds the layout's instance variable, n_c <= max_instances, and raises the GPUs it keeps
in one domain (``DomainPacking``'s s_c) to the part size placement reported (``RuleRefusal.
part_gpus``: no legal split puts fewer on a node). Where the part size tells the model something
new, the cap is min(legal_instances, the earlier cap); where not, the refusal came from the other
pools taking the GPUs the legal splits need, and the cap is min(legal_instances, n - 1) for a layout
refused at n. A layout is dropped only at cap 0. Each round raises a part size or lowers a cap, so
the rounds end; they read only the caps and the table, so they are deterministic. Plans that keep
fewer instances of a refused layout (its legal instances, plus something else on the GPUs left)
stay in the search, which dropping the layout lost: on examples/clusters/scattered-h100.yaml
(README, rule rounds) llama-3.1-70b's max-goodput plan serves 17.9 req/s capped, 9.6 dropped, for
the same $39.90/h.

A plan found this way is optimal (within the tolerance) only over the table with the caps, which
is not the whole decision (a cap of n - 1 excludes plans that might have placed, and placement
tries only equal parts of one or two sizes per pool), so ``label_replanned`` says so: status
``feasible`` (never ``optimal``), ``solver.proof`` naming the caps, a note naming each capped
layout with the placement's reason and the first plan's objective and proven bound, which bound
what the full table can reach; ``solver.best_bound`` and
``solver.gap`` are against that bound (the real gap of the reported plan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from layoutopt.optimizer.assemble import used_candidates
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.plan_builder import solver_note
from layoutopt.optimizer.scaling import IntegerTable
from layoutopt.optimizer.search import SearchResult
from layoutopt.plan import Plan
from layoutopt.topology.placement import PlacementResult, RuleRefusal

# Re-solves after a refused split before the answer stays infeasible (each lowers at least one cap).
MAX_RULE_ROUNDS = 4


@dataclass(frozen=True)
class Cap:
    """At most ``max_instances`` of ``candidate``, each in domain groups of at least
    ``group_gpus`` GPUs, after placement refused ``refused_instances``."""

    candidate: str
    pool: str               # the refused pool, e.g. "colocated H100 tp1-pp4 x 3"
    refused_instances: int
    legal_instances: int    # placement's count: the most the free GPUs hold alone in legal splits
    max_instances: int
    group_gpus: int         # GPUs of an instance the re-solve keeps in one domain (DomainPacking's s_c)
    reason: str             # the placement's reason: names the rule and the engine's source line

    @property
    def excluded(self) -> bool:
        return self.max_instances == 0

    def describe(self) -> str:
        if self.legal_instances < self.refused_instances:
            why = f"the free GPUs hold {self.legal_instances} in splits the rule accepts"
        else:
            why = f"{self.legal_instances} fit in legal splits alone, not beside the plan's other pools"
        limit = "excluded" if self.excluded else f"at most {self.max_instances}"
        parts = f", in parts of >= {self.group_gpus} GPUs per node" if self.group_gpus > 1 and not self.excluded else ""
        return f"{self.candidate} {limit}{parts} ({self.pool} refused; {why})"


@dataclass
class Replanned:
    """The last round's plan (placed, or the unplaced answer), with what it ran on."""

    plan: Plan
    result: PlacementResult
    table: CandidateTable
    found: SearchResult
    caps: list[Cap] = field(default_factory=list)   # in the order set; a later cap of a candidate replaces its earlier
    failures: list[str] = field(default_factory=list)

    @property
    def final_caps(self) -> list[Cap]:
        """The last cap of each capped candidate, in the order the candidates were first capped."""
        last = {c.candidate: c for c in self.caps}
        return [last[name] for name in dict.fromkeys(c.candidate for c in self.caps)]


def capped(table: IntegerTable, caps: Sequence[Cap]) -> IntegerTable:
    """``table`` with n_c <= cap on the instance variable of each capped candidate (its
    ``max_instances``, the variable's upper bound, and the pool-rate steps past it) and its
    ``domain_group_gpus`` raised to the cap's ``group_gpus`` (``constraints.DomainPacking``); a
    candidate capped at 0 leaves the table, and the P/D pairs naming it with it."""
    by_name = {c.candidate: c for c in caps}
    if not by_name:
        return table
    rows = []
    for c in table.candidates:
        cap = by_name.get(c.name)
        if cap is None:
            rows.append(c)
            continue
        most = min(c.max_instances, cap.max_instances)
        if most >= 1:
            rows.append(c.model_copy(update={
                "max_instances": most, "domain_group_gpus": max(c.domain_group_gpus, cap.group_gpus),
                "pool_rate_units": tuple(s for s in c.pool_rate_units if s[0] <= most)}))
    names = {c.name for c in rows}
    pairs = tuple((p, d) for p, d in table.incompatible_pairs if p in names and d in names)
    return table.model_copy(update={"candidates": tuple(rows), "incompatible_pairs": pairs})


def _next_cap(candidate, count: int, refusal: RuleRefusal, earlier: Cap | None, keep_legal_instances: bool) -> Cap:
    """The cap after ``refusal`` of ``count`` instances: the legal splits' part size where it says
    more than the re-solve knew (then up to min(legal, the earlier cap) instances), else at most
    min(legal, count - 1). Each cap either raises the group or lowers the count, so rounds end."""
    group = earlier.group_gpus if earlier is not None else candidate.domain_group_gpus
    part = refusal.part_gpus
    learned = part > group and part & (part - 1) == 0   # DomainPacking's bound holds for powers of two
    most = min(refusal.legal_instances, earlier.max_instances if earlier is not None else count)
    if not learned:
        most = min(most, count - 1)
    if not keep_legal_instances:
        most = 0
    return Cap(candidate.name, f"{candidate.role} {candidate.gpu} {candidate.layout.short_name()} x {count}", count,
               refusal.legal_instances, most, part if learned else group, refusal.reason)


def replan_around_rule(unplaced: Plan, result: PlacementResult, table: CandidateTable, found: SearchResult, *,
                       resolve: Callable[[CandidateTable, list[Cap]], SearchResult],
                       build: Callable[[SearchResult, CandidateTable], Plan],
                       place_plan: Callable[[Plan, CandidateTable, SearchResult], tuple[PlacementResult, Plan]],
                       max_rounds: int | None = None, keep_legal_instances: bool = True) -> Replanned:
    """Re-solve with the layouts of the pools ``result`` says the rule refused capped (``Cap``), and
    place again, until a plan places, the refusal is not the rule's, no plan is left, or
    ``max_rounds`` (default ``MAX_RULE_ROUNDS``). ``resolve(table, caps)`` solves ``table`` with
    the caps (``capped``). ``unplaced`` is the answer for the first plan (infeasible with the
    placement's reasons). ``keep_legal_instances=False`` drops a refused layout outright (cap 0),
    as solve did before; kept to measure what the caps win (tests/test_rule_rounds_caps.py)."""
    state = Replanned(plan=unplaced, result=result, table=table, found=found)
    for _ in range(MAX_RULE_ROUNDS if max_rounds is None else max_rounds):
        if state.result.placed or not state.result.rule_refusals:
            break
        used = used_candidates(state.table, state.found.best)
        earlier = {c.candidate: c for c in state.caps}
        for refusal in state.result.rule_refusals:
            candidate, count = used[refusal.pool_index]
            state.caps.append(_next_cap(candidate, count, refusal, earlier.get(candidate.name), keep_legal_instances))
        caps = state.final_caps
        found_left = resolve(table, caps)
        names = "; ".join(c.describe() for c in caps)
        if not found_left.best.has_plan:
            state.failures.append(f"re-solved with {names}: no plan ({found_left.best.status})")
            break
        placed_result, placed_plan = place_plan(build(found_left, table), table, found_left)
        state.result, state.found = placed_result, found_left
        if placed_result.placed:
            state.plan = placed_plan
        else:
            state.failures.append(f"re-solved with {names}: its plan cannot be placed either: "
                                  + "; ".join(placed_result.reasons))
    return state


def label_replanned(plan: Plan, first: Plan, caps: list[Cap]) -> Plan:
    """``plan`` (found with ``caps``, the last cap of each candidate) with an honest status and a
    note; ``first`` is the first, unplaceable plan as solved (its objective and bound hold over the
    full table)."""
    if not caps or not plan.pools:
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
    layouts = "; ".join(f"{c.describe()}: {c.reason}" for c in caps)
    plural = "s" if len(caps) != 1 else ""
    note = (f"status {status}: the plan is {plan.solver.status} over the candidate table with {len(caps)} "
            f"layout{plural} capped after placement found no split the engine's node-split rule accepts (at most "
            f"as many instances as legal splits hold, fewer than refused; 0: excluded), not over the full table: "
            f"{layouts}{bound}")
    limits = ", ".join(f"{c.candidate} <= {c.max_instances}" + (f" in parts of >= {c.group_gpus} GPUs"
                                                                 if c.group_gpus > 1 and not c.excluded else "")
                       for c in caps)
    # The re-solve's own proof ("... proven within x% of the best any plan reaches") holds over the
    # capped table only: the scope goes first, in solver.proof and in the note that states it.
    scope = ("over the candidate table with the layouts placement refused on the node-split rule capped "
             f"({limits}), not over the full table")
    proof = f"{scope}: {plan.solver.proof}" if plan.solver.proof else scope
    solver_status = "feasible" if plan.solver.status == "optimal" else plan.solver.status
    solver = plan.solver.model_copy(update={**full_table, "status": solver_status, "proof": proof})
    stated = solver_note(plan.solver.status, plan.solver.proof) if plan.solver.proof else None
    notes = [solver_note(solver_status, proof) if n == stated else n for n in plan.explanation.notes]
    explanation = plan.explanation.model_copy(update={"notes": notes + [note]})
    return plan.model_copy(update={"status": status, "solver": solver, "explanation": explanation})


def _full_table_gap(plan: Plan, first_info) -> dict:
    """``best_bound`` and ``gap`` against the full table's bound (the first plan's), which holds for
    every plan the user could run; the re-solve's own bound only covers the capped table."""
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
