"""CP-SAT runs that do not trust a presolve's word that a model is infeasible.

OR-Tools 9.15 (9.15.6755, the current release) has presolve bugs that close feasible models as
INFEASIBLE (google/or-tools#5274: "CP-SAT returns INFEASIBLE with presolve enabled but OPTIMAL
with presolve disabled", filed against 9.15.6755). layoutopt met one: a goodput-per-dollar
second phase whose hinted incumbent satisfies every constraint (checked row by row) came back
INFEASIBLE, so a plan that was proven was labelled ``feasible``; the model solves with
``cp_model_presolve=False`` or ``cp_model_probing_level=0``. Every CP-SAT solve of layoutopt goes
through :func:`solve`: an INFEASIBLE answer after presolve is checked by solving again without
presolve, within what is left of the run's deterministic time. Both runs are deterministic, so
the answer still depends on the input alone.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

# The least deterministic time a re-check is started with (it loads the model and searches).
MIN_RECHECK_DETERMINISTIC_S = 1e-3


def solve(solver: cp_model.CpSolver, model: cp_model.CpModel) -> tuple[int, float]:
    """(status, deterministic seconds spent) of ``solver.solve(model)``; an INFEASIBLE status after
    presolve is re-checked without presolve, and then ``solver`` holds the re-check's response."""
    status = solver.solve(model)
    spent = solver.deterministic_time
    if status != cp_model.INFEASIBLE or not solver.parameters.cp_model_presolve:
        return status, spent
    limit = solver.parameters.max_deterministic_time
    solver.parameters.cp_model_presolve = False
    solver.parameters.max_deterministic_time = max(MIN_RECHECK_DETERMINISTIC_S, limit - spent)
    try:
        status = solver.solve(model)
    finally:
        solver.parameters.cp_model_presolve = True
        solver.parameters.max_deterministic_time = limit
    return status, spent + solver.deterministic_time
