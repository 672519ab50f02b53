"""The simulator core on synthetic step times: hand-checked latencies, determinism, overload, memory."""

from __future__ import annotations

import numpy as np
import pytest

from layoutopt.errors import InputError
from layoutopt.simulator.engine import Simulation
from layoutopt.simulator.pools import PoolSpec, Requests
from layoutopt.simulator.run import simulate_pools
from layoutopt.simulator.step_times import LinearStepTimes, Table1D, Table2D, Table3D, TabulatedStepTimes
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

SLO_LOOSE = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50}, attainment=0.9)
# 1000-token prompts at 0.1 ms per token: 100 ms prefill; decode steps of 20 ms whatever the batch.
STEPS = LinearStepTimes(prefill_s_per_token=1e-4, decode_base_s=0.02)
FIXED = Workload(input_tokens={"kind": "fixed", "tokens": 1000}, output_tokens={"kind": "fixed", "tokens": 101})


def colocated(num_instances: int = 1, steps=STEPS, **kw) -> list[PoolSpec]:
    return [PoolSpec("colocated", "colocated", num_instances, steps, max_batch_size=64, **kw)]


def disaggregated(transfer_s: float = 0.01) -> list[PoolSpec]:
    return [PoolSpec("prefill", "prefill", 1, STEPS, max_batch_size=64),
            PoolSpec("decode", "decode", 1, STEPS, max_batch_size=64, kv_transfer_s=lambda tokens: transfer_s)]


def run(pools, rate_rps, workload=FIXED, n=2000, seed=0, slo=SLO_LOOSE):
    return simulate_pools(pools, workload, slo, rate_rps=rate_rps, num_requests=n, seed=seed)


def test_colocated_low_rate_matches_hand_computed_latencies():
    result = run(colocated(), rate_rps=0.05)
    # Alone on the instance: TTFT = 1000 x 0.1 ms; then 100 decode steps of 20 ms.
    assert result.ttft_ms.p50 == pytest.approx(100.0, rel=1e-6)
    assert result.tpot_ms.p50 == pytest.approx(20.0, rel=1e-6)
    assert result.slo_attainment == 1.0 and result.meets_slo


def test_disaggregated_low_rate_adds_transfer_and_first_decode_step():
    result = run(disaggregated(transfer_s=0.01), rate_rps=0.05)
    # prefill 100 ms + KV transfer 10 ms + the decode instance's first step 20 ms.
    assert result.ttft_ms.p50 == pytest.approx(130.0, rel=1e-6)
    assert result.tpot_ms.p50 == pytest.approx(20.0, rel=1e-6)


def test_same_seed_same_result_and_other_seed_differs():
    pools = disaggregated()
    a, b = run(pools, rate_rps=5.0, seed=3), run(pools, rate_rps=5.0, seed=3)
    assert a == b
    assert a.model_dump() == b.model_dump()
    assert run(pools, rate_rps=5.0, seed=4).ttft_ms != a.ttft_ms


def test_overload_grows_queues_and_attainment_falls_without_crashing():
    light = run(colocated(), rate_rps=2.0)
    heavy = run(colocated(), rate_rps=30.0)  # prefill alone needs 3 s of work per second
    assert light.meets_slo and light.pools[0].queue_growth_per_s == pytest.approx(0.0, abs=0.05)
    assert heavy.pools[0].queue_growth_per_s > 1.0
    assert heavy.pools[0].max_queue_length > 100
    assert heavy.slo_attainment < 0.1 and not heavy.meets_slo
    assert heavy.throughput_rps < 30.0
    assert np.isfinite(heavy.ttft_ms.p99)


def test_disaggregated_overload_queues_at_the_prefill_pool():
    result = run(disaggregated(), rate_rps=20.0)  # prefill capacity ~10 prompts/s
    prefill, decode = result.pools
    assert prefill.queue_growth_per_s > 1.0 and prefill.utilization_fraction > 0.99
    assert decode.queue_growth_per_s == pytest.approx(0.0, abs=0.5)


