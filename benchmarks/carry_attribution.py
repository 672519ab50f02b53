"""Which fitted constants fail to carry between GPU generations: the leave-one-GPU-out error with one
constant at a time taken from the predicted GPU's own profile.

    python benchmarks/carry_attribution.py [--engine trtllm] [--min-gain 1.0]

``benchmarks/accuracy.py --leave-one-gpu-out`` predicts each GPU's rows with the profile fitted on the
other generation. This asks, per engine and GPU, how far each constant's carried value is from what
the GPU's own rows want: for every constant whose two fitted values differ, the TTFT and TPOT median
absolute % error of the engine's rows when that constant alone is its own generation's value (the
rest carried). A constant whose swap removes most of the error is one the carry-over does not
describe (a harness property, a term the other GPU's rows cannot identify); the swap is a diagnosis,
not an honest figure: it uses the predicted GPU's own fit. Rows: "carried" is the honest
leave-one-GPU-out figure, "own" the in-sample one; constants are printed when their swap moves TTFT
or TPOT by at least ``--min-gain`` points (either way), most TTFT gained first, and "all but X" rows
are not computed (constants interact; the single swaps are the first-order attribution).

A last block repeats the whole-GPU figures (every engine) with the engines' biggest single TTFT gain
applied, so the share of the leave-one-GPU-out miss one constant per engine explains is visible.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import DEFAULT_CSVS, _predictions, load_all, other_generation_profile  # noqa: E402
from layoutopt.hardware_catalog.catalog import get_gpu  # noqa: E402
from layoutopt.perf_model.calibration import EngineProfile, get_engine_profile, without_carried  # noqa: E402
from layoutopt.perf_model.fit import error_summary  # noqa: E402

# Fields that are not fitted constants (names, provenance, launch settings that differ by design).
NOT_CONSTANTS = frozenset({"name", "generation", "source", "carried_constants"})


def own_profile(case) -> EngineProfile:
    return get_engine_profile(case.engine, get_gpu(case.gpu).generation or "hopper")


def differing_constants(engine: str) -> list[str]:
    """Constants whose carried value differs from the own fit's on either GPU (the carried profile is
    the other generation's without its ``carried_constants``), in the profile's field order."""
    hopper, blackwell = get_engine_profile(engine, "hopper"), get_engine_profile(engine, "blackwell")
    pairs = ((without_carried(hopper), blackwell), (without_carried(blackwell), hopper))
    return [name for name in EngineProfile.model_fields
            if name not in NOT_CONSTANTS and any(getattr(a, name) != getattr(b, name) for a, b in pairs)]


def _per_gpu_mdape(cases, profiles) -> dict[str, tuple[float, float]]:
    """Per GPU: (TTFT MdAPE, TPOT MdAPE) of ``cases`` predicted with ``profiles(case)``."""
    ttft, tpot = _predictions(cases, profiles)
    out = {}
    for gpu in sorted({c.gpu for c in cases}):
        idx = np.array([i for i, c in enumerate(cases) if c.gpu == gpu])
        out[gpu] = (error_summary(ttft[idx], np.array([cases[i].ttft_ms for i in idx]))["mdape"],
                    error_summary(tpot[idx], np.array([cases[i].tpot_ms for i in idx]))["mdape"])
    return out


def figures(cases, swap: dict[str, tuple[str, ...]]) -> dict[str, tuple[float, float]]:
    """Per GPU: (TTFT MdAPE, TPOT MdAPE) of ``cases`` under the carried profile, with the constants
    ``swap[engine]`` taken from the case's own profile."""
    def carried(case) -> EngineProfile:
        profile, names = other_generation_profile(case), swap.get(case.engine, ())
        if not names:
            return profile
        own = own_profile(case)
        return profile.model_copy(update={name: getattr(own, name) for name in names})

    return _per_gpu_mdape(cases, carried)


def in_sample(cases) -> dict[str, tuple[float, float]]:
    """Per GPU: (TTFT MdAPE, TPOT MdAPE) of ``cases`` with their own generation's profile."""
    return _per_gpu_mdape(cases, own_profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", help="only this engine (vllm, sglang, trtllm)")
    parser.add_argument("--min-gain", type=float, default=1.0,
                        help="print a constant when its swap moves a GPU's TTFT or TPOT MdAPE by this many points")
    args = parser.parse_args()
    all_cases, _ = load_all(DEFAULT_CSVS, args.engine)
    engines = sorted({c.engine for c in all_cases})
    best: dict[str, str] = {}
    for engine in engines:
        cases = [c for c in all_cases if c.engine == engine]
        carried, own = figures(cases, {}), in_sample(cases)
        print(f"== {engine}: leave-one-GPU-out MdAPE (TTFT / TPOT) with one constant from the GPU's own fit")
        print(f"   {'constant':32s} " + "  ".join(f"{gpu:>18s}" for gpu in carried))
        print(f"   {'carried (honest)':32s} " + "  ".join(f"{t:8.1f} / {p:6.1f}  " for t, p in carried.values()))
        rows = []
        for name in differing_constants(engine):
            swapped = figures(cases, {engine: (name,)})
            gains = {gpu: (carried[gpu][0] - swapped[gpu][0], carried[gpu][1] - swapped[gpu][1]) for gpu in carried}
            if any(abs(g) >= args.min_gain for pair in gains.values() for g in pair):
                rows.append((sum(g[0] for g in gains.values()), name, swapped))
        for _, name, swapped in sorted(rows, key=lambda r: (-r[0], r[1])):
            print(f"   {name:32s} " + "  ".join(f"{t:8.1f} / {p:6.1f}  " for t, p in swapped.values()))
        print(f"   {'own (in sample)':32s} " + "  ".join(f"{t:8.1f} / {p:6.1f}  " for t, p in own.values()))
        if rows:
            best[engine] = max(rows, key=lambda r: (r[0], r[1]))[1]
        print()
    if args.engine is None and best:
        print("== every engine, each GPU (TTFT / TPOT MdAPE)")
        carried = figures(all_cases, {})
        swapped = figures(all_cases, {engine: (name,) for engine, name in best.items()})
        print("   carried (honest):           " + "  ".join(f"{gpu} {t:.1f} / {p:.1f}" for gpu, (t, p) in carried.items()))
        label = ", ".join(f"{engine} {name}" for engine, name in best.items())
        print(f"   own {label}: " + "  ".join(f"{gpu} {t:.1f} / {p:.1f}" for gpu, (t, p) in swapped.items()))


if __name__ == "__main__":
    main()
