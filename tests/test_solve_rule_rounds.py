"""solve goes back to the candidate table when placement finds no split over nodes the engine's
rule (``uneven_nodes``) accepts for a pool's layout (optimizer/rule_rounds.py).

On 3 + 1 + 2 free H100s, llama-3.1-70b's best SGLang plan has a TP1 x PP4 prefill instance, which
only splits 1 + 1 + 2 (SGLang needs the same GPUs on every node): solve used to answer infeasible;
it now re-solves with that layout capped (at most 1, in parts of >= 2 GPUs per node: 2 + 2 is its
only legal split, which the decode pool's GPUs leave no room for) and returns a TP2 plan that
places, labelled feasible. tests/test_rule_rounds_caps.py checks the caps against brute force.
"""

from __future__ import annotations

import json
import re

import pytest
from test_placement_node_rule import cluster_with_free
from test_report_matrix import check_emitted_files

from layoutopt import api
from layoutopt.engines.plan_rules import plan_rule_violations
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.report.emit import render

RULE_SOURCE = re.compile(r"uneven_nodes: sglang .*engine\.py:\d+")


@pytest.fixture(scope="module")
def replanned(tmp_path_factory):
    cluster = cluster_with_free(tmp_path_factory.mktemp("free"), [3, 1, 2])
    return api.solve("llama-3.1-70b", cluster=cluster, isl=2000, osl=200, engine="sglang")


def test_a_plan_without_the_unsplittable_layout_places_passes_the_rules_and_emits(replanned):
    assert replanned.pools and replanned.placement
    assert all(p.layout.short_name() != "tp1-pp4-fp8" for p in replanned.pools)
    catalog = load_catalog()
    gpus = [catalog.gpu(p.gpu) for p in replanned.pools]
    assert plan_rule_violations("sglang", replanned, get_model("llama-3.1-70b"), gpus) == []
    check_emitted_files(render(replanned, engine="sglang", plots=False), "sglang", "0.5.23")


def test_the_replanned_status_and_notes_say_what_was_proven(replanned):
    assert replanned.status == "feasible" and replanned.solver.status == "feasible"
    # Both KV precisions of the layout (SGLang pairs a prefill only with a decode of its KV dtype, so
    # dominance keeps the two apart)
    assert "layouts placement refused on the node-split rule capped (prefill-H100-SXM-tp1-pp4-fp8 <= 1 in parts " \
           "of >= 2 GPUs, prefill-H100-SXM-tp1-pp4-fp8-kvbf16 <= 1 in parts of >= 2 GPUs)" in replanned.solver.proof
    note = next(n for n in replanned.explanation.notes if n.startswith("status ") and "node-split rule" in n)
    assert note.startswith("status feasible: the plan is optimal over the candidate table with 2 layouts capped after "
                           "placement found no split the engine's node-split rule accepts")
    assert "prefill-H100-SXM-tp1-pp4-fp8" in note and RULE_SOURCE.search(note), note
    # the first plan's objective and its proven bound over the full table, which the replanned plan stays under
    bound = float(re.search(r"no plan of the full candidate table reaches more than ([\d.]+) requests/\$", note)[1])
    first = float(re.search(r"could not be placed, had objective ([\d.]+) requests/\$", note)[1])
    assert replanned.totals.requests_per_usd <= bound * (1 + 1e-3) and first <= bound * (1 + 1e-3)
    # solver.best_bound and gap are the full table's: the re-solve's own bound covers only the layouts left
    solver = replanned.solver
    assert solver.best_bound == pytest.approx(bound, rel=1e-3) and solver.best_bound > solver.objective_value
    assert solver.gap == pytest.approx((solver.best_bound - solver.objective_value) / solver.best_bound)
    assert f"gap to that bound is {solver.gap:.2%}" in note


def test_nothing_placeable_stays_infeasible_naming_the_rule(tmp_path):
    """3 + 1 free GPUs: qwen3-235b-a22b needs all four, and SGLang cannot split an instance 3 + 1."""
    planned = api.solve("qwen3-235b-a22b", cluster=cluster_with_free(tmp_path, [3, 1]), isl=2000, osl=200,
                        engine="sglang")
    assert planned.status == "infeasible" and not planned.pools and not planned.placement
    reasons = planned.explanation.reasons
    assert reasons[0].startswith("the best plan found (1 x colocated H100-SXM tp1-pp4-fp8) cannot be placed")
    assert any(RULE_SOURCE.search(r) for r in reasons), reasons
    assert reasons[-1].startswith("re-solved with colocated-H100-SXM-tp1-pp4-fp8 excluded"), reasons
    assert reasons[-1].endswith("the free GPUs hold 0 in splits the rule accepts): no plan (infeasible)"), reasons


def test_without_rounds_the_answer_is_todays_infeasible_one(tmp_path, monkeypatch):
    """The rounds are what makes the plan: with none allowed, solve answers as before (the rule named)."""
    from layoutopt.optimizer import rule_rounds
    monkeypatch.setattr(rule_rounds, "MAX_RULE_ROUNDS", 0)
    planned = api.solve("llama-3.1-70b", cluster=cluster_with_free(tmp_path, [3, 1, 2]), isl=2000, osl=200,
                        engine="sglang")
    assert planned.status == "infeasible" and any(RULE_SOURCE.search(r) for r in planned.explanation.reasons)


