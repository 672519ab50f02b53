"""Time of one engine step: a prefill pass, a decode step, a mixed (chunked-prefill) step.

All functions are pure and return seconds. Pipeline parallelism (DESIGN section 5):

- prefill: one batch crosses every stage in turn, so its latency is the whole column's work plus
  ``pp - 1`` stage-boundary transfers (latency does not drop with PP);
- decode: the batch is split into ``m = min(batch, pp)`` micro-batches that circulate through the
  stages; a sequence gets its next token once per round trip, so the time per token is the column
  time of one micro-batch plus ``pp`` transfers. With ``batch <= pp`` stages sit idle (bubbles) and
  the per-token time equals the non-PP time at batch 1; throughput grows with ``m`` instead.
  ``pipeline_bubble_fraction`` gives the flush-schedule bubble ``(p-1)/(m+p-1)`` for callers that
  batch prompts through a pipeline.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model import collectives as coll
from layoutopt.perf_model.calibration import ACTIVATION_BYTES_PER_VALUE, EngineLike
from layoutopt.perf_model.coefficients import ForwardCoefficients, forward_coefficients
from layoutopt.perf_model.compute import forward_pass_costs
from layoutopt.perf_model.memo import KeepAliveMemo, identity_memo
from layoutopt.plan import Layout
from layoutopt.perf_model.links import Link, intra_instance_link

Bottleneck = Literal["compute", "memory", "communication", "overhead"]


class StepTime(BaseModel):
    """Duration of one step in seconds, split by what limits it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total_s: float
    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float
    bottleneck: Bottleneck


def _step_time(compute_s: float, memory_s: float, communication_s: float, overhead_s: float) -> StepTime:
    # The largest part (the first of equals, in this order).
    bottleneck, top = "compute", compute_s
    if memory_s > top:
        bottleneck, top = "memory", memory_s
    if communication_s > top:
        bottleneck, top = "communication", communication_s
    if overhead_s > top:
        bottleneck = "overhead"
    # Built without re-validation: every value is a float this module computed.
    return StepTime.model_construct(
        total_s=float(compute_s + memory_s + communication_s + overhead_s), compute_s=float(compute_s),
        memory_s=float(memory_s), communication_s=float(communication_s), overhead_s=float(overhead_s),
        bottleneck=bottleneck)


def pipeline_bubble_fraction(pp_size: int, num_microbatches: int) -> float:
    """Idle fraction of a fill-and-drain pipeline: (p-1)/(m+p-1)."""
    return (pp_size - 1) / (num_microbatches + pp_size - 1)


def _stage_hop_s(c: ForwardCoefficients, tokens, hops: int):
    """``hops`` stage-boundary sends of ``tokens`` activations."""
    if c.pp == 1 or hops == 0:
        return 0.0
    return hops * coll.p2p_time_s(tokens * (c.hidden_size * ACTIVATION_BYTES_PER_VALUE), c.pp_link)


def causal_pairs(new_tokens: float, cached_tokens: float) -> float:
    """(query, key) pairs of causal attention over ``new_tokens`` after ``cached_tokens``:
    P x C + P (P + 1) / 2."""
    return new_tokens * cached_tokens + new_tokens * (new_tokens + 1.0) / 2.0


def _sliding_pairs(new_tokens: float, cached_tokens: float, window: float) -> float:
    """Pairs when each query sees at most ``window`` keys: sum over positions of min(pos, window)."""
    first, last = cached_tokens + 1.0, cached_tokens + new_tokens
    if last <= window:
        return (first + last) * new_tokens / 2.0
    if first >= window:
        return window * new_tokens
    below = window - first + 1.0
    return (first + window) * below / 2.0 + window * (new_tokens - below)


