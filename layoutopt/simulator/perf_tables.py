"""Step-time and memory tables from the performance model, one set per instance type.

The event loop never calls the performance model: for each (model, GPU, layout, engine, token
budget, batch limit) this module evaluates it once on grids and hands the loop interpolating
tables (:class:`~layoutopt.simulator.step_times.TabulatedStepTimes`). Grids span the model's whole
context window, so one set of tables serves every workload and rate. Decode steps use the
vectorized ``decode_step_time_array``; prefill and mixed steps are evaluated point by point.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.catalog import get_model
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Plan, Pool
from layoutopt.perf_model import kv_transfer, memory, step
from layoutopt.perf_model.calibration import SAMPLER_MAX_NUM_SEQS, get_engine_profile
from layoutopt.perf_model.costs import rank_token_budget
from layoutopt.plan import Layout
from layoutopt.perf_model.links import Link, kv_transfer_link
from layoutopt.simulator.pools import PoolSpec
from layoutopt.simulator.step_times import Table1D, Table2D, Table3D, TabulatedStepTimes

# Grid sizes: enough that linear interpolation stays within ~1 % of the model (step times are
# close to linear in context and batch between neighbouring geometric points).
_DECODE_BATCH_EXACT_UP_TO = 512  # every batch size up to this is tabulated exactly
_DECODE_BATCH_POINTS = 256
_CONTEXT_POINTS = 40
_PREFILL_TOKEN_POINTS = 24
_PREFILL_SEQUENCE_POINTS = 12
_PREFILL_CONTEXT_POINTS = 10
_MIXED_TOKEN_POINTS = 16
_MIXED_BATCH_POINTS = 12
_MIXED_CONTEXT_POINTS = 10


def _int_grid(low: int, high: int, points: int) -> np.ndarray:
    """Distinct integers from ``low`` to ``high`` (both included), geometrically spaced."""
    high = max(high, low)
    return np.unique(np.round(np.geomspace(low, high, points)).astype(np.int64))


def _context_grid(max_context_tokens: int, points: int, with_zero: bool = False) -> np.ndarray:
    grid = _int_grid(1, max_context_tokens, points).astype(float)
    return np.concatenate([[0.0], grid]) if with_zero else grid


@lru_cache(maxsize=256)
def step_tables(model: ModelSpec, gpu: GpuSpec, layout: Layout, engine: str, max_batched_tokens: int,
                max_batch_size: int, prefill_ranks: int = 1) -> TabulatedStepTimes:
    """Interpolating step-time tables of one instance type (seconds).

    ``prefill_ranks`` > 1: the prefill table is one attention-DP rank's, a step of b prompts
    costed with each of the ``prefill_ranks`` ranks holding b (the performance model's prefill
    server, :func:`~layoutopt.perf_model.costs.phase_costs`).
    """
    max_context = model.max_context_tokens
    if max_batch_size <= _DECODE_BATCH_EXACT_UP_TO:
        batches = np.arange(1, max_batch_size + 1)
    else:
        batches = _int_grid(1, max_batch_size, _DECODE_BATCH_POINTS)
    contexts = _context_grid(max_context, _CONTEXT_POINTS)
    decode_s = step.decode_step_time_array(model, gpu, layout, batches[:, None], contexts[None, :], engine)
    decode = Table2D(batches.astype(float), contexts, np.asarray(decode_s, dtype=float))

    tokens = _int_grid(1, max_batched_tokens, _PREFILL_TOKEN_POINTS)
    sequences = _int_grid(1, max(min(max_batch_size, max_batched_tokens), 1), _PREFILL_SEQUENCE_POINTS)
    earlier = _context_grid(max_context, _PREFILL_CONTEXT_POINTS, with_zero=True)
    prefill_s = np.array([[[step.prefill_time(model, gpu, layout, int(t + c), batch_size=int(b) * prefill_ranks,
                                              cached_tokens=int(c), engine=engine).total_s
                            for c in earlier] for b in sequences] for t in tokens])
    prefill = Table3D(tokens.astype(float), sequences.astype(float), earlier, prefill_s)

    chunk = _int_grid(1, max_batched_tokens, _MIXED_TOKEN_POINTS)
    decode_batches = _int_grid(1, max_batch_size, _MIXED_BATCH_POINTS)
    decode_contexts = _context_grid(max_context, _MIXED_CONTEXT_POINTS)
    mixed_s = np.array([[[step.mixed_step_time(model, gpu, layout, prefill_tokens=int(p), prefill_context_tokens=0,
                                               decode_batch=int(b), decode_context_tokens=float(c),
                                               engine=engine).total_s
                          for c in decode_contexts] for b in decode_batches] for p in chunk])
    mixed = Table3D(chunk.astype(float), decode_batches.astype(float), decode_contexts, mixed_s)
    return TabulatedStepTimes(prefill=prefill, decode=decode, mixed=mixed)


@lru_cache(maxsize=256)
def kv_tables(model: ModelSpec, gpu: GpuSpec, layout: Layout, engine: str) -> tuple[float, Table1D]:
    """(KV capacity of the instance in bytes, KV bytes of one sequence vs its context tokens).

    Both are per GPU of one attention-DP rank; the instance holds ``dp_size`` ranks, each with its
    own KV, so the capacity counts all of them.
    """
    contexts = np.union1d(_context_grid(model.max_context_tokens, _CONTEXT_POINTS),
                          [float(model.sliding_window_tokens or 1)])
    rows = [memory.memory_breakdown(model, gpu, layout, float(c), engine) for c in contexts]
    capacity_bytes = max(rows[0].kv_capacity_bytes, 0.0) * layout.dp_size
    per_sequence = Table1D(np.concatenate([[0.0], contexts]),
                           np.array([rows[0].kv_bytes_per_sequence] + [r.kv_bytes_per_sequence for r in rows]))
    return capacity_bytes, per_sequence


def kv_link(prefill_gpus: list[tuple[GpuSpec, Layout]], decode_gpu: GpuSpec, decode_layout: Layout) -> Link:
    """The path a prompt's KV takes into a decode instance: the slowest of the paths from each
    prefill pool (:func:`~layoutopt.perf_model.links.kv_transfer_link`, the same default as
    ``estimate``: every GPU sends its KV shard over its own NIC)."""
    links = [kv_transfer_link(gpu, layout, decode_layout, decode_gpu) for gpu, layout in prefill_gpus]
    return min(links, key=lambda link: link.bandwidth_gb_per_s)


def kv_transfer_table(model: ModelSpec, kv_precision: str, link: Link) -> Table1D:
    """Seconds to receive one prompt's KV against its length in tokens."""
    lengths = _context_grid(model.max_context_tokens, _CONTEXT_POINTS)
    seconds = [kv_transfer.kv_transfer_time_s(model, kv_precision, float(t), link) for t in lengths]
    return Table1D(lengths, np.asarray(seconds))


