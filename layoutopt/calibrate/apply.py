"""Use a profile file in estimate and solve, and attach the expected error band to their results.

``estimate`` and ``solve`` here are the perf model's and the optimizer's with one more argument,
``profile``: a :class:`ProfileFile` (or a path to one, or its content as a mapping), which replaces
the built-in constants of its engine on GPUs of its generation. Every result carries the error
band of its engine, GPU generation and mode: the profile's own when given, else the built-in one
(``bands.builtin_band``). ``layoutopt.api`` exports these two functions.

A profile covers one GPU generation: a solve whose budget names GPUs of another generation, or
only a dollar cap, is refused rather than planned with constants fitted elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutopt.calibrate.bands import builtin_band
from layoutopt.calibrate.generation import gpu_generation
from layoutopt.calibrate.profile_file import ProfileFile, load_profile, profile_from_mapping
from layoutopt.errors import InputError
from layoutopt.perf_model.calibration import EngineLike
from layoutopt.plan import ErrorBand, Plan

if TYPE_CHECKING:
    from layoutopt.perf_model.estimate import Estimate

ProfileInput = ProfileFile | str | Path | Mapping[str, Any] | None


def resolve_profile(profile: ProfileInput) -> ProfileFile | None:
    """A ProfileFile from a ProfileFile, a path to a YAML file or a mapping (a request body)."""
    if profile is None or isinstance(profile, ProfileFile):
        return profile
    if isinstance(profile, Mapping):
        return profile_from_mapping(dict(profile), "profile")
    return load_profile(profile)


def _engine_name(engine: EngineLike) -> str:
    """'vllm' of 'vllm', 'vllm==0.33.0' (a versioned engine reference) or a profile object."""
    return (engine if isinstance(engine, str) else engine.name).partition("==")[0].strip().lower()


def profile_engine(profile: ProfileFile | None, engine: EngineLike, gpu_names: Sequence[str]) -> EngineLike:
    """What the perf model takes as ``engine``: the profile's constants, checked against the engine
    and the GPUs asked for, or ``engine`` unchanged without a profile."""
    if profile is None:
        return engine
    if _engine_name(engine) != profile.engine:
        raise InputError("--engine", _engine_name(engine),
                         f"{profile.engine}: the profile was fitted on {profile.engine} runs (or leave out --profile)")
    for name in gpu_names:
        generation = gpu_generation(name)
        if generation != profile.gpu_generation:
            raise InputError("--profile", f"{profile.engine} {profile.gpu_generation} profile",
                             f"GPUs of its generation ({profile.gpu_generation}); {name} is {generation}: plan it "
                             "without --profile or with a profile fitted on that generation")
    return profile.engine_profile()


def error_band(engine: EngineLike, gpu: str, mode: str, profile: ProfileFile | None = None) -> ErrorBand:
    """The expected error band of a prediction for ``engine`` on ``gpu`` in ``mode``; a GPU of no known
    generation (a user catalog row without one) gets a band without rows: error unknown."""
    try:
        generation = gpu_generation(gpu)
    except InputError:
        return ErrorBand(engine=_engine_name(engine), gpu_generation="unknown", mode=mode, num_rows=0,
                         basis=f"{gpu} has no GPU generation in the catalog: no calibration rows apply")
    if profile is not None and profile.gpu_generation == generation:
        band = profile.band(mode)
        if band is not None:
            return band
        return ErrorBand(engine=profile.engine, gpu_generation=generation, mode=mode, num_rows=0,
                         basis=f"profile file has no {mode} rows: error unknown")
    return builtin_band(_engine_name(engine), generation, mode)


def with_error_band(result: "Estimate", profile: ProfileFile | None = None) -> "Estimate":
    return result.model_copy(update={"error_band": error_band(result.engine, result.gpu, result.mode, profile)})


def with_error_bands(plan: Plan, profile: ProfileFile | None = None) -> Plan:
    """``plan`` with one band per (GPU generation, mode) of its pools (and of its alternatives')."""
    if not plan.pools:
        return plan
    bands: dict[tuple[str, str], ErrorBand] = {}
    pools = list(plan.pools) + [p for alternative in plan.alternatives for p in alternative.pools]
    for pool in pools:
        mode = "colocated" if pool.role == "colocated" else "disaggregated"
        band = error_band(plan.engine, pool.gpu, mode, profile)
        bands.setdefault((band.gpu_generation, band.mode), band)
    return plan.model_copy(update={"error_bands": list(bands.values())})


def estimate(model, gpu, engine: EngineLike = "vllm", *args: Any, profile: ProfileInput = None,
             **kwargs: Any) -> "Estimate":
    """:func:`layoutopt.perf_model.estimate.estimate` with ``profile`` and the error band."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.estimate import estimate as perf_estimate

    loaded = resolve_profile(profile)
    used = engine
    if loaded is not None:
        used = profile_engine(loaded, engine, [get_gpu(gpu).name if isinstance(gpu, str) else gpu.name])
    return with_error_band(perf_estimate(model, gpu, used, *args, **kwargs), loaded)


def _budget_gpus(budget: Any, gpus_path: Any) -> list[str] | None:
    """GPU types a budget names; None for a dollar cap alone (every catalog GPU)."""
    from layoutopt.hardware_catalog.budget import Budget, parse_budget
    from layoutopt.hardware_catalog.catalog import load_catalog

    if budget is None:
        return []
    parsed = budget if isinstance(budget, Budget) else parse_budget(budget, load_catalog(gpus_path=gpus_path))
    return list(parsed.gpu_counts) or None


def solve(model, budget=None, slo=None, workload=None, *, engine: EngineLike = "vllm", profile: ProfileInput = None,
          **kwargs: Any) -> Plan:
    """:func:`layoutopt.optimizer.solve.solve` with ``profile`` and the error bands of the plan."""
    from layoutopt.optimizer.solve import solve as optimizer_solve

    loaded = resolve_profile(profile)
    constants = None
    if loaded is not None:
        gpus = _budget_gpus(budget, kwargs.get("gpus_path"))
        if gpus is None:
            raise InputError("--budget", budget, f"GPU counts of {loaded.gpu_generation} GPUs (e.g. 32x"
                             f"{loaded.gpus[0]}) with --profile: a dollar cap alone would plan other "
                             "generations with this profile's constants")
        constants = profile_engine(loaded, engine, gpus)
    plan = optimizer_solve(model, budget, slo, workload, engine=engine, profile=constants, **kwargs)
    if loaded is not None:
        # A cluster file may hold GPUs the budget did not name: check what the plan uses.
        profile_engine(loaded, engine, sorted({p.gpu for p in plan.pools}))
    return with_error_bands(with_ep_exchange(plan, constants or engine), loaded)


def with_ep_exchange(plan: Plan, engine: EngineLike) -> Plan:
    """``plan`` recording the EP exchange its numbers cost (the profile's, else the engine's built-in),
    so emit selects the backend that runs it."""
    from layoutopt.perf_model.calibration import get_engine_profile

    profile = get_engine_profile(engine) if isinstance(engine, str) else engine
    return plan.model_copy(update={"ep_exchange": profile.ep_exchange})
