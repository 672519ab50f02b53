"""The performance model against published MLPerf Inference results (closed division, datacenter).

A held-out check: nothing in layoutopt is fitted on these numbers (the profiles are fitted on
shared/reference/measurements, H100 and B200 only). It predicts, per published result, the
output tokens/s that the public API (:func:`layoutopt.api.estimate`) gives for the same model,
GPU, GPU count, precision and engine, and prints published / predicted / ratio per row and the
median and worst ratio per GPU generation and vendor.

    python benchmarks/public_results.py                      # llama2-70b rows, every GPU
    python benchmarks/public_results.py --gpu MI300X --rows  # one GPU, every row
    python benchmarks/public_results.py --no-eager-floor     # what-if: no eager launch floor

Data: ``benchmarks/data/mlperf_results.csv``, one row per valid result (round, submitter,
system, GPU and count, benchmark, scenario, published output tokens/s and samples/s, the run's
TTFT/TPOT limits, weight precision from the submission's measurements JSON, engine from its
system file, and the repository + path of the ``mlperf_log_summary.txt`` it came from);
``benchmarks/data/extract_mlperf.py`` regenerates it from mirrors of the result repositories.

Workload and rules (mlcommons/inference, commit b66003e1):
- llama2-70b uses Llama-2-70B-Chat on 24,576 OpenOrca samples whose input and output are each
  shorter than 1,024 tokens (language/llama2-70b/README.md:141, processorca.py:134-135).
- Server: p99 TTFT <= 2,000 ms and p99 TPOT <= 200 ms; Interactive: 450 ms and 40 ms
  (loadgen/mlperf.conf:116-122, README.md:284; ``*.Server.target_latency_percentile = 99``,
  mlperf.conf:83). Every row also carries the limits its own log reports, and they agree.
- Output length: each row's own published tokens/s divided by its samples/s (the mean output
  tokens per sample that run produced; the reference FP16 run gives 294.45, README.md:266).
- Input length: the mean prompt length of the dataset is not stated in mlcommons/inference nor in
  the result repositories. ``--input-tokens`` (default 256, an assumption, not a source) sets it,
  and the summary prints the medians at 128, 256 and 512 too.

Model: Llama-2-70B is not in the catalog and no copy of its config.json was reachable; the closest
catalog model, ``llama-3.1-70b``, has the same layers, hidden size, heads, KV heads and FFN width
(the same 320 KiB/token BF16 KV cache); it differs in vocabulary (embedding and LM head, about 2 %
of the weights) and context length, which this workload never reaches.

Prediction (what a user would ask the API):
- Offline: every tensor-parallel size t in {1, 2, 4, 8} that divides the system's GPU count, with
  count / t instances, at the concurrency the memory admits (instances x the largest batch);
  the best output tokens/s.
- Server / Interactive: the same layouts under Poisson arrivals (MLPerf's Server scenario); the
  highest rate up to which the predicted p99 TTFT and p99 TPOT meet the limits (geometric steps,
  then bisection), times the mean output tokens; the best layout.
- Engine: TensorRT-LLM rows use the ``trtllm`` profile, vLLM rows ``vllm``, SGLang ``sglang``;
  rows whose system file names no engine (AMD partners' own stacks) use ``vllm``.
- Precision: the submission's weight precision (fp8, fp4); rows without one use fp8. KV cache:
  fp8 (NVIDIA's llama2-70b configs set ``kv_cache_dtype: fp8``,
  closed/NVIDIA/configs/B200-SXM-180GBx8/Server/llama2-70b.py; AMD's MI355X harness too,
  closed/AMD/code/llama2-70b-99/harness_llm/models/llama2-70b/server_mi355x.yaml:50) except
  MI300X/MI325X, whose harness files set none (vLLM's default, the model dtype: bf16).
Colocated (aggregated) instances only: the submissions ran aggregated in-flight batching.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from layoutopt import api
from layoutopt.errors import InputError
from layoutopt.plan.layout import Layout

DATA = Path(__file__).with_name("data") / "mlperf_results.csv"
# mlcommons/inference loadgen/mlperf.conf:116-122 (p99: mlperf.conf:83).
LIMITS_MS = {"Server": (2000.0, 200.0), "Interactive": (450.0, 40.0)}
# Catalog model used for each MLPerf benchmark (see the module doc for why not Llama-2-70B itself).
MODELS = {"llama2-70b-99": "llama-3.1-70b", "llama2-70b-99.9": "llama-3.1-70b"}
ENGINES = {"TensorRT-LLM": "trtllm", "vLLM": "vllm", "SGLang": "sglang"}
PRECISIONS = {"fp8": "fp8", "fp4": "fp4", "mxfp4": "mxfp4"}
BF16_KV_GPUS = {"MI300X", "MI325X"}
GENERATIONS = {"H100-SXM": "Hopper", "H200-SXM": "Hopper", "B200": "Blackwell", "B300": "Blackwell",
               "GB200": "Blackwell", "GB300": "Blackwell", "MI300X": "CDNA3", "MI325X": "CDNA3",
               "MI355X": "CDNA4"}
TP_SIZES = (1, 2, 4, 8)
DEFAULT_INPUT_TOKENS = 256
SENSITIVITY_INPUT_TOKENS = (128, 256, 512)


@dataclass(frozen=True)
class Prediction:
    """Predicted output tokens/s of one published result and how it was obtained."""

    predicted_tok_per_s: float
    layout: str
    engine: str
    precision: str
    bottleneck: str
    decode_batch: float
    notes: tuple[str, ...]


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    """The published results, one dict per CSV row."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def output_tokens_per_sample(row: dict[str, str]) -> float:
    """Mean output tokens per sample of the run: published tokens/s over samples/s."""
    return float(row["metric_value"]) / float(row["samples_per_s"])


