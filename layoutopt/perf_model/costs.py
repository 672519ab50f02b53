"""Step-time tables of one instance, computed once from the per-step physics and reused by the load models.

The load layer (``load.py``) evaluates an instance at many request rates; calling the roofline for
each would be slow, so :func:`phase_costs` tabulates, in seconds:

- prefill time of each representative prompt length (a quantile grid of the workload's input
  distribution) alone, and the occupancy it costs a prefill server when prompts are batched up to
  the engine's token budget;
- decode step time over a grid of batch sizes at the mean decode context (one vectorized call);
- the marginal cost of a prompt token inside a mixed (chunked-prefill) step;
- KV-transfer time of each prompt length over the link to the decode pool (prefill role);
- the memory-limited decode batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model import calibration, kv_transfer, memory, step
from layoutopt.perf_model.layout import Layout, Role
from layoutopt.perf_model.links import Link
from layoutopt.workloads.workload import Workload

# Quantile bins of the prompt-length distribution: dense in the tail, where p90/p99 TTFT live.
_BIN_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0)
# Prefill evaluations per candidate; lengths between them follow the quadratic through them.
_PREFILL_ANCHORS = 3
_DECODE_GRID_POINTS = 28
# Decode batch at which the marginal cost of prompt tokens in a mixed step is measured.
_REFERENCE_DECODE_BATCH = 16


class LoadProfile(BaseModel):
    """Scheduling constants of one engine for the load layer (``data/load_profiles.yaml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    closed_loop_cohort_fraction: float = Field(ge=0, description="f in prompts ahead = f (N - 1)^alpha")
    closed_loop_cohort_exponent: float = Field(ge=0, le=1, description="alpha: 0 constant, 1 whole rounds")
    request_overhead_ms: float = Field(ge=0, description="per request, off the GPU: API server, tokenizer, "
                                                         "first-token detokenization and streaming")
    source: str


@lru_cache(maxsize=1)
def _load_profiles() -> dict[str, LoadProfile]:
    text = resources.files("layoutopt.perf_model").joinpath("data/load_profiles.yaml").read_text()
    return {name: LoadProfile(**fields) for name, fields in yaml.safe_load(text).items()}


def get_load_profile(engine: str) -> LoadProfile:
    """The load profile of ``engine``; a fit's trial name 'vllm~fit3' resolves to its base engine."""
    profiles = _load_profiles()
    return profiles.get(engine) or profiles.get(engine.split("~")[0].lower()) or profiles["vllm"]


@dataclass(frozen=True, eq=False)
class PhaseCosts:
    """Tabulated step times of one instance for one workload (seconds, tokens)."""

    input_tokens: np.ndarray          # representative prompt lengths
    input_weights: np.ndarray         # their probabilities (sum 1)
    input_tokens_uncached: np.ndarray  # tokens prefill computes (prefix-cache hits removed)
    output_tokens_mean: float
    prefill_s: np.ndarray             # one prompt alone
    prefill_occupancy_s: np.ndarray   # server time per prompt when batched, pipelining included
    kv_transfer_s: np.ndarray         # to the decode instance (0 unless role is prefill)
    batch_grid: np.ndarray            # decode batch sizes tabulated
    decode_step_s: np.ndarray         # decode step time per batch size
    prefill_s_per_token: float        # marginal cost of a prompt token in a mixed step (one prompt)
    chunk_s_per_token: float          # same with a full chunk in the step
    chunk_step_s: float               # a step carrying a full chunk
    chunk_tokens: int                 # prompt-token budget per step, instance total
    max_batch_size: int               # memory-limited decode sequences per instance
    prefill_servers: int              # prompts prefilled in parallel (attention-DP ranks)
    prefill_bottleneck: str
    decode_bottleneck: str
    request_overhead_s: float = 0.0   # added to TTFT, occupies no GPU (API server, tokenizer)

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
            slope = (values[-1] - values[-2]) / max(grid[-1] - grid[-2], 1e-9)
            inside = np.where(batch > grid[-1], values[-1] + slope * (batch - grid[-1]), inside)
        return inside


def length_grid(dist) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, weights) representing a length distribution by quantile bins, merged when equal."""
    tokens, weights = _length_grid_cached(type(dist), dist.model_dump_json())
    return tokens.copy(), weights.copy()


@lru_cache(maxsize=256)
def _length_grid_cached(kind: type, dumped: str) -> tuple[np.ndarray, np.ndarray]:
    dist = kind.model_validate_json(dumped)
    edges = np.asarray(_BIN_EDGES)
    mids = 0.5 * (edges[1:] + edges[:-1])
    tokens = np.array([max(dist.quantile_tokens(float(q)), 1.0) for q in mids])
    weights = np.diff(edges)
    unique, inverse = np.unique(np.round(tokens), return_inverse=True)
    merged = np.zeros(len(unique))
    np.add.at(merged, inverse, weights)
    # Keep the distribution's mean: rescale the grid so sum(w t) = mean.
    scale = dist.mean_tokens / float((unique * merged).sum())
    return np.maximum(unique * scale, 1.0), merged / merged.sum()


def _anchored(lengths: np.ndarray, evaluate, anchors: int = _PREFILL_ANCHORS) -> np.ndarray:
    """``evaluate(L)`` at ``anchors`` lengths (shortest, middle, longest), the rest by the quadratic
    through them: exact for a + b L + c L^2 (linear GEMMs and transfers, quadratic attention)."""
    if len(lengths) <= anchors:
        return np.array([evaluate(float(x)) for x in lengths])
    picks = np.unique(np.linspace(0, len(lengths) - 1, anchors).round().astype(int))
    x = lengths[picks]
    y = np.array([evaluate(float(v)) for v in x])
    return np.polyval(np.polyfit(x, y, min(2, len(x) - 1)), lengths)


def phase_costs(model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, workload: Workload,
                engine: str = "vllm", kv_link: Link | None = None,
                max_batch_size: int | None = None, allow_cross_domain: bool = False) -> PhaseCosts:
    """Tabulate the step times ``role`` needs; raises LayoutError when the layout does not fit.

    ``max_batch_size`` caps the decode batch (an engine's --max-num-seqs); the memory limit
    applies either way.
    """
    profile = calibration.get_engine_profile(engine)
    memory.check_layout(model, gpu, layout, allow_cross_domain=allow_cross_domain)
    tokens, weights = length_grid(workload.input_tokens)
    hit = workload.prefix_cache_hit_fraction
    uncached = np.maximum(tokens * (1.0 - hit), 1.0)
    mean_input = float((tokens * weights).sum())
    mean_output = float(workload.mean_output_tokens)
    servers = layout.dp_size
    chunk = profile.max_num_batched_tokens * servers

    full_context = mean_input + (mean_output if role != "prefill" else 1.0)
    breakdown = memory.memory_breakdown(model, gpu, layout, context_tokens=int(round(full_context)), engine=engine)
    if breakdown.max_batch_size < 1:
        memory.check_fits(model, gpu, layout, context_tokens=int(round(full_context)), engine=engine)
    batch_cap = breakdown.max_batch_size if max_batch_size is None else min(breakdown.max_batch_size, max_batch_size)
    batch_cap = max(int(batch_cap), 1)

    def prefill_one(length: float) -> float:
        cached = int(round(length * hit))
        return step.prefill_time(model, gpu, layout, int(round(length)), batch_size=1, cached_tokens=cached,
                                 engine=engine).total_s

    def prefill_batched(length: float) -> float:
        per_batch = max(1, int(chunk // max(length, 1.0)))
        cached = int(round(length * hit))
        batch_s = step.prefill_time(model, gpu, layout, int(round(length)), batch_size=per_batch,
                                    cached_tokens=cached, engine=engine).total_s
        return batch_s / per_batch

    # Each role tabulates only what its load model reads: a decode instance never prefills, only
    # a prefill instance batches whole prompts and ships KV, only a colocated one mixes steps.
    zeros = np.zeros_like(tokens)
    prefill_s = _anchored(tokens, prefill_one) if role != "decode" else zeros
    occupancy = zeros
    if role == "prefill":
        occupancy = np.minimum(_anchored(tokens, prefill_batched), prefill_s) / layout.pp_size
    kv_s = zeros
    if role == "prefill" and kv_link is not None:
        kv_s = _anchored(tokens, lambda length: kv_transfer.kv_transfer_time_s(
            model, layout.kv_precision, int(round(length)), kv_link), anchors=2)

    decode_context = mean_input + mean_output / 2.0
    grid = np.unique(np.round(np.geomspace(1, batch_cap, _DECODE_GRID_POINTS))).astype(np.int64)
    decode_s = np.asarray(step.decode_step_time_array(
        model, gpu, layout, grid, np.full(len(grid), decode_context), engine), dtype=float)

    reference = int(min(batch_cap, _REFERENCE_DECODE_BATCH))
    reference_s = float(np.interp(reference, grid, decode_s))
    mean_uncached = float((uncached * weights).sum())

    def marginal(prompt_tokens: int) -> tuple[float, float]:
        mixed = step.mixed_step_time(model, gpu, layout, prefill_tokens=prompt_tokens,
                                     prefill_context_tokens=int(round(mean_input * hit)), decode_batch=reference,
                                     decode_context_tokens=int(round(decode_context)), engine=engine).total_s
        return max(mixed - reference_s, 0.0) / prompt_tokens, mixed

    per_token_one = per_token_full = chunk_step = 0.0
    if role == "colocated":
        per_token_one, _ = marginal(int(max(min(mean_uncached, chunk - reference), 1)))
        per_token_full, chunk_step = marginal(int(max(chunk - reference, 1)))

    middle = min(len(tokens) - 1, int(np.searchsorted(np.cumsum(weights), 0.5)))
    prefill_bottleneck = decode_bottleneck = "memory"
    if role != "decode":
        prefill_bottleneck = step.prefill_time(model, gpu, layout, int(round(tokens[middle])),
                                               engine=engine).bottleneck
    if role != "prefill":
        decode_bottleneck = step.decode_step_time(model, gpu, layout, max(batch_cap // 2, 1),
                                                  int(round(decode_context)), engine=engine).bottleneck
    return PhaseCosts(
        input_tokens=tokens, input_weights=weights, input_tokens_uncached=uncached, output_tokens_mean=mean_output,
        prefill_s=prefill_s, prefill_occupancy_s=occupancy, kv_transfer_s=kv_s, batch_grid=grid.astype(float),
        decode_step_s=decode_s, prefill_s_per_token=per_token_one, chunk_s_per_token=per_token_full,
        chunk_step_s=chunk_step, chunk_tokens=int(chunk), max_batch_size=batch_cap, prefill_servers=servers,
        prefill_bottleneck=prefill_bottleneck, decode_bottleneck=decode_bottleneck,
        request_overhead_s=get_load_profile(engine).request_overhead_ms * 1e-3 if role != "decode" else 0.0,
    )