def test_more_instances_cut_the_queue():
    one = run(colocated(1), rate_rps=8.0)
    four = run(colocated(4), rate_rps=8.0)
    assert four.ttft_ms.p90 < one.ttft_ms.p90
    assert four.pools[0].mean_queue_length < one.pools[0].mean_queue_length


def test_kv_memory_limits_the_decode_batch():
    # Room for exactly 4 sequences of 1101 tokens at 1 byte per token.
    limited = colocated(kv_capacity_bytes=4 * 1101.0, kv_bytes_per_sequence=lambda tokens: float(tokens))
    result = run(limited, rate_rps=3.0)
    assert result.pools[0].mean_decode_batch <= 4.0 + 1e-9
    roomy = run(colocated(), rate_rps=3.0)
    assert result.ttft_ms.p90 > roomy.ttft_ms.p90  # requests wait for memory


def test_batch_dependent_decode_slows_with_load():
    steps = LinearStepTimes(prefill_s_per_token=1e-4, decode_base_s=0.01, decode_s_per_sequence=0.001)
    light, heavy = run(colocated(steps=steps), 0.5), run(colocated(steps=steps), 4.0)
    assert heavy.tpot_ms.p50 > light.tpot_ms.p50 > 10.0


def test_single_token_outputs_have_zero_tpot():
    one_token = Workload(input_tokens={"kind": "fixed", "tokens": 500}, output_tokens={"kind": "fixed", "tokens": 1})
    for pools in (colocated(), disaggregated()):
        result = run(pools, rate_rps=1.0, workload=one_token, n=200)
        assert result.tpot_ms.p99 == 0.0 and result.num_measured > 0


def test_long_prompts_are_chunked_by_the_token_budget():
    long = Workload(input_tokens={"kind": "fixed", "tokens": 20_000}, output_tokens={"kind": "fixed", "tokens": 10})
    result = run(colocated(max_batched_tokens=8192), rate_rps=0.01, workload=long, n=50)
    # Three chunks (8192 + 8192 + 3616) of 0.1 ms per token: 2 s in all.
    assert result.ttft_ms.p50 == pytest.approx(2000.0, rel=1e-6)


def test_arrivals_are_poisson_at_the_rate():
    result = run(colocated(4), rate_rps=5.0, n=4000)
    assert result.throughput_rps == pytest.approx(5.0, rel=0.06)


def test_input_errors():
    with pytest.raises(InputError, match="--rate"):
        run(colocated(), rate_rps=0.0)
    with pytest.raises(InputError, match="--requests"):
        run(colocated(), rate_rps=1.0, n=5)
    with pytest.raises(InputError, match="not both"):
        simulate_pools(colocated(), FIXED, SLO_LOOSE, rate_rps=1.0, num_requests=100, duration_s=10.0)
    with pytest.raises(ValueError, match="both a prefill and a decode"):
        Simulation(disaggregated()[:1], Requests(np.zeros(1), np.ones(1, int), np.zeros(1, int), np.ones(1, int)),
                   0.0, 1.0)


def test_tables_interpolate_and_clamp():
    table = Table1D(np.array([0.0, 10.0]), np.array([1.0, 3.0]))
    assert table(5.0) == pytest.approx(2.0) and table(-1.0) == 1.0 and table(20.0) == 3.0
    grid = np.array([1.0, 2.0])
    flat = Table2D(grid, grid, np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert flat(1.5, 1.5) == pytest.approx(2.5)
    cube = Table3D(grid, grid, grid, np.arange(8.0).reshape(2, 2, 2))
    assert cube(1.5, 1.5, 1.5) == pytest.approx(3.5)
    times = TabulatedStepTimes(prefill=cube, decode=flat, mixed=cube)
    assert times.decode_step_s(2, 2.0) == pytest.approx(4.0)
    assert times.prefill_step_s(4, 2, 1.0) == pytest.approx(cube(2.0, 2.0, 1.0))