def _sliding_pairs_array(new_tokens: np.ndarray, cached_tokens: np.ndarray, window: float) -> np.ndarray:
    """``_sliding_pairs`` over arrays (same three cases, chosen elementwise)."""
    first, last = cached_tokens + 1.0, cached_tokens + new_tokens
    below = window - first + 1.0
    return np.where(last <= window, (first + last) * new_tokens / 2.0,
                    np.where(first >= window, window * new_tokens,
                             (first + window) * below / 2.0 + window * (new_tokens - below)))


def _prefill_pairs(c: ForwardCoefficients, model: ModelSpec, new_tokens, cached_tokens):
    """(pairs the attention layers compute, pairs a sparse-attention indexer scores).

    The first is an average over full and sliding layers weighted by their counts, because
    ``forward_pass_costs`` multiplies it by the summed per-pair FLOPs of both kinds; sparse
    attention caps full layers at the indexer's top-k keys per query.
    """
    sliding_pairs = _sliding_pairs_array if isinstance(new_tokens, np.ndarray) else _sliding_pairs
    causal = causal_pairs(new_tokens, cached_tokens)
    full = causal
    if model.indexer_topk_tokens:
        full = sliding_pairs(new_tokens, cached_tokens, float(model.indexer_topk_tokens))
    indexer = causal if model.indexer_num_heads else 0.0
    if not model.num_sliding_window_layers:
        return full, indexer
    sliding = sliding_pairs(new_tokens, cached_tokens, c.sliding_window_tokens)
    n_full, n_slide = model.num_full_attention_layers, model.num_sliding_window_layers
    return (full * n_full + sliding * n_slide) / (n_full + n_slide), indexer


def prefill_time(model: ModelSpec, gpu: GpuSpec, layout: Layout, prompt_tokens: int, batch_size: int = 1,
                 cached_tokens: int = 0, engine: EngineLike = "vllm", link: Link | None = None) -> StepTime:
    """One forward pass over ``batch_size`` prompts of ``prompt_tokens`` tokens each; see
    :func:`_prefill_parts`. With PP: the full pipeline latency of that batch."""
    return _step_time(*_prefill_parts(model, gpu, layout, prompt_tokens, batch_size, cached_tokens, engine, link))


def prefill_time_s(model: ModelSpec, gpu: GpuSpec, layout: Layout, prompt_tokens: int, batch_size: int = 1,
                   cached_tokens: int = 0, engine: EngineLike = "vllm", link: Link | None = None) -> float:
    """``prefill_time(...).total_s`` (the same number) without building the StepTime: what the
    optimizer's step tables ask for thousands of times."""
    compute_s, memory_s, comm_s, overhead_s = _prefill_parts(model, gpu, layout, prompt_tokens, batch_size,
                                                             cached_tokens, engine, link)
    return float(compute_s + memory_s + comm_s + overhead_s)


def _prefill_parts(model: ModelSpec, gpu: GpuSpec, layout: Layout, prompt_tokens: int, batch_size: int,
                   cached_tokens: int, engine: EngineLike, link: Link | None) -> tuple[float, float, float, float]:
    """One forward pass over ``batch_size`` prompts of ``prompt_tokens`` tokens each, of which
    ``cached_tokens`` are a prefix-cache hit. With PP: the full pipeline latency of that batch.

    Attention-DP ranks take ceil(batch / dp) prompts each and the step lasts as long as the most
    loaded of them (lockstep, :func:`_chunk_placement`); PCP splits every prompt over
    ``pcp_size`` groups (each group reads the whole cached prefix as the ring passes it). Only each
    prompt's last token goes through the output head. ``link`` puts the instance's TP/EP/DCP/PCP
    collectives on one link (default: each group's own fabric, NVLink inside the GPU's scale-up
    domain and hierarchical NVLink + NIC for a group that spans nodes; ``links.collective_group_link``).
    """
    c = forward_coefficients(model, gpu, layout, engine, link)
    column = _column_coefficients(model, gpu, layout, engine, link)
    key = (id(column), prompt_tokens, batch_size, cached_tokens)
    parts = _prefill_column_memo.get(key, column, lambda: _prefill_column(
        column, model, layout.dp_size, layout.pcp_size, prompt_tokens, batch_size, cached_tokens))
    compute_s, memory_s, comm_s, overhead_s = parts
    new_tokens = max(prompt_tokens - cached_tokens, 0)
    tokens = math.ceil(batch_size / layout.dp_size) * new_tokens / layout.pcp_size
    comm_s += _stage_hop_s(c, tokens, layout.pp_size - 1)
    overhead_s += c.profile.step_overhead_ms * 1e-3
    return compute_s, memory_s, comm_s, overhead_s


