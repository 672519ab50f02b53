"""Load layer: queueing formulas against hand calculations, and properties of the load models.

Step times here are synthetic (linear in tokens, see ``_costs``) so every number can be checked by
hand and the tests do not move when the roofline is recalibrated.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.perf_model.closed_loop import (
    batch_wait_steps,
    attention_dp_balance_wait_steps,
    colocated_closed_loop,
    disaggregated_closed_loop,
)
from layoutopt.perf_model.costs import PhaseCosts, StepFacts
from layoutopt.perf_model.load import load_at_rate, rows_at_rate
from layoutopt.perf_model.queueing import (
    NO_WAIT,
    WaitDistribution,
    erlang_c,
    gpus_needed,
    mg1_mean_wait_s,
    mgc_wait,
    pd_ratio,
    quantiles_of_wait_plus_service,
    slot_wait_arrays,
)


def _costs(input_tokens=(1000.0,), weights=(1.0,), output_tokens=200.0, max_batch=128, servers=1,
           prefill_s_per_token=1e-4, decode_base_s=0.02, decode_s_per_seq=1e-4, chunk=8192, kv_s=0.0) -> PhaseCosts:
    """Synthetic instance: prefill = L x 0.1 ms, decode step = 20 ms + 0.1 ms per sequence.

    A prompt riding in decode steps adds its prefill time (W = L x 0.1 ms) at any batch; steps
    have no fixed cost to share, so batching prompts saves nothing.
    """
    tokens = np.asarray(input_tokens, dtype=float)
    w = np.asarray(weights, dtype=float) / sum(weights)
    grid = np.arange(1, max_batch + 1, dtype=float)
    prefill = tokens * prefill_s_per_token
    moments = tuple(float((tokens**k * w).sum()) for k in range(5))
    return PhaseCosts(
        input_tokens=tokens, input_weights=w,
        input_tokens_uncached=tokens, output_tokens_mean=output_tokens, prefill_s=prefill,
        prefill_occupancy_s=prefill, kv_transfer_s=np.full_like(tokens, kv_s), batch_grid=grid,
        decode_step_s=decode_base_s + decode_s_per_seq * grid,
        chunk_tokens=chunk, max_batch_size=max_batch, prefill_servers=servers,
        step_facts=StepFacts.known("compute", "memory", prefill_s_per_token), prompts_per_step=max(1.0, chunk // float((tokens * w).sum())),
        inverse_decode_steps_mean=1.0 / (output_tokens - 1.0), prompt_batches=np.array([1.0, float(max_batch)]),
        prompt_extra_s=np.vstack([prefill, prefill]), prefill_poly_s=(0.0, prefill_s_per_token, 0.0),
        input_moments=moments)


# ------------------------------------------------------------------ seeds/002 worked examples


def test_pd_ratio_rag_example_is_two_to_one():
    # Tin 4000, Tout 500, P 8000, D 2000 tok/s/GPU: (4000/8000) : (500/2000) = 0.5 : 0.25 = 2 : 1.
    assert pd_ratio(4000, 500, 8000, 2000) == pytest.approx(2.0)


def test_pd_ratio_chat_example_is_one_to_sixteen():
    # Tin 500, Tout 2000: (500/8000) : (2000/2000) = 0.0625 : 1 = 1 : 16.
    assert pd_ratio(500, 2000, 8000, 2000) == pytest.approx(1 / 16)


def test_pd_ratio_does_not_depend_on_rate():
    for rate in (1.0, 7.0, 40.0):
        n_p = gpus_needed(rate, 4000, 8000, 0.7)
        n_d = gpus_needed(rate, 500, 2000, 0.7)
        assert n_p / n_d == pytest.approx(pd_ratio(4000, 500, 8000, 2000))


def test_gpus_needed_hand_calc():
    # N = lambda T / (P rho) = 10 x 4000 / (8000 x 0.7) = 7.142857
    assert gpus_needed(10, 4000, 8000, 0.7) == pytest.approx(7.142857, rel=1e-6)


# ------------------------------------------------------------------ queueing formulas


def test_erlang_c_hand_calcs():
    assert erlang_c(1, 0.6) == pytest.approx(0.6)          # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)         # (a^2/2 x 2/(2-1)) / (1 + a + that) = 1/3
    assert erlang_c(4, 0.0) == 0.0 and erlang_c(2, 2.5) == 1.0


def test_pollaczek_khinchine_md1():
    # M/D/1, lambda 5/s, S 0.1 s: Wq = lambda S^2 / (2 (1 - rho)) = 5 x 0.01 / (2 x 0.5) = 0.05 s
    assert mg1_mean_wait_s(5, 0.1, 0.01) == pytest.approx(0.05)
    assert mgc_wait(5, 0.1, 0.0, 1).mean_s == pytest.approx(0.05)
    assert math.isinf(mg1_mean_wait_s(10, 0.1, 0.01))


def test_mm1_wait_quantile():
    # M/M/1 lambda 5, mu 10: P(W > t) = rho exp(-(mu - lambda) t); p90: t = ln(0.5 / 0.1) / 5 = 0.3219 s
    wait = mgc_wait(5, 0.1, 1.0, 1)
    assert wait.wait_probability == pytest.approx(0.5)
    assert wait.quantile_s(0.9) == pytest.approx(math.log(5) / 5, rel=1e-9)
    assert wait.quantile_s(0.4) == 0.0


def test_wait_plus_service_matches_monte_carlo():
    wait = WaitDistribution(wait_probability=0.6, conditional_mean_s=0.2)
    service, weights = np.array([0.05, 0.1, 0.4]), np.array([0.5, 0.3, 0.2])
    exact = quantiles_of_wait_plus_service(wait, service, weights, (0.5, 0.9, 0.99))
    rng = np.random.default_rng(7)
    n = 400_000
    sample = np.where(rng.random(n) < 0.6, rng.exponential(0.2, n), 0.0) + rng.choice(service, n, p=weights)
    assert exact == pytest.approx(list(np.quantile(sample, [0.5, 0.9, 0.99])), rel=0.02)
    assert quantiles_of_wait_plus_service(NO_WAIT, service, weights, (0.5, 0.9)) == [0.1, 0.4]


# ------------------------------------------------------------------ load models


def test_decode_littles_law_hand_calc():
    # A request sees itself plus n others: tau(n) = d(n + 1) = 0.02 + 1e-4 (n + 1);
    # lambda = n / ((O - 1) tau). At n = 50: tau 0.0251 s, lambda = 50 / (199 x 0.0251).
    costs = _costs()
    rate = 50 / (199 * 0.0251)
    point = load_at_rate(costs, "decode", rate)
    assert point.decode_batch == pytest.approx(50, rel=1e-3)
    assert point.tpot_ms.mean == pytest.approx(25.1, rel=1e-3)


def test_prefill_light_load_is_md1_hand_calc():
    # One prompt of 1000 tokens = 0.1 s, Poisson 0.5 req/s: M/D/1 mean wait 0.5 x 0.01 / (2 x 0.95)
    # = 2.6 ms; the prompts that arrive during that wait ride in the same step (0.5 x 2.6 ms x
    # 0.1 s = 0.13 ms): TTFT ~ 102.8 ms.
    point = load_at_rate(_costs(), "prefill", 0.5)
    assert point.ttft_ms.mean == pytest.approx(102.8, rel=0.01)
    assert point.prefill_utilization_fraction == pytest.approx(0.05)


def test_prefill_batch_service_matches_simulated_batches():
    # Same instance at 5 req/s in the simulator's "take every waiting prompt" discipline: a steps'
    # prompts finish together, so TTFT is above M/D/1's 150 ms; the simulator measures ~168 ms.
    point = load_at_rate(_costs(), "prefill", 5.0)
    assert 150.0 < point.ttft_ms.mean < 168.0 * 1.15
    assert point.prefill_utilization_fraction == pytest.approx(0.5, rel=0.05)


def test_prefill_batching_spreads_a_fixed_step_cost():
    # A step costing 50 ms fixed + 50 ms per prompt (MoE-like expert reads): at load, steps hold
    # several prompts and the server is busy less than one full prompt step per prompt.
    base = _costs()
    costs = dataclasses.replace(base, prefill_step_fixed_s=0.05, prefill_poly_s=(0.05, 5e-5, 0.0),
                                prefill_occupancy_s=np.array([0.05 + 0.05 / 8]))
    light, heavy = (load_at_rate(costs, "prefill", r) for r in (0.5, 12.0))
    assert light.prefill_utilization_fraction == pytest.approx(0.05, rel=0.05)  # one prompt per step
    assert heavy.stable and heavy.prefill_utilization_fraction < 12.0 * 0.1 * 0.8


def test_colocated_chunked_prefill_raises_tpot():
    costs = _costs()
    decode = load_at_rate(costs, "decode", 2.0)
    colocated = load_at_rate(costs, "colocated", 2.0)
    # tau = d(n) + kappa lambda I tau: 1000-token prompts at 2/s add ~ tau x 0.2 of prefill per step.
    assert colocated.tpot_ms.mean > decode.tpot_ms.mean * 1.15


def test_prompts_sharing_a_step_forfeit_the_idle_compute_of_the_decode_step():
    from layoutopt.perf_model.load_colocated import _sharing_penalty

    n = np.array([10.0, 60.0])
    shared = 1.0 - (1.0 - np.exp(-n / 199.0)) / (n / 199.0)
    linear = _costs(input_tokens=(400.0, 1000.0), weights=(1.0, 1.0))
    # W proportional to L: two prompts in one step cost what they cost apart.
    assert np.allclose(_sharing_penalty(linear, n, linear.prompt_extra_at(n), n / 199.0), 0.0)
    # Roofline: the first 500 tokens ride free (W = 0 at 400, 50 ms at 1000, linear between and
    # beyond), so every pair loses 400 tokens' worth of slack, 33 ms, shared by its co-rider.
    roof_extra = np.array([0.0, 0.05])
    roof = dataclasses.replace(linear, prompt_extra_s=np.vstack([roof_extra, roof_extra]))
    penalty = _sharing_penalty(roof, n, roof.prompt_extra_at(n), n / 199.0)
    assert np.allclose(penalty, 0.05 * 400.0 / 600.0 * shared)


def test_overload_is_unstable():
    assert not load_at_rate(_costs(), "prefill", 11.0).stable
    assert not load_at_rate(_costs(max_batch=16), "decode", 50.0).stable


@settings(max_examples=30, deadline=None)
@given(st.floats(0.05, 9.0), st.floats(0.05, 9.0))
def test_more_load_never_lowers_ttft(rate_a, rate_b):
    low, high = sorted((rate_a, rate_b))
    costs = _costs(input_tokens=(300.0, 1000.0, 3000.0), weights=(0.5, 0.3, 0.2), output_tokens=100.0)
    for phase in ("prefill", "colocated"):
        a = rows_at_rate(costs, phase, low)
        b = rows_at_rate(costs, phase, high)
        assert np.all(b.ttft_q_s[0] >= a.ttft_q_s[0] - 1e-9)
        assert b.ttft_mean_s[0] >= a.ttft_mean_s[0] - 1e-9


def test_closed_loop_throughput_rises_until_saturation():
    costs = _costs(max_batch=64)
    throughputs = [colocated_closed_loop(costs, n).throughput_rps for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert all(b >= a * 0.999 for a, b in zip(throughputs, throughputs[1:]))
    assert throughputs[-1] == pytest.approx(throughputs[-2], rel=0.02)   # KV capacity: saturated


def test_closed_loop_is_consistent_with_littles_law():
    costs = _costs()
    point = colocated_closed_loop(costs, 16)
    cycle_s = point.ttft_ms.mean / 1e3 + (costs.output_tokens_mean - 1) * point.tpot_ms.mean / 1e3
    assert point.throughput_rps * cycle_s == pytest.approx(16, rel=0.02)


def test_closed_loop_cohorts_add_prefill_of_prompts_ahead():
    costs = _costs()
    alone = colocated_closed_loop(costs, 8)
    profile = get_engine_profile("vllm").model_copy(update=dict(
        closed_loop_cohort_fraction=1.0, closed_loop_cohort_exponent=1.0, request_overhead_ms=0.0,
        closed_loop_rounds=10.0))
    cohort = colocated_closed_loop(costs, 8, profile)
    # 7 prompts of 1000 tokens at 0.1 ms/token ahead: about 0.7 s more TTFT (cycle lengthens too).
    assert cohort.ttft_ms.mean - alone.ttft_ms.mean == pytest.approx(700, rel=0.1)


def test_closed_loop_prompts_in_groups_of_one_per_rank_share_their_steps():
    # 8 attention-DP ranks, 1000-token prompts (0.1 s each) riding 20 ms decode steps, 64 clients of 200
    # tokens: ~0.3 prompts per step. As Poisson arrivals they seldom meet and each stalls all ranks; in
    # groups of one per rank (TensorRT-LLM's closed loop) a step carries eight and each costs 1/8 of it.
    costs = _costs(servers=8)
    poisson = colocated_closed_loop(costs, 64, _rounds_profile(10.0))
    groups = _rounds_profile(10.0).model_copy(update={"closed_loop_rank_groups": True})
    grouped = colocated_closed_loop(costs, 64, groups)
    assert grouped.tpot_ms.mean < 0.7 * poisson.tpot_ms.mean
    # decode alone ~20 ms a token; the prompts add ~64/199 x 100 ms / 8 on top
    assert grouped.tpot_ms.mean == pytest.approx(20.0 + 0.1 * 64 + 64 / 199 * 100 / 8, rel=0.15)
    # One rank has nothing to share, and the flag does not touch open-loop costs.
    one = _costs(servers=1)
    assert colocated_closed_loop(one, 64, groups).tpot_ms.mean == colocated_closed_loop(one, 64, _rounds_profile(10.0)).tpot_ms.mean
    assert not costs.prompts_in_rank_groups


def test_attention_dp_balance_gate_wait_by_hand():
    # A cycle C runs from one release to the next; a prompt arriving within it waits E[C^2] / (2 E[C]).
    # Arrivals so rare that no rank fills before the timeout: C = T, half of it.
    assert attention_dp_balance_wait_steps(8, 16, 1e-6, 60, 0)[0] == pytest.approx(30.0, rel=1e-3)
    # Two ranks, each receiving prompts at lambda = 0.1 per step, timeout far away: F = max of two
    # Exp(0.1) = Exp(0.2) + Exp(0.1), E[F] = 15, E[F^2] = Var + mean^2 = 125 + 225 = 350: 350 / 30 steps.
    assert attention_dp_balance_wait_steps(2, 16, 0.2, 400, 0)[0] == pytest.approx(350 / 30, rel=0.01)
    # Holding B = 10 more iterations once filled: E[(F + B)^2] / (2 E[F + B]) = (350 + 300 + 100) / 50.
    assert attention_dp_balance_wait_steps(2, 16, 0.2, 400, 10)[0] == pytest.approx(750 / 50, rel=0.01)
    # One rank, or a rank whose only sequence finished (no generation request: the gate opens), waits nothing.
    assert attention_dp_balance_wait_steps(1, 16, 0.2, 60, 10)[0] == 0.0
    assert attention_dp_balance_wait_steps(8, 1, 0.2, 60, 10)[0] == 0.0
    # Faster returns fill every rank sooner: the wait falls with the arrival rate, never above T / 2 + B.
    waits = attention_dp_balance_wait_steps(4, 32, np.array([0.01, 0.1, 1.0, 10.0]), 60, 0)
    assert np.all(np.diff(waits) < 0) and waits[0] <= 30.0


def test_closed_loop_attention_dp_balance_adds_its_gate_wait_to_ttft():
    # 8 ranks, 64 clients of 200 tokens: ~0.3 returns per 20 ms step, each rank gets one every ~27 steps;
    # with timeout_iters 60 the gate holds a prompt about 25 steps (~0.6 s) and TPOT barely moves.
    costs = _costs(servers=8)
    plain = _rounds_profile(10.0).model_copy(update={"closed_loop_rank_groups": True})
    balanced = plain.model_copy(update={"attention_dp_balance_timeout_iters": 60, "attention_dp_batching_wait_iters": 0})
    off, on = colocated_closed_loop(costs, 64, plain), colocated_closed_loop(costs, 64, balanced)
    tau_s = on.tpot_ms.mean / 1e3
    expected_ms = attention_dp_balance_wait_steps(8, 8, on.throughput_rps * tau_s, 60, 0)[0] * on.tpot_ms.mean
    assert 300.0 < expected_ms < 1200.0
    # The longer cycle lowers the load a little, so the rest of TTFT (the prompts' own queue) falls a little.
    assert 0.8 * expected_ms < on.ttft_ms.mean - off.ttft_ms.mean < expected_ms
    assert on.tpot_ms.mean == pytest.approx(off.tpot_ms.mean, rel=0.06)
    assert on.throughput_rps < off.throughput_rps
    # Without attention DP there is no gate.
    one = _costs(servers=1)
    assert colocated_closed_loop(one, 64, balanced).ttft_ms.mean == colocated_closed_loop(one, 64, plain).ttft_ms.mean


def test_batch_wait_steps_closed_forms():
    """TensorRT-LLM batch waiting: a cycle opens with one held prompt and ends after T steps or at the
    (K - 1)-th later arrival. Without a reachable threshold a cycle of T collects 1 + lambda T prompts
    waiting T, then uniformly less: T (1 + lambda T / 2) / (1 + lambda T); with K = 2 the cycle ends at
    the first later arrival, E[C] = (1 - e^-lambda T) / lambda over 2 - e^-lambda T prompts."""
    rate = np.array([0.0, 0.004, 0.12, 1.0])
    far = batch_wait_steps(20, 1e6, rate)
    assert far == pytest.approx(20 * (1 + rate * 10) / (1 + rate * 20), rel=1e-3)
    lam = np.array([0.05, 0.5])
    two = batch_wait_steps(20, 2, lam)
    assert two == pytest.approx(-np.expm1(-20 * lam) / lam / (2 - np.exp(-20 * lam)), rel=1e-3)
    # A prompt that alone reaches the threshold (or ratio 0) and timeout 0 wait nothing; more arrivals, less wait.
    assert batch_wait_steps(20, 1.0, 0.1)[0] == 0.0 and batch_wait_steps(0, 14, 0.1)[0] == 0.0
    assert np.all(np.diff(batch_wait_steps(20, 14.5, np.geomspace(1e-3, 10, 9))) < 0)


def test_closed_loop_batch_wait_adds_about_timeout_steps_to_ttft():
    # 8 clients of 1000 + 200 tokens, 20 ms steps: a prompt returns every ~25 steps, so a 20-iteration wait
    # with an unreachable threshold (0.9 x 16384 tokens, 14 prompts) holds almost every prompt ~19 steps.
    costs = _costs(chunk=16384)
    plain = _rounds_profile(1e9)
    waiting = plain.model_copy(update={"batch_wait_timeout_iters": 20, "batch_wait_max_tokens_ratio": 0.9})
    off, on = colocated_closed_loop(costs, 8, plain), colocated_closed_loop(costs, 8, waiting)
    expected_ms = batch_wait_steps(20, (0.9 * 16384 - 8) / 999, on.throughput_rps * on.tpot_ms.mean / 1e3)[0] \
        * on.tpot_ms.mean
    assert 15 * on.tpot_ms.mean < expected_ms < 20 * on.tpot_ms.mean
    assert on.ttft_ms.mean - off.ttft_ms.mean == pytest.approx(expected_ms, rel=0.1)
    assert on.throughput_rps < off.throughput_rps
    # Not with attention DP (the executor skips it), nor with one client (nothing decodes beside it).
    dp = _costs(servers=8, chunk=16384)
    assert colocated_closed_loop(dp, 64, waiting).ttft_ms.mean == colocated_closed_loop(dp, 64, plain).ttft_ms.mean
    assert colocated_closed_loop(costs, 1, waiting).ttft_ms.mean == colocated_closed_loop(costs, 1, plain).ttft_ms.mean


def _rounds_profile(rounds: float):
    return get_engine_profile("vllm").model_copy(update=dict(
        closed_loop_cohort_fraction=0.0, request_overhead_ms=0.0, closed_loop_rounds=rounds))


def test_closed_loop_first_burst_is_averaged_over_the_benchmark_rounds():
    """All N clients start at once: the first round's prompts queue for prefill one chunk after another
    (mean TTFT prefill + (N - 1) / 2 x 0.1 s at 1000 tokens x 0.1 ms), and a run of R rounds adds
    (first round - steady) / R to the mean TTFT."""
    costs = _costs()
    steady = colocated_closed_loop(costs, 16, _rounds_profile(1e9)).ttft_ms.mean
    one = colocated_closed_loop(costs, 16, _rounds_profile(1.0)).ttft_ms.mean
    four = colocated_closed_loop(costs, 16, _rounds_profile(4.0)).ttft_ms.mean
    assert one == pytest.approx(100 + 0.5 * 15 * 100, rel=0.02)
    assert four - steady == pytest.approx((one - steady) / 4, rel=1e-6)
    # Disaggregated: one prefill server takes the burst one prompt after another (0.1 s each).
    prefill, decode = _costs(kv_s=0.01), _costs(max_batch=512)
    d_steady, _ = disaggregated_closed_loop(prefill, 1, decode, 1, 8, _rounds_profile(1e9))
    d_one, _ = disaggregated_closed_loop(prefill, 1, decode, 1, 8, _rounds_profile(1.0))
    assert d_one.ttft_ms.mean == pytest.approx(110 + 0.5 * 7 * 100 + 1.5 * 20.2, rel=0.05)
    assert d_one.ttft_ms.mean > d_steady.ttft_ms.mean + 250


def test_prefill_first_engine_runs_a_closed_loop_as_one_wave():
    """16 clients, 1000-token prompts at 0.1 ms/token, 200 outputs, decode 20 ms + 0.1 ms/sequence:
    the wave prefills for 1.6 s, then decodes 199 steps of 21.6 ms together."""
    costs = _costs()
    profile = _rounds_profile(10.0).model_copy(update=dict(prefill_first=True))
    point = colocated_closed_loop(costs, 16, profile)
    assert point.ttft_ms.mean == pytest.approx(100 + 7.5 * 100)
    assert point.ttft_ms.p90 == pytest.approx(100 + 0.9 * 15 * 100)
    # TPOT = step + the rest of the wave's prefill a prompt waits through, over its 199 gaps.
    assert point.tpot_ms.mean == pytest.approx(21.6 + 7.5 * 100 / 199)
    assert point.throughput_rps == pytest.approx(16 / (1.6 + 199 * 0.0216))
    assert point.decode_batch == 16
    # Beyond the KV capacity the rest wait for a later wave; the mixed-chunk model queues far less.
    full = colocated_closed_loop(_costs(max_batch=8), 16, profile)
    assert full.bottleneck == "kv_capacity"
    assert full.ttft_ms.mean > point.ttft_ms.mean
    assert colocated_closed_loop(costs, 16, _rounds_profile(10.0)).ttft_ms.mean < 0.5 * point.ttft_ms.mean


def test_disaggregated_closed_loop_queues_at_the_prefill_bottleneck():
    prefill, decode = _costs(kv_s=0.01), _costs(max_batch=512)
    light, _ = disaggregated_closed_loop(prefill, 1, decode, 1, 2)
    heavy, _ = disaggregated_closed_loop(prefill, 1, decode, 1, 400)
    # prefill + KV + half a decode step to the next step boundary (the decode instance is busy)
    # + the first step, plus a tenth (10 rounds without a profile) of the first burst's wait for the
    # other prompt (0.1 s / 2)
    steady_ms = 100 + 10 + 1.5 * 20.2
    assert light.ttft_ms.mean == pytest.approx(steady_ms + 0.5 * 100 / 10, rel=0.03)
    assert heavy.throughput_rps <= 10.0 * 1.01                             # 0.1 s per prompt
    assert heavy.ttft_ms.mean > 10 * light.ttft_ms.mean


# ------------------------------------------------------------------ decode slots and stages in series


def test_slot_wait_is_halfin_whitt_when_steps_do_not_slow():
    # a = 2 x 40 = 80 of c = 100 slots: beta = 20 / sqrt(80) = 2.236; P = 1 / (1 + beta Phi / phi)
    # = 1 / (1 + 2.236 x 0.98733 / 0.03267) = 0.01459; E[W | W > 0] = 40 / 20 = 2 s.
    p_wait, cond = slot_wait_arrays(np.array([2.0]), np.array([40.0]), 100)
    assert p_wait[0] == pytest.approx(0.01459, rel=0.01)
    assert cond[0] == pytest.approx(2.0, rel=1e-9)


def test_slot_wait_grows_when_a_full_batch_steps_slower():
    # With all 100 slots held the residence is 45 s instead of 40 s: the full batch drains
    # 100 / 45 - 2 = 0.222 req/s more than arrive, so those who wait, wait 4.5 s, not 2 s.
    base_p, _ = slot_wait_arrays(np.array([2.0]), np.array([40.0]), 100)
    p_wait, cond = slot_wait_arrays(np.array([2.0]), np.array([40.0]), 100, full_residence_s=np.array([45.0]))
    assert cond[0] == pytest.approx(1.0 / (100 / 45 - 2.0), rel=1e-9)
    assert p_wait[0] > base_p[0]
    # No drain left at the full batch: unstable.
    p_wait, cond = slot_wait_arrays(np.array([2.0]), np.array([40.0]), 100, full_residence_s=np.array([50.0]))
    assert p_wait[0] == 1.0 and math.isinf(cond[0])


def test_instances_behind_one_router_pool_their_decode_slots():
    # Two instances at the same per-instance rate share 2 x 16 slots: a many-server wait (the
    # pool's rate and slots) is shorter than each instance's own; one instance is unchanged.
    costs = _costs(max_batch=16)
    for phase in ("decode", "colocated"):
        rate = 0.9 * max(r for r in np.linspace(0.1, 20.0, 200) if load_at_rate(costs, phase, r).stable)
        alone = rows_at_rate(costs, phase, rate)
        assert rows_at_rate(costs, phase, rate, instances=1).ttft_mean_s[0] == alone.ttft_mean_s[0]
        pooled = rows_at_rate(costs, phase, rate, instances=2)
        assert pooled.ttft_wait_probability[0] * pooled.ttft_wait_conditional_s[0] < (
            alone.ttft_wait_probability[0] * alone.ttft_wait_conditional_s[0])
        assert pooled.tpot_mean_s[0] == pytest.approx(alone.tpot_mean_s[0], rel=1e-9)


def test_disaggregated_ttft_combines_the_decode_slot_wait_as_a_distribution():
    from layoutopt.perf_model.load import series_ttft

    # Prefill: no wait, 0.1 s. Decode: waits with probability 0.3, 2 s on average, first step 0.02 s.
    # One exponential wait of mean 0.6 s with the 2 s tail: P = 0.3; p90 = 2 ln(0.3 / 0.1) + 0.12.
    prefill = dataclasses.replace(rows_at_rate(_costs(), "prefill", 1e-6), ttft_wait_probability=np.array([0.0]),
                                  ttft_wait_conditional_s=np.array([0.0]), ttft_service_s=np.array([[0.1]]))
    decode = dataclasses.replace(prefill, ttft_wait_probability=np.array([0.3]),
                                 ttft_wait_conditional_s=np.array([2.0]), ttft_service_s=np.array([[0.02]]))
    stats = series_ttft(prefill, decode, np.array([1.0]))
    assert stats.mean == pytest.approx((0.6 + 0.12) * 1e3, rel=1e-6)
    assert stats.p90 == pytest.approx((2.0 * math.log(3.0) + 0.12) * 1e3, rel=1e-3)
    assert stats.p50 == pytest.approx(120.0, rel=1e-6)


def test_colocated_tpot_tail_is_right_skewed():
    # Prompts arriving while a request decodes lengthen its steps (a compound-Poisson sum, an
    # M/G/1 busy period): the TPOT tail stretches further above the median than a normal's.
    point = load_at_rate(_costs(), "colocated", 4.0)
    tpot = point.tpot_ms
    assert tpot.p50 < tpot.p90 < tpot.p99
    assert tpot.p99 - tpot.p50 > (2.326 / 1.2816) * (tpot.p90 - tpot.p50)


# ------------------------------------------------------------------ lockstep DP ranks, once-per-step floor


def test_lockstep_share_hand_values():
    from scipy.stats import poisson

    from layoutopt.perf_model.load_colocated import lockstep_share

    # One rank: every prompt adds its whole work.
    assert lockstep_share(np.array([0.3, 5.0]), 1) == pytest.approx([1.0, 1.0])
    # E[ceil(K / r)] / E[K] by direct summation over the Poisson pmf.
    for mu, ranks in ((1.0, 2), (3.0, 4), (40.0, 8)):
        k = np.arange(400)
        expected = float((np.ceil(k / ranks) * poisson.pmf(k, mu)).sum()) / mu
        assert lockstep_share(np.array([mu]), ranks)[0] == pytest.approx(expected, rel=1e-7)
    # A trickle: a prompt has its step to itself; a flood: every rank takes 1/r of the prompts.
    assert lockstep_share(np.array([1e-4]), 8)[0] == pytest.approx(1.0, abs=1e-3)
    assert lockstep_share(np.array([4000.0]), 8)[0] == pytest.approx(1 / 8, rel=0.01)


def test_lockstep_share_spline_follows_the_exact_sum():
    """The spline lockstep_share reads agrees with the plain sum over every rank multiple (no
    window) within 1e-7, inside its range and past it (where the exact sum answers)."""
    from scipy.special import pdtrc

    from layoutopt.perf_model.load_colocated import lockstep_share

    mu = np.exp(np.random.default_rng(7).uniform(np.log(1e-4), np.log(3000.0), 400))
    for ranks in (2, 3, 8, 32, 128):
        j = np.arange(int((mu.max() + 10 * np.sqrt(mu.max()) + 10) / ranks) + 2)
        plain = pdtrc(j[None, :] * ranks, mu[:, None]).sum(axis=1) / mu
        assert np.allclose(lockstep_share(mu, ranks), plain, rtol=1e-7, atol=0.0)


def test_colocated_launch_floor_is_paid_once_per_step():
    """W = 10 ms of which 8 ms is an eager launch floor: with mu = n / (O - 1) prompts per step the
    step lasts d + mu (W - F) + (1 - e^-mu) F, so tau (hence the rate) follows by hand."""
    from layoutopt.perf_model.load_colocated import colocated_rates_rps

    base = _costs(input_tokens=(100.0,), output_tokens=101.0)  # W = 100 x 0.1 ms = 10 ms
    floor = np.full_like(base.prompt_extra_s, 0.008)
    costs = dataclasses.replace(base, prompt_floor_s=floor)
    n = np.array([10.0, 100.0])
    mu = n / 100.0
    d = 0.02 + 1e-4 * (1.0 + n)  # the decode step at the batch a request sees (itself and n others)
    tau = d + mu * (0.010 - 0.008) + (1.0 - np.exp(-mu)) * 0.008
    assert colocated_rates_rps(costs, n) == pytest.approx(n / (100.0 * tau), rel=1e-9)
    # Without the floor marked, each prompt pays all of W.
    assert colocated_rates_rps(base, n) == pytest.approx(n / (100.0 * (d + mu * 0.010)), rel=1e-9)


def test_trtllm_tpot_monotonic_in_rate_at_huge_batches():
    """TensorRT-LLM's eager launch floor is one per step: more prompts per step never make decode
    faster (it was charged per prompt, and TPOT fell from 500 ms at 400 req/s to an unstable
    262 ms at 600 on 8 B300 fp4 instances with 128-token prompts)."""
    from layoutopt import api
    from layoutopt.plan import Layout

    layout = Layout(tp_size=1, weight_precision="fp4", kv_precision="fp8")
    tpot = [api.estimate("llama-3.1-70b", "B300", "trtllm", isl=128, osl=128, layout=layout, instances=8,
                         rate=rate).tpot_ms.mean for rate in (100, 200, 400, 600, 800, 1000)]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(tpot, tpot[1:])), tpot
