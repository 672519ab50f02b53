"""The layout space, each named filter, dominance, and the enumeration record."""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import build_candidate_table, filter_context
from layoutopt.optimizer.filters import (
    budget_holds_one, context_parallel_role, divisibility, drop_dominated, latency_floor, memory_fit,
    precision_support, scaleup_domain,
)
from layoutopt.optimizer.pre_cuts import FORMER_PCP_MIN_PROMPT_TOKENS, pcp_long_prompts_only, pipeline_needed
from layoutopt.optimizer.space import Proposal, degree_combinations, precision_pairs
from synthetic_candidates import make_candidate
from layoutopt.plan import Layout
from layoutopt.workloads.presets import default_workload, workload_from_lengths
from layoutopt.workloads.slo import SLO

SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
H100, A100 = get_gpu("H100"), get_gpu("A100")
DENSE, MOE, BIG = get_model("qwen3-32b"), get_model("qwen3.5-35b-a3b"), get_model("qwen3.5-397b-a17b")


def ctx(model=DENSE, workload=None):
    return filter_context(model, workload or default_workload(), SLO_CHAT, "vllm")


def proposal(role="colocated", gpu=H100, **degrees) -> Proposal:
    return Proposal(role=role, gpu=gpu, layout=Layout(**degrees))


def test_space_rules():
    dense = list(degree_combinations(DENSE, H100, "colocated"))
    assert all(d["dp_size"] == 1 and d["ep_size"] == 1 for d in dense)  # DP/EP only for MoE
    assert {d["pcp_size"] for d in dense} == {1, 2, 4}  # PCP on prefilling roles, whatever the prompt
    assert {d["pp_size"] for d in dense} == {1, 2, 4, 8}  # every depth
    # Powers of two within the 8-GPU domain, and TP16 over two whole domains, PP after it too (the
    # engines place each stage on its own nodes without DP: engines.rules ``dp_pp_placement``).
    assert {d["tp_size"] for d in dense} == {1, 2, 4, 8, 16}
    assert {d["pp_size"] for d in dense if d["tp_size"] * d["pcp_size"] > 8} == {1, 2, 4, 8}
    assert {d["tp_size"] * d["pcp_size"] for d in dense} == {1, 2, 4, 8, 16, 32} - {32}
    moe = list(degree_combinations(MOE, H100, "decode"))
    assert all(d["ep_size"] in (1, d["tp_size"] * d["dp_size"]) for d in moe)
    # Beyond one domain only attention DP x EP over whole domains (each DP rank's TP inside one),
    # up to 128 GPUs, at every PP depth (vLLM's rule ``dp_pp_placement`` screens the ones it mis-maps).
    inside = [d for d in moe if d["tp_size"] * d["dp_size"] <= 8]
    spread = [d for d in moe if d["tp_size"] * d["dp_size"] > 8]
    assert {d["tp_size"] * d["dp_size"] for d in spread} == {16, 32, 64, 128}
    assert all(d["tp_size"] <= 8 and d["ep_size"] == d["tp_size"] * d["dp_size"] for d in spread)
    assert {d["pp_size"] for d in spread} == {1, 2, 4, 8}
    assert {d["pp_size"] for d in inside} == {1, 2, 4, 8}
    moe = inside
    assert all(d["pcp_size"] == 1 for d in moe)  # decode never gets PCP
    # DCP only while tp > KV heads (2 for Qwen3.5), up to tp / KV heads.
    assert {(d["tp_size"], d["dcp_size"]) for d in moe if d["dcp_size"] > 1} == {(4, 2), (8, 2), (8, 4)}
    # PCIe cards: stages inside one PCIe server (8 GPUs, links.local_domain), and TP16 over two.
    assert {d["tp_size"] for d in degree_combinations(DENSE, get_gpu("L40S"), "colocated")} == {1, 2, 4, 8, 16}
    long_prefill = list(degree_combinations(DENSE, H100, "prefill"))
    assert {d["pcp_size"] for d in long_prefill} == {1, 2, 4}
    assert all(d["dcp_size"] == 1 for d in long_prefill)


