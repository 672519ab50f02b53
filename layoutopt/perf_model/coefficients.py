"""The constants of one instance's forward pass: what ``compute.forward_pass_costs`` needs that depends
only on (model, GPU, layout, engine), computed once and cached (``ForwardCoefficients``), so a step
costs a few float (or numpy array) operations.

Their parts that depend on the model alone (``_model_terms``) or on (GPU, weight precision, engine)
alone (``_rate_terms``) are remembered on their own: the many layouts of one model and GPU share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import BYTES_PER_VALUE, ModelSpec
from layoutopt.perf_model.calibration import (
    ACTIVATION_BYTES_PER_VALUE,
    ACTIVATION_IO_HIDDEN_VECTORS_PER_LAYER,
    DISPATCH_ROUTING_BYTES_PER_CHOICE,
    EngineLike,
    EngineProfile,
    resolve_engine,
)
from layoutopt.perf_model.generations import generation_scales, weight_only_dequant_scale
from layoutopt.perf_model.links import (
    GroupLink,
    Link,
    collective_group_link,
    intra_instance_link,
    pipeline_link,
)
from layoutopt.perf_model.memo import identity_memo
from layoutopt.perf_model.precision import compute_precision, is_weight_only
from layoutopt.plan import Layout

# No kernel reaches its peak: scaled efficiencies stop here.
MAX_EFFICIENCY = 0.98


# ---------------------------------------------------------------------------------------------
# How a layout shards the model.


def expert_bytes_per_value(model: ModelSpec, precision: str) -> float:
    """Bytes per routed-expert weight: the checkpoint's native format unless ``precision`` is smaller."""
    served = BYTES_PER_VALUE[precision]
    if model.expert_native_precision is None:
        return served
    return min(served, BYTES_PER_VALUE[model.expert_native_precision])


def kv_head_share(model: ModelSpec, layout: Layout) -> float:
    """Fraction of a layer's KV heads one TP rank stores: 1/min(tp, kv heads) (replicated beyond)."""
    if model.attention_kind == "mla":
        return 1.0  # one latent cache shared by all heads, replicated on every TP rank
    return 1.0 / min(layout.tp_size, model.num_kv_heads)


def context_shards(layout: Layout) -> int:
    """Ranks a sequence's KV is split over along the sequence (vLLM interleaves it over dcp x pcp)."""
    return layout.dcp_size * layout.pcp_size


@dataclass(frozen=True, slots=True)
class ForwardCoefficients:
    """Per-GPU-column constants of one instance; see the module docstring."""

    profile: EngineProfile
    tp: int
    dp: int
    ep: int
    moe_tp: int
    pp: int
    dcp: int
    pcp: int
    num_layers: int
    hidden_size: int
    # Fabric of each collective group (a SpanningGroup when the group crosses local domains).
    tp_link: GroupLink                 # TP all-reduces (tp contiguous GPUs)
    moe_tp_link: GroupLink             # expert-TP all-reduce (moe_tp contiguous GPUs)
    ep_link: GroupLink                 # EP dispatch/combine (ep GPUs, moe_tp apart)
    moe_link: GroupLink                # every MoE rank (tp x dp contiguous GPUs): the DP-gather exchange
    cp_gather_link: GroupLink          # DCP/PCP all-gather (dcp x pcp GPUs over tp x pcp)
    cp_link: GroupLink                 # PCP ring exchanges (pcp GPUs, tp apart)
    pp_link: Link                      # between pipeline stages (NVLink when the instance fits a domain)
    # Dense GEMMs (attention projections, dense FFN, shared experts, router) and the output head.
    gemm_flops_per_s: float            # peak x efficiency, compute precision
    gemm_half_rows: float              # GEMM rows at which efficiency is half the large-GEMM value
    dense_weight_bytes: float
    dense_flops_per_token: float
    head_weight_bytes: float
    head_flops_per_logit: float
    activation_io_bytes_per_token: float
    # Routed experts.
    num_experts: int
    experts_per_token: int
    num_moe_layers: int
    expert_slice_bytes: float          # one expert's slice on one rank, one layer
    expert_slice_flops_per_token: float
    expert_pad_rows: float             # rows a touched expert's grouped GEMM computes besides its own (M tile)
    ep_dispatch_bytes_per_token: float  # a dispatched token: hidden vector (BF16 or quantized) + routing
    # Attention core.
    attention_flops_per_s: float       # BF16 peak x attention efficiency
    hbm_bytes_per_s: float             # peak x memory efficiency
    attn_flops_per_ctx_token_full: float       # prefill form
    decode_attn_flops_per_ctx_token_full: float  # decode form (MLA: absorbed, over the latent)
    attn_flops_per_ctx_token_sliding: float
    indexer_flops_per_ctx_token: float
    sliding_window_tokens: float
    sparse_topk_tokens: float          # inf when attention is dense
    kv_main_bytes_per_token_full: float    # per rank, all full layers, after context sharding
    kv_indexer_bytes_per_token_full: float
    kv_bytes_per_token_sliding: float
    linear_state_bytes_per_seq: float  # per rank
    linear_flops_per_token: float      # per rank
    # Communication.
    allreduce_bytes_per_token: float
    num_mixer_allreduces: int
    num_dense_ffn_allreduces: int
    cp_gather_bytes_per_token: float   # DCP/PCP attention output + LSE per attention layer
    num_attention_layers: int
    kv_bytes_per_token_per_layer_rank: float  # PCP ring exchange chunk per token
    # Host time to launch one step's kernels without a CUDA graph (EngineProfile.eager_layer_launch_us
    # per layer, plus eager_mla_layer_launch_us per MLA layer); 0 where the engine graphs its prompt steps.
    eager_launch_s: float = 0.0


