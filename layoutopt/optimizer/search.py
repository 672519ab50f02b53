"""The best plan and, for --top-k, the next-best plans that use a different set of layouts.

Each alternative re-runs the whole objective with one no-good cut per plan already found
(``ExcludePlanStructure``), so alternative k is the best plan whose set of instance kinds differs
from every earlier one. The time limit covers the best plan and every alternative together.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict

from layoutopt.optimizer.constraints import ExcludePlanStructure
from layoutopt.plan import Objective
from layoutopt.optimizer.scaling import IntegerTable
from layoutopt.optimizer.solver import LayoutSolver, SolveOutcome

# Share of the time limit reserved for the best plan when alternatives are asked for.
BEST_PLAN_TIME_FRACTION = 0.6
MIN_ALTERNATIVE_TIME_S = 0.05


class SearchResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    best: SolveOutcome
    alternatives: tuple[SolveOutcome, ...] = ()


def search(table: IntegerTable, objective: Objective, time_limit_s: float, top_k: int = 0) -> SearchResult:
    """Solve for the best plan, then for up to ``top_k`` structurally different ones."""
    deadline = time.perf_counter() + time_limit_s
    best = LayoutSolver(table, objective, time_limit_s * (BEST_PLAN_TIME_FRACTION if top_k else 1.0)).solve()
    alternatives: list[SolveOutcome] = []
    if best.has_plan:
        cuts = [ExcludePlanStructure(best.counts)]
        for rank in range(top_k):
            remaining_s = deadline - time.perf_counter()
            if remaining_s < MIN_ALTERNATIVE_TIME_S:
                break
            share_s = remaining_s / (top_k - rank)
            alternative = LayoutSolver(table, objective, share_s, extra_constraints=list(cuts)).solve()
            if not alternative.has_plan:
                break
            alternatives.append(alternative)
            cuts.append(ExcludePlanStructure(alternative.counts))
    return SearchResult(best=best, alternatives=tuple(alternatives))
