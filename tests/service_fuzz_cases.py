"""Generated HTTP requests for every endpoint of the service (hypothesis strategies), and the check of an answer.

Bodies start from a valid request per endpoint and are mutated: fields replaced by arbitrary JSON
(NaN and Infinity included, huge integers, paths, long and odd strings, nesting), fields dropped,
unknown fields added; some bodies are raw bytes (truncated JSON, invalid UTF-8). Used by
tests/test_service_properties.py (a few hundred cases) and benchmarks/service_fuzz.py (thousands).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

PLAN = json.loads((Path(__file__).parent / "fixtures" / "plan_colocated.json").read_text())
SLO = {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}
VALID = {
    "/v1/solve": {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 2, "objective": "min-cost", "time_limit_s": 1},
    "/v1/estimate": {"model": "qwen3-8b", "gpu": "H100", "isl": 1000, "osl": 200, "layout": {"tp_size": 1},
                     "concurrency": 8},
    "/v1/simulate": {"plan": PLAN, "workload": "chat", "rate_rps": 1, "num_requests": 200},
    "/v1/fleets": {"budget": "8xH100", "time_limit_s": 1, "models": [
        {"model": "qwen3-8b", "workload": "chat", "rate_rps": 2, "slo": SLO},
        {"model": "qwen3-8b", "workload": {"preset": "rag"}, "rate_rps": 1, "slo": SLO}]},
    "/v1/length-routing": {"model": "qwen3-8b", "budget": "8xH100", "workload": "chat", "rate_rps": 2, "slo": SLO,
                           "time_limit_s": 1},
    "/v1/sweeps": {"models": ["qwen3-8b"], "gpus": ["H100"], "max_gpus_per_type": 8, "rates_rps": [2.0],
                   "slos": [SLO], "objectives": ["min-cost"], "solver": {"time_limit_s": 1}},
    "/v1/emit": {"plan": PLAN, "plots": False},
}
ODD_STRINGS = ["", " ", "/etc/passwd", "/dev/zero", "../../etc/shadow", "qwen3-8bb", "8xH1000", "$1e400/h",
               "x" * 5000, "8xH100" + "+8xH100" * 300, "a\nb; rm -rf /", "\x00", "é", "💥", "NaN", "Infinity",
               "1e400", "-1", "0", "auto", "chat", "H100", "qwen3-8b", "fp4", "colocated", "disaggregated"]
ODD_NUMBERS = [0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 0.0, -0.0, 1e-300, 1e300, 1.5, math.nan, math.inf,
               -math.inf, 0.7, 1.0, 60, 61, 3600]


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(ODD_NUMBERS), st.sampled_from(ODD_STRINGS),
                        st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
                        st.text(max_size=20))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=max_leaves)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mutated_body(draw: st.DrawFn, path: str) -> dict[str, Any]:
    body = json.loads(json.dumps(VALID[path]))
    keys = list(body)
    for key in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            del body[key]
        elif choice == 1 and isinstance(body[key], dict) and body[key]:
            inner = draw(st.sampled_from(sorted(body[key])))
            body[key] = {**body[key], inner: draw(json_values())}
        else:
            body[key] = draw(json_values())
    if draw(st.booleans()):
        body[draw(st.sampled_from(["colour", "trace", "path", "model", "__proto__"]))] = draw(json_values(3))
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(keys))] = nested(draw(st.sampled_from([10, 40, 200])))
    return body


@st.composite
def raw_body(draw: st.DrawFn, path: str) -> bytes:
    """Bytes that are not a well-formed body: truncated JSON, junk, invalid UTF-8, JSON of another type."""
    text = json.dumps(draw(mutated_body(path)))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return text[: draw(st.integers(0, max(0, len(text) - 1)))].encode()
    if kind == 1:
        return draw(st.binary(max_size=200))
    if kind == 2:
        return text.encode("utf-8").replace(b'"', b"\xff", 1)
    return json.dumps(draw(json_values())).encode()


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None]:
    """(method, path, body bytes or None) for any endpoint."""
    kind = draw(st.integers(0, 9))
    if kind <= 6:
        path = draw(st.sampled_from(sorted(VALID)))
        body = draw(mutated_body(path)) if kind <= 5 else None
        if body is None:
            return "POST", path, draw(raw_body(path))
        return "POST", path, json.dumps(body).encode()  # json.dumps writes NaN and Infinity as such
    if kind == 7:
        job_id = draw(st.one_of(st.text(alphabet="0123456789abcdef", min_size=16, max_size=16),
                                st.text(alphabet="abcXYZ-_.%20", max_size=30)))
        return draw(st.sampled_from(["GET", "DELETE"])), f"/v1/jobs/{job_id}", None
    return "GET", draw(st.sampled_from(["/healthz", "/v1/catalog/gpus", "/v1/catalog/models", "/v1/catalog/nodes",
                                        "/v1/jobs", "/openapi.json", "/v1/nothing"])), None


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} in a response")


def documented_statuses(spec: dict, method: str, path: str) -> set[int]:
    """Statuses the OpenAPI document lists for the route ``path`` matches (404 and 405 for no route)."""
    if path == "/openapi.json":
        return {200}
    for template, operations in spec["paths"].items():
        prefix = template.split("{")[0]
        if template == path or ("{" in template and path.startswith(prefix) and "/" not in path[len(prefix):]):
            if method.lower() in operations:
                return {int(code) for code in operations[method.lower()]["responses"]}
            return {405}
    return {404}


def check_answer(spec: dict, method: str, path: str, status: int, payload: bytes) -> str | None:
    """None when the answer is as documented, else what is wrong with it."""
    allowed = documented_statuses(spec, method, path) | {404}  # unknown job ids and paths
    if status == 500 or status not in allowed:  # 500 is documented (a bug), never expected
        return f"{method} {path}: status {status} not among {sorted(allowed)}: {payload[:300]!r}"
    try:
        body = json.loads(payload, parse_constant=_no_constant) if payload else None
    except ValueError as error:
        return f"{method} {path}: answer is not standard JSON ({error}): {payload[:200]!r}"
    if status >= 400 and status != 409:
        detail = body.get("detail") if isinstance(body, dict) else None
        if not detail or not all({"field", "msg", "allowed", "loc", "type"} <= set(d) for d in detail):
            return f"{method} {path}: error {status} without field, value and rule: {payload[:300]!r}"
    return None
