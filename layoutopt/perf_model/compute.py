"""Roofline cost of one forward pass on one GPU of an instance, op group by op group.

For every op group time = max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x efficiency))
(DESIGN section 5), summed over groups, plus collectives and fixed overheads. Quantities are per
GPU of one pipeline stage and summed over the stages ("one GPU column"): a pass through all stages
costs the column's time, one stage costs 1/pp of it.

``coefficients.ForwardCoefficients`` holds everything that depends only on (model, GPU, layout, engine);
it is computed once and cached, so evaluating a step is a few float (or numpy array) operations.
``forward_pass_costs`` accepts floats or numpy arrays for every per-step quantity.
"""

from __future__ import annotations

import numpy as np

from layoutopt.perf_model import collectives as coll
from layoutopt.perf_model.calibration import ACTIVATION_BYTES_PER_VALUE, LINEAR_ATTENTION_PREFILL_FLOPS_MULTIPLE
from layoutopt.perf_model.coefficients import ForwardCoefficients
from layoutopt.perf_model.expert_routing import expert_load_imbalance, max_rank_touched_experts


def _max(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a > b else b


def _min(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return a if a < b else b


def _roofline(flop_s, byte_s):
    """(compute part, memory part) of one op group: the larger of the two limits, attributed."""
    if isinstance(flop_s, np.ndarray) or isinstance(byte_s, np.ndarray):
        is_compute = flop_s >= byte_s
        return np.where(is_compute, flop_s, 0.0), np.where(is_compute, 0.0, byte_s)
    return (flop_s, 0.0) if flop_s >= byte_s else (0.0, byte_s)


def _roofline_total(flop_s, byte_s):
    """(roofline time, 0): the total without attributing it."""
    return _max(flop_s, byte_s), 0.0


def _gemm_time_s(c: ForwardCoefficients, work_s, rows):
    """GEMM compute time from its time at full efficiency (``work_s``, FLOPs / (peak x efficiency));
    efficiency falls for few rows: eff x rows / (rows + half-efficiency rows)."""
    return work_s * (rows + c.gemm_half_rows) / _max(rows, 1e-9)


def moe_exchange_time_s(c: ForwardCoefficients, moe_tokens, prefill_tokens=0.0):
    """Seconds one MoE layer spends moving tokens to its experts and their outputs back.

    ``moe_tokens`` is every attention-DP rank's tokens together (floats or numpy arrays);
    ``prefill_tokens`` > 0 marks a step carrying prompt tokens. What moves is what the engine's
    default launch runs (``EngineProfile.ep_exchange``, sources in data/engine_profiles.yaml):

    - no attention DP (or no EP): the tokens are already on every TP rank; each rank runs its experts
      (or expert slices) on all of them and the outputs are all-reduced over the tp x dp MoE ranks;
    - ``allgather_reducescatter`` (vLLM, TensorRT-LLM): every MoE rank all-gathers all DP ranks'
      dispatched tokens and reduce-scatters the BF16 outputs back: ~dp x tokens per GPU each way, so
      it grows with dp and exceeds the all-to-all of routed copies once ep > top-k;
    - ``dp_gather`` (SGLang, --moe-a2a-backend none): the same on decode steps; a step carrying
      prompt tokens gathers by an all-reduce of the summed buffer and, with attention TP > 1, returns
      by one too;
    - ``alltoall`` (DeepEP-style, opt-in): dispatch and combine send each rank's routed copies only
      (T/tp tokens x top-k), plus the expert-TP all-reduce.
    """
    p = c.profile
    ep_ranks = c.tp * c.dp
    h_bytes = c.allreduce_bytes_per_token
    if c.ep == 1 or c.dp == 1:
        return coll.allreduce_time_s(moe_tokens * h_bytes, ep_ranks, c.moe_link, p.allreduce_latency_us)
    if p.ep_exchange == "alltoall":
        per_rank_tokens = moe_tokens / ep_ranks
        expert_tp_s = coll.allreduce_time_s(moe_tokens * (h_bytes / c.ep), c.moe_tp, c.moe_tp_link,
                                            p.allreduce_latency_us)
        return expert_tp_s + 2.0 * coll.alltoall_time_s(
            per_rank_tokens * (c.experts_per_token * h_bytes), c.ep, c.ep_link, p.alltoall_latency_us)
    # Every dispatch and combine pays the profile's fixed EP-exchange cost, whichever collective runs it.
    latency_us = p.alltoall_latency_us
    gather_s = coll.allgather_time_s(moe_tokens * c.ep_dispatch_bytes_per_token, ep_ranks, c.moe_link, latency_us)
    scatter_s = coll.reducescatter_time_s(moe_tokens * h_bytes, ep_ranks, c.moe_link, latency_us)
    decode_s = gather_s + scatter_s
    if p.ep_exchange != "dp_gather" or not (isinstance(prefill_tokens, np.ndarray) or prefill_tokens):
        return decode_s
    summed_s = coll.allreduce_time_s(moe_tokens * h_bytes, ep_ranks, c.moe_link, latency_us)
    prompt_s = summed_s + (scatter_s if c.tp == 1 else summed_s)
    if isinstance(prefill_tokens, np.ndarray):
        return np.where(prefill_tokens > 0, prompt_s, decode_s)
    return prompt_s


def forward_pass_costs(c: ForwardCoefficients, *, tokens, logit_tokens, decode_seqs=0.0, decode_ctx=0.0,
                       prefill_tokens=0.0, prefill_pairs=0.0, prefill_cached_tokens=0.0, prefill_indexer_pairs=0.0,
                       moe_tokens=None, split: bool = True):
    """(compute_s, memory_s, communication_s, overhead_s) of one pass through every stage.

    Arguments are per attention-DP rank and per PCP group (floats or numpy arrays):
    ``tokens`` through the GEMMs, ``logit_tokens`` needing the output head, ``decode_seqs`` decoding
    sequences at ``decode_ctx`` tokens of context, ``prefill_tokens`` new prompt tokens whose
    causal attention covers ``prefill_pairs`` (query, key) pairs per layer, reading
    ``prefill_cached_tokens`` of cached prefix (a sparse-attention indexer scores
    ``prefill_indexer_pairs``, all causal pairs). ``moe_tokens`` is what the shared MoE layers
    take from every attention-DP rank together (default ``tokens x dp``: every rank as loaded as
    this one, the padded decode step); ``tokens`` is then the slowest rank's, which the lockstep
    ranks wait for. The step overhead is left to the caller.
    With ``split=False`` the roofline time of every op group is returned as compute_s (memory_s
    is 0): the total is the same and hot loops skip the attribution.
    """
    roofline = _roofline if split else _roofline_total
    p = c.profile
    hbm = c.hbm_bytes_per_s
    # Scalars are folded before they meet the token arrays: on the small arrays of a step table
    # every numpy operation costs about a microsecond, whatever its size.
    if logit_tokens is tokens:  # decode: every token needs the output head
        gemm_work = tokens * ((c.dense_flops_per_token + c.head_flops_per_logit) / c.gemm_flops_per_s)
    else:
        gemm_work = (tokens * c.dense_flops_per_token + logit_tokens * c.head_flops_per_logit) / c.gemm_flops_per_s
    compute_s, memory_s = roofline(
        _gemm_time_s(c, gemm_work, tokens),
        tokens * (c.activation_io_bytes_per_token / hbm) + (c.dense_weight_bytes + c.head_weight_bytes) / hbm,
    )
    # Two TP all-reduces per layer: after the mixer (attention or linear attention) and after a
    # dense FFN; MoE layers combine their experts below.
    comm_s = coll.allreduce_time_s(tokens * c.allreduce_bytes_per_token, c.tp, c.tp_link, p.allreduce_latency_us,
                                   times=c.num_mixer_allreduces + c.num_dense_ffn_allreduces)

    if c.num_moe_layers:
        e, k = c.num_experts, c.experts_per_token
        if moe_tokens is None:  # every attention-DP rank feeds the shared expert layers, each as many as this one
            moe_tokens = tokens * c.dp if c.dp > 1 else tokens
        routed = moe_tokens * k
        imbalance = expert_load_imbalance(routed, c.ep, p.moe_imbalance)
        # Distinct experts the busiest rank reads (max_rank_touched_experts) and the (token, expert)
        # pairs it computes, hot experts and sampling noise applied to the pairs.
        touched_rank = max_rank_touched_experts(e, k, moe_tokens, c.ep)
        pairs_rank = routed * (imbalance / c.ep) if c.ep > 1 else routed
        # Grouped GEMM: rows per expert = pairs / touched experts, so compute = FLOPs x (1 + half/rows).
        expert_s_per_pair = c.expert_slice_flops_per_token * c.num_moe_layers / (
            c.gemm_flops_per_s * p.grouped_gemm_efficiency)
        expert_flop_s = pairs_rank * expert_s_per_pair + touched_rank * (c.expert_pad_rows * expert_s_per_pair)
        # Token permutation before the grouped GEMM and the weighted un-permutation after it: each
        # routed copy of a token's hidden vector is written and read once on each side.
        permute_bytes = 4.0 * c.hidden_size * ACTIVATION_BYTES_PER_VALUE * c.num_moe_layers
        expert_c, expert_m = roofline(expert_flop_s, touched_rank * (c.expert_slice_bytes * c.num_moe_layers / hbm)
                                      + pairs_rank * (permute_bytes / hbm))
        compute_s, memory_s = compute_s + expert_c, memory_s + expert_m
        comm_s = comm_s + c.num_moe_layers * moe_exchange_time_s(c, moe_tokens, prefill_tokens)

    if isinstance(decode_seqs, np.ndarray) or decode_seqs:
        # Decode attention: read the KV of every sequence (sliding layers capped at the window, sparse
        # attention at its top-k, its indexer keys in full) and the linear-attention state (read + write).
        full_ctx = _min(decode_ctx, c.sparse_topk_tokens) if c.sparse_topk_tokens < np.inf else decode_ctx
        flops = full_ctx * c.decode_attn_flops_per_ctx_token_full + c.linear_flops_per_token
        kv_bytes = full_ctx * c.kv_main_bytes_per_token_full + 2.0 * c.linear_state_bytes_per_seq
        if c.kv_indexer_bytes_per_token_full:
            flops = flops + decode_ctx * c.indexer_flops_per_ctx_token
            kv_bytes = kv_bytes + decode_ctx * c.kv_indexer_bytes_per_token_full
        if c.kv_bytes_per_token_sliding:
            window_ctx = _min(decode_ctx, c.sliding_window_tokens)
            flops = flops + window_ctx * c.attn_flops_per_ctx_token_sliding
            kv_bytes = kv_bytes + window_ctx * c.kv_bytes_per_token_sliding
        flop_s_per_seq, byte_s_per_seq = flops / c.attention_flops_per_s, kv_bytes / hbm
        if split:
            dec_c, dec_m = roofline(decode_seqs * flop_s_per_seq, decode_seqs * byte_s_per_seq)
            compute_s, memory_s = compute_s + dec_c, memory_s + dec_m
        else:
            # max(s a, s b) = s max(a, b) for s >= 0, exactly (rounding is monotone): one product.
            compute_s = compute_s + decode_seqs * _max(flop_s_per_seq, byte_s_per_seq)

    prefill_attn_s = 0.0
    if isinstance(prefill_tokens, np.ndarray) or prefill_tokens or prefill_pairs:
        # Prefill attention: quadratic FLOPs over the (query, key) pairs, KV written once, prefix read once.
        # Per rank, KV of the PCP group's tokens (stored coefficients are also split over PCP).
        kv_per_token = (c.kv_main_bytes_per_token_full + c.kv_indexer_bytes_per_token_full
                        + c.kv_bytes_per_token_sliding) * c.pcp
        prefill_flops = (prefill_pairs * (c.attn_flops_per_ctx_token_full + c.attn_flops_per_ctx_token_sliding)
                         + prefill_indexer_pairs * c.indexer_flops_per_ctx_token
                         + prefill_tokens * c.linear_flops_per_token * LINEAR_ATTENTION_PREFILL_FLOPS_MULTIPLE)
        prefill_attn_s = prefill_flops / c.attention_flops_per_s
        pre_c, pre_m = roofline(prefill_attn_s, (prefill_tokens + prefill_cached_tokens) * kv_per_token / hbm)
        compute_s, memory_s = compute_s + pre_c, memory_s + pre_m

    if c.dcp * c.pcp > 1:
        # DCP (and PCP at decode): all-gather partial attention outputs and log-sum-exps per layer.
        comm_s = comm_s + c.num_attention_layers * coll.allgather_time_s(
            tokens * c.cp_gather_bytes_per_token * c.pcp, c.dcp * c.pcp, c.cp_gather_link, p.allreduce_latency_us)
    if c.pcp > 1:
        # PCP prefill: ring exchange of each group's KV chunk, overlapped with the attention compute.
        ring_s = c.num_attention_layers * coll.ring_pass_time_s(
            prefill_tokens * c.kv_bytes_per_token_per_layer_rank, c.pcp, c.cp_link, p.allreduce_latency_us)
        comm_s = comm_s + _max(ring_s - prefill_attn_s, 0.0)

    # Router, top-k, permute and un-permute kernels of every MoE layer: launches the grouped GEMM
    # does not hide.
    overhead_s = (c.num_layers * p.layer_overhead_us + c.num_moe_layers * p.moe_kernel_overhead_us) * 1e-6
    if c.eager_launch_s and (isinstance(prefill_tokens, np.ndarray) or prefill_tokens):
        # A step carrying prompt tokens runs eagerly where the engine graphs only decode steps
        # (TensorRT-LLM's default: data/engine_profiles.yaml): the host launches every kernel of
        # every layer, so the step lasts at least that launch time; GPU work shorter than it hides
        # below it (kernels run while later ones are being launched).
        launch_s = c.eager_launch_s
        busy_s = compute_s + memory_s + comm_s + overhead_s
        floor_s = _max(launch_s - busy_s, 0.0)
        eager = prefill_tokens > 0 if isinstance(prefill_tokens, np.ndarray) else None
        if p.graphed_prompt_tokens:  # steps up to that many tokens replay a graph (vLLM's piecewise graphs)
            beyond = tokens > p.graphed_prompt_tokens
            eager = beyond if eager is None else eager & beyond
        if isinstance(eager, np.ndarray):
            floor_s = np.where(eager, floor_s, 0.0)
        elif eager is not None and not eager:
            floor_s = 0.0
        overhead_s = overhead_s + floor_s
    return compute_s, memory_s, comm_s, overhead_s