def expert_pad_rows(profile: EngineProfile) -> float:
    """Rows of padding a touched expert's grouped GEMM computes: the profile's Hopper-equivalent
    half-efficiency rows, on every generation.

    The MoE kernels pad each expert's rows to their own M tile, chosen for the step's tokens per
    expert (vLLM's fused MoE: BLOCK_SIZE_M 16 up to 64 tokens, 16-128 by M, vllm 0.33.0
    model_executor/layers/fused_moe/fused_moe.py:1345, 1376-1383), so the generation's dense-GEMM
    small-M scale (``half_rows_scale``: 1.88 for Blackwell NVFP4, fitted on a dense CUTLASS NVFP4
    GEMM's rows, data/generations.yaml) does not carry to them. With it the H100 profiles priced
    B200's NVFP4 expert decode 40-100 % too slow (accuracy.py --leave-one-gpu-out)."""
    return float(profile.gemm_half_efficiency_tokens)


class _ModelTerms(NamedTuple):
    """What ``forward_coefficients`` takes from the model alone (the same for all its layouts)."""

    hidden_size: int
    dense_params: int
    head_params: int
    main_values: int
    indexer_values: int
    num_attention_heads: int
    v_dim: int
    attn_values_per_head: float        # 2 (head_dim + v_dim): prefill form
    decode_values_per_head: float      # the same, absorbed over the latent for MLA
    num_layers: int
    num_full_attention_layers: int
    num_sliding_window_layers: int
    num_moe_layers: int
    num_dense_layers: int
    num_attention_layers: int
    num_mla_layers: int
    num_experts: int
    experts_per_token: int
    expert_params: int
    activation_io_bytes_per_token: float
    indexer_flops_per_ctx_token: float  # before the TP x PCP split
    sliding_window_tokens: float
    sparse_topk_tokens: float
    kv_values_per_token_per_layer: int
    linear_state_bytes_per_sequence: float
    linear_attention_flops_per_token: float


