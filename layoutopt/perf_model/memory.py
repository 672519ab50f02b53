"""Memory per GPU of an instance and the divisibility rules of a layout.

The KV cache per GPU is what the engine's own sizing rule leaves (``EngineProfile.kv_memory_policy``):

- vLLM (``utilization``): ``gpu_memory_utilization x total`` (``request_memory``,
  vllm/v1/worker/utils.py:724) minus the profiled peak: weights, the activations of the
  ``max_num_batched_tokens`` profile run, non-torch allocations and the CUDA-graph estimate
  (``available_kv_cache_memory_bytes``, vllm/v1/worker/gpu_worker.py:748-752). The default
  utilization is 0.92 in vLLM 0.33 (vllm/config/cache.py:215; 0.9 in 0.13). The CUDA context sits
  outside the fraction, so the runtime reserve is the graphs and communicator buffers only.
- SGLang (``static_fraction``): ``mem_fraction_static x total`` holds the weights and the KV pool
  (sglang/srt/arg_groups/memory_hook.py:60); unset, the fraction is
  ``(total - reserved) / total`` with reserved = 512 MiB + 1.5 MiB x max(chunked_prefill_size,
  2048) + tp x pp / 8 GiB + the CUDA-graph reserve, at least 10 GiB on GPUs above 60 GiB
  (memory_hook.py:309-325; graph reserve :357-378, chunked_prefill_size and decode graph max_bs
  by GPU memory :90-170 of SGLang 0.5.23; the same rule for these GPUs in 0.5.3, server_args.py:638-673).
- Other engines (``fixed_reserve``): ``gpu_memory_fraction x HBM`` minus weights, activations and
  a fixed runtime reserve (AIConfigurator's 3.5 GiB plus ~0.4 GiB NCCL [AIC-*]); TensorRT-LLM's
  own rule (a fraction of the memory free after loading) is not modelled from its source.

The largest batch that fits at a context length bounds decode concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import BYTES_PER_VALUE, ModelSpec
from layoutopt.perf_model.precision import weight_precision_supported
from layoutopt.perf_model.calibration import (
    ACTIVATION_BYTES_PER_VALUE,
    ACTIVATION_PEAK_HIDDEN_VECTORS,
    LOGIT_BYTES_PER_VALUE,
    SAMPLER_MAX_NUM_SEQS,
    EngineLike,
    resolve_engine,
)
from layoutopt.perf_model.coefficients import context_shards, expert_bytes_per_value, kv_head_share
from layoutopt.perf_model.memo import identity_memo
from layoutopt.plan import Layout
from layoutopt.perf_model.spans import local_domain_gpus, spans_domains

_GIB = 2.0**30
_MIB = 2.0**20


def sglang_default_chunked_prefill_tokens(gpu: GpuSpec) -> int:
    """SGLang's chunked_prefill_size when unset, by GPU memory (memory_hook.py:90-170, 0.5.23)."""
    mib = gpu.memory_bytes / _MIB
    if mib < 20 * 1024:
        return 2048
    if mib < 60 * 1024:
        return 4096
    return 8192 if mib < 160 * 1024 else 16384


def _sglang_decode_graph_max_bs(gpu: GpuSpec, tp: int) -> int:
    """Largest decode CUDA-graph batch SGLang captures when unset (memory_hook.py:90-170, 0.5.23)."""
    mib = gpu.memory_bytes / _MIB
    if mib < 20 * 1024:
        return 8
    if mib < 35 * 1024:
        return 48 if tp < 4 else 160
    if mib < 60 * 1024:
        return 32 if tp < 4 else 160
    if mib < 160 * 1024:
        return 256 if tp < 4 else 512
    return 512


