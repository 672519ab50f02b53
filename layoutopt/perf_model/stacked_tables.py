"""Step tables of many layouts in one roofline pass: the same floats, a fraction of the calls.

A search bounds thousands of layouts of one GPU type before it evaluates any, and each layout's
step tables (``costs._phase_costs``) run ``compute.forward_pass_costs`` on arrays of a dozen
values, where every numpy operation costs its call overhead whatever its size. The decode table
and the colocated prompt extras of every layout of one GPU and profile are computed here in one
pass each, the layouts' coefficients as arrays (one row per layout): every row goes through the
same operations in the same order as the layout's own ``forward_pass_costs`` call, so it gives the
same floats (tests/test_perf_stacked_tables.py checks them equal). What branches on a layout's
degrees (its collectives, the expert exchange, the stage hops) runs once per group of rows that
pass equal arguments to it, with the very functions the one-layout path calls.
:func:`prefetch_step_tables` puts the tables where ``_phase_costs`` looks them up first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model import calibration, memory, step
from layoutopt.perf_model import collectives as coll
from layoutopt.perf_model.calibration import (
    ACTIVATION_BYTES_PER_VALUE, LINEAR_ATTENTION_PREFILL_FLOPS_MULTIPLE, EngineLike, EngineProfile,
)
from layoutopt.perf_model.coefficients import ForwardCoefficients, forward_coefficients
from layoutopt.perf_model.compute import _max, _min, moe_exchange_time_s
from layoutopt.perf_model.expert_routing import expected_max_of_normals, touched_expert_share
from layoutopt.perf_model.memo import KeepAliveMemo

from layoutopt.perf_model.workload_grids import (
    DecodeGrid, WorkloadTerms, decode_batch_grid, read_only, workload_terms,
)
from layoutopt.plan import Layout
from layoutopt.workloads.workload import Workload

# Decode tables by (coefficients, batch grid, context): a layout's decode and colocated tables
# read the same one (the same memory-limited batch, the same mean context); costs._decode_table
# and prefetch_step_tables fill it.
decode_tables = KeepAliveMemo(1 << 13)

# Coefficients the same for every layout of one model, GPU and profile; checked, not assumed.
_SHARED_FIELDS = ("profile", "num_layers", "hidden_size", "num_experts", "experts_per_token", "num_moe_layers",
                  "sliding_window_tokens", "sparse_topk_tokens", "allreduce_bytes_per_token", "num_mixer_allreduces",
                  "num_dense_ffn_allreduces")
# Per-layout coefficients the stacked pass reads as arrays (one row per layout).
_ROW_FIELDS = ("gemm_flops_per_s", "gemm_half_rows", "dense_weight_bytes", "dense_flops_per_token",
               "head_weight_bytes", "head_flops_per_logit", "activation_io_bytes_per_token", "expert_slice_bytes",
               "expert_slice_flops_per_token", "expert_pad_rows", "attention_flops_per_s", "hbm_bytes_per_s",
               "decode_attn_flops_per_ctx_token_full", "indexer_flops_per_ctx_token", "kv_main_bytes_per_token_full",
               "kv_indexer_bytes_per_token_full", "kv_bytes_per_token_sliding", "linear_state_bytes_per_seq",
               "linear_flops_per_token", "attn_flops_per_ctx_token_full", "attn_flops_per_ctx_token_sliding")


def stackable(c: ForwardCoefficients, first: ForwardCoefficients) -> bool:
    """Whether ``c``'s decode table may be computed in one stacked pass with ``first``'s: the shared
    fields equal, and the coefficients ``forward_pass_costs`` branches on by truth value zero in both
    or in neither."""
    if any(getattr(c, name) is not getattr(first, name) and getattr(c, name) != getattr(first, name)
           for name in _SHARED_FIELDS):
        return False
    return (bool(c.kv_indexer_bytes_per_token_full) == bool(first.kv_indexer_bytes_per_token_full)
            and bool(c.kv_bytes_per_token_sliding) == bool(first.kv_bytes_per_token_sliding))


def _rows(coefficients: Sequence[ForwardCoefficients], values) -> np.ndarray:
    return np.array(list(values), dtype=float).reshape(len(coefficients), 1, 1)


class _Stack:
    """The coefficients of a stack's layouts, one row each (arrays of shape (layouts, 1, 1))."""

    def __init__(self, model: ModelSpec, gpu: GpuSpec, layouts: Sequence[Layout], profile: EngineProfile):
        self.layouts = layouts
        self.cs = [forward_coefficients(model, gpu, layout, profile, None) for layout in layouts]
        self.first = self.cs[0]
        self.row = {name: _rows(self.cs, (getattr(c, name) for c in self.cs)) for name in _ROW_FIELDS}
        self.pp = _rows(self.cs, (c.pp for c in self.cs))
        self.dp = _rows(self.cs, (c.dp for c in self.cs))
        self.pcp = _rows(self.cs, (c.pcp for c in self.cs))

    def padded(self, grids: Sequence[np.ndarray]) -> np.ndarray:
        """The layouts' 1-d ``grids`` as rows (layouts, width, 1), shorter ones padded with their last
        value (rows are independent; the padding is cut off)."""
        width = max(len(g) for g in grids)
        return np.stack([np.concatenate([g, np.full(width - len(g), g[-1])]) for g in grids])[:, :, None]


