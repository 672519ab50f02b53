"""One CP-SAT time budget shared by every model a placement solves, in deterministic seconds.

Each solve runs on ``cpsat.deterministic_solver`` (one worker, a fixed seed) and stops at what is
left of the budget in CP-SAT's deterministic time (work done, not wall-clock), so the same input
gives the same placement and the same status on any machine, however loaded.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt import cpsat


class SolveBudget:
    """Deterministic seconds left for CP-SAT; ``solve`` spends from it."""

    def __init__(self, deterministic_s: float):
        self.left_s = deterministic_s
        self.used_s = 0.0

    @property
    def spent(self) -> bool:
        # A solve is not started with less than this left (it could not even load the model).
        return self.left_s < cpsat.MIN_DETERMINISTIC_S

    def solve(self, model: cp_model.CpModel, absolute_gap: float = 0.0) -> tuple[int, cp_model.CpSolver]:
        """The CP-SAT status code of ``model`` solved within what is left, and the solver (its
        solution and bound)."""
        solver = cpsat.deterministic_solver(self.left_s)
        solver.parameters.absolute_gap_limit = absolute_gap
        code, spent = cpsat.solve(solver, model)
        self.left_s -= spent
        self.used_s += spent
        return code, solver
