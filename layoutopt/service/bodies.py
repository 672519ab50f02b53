"""Request bodies from bytes to validated models, with caps, run off the event loop.

``parse_body`` is what a route calls (in a thread of its own, see ``app.py``): UTF-8 check, JSON
parse with duplicate keys rejected, one walk over the tree that bounds nesting depth, the
number of values, string lengths and integer sizes and rejects NaN/Infinity naming the field,
then strict pydantic validation. Every failure is a ``ServiceError`` 422 whose items name the
field, the value and the rule. Each step is linear in the body size, and bodies are capped
(``max_body_bytes``) before they get here, so a hostile body costs milliseconds.

Files go through ``layoutopt.io_safe`` instead; a body needs more than it gives: the location of a
NaN or a duplicate key (``io_safe`` refuses them while parsing, before any location is known), and
caps on values, strings and integers that a file on the user's own disk does not need.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from layoutopt.service.problems import ServiceError, from_validation_error, item
from layoutopt.service.settings import ServiceSettings

Model = TypeVar("Model", bound=BaseModel)
MAX_ABS_INT = 1 << 63  # no count, size or seed in layoutopt needs more; bigger ones overflow numpy


class _Object(dict):
    """A JSON object that had the same key more than once (json.loads would keep the last silently)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    seen: set[str] = set()
    marked = _Object(result)
    marked.duplicates = [key for key, _ in pairs if key in seen or seen.add(key)]
    return marked


def _invalid(type_: str, loc: list, value: Any, allowed: str, msg: str | None = None) -> ServiceError:
    return ServiceError(422, [item(type_, loc, value, allowed, msg)])


def load_json(raw: bytes) -> Any:
    """The JSON value of ``raw``; 422 for bytes that are not UTF-8 JSON."""
    if not raw.strip():
        raise _invalid("json_invalid", ["body"], "", "a JSON object", "body: empty; a JSON object is required")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _invalid("json_invalid", ["body"], raw[max(0, error.start - 10):error.start + 10],
                       "UTF-8 text", f"body: byte {error.start} is not UTF-8; send UTF-8 JSON") from None
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as error:
        raise _invalid("json_invalid", ["body", error.pos], text[max(0, error.pos - 20):error.pos + 20],
                       "valid JSON", f"body: JSON decode error at line {error.lineno} column {error.colno}: "
                       f"{error.msg}") from None
    except RecursionError:
        raise _invalid("json_too_deep", ["body"], None, "nesting depth within the limit",
                       "body: arrays and objects nested too deeply") from None
    except ValueError as error:  # e.g. an integer literal of more than 4300 digits
        raise _invalid("json_invalid", ["body"], None, "valid JSON", f"body: {error}") from None


def _path_error(path: list, type_: str, value: Any, allowed: str) -> ServiceError:
    return _invalid(type_, ["body", *path], value, allowed)


def check_tree(data: Any, settings: ServiceSettings) -> None:
    """Bound depth, values, strings and integers of a parsed body; reject NaN, Infinity and duplicate keys."""
    count = 0
    max_values, max_depth, max_chars = settings.max_json_values, settings.max_json_depth, settings.max_string_chars
    path: list = []

    def scalar(value: Any) -> None:
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):
                raise _path_error(path, "non_finite_number", value, "a finite number (NaN and Infinity are not "
                                  "JSON numbers; out-of-range literals such as 1e400 are infinite too)")
        elif kind is int:
            if not -MAX_ABS_INT < value < MAX_ABS_INT:
                raise _path_error(path, "integer_too_large", value, "an integer of magnitude below 2**63")
        elif kind is str and len(value) > max_chars:
            raise _path_error(path, "string_too_long", value, f"a string of at most {max_chars} characters")

    def visit(value: Any) -> None:
        nonlocal count
        if len(path) >= max_depth:
            raise _invalid("json_too_deep", ["body", *path], None,
                           f"arrays and objects nested at most {max_depth} deep")
        if isinstance(value, _Object):
            path.append(value.duplicates[0])
            raise _path_error(path, "duplicate_key", value.duplicates[0], "each key once in an object")
        count += len(value)
        if count > max_values:
            raise _invalid("json_too_many_values", ["body"], count, f"at most {max_values} JSON values",
                           f"body: more than {max_values} values (numbers, strings, items)")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            path.append(key)
            if type(key) is str and len(key) > max_chars:
                raise _path_error(path, "string_too_long", key, f"keys of at most {max_chars} characters")
            if isinstance(child, (dict, list)):
                visit(child)
            else:
                scalar(child)
            path.pop()

    if isinstance(data, (dict, list)):
        visit(data)
    else:
        scalar(data)


def precheck(raw: bytes, settings: ServiceSettings) -> None:
    """Reject a body with far too many values before parsing it (every value but one follows a ',' '[' or ':')."""
    separators = raw.count(b",") + raw.count(b"[")
    if separators > settings.max_json_values:
        raise _invalid("json_too_many_values", ["body"], separators, f"at most {settings.max_json_values} JSON "
                       "values", f"body: more than {settings.max_json_values} values (numbers, strings, items)")


def validate(model: type[Model], raw: bytes, data: Any) -> Model:
    """The JSON ``raw`` (already parsed and checked as ``data``) as ``model``; 422 naming every bad field.

    Strict, in pydantic's JSON mode: "5" is not a number, 1.5 not an int, and ISO 8601 text is a date.
    """
    if not isinstance(data, dict):
        raise _invalid("model_type", ["body"], data, "a JSON object")
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as error:
        raise ServiceError(422, from_validation_error(error)) from None


def parse_body(raw: bytes, model: type[Model], settings: ServiceSettings) -> Model:
    """``raw`` (a request body within ``max_body_bytes``) as a validated ``model``, or ServiceError 422."""
    precheck(raw, settings)
    data = load_json(raw)
    check_tree(data, settings)
    return validate(model, raw, data)


__all__ = ["check_tree", "load_json", "parse_body", "precheck", "validate"]
