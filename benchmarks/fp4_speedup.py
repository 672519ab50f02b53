"""FP4 over FP8 on B200: measured speed-ups of paired serving rows against the model's.

The reference B200 rows (shared/reference/measurements/b200_sxm.csv) run Llama-3.1-70B with NVFP4
and with FP8 weights in the same layouts, lengths and concurrencies, on the same engines. The ratio
FP8 / FP4 of their TTFT (prompt-heavy steps, GEMM-bound at 8,192-token prompts and small TP) and of
their TPOT (decode, mostly weight- and KV-bound) is the serving-level measurement of how much faster
the engines' FP4 GEMMs are; this script prints it next to the performance model's ratio for the
same rows, per engine, TP degree and prompt length (medians over concurrencies). The FP4 GEMM
constants come from kernel microbenchmarks (data/generations.yaml, gemm_series), not from these
ratios, so this is a check, not a fit.

    python benchmarks/fp4_speedup.py
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from accuracy import measurements_dir  # noqa: E402

from layoutopt.perf_model.fit import fit_cases, load_cases, predict_all  # noqa: E402

MODEL_ID = "meta-llama/Llama-3.1-70B"


def paired_ratios(cases) -> dict[tuple[str, int, int], list[tuple[float, float, float, float]]]:
    """(engine, tp, isl) -> [(measured TTFT ratio, predicted, measured TPOT ratio, predicted)] over
    the concurrencies and output lengths measured in both precisions."""
    ttft, tpot, _ = predict_all(cases)
    by_config: dict[tuple, dict[str, tuple[float, float, float, float]]] = defaultdict(dict)
    for case, p_ttft, p_tpot in zip(cases, ttft, tpot):
        key = (case.engine, case.layout.tp_size, case.isl, case.osl, case.concurrency)
        by_config[key][case.layout.weight_precision] = (case.ttft_ms, case.tpot_ms, p_ttft, p_tpot)
    out: dict[tuple[str, int, int], list[tuple[float, float, float, float]]] = defaultdict(list)
    for (engine, tp, isl, _, _), runs in by_config.items():
        if "fp4" in runs and "fp8" in runs:
            f4, f8 = runs["fp4"], runs["fp8"]
            out[(engine, tp, isl)].append((f8[0] / f4[0], f8[2] / f4[2], f8[1] / f4[1], f8[3] / f4[3]))
    return out


def main() -> int:
    cases, _ = load_cases(measurements_dir() / "b200_sxm.csv")
    cases = [c for c in fit_cases(cases) if c.model_id == MODEL_ID and c.mode == "agg" and c.layout is not None]
    pairs = paired_ratios(cases)
    print(f"B200 {MODEL_ID}, FP8 / FP4 (> 1: FP4 faster), medians over the paired concurrencies")
    print(f"{'engine':7} {'tp':>2} {'isl':>5} {'pairs':>5}  {'TTFT meas':>9} {'model':>6}  {'TPOT meas':>9} {'model':>6}")
    for (engine, tp, isl), values in sorted(pairs.items()):
        med = [statistics.median(v[i] for v in values) for i in range(4)]
        print(f"{engine:7} {tp:>2} {isl:>5} {len(values):>5}  {med[0]:>9.2f} {med[1]:>6.2f}  {med[2]:>9.2f} {med[3]:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
