"""Read ``vllm bench serve --save-result`` JSON (vLLM 0.33.0, ``vllm/benchmarks/serve.py``).

Keys, as that file writes them:

- ``mean_ttft_ms``, ``mean_tpot_ms``: ``result[f"mean_{metric}_ms"]`` in ``process_one_metric``
  (serve.py:1426) for the metrics "ttft" and "tpot" (serve.py:1434-1435); ``tpot`` excludes the
  first token, as layoutopt's TPOT does. Both are in milliseconds.
- ``completed``, ``total_input_tokens``, ``total_output_tokens``: serve.py:1320-1324; the mean
  lengths are the totals over ``completed``.
- ``max_concurrency`` (serve.py:2330, None without ``--max-concurrency``) and ``request_rate``
  (serve.py:2326-2328, the string "inf" when requests are sent as fast as slots free up).
- ``model_id`` (serve.py:2310), ``backend`` (serve.py:2308), ``date`` (serve.py:2306).
- ``--metadata KEY=VALUE`` pairs are stored as top-level keys (serve.py:2314-2322), so
  ``--metadata gpu=H100 tp_size=4`` records the deployment in the file itself.
- ``--append-result`` writes one JSON object per line (serve.py:2447-2456): each line is a run.

A closed-loop client is what the performance model replays, so a run must have
``max_concurrency`` and ``request_rate`` "inf" (a finite rate is an open-loop run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from layoutopt.calibrate.cases import case_from_run, positive
from layoutopt.calibrate.run_context import RunContext
from layoutopt import io_safe
from layoutopt.errors import InputError
from layoutopt.perf_model.fit import MeasuredCase

REQUIRED_KEYS = ("mean_ttft_ms", "mean_tpot_ms", "completed", "total_input_tokens", "total_output_tokens")
# --metadata keys read as run facts (the sidecar's names; layout degrees as Layout fields).
METADATA_FACTS = ("model", "gpu", "engine")
METADATA_DEGREES = ("tp_size", "pp_size", "ep_size", "dp_size", "dcp_size", "pcp_size")


def is_vllm_result(data: Any) -> bool:
    return isinstance(data, dict) and "mean_ttft_ms" in data and "completed" in data


def read_json_objects(path: Path) -> list[Any]:
    """The JSON value of ``path``, or one per line for an ``--append-result`` file."""
    text = io_safe.read_text(path, "measurements", "JSON file")
    try:
        return [io_safe.parse_json_text(text, "measurements", str(path))]
    except InputError:
        pass
    objects = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            objects.append(io_safe.parse_json_text(line, "measurements", str(path)))
        except InputError as error:
            raise InputError(f"{path}: line {number}", line[:40], f"a JSON object ({error.hint})") from None
    return objects


def _metadata_context(data: dict, where: str) -> RunContext:
    facts: dict[str, Any] = {k: data[k] for k in METADATA_FACTS if isinstance(data.get(k), str)}
    degrees = {k: data[k] for k in METADATA_DEGREES if k in data}
    if "weight_precision" in data:
        degrees["weight_precision"] = data["weight_precision"]
    if degrees:
        facts["layout"] = degrees
    try:
        return RunContext.model_validate(facts)
    except ValueError as error:
        raise InputError(f"{where}: metadata", facts, str(error).splitlines()[-1]) from None


def vllm_case(data: dict, context: RunContext, where: str, row_id: str) -> MeasuredCase:
    """One case from one ``vllm bench serve`` result object."""
    for key in REQUIRED_KEYS:
        if data.get(key) is None:
            raise InputError(f"{where}: {key}", data.get(key),
                             "a number; vllm bench serve writes it with --save-result (percentile metrics must "
                             "include ttft and tpot: --percentile-metrics ttft,tpot,itl)")
    completed = positive(where, "completed", data["completed"])
    rate = data.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, (int, float)) and math.isinf(rate)):
        raise InputError(f"{where}: request_rate", rate,
                         "'inf' (closed loop: --max-concurrency N without --request-rate); a finite rate is an "
                         "open-loop run the calibration does not replay")
    concurrency = data.get("max_concurrency")
    if concurrency is not None:
        concurrency = positive(where, "max_concurrency", concurrency)
    # Facts recorded with --metadata take precedence over nothing, and give way to the user's.
    merged = _metadata_context(data, where).merged(context)
    if merged.model is None and isinstance(data.get("model_id"), str):
        merged = merged.merged(RunContext(model=data["model_id"]))
    return case_from_run(
        row_id, merged, where,
        isl=positive(where, "total_input_tokens", data["total_input_tokens"]) / completed,
        osl=positive(where, "total_output_tokens", data["total_output_tokens"]) / completed,
        concurrency=concurrency, ttft_ms=positive(where, "mean_ttft_ms", data["mean_ttft_ms"]),
        tpot_ms=positive(where, "mean_tpot_ms", data["mean_tpot_ms"]))