def test_the_replanned_plan_is_deterministic(tmp_path):
    """Two solves of the same input through the rule rounds give the same plan JSON (wall times aside)."""
    from test_optimizer_status import _without_wall_times
    cluster = cluster_with_free(tmp_path, [3, 1, 2])
    runs = [json.dumps(_without_wall_times(api.solve("llama-3.1-70b", cluster=cluster, isl=2000, osl=200,
                                                     engine="sglang").model_dump(mode="json")), sort_keys=True)
            for _ in range(2)]
    assert runs[0] == runs[1] and '"status": "feasible"' in runs[0]


def test_capping_beats_dropping_on_the_scattered_example(monkeypatch):
    """examples/clusters/scattered-h100.yaml (free 3 + 3 + 3 + 1 + 1 + 1), max-goodput: the first plan's
    two prefill TP1 x PP4 instances do not both split legally beside the rest; capped at one, the plan
    keeps it (the README's figures: 17.9 req/s at $39.90/h); dropping the layout gave 9.6 req/s."""
    import functools
    from pathlib import Path

    from layoutopt.optimizer import rule_rounds, solve as solve_module
    cluster = Path(__file__).resolve().parents[1] / "examples" / "clusters" / "scattered-h100.yaml"
    args = dict(cluster=cluster, isl=2000, osl=200, engine="sglang", objective="max-goodput")
    capped = api.solve("llama-3.1-70b", **args)
    monkeypatch.setattr(solve_module, "replan_around_rule",
                        functools.partial(rule_rounds.replan_around_rule, keep_legal_instances=False))
    dropped = api.solve("llama-3.1-70b", **args)
    assert capped.status == dropped.status == "feasible"
    assert ("prefill", "tp1-pp4-fp8", 1) in [(p.role, p.layout.short_name(), p.instances) for p in capped.pools]
    assert all((p.role, p.layout.short_name()) != ("prefill", "tp1-pp4-fp8") for p in dropped.pools)
    assert capped.totals.goodput_rps > 1.5 * dropped.totals.goodput_rps
    assert capped.totals.cost_usd_per_hour <= dropped.totals.cost_usd_per_hour * (1 + 1e-9)
    note = next(n for n in capped.explanation.notes if n.startswith("status ") and "node-split rule" in n)
    assert "prefill-H100-SXM-tp1-pp4-fp8 at most 1 (prefill H100-SXM tp1-pp4-fp8 x 2 refused" in note
    assert "prefill-H100-SXM-tp1-pp4-fp8 <= 1" in capped.solver.proof
    # The re-solve proved its plan optimal over the capped table only: no note may say it is optimal,
    # and the note stating the proof names that scope first.
    stated = [n for n in capped.explanation.notes if n.startswith("solver (")]
    assert len(stated) == 1 and stated[0].startswith("solver (feasible): over the candidate table with the layouts")
    assert capped.solver.proof.startswith("over the candidate table with the layouts")
    assert "not over the full table: " in capped.solver.proof


def _two_racks(folder, free_per_rack: list[int], oversubscription: float):
    """Two racks of HGX H100 servers with ``free_per_rack[i]`` free GPUs on server i of each."""
    racks, in_use = "", ""
    for rack in ("a", "b"):
        names = [f"{rack}{i}" for i in range(len(free_per_rack))]
        racks += (f"  - name: {rack}\n    nodes:\n"
                  f"      - {{type: hgx-h100-8, count: {len(names)}, names: [{', '.join(names)}]}}\n")
        in_use += "".join(f"    {n}: [{', '.join(str(g) for g in range(8 - f))}]\n"
                          for n, f in zip(names, free_per_rack) if f < 8)
    path = folder / "two-racks.yaml"
    path.write_text(f"name: two-racks\nnetwork:\n  oversubscription: {oversubscription}\nracks:\n{racks}"
                    f"unavailable:\n  gpus_in_use:\n{in_use}")
    return path


def test_the_kv_second_stage_keeps_the_rule_caps(tmp_path):
    """3 + 1 + 1 free H100s in each of two 8:1-oversubscribed racks: the first plan's two TP1 x PP4
    prefill instances do not split legally (capped at one), and the capped plan's KV path crosses
    racks, so solve re-solves once more with the cross-rack link (the second stage). That re-solve
    must keep the caps: without them it picks the refused layout again and the answer is
    infeasible."""
    cluster = _two_racks(tmp_path, [3, 1, 1], 8.0)
    plan = api.solve("llama-3.1-70b", cluster=cluster, isl=2000, osl=200, engine="sglang", objective="max-goodput")
    notes = plan.explanation.notes
    assert any(n.startswith("second stage: ") for n in notes)
    assert plan.status == plan.solver.status == "feasible" and plan.placement
    assert "prefill-H100-SXM-tp1-pp4-fp8 <= 1" in plan.solver.proof
    assert sum(p.instances for p in plan.pools if p.layout.short_name() == "tp1-pp4-fp8") <= 1
    gpus = [load_catalog().gpu(p.gpu) for p in plan.pools]
    assert plan_rule_violations("sglang", plan, get_model("llama-3.1-70b"), gpus) == []
    assert [n for n in notes if n.startswith("solver (")] == [f"solver (feasible): {plan.solver.proof}"]
