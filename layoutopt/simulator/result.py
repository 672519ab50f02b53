"""SimulationResult: what a simulated run measured, and how it is computed from an engine trace.

Latency statistics cover the measured requests only: the first ``warmup_fraction`` of arrivals
(the system filling up) and the last ``cooldown_fraction`` (served while arrivals stop) are
left out. Rates count the requests (any, not only measured ones) that *finish* inside the
measurement window, which spans the arrivals of the measured requests: below capacity they
match the offered rate, above it they show what the plan drains.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from layoutopt.engines import RuleViolation
from layoutopt.plan import Percentiles
from layoutopt.simulator.engine import EngineTrace
from layoutopt.simulator.pools import PoolCounters, PoolSpec, Requests
from layoutopt.workloads.slo import SLO


class _Samples:
    """Per-request latencies kept beside a result; equality-neutral so results compare by fields."""

    __slots__ = ("ttft_ms", "tpot_ms")

    def __init__(self, ttft_ms: np.ndarray, tpot_ms: np.ndarray):
        self.ttft_ms, self.tpot_ms = ttft_ms, tpot_ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Samples)

    __hash__ = None  # type: ignore[assignment]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoolStats(_Out):
    """Load on one pool during the measurement window."""

    name: str
    role: str
    instances: int
    utilization_fraction: float = Field(ge=0, le=1, description="share of instance time spent running steps")
    mean_queue_length: float = Field(description="time-averaged requests waiting, summed over the pool's instances")
    max_queue_length: int
    queue_growth_per_s: float = Field(description="change of the queue over the window / window length; > 0 when overloaded")
    mean_decode_batch: float = Field(description="mean sequences decoding per instance while it runs steps")
    num_steps: int = Field(description="engine events (steps and decode segments) in the window")


class SloCheck(_Out):
    """One percentile target and what the simulation measured for it."""

    metric: str
    percentile: str
    target_ms: float
    simulated_ms: float
    met: bool


class SimulationResult(_Out):
    """Measured latencies, SLO attainment, rates and pool loads of one simulated run."""

    model: str
    engine: str
    seed: int
    rate_rps: float = Field(description="offered arrival rate")
    num_requests: int = Field(description="requests simulated, warm-up and cool-down included")
    num_measured: int = Field(description="requests the statistics cover")
    window_s: float = Field(description="length of the measurement window")
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    mean_ttft_ms: float
    mean_tpot_ms: float
    ttft_target_ms: float = Field(description="per-request TTFT bound used for attainment")
    tpot_target_ms: float = Field(description="per-request TPOT bound used for attainment")
    slo_attainment: float = Field(ge=0, le=1, description="fraction of measured requests meeting both targets")
    required_attainment: float
    slo_checks: list[SloCheck]
    meets_slo: bool = Field(description="attainment reached and every percentile target held")
    goodput_rps: float = Field(description="requests finished in the window meeting both targets, per second")
    throughput_rps: float = Field(description="requests finished in the window, per second")
    output_tok_per_s: float
    pools: list[PoolStats]
    simulated_s: float = Field(description="simulated time until the last request finished")
    rule_violations: list[RuleViolation] = Field(
        default_factory=list, description="engine rules of the plan's engine release its pools break (the "
        "launch files would fail); the simulation runs them anyway, as a what-if")
    _samples: _Samples | None = PrivateAttr(default=None)

    def latency_samples_ms(self) -> tuple[np.ndarray, np.ndarray]:
        """(TTFT, TPOT) in ms of every measured request, for histograms; empty when not kept."""
        if self._samples is None:
            return np.zeros(0), np.zeros(0)
        return self._samples.ttft_ms.copy(), self._samples.tpot_ms.copy()


def percentiles_ms(values_s: np.ndarray) -> Percentiles:
    if len(values_s) == 0:
        return Percentiles(p50=0.0, p90=0.0, p99=0.0)
    p50, p90, p99 = np.percentile(values_s, [50, 90, 99]) * 1e3
    return Percentiles(p50=float(p50), p90=float(p90), p99=float(p99))


def measured_range(num_requests: int, warmup_fraction: float, cooldown_fraction: float) -> tuple[int, int]:
    """[first, last) indices of the measured requests; at least one when there is any request."""
    first = min(int(num_requests * warmup_fraction), max(num_requests - 1, 0))
    last = max(num_requests - int(num_requests * cooldown_fraction), first + 1)
    return first, min(last, num_requests)


def request_latencies_s(trace: EngineTrace, requests: Requests) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) per request in seconds; TPOT is 0 for single-token outputs."""
    ttft_s = trace.first_token_s - requests.arrival_s
    decode_tokens = np.maximum(requests.output_tokens - 1, 1)
    tpot_s = np.where(requests.output_tokens > 1, (trace.finish_s - trace.first_token_s) / decode_tokens, 0.0)
    return ttft_s, tpot_s