def sglang_mem_fraction_static(gpu: GpuSpec, layout: Layout, chunked_prefill_tokens: int | None = None) -> float:
    """SGLang's default ``mem_fraction_static`` for one server (sglang/srt/arg_groups/memory_hook.py
    of 0.5.23: reserved MiB at :309-315, the fraction at :325, the graph reserve at :357-378).

    SGLang's ``tp_size`` counts every GPU of a pipeline stage (attention DP ranks included), its
    ``attn_dp_size`` is the layout's dp. Not modelled: DeepEP buffers (+2 GiB with
    ``--moe-a2a-backend deepep``), prefill CUDA graphs, the VLM and post-capture variants.
    """
    gpu_mib = gpu.memory_bytes / _MIB
    tp = layout.tp_size * layout.dp_size
    chunk = chunked_prefill_tokens or sglang_default_chunked_prefill_tokens(gpu)
    max_bs = _sglang_decode_graph_max_bs(gpu, tp)
    graph = max_bs * 2.0
    if layout.dp_size > 1:
        graph += max_bs * layout.dp_size * 3.0 + (max_bs * layout.dp_size * 1.5 if max_bs > 300 else 0.0)
    reserved = 512.0 + max(chunk, 2048) * 1.5 + tp * layout.pp_size / 8 * 1024 + graph
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024.0)
    return round((gpu_mib - reserved) / gpu_mib, 3)


class MemoryBreakdown(BaseModel):
    """Memory of the fullest GPU of an instance, in bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    usable_bytes: float             # what the engine budgets (vLLM: gpu_memory_utilization x HBM; SGLang: all of it)
    weights_bytes: float
    activation_bytes: float
    reserve_bytes: float
    kv_capacity_bytes: float        # per GPU, what is left for KV (negative when weights do not fit)
    kv_bytes_per_sequence: float    # per GPU, one sequence at the given context
    max_batch_size: int             # sequences the whole instance holds at that context


@dataclass(frozen=True, slots=True)
class _MemoryCoefficients:
    usable_bytes: float
    weights_bytes: float
    activation_bytes: float
    reserve_bytes: float
    kv_bytes_per_token_full: float
    kv_bytes_per_token_sliding: float
    sliding_window_tokens: float
    state_bytes_per_sequence: float
    dp: int


def weight_bytes_per_gpu(model: ModelSpec, layout: Layout) -> float:
    """Weights on the fullest GPU: layer weights / (tp x pp) (experts / (tp x dp x pp)) plus the
    embedding and/or output head (BF16, vocabulary split over TP) on the edge stages."""
    stage_fraction = math.ceil(model.num_layers / layout.pp_size) / model.num_layers
    w_bytes = BYTES_PER_VALUE[layout.weight_precision]
    dense = (model.attention_params + model.dense_params_total) * w_bytes / layout.tp_size
    experts = model.expert_params_total * expert_bytes_per_value(model, layout.weight_precision) / (
        layout.tp_size * layout.dp_size)
    tables = 1 if (layout.pp_size > 1 or model.tie_word_embeddings) else 2
    embedding = tables * model.vocab_size * model.hidden_size * BYTES_PER_VALUE["bf16"] / layout.tp_size
    return (dense + experts) * stage_fraction + embedding


def activation_bytes_per_gpu(model: ModelSpec, layout: Layout, max_num_batched_tokens: int) -> float:
    """Peak activations of the largest step plus the sampler's logits buffer."""
    ffn_values = 2.0 * model.intermediate_size / layout.tp_size if model.num_dense_layers else 0.0
    if model.is_moe:
        routed = 2.0 * model.num_experts_per_token * model.moe_intermediate_size * layout.dp_size / (
            layout.ep_size * layout.moe_tp_size)
        ffn_values = max(ffn_values, routed)
    per_token = (ACTIVATION_PEAK_HIDDEN_VECTORS * model.hidden_size + ffn_values) * ACTIVATION_BYTES_PER_VALUE
    logits = SAMPLER_MAX_NUM_SEQS * model.vocab_size / layout.tp_size * LOGIT_BYTES_PER_VALUE
    return max_num_batched_tokens / layout.pcp_size * per_token + logits


