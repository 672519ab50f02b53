"""Error types shared by every layer.

Every error a user can cause is an ``InputError``: it names the field, the value it got and
what is allowed, so the CLI can print one line and exit with status 2. Solver outcomes that
are not errors of input (infeasible, timed out) have their own types so callers can tell
them apart.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LayoutoptError(Exception):
    """Base class of every error layoutopt raises on purpose."""


class InputError(LayoutoptError, ValueError):
    """A user-supplied value is invalid.

    ``field`` is the dotted path of the input (``slo.ttft_ms.p90``, ``--budget``), ``value`` what
    was given, ``allowed`` a short description of what would be accepted.
    """

    def __init__(self, field: str, value: object, allowed: str, hint: str | None = None):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.hint = hint
        message = f"{field}: got {value!r}; {allowed}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class LayoutError(InputError):
    """A parallel layout breaks a divisibility rule or does not fit in memory."""


class InfeasibleError(LayoutoptError):
    """No plan satisfies the constraints. ``reasons`` lists why and what would change it."""

    def __init__(self, message: str, reasons: list[str] | None = None):
        self.reasons = list(reasons or [])
        super().__init__(message)


def closest_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` choices that look like ``name`` (case-insensitive)."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.5)
    if not found:
        found = [c for c in by_lower if name.lower() in c or c in name.lower()][:n]
    return [by_lower[f] for f in found]


def unknown_name_error(field: str, name: str, choices: Iterable[str]) -> InputError:
    """An ``InputError`` for an unknown catalog name, suggesting the closest known names."""
    choices = sorted(set(choices))
    close = closest_matches(name, choices)
    hint = f"did you mean {', '.join(close)}?" if close else None
    listed = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
    return InputError(field, name, f"known names: {listed}", hint)