# A prefill pass's GPU work per stage column, by (column coefficients, prompt, batch, cached tokens):
# layouts that differ only in pp share it (and a prefill and a colocated table of one layout without
# attention DP share their anchors), so the search's thousands of layouts compute about half as many.
_prefill_column_memo = KeepAliveMemo(1 << 15)


@identity_memo
def _column_coefficients(model: ModelSpec, gpu: GpuSpec, layout: Layout, engine: EngineLike,
                         link: Link | None) -> ForwardCoefficients:
    """``forward_coefficients`` of ``layout`` with one pipeline stage: the same numbers but for
    ``pp`` and ``pp_link``, which ``forward_pass_costs`` never reads (a pass is costed per stage
    column; ``_stage_hop_s`` adds the stage boundaries).

    Layouts that differ only in ``pp`` get one shared object (``_prefill_column_memo`` keys on
    it): the first of them to ask gives its own coefficients with ``pp`` 1 and the stage link
    (no other coefficient depends on ``pp``; tests/test_perf_step.py checks them equal to those
    of the one-stage layout), without a second ``forward_coefficients`` of a copied layout."""
    key = (id(model), id(gpu), layout.tp_size, layout.dp_size, layout.ep_size, layout.dcp_size, layout.pcp_size,
           layout.weight_precision, layout.kv_precision, id(engine), id(link))

    def column() -> ForwardCoefficients:
        c = forward_coefficients(model, gpu, layout, engine, link)
        if layout.pp_size == 1:
            return c
        return dataclasses.replace(c, pp=1, pp_link=link or intra_instance_link(gpu, layout.gpus_per_stage))

    return _columns.get(key, (model, gpu, engine, link), column)


# One-stage coefficients by (model, GPU, degrees but pp, precisions, engine, link); see _column_coefficients.
_columns = KeepAliveMemo(1 << 13)


def _prefill_column(c: ForwardCoefficients, model: ModelSpec, dp: int, pcp: int, prompt_tokens: int,
                    batch_size: int, cached_tokens: int) -> tuple[float, float, float, float]:
    """``forward_pass_costs`` of ``_prefill_parts``' pass, before the stage hops and the step overhead."""
    new_tokens = max(prompt_tokens - cached_tokens, 0)
    prompts_rank = math.ceil(batch_size / dp)
    tokens = prompts_rank * new_tokens / pcp
    pairs, indexer_pairs = _prefill_pairs(c, model, new_tokens, cached_tokens)
    share = prompts_rank / pcp
    return forward_pass_costs(
        c, tokens=tokens, logit_tokens=prompts_rank, prefill_tokens=tokens, prefill_pairs=pairs * share,
        prefill_cached_tokens=cached_tokens * prompts_rank, prefill_indexer_pairs=indexer_pairs * share,
        # The MoE layers take the prompts' real tokens (prompt steps gather unpadded: _chunk_placement),
        # so prompts fewer than the ranks are not counted once per rank.
        moe_tokens=batch_size * new_tokens / pcp if dp > 1 else None)


