"""Procurement sweeps: a grid of solves (models x fleet options x workloads x SLOs x objectives x
rates), run on local processes or Ray, with results as CSV/Parquet and a procurement summary.

Importing this package imports neither the solver nor Ray nor pyarrow; they load when used.
"""

from layoutopt.sweep.results import CellResult
from layoutopt.sweep.run import SweepResult, sweep
from layoutopt.sweep.spec import Cell, SolverSettings, SweepSpec, expand_cells, load_sweep_spec
from layoutopt.sweep.summary import SweepSummary, summarize

__all__ = [
    "Cell",
    "CellResult",
    "SolverSettings",
    "SweepResult",
    "SweepSpec",
    "SweepSummary",
    "expand_cells",
    "load_sweep_spec",
    "summarize",
    "sweep",
]
