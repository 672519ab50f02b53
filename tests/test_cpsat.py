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


def test_the_deterministic_solver_is_one_worker_with_a_fixed_seed_and_floors_its_limits():
    solver = cpsat.deterministic_solver(0.0, wall_s=-1.0, probing_level=0)
    p = solver.parameters
    assert (p.num_workers, p.random_seed) == (cpsat.NUM_WORKERS, cpsat.RANDOM_SEED) == (1, 20240607)
    assert p.max_deterministic_time == cpsat.MIN_DETERMINISTIC_S
    assert p.max_time_in_seconds == cpsat.MIN_WALL_S
    assert p.cp_model_probing_level == 0
    plain = cpsat.deterministic_solver(2.5).parameters
    assert plain.max_deterministic_time == 2.5
    # No wall-clock cap and CP-SAT's own probing level unless asked for.
    default = cp_model.CpSolver().parameters
    assert plain.max_time_in_seconds == default.max_time_in_seconds
    assert plain.cp_model_probing_level == default.cp_model_probing_level != 0


def test_cpsat_imports_nothing_of_layoutopt():
    """The optimizer and the placement both build on it, so it sits below both."""
    source = Path(cpsat.__file__).read_text()
    assert "layoutopt" not in "".join(line for line in source.splitlines() if line.startswith(("import", "from")))
