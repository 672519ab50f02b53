"""Screening proposals GPU type by GPU type (in worker processes for large spaces) gives what one
pass over the whole space gives: the same survivors in the same order, and the same drop counts,
examples and budget example (``enumeration.screened_proposals``, ``_Tally.merge``)."""

from __future__ import annotations

import pytest

from layoutopt.engines import engine_ref_of
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer import enumeration, evaluation
from layoutopt.optimizer.engine_rules import drop_rule_breakers
from layoutopt.optimizer.enumeration import (
    _Screen, _Tally, filter_context, roles_for_mode, screened_proposals, structural_survivors,
)
from layoutopt.optimizer.pre_cuts import PreCuts
from layoutopt.optimizer.space import enumerate_proposals, proposal_count
from layoutopt.workloads.presets import preset_workload
from layoutopt.workloads.slo import SLO

GPUS = ("H100", "B200", "MI300X")


def _one_pass(ctx, gpus, roles):
    tally = _Tally()
    proposals = list(enumerate_proposals(ctx.model, gpus, roles, "auto"))
    kept = drop_rule_breakers(engine_ref_of("vllm"), ctx.model,
                              structural_survivors(ctx, proposals, tally, PreCuts()), tally.drop)
    return kept, tally, len(proposals)


@pytest.mark.parametrize("workers", [1, 2])
def test_screen_by_gpu_type_equals_one_pass(monkeypatch, workers):
    model = get_model("qwen3-30b-a3b")
    gpus = [get_gpu(g) for g in GPUS]
    ctx = filter_context(model, preset_workload("chat"), SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}), "vllm",
                         gpu_limits={"H100": 64, "B200": 8, "MI300X": 2}, max_usd_per_hour=None)
    ctx = ctx.model_copy(update={"fit_context_tokens": 200_000.0})  # long sequences: some layouts miss memory
    roles = roles_for_mode("auto")
    kept, tally, proposed = _one_pass(ctx, gpus, roles)
    # workers=2 goes through the process pool whatever this machine's CPU count.
    monkeypatch.setattr(enumeration, "MIN_PARALLEL_SCREEN_PROPOSALS", 0 if workers > 1 else 10**9)
    monkeypatch.setattr(evaluation, "available_workers", lambda: workers)
    merged = _Tally()
    screened, count = screened_proposals(_Screen(ctx, engine_ref_of("vllm"), tuple(roles), "auto", PreCuts()),
                                         gpus, merged)
    assert count == proposed == sum(proposal_count(model, g, roles, "auto") for g in gpus)
    assert [p.name for p in screened] == [p.name for p in kept]
    assert merged.records() == tally.records()
    assert merged.smallest_over_budget == tally.smallest_over_budget
    assert {r.name for r in tally.records()} >= {"budget", "memory fit"}  # the merge had ranks to compare
    # The first GPU type has no budget drops but rule drops: the merge must still list budget first.
    first = _one_pass(ctx, gpus[:1], roles)[1]
    assert "budget" not in first.counts and any(n.startswith("engine_rule:") for n in first.counts)