def _stacked_pass(stack: _Stack, tokens: np.ndarray, logit_tokens, decode_seqs, decode_ctx, prefill=None):
    """(compute_s, comm_s, overhead_s) of ``compute.forward_pass_costs(split=False)`` of every row
    (``memory_s`` is 0 there), the same operations in the same order per row. ``logit_tokens`` None:
    the decode form (every token needs the output head). ``prefill``: (prefill tokens, pairs, cached
    tokens, indexer pairs, MoE tokens) of a mixed step. What branches on a layout's degrees (its
    collectives, the expert exchange) runs per group of rows with equal arguments, with the
    functions the one-layout path calls."""
    cs, row, first = stack.cs, stack.row, stack.first
    p = first.profile
    hbm = row["hbm_bytes_per_s"]
    if logit_tokens is None:
        gemm_work = tokens * ((row["dense_flops_per_token"] + row["head_flops_per_logit"]) / row["gemm_flops_per_s"])
    else:
        gemm_work = (tokens * row["dense_flops_per_token"] + logit_tokens * row["head_flops_per_logit"]) / row[
            "gemm_flops_per_s"]
    gemm_s = gemm_work * (tokens + row["gemm_half_rows"]) / np.maximum(tokens, 1e-9)
    compute_s = np.maximum(gemm_s, tokens * (row["activation_io_bytes_per_token"] / hbm)
                           + (row["dense_weight_bytes"] + row["head_weight_bytes"]) / hbm)
    tp_times = first.num_mixer_allreduces + first.num_dense_ffn_allreduces
    comm_s = _grouped(tokens.shape, cs, [(c.tp, c.tp_link, c.allreduce_bytes_per_token) for c in cs], lambda c, rows: (
        coll.allreduce_time_s(tokens[rows] * c.allreduce_bytes_per_token, c.tp, c.tp_link, p.allreduce_latency_us,
                              times=tp_times)))
    prefill_tokens = 0.0 if prefill is None else prefill[0]
    if first.num_moe_layers:
        e, k = first.num_experts, first.experts_per_token
        if prefill is not None:
            moe_tokens = prefill[4]
        else:
            moe_tokens = tokens * stack.dp if (stack.dp > 1).any() else tokens
        routed = moe_tokens * k
        ep = [c.ep for c in cs]
        has_ep = _rows(cs, (x > 1 for x in ep)) > 0
        # expert_routing.expert_load_imbalance and max_rank_touched_experts, their scalars per row.
        skew = p.moe_imbalance
        spread = _rows(cs, (skew * skew * (2.0 * math.log(x) * (x - 1.0)) if x > 1 else 0.0 for x in ep))
        ep_rows = _rows(cs, (float(x) for x in ep))
        imbalance = np.where(has_ep, np.minimum(skew + np.sqrt(spread / np.maximum(routed, 1.0)), ep_rows), 1.0)
        share = touched_expert_share(e, k, moe_tokens)
        local = _rows(cs, (e / x if x > 1 else 0.0 for x in ep))
        normal_max = _rows(cs, (expected_max_of_normals(x) * math.sqrt(e / x) if x > 1 else 0.0 for x in ep))
        busiest = local * share + normal_max * np.sqrt(share * (1.0 - share))
        touched_rank = np.where(has_ep, np.minimum(busiest, local), e * share)
        pairs_rank = np.where(has_ep, routed * (imbalance / ep_rows), routed)
        layers = first.num_moe_layers
        expert_s_per_pair = row["expert_slice_flops_per_token"] * layers / (row["gemm_flops_per_s"]
                                                                             * p.grouped_gemm_efficiency)
        expert_flop_s = pairs_rank * expert_s_per_pair + touched_rank * (row["expert_pad_rows"] * expert_s_per_pair)
        permute_bytes = 4.0 * first.hidden_size * ACTIVATION_BYTES_PER_VALUE * layers
        compute_s = compute_s + np.maximum(expert_flop_s, touched_rank * (row["expert_slice_bytes"] * layers / hbm)
                                           + pairs_rank * (permute_bytes / hbm))
        shape = np.broadcast_shapes(tokens.shape, np.shape(moe_tokens))
        exchange = _grouped(shape, cs, [_exchange_key(c) for c in cs], lambda c, rows: moe_exchange_time_s(
            c, moe_tokens[rows], 0.0 if prefill is None else prefill_tokens[rows]))
        comm_s = comm_s + layers * exchange
    ctx = decode_ctx
    full_ctx = _min(ctx, first.sparse_topk_tokens) if first.sparse_topk_tokens < np.inf else ctx
    flops = full_ctx * row["decode_attn_flops_per_ctx_token_full"] + row["linear_flops_per_token"]
    kv_bytes = full_ctx * row["kv_main_bytes_per_token_full"] + 2.0 * row["linear_state_bytes_per_seq"]
    if first.kv_indexer_bytes_per_token_full:
        flops = flops + ctx * row["indexer_flops_per_ctx_token"]
        kv_bytes = kv_bytes + ctx * row["kv_indexer_bytes_per_token_full"]
    if first.kv_bytes_per_token_sliding:
        window_ctx = _min(ctx, first.sliding_window_tokens)
        flops = flops + window_ctx * row["attn_flops_per_ctx_token_sliding"]
        kv_bytes = kv_bytes + window_ctx * row["kv_bytes_per_token_sliding"]
    compute_s = compute_s + decode_seqs * np.maximum(flops / row["attention_flops_per_s"], kv_bytes / hbm)
    prefill_attn_s = 0.0
    if prefill is not None:
        _, pairs, cached, indexer_pairs, _ = prefill
        kv_per_token = (row["kv_main_bytes_per_token_full"] + row["kv_indexer_bytes_per_token_full"]
                        + row["kv_bytes_per_token_sliding"]) * stack.pcp
        prefill_flops = (pairs * (row["attn_flops_per_ctx_token_full"] + row["attn_flops_per_ctx_token_sliding"])
                         + indexer_pairs * row["indexer_flops_per_ctx_token"]
                         + prefill_tokens * row["linear_flops_per_token"] * LINEAR_ATTENTION_PREFILL_FLOPS_MULTIPLE)
        prefill_attn_s = prefill_flops / row["attention_flops_per_s"]
        compute_s = compute_s + np.maximum(prefill_attn_s, (prefill_tokens + cached) * kv_per_token / hbm)
    # The DCP/PCP gathers and the PCP ring (x + 0.0 is x on the rows without them).
    if any(c.dcp * c.pcp > 1 for c in cs):
        comm_s = comm_s + _grouped(tokens.shape, cs, [(c.dcp, c.pcp, c.cp_gather_bytes_per_token, c.cp_gather_link,
                                                       c.num_attention_layers) for c in cs],
                                   lambda c, rows: _cp_gather_s(c, tokens[rows]))
    if any(c.pcp > 1 for c in cs):
        shape = np.broadcast_shapes(np.shape(comm_s), np.shape(prefill_attn_s))
        comm_s = comm_s + _grouped(shape, cs, [(c.pcp, c.cp_link, c.kv_bytes_per_token_per_layer_rank,
                                                c.num_attention_layers) for c in cs], lambda c, rows: _ring_s(
            c, prefill_tokens if prefill is None else prefill_tokens[rows],
            prefill_attn_s if prefill is None else prefill_attn_s[rows]))
    overhead_s = (first.num_layers * p.layer_overhead_us + first.num_moe_layers * p.moe_kernel_overhead_us) * 1e-6
    if first.eager_launch_s and prefill is not None:
        launch_s = first.eager_launch_s
        busy_s = compute_s + 0.0 + comm_s + overhead_s
        eager = prefill_tokens > 0
        if p.graphed_prompt_tokens:
            eager = eager & (tokens > p.graphed_prompt_tokens)
        overhead_s = overhead_s + np.where(eager, np.maximum(launch_s - busy_s, 0.0), 0.0)
    return compute_s, comm_s, overhead_s


