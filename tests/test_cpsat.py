"""``layoutopt.cpsat.solve``: an INFEASIBLE answer after presolve is re-checked without presolve."""

from __future__ import annotations

from pathlib import Path

from ortools.sat.python import cp_model

from layoutopt import cpsat

# A goodput-per-dollar second phase (qwen3-32b on 8xH100 with the engine P/D classes), cut down to
# the 43 constraints that keep OR-Tools 9.15.6755's presolve closing it as INFEASIBLE although
# it is feasible (google/or-tools#5274 is the same kind of bug).
FEASIBLE_MODEL = Path(__file__).parent / "fixtures" / "cpsat_presolve_closes_feasible.pb.txt"


def _model() -> cp_model.CpModel:
    model = cp_model.CpModel()
    model.proto.parse_text_format(FEASIBLE_MODEL.read_text())
    return model


def _solver() -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = 10.0
    return solver


def test_a_feasible_model_is_never_reported_infeasible():
    model = _model()
    solver = _solver()
    solver.parameters.cp_model_presolve = False
    assert solver.solve(model) == cp_model.OPTIMAL  # the model is feasible
    status, spent = cpsat.solve(_solver(), model)
    assert status == cp_model.OPTIMAL and spent > 0


def test_an_infeasible_model_stays_infeasible_and_both_runs_are_counted():
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    y = model.new_int_var(0, 10, "y")
    model.add(x + y >= 15)
    model.add(x <= 3)
    model.add(y <= 3)
    solver = _solver()
    status, spent = cpsat.solve(solver, model)
    assert status == cp_model.INFEASIBLE
    assert spent >= solver.deterministic_time
    assert solver.parameters.cp_model_presolve and solver.parameters.max_deterministic_time == 10.0