def test_precision_pairs():
    assert precision_pairs(H100, "auto") == [("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "bf16"), ("fp8", "fp8")]
    assert precision_pairs(A100, "auto") == [("bf16", "bf16")]
    assert precision_pairs(A100, "fp8") == [("fp8", "bf16")]  # proposed so the filter can say why


@pytest.mark.parametrize("check, keep, drop", [
    # FP8 and FP4 weights serve weight-only on Ampere and Hopper (dequantized into BF16 GEMMs);
    # this catalog has no weight-only kernels for AMD, whose MI300X has no FP4 tensor cores.
    (precision_support, proposal(gpu=A100, weight_precision="fp8"), proposal(gpu=get_gpu("MI300X"),
                                                                          weight_precision="fp4")),
    (precision_support, proposal(weight_precision="fp4"), proposal(gpu=get_gpu("MI300X"), weight_precision="int4")),
    # A dense stage spreads over at most two whole domains (space.stage_span_problem), PP or not.
    (scaleup_domain, proposal(tp_size=8, pcp_size=2), proposal(tp_size=8, pcp_size=4)),
    (scaleup_domain, proposal(tp_size=16, pp_size=2), proposal(tp_size=32)),
    (divisibility, proposal(tp_size=16), proposal(tp_size=128)),  # 64 attention heads: tp 128 does not divide them
    (memory_fit, proposal(tp_size=1, weight_precision="fp8"),
     proposal(tp_size=1, weight_precision="bf16", gpu=get_gpu("L4"))),
])
def test_structural_filter_keeps_and_drops(check, keep, drop):
    assert check(ctx(), keep) is None
    assert isinstance(check(ctx(), drop), str) and check(ctx(), drop)


def test_former_pre_cuts_still_cut_what_they_did():
    deep = proposal("colocated", tp_size=8, pp_size=2, weight_precision="bf16")
    # 397B in BF16 (~740 GiB) needs two 8-GPU H100 stages.
    assert pipeline_needed(ctx(BIG), deep) is None
    assert "already fits" in pipeline_needed(ctx(), proposal(tp_size=2, pp_size=2, weight_precision="fp8"))
    long_ctx = ctx(workload=workload_from_lengths(FORMER_PCP_MIN_PROMPT_TOKENS * 2, 100))
    assert pcp_long_prompts_only(long_ctx, proposal("prefill", tp_size=4, pcp_size=2)) is None
    assert pcp_long_prompts_only(ctx(), proposal("prefill", tp_size=4, pcp_size=2))


def test_context_parallel_filter_is_by_role_only():
    assert context_parallel_role(ctx(), proposal("prefill", tp_size=4, pcp_size=2)) is None  # short prompts too
    assert "DCP" in context_parallel_role(ctx(), proposal("prefill", tp_size=8, dcp_size=2))
    assert "PCP" in context_parallel_role(ctx(), proposal("decode", tp_size=4, pcp_size=2))


def test_budget_filter_is_exact():
    limited = ctx().model_copy(update={"gpu_limits": {"H100-SXM": 4}})
    assert budget_holds_one(limited, proposal(tp_size=4)) is None
    assert "budget has 4" in budget_holds_one(limited, proposal(tp_size=4, pp_size=2))
    capped = ctx().model_copy(update={"max_usd_per_hour": 10.0})  # H100 at $3.99/GPU-hour
    assert budget_holds_one(capped, proposal(tp_size=2)) is None
    assert "cap" in budget_holds_one(capped, proposal(tp_size=4))


def test_latency_floor():
    c = ctx()
    assert latency_floor(c, "prefill", 900.0, None) is None
    assert "TTFT" in latency_floor(c, "prefill", 1200.0, None)
    assert latency_floor(c, "decode", 5000.0, 20.0) is None  # decode instances do not own TTFT
    assert "TPOT" in latency_floor(c, "colocated", 100.0, 31.0)


def test_dominated_candidates_are_dropped():
    small = make_candidate("colocated", tp_size=1, capacity_rps=1.0)
    big_worse = make_candidate("colocated", tp_size=2, capacity_rps=1.9)  # 2 x small serve 2.0
    big_better = make_candidate("colocated", tp_size=4, capacity_rps=4.5)  # superlinear: kept
    other_role = make_candidate("decode", tp_size=2, capacity_rps=0.5)
    kept, dropped = drop_dominated([big_worse, small, big_better, other_role])
    assert [c.name for c in kept] == [small.name, big_better.name, other_role.name]
    assert [c.name for c, _ in dropped] == [big_worse.name]


def test_enumeration_records_drops_and_builds_candidates():
    table = build_candidate_table(DENSE, [H100], default_workload(), SLO_CHAT, gpu_limits={"H100-SXM": 8},
                                  max_usd_per_hour=None, min_rate_rps=None)
    assert table.num_considered > len(table.candidates) > 0
    assert table.dropped_by("budget") > 0  # 16- to 64-GPU instances on an 8-GPU budget
    kept_plus_dropped = len(table.candidates) + sum(f.num_dropped for f in table.filters)
    assert kept_plus_dropped == table.num_considered
    for c in table.candidates:
        assert c.capacity_rps > 0 and c.cost_usd_per_hour == pytest.approx(3.99 * c.gpus_per_instance)
        assert (c.kv_bytes_per_request > 0) == (c.role == "prefill")
    assert table.fastest_ttft is not None and table.fastest_tpot is not None
