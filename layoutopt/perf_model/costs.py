"""Step-time tables of one instance, computed once from the per-step physics and reused by the load models.

The load layer (``load.py``) evaluates an instance at many request rates; calling the roofline for
each would be slow, so :func:`phase_costs` tabulates, in seconds:

- prefill time of each representative prompt length (a quantile grid of the workload's input
  distribution) alone; the fixed cost of a prefill step that batching spreads over the prompts of
  a step, and the occupancy a prompt costs a prefill server when steps are full;
- decode step time over a grid of batch sizes at the mean decode context, and its spread over the
  contexts of a batch (one vectorized call);
- colocated: the time a prompt's chunks add to the decode steps they ride in, at a few decode
  batch sizes (the prompt's own mixed steps minus the decode steps they replace);
- KV-transfer time of each prompt length over the link to the decode pool (prefill role);
- the memory-limited decode batch, with each sequence holding KV for its prompt and, on average,
  half its output (KV is paged on demand).

Tables are cached per (candidate, workload, engine): the optimizer asks for the same candidate
under several SLOs and headrooms. What depends on the workload alone or on the batch limit alone
(:mod:`~layoutopt.perf_model.workload_grids`) is computed once and shared by every candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model import calibration, kv_transfer, memory, stacked_tables, step
from layoutopt.perf_model.calibration import EngineLike, EngineProfile
from layoutopt.plan import Layout, Role
from layoutopt.perf_model.coefficients import forward_coefficients
from layoutopt.perf_model.links import Link
from layoutopt.perf_model.memo import identity_memo
from layoutopt.workloads.workload import Workload
from layoutopt.perf_model.workload_grids import DecodeGrid, WorkloadTerms, decode_batch_grid, read_only, workload_terms

# Prefill evaluations per candidate; lengths between them follow the quadratic through them.
_PREFILL_ANCHORS = 3


@dataclass(frozen=True, eq=False)
class PhaseCosts:
    """Tabulated step times of one instance for one workload (seconds, tokens)."""

    input_tokens: np.ndarray          # representative prompt lengths
    input_weights: np.ndarray         # their probabilities (sum 1)
    input_tokens_uncached: np.ndarray  # tokens prefill computes (prefix-cache hits removed)
    output_tokens_mean: float
    prefill_s: np.ndarray             # one prompt alone in a step
    prefill_occupancy_s: np.ndarray   # server time per prompt when steps are full, pipelining included
    kv_transfer_s: np.ndarray         # to the decode instance (0 unless role is prefill)
    batch_grid: np.ndarray            # decode batch sizes tabulated
    decode_step_s: np.ndarray         # decode step time per batch size
    chunk_tokens: int                 # token budget per step, instance total
    max_batch_size: int               # memory-limited sequences per instance
    prefill_servers: int              # prompts prefilled in parallel (attention-DP ranks x instances)
    # The two bottlenecks and the marginal cost of a prompt token in a full mixed chunk (closed
    # loop), computed when first read (``StepFacts``; ``StepFacts.known`` for given values).
    step_facts: "StepFacts"
    request_overhead_s: float = 0.0   # added to TTFT, occupies no GPU (API server, tokenizer)
    # Prompts arrive in groups of one per prefill server that share one lockstep step (a closed loop
    # on an engine with ``closed_loop_rank_groups``; load_colocated._colocated_tau), not as Poisson arrivals.
    prompts_in_rank_groups: bool = False
    # Prefill batching: a step of k prompts costs prefill_step_fixed_s once plus each prompt's own
    # work (prefill_s - prefill_step_fixed_s); a step takes at most prompts_per_step prompts.
    prefill_step_fixed_s: float = 0.0
    prompts_per_step: float = 1.0
    pipeline_depth: int = 1           # prefill steps overlap pp-fold (a stage frees after 1/pp)
    # Token budget of one prefill server's step (one attention-DP rank's scheduler); 0: chunk_tokens.
    server_chunk_tokens: int = 0
    # Output lengths: E[1 / (O - 1)] over requests (how much one prompt riding in a request's
    # steps moves its TPOT) and the decode-step spread per sequence (s, one standard deviation of
    # one sequence's contribution to a step, context spread included).
    inverse_decode_steps_mean: float = 0.0
    # Decode steps max(O - 1, 1) of the output-length quantile bins and their weights (TPOT mixes them).
    output_steps: np.ndarray | None = None
    output_weights: np.ndarray | None = None
    decode_seq_spread_s: np.ndarray | None = None
    # Colocated: seconds a prompt's chunks add to the decode steps they ride in, one row per
    # decode batch in prompt_batches, one column per input length.
    prompt_batches: np.ndarray | None = None
    prompt_extra_s: np.ndarray | None = None
    # The part of prompt_extra_s that is the eager launch floor of the step a prompt rides in
    # (EngineProfile.eager_layer_launch_us; None without one): paid once per step, however many
    # prompts share it.
    prompt_floor_s: np.ndarray | None = None
    # Tail of the prompt-length distribution, which the quantile bins truncate: prefill time as
    # a quadratic in the uncached length (c0, c1, c2 seconds) and E[L^0..4] of that length on a
    # fine quantile grid, for the second moment of prefill occupancy that queueing waits depend on.
    prefill_poly_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    input_moments: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 0.0)
    # Squared coefficient of variation of the KV a sequence holds (prompt + whole output, weighted
    # by its time in the batch) when KV memory, not --max-num-seqs, limits the batch; 0 otherwise.
    reservation_scv: float = 0.0

    @property
    def prefill_bottleneck(self) -> str:
        return self.step_facts.prefill_bottleneck

    @property
    def decode_bottleneck(self) -> str:
        return self.step_facts.decode_bottleneck

    @property
    def chunk_s_per_token(self) -> float:
        """Marginal seconds of a prompt token in a full mixed chunk (closed loop)."""
        return self.step_facts.chunk_s_per_token

    @property
    def server_budget_tokens(self) -> int:
        """Token budget of one prefill server's step (an attention-DP rank has its own scheduler)."""
        return self.server_chunk_tokens or self.chunk_tokens

    @property
    def mean_input_tokens(self) -> float:
        """Mean prompt tokens prefill computes per request."""
        return float((self.input_tokens_uncached * self.input_weights).sum())

    def decode_at(self, batch):
        """Decode step seconds at (fractional) batch sizes, interpolated; linear beyond the grid."""
        grid, values = self.batch_grid, self.decode_step_s
        batch = np.asarray(batch, dtype=float)
        inside = np.interp(batch, grid, values)
        if len(grid) > 1:
            last_batch, last_s, slope = self._decode_tail
            inside = np.where(batch > last_batch, last_s + slope * (batch - last_batch), inside)
        return inside

    def decode_at_one(self, batch: float) -> float:
        """``float(decode_at(batch))`` of one batch size, without the array conversions."""
        grid = self.batch_grid
        if len(grid) > 1 and batch > grid[-1]:
            last_batch, last_s, slope = self._decode_tail
            return last_s + slope * (batch - last_batch)
        return float(np.interp(batch, grid, self.decode_step_s))

    @cached_property
    def _decode_tail(self) -> tuple[float, float, float]:
        """(last batch, its step s, the last interval's slope): ``decode_at``'s line beyond the grid."""
        grid, values = self.batch_grid, self.decode_step_s
        slope = (values[-1] - values[-2]) / max(grid[-1] - grid[-2], 1e-9)
        return float(grid[-1]), float(values[-1]), float(slope)

    def decode_spread_at(self, batch) -> np.ndarray:
        """Standard deviation (s) of the decode step time over batches of mean size ``batch``:
        Poisson(n) sequences with spread contexts, sqrt(n E[(per-sequence time)^2])."""
        batch = np.asarray(batch, dtype=float)
        if self.decode_seq_spread_s is None:
            slope = np.gradient(self.decode_step_s, self.batch_grid) if len(self.batch_grid) > 1 else 0.0
            per_seq = np.interp(batch, self.batch_grid, slope) if len(self.batch_grid) > 1 else 0.0 * batch
        else:
            per_seq = np.interp(batch, self.batch_grid, self.decode_seq_spread_s)
        return np.sqrt(np.maximum(batch, 0.0)) * per_seq

    def prefill_moments(self, shift_s) -> tuple[np.ndarray, np.ndarray]:
        """(E[S], E[S^2]) of S = prefill time alone + ``shift_s`` (s, array) over the fine length grid."""
        c0, c1, c2 = self.prefill_poly_s
        m0, m1, m2, m3, m4 = self.input_moments
        a = c0 + np.asarray(shift_s, dtype=float)
        mean = a * m0 + c1 * m1 + c2 * m2
        second = a * a * m0 + 2 * a * c1 * m1 + (c1 * c1 + 2 * a * c2) * m2 + 2 * c1 * c2 * m3 + c2 * c2 * m4
        return mean, second

    @cached_property
    def prefill_tail_factor(self) -> float:
        """E[S^2] of prefill time over the fine length grid / over the quantile bins (>= 1): what the
        bins' truncated tail leaves out of a second moment."""
        _, fine = self.prefill_moments(0.0)
        binned = float((self.prefill_s**2 * self.input_weights).sum())
        return max(float(fine) / binned, 1.0) if binned > 0 else 1.0

    def prompt_extra_at(self, batch) -> np.ndarray:
        """Seconds each input length's chunks add to the steps they ride in, shape (batches, lengths)."""
        return self._per_batch(self.prompt_extra_s, batch)

    def prompt_floor_at(self, batch) -> np.ndarray | None:
        """The eager launch floor inside ``prompt_extra_at`` (same shape), or None without one."""
        return None if self.prompt_floor_s is None else self._per_batch(self.prompt_floor_s, batch)

    def _per_batch(self, table: np.ndarray | None, batch) -> np.ndarray:
        batch = np.atleast_1d(np.asarray(batch, dtype=float))
        anchors = self.prompt_batches
        if anchors is None or table is None:
            return np.zeros((len(batch), len(self.input_tokens)))
        if len(anchors) == 1:
            return np.repeat(table[:1], len(batch), axis=0)
        # np.minimum/np.maximum: the same numbers as np.clip at a fraction of its call overhead.
        i = np.minimum(np.maximum(np.searchsorted(anchors, batch) - 1, 0), len(anchors) - 2)
        w = np.minimum(np.maximum((batch - anchors[i]) / (anchors[i + 1] - anchors[i]), 0.0), 1.0)[:, None]
        return np.maximum(table[i] * (1.0 - w) + table[i + 1] * w, 0.0)


