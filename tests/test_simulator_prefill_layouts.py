"""Deep-PP and attention-DP prefill instances: the simulator serves what the performance model rates.

A PP prefill instance keeps pp steps in flight (vLLM: ``max_concurrent_batches`` = pp,
config/vllm.py:588; v1/engine/core.py:708), all counted against --max-num-seqs
(v1/core/sched/scheduler.py:1072), so the plan's batch limit holds pp steps' prompts. An
attention-DP prefill instance is dp schedulers, each with its own budget and batch limit
(DPEngineCoreProc, v1/engine/core.py:2281). Each case puts one such prefill instance in front of a
decode pool far larger than the rate needs: at the performance model's capacity (no headroom) the
simulated p90 TTFT meets the SLO and no queue grows; 40 % above it, it misses (the model neither
overrates nor badly underrates the instance).
"""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.calibration import get_engine_profile, resolve_engine
from layoutopt.perf_model.capacity import instance_capacity
from layoutopt.perf_model.costs import phase_costs
from layoutopt.plan import Explanation, Layout, Plan, Pool, SolverInfo
from layoutopt.simulator.perf_tables import kv_link, kv_tables, plan_pool_specs
from layoutopt.simulator.run import simulate
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

GPU = "H100-SXM"
CHAT = Workload(name="chat", input_tokens={"kind": "lognormal", "mean": 1000, "p90": 2000},
                output_tokens={"kind": "lognormal", "mean": 100, "p90": 200})
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 50}, attainment=0.9)
FP8 = {"weight_precision": "fp8"}
# (model, prefill layout, decode layout, decode instances)
CASES = {
    "qwen3-32b tp1-pp8": ("qwen3-32b", Layout(tp_size=1, pp_size=8, **FP8), Layout(tp_size=1, **FP8), 32),
    "qwen3-30b-a3b tp1-ep4-dp4": ("qwen3-30b-a3b", Layout(tp_size=1, ep_size=4, dp_size=4, **FP8),
                                  Layout(tp_size=1, dp_size=2, **FP8), 8),
}


def _pool(role: str, layout: Layout, instances: int, max_batch: int) -> Pool:
    return Pool(role=role, gpu=GPU, instances=instances, gpus_per_instance=layout.gpus_per_instance,
                tp_size=layout.tp_size, pp_size=layout.pp_size, ep_size=layout.ep_size, dp_size=layout.dp_size,
                dcp_size=1, pcp_size=1, precision=layout.weight_precision, kv_precision=layout.kv_precision,
                max_batch_size=max_batch, capacity_rps=1.0, cost_usd_per_hour=1.0)


def _plan(model: str, prefill: Pool, decode: Pool, engine: str = "vllm") -> Plan:
    return Plan(status="feasible", objective="goodput-per-dollar", mode="disaggregated", model=model, engine=engine,
                workload={"workload": CHAT.model_dump(mode="json"), "slo": SLO_CHAT.model_dump(mode="json")},
                pools=[prefill, decode], totals=None, latency=None,
                solver=SolverInfo(status="feasible", wall_time_s=0.0, objective_value=None, best_bound=None,
                                  gap=None, num_candidates=1),
                explanation=Explanation(binding_constraints=[], notes=[]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulated_prefill_capacity_brackets_the_perf_model(name):
    model, prefill, decode, num_decode = CASES[name]
    gpu = get_gpu(GPU)
    link = kv_link([(gpu, prefill)], gpu, decode)
    perf = instance_capacity(get_model(model), gpu, prefill, "prefill", CHAT, SLO_CHAT, headroom=1.0, kv_link=link)
    assert perf.feasible
    plan = _plan(model, _pool("prefill", prefill, 1, perf.max_batch_size), _pool("decode", decode, num_decode, 512))
    at = simulate(plan, rate_rps=perf.capacity_rps, num_requests=6000, seed=0)
    assert at.ttft_ms.p90 <= 1000 and at.pools[0].queue_growth_per_s < 1.0, (perf.capacity_rps, at.ttft_ms)
    above = simulate(plan, rate_rps=1.4 * perf.capacity_rps, num_requests=6000, seed=0)
    assert above.ttft_ms.p90 > 1000, (perf.capacity_rps, above.ttft_ms)


def test_pp_prefill_batch_limit_holds_every_step_in_flight():
    model = get_model("qwen3-32b")
    one, deep = (instance_capacity(model, get_gpu(GPU), Layout(tp_size=1, pp_size=pp, **FP8), "prefill", CHAT,
                                   SLO_CHAT) for pp in (1, 8))
    assert deep.max_batch_size == 8 * one.max_batch_size


def test_dp_prefill_instance_is_one_server_per_rank():
    model, prefill, decode, num_decode = CASES["qwen3-30b-a3b tp1-ep4-dp4"]
    costs = phase_costs(get_model(model), get_gpu(GPU), prefill, "prefill", CHAT)
    # The perf model: four servers, each with one rank's token budget (vLLM's 8192 per scheduler).
    assert costs.prefill_servers == 4 and costs.server_budget_tokens == costs.chunk_tokens // 4 == 8192
    assert costs.prompts_per_step == 8192 // 1000
    # The simulator: four schedulers per instance, each with one rank's budget, batch limit and KV.
    spec = plan_pool_specs(_plan(model, _pool("prefill", prefill, 2, 36), _pool("decode", decode, num_decode, 512)))[0]
    assert spec.num_instances == 2 and spec.servers_per_instance == 4
    assert spec.max_batched_tokens == 8192 and spec.max_batch_size == 9
    instance_kv_bytes, _ = kv_tables(get_model(model), get_gpu(GPU), prefill, "vllm")
    assert spec.kv_capacity_bytes == pytest.approx(instance_kv_bytes / 4)


def test_sglang_splits_its_chunk_budget_over_the_dp_ranks():
    """SGLang divides --chunked-prefill-size by the attention-DP size (0.5.23
    arg_groups/parallel_hook.py:331); vLLM gives each rank the whole budget."""
    model, prefill, decode, num_decode = CASES["qwen3-30b-a3b tp1-ep4-dp4"]
    vllm, sglang = (phase_costs(get_model(model), get_gpu(GPU), prefill, "prefill", CHAT, engine)
                    for engine in ("vllm", "sglang"))
    budget = resolve_engine("sglang", get_gpu(GPU)).max_num_batched_tokens
    assert sglang.server_budget_tokens == budget // 4 and sglang.chunk_tokens == budget
    assert vllm.server_budget_tokens == resolve_engine("vllm", get_gpu(GPU)).max_num_batched_tokens
    plan = _plan(model, _pool("prefill", prefill, 1, 8), _pool("decode", decode, num_decode, 512), engine="sglang")
    assert plan_pool_specs(plan)[0].max_batched_tokens == get_engine_profile("sglang").max_num_batched_tokens // 4
