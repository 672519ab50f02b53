"""Calibration against measured serving latencies: replay measured cases, score, fit profile constants.

:func:`predict` replays one :class:`~layoutopt.perf_model.measurements.MeasuredCase` through
:func:`~layoutopt.perf_model.estimate.estimate` on the case's GPU. :func:`fit_profile` fits a
handful of interpretable ``EngineProfile`` constants (efficiencies, overheads, collective latency,
closed-loop constants) to a set of cases with ``scipy.optimize.least_squares``: residuals are the
log ratios predicted / measured of TTFT and TPOT of every case, the loss is robust (``soft_l1`` by
default, so a few rows the model cannot describe do not drag the constants), parameters move in
log space within physical bounds, and the standard errors come from the Jacobian at the solution.
One constant set per engine (and GPU generation): no per-model or per-row terms exist to absorb
error, so the fitted profile carries to other models.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import least_squares

from layoutopt.errors import InputError, LayoutoptError
from layoutopt.perf_model import calibration
from layoutopt.workloads.workload import Workload
from layoutopt.perf_model.reference_protocol import request_lengths
from layoutopt.perf_model.measurements import LeftOut, MeasuredCase, benchmark_token_budget, fit_cases, load_cases

__all__ = ["FIT_PARAMETERS", "FitResult", "LeftOut", "MeasuredCase", "benchmark_token_budget", "error_summary", "fit_cases", "fit_profile",
           "load_cases", "log_residuals", "min_cases", "predict", "predict_all", "trial_profile"]

# Constants of EngineProfile a fit may move, with physical bounds (efficiencies are fractions of
# peak; the first four are the load layer's: per-request overhead, the closed-loop first burst's
# rounds and the optional lockstep cohort).
FIT_PARAMETERS: dict[str, tuple[float, float]] = {
    "request_overhead_ms": (0.5, 300.0),
    "disagg_overhead_ms": (0.5, 500.0),
    "closed_loop_cohort_fraction": (0.01, 20.0),
    "closed_loop_cohort_exponent": (0.01, 1.0),
    "closed_loop_rounds": (1.0, 40.0),
    "gemm_efficiency": (0.3, 0.95),
    "gemm_half_efficiency_tokens": (8.0, 2048.0),
    # Hopper-equivalent (x the generation's hbm_scale, the product capped at 0.98): up to 0.98 / 0.814 on
    # Blackwell, the profile's own limit.
    "memory_efficiency": (0.5, calibration.MAX_MEMORY_EFFICIENCY),
    # FlashAttention-2/3 forward passes reach well over a fifth of the BF16 peak at serving
    # lengths [estimate]; lower fits trade attention against overheads along a flat direction.
    "attention_efficiency": (0.2, 0.9),
    "step_overhead_ms": (0.05, 20.0),
    "layer_overhead_us": (0.05, 40.0),
    # Host launch time of one layer's kernels outside CUDA graphs: tens of kernels at ~5-50 us each.
    "eager_layer_launch_us": (1.0, 2000.0),
    # What an MLA layer adds to that: a handful more ops in its context path, each tens of us.
    "eager_mla_layer_launch_us": (1.0, 4000.0),
    "allreduce_latency_us": (1.0, 80.0),
    "alltoall_latency_us": (1.0, 200.0),
    "moe_imbalance": (1.0, 4.0),
    "moe_kernel_overhead_us": (0.5, 100.0),
    # Grouped expert GEMMs: a quarter of the dense efficiency at worst (Triton fused-MoE kernels on
    # ragged rows), the dense one at best.
    "grouped_gemm_efficiency": (0.25, 1.0),
}
# The parameters the built-in refit moves (benchmarks/fit_calibration.py).
DEFAULT_PARAMETERS: tuple[str, ...] = (
    "request_overhead_ms", "closed_loop_rounds", "gemm_efficiency",
    "memory_efficiency", "attention_efficiency", "step_overhead_ms", "layer_overhead_us", "allreduce_latency_us")
# Residual (log ratio) a case the model cannot replay contributes: a factor e^3 ~ 20 off.
UNMODELLED_RESIDUAL = 3.0
LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")


def predict(case: MeasuredCase, engine: calibration.EngineLike | None = None) -> tuple[float, float]:
    """(TTFT ms, TPOT ms) predicted for a case on its GPU; ``engine`` (a name or a trial
    EngineProfile) overrides the case's. The profile takes the step token budget the row's launch
    configured (``MeasuredCase.step_token_budget``, :func:`~layoutopt.perf_model.measurements.benchmark_token_budget`)."""
    from layoutopt.perf_model.estimate import estimate

    profile = _with_budget(calibration.resolve_engine(engine or case.engine, _gpu(case.gpu)), case)
    result = estimate(_model(case.model_id), _gpu(case.gpu), engine=profile, workload=_requests(case),
                      layout=case.layout, prefill_layout=case.prefill_layout,
                      prefill_instances=case.prefill_instances, decode_layout=case.decode_layout,
                      decode_instances=case.decode_instances, concurrency=case.concurrency,
                      max_batch_size=case.decode_batch, allow_cross_domain=True)
    return result.ttft_ms.mean, result.tpot_ms.mean


@lru_cache(maxsize=4096)
def _workload_of(isl: int, osl: int, range_ratio: float) -> Workload:
    return Workload(name=f"isl{isl}-osl{osl}" + (f"-range{range_ratio:g}" if range_ratio < 1.0 else ""),
                    input_tokens=request_lengths(isl, range_ratio), output_tokens=request_lengths(osl, range_ratio))


def _requests(case: MeasuredCase) -> Workload:
    """The requests the case's client sent: its lengths, fixed or drawn uniformly below them
    (``MeasuredCase.length_range_ratio``, :mod:`~layoutopt.perf_model.reference_protocol`)."""
    return _workload_of(case.isl, case.osl, case.length_range_ratio)


def _with_budget(profile: calibration.EngineProfile, case: MeasuredCase) -> calibration.EngineProfile:
    """``profile`` with the step token budget the case's launch configured (``case.step_token_budget``,
    one attention-DP rank's), where known, and the attention-DP balancing, batch waiting and request
    polling it set."""
    changes: dict[str, object] = {}
    if case.attention_dp_balance_timeout_iters is not None:
        changes |= {"attention_dp_balance_timeout_iters": case.attention_dp_balance_timeout_iters,
                    "attention_dp_batching_wait_iters": case.attention_dp_batching_wait_iters}
    if case.batch_wait_timeout_iters:
        changes |= {"batch_wait_timeout_iters": case.batch_wait_timeout_iters,
                    "batch_wait_max_tokens_ratio": case.batch_wait_max_tokens_ratio}
    if case.scheduler_recv_interval > 1:
        changes["scheduler_recv_interval"] = case.scheduler_recv_interval
    if case.graphed_prompt_tokens is not None and case.graphed_prompt_tokens != profile.graphed_prompt_tokens:
        changes["graphed_prompt_tokens"] = case.graphed_prompt_tokens
    if case.step_token_budget is not None:
        budget = case.step_token_budget
        if profile.name.split("~", 1)[0] == "sglang":
            # max_num_batched_tokens is SGLang's whole chunk, split over attention-DP ranks (costs.rank_token_budget);
            # max_prefill_tokens caps each rank's prefill batch below it.
            layout = case.layout or case.prefill_layout
            budget = min(profile.max_num_batched_tokens, budget * (layout.dp_size if layout is not None else 1))
        if budget != profile.max_num_batched_tokens:
            changes["max_num_batched_tokens"] = budget
    return _launched(profile, tuple(changes.items())) if changes else profile


@lru_cache(maxsize=4096)
def _launched(profile: calibration.EngineProfile, changes: tuple[tuple[str, object], ...]) -> calibration.EngineProfile:
    """``profile`` with a launch's settings (one object per profile and settings: the model's caches
    key profiles by identity)."""
    return profile.model_copy(update=dict(changes))


@lru_cache(maxsize=64)
def _gpu(name: str):
    from layoutopt.hardware_catalog.catalog import get_gpu

    return get_gpu(name)


@lru_cache(maxsize=256)
def _model(name: str):
    from layoutopt.model_catalog.catalog import get_model

    return get_model(name)


def predict_all(cases: Sequence[MeasuredCase], engine: calibration.EngineLike | None = None
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


def log_residuals(cases: Sequence[MeasuredCase], engine: calibration.EngineLike | None = None) -> np.ndarray:
    """(cases, 2) array of log(predicted / measured) for TTFT and TPOT; NaN where not modelled."""
    ttft, tpot, _ = predict_all(cases, engine)
    measured = np.array([[c.ttft_ms, c.tpot_ms] for c in cases], dtype=float).reshape(len(cases), 2)
    predicted = np.stack([ttft, tpot], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(predicted / measured)
    out[~np.isfinite(out)] = np.nan
    return out


def trial_profile(base: calibration.EngineLike, values: dict[str, float]) -> calibration.EngineProfile:
    """The profile ``base`` (a name or a profile) with ``values`` replaced."""
    profile = calibration.resolve_engine(base)
    name = profile.name if profile.name.endswith("~fit") else f"{profile.name}~fit"
    return calibration.EngineProfile.model_validate({**profile.model_dump(), **values, "name": name})


def min_cases(parameters: Sequence[str]) -> int:
    """Fewest cases a fit of ``parameters`` needs: two residuals per case, and at least three
    residuals per fitted constant so its standard error means something."""
    return max(2, math.ceil(3 * len(parameters) / 2))


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit_profile`.

    ``residuals_before`` / ``residuals_after`` are (cases, 2) arrays of log(predicted / measured)
    for TTFT and TPOT of each of ``cases`` under the base and the fitted profile (NaN where a case
    cannot be modelled). ``standard_errors`` are one-sigma uncertainties of ``values`` in the
    parameters' own units (delta method from the log-space Jacobian; inf where the rows do not
    constrain a parameter, e.g. one that sits at its bound).
    """

    profile: calibration.EngineProfile
    parameters: tuple[str, ...]
    values: dict[str, float]
    standard_errors: dict[str, float]
    base_values: dict[str, float]
    cases: tuple[MeasuredCase, ...]
    residuals_before: np.ndarray
    residuals_after: np.ndarray
    loss: str
    cost: float
    num_evaluations: int
    converged: bool
    message: str

    def summary(self, after: bool = True) -> dict[str, dict[str, float]]:
        """error_summary of TTFT and TPOT over the cases, after (default) or before the fit."""
        residuals = self.residuals_after if after else self.residuals_before
        measured = np.array([[c.ttft_ms, c.tpot_ms] for c in self.cases]).reshape(len(self.cases), 2)
        predicted = np.exp(residuals) * measured
        return {"ttft": error_summary(predicted[:, 0], measured[:, 0]),
                "tpot": error_summary(predicted[:, 1], measured[:, 1])}


