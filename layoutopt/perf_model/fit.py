"""Calibration against measured serving latencies: replay measurement rows, score, fit engine constants.

Rows of ``reference/measurements/h100_sxm.csv`` (closed-loop benchmarks of vLLM, SGLang and
TensorRT-LLM on H100 SXM) become :class:`MeasuredCase` objects; :func:`predict` replays one through
:func:`~layoutopt.perf_model.estimate.estimate` (a disaggregated row with blank worker counts takes
the layout of a fully described copy of the same run when the CSV has one, else replays a guessed
one prefill and one decode worker and says so). :func:`fit_engine` minimizes the mean absolute log
error of TTFT and TPOT over all rows of one engine by varying a handful of interpretable
``EngineProfile`` constants (efficiencies, overheads, collective latency) with a deterministic
Nelder-Mead in log space, so the fitted profile carries to other models and GPUs: no per-model or
per-row terms exist to absorb error.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layoutopt.errors import LayoutoptError
from layoutopt.perf_model import calibration
from layoutopt.plan import Layout

# Constants of EngineProfile the fit may move, with bounds (the efficiencies are fractions of peak;
# the first three are the load layer's: closed-loop cohorts and per-request overhead).
FIT_PARAMETERS: dict[str, tuple[float, float]] = {
    "request_overhead_ms": (0.5, 200.0),
    "closed_loop_cohort_fraction": (0.01, 20.0),
    "closed_loop_cohort_exponent": (0.01, 1.0),
    "gemm_efficiency": (0.2, 0.95),
    "memory_efficiency": (0.4, 0.98),
    "attention_efficiency": (0.1, 0.9),
    "step_overhead_ms": (0.05, 20.0),
    "layer_overhead_us": (0.0, 40.0),
    "allreduce_latency_us": (1.0, 80.0),
}
_PRECISION = {"": "bf16", "bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "nvfp4": "fp4",
              "mxfp4": "fp4"}


@dataclass(frozen=True)
class MeasuredCase:
    """One measurement row, parsed into what :func:`estimate` takes."""

    row_id: str
    engine: str
    mode: str
    model_id: str
    isl: int
    osl: int
    concurrency: float
    layout: Layout | None
    prefill_layout: Layout | None
    prefill_instances: int
    decode_layout: Layout | None
    decode_instances: int
    decode_batch: int | None
    ttft_ms: float
    tpot_ms: float
    # Disaggregated rows whose worker counts the CSV leaves blank and no fully described copy of the
    # same measurement supplies: replayed as one prefill and one decode worker, a guess.
    worker_counts_assumed: bool = False


def _num(value: str) -> float | None:
    value = (value or "").strip()
    return float(value) if value else None


def _degree(row: dict, key: str, default: int = 1) -> int:
    value = _num(row.get(key, ""))
    return int(value) if value and value >= 1 else default


def _layout(row: dict, prefix: str, precision: str, is_moe: bool) -> Layout:
    tp, pp = _degree(row, f"{prefix}tp"), _degree(row, f"{prefix}pp")
    dp = _degree(row, f"{prefix}attention_dp") if is_moe else 1
    ep = _degree(row, f"{prefix}moe_ep") if is_moe else 1
    return Layout(tp_size=tp, pp_size=pp, dp_size=dp, ep_size=ep, weight_precision=precision)


_DISAGG_LAYOUT_COLUMNS = tuple(f"{side}_{name}" for side in ("prefill", "decode")
                               for name in ("workers", "tp", "pp", "attention_dp", "moe_tp", "moe_ep", "batch"))


def _measurement_key(row: dict) -> tuple:
    """What identifies one measurement: engine, lengths, concurrency and the two measured latencies."""
    return (row["backend"], row["mode"], row["isl"], row["osl"], row["concurrency"], row["ttft_ms"], row["tpot_ms"])


def _has_worker_counts(row: dict) -> bool:
    return bool((row.get("prefill_workers") or "").strip() and (row.get("decode_workers") or "").strip())


def _with_described_twin(row: dict, described: dict[tuple, dict]) -> tuple[dict, bool]:
    """(row, worker counts assumed) for a disaggregated row.

    Some measurements are published twice: once with the whole deployment (worker counts, batch
    per worker, attention DP) and once more with blank worker counts and the degrees summarized
    (``tp16 ep16``). Identical latencies at identical lengths and concurrency are one run, so the
    summarized copy takes the described copy's layout columns.
    """
    if row["mode"] != "disagg" or _has_worker_counts(row):
        return row, False
    twin = described.get(_measurement_key(row))
    if twin is None:
        return row, True
    return {**row, **{k: twin[k] for k in _DISAGG_LAYOUT_COLUMNS}}, False


def load_cases(csv_path: str | Path) -> tuple[list[MeasuredCase], list[tuple[str, str, str, str]]]:
    """(cases, unsupported rows as (row id, engine, mode, reason))."""
    from layoutopt.model_catalog.catalog import get_model

    cases, unsupported = [], []
    with open(csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    described = {_measurement_key(r): r for r in rows if r["mode"] == "disagg" and _has_worker_counts(r)}
    for row in rows:
        row, assumed = _with_described_twin(row, described)
        rid, engine, mode = row["id"], row["backend"], row["mode"]
        try:
            model = get_model(row["model"])
        except LayoutoptError:
            unsupported.append((rid, engine, mode, "model not in catalog"))
            continue
        quant = (row.get("gemm_quant_mode") or row.get("precision") or "").strip()
        precision = _PRECISION.get(quant, _PRECISION.get((row.get("precision") or "").strip()))
        if precision is None:
            unsupported.append((rid, engine, mode, f"precision {quant!r}"))
            continue
        if precision == "fp4" and model.expert_native_precision == "fp4":
            # An MXFP4 checkpoint on a GPU without FP4 math (H100): the experts stay 4-bit in
            # memory, GEMMs run in BF16 (the spec keeps native expert bytes).
            precision = "bf16"
        try:
            if mode == "agg":
                layout, prefill, decode = _layout(row, "", precision, model.is_moe), None, None
                p_count = d_count = 1
                batch = None
            else:
                layout = None
                prefill = _layout(row, "prefill_", precision, model.is_moe)
                decode = _layout(row, "decode_", precision, model.is_moe)
                p_count, d_count = _degree(row, "prefill_workers"), _degree(row, "decode_workers")
                batch = _degree(row, "decode_batch", 0) or None
        except ValueError as error:
            unsupported.append((rid, engine, mode, f"layout rule: {str(error).splitlines()[-1][:60]}"))
            continue
        concurrency = _num(row["concurrency"])
        if concurrency is None and batch is not None:
            # No client concurrency recorded: the run filled every decode slot [assumption].
            concurrency = float(batch * d_count)
        if concurrency is None:
            unsupported.append((rid, engine, mode, "no concurrency"))
            continue
        cases.append(MeasuredCase(rid, engine, mode, row["model"], int(float(row["isl"])),
                                  int(float(row["osl"])), concurrency, layout, prefill, p_count, decode,
                                  d_count, batch, float(row["ttft_ms"]), float(row["tpot_ms"]), assumed))
    return cases, unsupported


def predict(case: MeasuredCase, engine: calibration.EngineLike | None = None) -> tuple[float, float]:
    """(TTFT ms, TPOT ms) predicted for a case; ``engine`` (a name or a trial EngineProfile)
    overrides the case's."""
    from layoutopt.perf_model.estimate import estimate

    result = estimate(case.model_id, "H100", engine=engine or case.engine, isl=case.isl, osl=case.osl,
                      layout=case.layout, prefill_layout=case.prefill_layout,
                      prefill_instances=case.prefill_instances, decode_layout=case.decode_layout,
                      decode_instances=case.decode_instances, concurrency=case.concurrency,
                      max_batch_size=case.decode_batch, allow_cross_domain=True)
    return result.ttft_ms.mean, result.tpot_ms.mean


