"""The TTFT remainder: measured TTFT of the least concurrent rows minus the model's GPU prefill alone.

What the one per-request overhead of an engine and GPU generation (``request_overhead_ms``) has to
explain, per GPU, engine and model (and, with the rows' engine builds, per build): remainders that
differ between models point at a term the model lacks, or at runs that differ.
``python benchmarks/accuracy.py --ttft-remainder [--by-engine-version]`` prints it.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

# Rows at most this concurrent count as "nearly alone" for the TTFT remainder (little queueing).
REMAINDER_MAX_CONCURRENCY = 8


def gpu_prefill_ms(case) -> float:
    """The model's GPU time (ms) of the case's prompt prefilled alone in one step, under the case's
    own profile and launch budget: no request overhead, no queueing."""
    from layoutopt.perf_model import calibration, fit, step

    profile = fit._with_budget(calibration.resolve_engine(case.engine, fit._gpu(case.gpu)), case)
    return step.prefill_time_s(fit._model(case.model_id), fit._gpu(case.gpu), case.layout, case.isl,
                               engine=profile) * 1e3


def engine_versions(paths: list[Path]) -> dict[str, str]:
    """Row id -> the engine build that measured it (the CSV's ``backend_version``; "?" where empty)."""
    out: dict[str, str] = {}
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                out[row["id"]] = (row.get("backend_version") or "").strip() or "?"
    return out


def ttft_remainders(cases, prefill_ms=gpu_prefill_ms, versions: dict[str, str] | None = None) -> dict[str, dict]:
    """{"GPU/engine/model": {"rows", "remainder_ms": [...], "by_isl": {isl: median}, "overhead_ms"}}:
    what the per-request overhead has to explain. For every aggregated layout and prompt length
    the rows at the lowest concurrency (at most REMAINDER_MAX_CONCURRENCY, so little queueing)
    give the measured TTFT minus ``prefill_ms(case)``, the model's GPU prefill alone; one
    ``request_overhead_ms`` per engine and generation serves every model, so remainders that
    differ between models point at a term the model lacks (or at runs that differ). With
    ``versions`` (row id -> engine build, :func:`engine_versions`) the groups are also split by
    the build ("GPU/engine==version/model"): the same model on the same GPU and engine measured
    by two builds tells software apart from the model's physics."""
    from layoutopt.errors import LayoutoptError
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import get_engine_profile

    lowest: dict[tuple, list] = defaultdict(list)
    for case in cases:
        if case.mode != "agg" or case.layout is None or case.concurrency > REMAINDER_MAX_CONCURRENCY:
            continue
        engine = case.engine if versions is None else f"{case.engine}=={versions.get(case.row_id, '?')}"
        lowest[(case.gpu, engine, case.model_id, case.layout, case.isl)].append(case)
    out: dict[str, dict] = {}
    for (gpu, engine, model_id, _, isl), group in sorted(lowest.items(), key=lambda kv: str(kv[0])):
        n = min(c.concurrency for c in group)
        at_n = [c for c in group if c.concurrency == n]
        try:
            remainder = float(np.median([c.ttft_ms for c in at_n])) - prefill_ms(at_n[0])
        except LayoutoptError:
            continue
        label = f"{gpu}/{engine}/{model_id.split('/')[-1]}"
        overhead_ms = get_engine_profile(engine.partition("==")[0], get_gpu(gpu).generation).request_overhead_ms
        entry = out.setdefault(label, {"rows": 0, "remainder_ms": [], "by_isl": defaultdict(list),
                                       "overhead_ms": overhead_ms})
        entry["rows"] += len(at_n)
        entry["remainder_ms"].append(remainder)
        entry["by_isl"][isl].append(remainder)
    for entry in out.values():
        entry["by_isl"] = {isl: float(np.median(v)) for isl, v in sorted(entry["by_isl"].items())}
    return out


def render_remainders(table: dict[str, dict]) -> str:
    width = max([44] + [len(label) + 1 for label in table])
    lines = ["-- TTFT remainder: measured TTFT at the lowest concurrency (<= "
             f"{REMAINDER_MAX_CONCURRENCY}) minus the model's GPU prefill alone, per layout and prompt length",
             f"{'gpu/engine/model':<{width}}{'layouts':>8}{'median':>9}{'min':>8}{'max':>8}  {'by ISL (median)':<28}"
             f"{'profile overhead':>16}"]
    for label, entry in table.items():
        values = np.array(entry["remainder_ms"])
        by_isl = ", ".join(f"{isl}: {v:.0f}" for isl, v in entry["by_isl"].items())
        lines.append(f"{label:<{width}}{len(values):>8}{np.median(values):>8.0f} {values.min():>7.0f} {values.max():>7.0f}"
                     f"  {by_isl:<28}{entry['overhead_ms']:>14.1f} ms")
    lines.append("(ms; one request_overhead_ms per engine and generation serves every model: remainders that differ "
                 "by model, or grow with the prompt, are what that constant cannot describe)")
    return "\n".join(lines)