def _budget(gpu: GpuSpec, layout: Layout, profile, activation_bytes: float,
            fraction: float | None) -> tuple[float, float]:
    """(usable bytes, reserve bytes) per GPU under the engine's KV policy; KV = usable - weights -
    activations - reserve. ``fraction`` overrides the engine's (utilization or static fraction)."""
    if profile.kv_memory_policy == "static_fraction":
        static = fraction if fraction is not None else sglang_mem_fraction_static(
            gpu, layout, profile.max_num_batched_tokens)
        # The static pool is weights + KV; activations and graphs live in the rest of the GPU.
        headroom = (1.0 - static) * gpu.memory_bytes
        return gpu.memory_bytes, max(headroom - activation_bytes, 0.0)
    reserve_gib = profile.runtime_reserve_gib + (profile.nccl_buffer_gib if layout.gpus_per_instance > 1 else 0.0)
    share = fraction if fraction is not None else profile.gpu_memory_fraction
    return gpu.memory_bytes * share, reserve_gib * _GIB


@identity_memo
@lru_cache(maxsize=4096)
def _coefficients(model: ModelSpec, gpu: GpuSpec, layout: Layout, engine: EngineLike,
                  gpu_memory_utilization: float | None) -> _MemoryCoefficients:
    profile = resolve_engine(engine, gpu)
    stage_fraction = math.ceil(model.num_layers / layout.pp_size) / model.num_layers
    kv_factor = kv_head_share(model, layout) / context_shards(layout) * BYTES_PER_VALUE[layout.kv_precision]
    per_layer_token = model.kv_values_per_token_per_layer * kv_factor * stage_fraction
    activation = activation_bytes_per_gpu(model, layout, profile.max_num_batched_tokens)
    usable, reserve = _budget(gpu, layout, profile, activation, gpu_memory_utilization)
    return _MemoryCoefficients(
        usable_bytes=usable,
        weights_bytes=weight_bytes_per_gpu(model, layout),
        activation_bytes=activation,
        reserve_bytes=reserve,
        kv_bytes_per_token_full=model.num_full_attention_layers * per_layer_token,
        kv_bytes_per_token_sliding=model.num_sliding_window_layers * per_layer_token,
        sliding_window_tokens=float(model.sliding_window_tokens or 0),
        state_bytes_per_sequence=model.linear_state_bytes_per_sequence / layout.tp_size * stage_fraction,
        dp=layout.dp_size,
    )


def memory_breakdown(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: float, engine: EngineLike = "vllm",
                     gpu_memory_utilization: float | None = None) -> MemoryBreakdown:
    """Memory of the fullest GPU, and how many sequences of ``context_tokens`` the instance holds.

    ``gpu_memory_utilization`` overrides the engine's share of HBM (vLLM's flag; SGLang's
    mem_fraction_static under its policy); None takes the engine's default rule (module doc).

    KV per sequence per GPU: full layers x context + sliding layers x min(context, window), heads
    split over TP (replicated beyond the KV-head count; MLA's latent on every rank), the sequence
    split over DCP x PCP, plus the linear-attention state (heads split over TP).
    """
    _check_fraction(gpu_memory_utilization)
    c = _coefficients(model, gpu, layout, engine, gpu_memory_utilization)
    kv_capacity, per_sequence, fits = _fit(c, context_tokens)
    return MemoryBreakdown.model_construct(
        usable_bytes=c.usable_bytes, weights_bytes=c.weights_bytes, activation_bytes=c.activation_bytes,
        reserve_bytes=c.reserve_bytes, kv_capacity_bytes=kv_capacity, kv_bytes_per_sequence=per_sequence,
        max_batch_size=fits)


def _check_fraction(fraction: float | None) -> None:
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {fraction}")


