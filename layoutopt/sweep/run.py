"""``sweep()``: solve every cell of a grid, resumably, and write results and a procurement summary.

    from layoutopt.api import sweep
    result = sweep("examples/sweep.yaml", "out/h100-vs-h200", workers=8)
    result.rows[0].requests_per_usd

Cells already recorded in ``out_dir`` (same inputs, same cell id) are skipped; a cell that fails
is recorded with its error and the sweep goes on (``retry_errors`` runs failed cells again).
Rows come back in grid order whichever executor ran them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.sweep.cell import SolveFn
from layoutopt.sweep.executors import run_cells
from layoutopt.sweep.results import CellResult, Journal, LiveTables, read_journal, write_atomically, write_tables
from layoutopt.sweep.spec import SweepSpec, expand_cells, load_sweep_spec
from layoutopt.sweep.summary import JSON_NAME, MARKDOWN_NAME, SweepSummary, write_summary

SPEC_COPY_NAME = "sweep.json"
# While a sweep runs: results.parquet is rewritten at most this often, the summary (no plots) too.
PARQUET_EVERY_S = 5.0
SUMMARY_EVERY_S = 60.0


class SweepResult(BaseModel):
    """What a sweep produced: every row in grid order, the summary, and where the files are."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    out_dir: str
    rows: list[CellResult]
    summary: SweepSummary
    num_cells: int
    num_run: int = Field(description="cells solved by this call")
    num_skipped: int = Field(description="cells found already done in out_dir")
    num_errors: int = Field(description="cells of the grid whose row has status 'error'")
    csv_path: str
    parquet_path: str
    summary_json_path: str
    summary_markdown_path: str
    report_path: str | None = Field(default=None, description="report.md, when asked for")
    wall_time_s: float


class _Progress:
    """A rich progress bar on stderr with done/total, failures and ETA; silent when disabled."""

    def __init__(self, enabled: bool, total: int, name: str):
        self._bar = None
        self._failed = 0
        self._name = name
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             console=Console(stderr=True))
        self._task = self._bar.add_task(self._describe(), total=total)

    def _describe(self) -> str:
        return f"sweep {self._name}" + (f" ({self._failed} failed)" if self._failed else "")

    def __enter__(self) -> "_Progress":
        if self._bar is not None:
            self._bar.start()
        return self

    def advance(self, row: CellResult) -> None:
        if self._bar is None:
            return
        self._failed += row.status == "error"
        self._bar.update(self._task, advance=1, description=self._describe())

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _load(spec: SweepSpec | str | Path, base_dir: str | Path | None) -> tuple[SweepSpec, Path]:
    if isinstance(spec, SweepSpec):
        return spec, Path(base_dir or ".")
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        return load_sweep_spec(path), Path(base_dir) if base_dir is not None else path.parent
    raise InputError("spec", type(spec).__name__, "a SweepSpec or the path of a sweep.yaml")


def _in_grid_order(rows: dict[str, CellResult], cells) -> list[CellResult]:
    # A journal row may come from an earlier spec that listed the same inputs in another order or
    # under another file name; the grid position and names are this spec's.
    return [rows[cell.cell_id].model_copy(update={"cell_index": cell.cell_index, "workload": cell.workload_name,
                                                  "slo": cell.slo_name}) for cell in cells if cell.cell_id in rows]


def sweep(spec: SweepSpec | str | Path, out_dir: str | Path, *, executor: str = "local", address: str | None = None,
          workers: int | None = None, solve_fn: SolveFn | None = None, progress: bool = False,
          retry_errors: bool = False, plots: bool = True, base_dir: str | Path | None = None,
          parquet_every_s: float = PARQUET_EVERY_S, summary_every_s: float = SUMMARY_EVERY_S,
          report: bool = False) -> SweepResult:
    """Run the sweep ``spec`` (a ``SweepSpec`` or a ``sweep.yaml`` path) into ``out_dir``.

    ``executor``: ``local`` (``workers`` processes, default one per CPU; 1 runs in this process) or
    ``ray`` (tasks on the Ray instance at ``address``, or a local one). ``solve_fn`` replaces
    :func:`layoutopt.api.solve` (it gets the same keyword arguments; with worker processes it must
    be a module-level function). Files named in a ``SweepSpec`` are read relative to ``base_dir``
    (default: the sweep file's folder, or the current folder for a ``SweepSpec``).
    Writes ``cells.jsonl``, ``results.csv``, ``results.parquet``, ``plans/``, ``summary.json``,
    ``summary.md`` and ``plots/``. While it runs, ``results.csv`` gets a row as each cell finishes,
    ``results.parquet`` is rewritten at most every ``parquet_every_s`` seconds and the summary
    (without plots) every ``summary_every_s`` seconds, so an interrupted sweep leaves all three
    readable; the final files are in grid order. ``report`` also writes ``report.md``, one page
    with the tables, plots and assumptions (prices with dates and sources, SLOs, workloads).
    """
    start_s = time.perf_counter()
    if workers is not None and workers < 1:
        raise InputError("workers", workers, "a whole number >= 1")
    spec, base = _load(spec, base_dir)
    cells = expand_cells(spec, base)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / SPEC_COPY_NAME, json.dumps(spec.model_dump(mode="json"), indent=2) + "\n")
    wanted = {cell.cell_id for cell in cells}
    rows = {cell_id: row for cell_id, row in read_journal(out).items()
            if cell_id in wanted and not (retry_errors and row.status == "error")}
    num_skipped = len(rows)
    todo = [cell for cell in cells if cell.cell_id not in rows]
    if todo:
        live = LiveTables(out, _in_grid_order(rows, cells), parquet_every_s)
        summary_written_s = time.monotonic()
        try:
            with Journal(out) as journal, _Progress(progress, len(todo), spec.name) as bar:
                for row, plan_json in run_cells(todo, solve_fn, executor, address, workers):
                    journal.record(row, plan_json)
                    rows[row.cell_id] = row
                    live.append(row)
                    bar.advance(row)
                    if time.monotonic() - summary_written_s >= summary_every_s:
                        write_summary(_in_grid_order(rows, cells), out, spec.name, plots=False)
                        summary_written_s = time.monotonic()
        finally:
            # interrupted or not, leave the rows finished so far readable
            live.close()
            if len(rows) < len(cells):
                write_summary(_in_grid_order(rows, cells), out, spec.name, plots=False)
    ordered = _in_grid_order(rows, cells)
    csv_path, parquet_path = write_tables(ordered, out)
    summary = write_summary(ordered, out, spec.name, plots=plots)
    report_path = None
    if report:
        from layoutopt.sweep.report import write_report

        report_path = str(write_report(summary, cells, ordered, out))
    return SweepResult(
        name=spec.name, out_dir=str(out), rows=ordered, summary=summary, num_cells=len(cells), num_run=len(todo),
        num_skipped=num_skipped, num_errors=sum(row.status == "error" for row in ordered),
        csv_path=str(csv_path), parquet_path=str(parquet_path), summary_json_path=str(out / JSON_NAME),
        summary_markdown_path=str(out / MARKDOWN_NAME), report_path=report_path,
        wall_time_s=time.perf_counter() - start_s,
    )


__all__ = ["SweepResult", "SweepSpec", "load_sweep_spec", "sweep"]
