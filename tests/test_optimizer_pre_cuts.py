"""Every allowed layout is a candidate: switching a former heuristic pre-cut back on never helps.

Each case solves one problem on the full candidate table and on the table with one former
heuristic (``pre_cuts``) switched on. A cut table is a subset of the full one, so its optimum can
never be better; the cases the issue measured show the full table strictly better where the
engine allows the layouts the cut drops (PP: 8-9 % more requests/$ on qwen3-32b; llama-3.1-70b's optimum
on the 2026-12-01 grouped-GEMM refit uses no PP pool, so there the cut only must not help).
vLLM 0.33 runs PCP only with MLA attention, so for these GQA models the PCP cut changes nothing;
its effect on an MLA model (DeepSeek-V3) is too slow a solve for the suite.
"""

from __future__ import annotations

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.pre_cuts import PreCuts
from layoutopt.optimizer.scaling import to_integer_table
from layoutopt.optimizer.solver import LayoutSolver
from layoutopt.workloads.presets import default_workload, workload_from_lengths
from layoutopt.workloads.slo import SLO

H100 = get_gpu("H100")
CHAT = SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30})
TIGHT_TTFT = SLO(ttft_ms={"p90": 300}, tpot_ms={"p90": 30})
CUTS = [PreCuts(pipeline_needed=True), PreCuts(pcp_long_prompts_only=True),
        PreCuts(pipeline_needed=True, pcp_long_prompts_only=True)]
# (model, H100s, workload, SLO, objective, target rate, a cut the default beats strictly)
CASES = {
    "qwen3-32b chat 8xH100": ("qwen3-32b", 8, default_workload(), CHAT, "goodput-per-dollar", None,
                              ("pipeline_needed",)),
    "llama-3.1-70b chat 8xH100": ("llama-3.1-70b", 8, default_workload(), CHAT, "goodput-per-dollar", None, ()),
    "qwen3-32b 10k prompts, TTFT 300 ms": ("qwen3-32b", 16, workload_from_lengths(10_000, 200), TIGHT_TTFT,
                                           "min-cost", 2.0, ()),
}


def _best(case, pre_cuts: PreCuts) -> float:
    """The proven optimum: best requests/$ of the ratio phase, or the least $/h serving the rate."""
    model, gpus, workload, slo, objective, rate, _ = case
    table = build_candidate_table(get_model(model), [H100], workload, slo, gpu_limits={H100.name: gpus},
                                  max_usd_per_hour=None, min_rate_rps=rate, pre_cuts=pre_cuts)
    outcome = LayoutSolver(to_integer_table(table), objective, time_limit_s=20).solve()
    assert outcome.status == "optimal"
    return outcome.best_bound if objective == "goodput-per-dollar" else -outcome.objective_value


@pytest.mark.parametrize("name", sorted(CASES))
def test_former_pre_cuts_never_improve_a_plan(name):
    case = CASES[name]
    full = _best(case, PreCuts())
    for cuts in CUTS:
        cut = _best(case, cuts)
        assert cut <= full * (1 + 1e-9) if full > 0 else cut <= full
        switched = {field for field, on in cuts.model_dump().items() if on}
        if switched & set(case[-1]):
            # The cut drops the layouts the optimum uses (PP prefill pools).
            assert cut < full - abs(full) * 0.03
