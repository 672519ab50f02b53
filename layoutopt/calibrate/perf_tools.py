"""Read genai-perf and aiperf exports (their JSON and CSV summaries).

aiperf 0.13.0 (``aiperf/``):
- ``profile_export_aiperf.json`` / ``.csv`` (config/artifacts.py:50-51).
- JSON: one entry per metric tag at the top level, each ``{"unit": ..., "avg": ..., "p50": ...}``
  (common/models/export_models.py:37-45 ``JsonMetricResult``; fields at 310-336 of
  ``JsonExportData``, among them ``time_to_first_token``, ``inter_token_latency``,
  ``input_sequence_length``, ``output_sequence_length`` and ``input_config``). The tags are those
  of metrics/types/ttft_metric.py:18, inter_token_latency_metric.py:36 (request latency minus
  TTFT over the tokens after the first chunk: layoutopt's TPOT), input_sequence_length_metric.py:20,
  output_sequence_length_metric.py:24; times are exported in their display unit, ms.
- ``input_config``: the BenchmarkConfig; ``models.items[].name`` (config/config.py:166,
  config/models.py:127 and :57) and ``phases[]`` with ``name``, ``type`` and ``concurrency``
  (config/config.py:226, config/phases.py:168 and :518; the profiling phase is the one that counts).
- CSV: a ``Metric,avg,min,max,...`` section whose names are the metric headers with the unit in
  parentheses, e.g. ``Time to First Token (ms)`` (exporters/metrics_csv_exporter.py:96-122,
  metrics/types/ttft_metric.py:19); then a ``Metric,Value`` section.

genai-perf 0.0.16 (``genai_perf/``):
- ``profile_export_genai_perf.json``: the statistics per metric name plus ``input_config``
  (export_data/json_exporter.py:60-71); metric names ``time_to_first_token``,
  ``inter_token_latency``, ``output_sequence_length``, ``input_sequence_length``
  (metrics/llm_metrics.py:37-50), each ``{"unit": "ms", "avg": ...}``; the model in
  ``input_config.model_names`` (config/input/config_command.py:55) and the load in
  ``input_config.perf_analyzer.stimulus`` = ``{"concurrency": N}`` (config/input/config_defaults.py:84).
- ``profile_export_genai_perf.csv``: header ``Metric,avg,min,max,p99,...`` (export_data/csv_exporter.py:44-58)
  and names ``name.replace("_", " ").title()`` with ``(unit)`` (export_data/exporter_utils.py:48-49),
  e.g. ``Time To First Token (ms)``.

The CSV exports carry neither model nor concurrency: give them with options or a sidecar YAML.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from layoutopt.calibrate.cases import case_from_run, positive
from layoutopt.calibrate.run_context import RunContext
from layoutopt.errors import InputError
from layoutopt.perf_model.fit import MeasuredCase

TTFT, ITL, ISL, OSL = "time_to_first_token", "inter_token_latency", "input_sequence_length", "output_sequence_length"
METRICS = (TTFT, ITL, ISL, OSL)
_TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def is_perf_tool_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get(TTFT), dict) and "avg" in data[TTFT]


def _ms(where: str, metric: str, value: object, unit: str) -> float:
    scale = _TIME_UNIT_MS.get(unit.strip().lower())
    if scale is None:
        raise InputError(f"{where}: {metric}.unit", unit, f"one of {', '.join(_TIME_UNIT_MS)}")
    return positive(where, f"{metric}.avg", value) * scale


def _json_context(config: Any) -> tuple[RunContext, float | None]:
    """(model from the export's input_config, client concurrency) of an aiperf / genai-perf JSON."""
    if not isinstance(config, dict):
        return RunContext(), None
    model = None
    models = config.get("models")
    if isinstance(models, dict) and models.get("items"):  # aiperf ModelsAdvanced
        model = models["items"][0].get("name")
    elif isinstance(config.get("model_names"), list) and config["model_names"]:  # genai-perf
        model = config["model_names"][0]
    concurrency = None
    phases = config.get("phases")
    if isinstance(phases, list):  # aiperf: the profiling phase (not warmup)
        profiling = [p for p in phases if isinstance(p, dict) and p.get("name") != "warmup"]
        if profiling:
            concurrency = profiling[-1].get("concurrency")
            if profiling[-1].get("type") not in (None, "concurrency"):
                raise InputError("input_config.phases.type", profiling[-1].get("type"),
                                 "'concurrency' (a closed-loop run); rate-driven runs are open loop and are "
                                 "not replayed by the calibration")
    stimulus = (config.get("perf_analyzer") or {}).get("stimulus") if isinstance(config.get("perf_analyzer"),
                                                                                  dict) else None
    if isinstance(stimulus, dict):  # genai-perf
        if "concurrency" not in stimulus:
            raise InputError("input_config.perf_analyzer.stimulus", stimulus,
                             "{concurrency: N} (a closed-loop run); request-rate runs are not replayed")
        concurrency = stimulus["concurrency"]
    return RunContext(model=model if isinstance(model, str) else None), concurrency


def perf_tool_json_case(data: dict, context: RunContext, where: str, row_id: str) -> MeasuredCase:
    for metric in METRICS:
        entry = data.get(metric)
        if not isinstance(entry, dict) or entry.get("avg") is None:
            raise InputError(f"{where}: {metric}.avg", entry,
                             "a number; the export has it for streaming runs (aiperf/genai-perf --streaming)")
    found, concurrency = _json_context(data.get("input_config"))
    merged = found.merged(context)
    if concurrency is not None:
        concurrency = positive(where, "input_config concurrency", concurrency)
    if context.concurrency is not None:
        concurrency = context.concurrency
    return case_from_run(
        row_id, merged, where,
        isl=positive(where, f"{ISL}.avg", data[ISL]["avg"]), osl=positive(where, f"{OSL}.avg", data[OSL]["avg"]),
        concurrency=concurrency, ttft_ms=_ms(where, TTFT, data[TTFT]["avg"], data[TTFT].get("unit", "ms")),
        tpot_ms=_ms(where, ITL, data[ITL]["avg"], data[ITL].get("unit", "ms")))


_NAME_UNIT = re.compile(r"^\s*(?P<name>.*?)\s*(?:\((?P<unit>[^)]*)\))?\s*$")


def is_perf_tool_csv(header: list[str]) -> bool:
    return bool(header) and header[0].strip() == "Metric" and "avg" in [h.strip() for h in header]


def perf_tool_csv_case(path: Path, context: RunContext) -> MeasuredCase:
    """One case from an aiperf / genai-perf CSV summary (the first, per-request section)."""
    where = str(path)
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header = [h.strip() for h in rows[0]]
    avg = header.index("avg")
    values: dict[str, tuple[str, str]] = {}
    for row in rows[1:]:
        if not row or row[0].strip() == "Metric":
            break  # the system-metrics section starts
        match = _NAME_UNIT.match(row[0])
        key = match["name"].lower().replace(" ", "_") if match else row[0]
        values[key] = (row[avg].replace(",", "") if len(row) > avg else "", (match["unit"] or "") if match else "")
    for metric in METRICS:
        if metric not in values or not values[metric][0]:
            shown = metric.replace("_", " ").title()
            raise InputError(f"{where}: {shown}", values.get(metric, ("missing",))[0],
                             "a number in the avg column (the row is written for streaming runs)")
    ttft = _ms(where, TTFT, values[TTFT][0], values[TTFT][1] or "ms")
    itl = _ms(where, ITL, values[ITL][0], values[ITL][1] or "ms")
    return case_from_run(path.stem, context, where, isl=positive(where, ISL, values[ISL][0]),
                         osl=positive(where, OSL, values[OSL][0]), concurrency=context.concurrency,
                         ttft_ms=ttft, tpot_ms=itl)
