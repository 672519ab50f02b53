"""The screens (``enumeration.screened_proposals``: every structural filter and engine rule over
all proposals of a GPU type at once, in worker processes for large spaces) give what one plain
pass over the whole space, proposal by proposal, gives: the same survivors in the same order, and
the same drop counts, examples, budget example and merge order (``_Tally.merge``)."""

from __future__ import annotations

import pytest

from layoutopt.engines import check_layout, engine_ref_of
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer import enumeration, workers as worker_processes
from layoutopt.optimizer.engine_rules import RULE_PREFIX
from layoutopt.optimizer.enumeration import _Screen, _Tally, filter_context, roles_for_mode, screened_proposals
from layoutopt.optimizer.filters import STRUCTURAL_FILTERS
from layoutopt.optimizer.pre_cuts import PreCuts
from layoutopt.optimizer.space import enumerate_proposals, proposal_count
from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

GPUS = ("H100", "B200", "MI300X")
SLO_CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})


def _one_pass(ctx, gpus, roles, engine="vllm", precision="auto", cuts=PreCuts()):
    """The oracle: each proposal through the filters in order, then through ``check_layout``."""
    tally = _Tally()
    proposals = list(enumerate_proposals(ctx.model, gpus, roles, precision))
    structural = []
    for proposal in proposals:
        for name, check in list(STRUCTURAL_FILTERS) + cuts.filters():
            reason = check(ctx, proposal)
            if reason:
                if name == "budget":
                    tally.over_budget(proposal)
                tally.drop(name, f"{proposal.role} on {proposal.gpu.name}: {reason}",
                           proposal.layout.gpus_per_instance if name == "budget" else None)
                break
        else:
            structural.append(proposal)
    ref, kept = engine_ref_of(engine), []
    for proposal in structural:
        broken = check_layout(ref, ctx.model, proposal.gpu, proposal.layout, proposal.role) if ref else []
        if broken:
            tally.drop(RULE_PREFIX + broken[0].rule, f"{proposal.name}: {broken[0]}")
        else:
            kept.append(proposal)
    return kept, tally, len(proposals)


def _assert_same(screened, merged, kept, tally):
    assert [p.name for p in screened] == [p.name for p in kept]
    assert [p.layout for p in screened] == [p.layout for p in kept]
    assert merged.records() == tally.records()
    assert merged.smallest_over_budget == tally.smallest_over_budget
    assert merged._ranks == tally._ranks


@pytest.mark.parametrize("workers", [1, 2])
def test_screen_by_gpu_type_equals_one_pass(monkeypatch, workers):
    model = get_model("qwen3-30b-a3b")
    gpus = [get_gpu(g) for g in GPUS]
    ctx = filter_context(model, preset_workload("chat"), SLO_CHAT, "vllm",
                         gpu_limits={"H100": 64, "B200": 8, "MI300X": 2}, max_usd_per_hour=None)
    ctx = ctx.model_copy(update={"fit_context_tokens": 200_000.0})  # long sequences: some layouts miss memory
    roles = roles_for_mode("auto")
    kept, tally, proposed = _one_pass(ctx, gpus, roles)
    # workers=2 goes through the process pool whatever this machine's CPU count.
    monkeypatch.setattr(enumeration, "MIN_PARALLEL_SCREEN_PROPOSALS", 0 if workers > 1 else 10**9)
    monkeypatch.setattr(worker_processes, "available_workers", lambda: workers)
    merged = _Tally()
    screened, count = screened_proposals(_Screen(ctx, engine_ref_of("vllm"), tuple(roles), "auto", PreCuts()),
                                         gpus, merged)
    assert count == proposed == sum(proposal_count(model, g, roles, "auto") for g in gpus)
    _assert_same(screened, merged, kept, tally)
    assert {r.name for r in tally.records()} >= {"budget", "memory fit"}  # the merge had ranks to compare
    # The first GPU type has no budget drops but rule drops: the merge must still list budget first.
    first = _one_pass(ctx, gpus[:1], roles)[1]
    assert "budget" not in first.counts and any(n.startswith("engine_rule:") for n in first.counts)


# (model, engine, mode, precision, pre-cuts, GPU types, free GPUs per domain, $ cap, long sequences)
CASES = [
    ("deepseek-v3", "vllm", "auto", "auto", PreCuts(), ("H100", "GB200", "MI300X"), None, 300.0, False),
    ("qwen3-32b", "vllm==0.13.0", "disaggregated", "auto", PreCuts(pipeline_needed=True), ("H100", "L4"),
     {"H100-SXM": 4}, None, True),
    ("qwen3.5-35b-a3b", "sglang", "auto", "auto", PreCuts(pcp_long_prompts_only=True), ("B200", "A100-80GB-SXM"),
     None, 150.0, False),
    ("gpt-oss-120b", "sglang==0.5.3", "colocated", "auto", PreCuts(pipeline_needed=True, pcp_long_prompts_only=True),
     ("H200", "MI300X"), None, None, True),
    ("llama-3.1-70b", "trtllm", "auto", "bf16", PreCuts(), ("H100", "L40S"), {"L40S": 2}, 40.0, False),
    ("llama-3.1-8b", "vllm", "auto", "fp4", PreCuts(), ("A100-80GB-SXM", "GB200", "MI300X"), None, None, False),
    ("qwen3-32b", "vllm", "auto", "fp8", PreCuts(), ("A100-80GB-SXM", "H100"), None, None, False),
]


