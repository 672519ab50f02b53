"""One CP-SAT time budget shared by every model a placement solves, in deterministic seconds.

Each solve runs with one worker and a fixed seed and stops at what is left of the budget in
CP-SAT's deterministic time (work done, not wall-clock), so the same input gives the same
placement and the same status on any machine, however loaded.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt import cpsat

RANDOM_SEED = 20240607
NUM_WORKERS = 1
# A solve is not started with less than this left (it could not even load the model).
MIN_DETERMINISTIC_S = 1e-3


class SolveBudget:
    """Deterministic seconds left for CP-SAT; ``solve`` spends from it."""

    def __init__(self, deterministic_s: float):
        self.left_s = deterministic_s
        self.used_s = 0.0

    @property
    def spent(self) -> bool:
        return self.left_s < MIN_DETERMINISTIC_S

    def solve(self, solver: cp_model.CpSolver, model: cp_model.CpModel, absolute_gap: float = 0.0) -> int:
        """``solver.solve(model)`` within what is left; returns the CP-SAT status code."""
        solver.parameters.random_seed = RANDOM_SEED
        solver.parameters.num_workers = NUM_WORKERS
        solver.parameters.max_deterministic_time = max(MIN_DETERMINISTIC_S, self.left_s)
        solver.parameters.absolute_gap_limit = absolute_gap
        code, spent = cpsat.solve(solver, model)
        self.left_s -= spent
        self.used_s += spent
        return code