def _engine(row: dict[str, str]) -> tuple[str, list[str]]:
    engine = ENGINES.get(row["engine"])
    if engine is not None:
        return engine, []
    return "vllm", [f"engine {row['engine']!r} in the system file: vllm profile"]


def _precisions(row: dict[str, str]) -> tuple[str, str, list[str]]:
    weights = PRECISIONS.get(row["precision"])
    notes = [] if weights is not None else [f"weight precision {row['precision']!r}: fp8 assumed"]
    kv = "bf16" if row["gpu"] in BF16_KV_GPUS else "fp8"
    return weights or "fp8", kv, notes


def _layouts(num_gpus: int, weights: str, kv: str) -> list[tuple[Layout, int]]:
    return [(Layout(tp_size=tp, weight_precision=weights, kv_precision=kv), num_gpus // tp)
            for tp in TP_SIZES if num_gpus % tp == 0]


def _offline(model, gpu, engine, isl, osl, layout, instances):
    probe = api.estimate(model, gpu, engine, isl=isl, osl=osl, layout=layout, instances=instances,
                         concurrency=float(instances))
    batch = max(1, probe.memory[0].max_batch_size)
    est = api.estimate(model, gpu, engine, isl=isl, osl=osl, layout=layout, instances=instances,
                       concurrency=float(instances * batch))
    return est.output_tok_per_s, est


def _meets(est, ttft_ms: float, tpot_ms: float) -> bool:
    return est.stable and est.ttft_ms.p99 <= ttft_ms and est.tpot_ms.p99 <= tpot_ms


def _server(model, gpu, engine, isl, osl, layout, instances, ttft_ms, tpot_ms, iterations: int = 12):
    """Highest Poisson rate up to which the p99 TTFT and TPOT limits hold; its output tokens/s.

    The rate grows geometrically from a trickle until the limits first fail, then bisects between
    the last rate that held and that one. The first failure ends the search: the model's open-loop
    latency is not monotonic in the rate everywhere (see the benchmark's docs entry), and a rate
    past a failing one is not a rate a Server run could sustain on the way up.
    """
    def at(rate):
        return api.estimate(model, gpu, engine, isl=isl, osl=osl, layout=layout, instances=instances, rate=rate)

    rate, passed, best = 0.25 * instances, 0.0, None
    while rate < 1e5:
        est = at(rate)
        if not _meets(est, ttft_ms, tpot_ms):
            break
        passed, best, rate = rate, est, rate * 1.25
    high = rate
    for _ in range(iterations if best is not None else 0):
        mid = 0.5 * (passed + high)
        est = at(mid)
        if _meets(est, ttft_ms, tpot_ms):
            passed, best = mid, est
        else:
            high = mid
    return passed * osl, best


def _profile(engine: str, gpu: str, no_eager_floor: bool):
    """The engine name, or (what-if) its profile without the eager per-layer launch floor."""
    if not no_eager_floor:
        return engine
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import resolve_engine
    from layoutopt.perf_model.stacked_tables import without_launch_floor

    return without_launch_floor(resolve_engine(engine, get_gpu(gpu)))


@lru_cache(maxsize=None)
def _predict(model: str, gpu: str, num_gpus: int, scenario: str, engine_name: str, weights: str, kv: str,
             isl: int, osl: int, no_eager_floor: bool = False) -> tuple[float, str, str, float]:
    best = (0.0, "none", "-", 0.0)
    engine = _profile(engine_name, gpu, no_eager_floor)
    for layout, instances in _layouts(num_gpus, weights, kv):
        try:
            if scenario == "Offline":
                value, est = _offline(model, gpu, engine, isl, osl, layout, instances)
            else:
                value, est = _server(model, gpu, engine, isl, osl, layout, instances, *LIMITS_MS[scenario])
        except InputError:
            continue  # the layout does not fit (memory) or the engine refuses it
        if est is not None and value > best[0]:
            bottleneck = "/".join(f"{k}:{v}" for k, v in sorted(est.bottleneck.items()))
            best = (value, f"{instances}x TP{layout.tp_size}", bottleneck, est.decode_batch_per_instance)
    return best


def predict(row: dict[str, str], input_tokens: int = DEFAULT_INPUT_TOKENS,
            no_eager_floor: bool = False) -> Prediction | None:
    """The model's output tokens/s for one published row; None when its benchmark is not modelled.

    ``no_eager_floor`` is a what-if: the profile without ``eager_layer_launch_us`` and
    ``eager_mla_layer_launch_us`` (the host launch
    floor of TensorRT-LLM steps that carry prompt tokens, fitted on the reference
    rows); MLPerf's NVIDIA harness runs prebuilt TensorRT engines (trtllm_build_flags in
    closed/NVIDIA/configs/*/llama2-70b.py), which that floor may not describe.
    """
    model = MODELS.get(row["benchmark"])
    if model is None:
        return None
    engine, notes = _engine(row)
    weights, kv, precision_notes = _precisions(row)
    osl = max(1, round(output_tokens_per_sample(row)))
    value, layout, bottleneck, batch = _predict(model, row["gpu"], int(row["num_gpus"]), row["scenario"], engine,
                                                weights, kv, input_tokens, osl, no_eager_floor)
    return Prediction(value, layout, engine, f"{weights}/kv {kv}", bottleneck, batch,
                      tuple(notes + precision_notes))


def _vendor(gpu: str) -> str:
    return "AMD" if gpu.startswith("MI") else "NVIDIA"


def _unique(rows):
    """One row per published result: NVIDIA-style submissions report the same run for 99 and 99.9."""
    seen, kept = set(), []
    for row in rows:
        key = (row["round"], row["submitter"], row["system"], row["benchmark"].split("-99")[0], row["scenario"],
               row["metric_value"])
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept


def _ratios(rows, input_tokens, no_eager_floor: bool = False):
    out = []
    for row in rows:
        pred = predict(row, input_tokens, no_eager_floor)
        if pred is not None and pred.predicted_tok_per_s > 0:
            out.append((row, pred, pred.predicted_tok_per_s / float(row["metric_value"])))
    return out


def _worst(ratios: list[float]) -> float:
    """The ratio farthest from 1 (in log terms)."""
    return max(ratios, key=lambda r: max(r, 1.0 / r))


def _median_by_generation(pairs) -> dict[str, float]:
    """Generation -> median ratio over (row, ratio) pairs."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row, ratio in pairs:
        groups[GENERATIONS[row["gpu"]]].append(ratio)
    return {gen: statistics.median(values) for gen, values in groups.items()}


def _relative_to_hopper(results, by_isl, input_tokens: int) -> str:
    """Each generation's median ratio over Hopper's at the same assumed input length.

    The unknown prompt length moves every ratio together; this quotient barely moves with it,
    so it is the figure that says how well the model carries from Hopper to other generations.
    """
    columns = {input_tokens: [(row, ratio) for row, _, ratio in results]}
    index = {id(row): row for row, _, _ in results}
    for n, ratios in by_isl.items():
        columns[n] = [(index[key], ratio) for key, ratio in ratios.items() if key in index]
    medians = {n: _median_by_generation(pairs) for n, pairs in sorted(columns.items())}
    lines = ["\nMedian ratio relative to Hopper's (robust to the assumed input length): "
             + "  ".join(f"@{n}" for n in medians)]
    for gen in sorted(next(iter(medians.values()))):
        if gen != "Hopper":
            lines.append(f"  {gen:9} " + "  ".join(
                f"{m[gen] / m['Hopper']:.2f}" if "Hopper" in m and gen in m else "-" for m in medians.values()))
    return "\n".join(lines)


def _paragraph(results) -> str:
    """The honest summary, written from this run's numbers (no sentence states a figure it did not compute)."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for row, pred, ratio in results:
        scenario = "Interactive" if row["scenario"] == "Interactive" else "Offline/Server"
        groups[(GENERATIONS[row["gpu"]], scenario)].append((pred, ratio))

    def med(gen: str, scenario: str) -> float | None:
        members = groups.get((gen, scenario))
        return statistics.median(r for _, r in members) if members else None

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    def side(value: float | None) -> str:
        return "n/a" if value is None else "over-predicted" if value > 1.1 else "under-predicted" if value < 0.9 \
            else "within 10 %"

    def regime(gen: str, scenario: str) -> str:
        members = groups.get((gen, scenario), [])
        if not members:
            return "n/a"
        decode = [p.bottleneck.split("/")[0].removeprefix("decode:") for p, _ in members]
        common = max(set(decode), key=decode.count)
        batch = statistics.median(p.decode_batch for p, _ in members)
        return f"decode {common}-bound at a median {batch:,.0f} sequences per instance"

    hopper, blackwell = med("Hopper", "Offline/Server"), med("Blackwell", "Offline/Server")
    interactive = med("Blackwell", "Interactive")
    parts = ["Summary."]
    if hopper is not None:
        parts.append(f"Hopper (TensorRT-LLM, FP8): median ratio {fmt(hopper)} in Offline/Server ({side(hopper)}; "
                     f"{regime('Hopper', 'Offline/Server')}) and {fmt(med('Hopper', 'Interactive'))} in Interactive,"
                     " at an assumed prompt length that moves every ratio together (the @128/@512 columns), so the "
                     "absolute level is only as good as that assumption; the relative figures are not.")
    if blackwell is not None:
        relative = "" if not hopper else f", {blackwell / hopper:.2f}x Hopper's ratio"
        parts.append(f"Blackwell FP4 Offline/Server: {fmt(blackwell)} ({side(blackwell)}{relative}; "
                     f"{regime('Blackwell', 'Offline/Server')})"
                     + (": the predicted decode step at the largest batch is still too short for FP4, with the "
                        "FP4 GEMM efficiency already the measured kernels' (data/generations.yaml gemm_series), "
                        "which the reference B200 rows' FP4/FP8 speed-ups do not ask to lower further"
                        "." if blackwell > 1.1 else "."))
    if interactive is not None:
        parts.append(f"Blackwell Interactive (p99 TPOT 40 ms): {fmt(interactive)} ({side(interactive)}; "
                     f"{regime('Blackwell', 'Interactive')})"
                     + (": with TensorRT-LLM's profile a step that carries prompt tokens lasts at least the "
                        "eager per-layer launch floor (eager_layer_launch_us, fitted on the reference TensorRT-LLM rows), "
                        "which binds here; --no-eager-floor shows the model without it." if interactive < 0.9
                        else "."))
    amd = [f"{gen} {fmt(med(gen, sc))} {sc}" for gen in ("CDNA3", "CDNA4")
           for sc in ("Offline/Server", "Interactive") if med(gen, sc) is not None]
    if amd:
        parts.append("AMD with vLLM: " + "; ".join(amd) + ".")
    parts.append("Nothing was fitted on these rows and no constant was tuned to them.")
    return " ".join(parts)

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="append", help="only these catalog GPUs (repeatable)")
    parser.add_argument("--round", action="append", help="only these rounds, e.g. v5.1 (repeatable)")
    parser.add_argument("--input-tokens", type=int, default=DEFAULT_INPUT_TOKENS,
                        help="mean prompt tokens assumed for the dataset (not published; see the doc)")
    parser.add_argument("--rows", action="store_true", help="print every row, not one per system and scenario")
    parser.add_argument("--no-eager-floor", action="store_true",
                        help="what-if: profiles without the eager per-layer launch floor (eager_layer_launch_us = 0)")
    args = parser.parse_args(argv)

    rows = [r for r in load_rows() if (not args.gpu or r["gpu"] in args.gpu)
            and (not args.round or r["round"] in args.round)]
    modelled = _unique([r for r in rows if r["benchmark"] in MODELS])
    left_out = defaultdict(int)
    for row in rows:
        if row["benchmark"] not in MODELS:
            left_out[row["benchmark"]] += 1
    results = _ratios(modelled, args.input_tokens, args.no_eager_floor)
    failed = len(modelled) - len(results)

    print(f"MLPerf Inference closed/datacenter vs layoutopt (held out: nothing fitted on these rows); "
          f"llama2-70b as llama-3.1-70b, {args.input_tokens} input tokens assumed, output tokens per row "
          f"from its log" + ("; WHAT-IF: eager_layer_launch_us = 0" if args.no_eager_floor else ""))
    header = (f"{'round':5} {'submitter':16} {'system':40} {'gpu':8} {'n':>3} {'scenario':11} {'prec':12} "
              f"{'engine':6} {'published':>10} {'predicted':>10} {'ratio':>6}  layout     bottleneck")
    print(header)
    print("-" * len(header))
    shown: dict[tuple[str, str], int] = defaultdict(int)
    for row, pred, ratio in sorted(results, key=lambda t: (GENERATIONS[t[0]["gpu"]], t[0]["gpu"],
                                                           t[0]["scenario"], t[0]["round"], t[0]["submitter"])):
        if not args.rows and row["submitter"] not in ("NVIDIA", "AMD"):
            shown[(row["gpu"], row["scenario"])] += 1
            if shown[(row["gpu"], row["scenario"])] > 3:
                continue
        print(f"{row['round']:5} {row['submitter'][:16]:16} {row['system'][:40]:40} {row['gpu']:8} "
              f"{row['num_gpus']:>3} {row['scenario']:11} {pred.precision:12} {pred.engine:6} "
              f"{float(row['metric_value']):>10,.0f} {pred.predicted_tok_per_s:>10,.0f} {ratio:>6.2f}  "
              f"{pred.layout:10} {pred.bottleneck}{'  [' + '; '.join(pred.notes) + ']' if pred.notes else ''}")
    if not args.rows:
        print("(NVIDIA's and AMD's own rows and up to three others per GPU and scenario; --rows prints all)")

    print("\nSummary: ratio = predicted / published (1.00 = exact; > 1 over-predicts); the median also at other "
          "assumed input lengths, since the dataset's mean prompt length is not published")
    others = [n for n in SENSITIVITY_INPUT_TOKENS if n != args.input_tokens]
    by_isl = {n: {id(row): ratio for row, _, ratio in _ratios(modelled, n, args.no_eager_floor)} for n in others}
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row, _, ratio in results:
        for label in (f"{GENERATIONS[row['gpu']]:9} {row['gpu']:8} {row['scenario']}",
                      f"{GENERATIONS[row['gpu']]:9} all      all"):
            groups[(_vendor(row["gpu"]), label)].append(row)
        groups[("all", "")].append(row)
    ratio_of = {id(row): ratio for row, _, ratio in results}
    print(f"{'vendor':7} {'generation gpu scenario':34} {'rows':>4} {'median':>7} {'worst':>6}  "
          + "  ".join(f"{'@' + str(n):>6}" for n in others))
    for (vendor, label), members in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        ratios = [ratio_of[id(r)] for r in members]
        moved = ["  ".join(f"{statistics.median([by_isl[n][id(r)] for r in members if id(r) in by_isl[n]]):>6.2f}"
                           for n in others)]
        print(f"{vendor:7} {label:34} {len(ratios):>4} {statistics.median(ratios):>7.2f} {_worst(ratios):>6.2f}  "
              + moved[0])
    print(_relative_to_hopper(results, by_isl, args.input_tokens))
    print("\n" + _paragraph(results))
    if failed:
        print(f"{failed} modelled rows got no prediction (no layout fits or meets the limits)")
    if left_out:
        print("not predicted (other datasets, whose prompt and output lengths the benchmark does not model; "
              "their mean input lengths are not published in mlcommons/inference either): "
              + ", ".join(f"{k} {v} rows" for k, v in sorted(left_out.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