@pytest.mark.parametrize("model_name,engine,mode,precision,cuts,gpu_names,free,cap,long", CASES)
def test_screens_equal_the_per_proposal_filters(model_name, engine, mode, precision, cuts, gpu_names, free, cap,
                                                long):
    gpus = [get_gpu(g) for g in gpu_names]
    ctx = filter_context(get_model(model_name), preset_workload("chat"), SLO_CHAT, engine.split("==")[0],
                         max_stage_gpus=free, gpu_limits={gpus[0].name: 16}, max_usd_per_hour=cap)
    if long:
        ctx = ctx.model_copy(update={"fit_context_tokens": 120_000.0})
    roles = roles_for_mode(mode)
    kept, tally, proposed = _one_pass(ctx, gpus, roles, engine, precision, cuts)
    merged = _Tally()
    screened, count = screened_proposals(_Screen(ctx, engine_ref_of(engine), tuple(roles), precision, cuts),
                                         gpus, merged)
    assert count == proposed
    _assert_same(screened, merged, kept, tally)
    assert len(tally.counts) >= 2 and kept  # the case drops for several reasons and keeps some


def test_survivors_of_a_gpu_type_share_layout_objects():
    """One Layout object per layout of a GPU type, whatever the role (downstream memos look
    arguments up by identity first)."""
    gpu = get_gpu("H100")
    ctx = filter_context(get_model("qwen3-32b"), preset_workload("chat"), SLO_CHAT, "vllm")
    screened, _ = screened_proposals(_Screen(ctx, engine_ref_of("vllm"), tuple(roles_for_mode("auto")), "auto",
                                             PreCuts()), [gpu], _Tally())
    by_layout = {}
    for proposal in screened:
        assert by_layout.setdefault(proposal.layout, proposal.layout) is proposal.layout
    assert len(by_layout) < len(screened)


def test_screens_with_an_unpriced_gpu_and_a_profile_object():
    """A GPU without a price (its budget drops cost $0) and a fitted profile object as the engine
    (its own batch size sizes the activations) screen as the per-proposal filters do."""
    gpus = [get_gpu("H100").model_copy(update={"price": None}), get_gpu("B200")]
    profile = get_engine_profile("vllm").model_copy(update={"name": "vllm~fit", "max_num_batched_tokens": 4096})
    ctx = filter_context(get_model("deepseek-v3"), preset_workload("chat"), SLO_CHAT, profile,
                         gpu_limits={gpus[0].name: 16}, max_usd_per_hour=200.0)
    roles = roles_for_mode("auto")
    kept, tally, _ = _one_pass(ctx, gpus, roles)
    merged = _Tally()
    screened, _ = screened_proposals(_Screen(ctx, engine_ref_of("vllm"), tuple(roles), "auto", PreCuts()), gpus, merged)
    _assert_same(screened, merged, kept, tally)
    assert tally.smallest_over_budget.gpu == gpus[0].name and tally.smallest_over_budget.cost_usd_per_hour == 0.0


@pytest.mark.parametrize("engine", ["vllm", "vllm==0.13.0", "sglang"])
def test_screens_and_the_oracle_agree_on_dp_x_pp_over_domains(engine):
    """MoE attention DP x PP over several HGX domains: vLLM's ``dp_pp_placement`` drops some in
    the screens as in the per-proposal pass, and names the rule in the tally; SGLang keeps them."""
    gpus = [get_gpu("H100")]
    ctx = filter_context(get_model("qwen3-30b-a3b"), preset_workload("chat"), SLO_CHAT, engine.split("==")[0],
                         gpu_limits={"H100-SXM": 32}, max_usd_per_hour=None)
    roles = roles_for_mode("auto")
    kept, tally, proposed = _one_pass(ctx, gpus, roles, engine)
    merged = _Tally()
    screened, count = screened_proposals(_Screen(ctx, engine_ref_of(engine), tuple(roles), "auto", PreCuts()),
                                         gpus, merged)
    assert count == proposed
    _assert_same(screened, merged, kept, tally)
    rule = RULE_PREFIX + "dp_pp_placement"
    spread_pp = [p for p in kept if p.layout.gpus_per_stage > 8 and p.layout.pp_size > 1 and p.layout.dp_size > 1]
    if engine.startswith("vllm"):
        assert tally.counts[rule] > 0 and "parallel_state.py" in tally.examples[rule]
        # What vLLM keeps of DP x PP over domains has TP x PCP of whole domains per DP rank.
        assert all(p.layout.tp_size * p.layout.pcp_size % 8 == 0 for p in spread_pp)
    else:
        assert rule not in tally.counts and spread_pp
