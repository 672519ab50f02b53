"""Simulating hand-built plans with step times from the performance model."""

from __future__ import annotations

import pytest

from layoutopt.errors import InputError
from layoutopt.plan import Explanation, Plan, Pool, SolverInfo, Totals
from layoutopt.simulator.perf_tables import plan_pool_specs
from layoutopt.simulator.run import simulate
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

CHAT = Workload(name="chat-like", input_tokens={"kind": "lognormal", "mean": 1500, "p90": 3000},
                output_tokens={"kind": "lognormal", "mean": 250, "p90": 500})
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50}, attainment=0.9)


def make_pool(role: str, instances: int, gpu: str = "H100-SXM", tp: int = 2, dp: int = 1, ep: int = 1,
              max_batch_size: int = 256, capacity_rps: float = 1.0) -> Pool:
    return Pool(role=role, gpu=gpu, instances=instances, gpus_per_instance=tp * dp, tp_size=tp, pp_size=1,
                ep_size=ep, dp_size=dp, dcp_size=1, pcp_size=1, precision="bf16", kv_precision="bf16",
                max_batch_size=max_batch_size, capacity_rps=capacity_rps, cost_usd_per_hour=3.0 * instances * tp * dp)


def make_plan(pools: list[Pool], model: str = "qwen3-32b", rate_rps: float = 4.0, workload: Workload = CHAT,
              slo: SLO = SLO_CHAT) -> Plan:
    """A plan as the optimizer would write it, planned for ``rate_rps``."""
    roles = {p.role for p in pools}
    gpus = sum(p.num_gpus for p in pools)
    cost = sum(p.cost_usd_per_hour for p in pools)
    totals = Totals(gpus=gpus, gpus_by_type={"H100-SXM": gpus}, cost_usd_per_hour=cost, goodput_rps=rate_rps,
                    output_tok_per_s=rate_rps * workload.mean_output_tokens,
                    tok_per_s_per_gpu=rate_rps * workload.mean_output_tokens / gpus,
                    requests_per_usd=rate_rps * 3600 / cost)
    return Plan(status="optimal", objective="goodput-per-dollar",
                mode="colocated" if roles == {"colocated"} else "disaggregated", model=model, engine="vllm",
                workload={"workload": workload.model_dump(mode="json"), "slo": slo.model_dump(mode="json")},
                pools=pools, totals=totals, latency=None,
                solver=SolverInfo(status="optimal", wall_time_s=0.1, objective_value=None, best_bound=None, gap=0.0,
                                  num_candidates=1),
                explanation=Explanation(binding_constraints=[], notes=[]))


# (plan, planned rate): each plan's capacity leaves headroom at its planned rate (rho <= 0.7).
PLANNED = [
    pytest.param(make_plan([make_pool("colocated", 2)], rate_rps=5.0), id="qwen3-32b-colocated-2xtp2"),
    pytest.param(make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=4.0),
                 id="qwen3-32b-1p1d-tp2"),
    pytest.param(make_plan([make_pool("colocated", 1, tp=1)], model="qwen3-30b-a3b", rate_rps=4.0),
                 id="qwen3-30b-a3b-colocated-tp1"),
    pytest.param(make_plan([make_pool("prefill", 1, tp=4), make_pool("decode", 2, tp=4)], model="llama-3.1-70b",
                           rate_rps=3.0), id="llama-70b-1p2d-tp4"),
]


@pytest.mark.parametrize("plan", PLANNED)
def test_plans_meet_their_slo_at_the_planned_rate(plan):
    result = simulate(plan, num_requests=3000, seed=1)
    assert result.rate_rps == plan.totals.goodput_rps
    assert result.meets_slo, (result.ttft_ms, result.tpot_ms, result.slo_attainment)
    assert result.throughput_rps == pytest.approx(plan.totals.goodput_rps, rel=0.1)
    assert all(pool.queue_growth_per_s < 0.5 for pool in result.pools)


def test_overloaded_plan_misses_its_slo_with_growing_prefill_queue():
    plan = make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=4.0)
    result = simulate(plan, rate_rps=40.0, num_requests=3000)
    assert not result.meets_slo and result.slo_attainment < 0.5
    assert result.pools[0].queue_growth_per_s > 1.0
    assert result.throughput_rps < 40.0


def test_same_seed_same_result_from_the_perf_model():
    plan = PLANNED[0].values[0]
    assert simulate(plan, num_requests=1000, seed=7) == simulate(plan, num_requests=1000, seed=7)


def test_arguments_override_the_plan():
    plan = PLANNED[0].values[0]
    strict = SLO(ttft_ms={"p90": 1}, tpot_ms={"p90": 1}, attainment=0.9)
    short = Workload(input_tokens={"kind": "fixed", "tokens": 100}, output_tokens={"kind": "fixed", "tokens": 20})
    result = simulate(plan, short, rate_rps=1.0, duration_s=100.0, slo=strict)
    assert result.num_requests == 100 and result.slo_attainment == 0.0 and result.ttft_target_ms == 1.0


def test_pool_specs_carry_memory_and_transfer():
    plan = PLANNED[1].values[0]
    prefill, decode = plan_pool_specs(plan)
    assert prefill.role == "prefill" and decode.role == "decode"
    assert decode.kv_capacity_bytes > 10 * 2**30  # two H100s hold qwen3-32b with room for KV
    assert 0 < decode.kv_transfer_s(4000) < 0.1  # ~1 GB over two 400 Gb/s NICs
    assert decode.kv_bytes_per_sequence(2000) == pytest.approx(2 * decode.kv_bytes_per_sequence(1000), rel=0.01)


def test_plans_without_what_to_simulate_are_input_errors():
    bare = make_plan([make_pool("colocated", 1)]).model_copy(update={"workload": {}, "totals": None})
    with pytest.raises(InputError, match="workload"):
        simulate(bare)
    with pytest.raises(InputError, match="slo"):
        simulate(bare, CHAT)
    with pytest.raises(InputError, match="rate"):
        simulate(bare, CHAT, slo=SLO_CHAT)
    empty = make_plan([make_pool("colocated", 1)]).model_copy(update={"pools": [], "status": "infeasible"})
    with pytest.raises(InputError, match="infeasible"):
        simulate(empty)


def test_a_layout_that_does_not_fit_is_an_input_error():
    plan = make_plan([make_pool("colocated", 1, tp=1)], model="llama-3.1-405b")
    with pytest.raises(InputError, match="misses by"):
        simulate(plan, num_requests=100)


def test_simulate_reports_the_engine_rules_a_plan_breaks():
    """A hand-edited plan whose decode pool runs PP 2 with the NIXL KV connector (vLLM 0.33.0 refuses
    it, engines/rules.py pp_kv_connector) still simulates, as a what-if, and says which rule it breaks;
    the plan as the optimizer writes it breaks none."""
    from layoutopt.simulator.run import simulate

    good = make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=2.0)
    assert simulate(good, num_requests=200, seed=1).rule_violations == []
    decode = make_pool("decode", 1).model_copy(update={"pp_size": 2, "gpus_per_instance": 4})
    bad = make_plan([make_pool("prefill", 1), decode], rate_rps=2.0)
    broken = simulate(bad, num_requests=200, seed=1).rule_violations
    assert [v.rule for v in broken] == ["pp_kv_connector"], broken