def _hops(stack: _Stack, tokens: np.ndarray, comm_s) -> np.ndarray:
    """``comm_s`` plus each row's pp stage hops (``step._stage_hop_s(c, tokens, pp)``, as a decode and
    a mixed step add them; x + 0.0 is x on the rows without PP)."""
    if not (stack.pp > 1).any():
        return comm_s
    return comm_s + _grouped(tokens.shape, stack.cs, [(c.pp, c.pp_link, c.hidden_size) for c in stack.cs],
                             lambda c, rows: step._stage_hop_s(c, tokens[rows], c.pp))


def stacked_decode_tables(model: ModelSpec, gpu: GpuSpec, layouts: Sequence[Layout], profile: EngineProfile,
                          grids: Sequence[DecodeGrid], decode_context: float) -> list[np.ndarray]:
    """``costs._decode_table(model, gpu, layout, profile, grid, decode_context)`` of every layout
    (with its grid), in order: ``step.decode_step_time_array`` with every layout a row. The layouts
    must be ``stackable``."""
    stack = _Stack(model, gpu, layouts, profile)
    batch = np.maximum(stack.padded([g.values for g in grids]), 1.0)   # decode_step_time_array
    context = np.array([[decode_context, 2.0 * decode_context]])
    # step._decode_costs: batch / min(batch, pp) and / dp where > 1 (x / 1.0 is x).
    microbatch = batch / np.minimum(batch, stack.pp) if (stack.pp > 1).any() else batch
    tokens = microbatch / stack.dp if (stack.dp > 1).any() else microbatch
    compute_s, comm_s, overhead_s = _stacked_pass(stack, tokens, None, tokens, context)
    comm_s = _hops(stack, tokens, comm_s)
    total = compute_s + comm_s + (overhead_s + stack.first.profile.step_overhead_ms * 1e-3)
    return [read_only(np.asarray(total[i, :len(g.values)], dtype=float)) for i, g in enumerate(grids)]


