"""CP-SAT runs of layoutopt: one deterministic set-up, and no trust in a presolve's word that a
model is infeasible.

OR-Tools 9.15 (9.15.6755, the current release) has presolve bugs that close feasible models as
INFEASIBLE (google/or-tools#5274: "CP-SAT returns INFEASIBLE with presolve enabled but OPTIMAL
with presolve disabled", filed against 9.15.6755). layoutopt met one: a goodput-per-dollar
second phase whose hinted incumbent satisfies every constraint (checked row by row) came back
INFEASIBLE, so a plan that was proven was labelled ``feasible``; the model solves with
``cp_model_presolve=False`` or ``cp_model_probing_level=0``. Every CP-SAT solve of layoutopt goes
through :func:`solve`: an INFEASIBLE answer after presolve is checked by solving again without
presolve, within what is left of the run's deterministic time. Both runs are deterministic, so
the answer still depends on the input alone.

Every CP-SAT solver of layoutopt is also made by :func:`deterministic_solver`, the one set-up that
makes an answer depend on the input alone: one worker and a fixed seed (single-worker search is
deterministic without the batching parameters ``interleave_search`` would need, and the models
are small), and a limit in CP-SAT's deterministic time (work done, not wall-clock). A wall-clock
cap and the presolve probing level are the caller's choice.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

RANDOM_SEED = 20240607
NUM_WORKERS = 1
# The least deterministic time a solve or a re-check is started with (it loads the model and searches).
MIN_DETERMINISTIC_S = 1e-3
# The least wall-clock time a solve under a wall-clock cap is started with.
MIN_WALL_S = 0.05


def deterministic_solver(deterministic_s: float, *, wall_s: float | None = None,
                         probing_level: int | None = None) -> cp_model.CpSolver:
    """A CP-SAT solver whose answer depends on the input alone: ``NUM_WORKERS`` worker, seed
    ``RANDOM_SEED``, at most ``deterministic_s`` deterministic seconds (at least
    ``MIN_DETERMINISTIC_S``). ``wall_s`` adds a wall-clock cap (at least ``MIN_WALL_S``), for a very
    slow machine: only when it stops a solve can the answer differ. ``probing_level`` sets
    ``cp_model_probing_level`` (None: CP-SAT's default). Gap limits are the caller's."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = NUM_WORKERS
    solver.parameters.random_seed = RANDOM_SEED
    if probing_level is not None:
        solver.parameters.cp_model_probing_level = probing_level
    solver.parameters.max_deterministic_time = max(MIN_DETERMINISTIC_S, deterministic_s)
    if wall_s is not None:
        solver.parameters.max_time_in_seconds = max(MIN_WALL_S, wall_s)
    return solver


def solve(solver: cp_model.CpSolver, model: cp_model.CpModel,
          callback: cp_model.CpSolverSolutionCallback | None = None) -> tuple[int, float]:
    """(status, deterministic seconds spent) of ``solver.solve(model, callback)``; an INFEASIBLE
    status after presolve is re-checked without presolve, and then ``solver`` holds the re-check's
    response. ``callback`` sees every solution (and may stop the search)."""
    status = solver.solve(model, callback)
    spent = solver.deterministic_time
    if status != cp_model.INFEASIBLE or not solver.parameters.cp_model_presolve:
        return status, spent
    limit = solver.parameters.max_deterministic_time
    solver.parameters.cp_model_presolve = False
    solver.parameters.max_deterministic_time = max(MIN_DETERMINISTIC_S, limit - spent)
    try:
        status = solver.solve(model, callback)
    finally:
        solver.parameters.cp_model_presolve = True
        solver.parameters.max_deterministic_time = limit
    return status, spent + solver.deterministic_time
