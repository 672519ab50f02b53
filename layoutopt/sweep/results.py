"""Sweep results: one row per cell, kept in a JSON-lines journal and written as CSV and Parquet.

The output folder holds::

    cells.jsonl        one CellResult per line, appended as cells finish (the resume journal)
    results.csv        one row per cell: rows already done first, then a row appended as each cell
                       finishes; rewritten in grid order when the sweep ends
    results.parquet    the same rows, typed; rewritten (atomically) at most every few seconds while
                       the sweep runs and in grid order at the end
    plans/<cell_id>.json   the full Plan of every cell that produced one

So an interrupted sweep leaves a readable ``results.csv`` and ``results.parquet`` of what it
finished. A rerun into the same folder reads ``cells.jsonl`` and skips cells whose ``cell_id`` is
already there; a line cut short by a crash is ignored (that cell runs again).
"""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CellStatus = Literal["optimal", "feasible", "infeasible", "timeout", "model_invalid", "error"]
SOLVED_STATUSES = ("optimal", "feasible", "timeout")
JOURNAL_NAME = "cells.jsonl"
CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
PLANS_DIR = "plans"
# Columns that measure the run rather than its answer; they differ between runs of the same grid.
TIMING_COLUMNS = ("solve_time_s", "cell_wall_time_s")


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so readers never see half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class CellResult(BaseModel):
    """One row of a sweep's results. Plan columns are None when the cell has no plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cell_id: str
    cell_index: int
    model: str
    budget: str = Field(description="the fleet option: a budget string such as 32xH100")
    workload: str
    slo: str
    objective: str
    rate_rps: float | None = Field(description="planned request rate; None: the solver found the highest")
    status: CellStatus
    mode: str | None = None
    layout: str = Field(default="", description="pools, e.g. '2 x prefill H100-SXM tp4-bf16 + 1 x decode ...'")
    gpus: int | None = None
    gpus_by_type: str = Field(default="", description="e.g. 'H100-SXM:16'")
    cost_usd_per_hour: float | None = None
    goodput_rps: float | None = Field(default=None, description="capacity: the highest rate the fleet serves "
                                      "within the SLO (at least rate_rps for min-cost cells)")
    requests_per_usd_at_demand: float | None = Field(
        default=None, description="requests per dollar at the demanded rate: min(rate_rps, goodput_rps) x 3600 / "
        "cost_usd_per_hour, what the buyer gets; None without a demanded rate")
    requests_per_usd_at_capacity: float | None = Field(
        default=None, description="requests per dollar with the fleet run at its capacity: goodput_rps x 3600 / "
        "cost_usd_per_hour")
    tok_per_s_per_gpu: float | None = None
    gap: float | None = Field(default=None, description="relative optimality gap; 0 when optimal")
    solve_time_s: float | None = Field(default=None, description="solver wall time the plan reports")
    cell_wall_time_s: float = Field(default=0.0, description="wall time of the whole cell, setup included")
    error: str = ""

    @property
    def has_plan(self) -> bool:
        return self.status in SOLVED_STATUSES and self.cost_usd_per_hour is not None


COLUMNS = tuple(CellResult.model_fields)


def read_journal(out_dir: str | Path) -> dict[str, CellResult]:
    """Rows already recorded in ``out_dir``, by cell id (later lines win); unreadable lines skipped."""
    path = Path(out_dir) / JOURNAL_NAME
    if not path.exists():
        return {}
    rows: dict[str, CellResult] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = CellResult.model_validate_json(line)
        except ValidationError:
            continue
        rows[row.cell_id] = row
    return rows


class Journal:
    """Appends finished rows to ``cells.jsonl`` and their plans to ``plans/``, one flush per row."""

    def __init__(self, out_dir: str | Path):
        self.out_dir = Path(out_dir)
        (self.out_dir / PLANS_DIR).mkdir(parents=True, exist_ok=True)
        self._handle = open(self.out_dir / JOURNAL_NAME, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def record(self, row: CellResult, plan_json: str | None) -> None:
        if plan_json is not None:
            write_atomically(self.out_dir / PLANS_DIR / f"{row.cell_id}.json", plan_json)
        # A journal cut short mid-line must not glue the next row onto the broken one.
        self._handle.write("\n" + row.model_dump_json() + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _csv_value(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return value


def rows_to_csv(rows: Iterable[CellResult]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_csv_value(getattr(row, column)) for column in COLUMNS])
    return buffer.getvalue()


def _arrow_schema():
    import pyarrow as pa

    kinds = {"cell_index": pa.int64(), "gpus": pa.int64()}
    floats = ("rate_rps", "cost_usd_per_hour", "goodput_rps", "requests_per_usd_at_demand",
              "requests_per_usd_at_capacity", "tok_per_s_per_gpu", "gap", "solve_time_s", "cell_wall_time_s")
    return pa.schema([(c, kinds.get(c, pa.float64() if c in floats else pa.string())) for c in COLUMNS])


def rows_table(rows: Iterable[CellResult]):
    """``rows`` as a typed ``pyarrow.Table`` (string, int64 and float64 columns; nulls kept)."""
    import pyarrow as pa

    rows = list(rows)
    columns = {column: [getattr(row, column) for row in rows] for column in COLUMNS}
    return pa.Table.from_pydict(columns, schema=_arrow_schema())


def write_parquet(rows: list[CellResult], path: str | Path) -> None:
    """Write ``rows`` as a typed Parquet file, through a temporary file so readers never see half of it."""
    import pyarrow.parquet as pq

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(rows_table(rows), tmp)
    tmp.replace(path)


def write_tables(rows: list[CellResult], out_dir: str | Path) -> tuple[Path, Path]:
    """``results.csv`` and ``results.parquet`` of ``rows`` (already in cell order)."""
    out = Path(out_dir)
    write_atomically(out / CSV_NAME, rows_to_csv(rows))
    write_parquet(rows, out / PARQUET_NAME)
    return out / CSV_NAME, out / PARQUET_NAME


class LiveTables:
    """``results.csv`` with a row appended (and flushed) per finished cell, and ``results.parquet``
    rewritten from the rows so far at most every ``parquet_every_s`` seconds.

    Started with the rows already done; ``close()`` writes the last Parquet file of the rows so far.
    """

    def __init__(self, out_dir: str | Path, done: Iterable[CellResult], parquet_every_s: float = 5.0):
        import time

        self._clock = time.monotonic
        self.out_dir = Path(out_dir)
        self.rows = list(done)
        self.parquet_every_s = parquet_every_s
        write_atomically(self.out_dir / CSV_NAME, rows_to_csv(self.rows))
        self._handle = open(self.out_dir / CSV_NAME, "a", newline="", encoding="utf-8")  # noqa: SIM115 - close()
        self._writer = csv.writer(self._handle, lineterminator="\n")
        self._parquet_written_s = -math.inf
        self.write_parquet_now()

    def append(self, row: CellResult) -> None:
        self.rows.append(row)
        self._writer.writerow([_csv_value(getattr(row, column)) for column in COLUMNS])
        self._handle.flush()
        if self._clock() - self._parquet_written_s >= self.parquet_every_s:
            self.write_parquet_now()

    def write_parquet_now(self) -> None:
        write_parquet(self.rows, self.out_dir / PARQUET_NAME)
        self._parquet_written_s = self._clock()

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()
            self.write_parquet_now()


def read_csv_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a ``results.csv`` as dictionaries of strings (for tests and tools)."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
