"""Closed-loop load: a benchmark client keeps ``concurrency`` requests in flight.

This is what ``vllm bench serve --max-concurrency``, genai-perf and the calibration measurements
(``reference/measurements/README.md``) measure. The steady state is the throughput X at which the
open-loop model's in-system population equals the requests the engine can hold (Little's law over
the client's cycle):

    X (TTFT(X) + (O - 1) TPOT(X)) = min(N, KV capacity)

``TTFT(X)`` and ``TPOT(X)`` come from :mod:`layoutopt.perf_model.load` with near-deterministic
arrivals (a closed client's arrivals are as regular as its fixed lengths; Kingman's factor
``(ca^2 + cs^2) / 2`` with ca^2 = 0). Population grows with load, so X is found on the monotone
load grid and refined by one exact evaluation. Requests the engine cannot hold (KV capacity) or
cannot drain (prefill saturated) wait outside: ``N / X - cycle``.

The client starts with all N requests at once; that first round queues for prefill (a colocated
instance takes the N prompts chunk after chunk, a prefill pool one prompt or one batch after
another per server). Averaged over a run of R x N requests it adds (first-round TTFT - steady
TTFT) / R. R is the profile's ``closed_loop_rounds``, fitted per engine: AIConfigurator's
generated benchmark sends 20 x N requests after 2 x N warm-up ones (``--num-requests
$((concurrency * BENCHMARK_MULTI_ROUND))``, default 20, aiconfigurator 0.12.0
generator/config/backend_templates/benchmark/bench_run.sh.j2:37,97-98; sflow.py:432,501), and
the lockstep a burst leaves (requests that queued together return together) keeps part of its
queue for the next rounds, so the effective R is at most about 20 and can be far lower.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.special import gammaln, xlogy

from layoutopt.perf_model.calibration import EngineProfile
from layoutopt.perf_model.costs import PhaseCosts
from layoutopt.perf_model.load import (
    LatencyStats,
    LoadPoint,
    Rows,
    colocated_rows,
    decode_rows,
    prefill_rows,
)

# Arrival squared coefficient of variation of a closed-loop client with fixed lengths [estimate].
CLOSED_LOOP_ARRIVAL_SCV = 0.0
# Rounds without a profile (closed_loop_rounds' default).
BENCHMARK_ROUNDS = 10.0
# Arrival squared coefficient of variation at a disaggregated prefill pool in a closed loop. Its
# arrivals are the decode pool's completions, which continuous batching scatters (every join and
# leave changes the step time of all), so the lockstep of a colocated cohort does not form. Poisson-
# like arrivals (1.0) [fit evidence: SGLang DeepSeek-R1 1P1D TP16, ISL 8192, measured TTFT rises
# 0.86 -> 1.10 -> 1.28 -> 1.87 s at N = 4, 8, 16, 32, as M/D/1 at the measured throughput gives;
# deterministic arrivals (0.0) predict no rise until saturation].
DISAGG_PREFILL_ARRIVAL_SCV = 1.0


def prompts_ahead(concurrency: float, profile: EngineProfile | None) -> float:
    """Prompts of the same closed-loop cohort prefilled before a new prompt's first token.

    Closed-loop clients do not arrive evenly spaced: with fixed lengths they fall into lockstep
    (requests that start together finish and return together), and a prompt arrives with others:
    f (N - 1)^alpha of them, at most N - 1. The reference rows put about one there whatever N (vLLM
    and TensorRT-LLM, both generations: f 0.45-1.19, alpha 0.01-0.09 when fitted, so the profiles
    take alpha 0), on top of the first burst (``closed_loop_rounds``); drawn lengths (InferenceX's
    B200 rows) ask for as much, so it is more than lockstep alone.
    """
    if profile is None or concurrency <= 1:
        return 0.0
    ahead = profile.closed_loop_cohort_fraction * (concurrency - 1.0) ** profile.closed_loop_cohort_exponent
    return min(ahead, concurrency - 1.0)


def _crossing(population: np.ndarray, target: float, stable: np.ndarray) -> tuple[int, float] | None:
    """(index, fraction) where the population first reaches ``target`` among stable rows."""
    ok = stable & np.isfinite(population)
    idx = np.nonzero(ok & (population >= target))[0]
    if len(idx) == 0:
        return None
    k = int(idx[0])
    if k == 0:
        return 0, 0.0
    low, high = population[k - 1], population[k]
    return k - 1, float((target - low) / max(high - low, 1e-12))


def _refined_crossing(evaluate, low: float, high: float, target: float, points: int = 24,
                      passes: int = 3) -> float:
    """The rate in [low, high] at which rate x cycle(rate) reaches ``target``.

    The population rises steeply near the prefill pool's saturation (the queue's 1 / (1 - rho)),
    so interpolating between two grid rates lands far from the crossing; each pass evaluates a
    finer grid inside the bracket and keeps the sub-interval that holds the crossing.
    """
    for _ in range(passes):
        if high <= low:
            break
        sub = np.linspace(low, high, points)
        p, d, cycle = evaluate(sub)
        population = np.where(p.stable & d.stable & np.isfinite(cycle), sub * cycle, np.inf)
        above = np.nonzero(population >= target)[0]
        if len(above) == 0:
            return float(high)
        j = int(above[0])
        if j == 0:
            return float(low)
        low, high = float(sub[j - 1]), float(sub[j])
    return float(low)


def _shifted(stats_q: np.ndarray, mean_s: float, add_s: float, quantiles: tuple[float, ...]) -> LatencyStats:
    cols = [quantiles.index(q) for q in (0.5, 0.9, 0.99)]
    return LatencyStats(mean=(mean_s + add_s) * 1e3, p50=(stats_q[cols[0]] + add_s) * 1e3,
                        p90=(stats_q[cols[1]] + add_s) * 1e3, p99=(stats_q[cols[2]] + add_s) * 1e3)


def _rounds(profile: EngineProfile | None) -> float:
    return BENCHMARK_ROUNDS if profile is None else max(float(profile.closed_loop_rounds), 1.0)


def _first_round_s(prompts: float, mean_occupancy_s: float, fixed_s: float) -> float:
    """Mean TTFT of prompts arriving together and served one occupancy after another."""
    return fixed_s + 0.5 * max(prompts - 1.0, 0.0) * mean_occupancy_s


def rank_grouped(costs: PhaseCosts, profile: EngineProfile | None) -> PhaseCosts:
    """``costs`` with prompts arriving in groups of one per attention-DP rank, where the engine's
    closed loop forms them (``EngineProfile.closed_loop_rank_groups``), else ``costs`` itself.

    TensorRT-LLM's executor spreads every group of requests it fetches over the attention-DP ranks,
    the rank with the fewest active tokens first (tensorrt_llm/_torch/pyexecutor/
    executor_request_queue.py, _balance_requests_across_ranks), and the benchmark's token budget
    admits one prompt per rank and step (``measurements.benchmark_token_budget``): the first burst
    of a closed loop enters one prompt per rank per step, requests of fixed lengths that start in
    the same step finish in the same step, and their replacements are spread over the ranks again.
    So a step with prompts carries one on every rank and each costs 1/dp of the lockstep step, where
    Poisson arrivals would rarely meet (``load_colocated.lockstep_share``). Open-loop serving keeps
    Poisson arrivals.
    """
    if profile is None or not profile.closed_loop_rank_groups or costs.prefill_servers <= 1:
        return costs
    return dataclasses.replace(costs, prompts_in_rank_groups=True)


def attention_dp_balance_wait_steps(ranks: int, sequences_per_rank: float, arrivals_per_step: np.ndarray | float,
                                    timeout_iters: int, batching_wait_iters: int) -> np.ndarray:
    """Mean steps a new prompt waits at TensorRT-LLM's attention-DP balance gate (closed loop).

    With ``attention_dp_config: {enable_balance: true}`` the executor holds every rank's context
    requests until each attention-DP rank has one, then (when every rank also decodes) for
    ``batching_wait_iters`` more iterations; its counter of iterations without that condition runs
    whether prompts wait or not, and at ``timeout_iters`` it releases what waits and restarts
    (PyExecutor._balance_adp_requests, called from _schedule when enable_attention_dp and
    enable_balance; tensorrt_llm/_torch/pyexecutor/py_executor.py, public repository, release not
    pinned). A new request goes to a rank below ceil(active / ranks) requests
    (ExecutorRequestQueue._balance_requests_across_ranks, expected_num_active_requests), which in a
    closed loop is the rank its predecessor finished on, so a rank receives prompts as its
    sequences finish: at a per-rank rate lambda = arrivals per step / ranks, about Poisson once
    lengths vary. A gate cycle from one release to the next then lasts

        C = F + B if F < T, else T,        F = max over ranks of Exp(lambda),  P(F <= t) = (1 - e^-lambda t)^ranks

    and a prompt arriving at a random point of it waits E[C^2] / (2 E[C]) steps. A rank whose
    sequences have all finished has no generation request and opens the gate at once
    (``sequences_per_rank`` <= 1 waits nothing), as does a single rank.
    """
    rate = np.atleast_1d(np.asarray(arrivals_per_step, dtype=float))
    if ranks <= 1 or sequences_per_rank <= 1.0 or timeout_iters <= 0:
        return np.zeros_like(rate)
    t = np.linspace(0.0, float(timeout_iters), 129)
    per_rank = np.maximum(rate, 1e-12)[:, None] / ranks
    survival = 1.0 - (-np.expm1(-per_rank * t)) ** ranks          # P(F > t) on [0, T]
    mean_min = np.trapezoid(survival, t, axis=1)                  # E[min(F, T)]
    square_min = np.trapezoid(2.0 * t * survival, t, axis=1)      # E[min(F, T)^2]
    timed_out = survival[:, -1]                                   # P(F > T)
    filled = 1.0 - timed_out
    b = float(batching_wait_iters)
    mean_f_filled = mean_min - timeout_iters * timed_out          # E[F; F < T]
    mean_cycle = mean_min + b * filled
    square_cycle = square_min + 2.0 * b * mean_f_filled + b * b * filled
    return square_cycle / (2.0 * np.maximum(mean_cycle, 1e-12))


def _balance_wait_s(costs: PhaseCosts, profile: EngineProfile | None, held: float, rate_rps: np.ndarray,
                    tpot_s: np.ndarray) -> np.ndarray:
    """Seconds of TTFT at the attention-DP balance gate (:func:`attention_dp_balance_wait_steps`), one
    per load point: returns arrive at ``rate x step`` per step, a step lasting the mean TPOT."""
    timeout = None if profile is None else profile.attention_dp_balance_timeout_iters
    if timeout is None:
        return np.zeros_like(np.asarray(rate_rps, dtype=float))
    ranks = int(costs.prefill_servers)
    steps = attention_dp_balance_wait_steps(ranks, held / max(ranks, 1), rate_rps * tpot_s, timeout,
                                            profile.attention_dp_batching_wait_iters)
    return steps * tpot_s


def batch_wait_steps(timeout_iters: int, release_prompts: float, arrivals_per_step: np.ndarray | float) -> np.ndarray:
    """Mean steps a new prompt waits at TensorRT-LLM's batch waiting (closed loop, no attention DP).

    With ``batch_wait_timeout_iters`` T and ``batch_wait_max_tokens_ratio`` r set, the executor holds
    the context requests it could schedule while generation requests run, until T iterations have
    passed or the step's scheduled tokens (the held prompts' and one per generation request) reach
    r x max_num_tokens; its counter starts at the first held prompt and restarts at each release
    (PyExecutor._waiting_requests, called from _schedule only without attention DP and with both kinds
    of request present; tensorrt_llm/_torch/pyexecutor/py_executor.py, public repository, release not
    pinned). So a cycle opens with one prompt and ends at C = min(T, S_{K-1}), S_j the j-th later
    arrival and K = ``release_prompts`` the prompts whose tokens reach the threshold; the prompts
    return about Poisson at ``arrivals_per_step`` (as at the attention-DP gate). A cycle's prompts wait

        E[sum] = E[C] + integral_0^T E[A(t); A(t) < K - 1] dt,   E[C] = integral_0^T P(A(t) < K - 1) dt,

    over 1 + E[min(A(T), K - 1)] prompts, A(t) the arrivals in (0, t]. K <= 1 (one prompt reaches the
    threshold, or r = 0) or T = 0 waits nothing.
    """
    rate = np.atleast_1d(np.asarray(arrivals_per_step, dtype=float))
    if timeout_iters <= 0 or not release_prompts > 1.0:
        return np.zeros_like(rate)
    others = int(math.ceil(release_prompts)) - 1          # later arrivals that release the cycle
    t = np.linspace(0.0, float(timeout_iters), 129)
    mean = np.maximum(rate, 0.0)[:, None, None] * t[None, :, None]          # (rates, t, 1)
    j = np.arange(others, dtype=float)[None, None, :]                       # counts below the release
    pmf = np.exp(xlogy(j, mean) - mean - gammaln(j + 1.0))                # Poisson(mean) at j (0 log 0 = 0)
    below = pmf.sum(axis=2)                                                 # P(A(t) < K - 1)
    held_before = (j * pmf).sum(axis=2)                                     # E[A(t); A(t) < K - 1]
    mean_cycle = np.trapezoid(below, t, axis=1)
    waits = mean_cycle + np.trapezoid(held_before, t, axis=1)
    prompts = 1.0 + held_before[:, -1] + others * (1.0 - below[:, -1])
    return waits / prompts


def _batch_wait_s(costs: PhaseCosts, profile: EngineProfile | None, held: float, rate_rps: np.ndarray,
                  tpot_s: np.ndarray) -> np.ndarray:
    """Seconds of TTFT at TensorRT-LLM's batch waiting (:func:`batch_wait_steps`), one per load point: a
    held step is a decode step (the mean TPOT), returns arrive at ``rate x step`` per step, and K prompts
    of the mean length release a cycle once K x prompt + (held - K) generation tokens reach the ratio of
    the step's token budget. Off with attention DP (the executor balances ranks instead) and with
    nothing else decoding (one sequence held)."""
    rate = np.asarray(rate_rps, dtype=float)
    if (profile is None or profile.batch_wait_timeout_iters <= 0 or costs.prefill_servers > 1 or held <= 1.0):
        return np.zeros_like(rate)
    threshold = profile.batch_wait_max_tokens_ratio * costs.server_budget_tokens
    prompt = max(costs.mean_input_tokens, 1.0)
    release = (threshold - held) / max(prompt - 1.0, 1.0)
    return batch_wait_steps(profile.batch_wait_timeout_iters, release, rate * tpot_s) * tpot_s


def returns_apart(costs: PhaseCosts) -> bool:
    """Whether a closed loop's requests come back one by one: their output lengths differ (a client that
    draws lengths, as InferenceX's does, reference_protocol), so requests that started together finish
    at different steps. With one output length they finish together and return together."""
    return costs.output_steps is not None and len(costs.output_steps) > 1


def recv_wait_s(costs: PhaseCosts, profile: EngineProfile | None, held: float, tpot_s: np.ndarray | float
                ) -> np.ndarray:
    """Seconds of TTFT at SGLang's request polling (``EngineProfile.scheduler_recv_interval`` N), one per
    load point: a request that returns while the others decode is taken at the next of the scheduler's
    polls, which come every N decode steps (right after a prefill step), so it waits (N - 1) / 2 decode
    steps beyond the step boundary on average. Nothing with one request in flight (the scheduler idles
    between requests and polls at once)."""
    tpot = np.asarray(tpot_s, dtype=float)
    interval = 1 if profile is None else profile.scheduler_recv_interval
    if interval <= 1 or held <= 1.0:
        return np.zeros_like(tpot)
    return 0.5 * (interval - 1) * tpot


def _gate_waits_s(costs: PhaseCosts, profile: EngineProfile | None, held: float, rate_rps: np.ndarray,
                  tpot_s: np.ndarray) -> np.ndarray:
    """TTFT a returning request spends at the engine's gates before its prefill, per load point: the
    attention-DP balancing, TensorRT-LLM's batch waiting and SGLang's request polling."""
    return (_balance_wait_s(costs, profile, held, rate_rps, tpot_s) + _batch_wait_s(costs, profile, held, rate_rps, tpot_s)
            + recv_wait_s(costs, profile, held, tpot_s))


def colocated_closed_loop(costs: PhaseCosts, concurrency: float, profile: EngineProfile | None = None) -> LoadPoint:
    """Closed loop on one colocated instance (chunked prefill); see :func:`prompts_ahead`.

    An engine that runs prefill first (``profile.prefill_first``) moves as one wave instead
    (:func:`wave_closed_loop`) while every request has one output length. Requests that return apart
    (:func:`returns_apart`) find the others decoding: a prefill-first engine then runs each arrival's
    prefill between decode steps, which costs the others what a chunk riding in a step does, so the
    steady state here holds for it too.
    """
    if profile is not None and profile.prefill_first and not returns_apart(costs):
        return wave_closed_loop(costs, concurrency)
    costs = rank_grouped(costs, profile)
    steps = max(costs.output_tokens_mean - 1.0, 0.0)
    held = min(concurrency, float(costs.max_batch_size))
    cohort_s = prompts_ahead(held, profile) * costs.mean_input_tokens * costs.chunk_s_per_token
    grid = colocated_rows(costs, None, CLOSED_LOOP_ARRIVAL_SCV, population=held)
    gate_s = _gate_waits_s(costs, profile, held, grid.rate_rps, grid.tpot_mean_s)
    population = grid.rate_rps * (grid.ttft_mean_s + cohort_s + gate_s + steps * grid.tpot_mean_s)
    found = _crossing(population, held, grid.stable)
    if found is None:  # saturated before holding them all: run at the last stable load
        k = int(np.nonzero(grid.stable)[0].max(initial=0))
        batch = grid.batch[k]
    else:
        k, frac = found
        batch = float(np.exp(np.log(grid.batch[k]) + frac * (np.log(grid.batch[k + 1]) - np.log(grid.batch[k])))
                      if frac > 0 else grid.batch[k])
    row = colocated_rows(costs, np.array([batch]), CLOSED_LOOP_ARRIVAL_SCV, population=held)
    waits_s = _gate_waits_s(costs, profile, held, row.rate_rps, row.tpot_mean_s)
    row = _with_ttft_added(row, cohort_s + float(waits_s[0]))
    return _finish(costs, row, concurrency, held if found is not None else None, steps, "colocated",
                   _first_round_s(held, costs.mean_input_tokens * costs.chunk_s_per_token,
                                  float((costs.prefill_s * costs.input_weights).sum()) + costs.request_overhead_s),
                   _rounds(profile))


def wave_closed_loop(costs: PhaseCosts, concurrency: float) -> LoadPoint:
    """Closed loop on a colocated instance whose scheduler runs prefill first: one wave per round.

    SGLang runs a waiting prompt's prefill batch alone, before any decode step ("Run prefill first
    if possible", sglang/srt/managers/scheduler.py:3992-3994 in 0.5.23, :1787-1789 in 0.5.3;
    prefill chunks ride in decode batches only with --enable-mixed-chunk, default False,
    arg_groups/fields/schedule.py:208-211). N clients that start together are all prefilled, one
    full batch after another, before any of them decodes; they then decode together, finish at
    the same step and come back together: the first burst repeats every round. With H = min(N,
    sequences the KV holds) per wave, p a prompt's share of a full prefill batch and tau the
    decode step at H:

        TTFT_i = overhead + prefill alone + i p        (i = 0 .. H - 1; mean i = (H - 1) / 2)
        TPOT_i = tau + (H - 1 - i) p / (O - 1)         (the benchmark's (e2e - TTFT) / (O - 1):
                                                        a prompt waits for the rest of its wave)
        wave   = overhead + prefill alone + (H - 1) p + (O - 1) tau,   throughput H / wave

    Clients beyond H wait outside for a later wave: (N - H) / throughput more TTFT. This holds while
    every request has the same output length; when they differ (:func:`returns_apart`) the wave
    dissolves after its first round and the steady state of :func:`colocated_closed_loop` applies.
    """
    steps = max(costs.output_tokens_mean - 1.0, 0.0)
    held = max(min(concurrency, float(costs.max_batch_size)), 1.0)
    share = costs.mean_input_tokens * costs.chunk_s_per_token
    alone = float((costs.prefill_s * costs.input_weights).sum()) + costs.request_overhead_s
    tau = float(costs.decode_at(held))
    prefill_total = alone + (held - 1.0) * share
    wave_s = prefill_total + steps * tau
    rate = held / max(wave_s, 1e-12)
    outside_s = max(concurrency - held, 0.0) / rate

    def ttft_at(q: float) -> float:
        return (outside_s + alone + q * (held - 1.0) * share) * 1e3

    def tpot_at(q: float) -> float:
        return (tau + q * (held - 1.0) * share / max(steps, 1.0)) * 1e3

    ttft = LatencyStats(mean=ttft_at(0.5), p50=ttft_at(0.5), p90=ttft_at(0.9), p99=ttft_at(0.99))
    tpot = LatencyStats(mean=tpot_at(0.5), p50=tpot_at(0.5), p90=tpot_at(0.9), p99=tpot_at(0.99))
    prefill_share = (prefill_total - costs.request_overhead_s) / wave_s
    if concurrency > costs.max_batch_size:
        bottleneck = "kv_capacity"
    elif prefill_share > 0.5:
        bottleneck = "queueing"
    else:
        bottleneck = costs.decode_bottleneck
    return LoadPoint(throughput_rps=concurrency / (wave_s + outside_s), ttft_ms=ttft, tpot_ms=tpot,
                     decode_batch=held, prefill_utilization_fraction=min(prefill_share, 1.0), stable=True,
                     bottleneck=bottleneck)


def _with_ttft_added(rows: Rows, add_s: float) -> Rows:
    return Rows(rows.quantiles, rows.rate_rps, rows.batch, rows.ttft_mean_s + add_s, rows.ttft_q_s + add_s,
                rows.tpot_mean_s, rows.tpot_q_s, rows.prefill_utilization, rows.stable)


def _outside_wait_s(concurrency: float, held: float | None, rate: float, cycle_s: float) -> float:
    """Wait outside the engine: for a KV slot (N - held) / X, or, saturated, N / X - cycle."""
    if held is not None:
        return max(concurrency - held, 0.0) / max(rate, 1e-12)
    return max(concurrency / max(rate, 1e-12) - cycle_s, 0.0)


def _finish(costs: PhaseCosts, row: Rows, concurrency: float, held: float | None, steps: float, phase: str,
            first_round_s: float, rounds: float) -> LoadPoint:
    rate = float(row.rate_rps[0])
    ttft_s = float(row.ttft_mean_s[0])
    cycle = ttft_s + steps * float(row.tpot_mean_s[0])
    outside_s = _outside_wait_s(concurrency, held, rate, cycle)
    steady_s = ttft_s + outside_s
    added = outside_s + max(first_round_s - steady_s, 0.0) / rounds
    point = row.point(0, costs, phase)
    ttft = _shifted(row.ttft_q_s[0], ttft_s, added, row.quantiles)
    bottleneck = point.bottleneck
    if concurrency > costs.max_batch_size:
        bottleneck = "kv_capacity"
    elif outside_s > 0.5 * cycle:
        bottleneck = "queueing"
    throughput = concurrency / (ttft_s + added + steps * float(row.tpot_mean_s[0]))
    return point.model_copy(update={"throughput_rps": throughput, "ttft_ms": ttft, "bottleneck": bottleneck,
                                    "stable": True})


def disaggregated_closed_loop(prefill: PhaseCosts, num_prefill: int, decode: PhaseCosts, num_decode: int,
                              concurrency: float, profile: EngineProfile | None = None) -> tuple[LoadPoint, LoadPoint]:
    """Closed loop over a prefill pool and a decode pool (prefill batching is in its occupancy).

    With N in flight at throughput X, decode holds ``n = X (O - 1) TPOT(n)`` sequences, at most B
    (the decode batch per worker, or what its KV memory holds, times the decode workers); the
    rest are on the prefill side, queued or prefilling, or done with prefill and waiting for a
    decode slot, and all of that is TTFT: ``TTFT = N / X - (O - 1) TPOT``. X is the smallest of:

    - the rate at which the in-system population X (TTFT_p(X) + first step + (O - 1) TPOT(X))
      reaches min(N, B), with TTFT_p the pooled prefill queue (G/G/c over every prefill worker's
      attention-DP ranks, as the open-loop estimate) plus prefill, batching and KV transfer;
    - what the prefill pool drains with full batches (a deep prefill queue: N / X - decode time);
    - B / ((O - 1) TPOT(B)) (every decode slot busy; the extra requests wait for one).

    Returns (system point: TTFT = prefill side + first decode step, TPOT, throughput; decode-instance point).
    """
    steps = max(decode.output_tokens_mean - 1.0, 0.0)
    held = min(concurrency, float(decode.max_batch_size * num_decode))
    decode_grid = decode_rows(decode, population=held / num_decode)
    decode_rates = np.maximum.accumulate(decode_grid.rate_rps)
    # One queue in front of every prefill worker (least-outstanding-work routing).
    pool = dataclasses.replace(prefill, prefill_servers=prefill.prefill_servers * num_prefill)
    mean_occ = float((prefill.prefill_occupancy_s * prefill.input_weights).sum())
    top = min(0.999 * pool.prefill_servers / mean_occ, float(decode_rates[-1]) * num_decode)
    rates = np.geomspace(top * 1e-4, top, 96)

    def evaluate(system_rates: np.ndarray) -> tuple[Rows, Rows, np.ndarray]:
        p = prefill_rows(pool, system_rates, DISAGG_PREFILL_ARRIVAL_SCV)
        batch = np.interp(system_rates / num_decode, decode_rates, decode_grid.batch)
        d = decode_rows(decode, batch, population=held / num_decode)
        cycle = p.ttft_mean_s + d.ttft_mean_s + steps * d.tpot_mean_s
        return p, d, cycle

    p_rows, d_rows, cycle = evaluate(rates)
    found = _crossing(rates * cycle, held, p_rows.stable & d_rows.stable)
    if found is None:  # the prefill pool or every decode slot saturates first
        rate = float(rates[-1])
    else:
        k, _ = found
        rate = _refined_crossing(evaluate, rates[k], rates[min(k + 1, len(rates) - 1)], held)
    p_row, d_row, cycle_one = evaluate(np.array([rate]))
    ttft_s = float(p_row.ttft_mean_s[0] + d_row.ttft_mean_s[0])
    outside_s = _outside_wait_s(concurrency, held if found is not None else None, rate, float(cycle_one[0]))
    # The burst's prompts queue at the prefill pool; each then joins decode (the next step boundary
    # and its first step), as in the steady state.
    first_round = _first_round_s(held / pool.prefill_servers, mean_occ,
                                 float(((prefill.prefill_s + prefill.kv_transfer_s) * prefill.input_weights).sum())
                                 + prefill.request_overhead_s + float(d_row.ttft_mean_s[0]))
    added = outside_s + max(first_round - ttft_s - outside_s, 0.0) / _rounds(profile)
    first_q = p_row.ttft_q_s[0] + float(d_row.ttft_mean_s[0])
    ttft = _shifted(first_q, ttft_s, added, p_row.quantiles)
    decode_point = d_row.point(0, decode, "decode")
    throughput = concurrency / (ttft_s + added + steps * float(d_row.tpot_mean_s[0]))
    prefill_point = p_row.point(0, pool, "prefill")
    bottleneck = "queueing" if outside_s > 0.5 * float(cycle_one[0]) else decode_point.bottleneck
    system = decode_point.model_copy(update={
        "throughput_rps": throughput, "ttft_ms": ttft, "bottleneck": bottleneck, "stable": True,
        "prefill_utilization_fraction": prefill_point.prefill_utilization_fraction})
    return system, decode_point
