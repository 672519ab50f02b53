"""Turn one measured benchmark result plus its run context into the perf model's MeasuredCase."""

from __future__ import annotations

import dataclasses
import math

from layoutopt.calibrate.run_context import RunContext
from layoutopt.errors import InputError
from layoutopt.perf_model.fit import MeasuredCase


def required(context: RunContext, field: str, where: str) -> object:
    value = getattr(context, field)
    if value is None:
        hint = {"model": "--model NAME", "gpu": "--gpu H100", "engine": "--engine vllm",
                "concurrency": "--concurrency N"}[field]
        raise InputError(f"{where}: {field}", None,
                         f"the result file does not say it; give {hint} or put '{field}:' in a sidecar YAML "
                         "(--run-info FILE, or RUN.yaml next to RUN.json)")
    return value


def positive(where: str, field: str, value: object) -> float:
    """``value`` as a finite number > 0, else one InputError naming the field and the value."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{where}: {field}", value, "a number > 0") from None
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"{where}: {field}", value, "a finite number > 0")
    return number


def make_case(**fields) -> MeasuredCase:
    """A MeasuredCase from keyword fields, leaving out any the dataclass does not have (its fields
    belong to the perf model and may grow, e.g. the GPU a row was measured on)."""
    names = {f.name for f in dataclasses.fields(MeasuredCase)}
    return MeasuredCase(**{k: v for k, v in fields.items() if k in names})


def case_from_run(row_id: str, context: RunContext, where: str, *, isl: float, osl: float,
                  concurrency: float | None, ttft_ms: float, tpot_ms: float) -> MeasuredCase:
    """One case: the measured means of one run and the deployment the context describes."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model

    model_name = str(required(context, "model", where))
    gpu_name = str(required(context, "gpu", where))
    engine = str(required(context, "engine", where))
    try:
        model = get_model(model_name)
    except InputError as error:
        raise InputError(f"{where}: model", model_name, error.allowed, error.hint) from None
    try:
        gpu = get_gpu(gpu_name)
    except InputError as error:
        raise InputError(f"{where}: gpu", gpu_name, error.allowed, error.hint) from None
    if concurrency is None:
        concurrency = float(required(context, "concurrency", where))  # type: ignore[arg-type]
    common = dict(row_id=row_id, engine=engine, model_id=model.name, isl=max(1, round(isl)),
                  osl=max(1, round(osl)), concurrency=float(concurrency), ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                  gpu=gpu.name)
    if context.disaggregated:
        assert context.prefill is not None and context.decode is not None
        return make_case(mode="disagg", layout=None, prefill_layout=context.prefill.layout,
                         prefill_instances=context.prefill.instances, decode_layout=context.decode.layout,
                         decode_instances=context.decode.instances, decode_batch=context.decode.max_batch_size,
                         **common)
    if context.layout is None:
        raise InputError(f"{where}: layout", None,
                         "the result file does not say how the model was split; give --tp/--pp/--ep/--dp "
                         "(colocated) or a sidecar YAML with layout: {tp_size: N} or prefill:/decode: pools")
    return make_case(mode="agg", layout=context.layout, prefill_layout=None, prefill_instances=1, decode_layout=None,
                     decode_instances=1, decode_batch=None, **common)