@identity_memo
def _model_terms(model: ModelSpec) -> _ModelTerms:
    h = model.hidden_size
    indexer_values = model.indexer_head_dim if model.attention_kind == "mla" else 0
    v_dim = model.v_head_dim or model.head_dim
    attn = 2.0 * model.num_attention_heads * (model.head_dim + v_dim)
    decode = attn
    if model.attention_kind == "mla":
        # Decode runs MLA in absorbed form: every head scores the 512 + 64 latent and sums the
        # 512-wide latent values, more FLOPs per cached token than the prefill (expanded) form.
        latent = model.kv_lora_rank or 0
        decode = 2.0 * model.num_attention_heads * (2 * latent + (model.qk_rope_head_dim or 0))
    return _ModelTerms(
        hidden_size=h, dense_params=model.attention_params + model.dense_params_total,
        head_params=model.vocab_size * h,
        main_values=model.kv_values_per_token_per_layer - indexer_values, indexer_values=indexer_values,
        num_attention_heads=model.num_attention_heads, v_dim=v_dim,
        attn_values_per_head=attn, decode_values_per_head=decode,
        num_layers=model.num_layers, num_full_attention_layers=model.num_full_attention_layers,
        num_sliding_window_layers=model.num_sliding_window_layers, num_moe_layers=model.num_moe_layers,
        num_dense_layers=model.num_dense_layers, num_attention_layers=model.num_attention_layers,
        num_mla_layers=model.num_full_attention_layers if model.attention_kind == "mla" else 0,
        num_experts=model.num_experts, experts_per_token=model.num_experts_per_token,
        expert_params=model.expert_params,
        activation_io_bytes_per_token=ACTIVATION_IO_HIDDEN_VECTORS_PER_LAYER * h * ACTIVATION_BYTES_PER_VALUE
        * model.num_layers,
        indexer_flops_per_ctx_token=2.0 * model.indexer_num_heads * model.indexer_head_dim
        * model.num_full_attention_layers,
        sliding_window_tokens=float(model.sliding_window_tokens or 0),
        sparse_topk_tokens=float(model.indexer_topk_tokens or np.inf),
        kv_values_per_token_per_layer=model.kv_values_per_token_per_layer,
        linear_state_bytes_per_sequence=model.linear_state_bytes_per_sequence,
        linear_attention_flops_per_token=model.linear_attention_flops_per_token,
    )


class _RateTerms(NamedTuple):
    """What ``forward_coefficients`` takes from (GPU, weight precision, engine) alone."""

    profile: EngineProfile
    compute: str
    gemm_flops_per_s: float
    gemm_half_rows: float
    attention_flops_per_s: float
    hbm_bytes_per_s: float


@identity_memo
def _rate_terms(gpu: GpuSpec, weight_precision: str, engine: EngineLike) -> _RateTerms:
    p = resolve_engine(engine, gpu)
    compute = compute_precision(gpu, weight_precision)
    peak = gpu.peak_tflops(compute)
    # The engine's Hopper-equivalent efficiencies on this generation and precision (published
    # microbenchmark ratios, data/generations.yaml), capped below the peak; weight-only formats
    # lose the in-kernel dequantization on top.
    scales = generation_scales(gpu, compute)
    gemm_scale = scales.gemm * (weight_only_dequant_scale() if is_weight_only(gpu, weight_precision) else 1.0)
    return _RateTerms(
        profile=p, compute=compute,
        gemm_flops_per_s=peak * 1e12 * min(p.gemm_efficiency * gemm_scale, MAX_EFFICIENCY),
        gemm_half_rows=p.gemm_half_efficiency_tokens * scales.half_rows,
        attention_flops_per_s=gpu.bf16_tflops * 1e12 * min(p.attention_efficiency * scales.attention, MAX_EFFICIENCY),
        hbm_bytes_per_s=gpu.memory_bandwidth_gb_per_s * 1e9 * min(p.memory_efficiency * scales.hbm, MAX_EFFICIENCY),
    )


