"""The best plan and, for --top-k, the next-best plans that use a different set of layouts.

Each alternative re-runs the whole objective with one no-good cut per plan already found
(``ExcludePlanStructure``), so alternative k is the best plan whose set of instance kinds differs
from every earlier one. The time limit (CP-SAT deterministic time, see ``solver``) covers the
best plan and every alternative together: the best plan gets ``BEST_PLAN_TIME_FRACTION`` of it
when alternatives are asked for, and each alternative an equal share of the rest plus what
earlier ones left unused, so the split is the same on any machine.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from layoutopt.optimizer.constraints import ExcludePlanStructure
from layoutopt.plan import Objective
from layoutopt.optimizer.scaling import IntegerTable
from layoutopt.optimizer.solver import DEFAULT_TOLERANCE_FRACTION, LayoutSolver, SolveOutcome

# Share of the time limit reserved for the best plan when alternatives are asked for.
BEST_PLAN_TIME_FRACTION = 0.6
MIN_ALTERNATIVE_TIME_S = 0.05


class SearchResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    best: SolveOutcome
    alternatives: tuple[SolveOutcome, ...] = ()


def search(table: IntegerTable, objective: Objective, time_limit_s: float, top_k: int = 0,
           tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION) -> SearchResult:
    """Solve for the best plan, then for up to ``top_k`` structurally different ones."""
    best = LayoutSolver(table, objective, time_limit_s * (BEST_PLAN_TIME_FRACTION if top_k else 1.0),
                        tolerance_fraction=tolerance_fraction).solve()
    remaining_s = time_limit_s - best.deterministic_time
    alternatives: list[SolveOutcome] = []
    if best.has_plan:
        cuts = [ExcludePlanStructure(best.counts)]
        for rank in range(top_k):
            if remaining_s < MIN_ALTERNATIVE_TIME_S:
                break
            share_s = remaining_s / (top_k - rank)
            alternative = LayoutSolver(table, objective, share_s, extra_constraints=list(cuts),
                                       tolerance_fraction=tolerance_fraction).solve()
            remaining_s -= alternative.deterministic_time
            if not alternative.has_plan:
                break
            alternatives.append(alternative)
            cuts.append(ExcludePlanStructure(alternative.counts))
    return SearchResult(best=best, alternatives=tuple(alternatives))
