"""Measured against predicted: a serving benchmark's result file compared with a plan, per SLO target.

Reads the result of ``vllm bench serve --save-result`` (a JSON object; keys from vllm 0.33.0
benchmarks/serve.py:1320-1337 and 1426-1432: ``duration``, ``completed``, ``request_throughput``,
``request_goodput``, ``p{N}_{ttft,tpot}_ms``, and with ``--save-detailed`` the per-request
``ttfts``/``itls``/``output_lens``/``errors``) or of SGLang's serving benchmark (JSON lines, the last
one used; keys from sglang 0.5.23 benchmark/serving.py:1869-1911 and 1947-1949: ``median_*``,
``p90_*``, ``p95_*``, ``p99_*`` and with ``--output-details`` the same per-request arrays). With
per-request data every percentile, the attainment and the goodput are computed here, the same way
for both engines; without it, the summary keys are used where the benchmark reported them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.report.plan_inputs import plan_slo

# A result file larger than this is not a benchmark result.
MAX_RESULT_BYTES = 512 * 2**20


class Check(BaseModel):
    """One line of the comparison: a metric's prediction, measurement and target."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    predicted: float | None
    measured: float | None
    target: str
    passed: bool | None  # None: the result does not report this metric


class BenchComparison(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    checks: list[Check]
    num_requests: int
    num_failed: int

    @property
    def passed(self) -> bool:
        return all(c.passed is not False for c in self.checks) and any(c.passed for c in self.checks)


def load_result(path: str | Path) -> dict[str, Any]:
    """The benchmark result in ``path``: a JSON object, or the last object of a JSON-lines file."""
    path = Path(path)
    allowed = "a result file of vllm bench serve --save-result or of SGLang's serving benchmark --output-file"
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            raise InputError("result", str(path), allowed, f"larger than {MAX_RESULT_BYTES // 2**20} MiB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("result", str(path), allowed, "no such file") from None
    except UnicodeDecodeError:
        raise InputError("result", str(path), allowed, "the file is not UTF-8 text") from None

    def constant(name: str) -> None:
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        data = json.loads(text, parse_constant=constant)
    except (ValueError, RecursionError):
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            data = json.loads(lines[-1], parse_constant=constant) if lines else None
        except (ValueError, RecursionError) as error:
            raise InputError("result", str(path), allowed, f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise InputError("result", str(path), allowed, "it holds no JSON object")
    return data


def _number(data: dict, key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _per_request(data: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(TTFT ms, TPOT ms, ok) per request, from the detailed arrays; None without them."""
    ttfts, itls = data.get("ttfts"), data.get("itls")
    if not isinstance(ttfts, list) or not isinstance(itls, list) or len(ttfts) != len(itls) or not ttfts:
        return None
    errors = data.get("errors")
    errors = errors if isinstance(errors, list) and len(errors) == len(ttfts) else [""] * len(ttfts)
    ttft_ms, tpot_ms, ok = [], [], []
    for ttft, itl, error in zip(ttfts, itls, errors):
        good = isinstance(ttft, (int, float)) and not isinstance(ttft, bool) and not error and ttft > 0
        steps = [x for x in itl if isinstance(x, (int, float))] if isinstance(itl, list) else []
        ttft_ms.append(float(ttft) * 1000 if good else math.inf)
        tpot_ms.append(float(np.mean(steps)) * 1000 if steps else 0.0)
        ok.append(good)
    return np.array(ttft_ms), np.array(tpot_ms), np.array(ok)


def _summary_key(metric: str, fraction: float) -> list[str]:
    word = f"{fraction * 100:g}"
    keys = [f"p{word}_{metric}_ms"]
    if fraction == 0.5:
        keys.append(f"median_{metric}_ms")
    return keys


def _measured(data: dict, arrays, metric: str, fraction: float) -> float | None:
    if arrays is not None:
        values = arrays[0] if metric == "ttft" else arrays[1][arrays[2]]
        if metric == "ttft":
            values = values[np.isfinite(values)]
        return float(np.percentile(values, fraction * 100)) if len(values) else None
    for key in _summary_key(metric, fraction):
        value = _number(data, key)
        if value is not None:
            return value
    return None


def compare(plan: Plan, data: dict[str, Any]) -> BenchComparison:
    """Predicted against measured, per SLO target, for ``plan`` and one benchmark result."""
    slo = plan_slo(plan)
    if slo is None or plan.latency is None:
        raise InputError("plan", "no SLO or prediction", "a plan from solve (it records the SLO and the prediction)")
    arrays = _per_request(data)
    checks: list[Check] = []
    predicted = {"ttft": plan.latency.ttft_ms.model_dump(), "tpot": plan.latency.tpot_ms.model_dump()}
    for metric, targets in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms)):
        for key, target_ms in targets.items():
            fraction = slo.percentile_fraction(key)
            measured = _measured(data, arrays, metric, fraction)
            checks.append(Check(metric=f"{metric.upper()} {key} (ms)", predicted=predicted[metric].get(key.lower()),
                                measured=measured, target=f"<= {target_ms:g}",
                                passed=None if measured is None else measured <= target_ms))
    duration = _number(data, "duration")
    if arrays is not None:
        ttft, tpot, ok = arrays
        ttft_target, tpot_target = min(slo.ttft_ms.values()), min(slo.tpot_ms.values())
        good = ok & (ttft <= ttft_target) & (tpot <= tpot_target)
        attainment = float(good.mean())
        goodput = float(good.sum()) / duration if duration else None
        num, failed = len(ok), int((~ok).sum())
    else:
        attainment = _number(data, "slo_attainment")
        throughput, goodput = _number(data, "request_throughput"), _number(data, "request_goodput")
        if attainment is None and throughput and goodput is not None:
            attainment = goodput / throughput
        num = int(_number(data, "completed") or 0)
        failed = 0
    checks.append(Check(metric="SLO attainment", predicted=plan.latency.slo_attainment, measured=attainment,
                        target=f">= {slo.attainment:g}",
                        passed=None if attainment is None else attainment >= slo.attainment))
    rate = _number(data, "request_rate")
    planned = plan.totals.goodput_rps if plan.totals else None
    checks.append(Check(metric="goodput (req/s)", predicted=planned, measured=goodput,
                        target=f"at {rate:g} req/s offered" if rate else "at the offered rate",
                        passed=None if goodput is None or attainment is None else attainment >= slo.attainment))
    if all(c.measured is None for c in checks):
        raise InputError("result", "no TTFT, TPOT or goodput", "a benchmark result with latency metrics "
                         "(run bench/bench.sh, which saves them)")
    return BenchComparison(checks=checks, num_requests=num, num_failed=failed)
