"""Read request traces: one (input_tokens, output_tokens) pair per request, from CSV or JSONL.

CSV needs a header row (lines starting with ``#`` are comments); JSONL holds one JSON object
per line (``.json`` may hold a list of such objects). Column names are matched case-insensitively, with spaces and dashes read as
underscores, and common aliases are accepted (see ``INPUT_COLUMNS`` and ``OUTPUT_COLUMNS``:
``isl``/``osl``, ``prompt_tokens``/``completion_tokens``, Azure's ``ContextTokens``/
``GeneratedTokens``, Mooncake's ``input_length``/``output_length``, BurstGPT's
``Request tokens``/``Response tokens``). Other columns (timestamps, ids) are ignored.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from layoutopt.bounds import MAX_TOKENS, MAX_TRACE_BYTES, MAX_TRACE_REQUESTS
from layoutopt.errors import InputError
from layoutopt.io_safe import parse_json_text, read_text

INPUT_COLUMNS = (
    "input_tokens", "isl", "prompt_tokens", "input_length", "input_len", "prompt_length", "prompt_len",
    "num_input_tokens", "num_prompt_tokens", "context_tokens", "contexttokens", "request_tokens",
)
OUTPUT_COLUMNS = (
    "output_tokens", "osl", "completion_tokens", "output_length", "output_len", "generated_tokens",
    "generatedtokens", "num_output_tokens", "num_generated_tokens", "response_tokens",
)
TRACE_SUFFIXES = (".csv", ".jsonl", ".ndjson", ".json")

_ALLOWED_VALUE = f"a whole number of tokens in 1..{MAX_TOKENS:,}"


def _normalize(column: str) -> str:
    return column.strip().lower().replace(" ", "_").replace("-", "_")


def _pick_columns(columns: Iterable[str], where: str, field: str) -> tuple[str, str]:
    """(input column, output column) among ``columns``, as spelled in the file."""
    columns = list(columns)
    chosen = []
    for role, aliases in (("input_tokens", INPUT_COLUMNS), ("output_tokens", OUTPUT_COLUMNS)):
        found = [c for c in columns if _normalize(c) in aliases]
        if len(found) != 1:
            problem = "no column" if not found else f"several columns ({', '.join(found)})"
            raise InputError(
                field, where, f"{problem} for {role}; found columns {columns}",
                f"name exactly one of: {', '.join(aliases)}",
            )
        chosen.append(found[0])
    return chosen[0], chosen[1]


def _token_count(raw: Any, field: str) -> int:
    """A token count from a cell or JSON value; the error shows the value as written."""
    value = raw
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise InputError(field, raw, _ALLOWED_VALUE) from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise InputError(field, raw, _ALLOWED_VALUE)
    return value


def _csv_rows(text: str, path: Path, field: str) -> Iterator[tuple[int, dict[str, Any]]]:
    # '#' lines are comments (a note on where the trace came from); blank them to keep line numbers
    lines = ("\n" if line.lstrip().startswith("#") else line for line in io.StringIO(text, newline=""))
    reader = csv.reader(lines)
    header: list[str] | None = None
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            continue
        yield reader.line_num, dict(zip(header, row))


def _jsonl_rows(text: str, path: Path, field: str) -> Iterator[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        records = parse_json_text(text, field, str(path))
        for index, record in enumerate(records, start=1):
            yield index, record
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield line_no, parse_json_text(line, field, str(path))
        except InputError as error:
            raise InputError(field, str(path), "one JSON object per line", f"line {line_no}: {error.hint}") from None


def load_trace(path: str | Path, field: str = "trace") -> list[tuple[int, int]]:
    """(input_tokens, output_tokens) per request of a CSV or JSONL trace file.

    ``field`` names the input in error messages (``workload.trace``). Every problem raises one
    ``InputError`` naming the file, the line and the column.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TRACE_SUFFIXES:
        raise InputError(field, str(path), f"a trace file ending in {', '.join(TRACE_SUFFIXES)}")
    if not path.is_file():
        raise InputError(field, str(path), "an existing trace file", "no such file")
    text = read_text(path, field, "trace file", max_bytes=MAX_TRACE_BYTES)
    if text.count("\n") > 2 * MAX_TRACE_REQUESTS:  # refuse at once what cannot fit, blank or comment lines aside
        raise InputError(field, str(path), f"a trace of at most {MAX_TRACE_REQUESTS:,} requests",
                         "sample it down, e.g. every n-th row: the length distributions keep their shape")
    rows = _csv_rows(text, path, field) if suffix == ".csv" else _jsonl_rows(text, path, field)
    pairs: list[tuple[int, int]] = []
    columns: tuple[str, str] | None = None
    try:
        for line_no, row in rows:
            if len(pairs) == MAX_TRACE_REQUESTS:
                raise InputError(field, str(path), f"a trace of at most {MAX_TRACE_REQUESTS:,} requests",
                                 "sample it down, e.g. every n-th row: the length distributions keep their shape")
            where = f"{field}[{path.name}:{line_no}]"
            if not isinstance(row, dict):
                raise InputError(where, row, "an object with input_tokens and output_tokens")
            if columns is None:
                columns = _pick_columns(row.keys(), str(path), field)
            in_col, out_col = columns
            pairs.append((
                _token_count(row.get(in_col), f"{where}.{in_col}"),
                _token_count(row.get(out_col), f"{where}.{out_col}"),
            ))
    except UnicodeDecodeError as error:
        raise InputError(field, str(path), "a UTF-8 text file", str(error)) from None
    except csv.Error as error:
        raise InputError(field, str(path), "a well-formed CSV file", str(error)) from None
    if not pairs:
        raise InputError(field, str(path), "a trace with at least one request", "the file has no rows")
    return pairs
