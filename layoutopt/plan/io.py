"""Reading plan files: one reader for every command and the service."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from layoutopt.errors import InputError
from layoutopt.plan.schema import Plan


def load_plan(path: str | Path) -> Plan:
    """Read a plan JSON written by ``layoutopt solve --format json`` / ``--output`` or ``emit``'s plan.json.

    Unreadable, malformed or schema-invalid files raise one ``InputError`` naming the file.
    """
    allowed = "a plan JSON as written by layoutopt solve --format json"
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise InputError("plan", str(path), allowed, f"line {error.lineno}: {error.msg}") from None
    except UnicodeDecodeError:
        raise InputError("plan", str(path), allowed, "the file is not text") from None
    if not isinstance(data, dict):
        raise InputError("plan", str(path), allowed, f"the file holds a JSON {type(data).__name__}, not an object")
    try:
        return Plan.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InputError(f"plan.{where}" if where else "plan", str(path), allowed,
                         first.get("msg", "invalid value")) from None
