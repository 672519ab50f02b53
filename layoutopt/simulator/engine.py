"""The discrete-event loop: routing, prefill batching, KV transfer, continuous-batching decode.

Events are engine steps, not tokens. A decode batch whose membership does not change runs as one
*segment* of k steps (until its next sequence finishes), priced at the step time of the segment's
mean context; a sequence that becomes ready mid-segment cuts the segment at the next step
boundary, where it joins (continuous batching). Steps that carry prompt tokens (prefill, or
chunked prefill mixed into decode on colocated instances) are one event each.

Scheduling follows vLLM: first-come-first-served admission that stops at the first request that
does not fit (slots = ``max_batch_size``, KV bytes reserved for the whole sequence so nothing is
ever preempted); each step spends a token budget, decode tokens first, then prompt chunks in
arrival order. A disaggregated request's KV leaves the prefill instance at the end of its
prefill; the decode instance admits it when memory allows, then receives the KV over its link
(transfers to one decode instance queue behind each other), and the client's first token is
the one the decode instance's first step produces (as with vLLM's disaggregated proxy, where the
prefill instance's token is not streamed), so the decode instance runs all the output steps.
Colocated requests see their first token at the end of their last prefill chunk.
TPOT is (finish - first token) / (output tokens - 1).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from layoutopt.simulator.pools import PoolCounters, PoolSpec, Requests

_IDLE, _STEP, _SEGMENT = 0, 1, 2
_STEP_END, _TRANSFER_DONE, _PREFILL_DONE = 0, 1, 2


@dataclass(frozen=True)
class EngineTrace:
    """Per-request times (s; NaN when never reached) and per-pool counters of one run."""

    first_token_s: np.ndarray
    finish_s: np.ndarray
    counters: list[PoolCounters]
    end_s: float


class _Instance:
    """Mutable state of one engine instance."""

    __slots__ = ("spec", "counters", "role", "waiting", "prefilling", "ready", "decoding", "num_decoding",
                 "context_base_sum", "steps", "num_running", "reserved_bytes", "mode", "version", "start_s",
                 "segment_step_s", "segment_steps", "completed", "step_decode_batch", "outstanding",
                 "link_free_s", "work_rate")

    def __init__(self, spec: PoolSpec, counters: PoolCounters, work_rate: float):
        self.spec, self.counters, self.role = spec, counters, spec.role
        self.waiting: deque[int] = deque()
        self.prefilling: list[list] = []  # [rid, tokens left to compute, context so far, started]
        self.ready: list[int] = []  # decode role: KV arrived, joins at the next step boundary
        self.decoding: list[tuple[int, int]] = []  # heap of (step at which it finishes, rid)
        self.num_decoding = 0
        self.context_base_sum = 0.0  # sum over decoding sequences of (context - steps); see _mean_context
        self.steps = 0
        self.num_running = 0
        self.reserved_bytes = 0.0
        self.mode = _IDLE
        self.version = 0
        self.start_s = 0.0
        self.segment_step_s = 0.0
        self.segment_steps = 0
        self.completed: list[int] = []  # colocated: prompts the running step finishes
        self.step_decode_batch = 0
        self.outstanding = 0.0  # routing load: prompt tokens (prefill) or requests (others)
        self.link_free_s = 0.0
        self.work_rate = work_rate


class Simulation:
    """One run over fixed pools and requests; call :meth:`run` once."""

    def __init__(self, pools: list[PoolSpec], requests: Requests, window_start_s: float, window_end_s: float,
                 colocated_share: float = 1.0, rng: np.random.Generator | None = None):
        roles = {p.role for p in pools}
        if "prefill" in roles and "decode" not in roles or "decode" in roles and "prefill" not in roles:
            raise ValueError("a disaggregated plan needs both a prefill and a decode pool")
        self.requests = requests
        self.counters = [PoolCounters(window_start_s, window_end_s) for _ in pools]
        self.front: list[_Instance] = []
        self.colocated: list[_Instance] = []
        self.decoders: list[_Instance] = []
        for spec, counters in zip(pools, self.counters, strict=True):
            rate = spec.routing_weight
            if spec.role == "prefill":
                # Prompt tokens per second at full steps; a pipeline holds pp steps in flight.
                full_s = spec.step_times.prefill_step_s(spec.max_batched_tokens, 1, 0.0)
                rate = spec.max_batched_tokens * spec.pipeline_depth / full_s
            group = {"prefill": self.front, "colocated": self.colocated, "decode": self.decoders}[spec.role]
            group.extend(_Instance(spec, counters, rate) for _ in range(spec.num_instances * spec.servers_per_instance))
        # The engine's per-request overhead (API server, tokenizer) delays every arrival equally.
        self.request_overhead_s = max((p.request_overhead_s for p in pools if p.role != "decode"), default=0.0)
        self.colocated_share = colocated_share if self.colocated and self.front else (1.0 if self.colocated else 0.0)
        self.rng = rng or np.random.default_rng(0)
        n = requests.num_requests
        self.prompt = requests.prompt_tokens.tolist()
        self.cached = requests.cached_tokens.tolist()
        self.output = requests.output_tokens.tolist()
        self.first_token_s = [float("nan")] * n
        self.finish_s = [float("nan")] * n
        self.need_bytes = [0.0] * n
        self.context_base = [0.0] * n
        self.events: list[tuple] = []
        self.event_seq = 0

    # ------------------------------------------------------------------ loop
    def run(self) -> EngineTrace:
        arrivals = (self.requests.arrival_s + self.request_overhead_s).tolist()
        to_colocated = self.rng.random(len(arrivals)) < self.colocated_share
        events, pop = self.events, heapq.heappop
        n, i, now = len(arrivals), 0, 0.0
        while True:
            if events and (i >= n or events[0][0] <= arrivals[i]):
                now, _, kind, inst, payload = pop(events)
                if kind == _STEP_END:
                    if payload == inst.version:
                        self._step_end(inst, now)
                elif kind == _TRANSFER_DONE:
                    self._transfer_done(inst, payload, now)
                else:
                    self._prefill_done(inst, payload, now)
            elif i < n:
                now = arrivals[i]
                self._arrive(i, now, bool(to_colocated[i]))
                i += 1
            else:
                break
        for counters in self.counters:
            counters.finish(now)
        return EngineTrace(np.asarray(self.first_token_s), np.asarray(self.finish_s), self.counters, now)

    def _push(self, time_s: float, kind: int, inst: _Instance, payload) -> None:
        self.event_seq += 1
        heapq.heappush(self.events, (time_s, self.event_seq, kind, inst, payload))

    # ------------------------------------------------------------------ routing
    def _arrive(self, rid: int, now: float, to_colocated: bool) -> None:
        if to_colocated:
            inst = min(self.colocated, key=lambda x: x.outstanding / x.work_rate)
            inst.outstanding += 1
        else:
            inst = min(self.front, key=lambda x: x.outstanding / x.work_rate)
            inst.outstanding += self.prompt[rid] - self.cached[rid]
        inst.waiting.append(rid)
        inst.counters.change_queue(now, 1)
        if self._admit(inst, now):
            self._wake(inst, now)

    def _to_decode(self, rid: int, now: float) -> None:
        inst = min(self.decoders, key=lambda x: x.outstanding / x.work_rate)
        inst.outstanding += 1
        inst.waiting.append(rid)
        inst.counters.change_queue(now, 1)
        self._admit(inst, now)

    # ------------------------------------------------------------------ memory
    def _admit(self, inst: _Instance, now: float) -> bool:
        """Admit waiting requests in order while slots and KV memory allow; True if any was."""
        spec, admitted = inst.spec, False
        while inst.waiting:
            rid = inst.waiting[0]
            tokens = self.prompt[rid] + (0 if inst.role == "prefill" else self.output[rid])
            need = spec.kv_bytes_per_sequence(tokens)
            # An instance with nothing running takes the request even if it needs more KV than the
            # whole cache (it would be preempted and recomputed in pieces; never a deadlock here).
            if inst.num_running and (inst.num_running >= spec.max_batch_size
                                     or inst.reserved_bytes + need > spec.kv_capacity_bytes):
                break
            inst.waiting.popleft()
            inst.num_running += 1
            inst.reserved_bytes += need
            self.need_bytes[rid] = need
            admitted = True
            if inst.role == "decode":
                start = max(now, inst.link_free_s)
                inst.link_free_s = start + spec.kv_transfer_s(self.prompt[rid])
                self._push(inst.link_free_s, _TRANSFER_DONE, inst, rid)
            else:
                inst.prefilling.append([rid, self.prompt[rid] - self.cached[rid], self.cached[rid], False])
        return admitted

    def _release(self, inst: _Instance, rid: int) -> None:
        inst.num_running -= 1
        inst.reserved_bytes -= self.need_bytes[rid]

    # ------------------------------------------------------------------ steps
    def _wake(self, inst: _Instance, now: float) -> None:
        """New work for ``inst``: start now if idle, else cut a decode segment at its next step."""
        if inst.mode == _IDLE:
            self._schedule_after_joins(inst, now)
        elif inst.mode == _SEGMENT and inst.segment_step_s > 0:
            done = int((now - inst.start_s) / inst.segment_step_s) + 1
            if done < inst.segment_steps:
                inst.segment_steps = done
                inst.version += 1
                self._push(inst.start_s + done * inst.segment_step_s, _STEP_END, inst, inst.version)

    def _transfer_done(self, inst: _Instance, rid: int, now: float) -> None:
        inst.ready.append(rid)
        self._wake(inst, now)

    def _join_ready(self, inst: _Instance, now: float) -> list[int]:
        """Put sequences whose KV has arrived into the batch; returns them (first token pending)."""
        joined = inst.ready
        for rid in joined:
            self._start_decoding(inst, rid, self.prompt[rid], self.output[rid])
            inst.counters.change_queue(now, -1)
        inst.ready = []
        return joined

    def _start_decoding(self, inst: _Instance, rid: int, context_tokens: int, num_steps: int) -> None:
        base = context_tokens - inst.steps
        self.context_base[rid] = base
        inst.context_base_sum += base
        inst.num_decoding += 1
        heapq.heappush(inst.decoding, (inst.steps + num_steps, rid))

    def _finish(self, inst: _Instance, rid: int, now: float) -> None:
        self.finish_s[rid] = now
        inst.outstanding -= 1
        self._release(inst, rid)

    def _step_end(self, inst: _Instance, now: float) -> None:
        if inst.mode == _SEGMENT:
            inst.counters.add_busy(inst.start_s, now, inst.num_decoding)
            inst.steps += inst.segment_steps
        else:
            inst.counters.add_busy(inst.start_s, now, inst.step_decode_batch)
            if inst.step_decode_batch:
                inst.steps += 1
            if inst.role == "colocated":
                self._first_tokens(inst, now)
        decoding = inst.decoding
        while decoding and decoding[0][0] <= inst.steps:
            rid = heapq.heappop(decoding)[1]
            inst.num_decoding -= 1
            inst.context_base_sum -= self.context_base[rid]
            self._finish(inst, rid, now)
        if inst.waiting:
            self._admit(inst, now)
        self._schedule_after_joins(inst, now)

    def _schedule_after_joins(self, inst: _Instance, now: float) -> None:
        joined = self._join_ready(inst, now) if inst.ready else ()
        self._schedule(inst, now)
        if joined:  # decode role: the first token comes out of the step that starts now
            first_s = now + inst.segment_step_s
            for rid in joined:
                self.first_token_s[rid] = first_s

    def _first_tokens(self, inst: _Instance, now: float) -> None:
        """Colocated: prompts whose last chunk ran in the step that ended now emit their first token."""
        for rid in inst.completed:
            self.first_token_s[rid] = now
            if self.output[rid] <= 1:
                self._finish(inst, rid, now)
            else:
                self._start_decoding(inst, rid, self.prompt[rid] + 1, self.output[rid] - 1)
        inst.completed = []

    def _prefill_done(self, inst: _Instance, rids: list[int], now: float) -> None:
        """Prefill role: the prompts' KV is complete; hand each to a decode instance."""
        for rid in rids:
            inst.outstanding -= self.prompt[rid] - self.cached[rid]
            self._release(inst, rid)
            self._to_decode(rid, now)
        if inst.waiting:
            self._admit(inst, now)
        if inst.mode == _IDLE:
            self._schedule(inst, now)

    def _schedule(self, inst: _Instance, now: float) -> None:
        """Start the next step or decode segment of ``inst`` at ``now``, or go idle."""
        n_dec, spec = inst.num_decoding, inst.spec
        budget = spec.max_batched_tokens - n_dec
        inst.start_s = now
        if inst.prefilling and budget > 0:
            num_chunks, total, context_sum, completed = 0, 0, 0.0, []
            for entry in inst.prefilling:
                tokens = entry[1] if entry[1] < budget else budget
                num_chunks += 1
                total += tokens
                context_sum += entry[2]
                budget -= tokens
                entry[1] -= tokens
                entry[2] += tokens
                if not entry[3]:
                    entry[3] = True
                    inst.counters.change_queue(now, -1)
                if entry[1] == 0:
                    completed.append(entry[0])
                if budget == 0:
                    break
            # Chunks go in arrival order, so the prompts this step completes lead the list.
            del inst.prefilling[:len(completed)]
            context = context_sum / num_chunks
            if n_dec:
                step_s = spec.step_times.mixed_step_s(total, context, num_chunks, n_dec,
                                                      self._mean_context(inst, 0.0))
            else:
                step_s = spec.step_times.prefill_step_s(total, num_chunks, context)
            inst.mode, inst.step_decode_batch = _STEP, n_dec
            inst.version += 1
            if inst.role == "prefill":
                # A pipeline of pp stages takes the next step once the first stage is free.
                if completed:
                    self._push(now + step_s, _PREFILL_DONE, inst, completed)
                step_s /= spec.pipeline_depth
            else:
                inst.completed = completed
            self._push(now + step_s, _STEP_END, inst, inst.version)
        elif n_dec:
            # No prompt work: run until the next sequence finishes (or new work cuts the segment).
            steps = inst.decoding[0][0] - inst.steps if not inst.prefilling else 1
            step_s = spec.step_times.decode_step_s(n_dec, self._mean_context(inst, 0.5 * (steps - 1)))
            inst.mode, inst.segment_step_s, inst.segment_steps = _SEGMENT, step_s, steps
            inst.version += 1
            self._push(now + steps * step_s, _STEP_END, inst, inst.version)
        else:
            inst.mode = _IDLE

    @staticmethod
    def _mean_context(inst: _Instance, steps_ahead: float) -> float:
        """Mean context of the decoding sequences ``steps_ahead`` steps from now."""
        return inst.context_base_sum / inst.num_decoding + inst.steps + steps_ahead