@identity_memo
@lru_cache(maxsize=4096)
def forward_coefficients(model: ModelSpec, gpu: GpuSpec, layout: Layout, engine: EngineLike = "vllm",
                         link: Link | None = None) -> ForwardCoefficients:
    """The constants of ``forward_pass_costs`` for one (model, GPU, layout, engine); cached.
    Pass the arguments positionally and all five of them (the cache keys on them)."""
    m = _model_terms(model)
    r = _rate_terms(gpu, layout.weight_precision, engine)
    p = r.profile
    tp, dp, pp = layout.tp_size, layout.dp_size, layout.pp_size
    ep, moe_tp = layout.ep_size, layout.moe_tp_size
    dcp, pcp = layout.dcp_size, layout.pcp_size
    w_bytes = BYTES_PER_VALUE[layout.weight_precision]
    kv_bytes = BYTES_PER_VALUE[layout.kv_precision]
    # Values of KV per token per layer, per rank: heads shared over TP, sequence over DCP x PCP.
    head_share = kv_head_share(model, layout)
    kv_rank_factor = head_share / (dcp * pcp) * kv_bytes
    attn_per_ctx_layer = m.attn_values_per_head / (tp * pcp)
    decode_per_ctx_layer = m.decode_values_per_head / (tp * pcp)
    # Rank order: TP innermost, then attention DP; the MoE ranks (tp x dp) split moe_tp innermost,
    # then EP. A ``link`` override puts every collective on that one link.
    stage_link = link or intra_instance_link(gpu, layout.gpus_per_stage)
    return ForwardCoefficients(
        profile=p, tp=tp, dp=dp, ep=ep, moe_tp=moe_tp, pp=pp, dcp=dcp, pcp=pcp,
        num_layers=m.num_layers, hidden_size=m.hidden_size,
        tp_link=link or collective_group_link(gpu, tp),
        moe_tp_link=link or collective_group_link(gpu, moe_tp),
        ep_link=link or collective_group_link(gpu, ep, moe_tp),
        moe_link=link or collective_group_link(gpu, tp * dp),
        cp_gather_link=link or collective_group_link(gpu, dcp * pcp, tp // dcp),
        cp_link=link or collective_group_link(gpu, pcp, tp),
        pp_link=stage_link if pp == 1 else pipeline_link(gpu, layout.gpus_per_instance),
        gemm_flops_per_s=r.gemm_flops_per_s,
        gemm_half_rows=r.gemm_half_rows,
        dense_weight_bytes=m.dense_params * w_bytes / tp,
        dense_flops_per_token=2.0 * m.dense_params / tp,
        head_weight_bytes=m.head_params * BYTES_PER_VALUE["bf16"] / tp,
        head_flops_per_logit=2.0 * m.head_params / tp,
        activation_io_bytes_per_token=m.activation_io_bytes_per_token,
        num_experts=m.num_experts,
        experts_per_token=m.experts_per_token,
        num_moe_layers=m.num_moe_layers,
        expert_slice_bytes=m.expert_params * expert_bytes_per_value(model, layout.weight_precision) / moe_tp,
        expert_slice_flops_per_token=2.0 * m.expert_params / moe_tp,
        expert_pad_rows=expert_pad_rows(p),
        # vLLM and TensorRT-LLM route before the dispatch and send the top-k choices along; SGLang gathers
        # the hidden states and routes the gathered rows.
        ep_dispatch_bytes_per_token=m.hidden_size * (BYTES_PER_VALUE[r.compute] if p.ep_dispatch_quantized
                                                     else ACTIVATION_BYTES_PER_VALUE)
        + (0.0 if p.ep_exchange == "dp_gather" else m.experts_per_token * DISPATCH_ROUTING_BYTES_PER_CHOICE),
        attention_flops_per_s=r.attention_flops_per_s,
        hbm_bytes_per_s=r.hbm_bytes_per_s,
        attn_flops_per_ctx_token_full=attn_per_ctx_layer * m.num_full_attention_layers,
        decode_attn_flops_per_ctx_token_full=decode_per_ctx_layer * m.num_full_attention_layers,
        attn_flops_per_ctx_token_sliding=attn_per_ctx_layer * m.num_sliding_window_layers,
        indexer_flops_per_ctx_token=m.indexer_flops_per_ctx_token / (tp * pcp),
        sliding_window_tokens=m.sliding_window_tokens,
        sparse_topk_tokens=m.sparse_topk_tokens,
        kv_main_bytes_per_token_full=m.num_full_attention_layers * m.main_values * kv_rank_factor,
        kv_indexer_bytes_per_token_full=m.num_full_attention_layers * m.indexer_values * kv_rank_factor,
        kv_bytes_per_token_sliding=m.num_sliding_window_layers * m.kv_values_per_token_per_layer * kv_rank_factor,
        linear_state_bytes_per_seq=m.linear_state_bytes_per_sequence / tp,
        linear_flops_per_token=m.linear_attention_flops_per_token / tp,
        allreduce_bytes_per_token=m.hidden_size * ACTIVATION_BYTES_PER_VALUE,
        num_mixer_allreduces=m.num_layers,
        num_dense_ffn_allreduces=m.num_dense_layers,
        cp_gather_bytes_per_token=m.num_attention_heads / tp * (m.v_dim + 1) * ACTIVATION_BYTES_PER_VALUE * dcp,
        num_attention_layers=m.num_attention_layers,
        kv_bytes_per_token_per_layer_rank=m.kv_values_per_token_per_layer * head_share * kv_bytes,
        eager_launch_s=(m.num_layers * p.eager_layer_launch_us + m.num_mla_layers * p.eager_mla_layer_launch_us)
        * 1e-6,
    )


def clear_coefficient_caches() -> None:
    """Forget every cached coefficient: per layout, per model and per (GPU, precision, engine)."""
    forward_coefficients.cache_clear()
    _model_terms.cache_clear()
    _rate_terms.cache_clear()