def _fit(c: _MemoryCoefficients, context_tokens: float) -> tuple[float, float, int]:
    """(KV capacity per GPU, KV bytes per sequence per GPU, sequences the instance holds)."""
    kv_capacity = c.usable_bytes - c.weights_bytes - c.activation_bytes - c.reserve_bytes
    per_sequence = (c.kv_bytes_per_token_full * context_tokens
                    + c.kv_bytes_per_token_sliding * min(context_tokens, c.sliding_window_tokens)
                    + c.state_bytes_per_sequence)
    fits = int(kv_capacity // per_sequence) if kv_capacity > 0 and per_sequence > 0 else 0
    return kv_capacity, per_sequence, fits * c.dp


def max_batch_size(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: float, engine: EngineLike = "vllm",
                   gpu_memory_utilization: float | None = None) -> int:
    """Sequences of ``context_tokens`` the instance holds in KV cache; 0 when weights do not fit."""
    _check_fraction(gpu_memory_utilization)
    return _fit(_coefficients(model, gpu, layout, engine, gpu_memory_utilization), context_tokens)[2]


# Sequences of the plan's long requests (the optimizer's fit quantile) each scheduler's KV cache
# must hold: fewer cannot batch, every burst preempts. The search proposes no such layout and emit
# refuses a plan pool that has one (report/deployment.py), so a solved plan always emits.
MIN_KV_SEQUENCES_PER_RANK = 4


def _per_value(column: np.ndarray, value_of: Callable) -> np.ndarray:
    """``value_of(v)`` for each entry of ``column``, computed once per distinct value."""
    distinct, inverse = np.unique(column, return_inverse=True)
    return np.array([value_of(v.item()) for v in distinct], dtype=float)[inverse]


def fits_sequences(model: ModelSpec, gpu: GpuSpec, layouts: Mapping[str, np.ndarray],
                   context_tokens: "np.ndarray | float", engine: EngineLike = "vllm",
                   sequences: int = MIN_KV_SEQUENCES_PER_RANK) -> np.ndarray:
    """``max_batch_size(model, gpu, layout, context_tokens, engine) // dp_size >= sequences`` (each
    attention-DP rank's KV cache holds that many sequences) for many layouts at once.

    ``layouts`` holds one array per ``Layout`` field (``tp_size`` ... ``kv_precision``), one entry
    per layout; ``context_tokens`` a number or one per layout. Term by term the arithmetic of
    ``_coefficients`` and ``_fit`` in the same order, so every float is the scalar path's
    (tests/test_memory_columns.py holds the two equal): a term that reads one field is the scalar
    function's own value for each distinct entry; the sequences per rank are ``_fit``'s
    ``kv // per_sequence`` (numpy's float floor division is Python's).
    """
    profile = resolve_engine(engine, gpu)
    tp, pp, dp, ep = (np.asarray(layouts[f], dtype=np.int64) for f in ("tp_size", "pp_size", "dp_size", "ep_size"))
    pcp, dcp = (np.asarray(layouts[f], dtype=np.int64) for f in ("pcp_size", "dcp_size"))
    weight, kv = np.asarray(layouts["weight_precision"]), np.asarray(layouts["kv_precision"])
    stage_fraction = _per_value(pp, lambda v: math.ceil(model.num_layers / v) / model.num_layers)
    # weight_bytes_per_gpu
    dense = _per_value(weight, lambda w: (model.attention_params + model.dense_params_total) * BYTES_PER_VALUE[w]) / tp
    experts = _per_value(weight, lambda w: model.expert_params_total * expert_bytes_per_value(model, w)) / (tp * dp)
    tables = np.where((pp > 1) | model.tie_word_embeddings, 1, 2)
    embedding = _per_value(tables, lambda t: t * model.vocab_size * model.hidden_size * BYTES_PER_VALUE["bf16"]) / tp
    weights = (dense + experts) * stage_fraction + embedding
    # activation_bytes_per_gpu
    ffn_values = (2.0 * model.intermediate_size / tp if model.num_dense_layers else np.zeros(tp.shape))
    if model.is_moe:
        moe_tp = tp * dp // ep
        routed = 2.0 * model.num_experts_per_token * model.moe_intermediate_size * dp / (ep * moe_tp)
        ffn_values = np.maximum(ffn_values, routed)
    per_token = (ACTIVATION_PEAK_HIDDEN_VECTORS * model.hidden_size + ffn_values) * ACTIVATION_BYTES_PER_VALUE
    logits = SAMPLER_MAX_NUM_SEQS * model.vocab_size / tp * LOGIT_BYTES_PER_VALUE
    activation = profile.max_num_batched_tokens / pcp * per_token + logits
    # _budget
    if profile.kv_memory_policy == "static_fraction":
        # sglang_mem_fraction_static reads tp, dp and pp of the layout; one call per distinct triple.
        triple = np.stack([tp, dp, pp], axis=1)
        distinct, inverse = np.unique(triple, axis=0, return_inverse=True)
        statics = np.array([sglang_mem_fraction_static(gpu, Layout(tp_size=int(t), dp_size=int(d), pp_size=int(p)),
                                                       profile.max_num_batched_tokens) for t, d, p in distinct])
        headroom = (1.0 - statics[inverse.reshape(-1)]) * gpu.memory_bytes
        usable, reserve = float(gpu.memory_bytes), np.maximum(headroom - activation, 0.0)
    else:
        gpus_per_instance = tp * pp * pcp * dp
        reserve = np.where(gpus_per_instance > 1, (profile.runtime_reserve_gib + profile.nccl_buffer_gib) * _GIB,
                           (profile.runtime_reserve_gib + 0.0) * _GIB)
        usable = gpu.memory_bytes * profile.gpu_memory_fraction
    # KV bytes per token per layer: kv_head_share / context_shards x bytes per value, on this stage's layers
    head_share = _per_value(tp, lambda t: kv_head_share(model, Layout(tp_size=t)))
    kv_factor = head_share / (dcp * pcp) * _per_value(kv, lambda k: BYTES_PER_VALUE[k])
    per_layer_token = model.kv_values_per_token_per_layer * kv_factor * stage_fraction
    state = model.linear_state_bytes_per_sequence / tp * stage_fraction
    # _fit
    kv_capacity = usable - weights - activation - reserve
    window = float(model.sliding_window_tokens or 0)
    per_sequence = (model.num_full_attention_layers * per_layer_token * context_tokens
                    + model.num_sliding_window_layers * per_layer_token * np.minimum(context_tokens, window) + state)
    positive = (kv_capacity > 0) & (per_sequence > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return positive & (np.floor_divide(kv_capacity, np.where(positive, per_sequence, 1.0)) >= sequences)


def check_fits(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: float, engine: EngineLike = "vllm",
               gpu_memory_utilization: float | None = None) -> MemoryBreakdown:
    """The breakdown when at least one sequence of ``context_tokens`` fits; else LayoutError saying
    by how many GiB per GPU it misses."""
    mem = memory_breakdown(model, gpu, layout, context_tokens, engine, gpu_memory_utilization)
    if mem.max_batch_size >= 1:
        return mem
    need = mem.weights_bytes + mem.activation_bytes + mem.reserve_bytes + mem.kv_bytes_per_sequence
    raise LayoutError(
        "layout", layout.short_name(),
        f"{model.name} on {gpu.name} needs {need / _GIB:.1f} GiB per GPU (weights {mem.weights_bytes / _GIB:.1f}, "
        f"activations {mem.activation_bytes / _GIB:.1f}, reserve {mem.reserve_bytes / _GIB:.1f}, KV of one "
        f"{context_tokens:g}-token sequence {mem.kv_bytes_per_sequence / _GIB:.2f}) but "
        f"{mem.usable_bytes / gpu.memory_bytes:.3g} x {gpu.memory_gib:g} GiB = {mem.usable_bytes / _GIB:.1f} GiB "
        f"is usable: misses by {(need - mem.usable_bytes) / _GIB:.1f} GiB",
        hint="raise tp_size or pp_size, or use a smaller weight or KV precision")


def layouts_pass_check(model: ModelSpec, gpu: GpuSpec, layouts: Mapping[str, np.ndarray],
                       allow_cross_domain: bool = False) -> np.ndarray:
    """Whether ``check_layout(model, gpu, layout, allow_cross_domain)`` passes, for many layouts at
    once (``layouts`` as in ``fits_sequences``): the same rules over arrays
    (tests/test_memory_columns.py holds the two equal)."""
    tp, pp, ep, dp, dcp, pcp = (np.asarray(layouts[f], dtype=np.int64) for f in
                                ("tp_size", "pp_size", "ep_size", "dp_size", "dcp_size", "pcp_size"))
    kv = model.num_kv_heads
    ok = model.num_attention_heads % tp == 0
    if model.attention_kind != "mla":
        ok &= np.where(tp > kv, tp % kv, kv % tp) == 0
    if model.num_linear_attention_layers:
        ok &= (model.linear_num_key_heads % tp == 0) & (model.linear_num_value_heads % tp == 0)
    ok &= pp <= model.num_layers
    if model.is_moe:
        ok &= model.num_experts % ep == 0
    else:
        ok &= (ep == 1) & (dp == 1)
    kv_heads = 1 if model.attention_kind == "mla" else kv
    ok &= (dcp == 1) | (dcp * kv_heads <= tp)
    if not allow_cross_domain:
        ok &= tp * pcp * dp <= local_domain_gpus(gpu)
    weight = np.asarray(layouts["weight_precision"])
    distinct, inverse = np.unique(weight, return_inverse=True)
    ok &= np.array([weight_precision_supported(gpu, str(w)) for w in distinct], dtype=bool)[inverse.reshape(-1)]
    return ok


def check_layout(model: ModelSpec, gpu: GpuSpec, layout: Layout, allow_cross_domain: bool = False) -> None:
    """Raise LayoutError naming the rule and the numbers when ``layout`` cannot run ``model`` on ``gpu``."""
    tp = layout.tp_size

    def fail(field: str, allowed: str) -> None:
        raise LayoutError(f"layout.{field}", layout.short_name(), allowed)

    if model.num_attention_heads % tp:
        fail("tp_size", f"attention heads {model.num_attention_heads} must be divisible by tp_size {tp}")
    kv = model.num_kv_heads
    if model.attention_kind != "mla" and (tp % kv if tp > kv else kv % tp):
        fail("tp_size", f"KV heads {kv} and tp_size {tp} must divide one another (KV heads replicate when tp > {kv})")
    if model.num_linear_attention_layers and (
            model.linear_num_key_heads % tp or model.linear_num_value_heads % tp):
        fail("tp_size", f"linear-attention heads (key {model.linear_num_key_heads}, value "
                        f"{model.linear_num_value_heads}) must be divisible by tp_size {tp}")
    if layout.pp_size > model.num_layers:
        fail("pp_size", f"pp_size {layout.pp_size} exceeds the model's {model.num_layers} layers")
    if not model.is_moe and (layout.ep_size > 1 or layout.dp_size > 1):
        fail("ep_size" if layout.ep_size > 1 else "dp_size",
             f"ep_size {layout.ep_size} and dp_size {layout.dp_size} need a MoE model; "
             f"{model.name} is dense (use more instances for data parallelism)")
    if model.is_moe and model.num_experts % layout.ep_size:
        fail("ep_size", f"routed experts {model.num_experts} must be divisible by ep_size {layout.ep_size}")
    kv_heads = 1 if model.attention_kind == "mla" else kv
    if layout.dcp_size > 1 and layout.dcp_size * kv_heads > tp:
        fail("dcp_size", f"dcp_size {layout.dcp_size} exceeds tp_size / KV heads = {tp} / {kv_heads} = "
                         f"{tp // kv_heads} (DCP only removes KV duplication while tp > KV heads)")
    if not allow_cross_domain and spans_domains(gpu, layout.gpus_per_stage):
        # A PCIe server is the local domain of GPUs without NVLink (links.local_domain).
        fail("gpus_per_stage", f"tp x dp x pcp = {layout.gpus_per_stage} GPUs per stage exceed the "
                               f"{local_domain_gpus(gpu)}-GPU local domain of {gpu.name} (allow_cross_domain "
                               "spreads a stage over whole domains)")
    if not weight_precision_supported(gpu, layout.weight_precision):
        fail("weight_precision", f"{gpu.name} has no {layout.weight_precision} support (neither tensor-core "
                                 "math nor a weight-only kernel)")
