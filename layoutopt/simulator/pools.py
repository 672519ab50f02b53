"""What the event loop simulates: pools of identical instances, requests, and per-pool counters.

Everything here is plain data prepared before the loop starts; no performance-model calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from layoutopt.plan import Role
from layoutopt.simulator.step_times import StepTimes

# vLLM's default token budget per scheduler step (max_num_batched_tokens) for online serving on
# large-memory GPUs: 8192 (vllm/engine/arg_utils.py, default_max_num_batched_tokens, V1 engine).
DEFAULT_MAX_BATCHED_TOKENS = 8192


@dataclass(frozen=True)
class PoolSpec:
    """One pool as the simulator sees it: identical instances, their step times and limits.

    ``max_batch_size`` caps sequences in flight per instance (vLLM's --max-num-seqs);
    ``kv_capacity_bytes`` and ``kv_bytes_per_sequence(context_tokens)`` bound them by KV memory;
    ``max_batched_tokens`` is the token budget of one step; ``kv_transfer_s(prompt_tokens)`` is
    the time a decode instance takes to receive one prompt's KV; ``routing_weight`` scales the
    router's notion of an instance's speed (colocated and decode pools); a prefill pool with
    ``pipeline_depth`` pp starts its next step after 1/pp of a step (pipeline parallelism);
    ``request_overhead_s`` is the engine's per-request time off the GPU (API server, tokenizer,
    streaming) that a request spends before it reaches the pool (pools that receive arrivals);
    ``servers_per_instance`` schedulers run in each instance (a prefill instance's attention-DP
    ranks, each with its own queue, token budget and batch limit: then ``max_batch_size``,
    ``max_batched_tokens``, ``kv_capacity_bytes`` and ``step_times`` describe one rank).
    """

    name: str
    role: Role
    num_instances: int
    step_times: StepTimes
    max_batch_size: int
    kv_capacity_bytes: float = float("inf")
    kv_bytes_per_sequence: Callable[[float], float] = lambda context_tokens: 0.0
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    kv_transfer_s: Callable[[int], float] = lambda prompt_tokens: 0.0
    routing_weight: float = 1.0
    pipeline_depth: int = 1
    request_overhead_s: float = 0.0
    servers_per_instance: int = 1

    def __post_init__(self) -> None:
        if (self.num_instances < 1 or self.max_batch_size < 1 or self.max_batched_tokens < 1
                or self.servers_per_instance < 1):
            raise ValueError(f"pool {self.name}: instances, max_batch_size, max_batched_tokens and "
                             "servers_per_instance must be >= 1")
        if self.routing_weight <= 0 or self.pipeline_depth < 1 or self.request_overhead_s < 0:
            raise ValueError(f"pool {self.name}: routing_weight must be > 0, pipeline_depth >= 1, "
                             "request_overhead_s >= 0")


@dataclass(frozen=True)
class Requests:
    """Arrival times (s) and lengths (tokens) of the simulated requests, in arrival order."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    cached_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if not (len(self.prompt_tokens) == len(self.cached_tokens) == len(self.output_tokens) == n):
            raise ValueError("every request array must have the same length")
        if n and np.any(np.diff(self.arrival_s) < 0):
            raise ValueError("arrival_s must be sorted")

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)


def make_requests(rng: np.random.Generator, input_tokens: np.ndarray, output_tokens: np.ndarray,
                  rate_rps: float, prefix_cache_hit_fraction: float = 0.0) -> Requests:
    """Poisson arrivals at ``rate_rps`` for the given lengths; cached tokens leave >= 1 to compute."""
    n = len(input_tokens)
    gaps_s = rng.exponential(1.0 / rate_rps, size=n)
    arrival_s = np.cumsum(gaps_s) - gaps_s[0]
    prompt = np.asarray(input_tokens, dtype=np.int64)
    cached = np.minimum(np.floor(prompt * prefix_cache_hit_fraction).astype(np.int64), prompt - 1)
    return Requests(arrival_s=arrival_s, prompt_tokens=prompt, cached_tokens=cached,
                    output_tokens=np.asarray(output_tokens, dtype=np.int64))


@dataclass
class PoolCounters:
    """Per-pool accumulators, restricted to the measurement window [window_start_s, window_end_s].

    The queue counts requests waiting at the pool's instances: for prefill and colocated pools,
    those whose prompt has not started; for decode pools, those not yet in the decode batch
    (waiting for memory, their KV transfer, or the next step).
    """

    window_start_s: float
    window_end_s: float
    busy_s: float = 0.0
    decode_batch_area: float = 0.0
    queue_length: int = 0
    queue_area: float = 0.0
    queue_max: int = 0
    queue_at_start: int = 0
    queue_at_end: int = 0
    last_change_s: float = 0.0
    num_steps: int = 0
    _seen_start: bool = field(default=False, repr=False)
    _seen_end: bool = field(default=False, repr=False)

    def overlap_s(self, start_s: float, end_s: float) -> float:
        # Conditional expressions rather than min/max: this runs several times per event.
        end = end_s if end_s < self.window_end_s else self.window_end_s
        start = start_s if start_s > self.window_start_s else self.window_start_s
        return end - start if end > start else 0.0

    def add_busy(self, start_s: float, end_s: float, decode_batch: int) -> None:
        inside = self.overlap_s(start_s, end_s)
        self.busy_s += inside
        self.decode_batch_area += decode_batch * inside
        self.num_steps += 1

    def change_queue(self, now_s: float, delta: int) -> None:
        q = self.queue_length
        self.queue_area += q * self.overlap_s(self.last_change_s, now_s)
        if not self._seen_start and now_s >= self.window_start_s:
            self.queue_at_start, self._seen_start = q, True
        if not self._seen_end and now_s >= self.window_end_s:
            self.queue_at_end, self._seen_end = q, True
        self.last_change_s = now_s
        q += delta
        self.queue_length = q
        if q > self.queue_max and self.window_start_s <= now_s <= self.window_end_s:
            self.queue_max = q

    def finish(self, end_s: float) -> None:
        """Close the queue integral at the end of the run."""
        self.change_queue(max(end_s, self.window_end_s), 0)