def rank_token_budget(profile: EngineProfile, dp_size: int) -> int:
    """Token budget of one attention-DP rank's scheduler step. vLLM gives every DP rank its own
    ``max_num_batched_tokens`` (each runs a scheduler, v1/engine/core.py:2281); SGLang divides
    ``chunked_prefill_size`` by the attention-DP size (0.5.23 arg_groups/parallel_hook.py:331,
    0.5.3 server_args.py:957)."""
    if profile.name.split("~", 1)[0] == "sglang":  # a trial profile while fitting is "sglang~fit"
        return max(profile.max_num_batched_tokens // max(dp_size, 1), 1)
    return profile.max_num_batched_tokens


def _anchored_poly(lengths: np.ndarray, evaluate, anchors: int = _PREFILL_ANCHORS) -> np.ndarray:
    """Coefficients (highest power first) of the quadratic through ``evaluate`` at ``anchors`` lengths
    (shortest, middle, longest): exact for a + b L + c L^2 (linear GEMMs and transfers, quadratic
    attention)."""
    last = len(lengths) - 1
    picks = sorted({0, last // 2, last}) if anchors >= 3 else sorted({0, last})
    x = [float(lengths[i]) for i in picks]
    y = [evaluate(v) for v in x]
    if len(x) == 1:
        return np.array([0.0, 0.0, y[0]])
    if len(x) == 2:
        slope = (y[1] - y[0]) / (x[1] - x[0])
        return np.array([0.0, slope, y[0] - slope * x[0]])
    # The quadratic through three points (divided differences), without a least-squares solve.
    d01 = (y[1] - y[0]) / (x[1] - x[0])
    d12 = (y[2] - y[1]) / (x[2] - x[1])
    c2 = (d12 - d01) / (x[2] - x[0])
    c1 = d01 - c2 * (x[0] + x[1])
    return np.array([c2, c1, y[0] - c1 * x[0] - c2 * x[0] ** 2])


def _anchored(lengths: np.ndarray, evaluate, anchors: int = _PREFILL_ANCHORS) -> np.ndarray:
    """``evaluate(L)`` at every length from the quadratic through ``anchors`` of them."""
    return _polyval2(_anchored_poly(lengths, evaluate, anchors), lengths)


def _polyval2(poly: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.polyval(poly, x)`` of a quadratic at finite ``x``, the same operations (Horner from a zero
    array: 0 x + c2, ...) without its conversions."""
    c2, c1, c0 = poly
    return ((0.0 * x + c2) * x + c1) * x + c0


def phase_costs(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload,
                engine: EngineLike = "vllm", kv_link: Link | None = None,
                max_batch_size: int | None = None, allow_cross_domain: bool = False) -> PhaseCosts:
    """Tabulate the step times ``role`` needs; raises LayoutError when the layout does not fit.

    ``max_batch_size`` caps the decode batch (an engine's --max-num-seqs); the memory limit
    applies either way. Results are cached (the tables are read-only).
    """
    return _phase_costs(model, gpu, layout, role, workload, engine, kv_link, max_batch_size, allow_cross_domain)


class StepFacts:
    """What only some callers read of a candidate's tables, computed on first use: the bottleneck
    of a median prompt's prefill and of a half-full decode step (reports), and the marginal cost
    of a prompt token in a full mixed chunk (the closed-loop model). The search's capacity
    bounds never read them."""

    def __init__(self, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, profile: EngineProfile,
                 median_tokens: float, batch_cap: int, decode_context: float, chunk: int, cached_mean: int,
                 grid: np.ndarray, decode_s: np.ndarray):
        self._args = (model, gpu, layout, role, profile, median_tokens, batch_cap, decode_context, chunk,
                      cached_mean, grid, decode_s)

    @classmethod
    def known(cls, prefill_bottleneck: str, decode_bottleneck: str, chunk_s_per_token: float) -> "StepFacts":
        facts = cls.__new__(cls)
        facts.__dict__.update(prefill_bottleneck=prefill_bottleneck, decode_bottleneck=decode_bottleneck,
                              chunk_s_per_token=chunk_s_per_token)
        return facts

    @cached_property
    def prefill_bottleneck(self) -> str:
        model, gpu, layout, role, profile, median_tokens = self._args[:6]
        if role == "decode":
            return "memory"
        return step.prefill_time(model, gpu, layout, int(round(median_tokens)), engine=profile).bottleneck

    @cached_property
    def decode_bottleneck(self) -> str:
        model, gpu, layout, role, profile, _, batch_cap, decode_context = self._args[:8]
        if role == "prefill":
            return "memory"
        return step.decode_step_time(model, gpu, layout, max(batch_cap // 2, 1), decode_context,
                                     engine=profile).bottleneck

    @cached_property
    def chunk_s_per_token(self) -> float:
        model, gpu, layout, role, profile, _, batch_cap, decode_context, chunk, cached_mean, grid, decode_s = self._args
        if role != "colocated":
            return 0.0
        reference = int(min(batch_cap, 16))
        full = step.mixed_step_time(model, gpu, layout, prefill_tokens=max(chunk - reference, 1),
                                    prefill_context_tokens=cached_mean, decode_batch=reference,
                                    decode_context_tokens=decode_context, engine=profile,
                                    chunk_ranks=layout.dp_size).total_s
        return max(full - float(np.interp(reference, grid, decode_s)), 0.0) / max(chunk - reference, 1)


@identity_memo  # the search passes the same frozen objects thousands of times: no pydantic hashing
@lru_cache(maxsize=4096)
def _phase_costs(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload,
                 engine: EngineLike, kv_link: Link | None, max_batch_size: int | None,
                 allow_cross_domain: bool) -> PhaseCosts:
    profile = calibration.resolve_engine(engine, gpu)
    memory.check_layout(model, gpu, layout, allow_cross_domain=allow_cross_domain)
    terms = workload_terms(workload)
    tokens, weights, uncached, hit = terms.tokens, terms.weights, terms.uncached, terms.hit
    mean_input, mean_uncached = terms.mean_input, terms.mean_uncached
    mean_output, output_reserve, inverse_steps = terms.output_moments
    servers = layout.dp_size
    rank_budget = rank_token_budget(profile, servers)
    chunk = rank_budget * servers

    # KV held per sequence: engines page KV on demand (vLLM/SGLang blocks, TRT-LLM pages are
    # allocated as tokens are generated, not the whole output up front), so a sequence holds its
    # prompt and the tokens generated so far. Averaged over the time sequences spend in the batch
    # (proportional to their output length) that is E[I] + E[O^2] / (2 E[O]): the batch the engine
    # admits when KV memory binds.
    full_context = mean_input + (output_reserve / 2.0 if role != "prefill" else 1.0)
    breakdown = stacked_tables.memory_breakdown(model, gpu, layout, full_context, profile)
    if breakdown.max_batch_size < 1:
        memory.check_fits(model, gpu, layout, context_tokens=int(round(full_context)), engine=profile)
    batch_cap = breakdown.max_batch_size if max_batch_size is None else min(breakdown.max_batch_size, max_batch_size)
    batch_cap = max(int(batch_cap), 1)
    kv_bound = max_batch_size is None or breakdown.max_batch_size < max_batch_size

    # A prefill instance with attention DP is dp servers, each rank its own scheduler with its own
    # budget (vLLM DPEngineCoreProc; SGLang's DP controller), stepping together through the MoE
    # collectives: a rank's step of k prompts is costed with every rank holding k (the load at
    # which capacity is decided; an idle rank runs a dummy batch). ``step.prefill_time`` takes the
    # instance's prompts, ceil(batch / dp) per rank.
    ranks = servers if role == "prefill" else 1

    def prefill_one(length: float) -> float:
        cached = int(round(length * hit))
        return step.prefill_time_s(model, gpu, layout, int(round(length)), batch_size=ranks, cached_tokens=cached,
                                   engine=profile)

    zeros = read_only(np.zeros_like(tokens))
    prefill_s, poly = zeros, np.zeros(3)
    if role != "decode":
        poly = _anchored_poly(tokens, prefill_one)
        prefill_s = _polyval2(poly, tokens)
    occupancy, fixed_s, per_step = zeros, 0.0, 1.0
    if role == "prefill":
        # A server's step of k prompts of the mean length costs T(k) = T0 + k t; T0 (per-step
        # overhead, weight and expert reads) is what batching spreads over the step's prompts.
        budget = rank_budget
        per_step = max(1.0, math.floor(budget / max(mean_uncached, 1.0)))
        if per_step >= 2:
            length = int(round(mean_input))
            cached = int(round(mean_input * hit))
            one = step.prefill_time_s(model, gpu, layout, length, ranks, cached, engine=profile)
            full = step.prefill_time_s(model, gpu, layout, length, int(per_step) * ranks, cached, engine=profile)
            fixed_s = min(max((per_step * one - full) / (per_step - 1.0), 0.0), one)
        full_batch = np.maximum(np.minimum(budget / np.maximum(uncached, 1.0), per_step), 1.0)
        occupancy = (prefill_s - fixed_s * (1.0 - 1.0 / full_batch)) / layout.pp_size
    kv_s = zeros
    if role == "prefill" and kv_link is not None:
        kv_s = _anchored(tokens, lambda length: kv_transfer.kv_transfer_time_s(
            model, layout.kv_precision, int(round(length)), kv_link), anchors=2)

    # Mean context of a decoding sequence, weighting each by its time in the batch (its output
    # length): E[I] + E[O^2] / (2 E[O]).
    decode_context = mean_input + output_reserve / 2.0
    decode_grid = decode_batch_grid(batch_cap)
    grid = decode_grid.batches
    decode_s = np.zeros(len(grid))
    spread_s = None
    if role != "prefill":
        # Two context columns: the step at the mean context and at twice it give the per-sequence
        # cost of context, hence the spread of a batch whose contexts vary.
        table = _decode_table(model, gpu, layout, profile, decode_grid, decode_context)
        decode_s = table[:, 0]
        per_context_token = (table[:, 1] - table[:, 0]) / (grid * decode_context)
        per_seq = decode_grid.gradient(decode_s)
        context_var = terms.input_var + output_reserve**2 / 12.0
        spread_s = np.sqrt(per_seq**2 + per_context_token**2 * context_var)

    batches = extra = floor = None
    if role == "colocated":
        batches, extra = _prompt_extra(model, gpu, layout, profile, terms, decode_grid, decode_s, decode_context)
        if stacked_tables.has_launch_floor(profile):
            _, graphed = _prompt_extra(model, gpu, layout, stacked_tables.without_launch_floor(profile), terms,
                                       decode_grid, decode_s, decode_context)
            floor = read_only(np.maximum(extra - graphed, 0.0))
    facts = StepFacts(model, gpu, layout, role, profile, float(tokens[terms.median_index]), batch_cap,
                       decode_context, chunk, int(round(mean_input * hit)), grid, decode_s)
    return PhaseCosts(
        input_tokens=tokens, input_weights=weights, input_tokens_uncached=uncached, output_tokens_mean=mean_output,
        prefill_s=prefill_s, prefill_occupancy_s=occupancy, kv_transfer_s=kv_s, batch_grid=decode_grid.values,
        decode_step_s=decode_s, chunk_tokens=int(chunk),
        max_batch_size=batch_cap, prefill_servers=servers, server_chunk_tokens=rank_budget,
        step_facts=facts,
        request_overhead_s=profile.request_overhead_s(role),
        prefill_step_fixed_s=fixed_s, prompts_per_step=per_step,
        pipeline_depth=layout.pp_size if role == "prefill" else 1, inverse_decode_steps_mean=inverse_steps,
        output_steps=terms.output_steps, output_weights=terms.output_weights,
        decode_seq_spread_s=spread_s, prompt_batches=batches, prompt_extra_s=extra, prompt_floor_s=floor,
        prefill_poly_s=(float(poly[2]), float(poly[1]) / (1.0 - hit), float(poly[0]) / (1.0 - hit) ** 2)
        if hit < 1.0 else (float(poly.sum()), 0.0, 0.0),
        reservation_scv=terms.reservation_scv if kv_bound and role != "prefill" else 0.0,
        input_moments=terms.input_moments,
    )


# Decode tables by (coefficients, batch grid, context), shared with the stacked prefetch.
_decode_tables = stacked_tables.decode_tables


def _decode_table(model: ModelSpec, gpu: GpuSpec, layout: Layout, profile: EngineProfile, decode_grid: DecodeGrid,
                  decode_context: float) -> np.ndarray:
    """Decode step seconds (batches, 2) at ``decode_grid``'s batches and the mean and twice the mean context."""
    coefficients = forward_coefficients(model, gpu, layout, profile, None)
    return _decode_tables.get(stacked_tables.decode_table_key(coefficients, decode_grid, decode_context),
                              (coefficients, decode_grid),
                              lambda: read_only(np.asarray(step.decode_step_time_array(
                                  model, gpu, layout, decode_grid.values[:, None],
                                  np.array([[decode_context, 2.0 * decode_context]]), profile), dtype=float)))


def _prompt_extra(model: ModelSpec, gpu: GpuSpec, layout: Layout, profile: EngineProfile, terms: WorkloadTerms,
                  decode_grid: DecodeGrid, decode_s: np.ndarray, decode_context: float) -> tuple[np.ndarray, np.ndarray]:
    """(decode batches, seconds each prompt length adds to the steps its chunks ride in).

    A prompt of L tokens at decode batch n is cut into ceil(L / (C - n)) chunks. Its whole work
    (GEMM rows, causal attention over its own prefix) is the mixed step with all L tokens; each
    further chunk's step reads the weights again but replaces a decode-only step, which read them
    too, so it adds only the GEMM rows of the decode tokens and the per-step overhead, small next
    to the chunk's own compute. What a prompt adds is therefore mixed(L, n) - d(n), the quantity
    tabulated here at a few anchor lengths (``WorkloadTerms``); lengths between anchors
    interpolate piecewise linearly. With attention DP the prompt sits on the one rank its request
    was routed to, and the lockstep step waits for that rank (``step._chunk_placement``).
    """
    coefficients = forward_coefficients(model, gpu, layout, profile, None)
    known = stacked_tables.prompt_extras.peek(stacked_tables.prompt_extra_key(coefficients, decode_grid,
                                                                              decode_context, terms))
    if known is not None:  # computed with other layouts' (stacked_tables.prefetch_step_tables)
        return known
    batches = decode_grid.mixed_batches
    # Every (batch, length) anchor in one vectorized roofline pass: rows batches, columns lengths.
    mixed = step.mixed_step_time_array(model, gpu, layout, prefill_tokens=terms.anchor_new_tokens[None, :],
                                       prefill_context_tokens=terms.anchor_cached_tokens[None, :],
                                       decode_batch=batches.astype(float)[:, None],
                                       decode_context_tokens=decode_context, engine=profile, chunk_ranks=1)
    base = np.interp(batches, decode_grid.batches, decode_s)[:, None]
    values = np.maximum(mixed - base, 0.0)
    return batches.astype(float), terms.to_lengths(values)
