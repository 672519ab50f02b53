"""Read SLO and workload YAML files into validated models; every bad input is one ``InputError``.

``slo.yaml``::

    ttft_ms: {p90: 1000}        # percentile -> time to first token target, ms (p50, p99, p99.9, ...)
    tpot_ms: {p90: 30}          # percentile -> time per output token target, ms
    attainment: 0.9             # fraction of requests that must meet both, in (0, 1]; default 0.9

``workload.yaml`` (every key optional except that lengths must come from somewhere)::

    preset: chat                # start from a preset (chat, rag, agent, summarization, code)
    name: my-service
    input_tokens: {lognormal: {mean: 2000, p90: 4000}}   # or {lognormal: {median: .., p90: ..}}
    output_tokens: {fixed: 512}                          # or just 512
    # other shapes: {histogram: {tokens: [512, 2048], weights: [3, 1]}}, {empirical: [..]}
    # trace: trace.csv          # instead of the two lengths: (input, output) pairs, relative to this file
    arrival_rate_rps: 5         # omit to let the optimizer find the highest rate
    prefix_cache_hit_fraction: 0.3

The model's own JSON form (``{kind: lognormal, mean: .., p90: ..}``, ``trace_pairs``) is accepted
too, so ``workload_from_dict(w.model_dump()) == w``. A top-level ``slo:`` or ``workload:`` key
wrapping the mapping is unwrapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from layoutopt import io_safe
from layoutopt.errors import InputError, closest_matches
from layoutopt.workloads.distributions import DISTRIBUTION_KINDS, LognormalLength
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.traces import load_trace
from layoutopt.workloads.workload import Workload

_WORKLOAD_KEYS = ("preset", "trace", *Workload.model_fields)
_SHORTHAND_FIELD = {"fixed": "tokens", "empirical": "tokens"}  # {fixed: 1024} means {fixed: {tokens: 1024}}


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


class _Abbreviated:
    """Shows a long value in an error message without printing all of it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _shown(value: object, limit: int = 80) -> object:
    """``value`` itself, or a stand-in with a shortened repr when it is long (a whole trace)."""
    text = repr(value)
    return value if len(text) <= limit else _Abbreviated(text[: limit - 3] + "...")


def input_error_from_validation(error: ValidationError, prefix: str) -> InputError:
    """The first problem of a pydantic error as an ``InputError`` naming its dotted field path."""
    problems = error.errors()
    first = problems[0]
    field = prefix
    loc = list(first["loc"])
    if "[key]" in loc and not isinstance(loc[loc.index("[key]") - 1], str):
        loc = loc[: loc.index("[key]") - 1]  # a key that is no name (true, 90): name the mapping
    for part in loc:
        if isinstance(part, int):
            field += f"[{part}]"
        elif part != "[key]" and not str(part).startswith("function-"):
            field += f".{part}"
    value: object = _Missing() if first["type"] == "missing" else _shown(first.get("input"))
    allowed = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        allowed = "unknown key"
    elif first["type"] == "missing":
        allowed = "required"
    # fields missing because another one failed (marginals of a bad trace) are not news
    others = [p for p in problems[1:] if p["type"] != "missing"]
    hint = f"and {len(others)} more problem(s)" if others else None
    return InputError(field, value, allowed, hint)


def _check_keys(mapping: dict, allowed: tuple[str, ...] | list[str], field: str) -> None:
    for key in mapping:
        if key not in allowed:
            close = closest_matches(str(key), allowed)
            hint = f"did you mean {', '.join(close)}?" if close else None
            raise InputError(f"{field}.{key}", key, f"unknown key; allowed: {', '.join(allowed)}", hint)