def _check_parameters(parameters: Sequence[str]) -> tuple[str, ...]:
    if not parameters:
        raise InputError("parameters", list(parameters), "name at least one constant to fit: "
                         + ", ".join(FIT_PARAMETERS))
    unknown = [p for p in parameters if p not in FIT_PARAMETERS]
    if unknown:
        raise InputError("parameters", unknown, "fit one of " + ", ".join(FIT_PARAMETERS))
    if len(set(parameters)) != len(parameters):
        raise InputError("parameters", list(parameters), "name each constant once")
    return tuple(parameters)


def fit_profile(cases: list[MeasuredCase], base: calibration.EngineLike, parameters: Sequence[str], *,
                loss: str = "soft_l1", f_scale: float = 0.1, max_nfev: int | None = None,
                diff_step: float = 0.03) -> FitResult:
    """Fit ``parameters`` of the profile ``base`` to ``cases`` by robust nonlinear least squares.

    Residuals: log(pred / meas) of TTFT and TPOT of every case (a case the model cannot replay
    contributes ``UNMODELLED_RESIDUAL``). ``loss`` is a ``scipy.optimize.least_squares`` loss and
    ``f_scale`` its soft margin in log units (0.1: residuals beyond ~10 % count linearly, not
    quadratically). Parameters move in log space inside ``FIT_PARAMETERS`` bounds, starting from
    ``base``'s values (clipped into the bounds). Too few cases raise InputError saying how many
    are needed.
    """
    params = _check_parameters(parameters)
    if loss not in LOSSES:
        raise InputError("loss", loss, "one of " + ", ".join(LOSSES))
    if len(cases) < min_cases(params):
        raise InputError("cases", len(cases), f"fitting {len(params)} constants ({', '.join(params)}) needs at "
                         f"least {min_cases(params)} measured cases")
    base_profile = calibration.resolve_engine(base)
    base_values = {k: float(getattr(base_profile, k)) for k in params}
    low = np.log([FIT_PARAMETERS[k][0] for k in params])
    high = np.log([FIT_PARAMETERS[k][1] for k in params])
    x0 = np.clip(np.log([max(base_values[k], 1e-12) for k in params]), low + 1e-9, high - 1e-9)
    cases = list(cases)

    def to_values(x: np.ndarray) -> dict[str, float]:
        return {k: float(v) for k, v in zip(params, np.exp(x))}

    def residual_vector(x: np.ndarray) -> np.ndarray:
        r = log_residuals(cases, trial_profile(base_profile, to_values(x)))
        return np.where(np.isfinite(r), r, UNMODELLED_RESIDUAL).ravel()

    before = log_residuals(cases, base_profile)
    solution = least_squares(residual_vector, x0, bounds=(low, high), loss=loss, f_scale=f_scale,
                             diff_step=diff_step, x_scale=1.0, max_nfev=max_nfev or 40 * (len(params) + 1),
                             xtol=1e-4, ftol=1e-4, gtol=1e-6, method="trf")
    values = to_values(solution.x)
    profile = trial_profile(base_profile, values)
    after = log_residuals(cases, profile)
    errors = _standard_errors(solution, values, params)
    return FitResult(profile=profile, parameters=params, values=values, standard_errors=errors,
                     base_values=base_values, cases=tuple(cases), residuals_before=before, residuals_after=after,
                     loss=loss, cost=float(solution.cost), num_evaluations=int(solution.nfev),
                     converged=bool(solution.status > 0), message=str(solution.message))


def _standard_errors(solution, values: dict[str, float], params: tuple[str, ...]) -> dict[str, float]:
    """One-sigma errors of the values: cov(log x) = s^2 (J^T J)^-1, s^2 = 2 cost / (m - n);
    sigma(x) = x sigma(log x). Parameters the Jacobian does not see get inf."""
    jac = np.asarray(solution.jac, dtype=float)
    m, n = jac.shape
    dof = max(m - n, 1)
    s2 = 2.0 * float(solution.cost) / dof
    seen = np.linalg.norm(jac, axis=0) > 1e-9
    out = {k: math.inf for k in params}
    if not seen.any():
        return out
    sub = jac[:, seen]
    cov = np.linalg.pinv(sub.T @ sub) * s2
    sigma_log = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    for k, s in zip([p for p, v in zip(params, seen) if v], sigma_log):
        out[k] = float(values[k] * s)
    return out
