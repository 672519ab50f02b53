"""Fit an engine x GPU-generation profile to measured cases, with k-fold error and error bands.

The fit itself is :func:`layoutopt.perf_model.fit.fit_profile` (scipy ``least_squares``, robust
loss, standard errors); this module checks there are enough rows, runs the k-fold check, and
assembles the :class:`~layoutopt.calibrate.profile_file.ProfileFile`.

Rows rule: at least ``ROWS_PER_CONSTANT`` (2) measured runs per fitted constant, i.e. four
residuals (TTFT and TPOT) per constant, so a standard error has degrees of freedom left; a k-fold
figure needs every training fold to meet the same rule, else it is not computed (and said so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from layoutopt import __version__
from layoutopt.calibrate.bands import bands_from_residuals
from layoutopt.calibrate.generation import gpu_generation
from layoutopt.calibrate.profile_file import (
    Errors,
    ErrorSummary,
    FittedConstant,
    NOT_CONSTANTS,
    MetricErrors,
    ProfileFile,
    ProfileRow,
    Provenance,
)
from layoutopt.errors import InputError
from layoutopt.perf_model import calibration
from layoutopt.perf_model.fit import FIT_PARAMETERS, FitResult, MeasuredCase, fit_profile, log_residuals

ROWS_PER_CONSTANT = 2
# Default constants: the ones that set decode (HBM efficiency, per-step overhead), prefill (GEMM
# efficiency) and the per-request cost off the GPU; few enough for a handful of runs.
DEFAULT_PARAMETERS: tuple[str, ...] = ("memory_efficiency", "step_overhead_ms", "gemm_efficiency",
                                       "request_overhead_ms")
RULE = f"at least {ROWS_PER_CONSTANT} measured runs per fitted constant (TTFT and TPOT of each are residuals)"


def rows_needed(parameters: Sequence[str]) -> int:
    return ROWS_PER_CONSTANT * len(parameters)


def check_enough_rows(num_rows: int, parameters: Sequence[str]) -> None:
    """InputError saying how many rows a fit of ``parameters`` needs when there are fewer."""
    needed = rows_needed(parameters)
    if num_rows >= needed:
        return
    message = (f"fitting {len(parameters)} constants ({', '.join(parameters)}) needs at least {needed} rows "
               f"({RULE}); add {needed - num_rows} more runs (other concurrencies or lengths)")
    affordable = num_rows // ROWS_PER_CONSTANT
    if affordable >= 1:
        message += f", or fit {affordable}: --parameters {','.join(list(parameters)[:affordable])}"
    raise InputError("MEASUREMENTS", f"{num_rows} usable rows", message)


def _metric_errors(residuals: np.ndarray) -> MetricErrors:
    r = residuals[np.isfinite(residuals)]
    if r.size == 0:
        return MetricErrors(rows=0, mdape_pct=None, bias_pct=None, within_20_pct=None)
    rel = np.exp(r) - 1.0
    return MetricErrors(rows=int(r.size), mdape_pct=float(np.median(np.abs(rel)) * 100),
                        bias_pct=float(np.median(rel) * 100), within_20_pct=float(np.mean(np.abs(rel) <= 0.2) * 100))


def error_summary(residuals: np.ndarray) -> ErrorSummary:
    """MdAPE, bias and within-20 % of TTFT and TPOT from (rows, 2) log(predicted / measured)."""
    residuals = np.asarray(residuals, dtype=float).reshape(-1, 2)
    return ErrorSummary(ttft=_metric_errors(residuals[:, 0]), tpot=_metric_errors(residuals[:, 1]))


def fold_of(cases: Sequence[MeasuredCase], folds: int, seed: int = 0) -> np.ndarray:
    """Fold index of every case: a fixed-seed shuffle dealt round-robin (deterministic)."""
    order = np.random.default_rng(seed).permutation(len(cases))
    out = np.empty(len(cases), dtype=int)
    out[order] = np.arange(len(cases)) % folds
    return out


@dataclass(frozen=True)
class KFold:
    folds: int
    residuals: np.ndarray | None  # (rows, 2) held-out log(predicted / measured), None when not run
    note: str


def kfold(cases: Sequence[MeasuredCase], base: calibration.EngineProfile, parameters: Sequence[str], folds: int,
          loss: str) -> KFold:
    """Each case predicted by a fit on the other folds."""
    if folds < 2:
        return KFold(0, None, "k-fold not asked for (--folds < 2)")
    folds = min(folds, len(cases))
    smallest_train = len(cases) - math.ceil(len(cases) / folds)
    if smallest_train < rows_needed(parameters):
        return KFold(0, None, f"k-fold not computed: {folds} folds leave {smallest_train} training rows, "
                              f"below the {rows_needed(parameters)} the rule needs ({RULE})")
    assignment = fold_of(cases, folds)
    held_out = np.full((len(cases), 2), np.nan)
    for fold in range(folds):
        train = [c for c, f in zip(cases, assignment) if f != fold]
        test_index = np.flatnonzero(assignment == fold)
        fitted = fit_profile(train, base, parameters, loss=loss)
        held_out[test_index] = log_residuals([cases[i] for i in test_index], fitted.profile)
    return KFold(folds, held_out, f"{folds}-fold: each row predicted by a fit without its fold")


def _rows(cases: Sequence[MeasuredCase], sources: dict[str, str], fit: FitResult,
          held_out: np.ndarray | None) -> list[ProfileRow]:
    def pred(measured: float, r: float) -> float | None:
        return float(measured * math.exp(r)) if math.isfinite(r) else None

    rows = []
    for i, case in enumerate(cases):
        before, after = fit.residuals_before[i], fit.residuals_after[i]
        kf = held_out[i] if held_out is not None else (math.nan, math.nan)
        rows.append(ProfileRow(
            row_id=case.row_id, source=sources.get(case.row_id, ""), mode=case.mode, model=case.model_id,
            gpu=case.gpu, isl=case.isl, osl=case.osl, concurrency=case.concurrency,
            measured_ttft_ms=case.ttft_ms, measured_tpot_ms=case.tpot_ms,
            before_ttft_ms=pred(case.ttft_ms, before[0]), before_tpot_ms=pred(case.tpot_ms, before[1]),
            after_ttft_ms=pred(case.ttft_ms, after[0]), after_tpot_ms=pred(case.tpot_ms, after[1]),
            kfold_ttft_ms=pred(case.ttft_ms, kf[0]), kfold_tpot_ms=pred(case.tpot_ms, kf[1])))
    return rows


def builtin_profile(engine: str, generation: str) -> calibration.EngineProfile:
    """The built-in profile a fit starts from: the engine's profile for ``generation`` (its Hopper
    profile, carried over by the generation scales, where none was fitted on that generation)."""
    return calibration.get_engine_profile(engine, generation)


@dataclass(frozen=True)
class Calibration:
    profile: ProfileFile
    fit: FitResult
    kfold_note: str


def calibrate_cases(cases: list[MeasuredCase], engine: str, *, parameters: Sequence[str] = DEFAULT_PARAMETERS,
                    folds: int = 5, loss: str = "soft_l1", sources: dict[str, str] | None = None,
                    left_out: dict[str, str] | None = None, command: str = "",
                    base: calibration.EngineProfile | None = None) -> Calibration:
    """Fit ``parameters`` of ``engine``'s built-in profile (or ``base``) to ``cases`` of one GPU
    generation; returns the profile file (constants, errors, k-fold, bands, rows) and the fit."""
    parameters = tuple(parameters)
    unknown = [p for p in parameters if p not in FIT_PARAMETERS]
    if unknown or not parameters:
        raise InputError("--parameters", ",".join(unknown) or "none", "constants to fit, among: "
                         + ", ".join(FIT_PARAMETERS))
    wrong_engine = sorted({c.engine for c in cases} - {engine})
    if wrong_engine:
        raise InputError("--engine", engine, f"the rows are of {', '.join(wrong_engine)}: calibrate one engine")
    generations = sorted({gpu_generation(c.gpu) for c in cases})
    if len(generations) > 1:
        raise InputError("--gpu", ", ".join(sorted({c.gpu for c in cases})),
                         f"rows of one GPU generation per profile (got {', '.join(generations)})")
    check_enough_rows(len(cases), parameters)
    generation = generations[0]
    base_profile = base or builtin_profile(engine, generation)
    fit = fit_profile(cases, base_profile, parameters, loss=loss)
    checked = kfold(cases, base_profile, parameters, folds, loss)
    band_residuals, basis = ((checked.residuals, f"{checked.folds}-fold held-out residuals of the calibration rows")
                             if checked.residuals is not None else
                             (fit.residuals_after, "in-sample residuals of the calibration rows (no k-fold)"))
    modes = [c.mode for c in cases]
    profile = ProfileFile(
        engine=engine, gpu_generation=generation, gpus=sorted({c.gpu for c in cases}),
        constants={k: v for k, v in fit.profile.model_dump().items() if k not in NOT_CONSTANTS},
        fitted=[FittedConstant(name=k, value=fit.values[k],
                               std_err=fit.standard_errors[k] if math.isfinite(fit.standard_errors[k]) else None,
                               before=fit.base_values[k]) for k in parameters],
        provenance=Provenance(created_utc=datetime.now(timezone.utc).replace(microsecond=0),
                              tool=f"layoutopt {__version__}", command=command,
                              sources=sorted(set((sources or {}).values())), num_rows=len(cases),
                              rows_left_out=dict(left_out or {}),
                              base_profile=f"{base_profile.name}: {base_profile.source.split('. ')[0][:160]}",
                              loss=loss, rule=RULE),
        errors=Errors(before=error_summary(fit.residuals_before), after=error_summary(fit.residuals_after),
                      kfold=error_summary(checked.residuals) if checked.residuals is not None else None,
                      folds=checked.folds),
        bands=bands_from_residuals(engine, generation, modes, band_residuals, basis),
        rows=_rows(cases, sources or {}, fit, checked.residuals))
    return Calibration(profile, fit, checked.note)
