"""Bounds on every count and number a user may give, and the checks that enforce them.

Each bound is far above any real deployment and far below what would exhaust memory or time or
overflow the integers of the solver and numpy; every check raises one ``InputError`` that states
the bound. The pydantic types (``TokenCount``, ``FiniteFloat``, ...) carry the same bounds into
schemas; the ``check_*`` functions serve CLI options and request bodies. Only
:mod:`layoutopt.errors` is imported from the package, so every layer may use this module.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from layoutopt.errors import InputError

# Token counts (prompt, output, trace cells, context): engines keep them in int32.
MAX_TOKENS = 2**31 - 1
# GPUs of one type in a budget (the largest clusters built hold about 10^5 GPUs).
MAX_GPUS = 1_000_000
# Instances in one plan (pools' counts summed): one per GPU at most.
MAX_INSTANCES = MAX_GPUS
# Requests one simulator run replays (simulate --requests, solve --verify-requests): about
# 2 GB of event state and minutes of work at the top.
MAX_SIM_REQUESTS = 2_000_000
# Requests a trace file may hold (sample larger traces down), and its size in bytes.
MAX_TRACE_REQUESTS = 1_000_000
MAX_TRACE_BYTES = 64 * 1024 * 1024
# Arrival rates, req/s: well above any single service, low enough that rate x duration stays exact;
# at least one request in about 12 days, so that a mean gap 1 / rate stays finite (1 / 5e-324 is inf,
# and the simulator's arrival times would be inf - inf).
MAX_RATE_RPS = 1e7
MIN_RATE_RPS = 1e-6
# Seeds of the simulator: numpy takes any integer in [0, 2^64).
MAX_SEED = 2**64 - 1


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a number, not true/false")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("a finite number (NaN and infinity are not allowed)")
    return value


NotBool = BeforeValidator(_not_bool)
# A whole number of tokens, 1 .. 2^31 - 1.
TokenCount = Annotated[int, NotBool, Field(ge=1, le=MAX_TOKENS)]
# Any finite float (pydantic's own allow_inf_nan=False says "Input should be a finite number").
FiniteFloat = Annotated[float, NotBool, AfterValidator(_finite)]
GpuCount = Annotated[int, NotBool, Field(ge=1, le=MAX_GPUS)]


def check_finite(field: str, value: float, allowed: str) -> float:
    """``value`` when it is a finite number (not a bool), else ``InputError(field, value, allowed)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(field, value, allowed)
    return float(value)


def check_int(field: str, value: int, low: int, high: int, what: str) -> int:
    """``value`` when it is an integer in ``low..high``; the error states the range and ``what`` it counts."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(field, value, f"{what}: a whole number in {low:,}..{high:,}")
    return value


def check_rate_rps(field: str, value: float) -> float:
    """An arrival rate in req/s: finite, in ``MIN_RATE_RPS..MAX_RATE_RPS``."""
    allowed = f"a request rate in req/s, from {MIN_RATE_RPS:g} to {MAX_RATE_RPS:g}"
    rate = check_finite(field, value, allowed)
    if not MIN_RATE_RPS <= rate <= MAX_RATE_RPS:
        raise InputError(field, value, allowed)
    return rate


def check_context_length(field: str, tokens: float, max_context_tokens: int, model: str,
                         output_tokens: float = 0) -> None:
    """Refuse a prompt (plus output) longer than the model's context (``max_position_embeddings``)."""
    total = tokens + output_tokens
    if total > max_context_tokens:
        what = "input + output tokens" if output_tokens else "input tokens"
        raise InputError(field, int(tokens) if float(tokens).is_integer() else tokens,
                         f"{what} within the context of {model}: at most {max_context_tokens:,} "
                         f"(its config.json max_position_embeddings); got {total:,.0f}")