def _require_mapping(value: Any, field: str, example: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(field, _shown(value), f"a mapping such as {example}")
    return value


def read_yaml(path: str | Path, field: str) -> Any:
    """Parse a YAML file through the shared reader (:func:`layoutopt.io_safe.read_yaml`)."""
    return io_safe.read_yaml(path, field)


def _unwrap(data: Any, key: str) -> Any:
    if isinstance(data, dict) and list(data) == [key] and isinstance(data[key], dict):
        return data[key]
    return data


def slo_from_dict(data: Any, field: str = "slo") -> SLO:
    """An ``SLO`` from the mapping of an ``slo.yaml``."""
    data = _require_mapping(_unwrap(data, "slo"), field, "{ttft_ms: {p90: 1000}, tpot_ms: {p90: 30}}")
    _check_keys(data, list(SLO.model_fields), field)
    for target in ("ttft_ms", "tpot_ms"):
        if target in data and not isinstance(data[target], dict):
            raise InputError(f"{field}.{target}", data[target], "percentile targets in ms, e.g. {p90: 1000}")
    try:
        return SLO.model_validate(data)
    except ValidationError as error:
        raise input_error_from_validation(error, field) from None


def _lognormal_from_median(params: dict, field: str) -> dict:
    if "mean" in params:
        raise InputError(f"{field}.median", params["median"], "give mean or median, not both")
    for key in ("median", "p90"):
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            shown = _Missing() if key not in params else value
            raise InputError(f"{field}.{key}", shown, "a number of tokens > 0")
    try:
        dist = LognormalLength.from_median_p90(params["median"], params["p90"], params.get("max_tokens"))
    except ValidationError as error:
        raise input_error_from_validation(error, field) from None
    except ValueError as error:
        raise InputError(f"{field}.p90", params["p90"], str(error)) from None
    return dist.model_dump()


def length_spec(value: Any, field: str) -> dict:
    """The model form ``{kind: .., ...}`` of a length given as ``{lognormal: {...}}``, ``{fixed: n}``, ``n``, ..."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"kind": "fixed", "tokens": value}
    kinds = list(DISTRIBUTION_KINDS)
    if not isinstance(value, dict):
        raise InputError(field, _shown(value), "a whole number of tokens, or a mapping such as "
                         "{lognormal: {mean: 2000, p90: 4000}} or {fixed: 1024}")
    if "kind" in value:  # the model's own form
        kind = value["kind"]
        if kind not in DISTRIBUTION_KINDS:
            raise InputError(f"{field}.kind", kind, f"one of {', '.join(kinds)}")
        _check_keys(value, list(DISTRIBUTION_KINDS[kind].model_fields), field)
        return dict(value)
    if len(value) != 1:
        raise InputError(field, _shown(value), f"exactly one of {', '.join(kinds)}, e.g. {{fixed: 1024}}")
    (kind, params), = value.items()
    _check_keys({kind: None}, kinds, field)
    inner = f"{field}.{kind}"
    if not isinstance(params, dict):
        if kind not in _SHORTHAND_FIELD:
            raise InputError(inner, _shown(params), f"a mapping of {', '.join(_params_of(kind))}")
        params = {_SHORTHAND_FIELD[kind]: params}
    allowed = _params_of(kind) + (["median"] if kind == "lognormal" else [])
    _check_keys(params, allowed, inner)
    if kind == "lognormal" and "median" in params:
        return _lognormal_from_median(params, inner)
    return {"kind": kind, **params}


def _params_of(kind: str) -> list[str]:
    return [name for name in DISTRIBUTION_KINDS[kind].model_fields if name != "kind"]


def workload_from_dict(data: Any, base_dir: str | Path | None = None, field: str = "workload") -> Workload:
    """A ``Workload`` from the mapping of a ``workload.yaml``; a ``trace`` path is read relative to ``base_dir``."""
    data = _require_mapping(_unwrap(data, "workload"), field, "{preset: chat} or {input_tokens: .., output_tokens: ..}")
    _check_keys(data, _WORKLOAD_KEYS, field)
    merged: dict[str, Any] = {}
    if "preset" in data:
        if not isinstance(data["preset"], str):
            raise InputError(f"{field}.preset", data["preset"], "a preset name such as chat")
        merged = preset_workload(data["preset"]).model_dump()
    if "trace" in data:
        clashing = [key for key in ("input_tokens", "output_tokens", "trace_pairs") if key in data]
        if clashing:
            raise InputError(f"{field}.{clashing[0]}", _shown(data[clashing[0]]),
                             "omit it when trace is given: the trace supplies the lengths")
        if not isinstance(data["trace"], str):
            raise InputError(f"{field}.trace", data["trace"], "the path of a CSV or JSONL trace file")
        trace_path = Path(base_dir or ".") / data["trace"]
        merged.update(trace_pairs=load_trace(trace_path, f"{field}.trace"), trace_source=data["trace"])
        merged.pop("input_tokens", None)
        merged.pop("output_tokens", None)
        merged.setdefault("name", Path(data["trace"]).stem)
    elif "trace_pairs" in data and not any(key in data for key in ("input_tokens", "output_tokens")):
        merged.pop("input_tokens", None)
        merged.pop("output_tokens", None)
    for key, value in data.items():
        if key in ("input_tokens", "output_tokens"):
            merged[key] = length_spec(value, f"{field}.{key}")
        elif key not in ("preset", "trace"):
            merged[key] = value
    for key in ("input_tokens", "output_tokens"):
        if key not in merged and "trace_pairs" not in merged:
            raise InputError(f"{field}.{key}", _Missing(), "required unless preset or trace is given",
                             "e.g. input_tokens: {lognormal: {mean: 2000, p90: 4000}}")
    try:
        return Workload.model_validate(merged)
    except ValidationError as error:
        raise input_error_from_validation(error, field) from None


def load_slo(path: str | Path) -> SLO:
    """Read an ``slo.yaml`` (shape in this module's docstring)."""
    return slo_from_dict(read_yaml(path, "slo"))


def load_workload(path: str | Path) -> Workload:
    """Read a ``workload.yaml``; its ``trace`` path is relative to the YAML file's folder."""
    path = Path(path)
    data = _unwrap(read_yaml(path, "workload"), "workload")
    if isinstance(data, dict) and "name" not in data and "preset" not in data:
        data = {**data, "name": path.stem}  # name the workload after its file
    return workload_from_dict(data, base_dir=path.parent)