def _decode_costs(model, gpu, layout, c: ForwardCoefficients, batch, context, split: bool = True):
    microbatch = batch / _min_any(batch, layout.pp_size) if layout.pp_size > 1 else batch
    seqs_rank = microbatch / layout.dp_size if layout.dp_size > 1 else microbatch
    compute_s, memory_s, comm_s, overhead_s = forward_pass_costs(
        c, tokens=seqs_rank, logit_tokens=seqs_rank, decode_seqs=seqs_rank, decode_ctx=context, split=split)
    if layout.pp_size > 1:  # (adding the 0.0 of no stage hops would change nothing)
        comm_s = comm_s + _stage_hop_s(c, seqs_rank, layout.pp_size)
    overhead_s = overhead_s + c.profile.step_overhead_ms * 1e-3
    return compute_s, memory_s, comm_s, overhead_s


def _min_any(a, b):
    if isinstance(a, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def decode_step_time(model: ModelSpec, gpu: GpuSpec, layout: Layout, batch_size: int, context_tokens: float,
                     engine: EngineLike = "vllm", link: Link | None = None) -> StepTime:
    """One decode step: one token for each of ``batch_size`` sequences at mean ``context_tokens``.

    ``batch_size`` counts the sequences of the whole instance (split over attention-DP ranks).
    With PP: the time per token of one sequence (see the module docstring).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    c = forward_coefficients(model, gpu, layout, engine, link)
    return _step_time(*_decode_costs(model, gpu, layout, c, float(batch_size), float(context_tokens)))


def decode_step_time_array(model: ModelSpec, gpu: GpuSpec, layout: Layout, batch_sizes: np.ndarray,
                           context_tokens: np.ndarray, engine: EngineLike = "vllm",
                           link: Link | None = None) -> np.ndarray:
    """Vectorized ``decode_step_time(...).total_s`` over broadcast arrays of batches and contexts."""
    c = forward_coefficients(model, gpu, layout, engine, link)
    batch = np.maximum(np.asarray(batch_sizes, dtype=float), 1.0)
    context = np.asarray(context_tokens, dtype=float)
    if context.size == 1 and batch.ndim >= context.ndim:
        # One context for every batch: a Python float broadcasts to the same shape and values, and
        # skips a dozen ufunc calls on one-element arrays (the optimizer's hot loop).
        context = float(context.reshape(-1)[0])
    # split=False puts every op group's roofline time in compute_s (memory_s is 0.0).
    compute_s, _, comm_s, overhead_s = _decode_costs(model, gpu, layout, c, batch, context, split=False)
    return compute_s + comm_s + overhead_s


def _chunk_placement(dp: int, chunk_ranks: int, prefill, decode):
    """(prompt tokens on the slowest rank, decode tokens per rank, tokens the MoE layers take, None
    for the default) of a
    step carrying ``prefill`` prompt tokens spread over ``chunk_ranks`` of ``dp`` attention-DP ranks.

    The ranks step in lockstep: every MoE layer is a collective over all of them (vLLM runs a
    dummy batch on a rank without work, vllm 0.33.0 v1/engine/core.py:2502-2507; SGLang an idle
    batch), so a step lasts as long as its slowest rank's attention and dense GEMMs, and a prompt
    chunk sits on the one rank its request was routed to. Steps that carry prompt tokens gather the
    ranks' real token counts for the MoE layers, unpadded: vLLM pads to the largest rank only under
    CUDA graphs or micro-batching (v1/worker/dp_utils.py:176-185; long chunks run eagerly), SGLang
    uses SUM_LEN for extend batches (0.5.23 srt/layers/dp_attention.py:183-192).
    """
    if dp == 1:  # one rank: nothing to place (and the MoE layers take this rank's tokens, the default)
        return prefill, decode, None
    ranks = dp if chunk_ranks is None else max(min(chunk_ranks, dp), 1)
    return prefill / ranks, decode / dp, prefill + decode


def mixed_step_time(model: ModelSpec, gpu: GpuSpec, layout: Layout, prefill_tokens: int,
                    prefill_context_tokens: float, decode_batch: int, decode_context_tokens: float,
                    engine: EngineLike = "vllm", link: Link | None = None, chunk_ranks: int | None = None) -> StepTime:
    """One colocated step with chunked prefill: ``prefill_tokens`` prompt tokens (a chunk whose prompt
    already has ``prefill_context_tokens`` tokens in the KV cache) plus one token for each of
    ``decode_batch`` sequences at mean ``decode_context_tokens``.

    Both parts share the GEMMs (one weight read for all tokens); attention is costed per part.
    The decode batch is spread evenly over attention-DP ranks; the prompt tokens sit on
    ``chunk_ranks`` of them (1: one prompt's chunk on the rank it was routed to; ``dp``, the
    default: every rank a chunk of ``prefill_tokens / dp`` of its own prompt, an instance-wide
    chunk budget filled from every rank's queue), and the step lasts as long as the slowest
    rank (:func:`_chunk_placement`). With PP: the latency of one pass through every stage (decode
    tokens see the same per-token time).
    """
    c = forward_coefficients(model, gpu, layout, engine, link)
    dp = layout.dp_size
    chunk_rank, decode_rank, moe_tokens = _chunk_placement(dp, chunk_ranks, float(prefill_tokens),
                                                           float(decode_batch))
    tokens = chunk_rank + decode_rank
    pairs, indexer_pairs = _prefill_pairs(c, model, chunk_rank, float(prefill_context_tokens))
    compute_s, memory_s, comm_s, overhead_s = forward_pass_costs(
        c, tokens=tokens, logit_tokens=decode_rank + (1.0 if prefill_tokens else 0.0), decode_seqs=decode_rank,
        decode_ctx=float(decode_context_tokens), prefill_tokens=chunk_rank, prefill_pairs=pairs,
        prefill_cached_tokens=float(prefill_context_tokens) if prefill_tokens else 0.0,
        prefill_indexer_pairs=indexer_pairs, moe_tokens=moe_tokens)
    comm_s += _stage_hop_s(c, tokens, layout.pp_size)
    overhead_s += c.profile.step_overhead_ms * 1e-3
    return _step_time(compute_s, memory_s, comm_s, overhead_s)


def mixed_step_time_array(model: ModelSpec, gpu: GpuSpec, layout: Layout, prefill_tokens: np.ndarray,
                          prefill_context_tokens: np.ndarray, decode_batch: np.ndarray,
                          decode_context_tokens: float, engine: EngineLike = "vllm",
                          link: Link | None = None, chunk_ranks: int | None = None) -> np.ndarray:
    """Vectorized ``mixed_step_time(...).total_s`` over broadcast arrays of chunks, their cached
    prefixes and decode batches (one pass of the roofline for all of them)."""
    c = forward_coefficients(model, gpu, layout, engine, link)
    dp = layout.dp_size
    prefill, cached, decode = np.broadcast_arrays(np.asarray(prefill_tokens, dtype=float),
                                                  np.asarray(prefill_context_tokens, dtype=float),
                                                  np.asarray(decode_batch, dtype=float))
    chunk_rank, decode_rank, moe_tokens = _chunk_placement(dp, chunk_ranks, prefill, decode)
    tokens = chunk_rank + decode_rank
    has_chunk = prefill > 0
    pairs, indexer_pairs = _prefill_pairs(c, model, chunk_rank, cached)
    compute_s, memory_s, comm_s, overhead_s = forward_pass_costs(
        c, tokens=tokens, logit_tokens=decode_rank + has_chunk, decode_seqs=decode_rank,
        decode_ctx=float(decode_context_tokens), prefill_tokens=chunk_rank, prefill_pairs=pairs,
        prefill_cached_tokens=np.where(has_chunk, cached, 0.0),
        prefill_indexer_pairs=np.asarray(indexer_pairs), moe_tokens=moe_tokens, split=False)
    comm_s = comm_s + _stage_hop_s(c, tokens, layout.pp_size)
    return compute_s + memory_s + comm_s + overhead_s + c.profile.step_overhead_ms * 1e-3
