"""The search and emit agree on the smallest KV cache a pool may have
(``memory.MIN_KV_SEQUENCES_PER_RANK`` sequences of the long requests per scheduler): a solved plan
always emits. Before, the search kept layouts that fit one sequence, and emit refused the plan
llama-3.1-70b on fragmented-h100 gets with vLLM (7 x TP1 FP8 prefill, 2 sequences per GPU)."""

from __future__ import annotations

from pathlib import Path

from layoutopt.engines.plan_rules import plan_rule_violations
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog import get_model
from layoutopt.optimizer.filters import FilterContext, memory_fit
from layoutopt.optimizer.solve import solve
from layoutopt.optimizer.space import Proposal
from layoutopt.perf_model import memory
from layoutopt.plan import Layout
from layoutopt.report.emit import render
from layoutopt.workloads.slo import SLO

from test_report_matrix import check_emitted_files

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_a_solved_cluster_plan_emits_for_vllm():
    slo = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
    plan = solve("llama-3.1-70b", None, slo, engine="vllm==0.33.0", time_limit_s=5,
                 cluster=str(EXAMPLES / "clusters" / "fragmented-h100.yaml"))
    assert plan.pools
    model = get_model("llama-3.1-70b")
    gpus = [get_gpu(p.gpu) for p in plan.pools]
    assert not plan_rule_violations("vllm==0.33.0", plan, model, gpus)
    files = render(plan, engine="vllm==0.33.0", plots=False)
    assert check_emitted_files(files, "vllm", "0.33.0") >= len(plan.pools)


def test_memory_fit_keeps_only_layouts_with_the_sequence_floor():
    model, gpu = get_model("llama-3.1-70b"), get_gpu("H100")
    ctx = FilterContext(model=model, slo=SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}), prefill_fit_context_tokens=7051.0)
    one_gpu = Proposal(role="prefill", gpu=gpu, layout=Layout(tp_size=1, weight_precision="fp8"))
    # One FP8 H100 holds the weights and a few 7,051-token sequences, fewer than the floor.
    assert 1 <= ctx.max_batch(one_gpu) < memory.MIN_KV_SEQUENCES_PER_RANK
    reason = memory_fit(ctx, one_gpu)
    assert reason is not None and f"fewer than the {memory.MIN_KV_SEQUENCES_PER_RANK}" in reason
    two_gpus = Proposal(role="prefill", gpu=gpu, layout=Layout(tp_size=2, weight_precision="fp8"))
    assert memory_fit(ctx, two_gpus) is None
