"""``api.solve`` end to end: defaults, objectives, modes, alternatives, infeasible inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from layoutopt import api
from layoutopt.errors import InputError
from layoutopt.workloads.slo import SLO

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})


@pytest.fixture(scope="module")
def default_plan():
    return api.solve(None, "32xH100", EXAMPLES / "slo.yaml")


def test_defaults_as_the_readme_command_writes_it(default_plan):
    plan = default_plan
    assert plan.status == "optimal" and plan.model == "qwen3-32b"
    assert plan.defaults_used == ["model: qwen3-32b", "workload: chat preset (mean 1400 in / 250 out tokens)"]
    assert plan.pools and plan.totals.gpus <= 32
    assert plan.totals.cost_usd_per_hour == pytest.approx(sum(p.cost_usd_per_hour for p in plan.pools))
    assert plan.totals.requests_per_usd == pytest.approx(plan.totals.goodput_rps * 3600 / plan.totals.cost_usd_per_hour)
    assert plan.latency.ttft_ms.p90 <= 1000 and plan.latency.tpot_ms.p90 <= 30
    assert 0.9 <= plan.latency.slo_attainment <= 1
    assert plan.explanation.binding_constraints
    assert plan.solver.num_candidates > 0 and plan.solver.num_layouts_considered > plan.solver.num_candidates


def test_json_schema_keys(default_plan):
    data = default_plan.model_dump(mode="json")
    for key in ("schema_version", "status", "objective", "mode", "pools", "totals", "latency", "solver", "explanation"):
        assert key in data
    for key in ("role", "gpu", "instances", "gpus_per_instance", "tp_size", "pp_size", "ep_size", "dp_size",
                "dcp_size", "pcp_size", "precision", "max_batch_size", "capacity_rps"):
        assert key in data["pools"][0]
    for key in ("gpus", "cost_usd_per_hour", "goodput_rps", "output_tok_per_s", "tok_per_s_per_gpu",
                "requests_per_usd"):
        assert key in data["totals"]
    assert set(data["latency"]) == {"ttft_ms", "tpot_ms", "slo_attainment"}
    for key in ("status", "wall_time_s", "objective_value", "best_bound", "gap", "num_candidates"):
        assert key in data["solver"]
    assert {"binding_constraints", "notes"} <= set(data["explanation"])


def test_no_defaults_when_everything_is_given():
    plan = api.solve("qwen3-32b", "8xH100", EXAMPLES / "slo.yaml", EXAMPLES / "workload-chat.yaml")
    assert plan.defaults_used == [] and plan.status == "optimal"
    fixed = api.solve("qwen3-32b", "8xH100", CHAT, isl=2000, osl=200)
    assert fixed.workload["workload"]["input_tokens"] == {"kind": "fixed", "tokens": 2000}


def test_rate_objectives():
    ratio = api.solve("qwen3-32b", "16xH100", CHAT, rate_rps=20.0)
    cheapest = api.solve("qwen3-32b", "16xH100", CHAT, rate_rps=20.0, objective="min-cost")
    most = api.solve("qwen3-32b", "16xH100", CHAT, objective="max-goodput")
    assert ratio.totals.goodput_rps >= 20.0 and cheapest.totals.goodput_rps >= 20.0
    assert cheapest.totals.cost_usd_per_hour <= ratio.totals.cost_usd_per_hour + 1e-9
    assert most.totals.goodput_rps >= ratio.totals.goodput_rps - 1e-9
    assert cheapest.solver.objective_unit == "$/h" and most.solver.objective_unit == "req/s"
    assert "target rate" in cheapest.explanation.binding_constraints


@pytest.mark.parametrize("mode, roles", [("colocated", {"colocated"}), ("disaggregated", {"prefill", "decode"})])
def test_mode_restriction(mode, roles):
    plan = api.solve("qwen3-32b", "8xH100", CHAT, mode=mode)
    assert {p.role for p in plan.pools} == roles and plan.mode == mode


def test_fixed_precision_and_alternatives():
    plan = api.solve("qwen3-32b", "16xH100", CHAT, precision="fp8", top_k=2)
    assert {p.precision for p in plan.pools} == {"fp8"}
    assert len(plan.alternatives) == 2
    kinds = [{(p.role, p.layout) for p in alt.pools} for alt in plan.alternatives]
    assert {(p.role, p.layout) for p in plan.pools} not in kinds and kinds[0] != kinds[1]
    assert all(alt.objective_value <= plan.solver.best_bound + 1e-6 for alt in plan.alternatives)


def test_deterministic():
    first = api.solve("qwen3-32b", "24xH100+8xH200", CHAT).model_dump(mode="json")
    second = api.solve("qwen3-32b", "24xH100+8xH200", CHAT).model_dump(mode="json")
    for data in (first, second):
        data["solver"].pop("wall_time_s")
    assert first == second


@pytest.mark.parametrize("kwargs, reason, suggestion", [
    (dict(model="qwen3-32b", budget="8xH100", slo=SLO(ttft_ms={"p90": 5}, tpot_ms={"p90": 30})),
     "TTFT p90 5 ms is below the fastest prefill", "a TTFT p90 target of"),
    (dict(model="qwen3-32b", budget="8xH100", slo=CHAT, rate_rps=1000.0),
     "the budget serves at most", "a larger budget"),
    (dict(model="qwen3.5-397b-a17b", budget="2xH100", slo=CHAT),
     "GiB for its weights", "a budget of at least 8xH100-SXM"),
    (dict(model="qwen3-32b", budget="8xMI300X", slo=CHAT, precision="fp4"),   # H100 serves FP4 weight-only
     "no fp4 support", "--precision auto"),
    (dict(model="glm-5", budget="16xB200", slo=CHAT, engine="sglang==0.5.3"),  # predates GLM-5
     "has no implementation of GlmMoeDsaForCausalLM", "--engine vllm==0.33.0 or --engine sglang==0.5.23"),
])
def test_infeasible_says_why_and_what_would_work(kwargs, reason, suggestion):
    plan = api.solve(**kwargs)
    assert plan.status == "infeasible" and plan.pools == [] and plan.totals is None
    assert any(reason in r for r in plan.explanation.reasons), plan.explanation.reasons
    assert any(suggestion in s for s in plan.explanation.suggestions), plan.explanation.suggestions


@pytest.mark.parametrize("kwargs, field", [
    (dict(objective="cheapest"), "--objective"),
    (dict(objective="min-cost"), "--rate"),
    (dict(headroom=0.0), "--headroom"),
    (dict(isl=100), "--isl/--osl"),
    (dict(mode="split"), "--mode"),
    (dict(top_k=-1), "--top-k"),
])
def test_bad_input_is_an_input_error(kwargs, field):
    with pytest.raises(InputError) as error:
        api.solve("qwen3-32b", "8xH100", CHAT, **kwargs)
    assert error.value.field == field


@pytest.mark.parametrize("kwargs, field", [
    ({"isl": 2_000_000, "osl": 10}, "workload"),        # qwen3-32b holds 40,960 tokens of context
    ({"time_limit_s": float("inf")}, "--time-limit"),
    ({"time_limit_s": float("nan")}, "--time-limit"),
])
def test_api_refuses_what_the_cli_refuses(kwargs, field):
    with pytest.raises(InputError) as error:
        api.solve("qwen3-32b", "8xH100", **kwargs)
    assert error.value.field == field


def test_infeasible_names_the_smallest_prefill_decode_pair_over_the_budget():
    # 64k-token prompts at TTFT 3 s: only a 32-GPU PCP prefill (tp2-pp4-pcp4) and 8-GPU decodes meet the
    # SLO on H200, and no colocated instance does, so 32 GPUs cannot hold a pair; 40 can.
    slo = SLO(ttft_ms={"p90": 3000}, tpot_ms={"p90": 40}, attainment=0.9)
    kwargs = dict(slo=slo, isl=64000, osl=500, rate_rps=0.5)
    plan = api.solve("deepseek-v3", "32xH200", **kwargs)
    assert plan.status == "infeasible"
    [reason] = plan.explanation.reasons
    assert "smallest prefill + decode pair" in reason and "needs 40xH200-SXM" in reason, reason
    assert "a budget of at least 40xH200-SXM" in plan.explanation.suggestions
    assert api.solve("deepseek-v3", "40xH200", **kwargs).status == "optimal"


def test_infeasible_budget_names_the_cheapest_gpu_type_that_serves():
    # DeepSeek-V3 cannot fit 8 L4s; the diagnosis tries other types cheapest first and stops at the
    # first that serves both phases, so an infeasible answer costs one more evaluation, not three.
    plan = api.solve("deepseek-v3", "8xL4")
    others = [s for s in plan.explanation.suggestions if s.startswith("another GPU type")]
    assert plan.status == "infeasible" and len(others) == 1, plan.explanation.suggestions
