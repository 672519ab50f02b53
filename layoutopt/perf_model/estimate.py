"""``estimate``: predicted latency, throughput and memory of one deployment under one load.

    from layoutopt.api import estimate
    result = estimate("llama-3.1-70b", "H100", isl=1024, osl=1024, layout=Layout(tp_size=4), concurrency=32)

A deployment is either colocated (``layout``, ``instances`` copies) or disaggregated
(``prefill_layout`` x ``prefill_instances`` and ``decode_layout`` x ``decode_instances``). The load
is closed loop (``concurrency`` requests in flight, as benchmark clients measure) or open loop
(Poisson ``rate`` in req/s); without either, the workload's arrival rate, else one request alone.
Traffic is spread evenly over instances. Layouts that break a rule or do not fit raise LayoutError.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model import memory
from layoutopt.perf_model.closed_loop import colocated_closed_loop, disaggregated_closed_loop
from layoutopt.engines import RuleViolation, check_layout, engine_notes, engine_ref_of
from layoutopt.perf_model.calibration import EngineLike, resolve_engine
from layoutopt.perf_model.costs import PhaseCosts, phase_costs
from layoutopt.perf_model.workload_grids import output_moments
from layoutopt.plan import ErrorBand, Layout
from layoutopt.perf_model.links import Link, kv_transfer_link
from layoutopt.perf_model.spans import local_domain_gpus, spans_domains, units_per_stage
from layoutopt.perf_model.load import LatencyStats, LoadPoint, load_at_rate, rows_at_rate, series_ttft
from layoutopt.workloads.distributions import FixedLength
from layoutopt.workloads.workload import Workload

_GIB = 2.0**30


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryReport(_Out):
    """Memory of the fullest GPU of one instance, GiB, and the sequences the instance holds."""

    role: str
    weights_gib: float
    activation_gib: float
    reserve_gib: float
    kv_capacity_gib: float
    kv_gib_per_sequence: float = Field(description="one sequence at its time-averaged context: the prompt and "
                                       "half its output (KV is paged on demand)")
    max_batch_size: int = Field(description="sequences the instance holds at that context")


class Estimate(_Out):
    """Predicted behaviour of a deployment; units in field names."""

    model: str
    gpu: str
    engine: str
    mode: Literal["colocated", "disaggregated"]
    load: Literal["closed", "open", "unloaded"]
    concurrency: float | None = Field(description="requests in flight (closed loop)")
    rate_rps: float | None = Field(description="offered Poisson rate (open loop)")
    layouts: dict[str, str] = Field(description="role -> layout short name")
    instances: dict[str, int]
    num_gpus: int
    mean_input_tokens: float
    mean_output_tokens: float
    ttft_ms: LatencyStats
    tpot_ms: LatencyStats
    request_throughput_rps: float
    output_tok_per_s: float
    input_tok_per_s: float
    output_tok_per_s_per_gpu: float
    output_tok_per_s_per_user: float = Field(description="1000 / mean TPOT")
    decode_batch_per_instance: float
    memory: list[MemoryReport]
    bottleneck: dict[str, str] = Field(description="phase -> compute | memory | communication | queueing | kv_capacity")
    stable: bool = Field(description="False when the offered rate exceeds what the deployment drains")
    notes: list[str] = Field(default_factory=list)
    rule_violations: list[RuleViolation] = Field(
        default_factory=list, description="engine rules the deployment breaks (it is still evaluated), each with "
        "the engine source line it comes from")
    error_band: ErrorBand | None = Field(default=None, description="expected error of TTFT and TPOT from the "
                                         "calibration residuals of this engine, GPU generation and mode")


def _resolve(model: ModelSpec | str, gpu: GpuSpec | str) -> tuple[ModelSpec, GpuSpec]:
    if isinstance(model, str):
        from layoutopt.model_catalog.catalog import get_model

        model = get_model(model)
    if isinstance(gpu, str):
        from layoutopt.hardware_catalog.catalog import get_gpu

        gpu = get_gpu(gpu)
    return model, gpu


def _workload(workload: Workload | None, isl: int | None, osl: int | None) -> Workload:
    if workload is not None:
        if isl is not None or osl is not None:
            raise InputError("isl/osl", (isl, osl), "give either a workload or isl and osl, not both")
        return workload
    if isl is None or osl is None:
        raise InputError("isl/osl", (isl, osl), "give both isl and osl (tokens), or a workload")
    return Workload(name=f"isl{isl}-osl{osl}", input_tokens=FixedLength(tokens=isl),
                    output_tokens=FixedLength(tokens=osl))


def _memory_report(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: str, context: float,
                   engine: EngineLike) -> MemoryReport:
    mem = memory.memory_breakdown(model, gpu, layout, context_tokens=context, engine=engine)
    return MemoryReport(role=role, weights_gib=mem.weights_bytes / _GIB, activation_gib=mem.activation_bytes / _GIB,
                        reserve_gib=mem.reserve_bytes / _GIB, kv_capacity_gib=mem.kv_capacity_bytes / _GIB,
                        kv_gib_per_sequence=mem.kv_bytes_per_sequence / _GIB, max_batch_size=mem.max_batch_size)


def _check_count(field: str, value: int) -> None:
    if value < 1:
        raise InputError(field, value, "must be a whole number >= 1")


def estimate(model: ModelSpec | str, gpu: GpuSpec | str, engine: EngineLike = "vllm", workload: Workload | None = None,
             isl: int | None = None, osl: int | None = None, layout: Layout | None = None, instances: int = 1,
             prefill_layout: Layout | None = None, prefill_instances: int = 1,
             decode_layout: Layout | None = None, decode_instances: int = 1,
             concurrency: float | None = None, rate: float | None = None, max_batch_size: int | None = None,
             kv_link: Link | None = None, allow_cross_domain: bool = True) -> Estimate:
    """Predict TTFT/TPOT (mean, p50, p90, p99), throughput, memory and bottlenecks; see the module doc.

    A pipeline stage larger than the GPU's local domain (NVLink domain, or PCIe server) is spread
    over whole domains, its collectives costed over the NICs, as ``solve`` costs the layouts it
    proposes (a note says so); ``allow_cross_domain=False`` refuses such a stage instead.

    ``max_batch_size`` caps decode sequences per instance (the engine's --max-num-seqs); ``kv_link``
    is the prefill->decode path (default: every GPU of the smaller instance sends its KV shard over
    its own NIC, :func:`~layoutopt.perf_model.links.kv_transfer_link`). ``engine`` is a name or an
    :class:`~layoutopt.perf_model.calibration.EngineProfile` (a trial profile while fitting).
    """
    model, gpu = _resolve(model, gpu)
    # 'vllm==0.13.0' picks vLLM's constants and 0.13.0's rules; a profile object its engine's default rules.
    ref = engine_ref_of(engine)
    profile = resolve_engine(engine, gpu)
    engine = str(ref) if isinstance(engine, str) and ref is not None else profile.name
    work = _workload(workload, isl, osl)
    if concurrency is not None and rate is not None:
        raise InputError("concurrency/rate", (concurrency, rate), "give one of concurrency (closed loop) or rate")
    if concurrency is not None and not concurrency > 0:
        raise InputError("concurrency", concurrency, "must be > 0 requests in flight")
    if rate is not None and not rate > 0:
        raise InputError("rate", rate, "must be > 0 requests/s")
    disaggregated = prefill_layout is not None or decode_layout is not None
    if disaggregated and (prefill_layout is None or decode_layout is None or layout is not None):
        raise InputError("layout", "mixed", "give layout (colocated) or both prefill_layout and decode_layout")
    if not disaggregated and layout is None:
        layout = Layout()
    for field, value in (("instances", instances), ("prefill_instances", prefill_instances),
                         ("decode_instances", decode_instances)):
        _check_count(field, value)
    notes: list[str] = []
    load: Literal["closed", "open", "unloaded"] = "closed" if concurrency is not None else "open"
    if concurrency is None and rate is None:
        if work.arrival_rate_rps is not None:
            rate = work.arrival_rate_rps
        else:
            concurrency, load = 1.0, "unloaded"
            notes.append("no concurrency or rate given: one request alone")
    # The KV a decoding sequence holds on average: prompt + E[O^2] / (2 E[O]) (paged on demand).
    context = work.mean_input_tokens + output_moments(work)[1] / 2.0
    cohort = profile
    common = dict(model=model, gpu=gpu, engine=profile, workload=work, allow_cross_domain=allow_cross_domain)
    if not disaggregated:
        costs = phase_costs(layout=layout, role="colocated", max_batch_size=max_batch_size, **common)
        if load == "open":
            # The router balances the instances, so their decode slots are one pooled resource.
            point = load_at_rate(costs, "colocated", rate / instances, instances=instances)
        else:
            point = colocated_closed_loop(costs, concurrency / instances, cohort)
        system, per_instance = point, point
        layouts, counts = {"colocated": layout.short_name()}, {"colocated": instances}
        gpus = instances * layout.gpus_per_instance
        mems = [_memory_report(model, gpu, layout, "colocated", context, profile)]
        bottleneck = {"prefill": point.bottleneck if point.bottleneck in ("queueing",) else costs.prefill_bottleneck,
                      "decode": point.bottleneck}
        throughput = point.throughput_rps * instances
        if load == "open" and not point.stable:
            throughput = instances * _max_stable_rate(
                lambda r: load_at_rate(costs, "colocated", r, instances=instances).stable, rate / instances)
            per_instance = system = point.model_copy(
                update={"decode_batch": min(point.decode_batch, costs.max_batch_size)})
        _note_capacity(notes, costs, concurrency / instances if concurrency else None)
    else:
        link = kv_link or kv_transfer_link(gpu, prefill_layout, decode_layout)
        pcosts = phase_costs(layout=prefill_layout, role="prefill", kv_link=link, **common)
        dcosts = phase_costs(layout=decode_layout, role="decode", max_batch_size=max_batch_size, **common)
        if load == "open":
            # The prefill pool shares one queue (least-outstanding-work routing): G/G/c, c = instances.
            pool = dataclasses.replace(pcosts, prefill_servers=pcosts.prefill_servers * prefill_instances)
            p_rows = rows_at_rate(pool, "prefill", rate)
            # The decode pool's slots are shared through the router (one many-server slot wait).
            d_rows = rows_at_rate(dcosts, "decode", rate / decode_instances, instances=decode_instances)
            p = p_rows.point(0, pool, "prefill")
            per_instance = d_rows.point(0, dcosts, "decode")
            # The prefill queue, prefill and KV transfer, then the wait for a decode slot and the
            # first decode step: the two waits combine as distributions, not as a mean added on.
            ttft = series_ttft(p_rows, d_rows, pool.input_weights)
            stable = p.stable and per_instance.stable
            served = rate
            if not stable:
                def drains(r: float) -> bool:
                    return (rows_at_rate(pool, "prefill", r).point(0, pool, "prefill").stable
                            and rows_at_rate(dcosts, "decode", r / decode_instances, instances=decode_instances)
                            .point(0, dcosts, "decode").stable)

                served = _max_stable_rate(drains, rate)
                per_instance = per_instance.model_copy(
                    update={"decode_batch": min(per_instance.decode_batch, dcosts.max_batch_size)})
            system = per_instance.model_copy(update={"ttft_ms": ttft, "stable": stable, "throughput_rps": served})
            bottleneck = {"prefill": p.bottleneck, "decode": per_instance.bottleneck}
        else:
            system, per_instance = disaggregated_closed_loop(pcosts, prefill_instances, dcosts, decode_instances,
                                                             concurrency, cohort)
            bottleneck = {"prefill": "queueing" if system.bottleneck == "queueing" else pcosts.prefill_bottleneck,
                          "decode": per_instance.bottleneck}
        layouts = {"prefill": prefill_layout.short_name(), "decode": decode_layout.short_name()}
        counts = {"prefill": prefill_instances, "decode": decode_instances}
        gpus = prefill_instances * prefill_layout.gpus_per_instance + decode_instances * decode_layout.gpus_per_instance
        mems = [_memory_report(model, gpu, prefill_layout, "prefill", work.mean_input_tokens + 1, profile),
                _memory_report(model, gpu, decode_layout, "decode", context, profile)]
        throughput = system.throughput_rps
        _note_capacity(notes, dcosts, concurrency / decode_instances if concurrency else None)
    notes += _span_notes(gpu, [(role, lay) for role, lay in
                               (("colocated", layout), ("prefill", prefill_layout), ("decode", decode_layout))
                               if lay is not None])
    broken = [] if ref is None else _rule_violations(ref, model, gpu, layout, prefill_layout, decode_layout)
    notes += [] if ref is None else engine_notes(ref)
    result = _result(model, gpu, engine, work, load, concurrency, rate, layouts, counts, gpus, system, per_instance,
                     throughput, mems, bottleneck, notes, disaggregated)
    return result.model_copy(update={"rule_violations": broken})


def _span_notes(gpu: GpuSpec, layouts: list[tuple[str, Layout]]) -> list[str]:
    """One note per layout whose stage spans local domains: how many, and what crosses the NICs."""
    notes = []
    for role, layout in layouts:
        stage = layout.gpus_per_stage
        if spans_domains(gpu, stage):
            notes.append(f"{role} {layout.short_name()}: each pipeline stage of {stage} GPUs spans "
                         f"{units_per_stage(gpu, stage)} local domains of {local_domain_gpus(gpu)} {gpu.name}; "
                         "its TP/EP/DP collectives are costed hierarchically (inside each domain, then over every "
                         "GPU's own NIC)")
    return notes


def _rule_violations(ref, model: ModelSpec, gpu: GpuSpec, layout: Layout | None, prefill_layout: Layout | None,
                     decode_layout: Layout | None) -> list[RuleViolation]:
    """Engine rules the deployment breaks: each instance's, and the prefill/decode pairing once."""
    if layout is not None:
        return check_layout(ref, model, gpu, layout, "colocated")
    return (check_layout(ref, model, gpu, prefill_layout, "prefill", decode_layout=decode_layout)
            + check_layout(ref, model, gpu, decode_layout, "decode"))


def _max_stable_rate(drains, offered_rps: float, iterations: int = 40) -> float:
    """The highest rate (req/s) below ``offered_rps`` at which ``drains(rate)`` holds, by bisection.

    Past it queues grow without bound, so it is the throughput an overloaded deployment delivers.
    """
    low, high = 0.0, offered_rps
    for _ in range(iterations):
        middle = (low + high) / 2
        if drains(middle):
            low = middle
        else:
            high = middle
        if high - low <= 1e-4 * offered_rps:
            break
    return low


def _note_capacity(notes: list[str], costs: PhaseCosts, concurrency: float | None) -> None:
    if concurrency is not None and concurrency > costs.max_batch_size:
        notes.append(f"{concurrency:g} requests per instance exceed the KV capacity of {costs.max_batch_size} "
                     "sequences: the rest wait for a slot (TTFT includes that wait)")


def _result(model, gpu, engine, work, load, concurrency, rate, layouts, counts, gpus, system: LoadPoint,
            per_instance: LoadPoint, throughput: float, mems, bottleneck, notes, disaggregated) -> Estimate:
    if not system.stable:
        notes.append(f"the offered rate exceeds what the deployment drains ({throughput:,.3g} req/s): queues grow "
                     "without bound, so TTFT does too")
    out_tok = throughput * work.mean_output_tokens
    tpot_mean = system.tpot_ms.mean
    return Estimate(
        model=model.name, gpu=gpu.name, engine=engine, mode="disaggregated" if disaggregated else "colocated",
        load=load, concurrency=concurrency, rate_rps=rate, layouts=layouts, instances=counts, num_gpus=gpus,
        mean_input_tokens=work.mean_input_tokens, mean_output_tokens=work.mean_output_tokens,
        ttft_ms=system.ttft_ms, tpot_ms=system.tpot_ms, request_throughput_rps=throughput,
        output_tok_per_s=out_tok, input_tok_per_s=throughput * work.mean_input_tokens,
        output_tok_per_s_per_gpu=out_tok / gpus,
        output_tok_per_s_per_user=1e3 / tpot_mean if tpot_mean > 0 and math.isfinite(tpot_mean) else 0.0,
        decode_batch_per_instance=per_instance.decode_batch, memory=mems, bottleneck=bottleneck,
        stable=system.stable, notes=notes)