def stacked_prompt_extras(model: ModelSpec, gpu: GpuSpec, layouts: Sequence[Layout], profile: EngineProfile,
                          terms: WorkloadTerms, grids: Sequence[DecodeGrid], decode_tables: Sequence[np.ndarray],
                          decode_context: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """``costs._prompt_extra(model, gpu, layout, profile, terms, grid, table, decode_context)`` of every
    layout (with its grid and decode table), in order: ``step.mixed_step_time_array`` with
    ``chunk_ranks=1`` and every layout a row. The layouts must be ``stackable``."""
    stack = _Stack(model, gpu, layouts, profile)
    decode = stack.padded([g.mixed_batches.astype(float) for g in grids])        # (layouts, batches, 1)
    prefill = np.asarray(terms.anchor_new_tokens, dtype=float)[None, None, :]
    cached = np.asarray(terms.anchor_cached_tokens, dtype=float)[None, None, :]
    prefill, cached, decode = np.broadcast_arrays(prefill, cached, decode)
    # step._chunk_placement with chunk_ranks=1: the chunk on one rank (x / 1 is x), the decode batch
    # over the dp ranks; the MoE layers take the chunk and the batch (= tokens without attention DP).
    chunk_rank = prefill
    decode_rank = decode / stack.dp if (stack.dp > 1).any() else decode
    tokens = chunk_rank + decode_rank
    moe_tokens = prefill + decode
    has_chunk = prefill > 0
    pairs, indexer_pairs = step._prefill_pairs(stack.first, model, chunk_rank, cached)
    compute_s, comm_s, overhead_s = _stacked_pass(
        stack, tokens, decode_rank + has_chunk, decode_rank, float(decode_context),
        (chunk_rank, pairs, np.where(has_chunk, cached, 0.0), np.asarray(indexer_pairs), moe_tokens))
    comm_s = _hops(stack, tokens, comm_s)
    mixed = compute_s + 0.0 + comm_s + overhead_s + stack.first.profile.step_overhead_ms * 1e-3
    out = []
    for i, (grid, table) in enumerate(zip(grids, decode_tables)):
        batches = grid.mixed_batches
        base = np.interp(batches, grid.batches, table)[:, None]
        values = np.maximum(mixed[i, :len(batches)] - base, 0.0)
        out.append((batches.astype(float), terms.to_lengths(values)))
    return out


def _grouped(shape: tuple[int, ...], cs: Sequence[ForwardCoefficients], keys: Sequence[tuple],
             compute) -> np.ndarray:
    """Rows of ``shape`` (one per layout) where ``compute(c, rows)`` of the first layout with each key
    gives every row with that key: layouts with equal keys pass equal arguments to the collective,
    so one call on their stacked rows gives each row what its own call would (elementwise)."""
    out = np.empty(shape)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        out[members] = compute(cs[members[0]], members)
    return out


def _exchange_key(c: ForwardCoefficients) -> tuple:
    """What ``compute.moe_exchange_time_s`` reads of the coefficients."""
    return (c.tp, c.dp, c.ep, c.moe_tp, c.experts_per_token, c.allreduce_bytes_per_token,
            c.ep_dispatch_bytes_per_token, c.moe_link, c.moe_tp_link, c.ep_link)


def _cp_gather_s(c: ForwardCoefficients, tokens: np.ndarray):
    """forward_pass_costs' DCP/PCP all-gathers of a step (0.0 without context parallelism)."""
    if c.dcp * c.pcp <= 1:
        return 0.0
    return c.num_attention_layers * coll.allgather_time_s(tokens * c.cp_gather_bytes_per_token * c.pcp,
                                                          c.dcp * c.pcp, c.cp_gather_link, c.profile.allreduce_latency_us)


def _ring_s(c: ForwardCoefficients, prefill_tokens, prefill_attn_s):
    """forward_pass_costs' PCP ring exchange of a step, net of the prefill attention it overlaps;
    0.0 without PCP."""
    if c.pcp <= 1:
        return 0.0
    ring_s = c.num_attention_layers * coll.ring_pass_time_s(prefill_tokens * c.kv_bytes_per_token_per_layer_rank,
                                                             c.pcp, c.cp_link, c.profile.allreduce_latency_us)
    return _max(ring_s - prefill_attn_s, 0.0)


# Memory breakdowns by (model, GPU, layout, profile) identity and context: a layout's decode and
# colocated tables (and the prefetch before them) ask for the same one.
_breakdowns = KeepAliveMemo(1 << 13)


def memory_breakdown(model: ModelSpec, gpu: GpuSpec, layout: Layout, context_tokens: float,
                     profile: EngineProfile) -> memory.MemoryBreakdown:
    """``memory.memory_breakdown(model, gpu, layout, context_tokens, engine=profile)``, remembered."""
    return _breakdowns.get((id(model), id(gpu), id(layout), id(profile), context_tokens),
                           (model, gpu, layout, profile),
                           lambda: memory.memory_breakdown(model, gpu, layout, context_tokens=context_tokens,
                                                           engine=profile))


def decode_grid_of(model: ModelSpec, gpu: GpuSpec, layout: Layout, profile: EngineProfile,
                   full_context: float) -> DecodeGrid | None:
    """The decode batch grid ``_phase_costs`` tabulates a layout's decode steps on (no batch cap
    given), or None where the layout holds no sequence (``_phase_costs`` raises there)."""
    breakdown = memory_breakdown(model, gpu, layout, full_context, profile)
    if breakdown.max_batch_size < 1:
        return None
    return decode_batch_grid(max(int(breakdown.max_batch_size), 1))


# Stacks larger than this are split (the arrays grow; the call overhead is paid once a stack).
MAX_STACK = 64


def decode_table_key(c: ForwardCoefficients, grid: DecodeGrid, decode_context: float) -> tuple:
    """``decode_tables``' key of a layout's decode table (its coefficients, batch grid and mean context)."""
    return (id(c), id(grid), decode_context)


def prompt_extra_key(c: ForwardCoefficients, grid: DecodeGrid, decode_context: float, terms: WorkloadTerms) -> tuple:
    """``prompt_extras``' key of a colocated table's prompt extras (the decode table they subtract
    is ``decode_tables``' entry of the same coefficients, grid and context)."""
    return (id(c), id(grid), decode_context, id(terms))


# Colocated prompt extras (costs._prompt_extra's (batches, extras)) by ``prompt_extra_key``.
prompt_extras = KeepAliveMemo(1 << 13)


def has_launch_floor(profile: EngineProfile) -> bool:
    """Whether ``profile``'s prompt steps pay an eager launch floor (``costs._phase_costs`` then also
    tabulates the prompt extras without it, under ``without_launch_floor``)."""
    return bool(profile.eager_layer_launch_us or profile.eager_mla_layer_launch_us)


@lru_cache(maxsize=64)
def without_launch_floor(profile: EngineProfile) -> EngineProfile:
    """``profile`` with its prompt steps graphed (no eager launch floor): the floor is the difference."""
    return profile.model_copy(update={"eager_layer_launch_us": 0.0, "eager_mla_layer_launch_us": 0.0})


def prefetch_step_tables(model: ModelSpec, jobs: Sequence[tuple[GpuSpec, Layout, str, object]], workload: Workload,
                         engine: EngineLike, allow_cross_domain: bool) -> None:
    """Compute, stacked, the decode tables and colocated prompt extras ``_phase_costs`` will ask for
    the decode and colocated jobs (GPU, layout, role, link) of a search, and remember them where it
    looks them up (``decode_tables``, ``prompt_extras``); layouts that do not fit, that no other
    layout of their GPU stacks with, or whose tables are remembered already are left to
    ``_phase_costs``. The tables are those it would compute (the same floats)."""
    terms = workload_terms(workload)
    # _phase_costs' context of a decode or colocated table: the memory fit's and the decode table's.
    decode_context = terms.mean_input + terms.output_moments[1] / 2.0
    stacks: dict[tuple, dict[int, _Member]] = {}
    for gpu, layout, role, _ in jobs:
        if role == "prefill":
            continue
        members = stacks.setdefault((id(gpu), id(engine)), {})
        if id(layout) in members:
            members[id(layout)].colocated |= role == "colocated"
            continue
        profile = calibration.resolve_engine(engine, gpu)
        try:
            memory.check_layout(model, gpu, layout, allow_cross_domain=allow_cross_domain)
        except LayoutError:
            continue
        grid = decode_grid_of(model, gpu, layout, profile, decode_context)
        if grid is None:
            continue
        members[id(layout)] = _Member(gpu, layout, profile, grid, forward_coefficients(model, gpu, layout, profile, None),
                                      role == "colocated")
    for by_layout in stacks.values():
        if not by_layout:
            continue
        first = next(iter(by_layout.values()))
        members = [m for m in by_layout.values() if m.profile is first.profile and stackable(m.coefficients,
                                                                                              first.coefficients)]
        missing = [m for m in members if decode_table_key(m.coefficients, m.grid, decode_context) not in decode_tables]
        for part in _parts(missing):
            tables = stacked_decode_tables(model, first.gpu, [m.layout for m in part], first.profile,
                                           [m.grid for m in part], decode_context)
            for m, table in zip(part, tables):
                decode_tables.put(decode_table_key(m.coefficients, m.grid, decode_context), (m.coefficients, m.grid),
                                  table)
        colocated = [m for m in members if m.colocated
                     and decode_table_key(m.coefficients, m.grid, decode_context) in decode_tables]
        # With a launch floor _phase_costs also asks for the extras without it (the graphed profile's),
        # both over the decode table of the layout's own profile.
        profiles = [first.profile] + ([without_launch_floor(first.profile)] if has_launch_floor(first.profile) else [])
        for profile in profiles:
            _prefetch_prompt_extras(model, first.gpu, colocated, profile, terms, decode_context)


def _prefetch_prompt_extras(model: ModelSpec, gpu: GpuSpec, members: Sequence["_Member"], profile: EngineProfile,
                            terms: WorkloadTerms, decode_context: float) -> None:
    """``stacked_prompt_extras`` of the ``members`` (stackable, decode tables remembered) under
    ``profile`` whose extras are not remembered yet, remembered where ``costs._prompt_extra`` looks."""
    keyed = [(m, c, prompt_extra_key(c, m.grid, decode_context, terms)) for m, c in
             ((m, m.coefficients if profile is m.profile else forward_coefficients(model, gpu, m.layout, profile, None))
              for m in members)]
    missing = [item for item in keyed if item[2] not in prompt_extras]
    for part in _parts(missing):
        extras = stacked_prompt_extras(
            model, gpu, [m.layout for m, _, _ in part], profile, terms, [m.grid for m, _, _ in part],
            [decode_tables.peek(decode_table_key(m.coefficients, m.grid, decode_context))[:, 0] for m, _, _ in part],
            decode_context)
        for (m, c, key), extra in zip(part, extras):
            prompt_extras.put(key, (c, m.grid, terms), extra)


@dataclass
class _Member:
    """A decode or colocated layout of one GPU the prefetch may stack (``colocated``: some job of it is)."""

    gpu: GpuSpec
    layout: Layout
    profile: EngineProfile
    grid: DecodeGrid
    coefficients: ForwardCoefficients
    colocated: bool


def _parts(members: list) -> list[list]:
    """``members`` in stacks of at most ``MAX_STACK``, none of one (its own call costs the same)."""
    parts = [members[start:start + MAX_STACK] for start in range(0, len(members), MAX_STACK)]
    return [part for part in parts if len(part) > 1]
