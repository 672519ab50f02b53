"""Reading plan files: one reader for every command and the service."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from layoutopt.bounds import MAX_GPUS, MAX_INSTANCES
from layoutopt.errors import InputError
from layoutopt.io_safe import MAX_PLAN_BYTES, read_json, restore_non_finite
from layoutopt.plan.schema import Plan


def load_plan(path: str | Path) -> Plan:
    """Read a plan JSON written by ``layoutopt solve --format json`` / ``--output`` or ``emit``'s plan.json.

    Unreadable, malformed or schema-invalid files raise one ``InputError`` naming the file.
    """
    allowed = "a plan JSON as written by layoutopt solve --format json"
    # non-finite predictions were written as null plus a list of where they were; put them back
    data = restore_non_finite(read_json(path, "plan", max_bytes=MAX_PLAN_BYTES), "plan", str(path))
    if not isinstance(data, dict):
        raise InputError("plan", str(path), allowed, f"the file holds a JSON {type(data).__name__}, not an object")
    try:
        plan = Plan.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InputError(f"plan.{where}" if where else "plan", str(path), allowed,
                         first.get("msg", "invalid value")) from None
    check_plan_size(plan, str(path))
    return plan


def check_plan_size(plan: Plan, shown: str = "plan") -> None:
    """Refuse a plan with more instances or GPUs than any deployment (``MAX_INSTANCES``, ``MAX_GPUS``)."""
    instances = sum(pool.instances for pool in plan.pools)
    if instances > MAX_INSTANCES:
        raise InputError("plan.pools", shown, f"a plan of at most {MAX_INSTANCES:,} instances",
                         f"its pools hold {instances:,}")
    gpus = sum(pool.num_gpus for pool in plan.pools)
    if gpus > MAX_GPUS:
        raise InputError("plan.pools", shown, f"a plan of at most {MAX_GPUS:,} GPUs", f"its pools use {gpus:,}")
