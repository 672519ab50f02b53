"""How many candidate layouts the performance model evaluates per second on one core.

One evaluation = the memory fit (``max_batch_size``) at the workload's context + the prefill time
of one prompt (``prefill_time_s``, the number the optimizer's step tables take) + decode step
times over a grid of batch sizes (one vectorized call). Candidates are
the product of a few models, GPUs, parallel degrees and precisions, filtered by ``check_layout``
beforehand, the way the optimizer enumerates them. Two figures:

- cold: every candidate seen for the first time (per-candidate constants computed, caches empty);
- warm: the same candidates again (what repeated sweeps over workloads and SLOs pay).

Target: >= 10,000 evaluations per second. With ``--capacity`` it also times ``instance_capacity``
(what the optimizer calls per candidate: step tables, load grid, SLO search) per role on a chat
workload, cold (tables computed) and warm (tables cached, e.g. the same candidate under another
SLO or headroom); target >= 2,000 calls/s for decode and prefill roles.

    python benchmarks/perf_model_speed.py [--seconds 3] [--capacity]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog import get_model
from layoutopt.perf_model import memory, step
from layoutopt.perf_model.coefficients import clear_coefficient_caches
from layoutopt.plan import Layout
from layoutopt.perf_model.step import decode_step_time_array, prefill_time_s

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b", "deepseek-v3", "qwen3.5-397b-a17b",
          "gpt-oss-120b")
GPUS = ("H100", "H200", "B200")
BATCH_GRID = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024], dtype=float)
PROMPT_TOKENS, CONTEXT_TOKENS = 2048, 2560


def candidates():
    """(model, gpu, layout) triples that pass the layout rules."""
    found = []
    for model_name, gpu_name in itertools.product(MODELS, GPUS):
        model, gpu = get_model(model_name), get_gpu(gpu_name)
        eps = (1, 2, 4, 8) if model.is_moe else (1,)
        dps = (1, 2, 4) if model.is_moe else (1,)
        for tp, pp, ep, dp, precision in itertools.product((1, 2, 4, 8), (1, 2), eps, dps, ("bf16", "fp8")):
            if (tp * dp) % ep:
                continue
            layout = Layout(tp_size=tp, pp_size=pp, ep_size=ep, dp_size=dp, weight_precision=precision)
            try:
                memory.check_layout(model, gpu, layout)
            except LayoutError:
                continue
            found.append((model, gpu, layout))
    return found


def evaluate(model, gpu, layout) -> float:
    """One candidate evaluation; returns the best decode throughput it found (tokens/s)."""
    fits = memory.max_batch_size(model, gpu, layout, CONTEXT_TOKENS)
    if fits < 1:
        return 0.0
    prefill_time_s(model, gpu, layout, PROMPT_TOKENS)
    batches = BATCH_GRID[BATCH_GRID <= fits]
    step_s = decode_step_time_array(model, gpu, layout, batches, np.array([CONTEXT_TOKENS]))
    return float(np.max(batches / step_s))


def clear_caches() -> None:
    clear_coefficient_caches()
    memory._coefficients.cache_clear()
    step._columns.clear()


def rate(cands, seconds: float, cold: bool) -> float:
    """Best evaluations per CPU-second of this process over passes through all candidates.

    CPU time (not wall time) and best-of-passes (as ``timeit`` does) keep other processes on a
    shared machine from blurring the single-core figure.
    """
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if cold:
            clear_caches()
        start = time.process_time()
        for model, gpu, layout in cands:
            evaluate(model, gpu, layout)
        best = max(best, len(cands) / max(time.process_time() - start, 1e-9))
    return best


def capacity_rates(cands, limit: int = 200) -> dict[str, tuple[float, float]]:
    """instance_capacity calls per CPU-second by role: (cold, warm)."""
    from layoutopt.perf_model import costs
    from layoutopt.perf_model.capacity import instance_capacity
    from layoutopt.workloads.slo import SLO
    from layoutopt.workloads.workload import Workload

    workload = Workload(name="chat", input_tokens={"kind": "lognormal", "mean": 1000, "p90": 2000},
                        output_tokens={"kind": "lognormal", "mean": 200, "p90": 400})
    slo = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 60}, attainment=0.9)
    subset = cands[:limit]
    out = {}
    for role in ("decode", "prefill", "colocated"):
        for model, gpu, layout in subset:  # warm the per-candidate constants
            instance_capacity(model, gpu, layout, role, workload, slo)
        costs._phase_costs.cache_clear()
        start = time.process_time()
        for model, gpu, layout in subset:
            instance_capacity(model, gpu, layout, role, workload, slo)
        cold = len(subset) / max(time.process_time() - start, 1e-9)
        start = time.process_time()
        for model, gpu, layout in subset:
            instance_capacity(model, gpu, layout, role, workload, slo, headroom=0.8)
        out[role] = (cold, len(subset) / max(time.process_time() - start, 1e-9))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time per measurement")
    parser.add_argument("--capacity", action="store_true", help="also time instance_capacity per role")
    args = parser.parse_args()
    cands = candidates()
    for model, gpu, layout in cands:  # warm the model specs' cached properties and the catalogs
        evaluate(model, gpu, layout)
    cold = rate(cands, args.seconds, cold=True)
    warm = rate(cands, args.seconds, cold=False)
    print(f"{len(cands)} candidates, batch grid of {len(BATCH_GRID)} sizes")
    print(f"cold: {cold:,.0f} evaluations/s   warm: {warm:,.0f} evaluations/s per core (target >= 10,000/s)")
    if args.capacity:
        for role, (cold_calls, warm_calls) in capacity_rates(cands).items():
            print(f"instance_capacity {role:9}: cold {cold_calls:,.0f} calls/s   warm {warm_calls:,.0f} calls/s")


if __name__ == "__main__":
    main()
