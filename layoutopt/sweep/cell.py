"""Run one sweep cell: call the solver, and turn its Plan (or its failure) into a result row.

This is what every executor runs, in a worker process or a Ray task. It never raises for a bad
cell: the error becomes the row's ``error`` column so the sweep goes on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from layoutopt.errors import InfeasibleError
from layoutopt.plan import Plan
from layoutopt.sweep.results import CellResult
from layoutopt.sweep.spec import Cell
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

SolveFn = Callable[..., Plan]
"""Called with the keyword arguments of :func:`layoutopt.api.solve`; returns a Plan."""

MAX_ERROR_CHARS = 500
SECONDS_PER_HOUR = 3600.0
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its error messages


def default_solve(**kwargs: Any) -> Plan:
    """The real optimizer (imported when first called, so workers import it once), with error bands."""
    from layoutopt.calibrate.apply import solve

    return solve(**kwargs)


def solve_kwargs(cell: Cell) -> dict[str, Any]:
    """The keyword arguments of ``solve`` for ``cell``."""
    settings = cell.solver
    return {
        "model": cell.model,
        "budget": cell.budget,
        "slo": SLO.model_validate(cell.slo),
        "workload": Workload.model_validate(cell.workload),
        "rate_rps": cell.rate_rps,
        "objective": cell.objective,
        "mode": settings.mode,
        "engine": settings.engine,
        "precision": settings.precision,
        "headroom": settings.headroom,
        "time_limit_s": settings.time_limit_s,
        "gpus_path": settings.gpus_path,
        "prices_path": settings.prices_path,
    }


def layout_summary(plan: Plan) -> str:
    """The pools in one line: '2 x prefill H100-SXM tp4-bf16 + 1 x decode H100-SXM tp8-fp8'."""
    return " + ".join(f"{p.instances} x {p.role} {p.gpu} {p.layout.short_name()}" for p in plan.pools)


def _base(cell: Cell) -> dict[str, Any]:
    return {"cell_id": cell.cell_id, "cell_index": cell.cell_index, "model": cell.model, "budget": cell.budget,
            "workload": cell.workload_name, "slo": cell.slo_name, "objective": cell.objective,
            "rate_rps": cell.rate_rps}


def row_from_plan(cell: Cell, plan: Plan, wall_time_s: float) -> CellResult:
    """The result row of a cell whose solve returned ``plan`` (any status)."""
    totals = plan.totals
    plan_columns: dict[str, Any] = {}
    if totals is not None and plan.pools:
        cost = totals.cost_usd_per_hour
        # What the buyer gets is the demanded rate; a fleet can serve more than that (whole GPUs),
        # and that spare capacity is paid for but not used.
        served_rps = None if cell.rate_rps is None else min(cell.rate_rps, totals.goodput_rps)
        plan_columns = {
            "layout": layout_summary(plan),
            "gpus": totals.gpus,
            "gpus_by_type": " + ".join(f"{gpu}:{count}" for gpu, count in sorted(totals.gpus_by_type.items())),
            "cost_usd_per_hour": totals.cost_usd_per_hour,
            "goodput_rps": totals.goodput_rps,
            "requests_per_usd_at_demand": (served_rps * SECONDS_PER_HOUR / cost
                                           if served_rps is not None and cost > 0 else None),
            "requests_per_usd_at_capacity": totals.goodput_rps * SECONDS_PER_HOUR / cost if cost > 0 else None,
            "tok_per_s_per_gpu": totals.tok_per_s_per_gpu,
        }
    error = ""
    if plan.status in ("infeasible", "model_invalid"):
        error = "; ".join(plan.explanation.notes)[:MAX_ERROR_CHARS]
    return CellResult(**_base(cell), status=plan.status, mode=plan.mode, gap=plan.solver.gap,
                      solve_time_s=plan.solver.wall_time_s, cell_wall_time_s=wall_time_s, error=error,
                      **plan_columns)


def error_row(cell: Cell, error: str, wall_time_s: float = 0.0, status: str = "error") -> CellResult:
    """The result row of a cell that produced no plan (terminal colour codes removed from ``error``)."""
    plain = _ANSI_ESCAPE.sub("", error)
    return CellResult(**_base(cell), status=status, cell_wall_time_s=wall_time_s, error=plain[:MAX_ERROR_CHARS])


def run_cell(cell: Cell, solve_fn: SolveFn | None = None) -> tuple[CellResult, str | None]:
    """Solve ``cell``; returns its row and its plan as JSON (None when there is no plan)."""
    start_s = time.perf_counter()
    try:
        plan = (solve_fn or default_solve)(**solve_kwargs(cell))
    except InfeasibleError as error:
        reasons = "; ".join([str(error), *error.reasons])
        return error_row(cell, reasons, time.perf_counter() - start_s, status="infeasible"), None
    except Exception as error:  # noqa: BLE001 - a failed cell is recorded and the sweep goes on
        return error_row(cell, f"{type(error).__name__}: {error}", time.perf_counter() - start_s), None
    row = row_from_plan(cell, plan, time.perf_counter() - start_s)
    return row, (plan.model_dump_json(indent=2) if plan.pools else None)