def pool_spec(model: ModelSpec, engine: str, pool: Pool, name: str, transfer: Table1D | None = None) -> PoolSpec:
    """A plan pool as the simulator's :class:`PoolSpec`."""
    gpu = get_gpu(pool.gpu)
    layout = pool.layout
    memory.check_layout(model, gpu, layout, allow_cross_domain=True)
    memory.check_fits(model, gpu, layout, context_tokens=1, engine=engine)
    profile = get_engine_profile(engine)
    # A prefill instance's attention-DP ranks are separate schedulers (vLLM DPEngineCoreProc,
    # v1/engine/core.py:2281, fed by the front end's least-loaded choice, v1/engine/core_client.py:1768;
    # SGLang's data_parallel_controller): one server each, with its own token budget and
    # --max-num-seqs (the plan's batch / dp, as emitted). Other roles run the instance as one engine.
    ranks = layout.dp_size if pool.role == "prefill" else 1
    budget = rank_token_budget(profile, layout.dp_size) * layout.dp_size // ranks
    # Pool.max_batch_size is the pool's --max-num-seqs: decoding sequences, or for a prefill pool
    # the prompts its steps in flight may hold (a plan without one runs with vLLM's default).
    max_batch = pool.max_batch_size if pool.max_batch_size >= 1 else SAMPLER_MAX_NUM_SEQS
    max_batch = -(-max_batch // ranks)
    budget = max(budget, max_batch + 1)  # decode tokens never starve prompt chunks
    capacity_bytes, per_sequence = kv_tables(model, gpu, layout, engine)
    times = step_tables(model, gpu, layout, engine, budget, max_batch, ranks)
    return PoolSpec(
        name=name, role=pool.role, num_instances=pool.instances, servers_per_instance=ranks, step_times=times,
        max_batch_size=max_batch, kv_capacity_bytes=capacity_bytes / ranks, kv_bytes_per_sequence=per_sequence,
        max_batched_tokens=budget, kv_transfer_s=transfer or (lambda prompt_tokens: 0.0),
        routing_weight=pool.capacity_rps if pool.capacity_rps > 0 else float(pool.max_batch_size),
        pipeline_depth=layout.pp_size if pool.role == "prefill" else 1,
        request_overhead_s=profile.request_overhead_s(pool.role),
    )


def plan_pool_specs(plan: Plan) -> list[PoolSpec]:
    """Every pool of ``plan`` as a :class:`PoolSpec`, KV-transfer times included for decode pools."""
    model = get_model(plan.model)
    prefill_sides = [(get_gpu(p.gpu), p.layout) for p in plan.pools if p.role == "prefill"]
    specs = []
    for index, pool in enumerate(plan.pools):
        transfer = None
        if pool.role == "decode" and prefill_sides:
            link = kv_link(prefill_sides, get_gpu(pool.gpu), pool.layout)
            transfer = kv_transfer_table(model, pool.kv_precision, link)
        name = f"{pool.role} {pool.gpu} {pool.layout.short_name()}"
        if any(spec.name == name for spec in specs):
            name += f" #{index + 1}"
        specs.append(pool_spec(model, plan.engine, pool, name, transfer))
    return specs
