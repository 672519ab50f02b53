"""Expected error bands from calibration residuals, per engine, GPU generation and mode.

A residual is log(predicted / measured) of one row; the band reports measured / predicted =
exp(-residual) at p10, p50 and p90 with the median absolute % error and the share within 20 %.
The built-in profiles' bands live in ``data/builtin_bands.yaml``, computed from the reference
measurements by ``benchmarks/error_bands.py --write`` (rerun it after a refit of the built-in
constants); a profile file carries its own (``layoutopt calibrate``).

A GPU generation without reference rows of its own (Ampere, Ada, CDNA; or a mode a generation has
no rows of) is predicted with a profile carried from another generation, so its band is the
carried one (``CARRIED``): the residuals of each reference GPU's rows predicted with the profile
fitted on the other generation (``benchmarks/accuracy.py --leave-one-gpu-out``), the error
measured where a profile meets a generation it was not fitted on. It is not an in-sample band of
the reference GPUs passed off as the new one's.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

from layoutopt.plan import ErrorBand, LatencyBand
from layoutopt.io_safe import load_package_yaml

CASE_MODES = {"agg": "colocated", "disagg": "disaggregated"}
BUILTIN_BANDS_FILE = "data/builtin_bands.yaml"
# Fewest rows whose p10 / p90 a band reports; fewer say "too few rows" instead of a spread.
MIN_BAND_ROWS = 5
# gpu_generation of the built-in bands taken from carried-over predictions (module doc).
CARRIED = "carried"


def latency_band(residuals: np.ndarray) -> LatencyBand | None:
    """Band of one metric from its log(predicted / measured) residuals (NaN = not modelled)."""
    r = np.asarray(residuals, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return None
    ratio = np.exp(-r)
    ape = np.abs(np.exp(r) - 1.0) * 100.0
    return LatencyBand(ratio_p10=float(np.quantile(ratio, 0.1)), ratio_p50=float(np.median(ratio)),
                       ratio_p90=float(np.quantile(ratio, 0.9)), mdape_pct=float(np.median(ape)),
                       within_20_pct=float(np.mean(ape <= 20.0) * 100.0))


def bands_from_residuals(engine: str, generation: str, case_modes: list[str], residuals: np.ndarray,
                         basis: str) -> list[ErrorBand]:
    """One ErrorBand per mode present in ``case_modes`` ('agg' / 'disagg'); ``residuals`` is
    (rows, 2): TTFT and TPOT log(predicted / measured)."""
    residuals = np.asarray(residuals, dtype=float).reshape(len(case_modes), 2)
    bands = []
    for case_mode, mode in CASE_MODES.items():
        mask = np.array([m == case_mode for m in case_modes], dtype=bool)
        if not mask.any():
            continue
        rows = int(np.sum(np.isfinite(residuals[mask]).all(axis=1)))
        if rows < MIN_BAND_ROWS:
            bands.append(ErrorBand(engine=engine, gpu_generation=generation, mode=mode, num_rows=rows,
                                   basis=f"{basis}; only {rows} rows (a band needs {MIN_BAND_ROWS})"))
            continue
        bands.append(ErrorBand(engine=engine, gpu_generation=generation, mode=mode, num_rows=rows,
                               ttft=latency_band(residuals[mask, 0]), tpot=latency_band(residuals[mask, 1]),
                               basis=basis))
    return bands


@lru_cache(maxsize=1)
def builtin_bands() -> tuple[ErrorBand, ...]:
    text = resources.files("layoutopt.calibrate").joinpath(BUILTIN_BANDS_FILE).read_text()
    return tuple(ErrorBand.model_validate(item) for item in (load_package_yaml(text) or []))


def _stored_band(engine: str, generation: str, mode: str) -> ErrorBand | None:
    for band in builtin_bands():
        if (band.engine, band.gpu_generation, band.mode) == (engine, generation, mode):
            return band
    return None


def _has_spread(band: ErrorBand | None) -> bool:
    return band is not None and band.ttft is not None and band.tpot is not None


def builtin_band(engine: str, generation: str, mode: str) -> ErrorBand:
    """The built-in profile's band for ``generation``: its own reference rows' where it has some with
    a spread, else the carried band (module doc), else one with no rows (error unknown)."""
    own = _stored_band(engine, generation, mode)
    if _has_spread(own):
        return own
    carried = _stored_band(engine, CARRIED, mode)
    if _has_spread(carried):
        mine = (f"has {own.num_rows} reference rows, too few for a band" if own is not None
                else "has no reference rows")
        return carried.model_copy(update={
            "gpu_generation": generation,
            "basis": f"{generation} {mode} {mine}: the band of a profile carried to a generation it was not "
                     f"fitted on, from the {carried.basis}"})
    if own is not None:
        return own
    return ErrorBand(engine=engine, gpu_generation=generation, mode=mode, num_rows=0,
                     basis="built-in profile; no reference measurements of this engine, generation and mode")
