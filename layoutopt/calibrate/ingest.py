"""Measurements from files, whatever tool wrote them, as the perf model's MeasuredCase objects.

Formats (detected from the content, not the name):

- the CSV of ``reference/measurements`` (many runs, the deployment in the columns);
- ``vllm bench serve --save-result`` JSON, one run per file or per line (``--append-result``);
- aiperf / genai-perf ``profile_export_*`` JSON and CSV summaries, one run each.

For the last two the deployment comes from the ``RunContext`` (options or a sidecar YAML).
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from layoutopt.calibrate import perf_tools, reference_csv, vllm_bench
from layoutopt.calibrate.run_context import RunContext, load_run_context, sidecar_for
from layoutopt import io_safe
from layoutopt.errors import InputError
from layoutopt.perf_model.fit import MeasuredCase

FORMATS = ("reference CSV (reference/measurements columns)", "vllm bench serve --save-result JSON",
           "aiperf/genai-perf profile_export JSON", "aiperf/genai-perf profile_export CSV")


@dataclass
class Ingested:
    """Cases read from files, with where each came from and the rows left out (and why)."""

    cases: list[MeasuredCase] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)  # file -> format read
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (row id, reason)
    source_of: dict[str, str] = field(default_factory=dict)  # row id -> file


def _context_for(path: Path, given: RunContext, run_info: Path | None) -> RunContext:
    sidecar = run_info or sidecar_for(path)
    base = load_run_context(sidecar) if sidecar is not None else RunContext()
    return base.merged(given)


def _read_csv_header(path: Path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle), [])


def ingest(paths: list[str | Path], context: RunContext | None = None, run_info: str | Path | None = None,
           engine: str | None = None, gpu: str | None = None, aiconfigurator_launch: bool = False) -> Ingested:
    """Read every file; keep the cases of ``engine`` measured on ``gpu`` (catalog name) when given.
    ``aiconfigurator_launch``: rows of measurement CSVs without a ``step_token_budget`` were launched
    by AIConfigurator's generator (its token budget rules), not with the engine's default budget."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    given = context or RunContext()
    info = Path(run_info) if run_info is not None else None
    out = Ingested()
    wanted_gpu = get_gpu(gpu).name if gpu else None
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            raise InputError("MEASUREMENTS", str(path), "an existing file (" + "; ".join(FORMATS) + ")")
        # size and UTF-8 through the shared reader before any CSV or JSON reader sees the file
        io_safe.read_text(path, "MEASUREMENTS", "measurement file", max_bytes=io_safe.MAX_PLAN_BYTES)
        cases: list[MeasuredCase]
        if path.suffix.lower() == ".json" or path.suffix.lower() == ".jsonl":
            objects = vllm_bench.read_json_objects(path)
            run = _context_for(path, given, info)
            cases = []
            for index, data in enumerate(objects):
                where = f"{path}" + (f" (run {index + 1})" if len(objects) > 1 else "")
                row_id = path.stem + (f"#{index + 1}" if len(objects) > 1 else "")
                if vllm_bench.is_vllm_result(data):
                    out.formats[str(path)] = FORMATS[1]
                    cases.append(vllm_bench.vllm_case(data, run, where, row_id))
                elif perf_tools.is_perf_tool_json(data):
                    out.formats[str(path)] = FORMATS[2]
                    cases.append(perf_tools.perf_tool_json_case(data, run, where, row_id))
                else:
                    keys = ", ".join(list(data)[:6]) if isinstance(data, dict) else type(data).__name__
                    raise InputError(f"{where}", f"keys {keys}",
                                     "a vllm bench serve result (mean_ttft_ms, mean_tpot_ms, completed, ...) or an "
                                     "aiperf/genai-perf export (time_to_first_token: {avg, unit}, ...)")
        else:
            header = _read_csv_header(path)
            if reference_csv.is_reference_csv(header):
                out.formats[str(path)] = FORMATS[0]
                cases, left_out = reference_csv.reference_cases(path, aiconfigurator_launch)
                out.left_out += [(rid, reason) for rid, row_engine, row_gpu, reason in left_out
                                 if (engine is None or row_engine == engine)
                                 and (wanted_gpu is None or row_gpu in (wanted_gpu, ""))]
            elif perf_tools.is_perf_tool_csv(header):
                out.formats[str(path)] = FORMATS[3]
                run = _context_for(path, given, info)
                cases = [perf_tools.perf_tool_csv_case(path, run)]
            else:
                raise InputError(f"{path}: header", ",".join(header[:6]),
                                 "a measurements CSV (id,backend,...,ttft_ms,tpot_ms) or an aiperf/genai-perf "
                                 "CSV export (Metric,avg,...)")
        for case in cases:
            if engine is not None and case.engine != engine:
                continue
            if wanted_gpu is not None and case.gpu != wanted_gpu:
                continue
            if case.row_id in out.source_of:  # same file name in two folders: keep ids unique
                case = dataclasses.replace(case, row_id=f"{case.row_id}@{path.parent.name or path}")
            out.cases.append(case)
            out.source_of[case.row_id] = str(path)
    return out
