"""Plans the optimizer says meet the SLO meet it in simulation at their planned rate."""

from __future__ import annotations

import pytest

from layoutopt import api
from layoutopt.simulator.run import simulate
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50}, attainment=0.9)

# (model, budget, workload preset, mode)
SCENARIOS = [
    ("qwen3-32b", "16xH100", "chat", "auto"),
    ("qwen3-32b", "16xH100", "chat", "disaggregated"),
    # An attention-DP prefill instance is dp servers in both the perf model and the simulator
    # (each rank its own scheduler); the optimizer once chose 1 x tp1-ep4-dp4 here at 231 req/s,
    # rated as 4 servers each with the whole instance's batch, which the simulator ran as one.
    ("qwen3-30b-a3b", "8xH100", "chat", "auto"),
    ("llama-3.1-70b", "32xH100", "rag", "auto"),
]


@pytest.mark.parametrize("model,budget,preset,mode", SCENARIOS,
                         ids=[" ".join(s.values if hasattr(s, "values") else s) for s in SCENARIOS])
def test_optimizer_plans_meet_their_slo_in_simulation(model, budget, preset, mode):
    plan = api.solve(model=model, budget=budget, slo=SLO_CHAT, workload=preset_workload(preset), mode=mode)
    assert plan.status in ("optimal", "feasible") and plan.totals is not None
    result = simulate(plan, num_requests=5000, seed=0)
    assert result.rate_rps == pytest.approx(plan.totals.goodput_rps)
    assert result.meets_slo, (plan.pools, result.ttft_ms, result.tpot_ms, result.slo_attainment)
    assert all(pool.queue_growth_per_s < 1.0 for pool in result.pools)


def test_deep_pp_prefill_plan_meets_its_slo_in_simulation(monkeypatch):
    """With the PP pre-cut off the optimizer puts qwen3-32b's prefill on PP2 and PP8 instances;
    they keep pp steps in flight (--max-num-seqs holds them all) and meet the SLO in simulation."""
    from layoutopt.optimizer import enumeration
    from layoutopt.optimizer.pre_cuts import PreCuts

    monkeypatch.setattr(enumeration, "DEFAULT_PRE_CUTS", PreCuts())
    plan = api.solve(model="qwen3-32b", budget="16xH100", slo=SLO_CHAT, workload=preset_workload("chat"))
    assert plan.status in ("optimal", "feasible") and plan.totals is not None
    deep = [p for p in plan.pools if p.role == "prefill" and p.pp_size >= 4]
    assert deep, plan.pools  # the premise: a deep-PP prefill pool
    result = simulate(plan, num_requests=5000, seed=0)
    assert result.meets_slo, (plan.pools, result.ttft_ms, result.slo_attainment)
    assert all(pool.queue_growth_per_s < 1.0 for pool in result.pools)