def predict_all(cases: list[MeasuredCase], engine: calibration.EngineLike | None = None
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Predicted (TTFT ms, TPOT ms) arrays, NaN where a case cannot be modelled, with reasons."""
    ttft, tpot, reasons = np.full(len(cases), np.nan), np.full(len(cases), np.nan), []
    for i, case in enumerate(cases):
        try:
            ttft[i], tpot[i] = predict(case, engine)
            reasons.append("")
        except LayoutoptError as error:
            reasons.append(_short_reason(str(error)))
    return ttft, tpot, reasons


def _short_reason(message: str) -> str:
    if "misses by" in message:
        return "does not fit in memory"
    return message.split(";")[-1].strip()[:70]


def error_summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Median and mean absolute % error, share within 20 %, median signed % error (finite rows)."""
    ok = np.isfinite(predicted) & (predicted > 0)
    if not ok.any():
        return {"rows": 0, "mdape": math.nan, "mape": math.nan, "within_20": math.nan, "median_signed": math.nan}
    rel = predicted[ok] / measured[ok] - 1.0
    return {"rows": int(ok.sum()), "mdape": float(np.median(np.abs(rel)) * 100),
            "mape": float(np.mean(np.abs(rel)) * 100), "within_20": float(np.mean(np.abs(rel) <= 0.2) * 100),
            "median_signed": float(np.median(rel) * 100)}


# ---------------------------------------------------------------------------------------------- fit

def fit_cases(cases: list[MeasuredCase]) -> list[MeasuredCase]:
    """The cases a fit learns from: each measurement once (the CSV repeats some runs under several
    ids), and no row whose worker counts are guessed (its error says nothing about the constants)."""
    seen, out = set(), []
    for case in cases:
        key = (case.engine, case.mode, case.isl, case.osl, case.concurrency, case.ttft_ms, case.tpot_ms)
        if case.worker_counts_assumed or key in seen:
            continue
        seen.add(key)
        out.append(case)
    return out


def trial_profile(base: str, values: dict[str, float]) -> calibration.EngineProfile:
    """The profile of ``base`` with ``values`` replaced (step functions take the object directly)."""
    profile = calibration.get_engine_profile(base)
    return calibration.EngineProfile.model_validate({**profile.model_dump(), **values, "name": f"{base}~fit"})


def loss(cases: list[MeasuredCase], engine: calibration.EngineLike, penalty: float = 3.0) -> float:
    """Mean over rows of |log(pred/meas)| for TTFT plus TPOT; unmodelled rows cost ``penalty``."""
    ttft, tpot, _ = predict_all(cases, engine)
    meas_ttft = np.array([c.ttft_ms for c in cases])
    meas_tpot = np.array([c.tpot_ms for c in cases])
    total = 0.0
    for pred, meas in ((ttft, meas_ttft), (tpot, meas_tpot)):
        ok = np.isfinite(pred) & (pred > 0)
        errors = np.where(ok, np.abs(np.log(np.where(ok, pred, 1.0) / meas)), penalty)
        total += float(np.mean(np.minimum(errors, penalty)))
    return total


def _to_unit(values: dict[str, float]) -> np.ndarray:
    return np.array([math.log(values[k]) if k in values and values[k] > 0 else 0.0 for k in FIT_PARAMETERS])


def _from_unit(x: np.ndarray) -> dict[str, float]:
    out = {}
    for value, (key, (low, high)) in zip(x, FIT_PARAMETERS.items()):
        out[key] = float(min(max(math.exp(value), low), high if high > 0 else 1e-9))
    return out


def nelder_mead(function, x0: np.ndarray, step: float = 0.3, iterations: int = 60) -> tuple[np.ndarray, float]:
    """Deterministic Nelder-Mead (standard coefficients) from ``x0``; returns (best x, best value)."""
    dim = len(x0)
    simplex = [x0] + [x0 + step * np.eye(dim)[i] for i in range(dim)]
    values = [function(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = function(reflected)
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - simplex[-1])
            fe = function(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = function(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                for i in range(1, len(simplex)):
                    simplex[i] = simplex[0] + 0.5 * (simplex[i] - simplex[0])
                    values[i] = function(simplex[i])
    best = int(np.argmin(values))
    return simplex[best], float(values[best])


def current_values(engine: str) -> dict[str, float]:
    """The FIT_PARAMETERS of ``engine`` as currently calibrated."""
    values = calibration.get_engine_profile(engine).model_dump()
    return {k: float(values[k]) for k in FIT_PARAMETERS}


def fit_engine(cases: list[MeasuredCase], engine: str, iterations: int = 60) -> tuple[dict[str, float], float]:
    """Fitted FIT_PARAMETERS of ``engine`` on ``cases`` and the loss reached."""
    start = current_values(engine)
    x0 = _to_unit({k: max(float(start[k]), FIT_PARAMETERS[k][0]) for k in FIT_PARAMETERS})

    def objective(x: np.ndarray) -> float:
        return loss(cases, trial_profile(engine, _from_unit(x)))

    best, value = nelder_mead(objective, x0, iterations=iterations)
    return _from_unit(best), value
