"""Error answers of the service: one body shape for every 4xx/5xx, and the OpenAPI entries for them.

Every error is ``{"detail": [ErrorItem, ...]}``; an item names the field (``field``, and ``loc``
as FastAPI gives it), the value it got (``input``, shortened and JSON-safe) and the rule it broke
(``allowed``), with ``msg`` one readable sentence.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from layoutopt.errors import InputError

MAX_SHOWN_CHARS = 200  # an echoed value is cut here: a 1 MB string is not sent back
MAX_SHOWN_ITEMS = 20
MAX_ITEMS = 20  # error items per answer


class ErrorItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(description="kind of error, e.g. input_error, missing, json_invalid, body_too_large, busy")
    loc: list[str | int] = Field(description="where: ['body', 'slo', 'ttft_ms', 'p90']")
    field: str = Field(description="the same place as a dotted name: slo.ttft_ms.p90")
    msg: str = Field(description="one sentence naming the field, the value and the rule")
    input: Any = Field(default=None, description="the value given (shortened; non-finite numbers as strings)")
    allowed: str = Field(description="the rule the value broke: what would be accepted")
    hint: str | None = Field(default=None, description="a close match or a way out")


class ErrorBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    detail: list[ErrorItem]


class Infeasible(BaseModel):
    """No plan exists and the API had none to return (a solve that returns a Plan says so in it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: str = Field(default="infeasible", description="always 'infeasible'")
    message: str
    reasons: list[str] = Field(description="why no plan exists and what would change it")


def shown(value: Any, depth: int = 0) -> Any:
    """``value`` made short and JSON-safe for an error answer."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, (bool, int, float)) or value is None:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 63:
            return str(value)[:MAX_SHOWN_CHARS]
        return value
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[:MAX_SHOWN_CHARS]).decode("utf-8", "replace")
    if isinstance(value, str):
        return value if len(value) <= MAX_SHOWN_CHARS else value[:MAX_SHOWN_CHARS] + f"... ({len(value)} characters)"
    if depth >= 3:
        return "..."
    if isinstance(value, dict):
        items = list(value.items())[:MAX_SHOWN_ITEMS]
        return {str(k)[:MAX_SHOWN_CHARS]: shown(v, depth + 1) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [shown(v, depth + 1) for v in list(value)[:MAX_SHOWN_ITEMS]]
    return shown(repr(value), depth)


def dotted(loc: list[str | int] | tuple) -> str:
    """``['body', 'pools', 0, 'gpu']`` -> ``pools[0].gpu``."""
    text = ""
    for part in loc:
        if part == "body" and not text:
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def item(type_: str, loc: list[str | int], value: Any, allowed: str, msg: str | None = None,
         hint: str | None = None) -> ErrorItem:
    field = dotted(loc)
    value = shown(value)
    return ErrorItem(type=type_, loc=loc, field=field, input=value, allowed=allowed, hint=hint,
                     msg=msg or f"{field}: got {value!r}; {allowed}")


def _loc_of_field(field: str, prefix: tuple[str | int, ...]) -> list[str | int]:
    """``'workload.input_tokens.lognormal.p90'`` or ``'pools[0].gpu'`` -> a loc list under ``prefix``."""
    loc: list[str | int] = list(prefix)
    for part in field.lstrip("-").replace("[", ".").replace("]", "").split("."):
        if part:
            loc.append(int(part) if part.isdigit() else part.replace("-", "_"))
    return loc


def from_input_error(error: InputError | dict[str, Any], prefix: tuple[str | int, ...] = ("body",),
                     aliases: dict[str, str] | None = None) -> ErrorItem:
    """An item for a layoutopt ``InputError`` (or its payload as a dict from a worker process)."""
    data = error if isinstance(error, dict) else input_error_payload(error)
    loc = _loc_of_field(data["field"], prefix)
    if aliases and len(loc) > len(prefix) and isinstance(loc[len(prefix)], str):
        loc[len(prefix)] = aliases.get(loc[len(prefix)], loc[len(prefix)])
    return ErrorItem(type="input_error", loc=loc, field=dotted(loc), input=shown(data["value"]),
                     allowed=data["allowed"], hint=data["hint"], msg=data["message"][:2000])


def input_error_payload(error: InputError) -> dict[str, Any]:
    """An ``InputError`` as plain data (exceptions with custom constructors do not pickle)."""
    return {"field": error.field, "value": shown(error.value), "allowed": error.allowed, "hint": error.hint,
            "message": str(error)}


def _rule(error: dict[str, Any]) -> str:
    msg = error["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
    return msg


def from_validation_error(error: ValidationError, prefix: tuple[str | int, ...] = ("body",)) -> list[ErrorItem]:
    """Items for a pydantic ``ValidationError`` raised while validating a body under ``prefix``."""
    items = []
    for entry in error.errors(include_url=False)[:MAX_ITEMS]:
        loc = [*prefix, *entry["loc"]]
        value = shown(entry.get("input"))
        field = dotted(loc)
        message = entry["msg"].removeprefix("Value error, ")
        items.append(ErrorItem(type=entry["type"], loc=loc, field=field, input=value, allowed=_rule(entry),
                               msg=f"{field}: {message}"))
    return items


class ServiceError(Exception):
    """An error answer: raised anywhere in a route, turned into a JSON response by the app."""

    def __init__(self, status_code: int, items: list[ErrorItem], headers: dict[str, str] | None = None):
        self.status_code = status_code
        self.items = items
        self.headers = headers or {}
        super().__init__(f"{status_code}: {items[0].msg if items else ''}")

    def response(self) -> JSONResponse:
        body = ErrorBody(detail=self.items).model_dump(mode="json")
        return JSONResponse(body, status_code=self.status_code, headers=self.headers)


# What each status means, for the OpenAPI document.
STATUS_DESCRIPTIONS = {
    400: "malformed HTTP (from the server: request line or headers too long or invalid)",
    404: "no such job (unknown id, or forgotten after job_ttl_s)",
    408: "the request's headers or body did not arrive within header_timeout_s / body_timeout_s",
    409: "infeasible: no plan exists and the API returned none (body: Infeasible)",
    413: "request body larger than max_body_bytes",
    422: ("invalid body: malformed JSON, too deep or too large, a non-finite number, a wrong type, an unknown "
          "key, a name not in the catalog, a value outside its range, or a result that would not be finite"),
    500: "internal error: a bug; the body says how to report it",
    503: "busy: max_pending requests (or max_stored_jobs jobs) in flight, or max_connections open; "
         "retry after Retry-After seconds",
    504: "the request's deadline (request_deadline_s) passed: its work was stopped",
}
RETRY_AFTER_HEADER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can answer."""
    entries: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        model = Infeasible if status == 409 else ErrorBody
        entry: dict[str, Any] = {"model": model, "description": STATUS_DESCRIPTIONS[status]}
        if status == 503:
            entry["headers"] = RETRY_AFTER_HEADER
        entries[status] = entry
    return entries


REPORT_BUGS = "an internal error in layoutopt; please report it with the request body at the project's issue tracker"

__all__ = ["ErrorBody", "ErrorItem", "Infeasible", "ServiceError", "from_input_error", "from_validation_error",
           "input_error_payload", "item", "responses", "shown"]
