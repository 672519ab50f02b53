"""Measurement rows (the CSV format of ``reference/measurements``) parsed into replayable cases.

Rows of ``h100_sxm.csv`` and ``b200_sxm.csv`` (closed-loop benchmarks of vLLM, SGLang and
TensorRT-LLM, fixed input and output lengths) become :class:`MeasuredCase` objects: the GPU from
the ``system`` column, the served precision from ``gemm_quant_mode``, the layout of the one
colocated worker or of the prefill and decode workers. Every row that cannot become a case is
returned as a :class:`LeftOut` with the reason, never dropped silently.

A disaggregated row with blank worker counts takes the layout of a fully described copy of the
same run when the file has one, else it replays a guessed one prefill and one decode worker and
says so (``worker_counts_assumed``); fits leave those out.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from layoutopt.errors import InputError, LayoutoptError
from layoutopt.model_catalog import get_model
from layoutopt.model_catalog.spec import FOUR_BIT_PRECISIONS
from layoutopt.perf_model.reference_protocol import (
    TRTLLM_BATCHING_WAIT_ITERS, benchmark_token_budget, reference_attention_dp_balance, reference_batch_wait,
    reference_range_ratio, reference_recv_interval, reference_trtllm_max_num_tokens,
    reference_vllm_graphed_prompt_tokens)
from layoutopt.perf_model.reference_kv import KV_CACHE_DTYPES, reference_kv_precision
from layoutopt.plan import Layout

# ``system`` column -> catalog GPU name.
SYSTEMS: dict[str, str] = {"h100_sxm": "H100-SXM", "b200_sxm": "B200", "h200_sxm": "H200-SXM",
                           "b300_sxm": "B300", "gb200": "GB200", "gb300": "GB300", "a100_sxm": "A100-80GB-SXM",
                           "mi300x": "MI300X", "mi325x": "MI325X", "mi355x": "MI355X"}
# ``gemm_quant_mode`` (else ``precision``) -> the weight/compute precision layoutopt serves.
QUANT_MODES: dict[str, str] = {"": "bf16", "bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp8_block": "fp8",
                               "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "mxfp4", "int4_wo": "int4",
                               "w4a16": "int4", "int4": "int4"}


class LeftOut(NamedTuple):
    """A row that is not replayed, and why."""

    row_id: str
    engine: str
    mode: str
    reason: str
    gpu: str = ""


@dataclass(frozen=True)
class MeasuredCase:
    """One measurement row, parsed into what :func:`~layoutopt.perf_model.estimate.estimate` takes."""

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
    gpu: str = "H100-SXM"
    # Tokens per scheduler step of one attention-DP rank the run's launch configured, where the
    # row or the caller says how it was launched (a step_token_budget column, benchmark_token_budget
    # for AIConfigurator launches); None: the engine's default.
    step_token_budget: int | None = None
    # TensorRT-LLM attention-DP balancing the run's launch set (attention_dp_config): timeout_iters, None
    # when off (the engine's default), and batching_wait_iters (reference_attention_dp_balance).
    attention_dp_balance_timeout_iters: int | None = None
    attention_dp_batching_wait_iters: int = TRTLLM_BATCHING_WAIT_ITERS
    # TensorRT-LLM batch waiting the run's launch set (batch_wait_timeout_iters, batch_wait_max_tokens_ratio
    # columns; 0 and 0.0: off, the engine's default).
    batch_wait_timeout_iters: int = 0
    batch_wait_max_tokens_ratio: float = 0.0
    # The client drew each request's lengths uniformly on int(isl x r) .. isl and int(osl x r) .. osl
    # (a random_range_ratio column, else reference_protocol.reference_range_ratio); 1.0: fixed lengths.
    length_range_ratio: float = 1.0
    # SGLang's --scheduler-recv-interval the run's launch set (a scheduler_recv_interval column, else
    # reference_protocol.reference_recv_interval); 1: the scheduler polls every iteration.
    scheduler_recv_interval: int = 1
    # vLLM: the largest step carrying prompt tokens the run's launch replayed from a CUDA graph (a
    # graphed_prompt_tokens column, else reference_protocol.reference_vllm_graphed_prompt_tokens); None: the
    # profile's (the engine's default launch).
    graphed_prompt_tokens: int | None = None


_REQUIRED = ("id", "backend", "model", "mode", "isl", "osl", "ttft_ms", "tpot_ms")

# Engine images whose published runs all decoded speculatively (MTP), which the model does not
# price: a step then emits several tokens per sequence, so TPOT and the batch a step carries are not
# those of the plain decode it replays. InferenceX served TensorRT-LLM 1.2.0rc6.post3 only under its
# dsr1-fp4-b200-trt-mtp and dsr1-fp8-b200-trt-mtp keys, with ``spec-decoding: mtp`` in every search
# space (SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml:1704-1705, 1962-1963 at
# d373d5f8, and every version of the file from 2026-01 to 2026-04): the reference B200 file's 88
# DeepSeek-R1 rows with that image (InferenceX PRs 632 and 642). Spelled as the CSV writes it, with
# '#' or '/' after the registry.
SPECULATIVE_DECODING_IMAGES = frozenset({"nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3"})

def _kv_precision(row: dict, engine: str, mode: str, gpu: str, precision: str, reference_launch: bool) -> str:
    """A row's KV cache precision: its ``kv_cache_dtype`` column when set, else the reference launches'
    (:func:`reference_kv_precision`) when ``reference_launch``, else BF16."""
    written = (row.get("kv_cache_dtype") or "").strip().lower()
    if written:
        if written not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype {written!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
        return KV_CACHE_DTYPES[written]
    if not reference_launch:
        return "bf16"
    return reference_kv_precision(engine, mode, gpu, row["model"], precision, (row.get("measured_date") or "").strip())


def _speculative_image(row: dict) -> bool:
    return (row.get("engine_image") or "").strip().replace("#", "/", 1) in SPECULATIVE_DECODING_IMAGES


def _num(value: str | None) -> float | None:
    value = (value or "").strip()
    return float(value) if value else None


def _degree(row: dict, key: str, default: int = 1) -> int:
    value = _num(row.get(key, ""))
    return int(value) if value and value >= 1 else default


def _is_power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def ep_folded_degrees(tp: int, dp: int, moe_tp: int, ep: int, domain_gpus: int) -> tuple[int, int]:
    """(tp, attention_dp) of a row whose columns write them multiplied by the EP degree.

    Part of the B200 export (ids ``2026_04_06_*``, ``dsr1_b200_*``, ``qwen3_5_b200_*``) writes an
    expert-parallel worker of G GPUs as tp (or attention_dp) G x G with moe_tp = moe_ep = G: the
    id ``..._tp8_ep8_1016`` carries tp 64, moe_tp 8, moe_ep 8, and every one of the 54 such rows
    whose latencies another row of the file repeats exactly (one run published twice) repeats a
    row of G GPUs: tp 8 (or attention_dp 8), moe_tp 1, moe_ep 8. Read as written, those are TP64
    or DP64 workers over eight nodes. Such rows, when G x G GPUs exceed the GPU's scale-up domain
    (``domain_gpus``, 8 on HGX), get tp / G and attention_dp / G (moe_tp then 1); every other row
    keeps its columns (a TP4 worker with MoE TP2 x EP2, as H100 rows write, is one).
    """
    if ep > 1 and moe_tp == ep and tp * dp == ep * ep > domain_gpus and min(tp, dp) == 1:
        return max(tp // ep, 1), max(dp // ep, 1)
    return tp, dp


def vllm_ep_folded_degrees(tp: int, dp: int, moe_tp: int, ep: int) -> tuple[int, int, int]:
    """(tp, attention_dp, ep) of a vLLM row whose columns write a TP G, EP G worker over G x G GPUs.

    Every vLLM row of both CSVs with attention DP is written so: tp G x attention_dp G, moe_tp 1,
    moe_ep G x G (B200 Kimi-K2.5 and MiniMax-M2.5, H100 MiniMax-M2.5: 64 B200 and 15 H100 rows;
    the ids of their twins, the same runs published again, end ``_tpG_epG_N``). AIConfigurator
    0.12.0's InferenceX adapter derives a vLLM worker's attention DP as its GPUs / TP and its EP as
    TP x DP (sdk/config_adapter/inferencex.py:139-143,158-159). The runs are InferenceX's single-node
    scripts, which start ``vllm serve --tensor-parallel-size=$TP`` with ``--enable-expert-parallel``
    when EP > 1 and no ``--data-parallel-size`` (benchmarks/single_node/minimaxm2.5_fp8_b200.sh and
    minimaxm2.5_fp8_h100.sh, SemiAnalysisAI/InferenceX March-April 2026), and vLLM's EP then spans
    the TP group, ep = tp x dp = TP (vllm 0.13.0 model_executor/layers/fused_moe/config.py:919-962).
    So such a row is one TP G worker with EP G on G GPUs: tp G, attention_dp 1, ep G. (The Kimi-K2.5
    NVFP4 script of 2026-03-27, kimik2.5_fp4_b200.sh, passes no EP flag at all, so its MoE ran TP4;
    the row's declared EP 4 is kept.) Other rows keep their columns.
    """
    if tp > 1 and dp == tp and moe_tp == 1 and ep == tp * dp:
        return tp, 1, tp
    return tp, dp, ep


def _layout(row: dict, prefix: str, precision: str, is_moe: bool, domain_gpus: int, engine: str = "",
            kv_precision: str = "bf16") -> Layout:
    tp, pp = _degree(row, f"{prefix}tp"), _degree(row, f"{prefix}pp")
    if not _is_power_of_two(tp):
        # A world size in the source, not a TP split (measurements README).
        raise ValueError(f"tp {tp} is not a power of two")
    dp = _degree(row, f"{prefix}attention_dp") if is_moe else 1
    ep = _degree(row, f"{prefix}moe_ep") if is_moe else 1
    if is_moe:
        moe_tp = _degree(row, f"{prefix}moe_tp")
        tp, dp = ep_folded_degrees(tp, dp, moe_tp, ep, domain_gpus)
        if engine == "vllm":
            tp, dp, ep = vllm_ep_folded_degrees(tp, dp, moe_tp, ep)
    return Layout(tp_size=tp, pp_size=pp, dp_size=dp, ep_size=ep, weight_precision=precision,
                  kv_precision=kv_precision)


_DISAGG_LAYOUT_COLUMNS = tuple(f"{side}_{name}" for side in ("prefill", "decode")
                               for name in ("workers", "tp", "pp", "attention_dp", "moe_tp", "moe_ep", "batch"))


def _measurement_key(row: dict) -> tuple:
    """What identifies one measurement: engine, lengths, concurrency and the two measured latencies."""
    return (row.get("system"), row["backend"], row["mode"], row["isl"], row["osl"], row.get("concurrency"),
            row["ttft_ms"], row["tpot_ms"])


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


def served_precision(row: dict) -> str | None:
    """The precision layoutopt serves a row at, or None when it has no equivalent."""
    quant = (row.get("gemm_quant_mode") or "").strip().lower()
    if quant in QUANT_MODES:
        return QUANT_MODES[quant]
    if quant:
        return None
    return QUANT_MODES.get((row.get("precision") or "").strip().lower())


def _gpu_name(row: dict, default_gpu: str | None) -> str | None:
    from layoutopt.hardware_catalog.catalog import get_gpu

    system = (row.get("system") or "").strip().lower()
    name = SYSTEMS.get(system) or system or default_gpu
    if not name:
        return None
    try:
        return get_gpu(name).name
    except LayoutoptError:
        return None


def _check_columns(path: Path, fieldnames: list[str] | None) -> None:
    missing = [c for c in _REQUIRED if c not in (fieldnames or [])]
    if missing:
        raise InputError(f"{path.name} columns", ", ".join(missing) + " missing",
                         "a measurement CSV needs the columns " + ", ".join(_REQUIRED)
                         + " (see reference/measurements/README.md)")


def load_cases(csv_path: str | Path, default_gpu: str | None = None,
               aiconfigurator_launch: bool = True) -> tuple[list[MeasuredCase], list[LeftOut]]:
    """(cases, rows left out with their reasons) of one measurement CSV.

    The GPU of a row is its ``system`` column (``h100_sxm``, ``b200_sxm`` or a catalog name);
    ``default_gpu`` names it for files without that column. A row's step token budget
    (``MeasuredCase.step_token_budget``) is its optional ``step_token_budget`` column; without one,
    ``aiconfigurator_launch`` says the run was launched by AIConfigurator's generator, as the
    reference rows were (:func:`benchmark_token_budget`), else the engine's default budget. Likewise
    TensorRT-LLM's attention-DP balancing: the ``attention_dp_balance_timeout_iters`` and
    ``attention_dp_batching_wait_iters`` columns, else, with ``aiconfigurator_launch``, the reference
    rows' launch scripts' setting (:func:`reference_attention_dp_balance`), else off. And the KV cache
    precision of every layout: the ``kv_cache_dtype`` column (``fp8``, ``fp8_e4m3``, ``auto``, ``bf16``...),
    else, with ``aiconfigurator_launch``, the reference launch scripts' (:func:`reference_kv_precision`),
    else BF16.
    """
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model

    path = Path(csv_path)
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        _check_columns(path, reader.fieldnames)
        rows = list(reader)
    described = {_measurement_key(r): r for r in rows if r["mode"] == "disagg" and _has_worker_counts(r)}
    cases: list[MeasuredCase] = []
    left_out: list[LeftOut] = []
    for row in rows:
        row, assumed = _with_described_twin(row, described)
        rid, engine, mode = row["id"], row["backend"], row["mode"]
        gpu = _gpu_name(row, default_gpu)

        def leave(reason: str) -> None:
            left_out.append(LeftOut(rid, engine, mode, reason, gpu or row.get("system", "")))

        if gpu is None:
            leave(f"GPU {row.get('system')!r} not in catalog")
            continue
        if mode not in ("agg", "disagg"):
            leave(f"mode {mode!r}")
            continue
        if _speculative_image(row):
            leave("speculative decoding (MTP) run: not modelled")
            continue
        try:
            model = get_model(row["model"])
        except LayoutoptError:
            leave("model not in catalog")
            continue
        precision = served_precision(row)
        if precision is None:
            leave(f"precision {(row.get('gemm_quant_mode') or '').strip()!r}")
            continue
        if (precision in ("fp4", "mxfp4") and model.expert_native_precision in FOUR_BIT_PRECISIONS
                and not get_gpu(gpu).supports(precision)):
            # A 4-bit-expert checkpoint (gpt-oss MXFP4) on a GPU without FP4 math (H100): the
            # experts stay 4-bit in memory (the spec keeps native expert bytes), the rest is BF16.
            precision = "bf16"
        domain_gpus = get_gpu(gpu).local_domain_gpus
        try:
            kv = _kv_precision(row, engine, mode, gpu, precision, aiconfigurator_launch)
            if mode == "agg":
                layout, prefill, decode = _layout(row, "", precision, model.is_moe, domain_gpus, engine, kv), None, None
                p_count = d_count = 1
                batch = None
            else:
                layout = None
                prefill = _layout(row, "prefill_", precision, model.is_moe, domain_gpus, engine, kv)
                decode = _layout(row, "decode_", precision, model.is_moe, domain_gpus, engine, kv)
                p_count, d_count = _degree(row, "prefill_workers"), _degree(row, "decode_workers")
                batch = _degree(row, "decode_batch", 0) or None
                if batch is not None:
                    # ``decode_batch`` is per attention-DP rank: concurrency = batch x attention_dp x
                    # workers in all 23 B200 rows with attention DP (and all 34 without).
                    batch *= decode.dp_size
        except ValueError as error:
            leave(f"layout rule: {str(error).splitlines()[-1][:60]}")
            continue
        concurrency = _num(row.get("concurrency"))
        if concurrency is None and batch is not None:
            # No client concurrency recorded: the run filled every decode slot [assumption].
            concurrency = float(batch * d_count)
        if concurrency is None:
            leave("no concurrency")
            continue
        ttft, tpot = _num(row["ttft_ms"]), _num(row["tpot_ms"])
        if not ttft or not tpot or ttft <= 0 or tpot <= 0:
            leave("no measured TTFT/TPOT")
            continue
        isl, osl = int(float(row["isl"])), int(float(row["osl"]))
        date = (row.get("measured_date") or "").strip()
        reference = aiconfigurator_launch
        cases.append(MeasuredCase(rid, engine, mode, row["model"], isl, osl,
                                  concurrency, layout, prefill, p_count, decode, d_count, batch, ttft, tpot,
                                  assumed, gpu, _step_budget(row, engine, gpu, mode, isl, concurrency, date, layout,
                                                             prefill, reference),
                                  *_attention_dp_balance(row, engine, mode, layout, reference),
                                  *_batch_wait(row, engine, gpu, mode, isl, osl, layout, reference),
                                  _range_ratio(row, reference),
                                  _recv_interval(row, engine, mode, gpu, precision, date, layout, concurrency, reference),
                                  _graphed_prompt_tokens(row, engine, mode, gpu, concurrency, date, reference)))
    return cases, left_out


# A row's launch settings, each from its own column when it has one, else (``reference_launch``) from
# how the reference runs were launched (reference_protocol), else the engine's default.


def _step_budget(row: dict, engine: str, gpu: str, mode: str, isl: int, concurrency: float, date: str,
                 layout: Layout | None, prefill: Layout | None, reference_launch: bool) -> int | None:
    """Tokens per scheduler step of one attention-DP rank: the ``step_token_budget`` column, else the
    reference launches' (InferenceX's TensorRT-LLM B200 scripts, :func:`reference_trtllm_max_num_tokens`;
    AIConfigurator's rule, :func:`benchmark_token_budget`), else None (the engine's default)."""
    written = _degree(row, "step_token_budget", 0) or None
    if written is not None or not reference_launch:
        return written
    if engine == "trtllm":
        found = reference_trtllm_max_num_tokens(gpu, mode, row["model"], isl, concurrency, date)
        if found is not None:
            return found
    return benchmark_token_budget(engine, isl, concurrency, layout, prefill)


def _graphed_prompt_tokens(row: dict, engine: str, mode: str, gpu: str, concurrency: float, date: str,
                           reference_launch: bool) -> int | None:
    """The largest prompt-carrying step a row's launch graphed: its ``graphed_prompt_tokens`` column, else
    the reference launches' (:func:`reference_vllm_graphed_prompt_tokens`) when ``reference_launch``, else
    None (the engine profile's)."""
    written = _num(row.get("graphed_prompt_tokens"))
    if written is not None:
        return max(int(written), 0)
    if not reference_launch:
        return None
    return reference_vllm_graphed_prompt_tokens(engine, mode, gpu, row["model"], concurrency, date)


def _range_ratio(row: dict, reference_launch: bool) -> float:
    """The client's random range ratio of a row: its ``random_range_ratio`` column (0 < r <= 1), else the
    reference runs' (:func:`~layoutopt.perf_model.reference_protocol.reference_range_ratio`) when
    ``reference_launch``, else 1.0 (fixed lengths)."""
    written = _num(row.get("random_range_ratio"))
    if written is not None:
        return min(max(written, 0.0), 1.0)
    return reference_range_ratio(row) if reference_launch else 1.0


def _recv_interval(row: dict, engine: str, mode: str, gpu: str, precision: str, date: str, layout: Layout | None,
                   concurrency: float, reference_launch: bool) -> int:
    """SGLang's --scheduler-recv-interval of a row: its ``scheduler_recv_interval`` column, else the
    reference launches' (:func:`~layoutopt.perf_model.reference_protocol.reference_recv_interval`) when
    ``reference_launch``, else 1."""
    written = _num(row.get("scheduler_recv_interval"))
    if written is not None:
        return max(int(written), 1)
    if not reference_launch:
        return 1
    tp = layout.tp_size if layout is not None else 1
    return reference_recv_interval(engine, mode, gpu, row["model"], precision, date, tp, concurrency)


def _batch_wait(row: dict, engine: str, gpu: str, mode: str, isl: int, osl: int, layout: Layout | None,
                reference_launch: bool) -> tuple[int, float]:
    """(batch_wait_timeout_iters, batch_wait_max_tokens_ratio) of a row: its columns of those names (a
    TensorRT-LLM launch's batch waiting, :func:`~layoutopt.perf_model.closed_loop.batch_wait_steps`), else
    the reference launches' (:func:`reference_batch_wait`) when ``reference_launch``, else off."""
    written = _num(row.get("batch_wait_timeout_iters"))
    if written is None:
        return reference_batch_wait(engine, gpu, mode, row["model"], isl, osl, layout) if reference_launch else (0, 0.0)
    ratio = _num(row.get("batch_wait_max_tokens_ratio"))
    return max(int(written), 0), min(max(ratio or 0.0, 0.0), 1.0)


def _attention_dp_balance(row: dict, engine: str, mode: str, layout: Layout | None,
                          reference_launch: bool) -> tuple[int | None, int]:
    """(timeout_iters or None, batching_wait_iters) of a row: its ``attention_dp_balance_timeout_iters`` and
    ``attention_dp_batching_wait_iters`` columns when it has them, else the reference launches' setting
    (:func:`reference_attention_dp_balance`) when ``reference_launch``, else balancing off."""
    written = _num(row.get("attention_dp_balance_timeout_iters"))
    if written is not None:
        wait = _num(row.get("attention_dp_batching_wait_iters"))
        return max(int(written), 0), TRTLLM_BATCHING_WAIT_ITERS if wait is None else max(int(wait), 0)
    found = reference_attention_dp_balance(engine, mode, row["model"], layout) if reference_launch else None
    return (None, TRTLLM_BATCHING_WAIT_ITERS) if found is None else found


def measurement_key(case: MeasuredCase) -> tuple:
    """What tells one measured run from another, besides its two latencies (:func:`same_latencies`):
    GPU, engine, mode, the model's architecture, lengths and concurrency. The model counts by its
    architecture, not its name: the reference B200 file lists 204 runs twice, once as DeepSeek-R1
    (``2026_0*_deepseek_r1_*``) and once as DeepSeek-V3 (``dsr1_b200_*``), with one layout and the same
    TTFT and TPOT to every digit; the two share config.json's shape (reference/hf_configs), so they are
    one run, not two. A model outside the catalog counts by its id."""
    return (case.gpu, case.engine, case.mode, _architecture(case.model_id), case.isl, case.osl, case.concurrency)


# Half a unit of the coarsest rounding a listing of one run takes in the reference files: the
# ``*_gap_analysis_*`` rows of b200_sxm.csv give to 0.01 ms (163.730, 7.4200) the TTFT and TPOT their
# twins print to 0.001 / 0.0001 ms (``2026_04_06_*``: 163.725, 7.4233), 92 listings in all (Kimi-K2.5 on
# vLLM, Qwen3.5-397B on SGLang). Two distinct runs agreeing on both latencies this closely does not happen.
LATENCY_ROUNDING_MS = 0.005


def same_latencies(a: MeasuredCase, b: MeasuredCase) -> bool:
    """Whether two listings report one run's TTFT and TPOT (equal up to :data:`LATENCY_ROUNDING_MS`)."""
    tolerance = LATENCY_ROUNDING_MS * (1.0 + 1e-9)
    return abs(a.ttft_ms - b.ttft_ms) <= tolerance and abs(a.tpot_ms - b.tpot_ms) <= tolerance


@lru_cache(maxsize=None)
def _architecture(model_id: str) -> str:
    try:
        spec = get_model(model_id)
    except LayoutoptError:
        return model_id
    return repr(spec.model_copy(update={"name": "", "hf_id": "", "source": ""}))


def split_repeats(cases: list[MeasuredCase]) -> tuple[list[MeasuredCase], list[MeasuredCase]]:
    """(each measurement's first listing, the later listings of one already seen), in input order:
    the CSVs repeat some runs under several ids or model names, some rounded coarser
    (:func:`measurement_key`, :func:`same_latencies`)."""
    seen: dict[tuple, list[MeasuredCase]] = {}
    first, repeats = [], []
    for case in cases:
        listed = seen.setdefault(measurement_key(case), [])
        if any(same_latencies(case, other) for other in listed):
            repeats.append(case)
        else:
            first.append(case)
            listed.append(case)
    return first, repeats


def fit_cases(cases: list[MeasuredCase]) -> list[MeasuredCase]:
    """The cases a fit learns from: each measurement once (:func:`split_repeats`), and no row whose
    worker counts are guessed (its error says nothing about the constants)."""
    return [case for case in split_repeats(cases)[0] if not case.worker_counts_assumed]
