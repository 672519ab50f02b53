"""Read measurement CSVs in the format of ``reference/measurements/*.csv`` (one run per row).

The columns are those of the reference files (their README describes them); rows are parsed by
the perf model's :func:`~layoutopt.perf_model.fit.load_cases`, after a check here that every
required column exists and every number parses, so a bad file gets one message naming the row,
the column and the value instead of a traceback.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from layoutopt.errors import InputError
from layoutopt.perf_model.fit import MeasuredCase, load_cases

REQUIRED_COLUMNS = ("id", "backend", "model", "system", "mode", "isl", "osl", "concurrency", "ttft_ms", "tpot_ms")
NUMERIC_COLUMNS = ("isl", "osl", "ttft_ms", "tpot_ms")
OPTIONAL_NUMERIC_COLUMNS = ("concurrency", "tp", "pp", "attention_dp", "moe_tp", "moe_ep", "prefill_workers",
                            "prefill_tp", "prefill_pp", "prefill_attention_dp", "prefill_moe_tp", "prefill_moe_ep",
                            "decode_workers", "decode_tp", "decode_pp", "decode_attention_dp", "decode_moe_tp",
                            "decode_moe_ep", "decode_batch", "step_token_budget",
                            "attention_dp_balance_timeout_iters", "attention_dp_batching_wait_iters",
                            "batch_wait_timeout_iters", "batch_wait_max_tokens_ratio", "random_range_ratio",
                            "scheduler_recv_interval", "graphed_prompt_tokens")
# Columns that are shares: 0 <= x <= 1 (random_range_ratio: the client drew lengths uniformly on
# int(isl x r) .. isl, as vLLM's and InferenceX's random dataset do; empty or 1: fixed lengths).
FRACTION_COLUMNS = ("batch_wait_max_tokens_ratio", "random_range_ratio")
MODES = ("agg", "disagg")
ENGINES = ("vllm", "sglang", "trtllm")


def is_reference_csv(header: list[str]) -> bool:
    return "ttft_ms" in header and "tpot_ms" in header and "backend" in header


def _check_rows(path: Path, rows: list[dict], header: list[str]) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: columns", ",".join(missing) + " missing",
                         f"the columns of reference/measurements/*.csv: {', '.join(REQUIRED_COLUMNS)}, ...")
    for number, row in enumerate(rows, start=2):
        where = f"{path}: line {number} ({row.get('id') or 'no id'})"
        if row["mode"] not in MODES:
            raise InputError(f"{where}: mode", row["mode"], "agg or disagg")
        if row["backend"] not in ENGINES:
            raise InputError(f"{where}: backend", row["backend"], ", ".join(ENGINES))
        for column in NUMERIC_COLUMNS + OPTIONAL_NUMERIC_COLUMNS:
            text = (row.get(column) or "").strip()
            if not text and column not in NUMERIC_COLUMNS:
                continue
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if column in NUMERIC_COLUMNS and not (math.isfinite(value) and value > 0):
                raise InputError(f"{where}: {column}", text, "a number > 0")
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"{where}: {column}", text, "a number >= 0 or empty")
            if column in FRACTION_COLUMNS and value > 1:
                raise InputError(f"{where}: {column}", text, "a share between 0 and 1, or empty")


def reference_cases(path: Path, aiconfigurator_launch: bool = False
                    ) -> tuple[list[MeasuredCase], list[tuple[str, str, str, str]]]:
    """(cases, rows the perf model cannot replay as (row id, engine, GPU, reason)).

    A row's step token budget is its optional ``step_token_budget`` column, else AIConfigurator's
    rule when ``aiconfigurator_launch`` (the reference rows' launches), else the engine's default:
    a user's own runs are not assumed to have been launched the way the reference rows were. The same
    holds for TensorRT-LLM's attention-DP balancing (``attention_dp_balance_timeout_iters`` and
    ``attention_dp_batching_wait_iters`` columns, else the reference launches' setting, else off)."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    _check_rows(path, rows, header)
    cases, left_out = load_cases(path, aiconfigurator_launch=aiconfigurator_launch)
    return cases, [(item.row_id, item.engine, item.gpu, item.reason) for item in left_out]
