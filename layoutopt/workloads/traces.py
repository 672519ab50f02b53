"""Read request traces: one (input_tokens, output_tokens) pair per request, from CSV or JSONL.

CSV needs a header row (lines starting with ``#`` are comments) and is parsed by
``pyarrow.csv``; JSONL holds one JSON object per line (``.json`` may hold a list of such objects)
and goes through the shared reader (:mod:`layoutopt.io_safe`: duplicate keys, non-finite numbers
and nesting are refused there, which ``pyarrow.json`` would accept). Column names are matched case-insensitively, with spaces and dashes read as
underscores, and common aliases are accepted (see ``INPUT_COLUMNS`` and ``OUTPUT_COLUMNS``:
``isl``/``osl``, ``prompt_tokens``/``completion_tokens``, Azure's ``ContextTokens``/
``GeneratedTokens``, Mooncake's ``input_length``/``output_length``, BurstGPT's
``Request tokens``/``Response tokens``). Other columns (timestamps, ids) are ignored.
"""

from __future__ import annotations

import io
import re
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
# comment lines ('#' first) and lines of only commas and blanks, up to (not including) the newline
_BLANK_LINES = re.compile(r"^[ \t]*(?:#[^\r\n]*|[ \t,]*)\r?$", re.MULTILINE)


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


def _csv_pairs(text: str, path: Path, field: str) -> list[tuple[int, int]]:
    """The (input, output) pairs of a CSV trace, read with ``pyarrow.csv``; errors name the file line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    # '#' lines are comments (a note on where the trace came from) and rows of empty cells carry
    # nothing: blank both (pyarrow skips blank lines); the line count stays, for error messages
    cleaned = _BLANK_LINES.sub("", text)
    if not cleaned.strip():
        return []
    data = cleaned.encode()
    try:
        header = pa_csv.open_csv(io.BytesIO(data)).schema.names
        in_col, out_col = _pick_columns([name.strip() for name in header], str(path), field)
        raw = {name.strip(): name for name in header}
        as_text = {raw[in_col]: pa.string(), raw[out_col]: pa.string()}
        table = pa_csv.read_csv(io.BytesIO(data), convert_options=pa_csv.ConvertOptions(
            include_columns=list(as_text), column_types=as_text, strings_can_be_null=False))
    except pa.ArrowInvalid as error:
        raise InputError(field, str(path), "a well-formed CSV file", str(error).splitlines()[0]) from None
    if table.num_rows == 0:
        return []
    if table.num_rows > MAX_TRACE_REQUESTS:
        raise InputError(field, str(path), f"a trace of at most {MAX_TRACE_REQUESTS:,} requests",
                         "sample it down, e.g. every n-th row: the length distributions keep their shape")
    columns = []
    for name in (in_col, out_col):
        column = table.column(raw[name])
        try:  # every cell a whole number in range: convert at once
            counts = pc.cast(column, pa.int64())
            low, high = pc.min_max(counts).values()
            if low.as_py() >= 1 and high.as_py() <= MAX_TOKENS:
                columns.append(counts.to_pylist())
                continue
        except pa.ArrowInvalid:
            pass
        # the first bad cell, named by its file line and shown as written
        line_numbers = [number for number, line in enumerate(cleaned.splitlines(), start=1) if line.strip()]
        columns.append([_token_count(value, f"{field}[{path.name}:{line_numbers[row + 1]}].{name}")
                        for row, value in enumerate(column.to_pylist())])
    return list(zip(*columns))


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


def _json_pairs(text: str, path: Path, field: str) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    columns: tuple[str, str] | None = None
    for line_no, row in _jsonl_rows(text, path, field):
        if len(pairs) == MAX_TRACE_REQUESTS:
            raise InputError(field, str(path), f"a trace of at most {MAX_TRACE_REQUESTS:,} requests",
                             "sample it down, e.g. every n-th row: the length distributions keep their shape")
        where = f"{field}[{path.name}:{line_no}]"
        if not isinstance(row, dict):
            raise InputError(where, row, "an object with input_tokens and output_tokens")
        if columns is None:
            columns = _pick_columns(row.keys(), str(path), field)
        in_col, out_col = columns
        pairs.append((_token_count(row.get(in_col), f"{where}.{in_col}"),
                      _token_count(row.get(out_col), f"{where}.{out_col}")))
    return pairs


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
    pairs = _csv_pairs(text, path, field) if suffix == ".csv" else _json_pairs(text, path, field)
    if not pairs:
        raise InputError(field, str(path), "a trace with at least one request", "the file has no rows")
    return pairs
