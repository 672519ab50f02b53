"""How the reference measurements were driven: the request lengths their client sent, how often SGLang's
scheduler took new requests, and the launch settings of their TensorRT-LLM runs (attention-DP balancing;
InferenceX's B200 step budgets and batch waiting, :func:`reference_trtllm_max_num_tokens`,
:func:`reference_batch_wait`) and of AIConfigurator's own (its step token budget rule,
:func:`benchmark_token_budget`).

A row's ``isl`` and ``osl`` are what the run asked for, not what every request had. InferenceX's
single-node runs (the aggregated B200 rows, and H100's dated vLLM rows) draw each request's input and
output length uniformly from ``int(L * r)`` to ``L``: its client's ``sample_uniform``
(SemiAnalysisAI/InferenceX ``utils/bench_serving/benchmark_serving.py:112-116`` at 1cb92d21d, ported at
d053ae24e, 2026-01-21, from kimbochen/bench_serving, which the 2025 scripts cloned) with
``--random-range-ratio $RANDOM_RANGE_RATIO``, 0.8 in every sweep (``.github/workflows/full-sweep-tmpl.yml``
at ac1998a50, 2025-10-25; ``benchmark-tmpl.yml:53-56``'s default from 17d5e204f, 2025-11-03, on). So a 1k/1k row's requests
average 922 tokens in and out, not 1,024, and they finish at different steps. The other rows
(AIConfigurator's own collection, Dynamo's disaggregated recipes, whose client settings are not stored)
keep fixed lengths; a CSV's ``random_range_ratio`` column overrides.

InferenceX's SGLang B200 launches of DeepSeek-R1/V3 and Qwen3.5-397B pass ``--scheduler-recv-interval``
(:data:`INFERENCEX_SGLANG_RECV_INTERVAL`): the scheduler then takes new requests every 10 decode
iterations, 30 from 16 clients on (:func:`~layoutopt.perf_model.closed_loop.recv_wait_s`). A CSV's
``scheduler_recv_interval`` column overrides.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from layoutopt.plan import Layout
from layoutopt.workloads.distributions import FixedLength, HistogramLength

# --random-range-ratio of InferenceX's sweeps (module doc).
INFERENCEX_RANGE_RATIO = 0.8
# Engine images of Dynamo's recipes and AIConfigurator's own collection (its "image" is a results file).
_NOT_INFERENCEX_IMAGE_MARKS = ("ai-dynamo", ".csv")
# Points of the uniform length distribution the replay passes to the model (evenly spaced: the draw's mean).
_LENGTH_POINTS = 41


def reference_range_ratio(row: dict) -> float:
    """The client's random range ratio of a reference row (1.0: every request at the row's lengths).

    InferenceX single-node runs: aggregated rows with a measured date and a container image that is not a
    Dynamo runtime or an AIConfigurator results file, and the ``*_gap_analysis_*`` listings of such runs.
    """
    if row.get("mode") != "agg":
        return 1.0
    image = (row.get("engine_image") or "").strip()
    if any(mark in image for mark in _NOT_INFERENCEX_IMAGE_MARKS):
        return 1.0
    if (row.get("measured_date") or "").strip() or "gap_analysis" in row.get("id", ""):
        return INFERENCEX_RANGE_RATIO
    return 1.0


def request_lengths(tokens: int, range_ratio: float) -> FixedLength | HistogramLength:
    """Lengths uniform on ``int(tokens * range_ratio)`` .. ``tokens`` (the client's draw), fixed at 1.0."""
    low = int(tokens * range_ratio)
    if range_ratio >= 1.0 or low >= tokens:
        return FixedLength(tokens=tokens)
    points = np.unique(np.linspace(max(low, 1), tokens, _LENGTH_POINTS).round().astype(int))
    return HistogramLength(tokens=tuple(int(t) for t in points), weights=(1.0,) * len(points))


class RecvIntervalLaunch(NamedTuple):
    """One InferenceX SGLang launch script's ``--scheduler-recv-interval``: ``high`` for CONC >= 16, ``low``
    below, for aggregated rows of ``models`` at one of ``precisions`` on ``gpu`` measured on or after
    ``since`` (ISO date; "": every version before the reference rows' first date, 2025-10-29); at TP
    ``fixed_tp`` from ``fixed_since`` on, ``low`` whatever the concurrency. ``source``: script, lines, commit."""

    gpu: str
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    since: str
    low: int
    high: int
    source: str
    fixed_tp: int = 0
    fixed_since: str = ""


_DSR1 = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")
_QWEN35 = ("Qwen/Qwen3.5-397B-A17B",)
_IX = "SemiAnalysisAI/InferenceX benchmarks/"
# SCHEDULER_RECV_INTERVAL=30 if CONC >= 16 else 10, passed as --scheduler-recv-interval, in every version of
# these scripts from the one named on (read through 2026-04-25). Other SGLang scripts (GLM-5 FP8, the
# H100 ones) and AIConfigurator's own SGLang runs poll every iteration.
INFERENCEX_SGLANG_RECV_INTERVAL: tuple[RecvIntervalLaunch, ...] = (
    RecvIntervalLaunch("B200", _DSR1, ("fp4",), "", 10, 30,
                       _IX + "dsr1_fp4_b200_docker.sh:9-14,24 at 4b860b78e (2025-10-01) and d8fe8f73e; dsr1_fp4_b200.sh:31-35 "
                       "at b0c4ed21b; single_node/dsr1_fp4_b200.sh:26-31,42 at 1cb92d21d"),
    RecvIntervalLaunch("B200", _DSR1, ("fp8",), "", 10, 30,
                       _IX + "dsr1_fp8_b200_docker.sh:21-26,36 from 6be2c6997 (2025-09-23); from 1d29967c4 (2026-01-13) "
                       "30/10 at TP 8 and 10 at TP 4 (:28-59; single_node/dsr1_fp8_b200.sh:28-59 at 1cb92d21d)",
                       fixed_tp=4, fixed_since="2026-01-13"),
    RecvIntervalLaunch("B200", _QWEN35, ("bf16",), "2026-02-19", 10, 30,
                       _IX + "single_node/qwen3.5_bf16_b200.sh:31-36,57 from 9dc87a68c (2026-02-19; none in "
                       "qwen3.5_bf16_b200.sh at 521d19951, 2026-02-16)"),
    RecvIntervalLaunch("B200", _QWEN35, ("fp8",), "", 10, 30,
                       _IX + "single_node/qwen3.5_fp8_b200.sh:31-36,57 at efd49e50b (2026-03-03, its first version), "
                       ":70 at 626932a11"),
    RecvIntervalLaunch("B200", _QWEN35, ("fp4",), "", 10, 30,
                       _IX + "single_node/qwen3.5_fp4_b200.sh:32-35,71 at 48d35c480 (2026-04-08, its first version)"),
)


def reference_recv_interval(engine: str, mode: str, gpu: str, model_id: str, precision: str, date: str,
                            tp: int, concurrency: float) -> int:
    """``--scheduler-recv-interval`` of a reference row's launch (:data:`INFERENCEX_SGLANG_RECV_INTERVAL`),
    1 for rows of other launches. A blank ``date`` matches only entries whose ``since`` is blank."""
    if engine != "sglang" or mode != "agg":
        return 1
    for launch in INFERENCEX_SGLANG_RECV_INTERVAL:
        if (launch.gpu != gpu or model_id not in launch.models or precision not in launch.precisions
                or (launch.since and (not date or date < launch.since))):
            continue
        if launch.fixed_tp and tp == launch.fixed_tp and date and date >= launch.fixed_since:
            return launch.low
        return launch.high if concurrency >= 16 else launch.low
    return 1


# TensorRT-LLM's AttentionDpConfig.batching_wait_iters default (llmapi/llm_args.py).
TRTLLM_BATCHING_WAIT_ITERS = 10

# attention_dp_config (timeout_iters, batching_wait_iters) of InferenceX's TensorRT-LLM single-node launch
# scripts, which wrote ``enable_balance: true`` whenever DP_ATTENTION was true, by the checkpoint they
# serve (one script per model family): dsr1_fp4_b200_trt.sh:81-84 and dsr1_fp8_b200_trt.sh:51-54 set
# timeout_iters 60 and batching_wait_iters 0; gptoss_fp4_b200_trt.sh:66-67 sets enable_balance alone, so
# TensorRT-LLM's defaults 50 and 10 hold (llmapi/llm_args.py AttentionDpConfig). SemiAnalysisAI/InferenceX
# benchmarks/ at b0c4ed21b (2026-01-22); the same since the scripts' first versions (ec90f3fe7 2025-09-18,
# 28e5a01ea 2025-09-19) and after (6eecc0e66, single_node/ 8d81e0bf4), so over every reference row's date.
INFERENCEX_TRTLLM_ATTENTION_DP_BALANCE: dict[str, tuple[int, int]] = {
    "deepseek-ai/DeepSeek-R1": (60, 0), "deepseek-ai/DeepSeek-V3": (60, 0),
    "openai/gpt-oss-120b": (50, TRTLLM_BATCHING_WAIT_ITERS)}


def reference_attention_dp_balance(engine: str, mode: str, model_id: str, layout: Layout | None
                                   ) -> tuple[int, int] | None:
    """(timeout_iters, batching_wait_iters) of TensorRT-LLM's attention-DP balancing in a reference row's
    launch (:data:`INFERENCEX_TRTLLM_ATTENTION_DP_BALANCE`), None where it was off or is not known: rows
    of other engines, disaggregated rows (other launch recipes) and workers without attention DP."""
    if engine != "trtllm" or mode != "agg" or layout is None or layout.dp_size <= 1:
        return None
    return INFERENCEX_TRTLLM_ATTENTION_DP_BALANCE.get(model_id)


# max_num_tokens of InferenceX's TensorRT-LLM single-node B200 launches, which the aggregated B200 reference
# rows ran (not AIConfigurator's generator rule, benchmark_token_budget): Llama-3.1-70B --max_num_tokens 16384
# (70b_fp8_b200_trt_slurm.sh:53 and 70b_fp4_b200_trt_slurm.sh:53 at 9596d23d7, 2025-10-29, the rows' date),
# gpt-oss-120b MAX_NUM_TOKENS=20000 (gptoss_fp4_b200_trt_slurm.sh:75 at ac1998a50, 2025-10-20, the same in
# every version through b0c4ed21b, 2026-01-22, and single_node/gptoss_fp4_b200_trt.sh), DeepSeek-R1/V3
# MAX_NUM_TOKENS = ceil64(CONC + ISL + 64) (dsr1_fp4_b200_trt_slurm.sh:90, dsr1_fp8_b200_trt_slurm.sh:60 at
# 17d5e204f), at least 8192 from 64af5a771 (2026-01-21, for the evaluations that follow each run;
# single_node/fixed_seq_len/dsr1_fp8_b200_trt.sh:97-99 at 843c6254f). So a Llama or gpt-oss step takes 16-19
# prompts of 1024 tokens, a DeepSeek one about one (8 from 2026-01-22).
INFERENCEX_TRTLLM_FIXED_MAX_NUM_TOKENS: dict[str, int] = {
    "meta-llama/Llama-3.1-70B": 16384, "openai/gpt-oss-120b": 20000}
INFERENCEX_TRTLLM_DSR1_FLOOR_SINCE = "2026-01-22"
INFERENCEX_TRTLLM_DSR1_FLOOR_TOKENS = 8192
# Batch waiting of InferenceX's Llama-3.1-70B TensorRT-LLM launches: batch_wait_max_tokens_ratio 0.9 and
# batch_wait_timeout_iters 20 for ISL 1024 / OSL 1024 below TP 8, none otherwise ("For 1k/1k, use
# batch_wait_max_tokens_ratio and batch_wait_timeout_iters will improve the performance",
# 70b_fp8_b200_trt_slurm.sh and 70b_fp4_b200_trt_slurm.sh:27-31 at 9596d23d7). The DeepSeek-R1 FP8 script
# sets 40 / 0.8 for 1k/1k at CONC >= 64 from ec7bafaae (2026-01-29) together with piecewise CUDA graphs,
# which the replay does not model; not replayed.
INFERENCEX_TRTLLM_BATCH_WAIT: dict[str, tuple[int, float]] = {"meta-llama/Llama-3.1-70B": (20, 0.9)}


def reference_trtllm_max_num_tokens(gpu: str, mode: str, model_id: str, isl: int, concurrency: float,
                                    date: str) -> int | None:
    """max_num_tokens of an aggregated TensorRT-LLM B200 reference row's InferenceX launch
    (:data:`INFERENCEX_TRTLLM_FIXED_MAX_NUM_TOKENS`, the DeepSeek rule), None for other rows."""
    if gpu != "B200" or mode != "agg":
        return None
    if model_id in INFERENCEX_TRTLLM_FIXED_MAX_NUM_TOKENS:
        return INFERENCEX_TRTLLM_FIXED_MAX_NUM_TOKENS[model_id]
    if model_id in _DSR1:
        tokens = int(math.ceil((concurrency + isl + 64) / 64) * 64)
        late = bool(date) and date >= INFERENCEX_TRTLLM_DSR1_FLOOR_SINCE
        return max(tokens, INFERENCEX_TRTLLM_DSR1_FLOOR_TOKENS) if late else tokens
    return None


def reference_batch_wait(engine: str, gpu: str, mode: str, model_id: str, isl: int, osl: int,
                         layout: Layout | None) -> tuple[int, float]:
    """(batch_wait_timeout_iters, batch_wait_max_tokens_ratio) of a reference row's launch
    (:data:`INFERENCEX_TRTLLM_BATCH_WAIT`), (0, 0.0) where it was off or is not known."""
    if (engine != "trtllm" or gpu != "B200" or mode != "agg" or layout is None or layout.tp_size >= 8
            or (isl, osl) != (1024, 1024)):
        return 0, 0.0
    return INFERENCEX_TRTLLM_BATCH_WAIT.get(model_id, (0, 0.0))


# CUDA graphs of InferenceX's vLLM B200 launches for steps that carry prompt tokens (vLLM replays a step from a
# graph only up to max_cudagraph_capture_size tokens, "If batch size > largest cudagraph_capture_sizes,
# cudagraph will not be used", vllm 0.33.0 config/vllm.py:2443-2444; cudagraph_mode FULL_DECODE_ONLY graphs
# decode steps alone). Llama-3.1-70B: cudagraph_mode FULL_DECODE_ONLY, so no prompt step is graphed
# (70b_fp4_b200_docker.sh:33 and 70b_fp8_b200_docker.sh:23 at 9596d23d7, the rows' 2025-10-29 run).
# gpt-oss-120b: graphs up to 2048 tokens (cuda-graph-sizes: 2048 in gptoss_fp4_b200_docker.sh at 9596d23d7;
# max-cudagraph-capture-size: 2048 in single_node/gptoss_fp4_b200.sh:36 at 8944a358c, 2026-02-25).
# MiniMax-M2.5: --max-cudagraph-capture-size 2048 from bddbf4031 (2026-04-03,
# single_node/minimaxm2.5_fp8_b200.sh:50), vLLM's default before. Kimi-K2.5: --max-num-seqs $CONC and no
# capture size (single_node/kimik2.5_{fp4,int4}_b200.sh:37 at 1cb92d21d, :41 at bddbf4031), so vLLM's default.
# vLLM's default: min(2 x max_num_seqs, 512) (config/vllm.py _set_cudagraph_sizes; raised to 1024 on
# data-center Blackwell by vllm-project/vllm#49390, 2026-07-22, after every reference row), capped by
# max_num_batched_tokens (vllm 0.33.0 config/vllm.py:2552).
VLLM_DEFAULT_GRAPH_CEILING_BEFORE_2026_07 = 512
# The OpenAI server's default max_num_seqs on GPUs of >= 70 GiB (vllm 0.33.0 engine/arg_utils.py:2979-2981).
VLLM_DEFAULT_MAX_NUM_SEQS = 1024
INFERENCEX_VLLM_GRAPHED_PROMPT_TOKENS: dict[str, int] = {
    "meta-llama/Llama-3.1-70B": 0, "openai/gpt-oss-120b": 2048}
INFERENCEX_VLLM_MINIMAX_CAPTURE, INFERENCEX_VLLM_MINIMAX_CAPTURE_SINCE = 2048, "2026-04-03"


def reference_vllm_graphed_prompt_tokens(engine: str, mode: str, gpu: str, model_id: str, concurrency: float,
                                         date: str) -> int | None:
    """The largest prompt-carrying step an aggregated vLLM B200 reference row's InferenceX launch graphed
    (:data:`INFERENCEX_VLLM_GRAPHED_PROMPT_TOKENS` and the rules above it), None for other rows."""
    if engine != "vllm" or mode != "agg" or gpu != "B200":
        return None
    if model_id in INFERENCEX_VLLM_GRAPHED_PROMPT_TOKENS:
        return INFERENCEX_VLLM_GRAPHED_PROMPT_TOKENS[model_id]
    if model_id == "MiniMaxAI/MiniMax-M2.5":
        late = bool(date) and date >= INFERENCEX_VLLM_MINIMAX_CAPTURE_SINCE
        return INFERENCEX_VLLM_MINIMAX_CAPTURE if late else _vllm_default_capture(VLLM_DEFAULT_MAX_NUM_SEQS)
    if model_id == "moonshotai/Kimi-K2.5":  # --max-num-seqs $CONC
        return _vllm_default_capture(max(int(math.ceil(concurrency)), 1))
    return None


def _vllm_default_capture(max_num_seqs: int) -> int:
    """vLLM's max_cudagraph_capture_size when the launch names none, in the reference rows' versions."""
    return min(2 * max_num_seqs, VLLM_DEFAULT_GRAPH_CEILING_BEFORE_2026_07)


def benchmark_token_budget(engine: str, isl: int, concurrency: float, layout: Layout | None,
                           prefill_layout: Layout | None) -> int | None:
    """Tokens per scheduler step (one attention-DP rank's) the measurement's launch configured.

    AIConfigurator's own reference rows were launched by its 0.12.0 generator (InferenceX's aggregated
    B200 TensorRT-LLM rows by their scripts instead: :func:`reference_trtllm_max_num_tokens`), which sizes the step's
    token budget to about one prompt (generator/rule_plugin/*.rule): TensorRT-LLM
    ``max_num_tokens = max_batch_size + isl + 500`` rounded up to 32-token blocks, prefill workers
    ``isl + 500`` (trtllm.rule:13-19; chunked prefill off, backend_templates/trtllm/
    extra_engine_args.yaml.j2 ``enable_chunked_prefill | default(false)``); vLLM ``max_num_tokens
    = max_batch_size + isl + 1500`` with ``max_batch_size`` 512 below 512 sequences, else twice
    them, prefill workers ``isl + 1500`` (vllm.rule:3-5,17-20); SGLang ``max_prefill_tokens =
    isl + 1500`` next to its default chunk (sglang.rule:11). So a step admits one prompt, and the
    per-step costs (weight reads, the decode batch, a launch floor) are paid once per prompt.
    ``max_batch_size`` is the row's sequences per rank (concurrency / attention DP). None for an
    engine without a rule.
    """
    first = layout or prefill_layout
    dp = first.dp_size if first is not None else 1
    prefill_only = layout is None
    per_rank = max(int(math.ceil(concurrency / max(dp, 1))), 1)
    if engine == "trtllm":
        tokens = isl + 500 + (0 if prefill_only else per_rank)
        return int(math.ceil(tokens / 32) * 32)
    if engine == "vllm":
        batch = 512 if per_rank < 512 else 2 * per_rank
        return isl + 1500 + (0 if prefill_only else batch)
    if engine == "sglang":
        return isl + 1500
    return None