def summarize(trace: EngineTrace, requests: Requests, pools: list[PoolSpec], slo: SLO, *, model: str,
              engine: str, seed: int, rate_rps: float, first: int, last: int) -> SimulationResult:
    """Turn one engine trace into a :class:`SimulationResult` over requests [first, last)."""
    ttft_all_s, tpot_all_s = request_latencies_s(trace, requests)
    ttft_s, tpot_s = ttft_all_s[first:last], tpot_all_s[first:last]
    window_s = max(trace.counters[0].window_end_s - trace.counters[0].window_start_s, 1e-9) if pools else 1e-9
    _, ttft_target_ms = slo.strictest_ttft
    _, tpot_target_ms = slo.strictest_tpot
    good_all = (ttft_all_s * 1e3 <= ttft_target_ms) & (tpot_all_s * 1e3 <= tpot_target_ms)
    good = good_all[first:last]
    window_start_s = trace.counters[0].window_start_s if pools else 0.0
    in_window = (trace.finish_s >= window_start_s) & (trace.finish_s < window_start_s + window_s)
    num_measured = last - first
    attainment = float(good.mean()) if num_measured else 0.0
    checks = []
    for metric, targets, values_s in (("ttft", slo.ttft_ms, ttft_s), ("tpot", slo.tpot_ms, tpot_s)):
        for key, target_ms in targets.items():
            simulated_ms = float(np.percentile(values_s, SLO.percentile_fraction(key) * 100)) * 1e3
            checks.append(SloCheck(metric=metric, percentile=key, target_ms=target_ms,
                                   simulated_ms=simulated_ms, met=simulated_ms <= target_ms))
    pool_stats = [_pool_stats(spec, counters, window_s) for spec, counters in zip(pools, trace.counters, strict=True)]
    result = SimulationResult(
        model=model, engine=engine, seed=seed, rate_rps=rate_rps, num_requests=requests.num_requests,
        num_measured=num_measured, window_s=window_s,
        ttft_ms=percentiles_ms(ttft_s), tpot_ms=percentiles_ms(tpot_s),
        mean_ttft_ms=float(ttft_s.mean() * 1e3) if num_measured else 0.0,
        mean_tpot_ms=float(tpot_s.mean() * 1e3) if num_measured else 0.0,
        ttft_target_ms=ttft_target_ms, tpot_target_ms=tpot_target_ms,
        slo_attainment=attainment, required_attainment=slo.attainment, slo_checks=checks,
        meets_slo=attainment >= slo.attainment and all(c.met for c in checks),
        goodput_rps=float((good_all & in_window).sum()) / window_s,
        throughput_rps=float(in_window.sum()) / window_s,
        output_tok_per_s=float(requests.output_tokens[in_window].sum()) / window_s,
        pools=pool_stats, simulated_s=trace.end_s,
    )
    result._samples = _Samples(ttft_s * 1e3, tpot_s * 1e3)
    return result


def _pool_stats(spec: PoolSpec, counters: PoolCounters, window_s: float) -> PoolStats:
    instance_s = window_s * spec.num_instances * spec.servers_per_instance
    busy_s = counters.busy_s
    return PoolStats(
        name=spec.name, role=spec.role, instances=spec.num_instances,
        utilization_fraction=min(busy_s / instance_s, 1.0),
        mean_queue_length=counters.queue_area / window_s,
        max_queue_length=counters.queue_max,
        queue_growth_per_s=(counters.queue_at_end - counters.queue_at_start) / window_s,
        mean_decode_batch=counters.decode_batch_area / busy_s if busy_s > 0 else 0.0,
        num_steps=counters.num_steps,
    )
