"""Plots exist, are non-empty, reproducible, and carry axis labels with units."""

from __future__ import annotations

import re

import pytest

from layoutopt.report.emit import emit
from layoutopt.report.markdown import base_rate_rps
from layoutopt.report.plots import (
    FrontierPoint, candidate_points, cost_at_rate_usd_per_hour, figure_bytes, frontier_figure, frontier_points,
    pareto_front, plan_figures, pool_instances_at_rate, split_figure,
)
from test_report_helpers import MODEL_IDS, fixture_plan

UNIT = re.compile(r"\[[^\]]+\]")


def _axes_labels(fig):
    """(x label, y label) of each plot; a colour bar has one label, which must carry its unit."""
    labels = []
    for ax in fig.axes:
        if hasattr(ax, "_colorbar"):
            assert UNIT.search(ax.get_ylabel() or ax.get_xlabel()), "colour bar without a unit"
            continue
        labels.append((ax.get_xlabel(), ax.get_ylabel()))
    return labels


@pytest.mark.parametrize("name", ["colocated", "moe_ep_dp"])
def test_every_axis_has_a_label_with_units(name):
    plan = fixture_plan(name)
    figures = plan_figures(plan, None, base_rate_rps(plan))
    assert {"frontier", "cost_vs_rate", "gpu_types"} <= set(figures)
    for fig in figures.values():
        for xlabel, ylabel in _axes_labels(fig):
            assert UNIT.search(ylabel), ylabel
            assert UNIT.search(xlabel) or xlabel == "GPU type", xlabel


def test_single_type_plan_has_no_gpu_type_plot():
    plan = fixture_plan("disaggregated")
    assert "gpu_types" not in plan_figures(plan, None, base_rate_rps(plan))


def test_plot_files_exist_and_are_non_empty(tmp_path):
    plan = fixture_plan("colocated")
    written = emit(plan, tmp_path / "out", model_id=MODEL_IDS[plan.model])
    plots = [p for p in written if p.parent.name == "plots"]
    assert sorted(p.name for p in plots) == sorted(f"{n}.{f}" for n in ("cost_vs_rate", "frontier", "gpu_types")
                                                   for f in ("png", "svg"))
    for path in plots:
        data = path.read_bytes()
        assert len(data) > 1000
        assert data.startswith(b"\x89PNG") if path.suffix == ".png" else b"<svg" in data[:2000]
    frontier_svg = (tmp_path / "out" / "plots" / "frontier.svg").read_text()
    assert "tok/s/GPU" in frontier_svg and "tok/s/user" in frontier_svg


def test_svg_bytes_are_reproducible():
    plan = fixture_plan("colocated")
    first = plan_figures(plan, None, base_rate_rps(plan))["cost_vs_rate"]
    second = plan_figures(plan, None, base_rate_rps(plan))["cost_vs_rate"]
    assert figure_bytes(first, "svg") == figure_bytes(second, "svg")


def test_points_from_plan_and_alternatives():
    points = frontier_points(fixture_plan("colocated"))
    assert [p.label for p in points] == ["chosen", "alt 2", "alt 3"]
    chosen = points[0]
    assert chosen.chosen and chosen.tok_per_s_per_user == pytest.approx(1000 / 22)
    assert chosen.requests_per_usd == pytest.approx(7.2 * 3600 / 15.0)
    assert [p.gpu_type for p in points] == ["H100-SXM", "H100-SXM", "H200-SXM"]


def test_pareto_front_drops_dominated_points():
    def point(label, gpu, user):
        return FrontierPoint(label=label, gpu_type="H100-SXM", tok_per_s_per_gpu=gpu, tok_per_s_per_user=user,
                             cost_usd_per_hour=1.0, goodput_rps=1.0)

    points = [point("a", 100, 50), point("b", 80, 40), point("c", 60, 70), point("d", 120, None)]
    assert [p.label for p in pareto_front(points)] == ["a", "c"]


def test_supplied_frontier_points_replace_derived_ones():
    plan = fixture_plan("disaggregated")
    supplied = [FrontierPoint(label=f"p{i}", gpu_type=gpu, tok_per_s_per_gpu=100.0 * i, tok_per_s_per_user=90.0 - 10 * i,
                              cost_usd_per_hour=10.0 * i, goodput_rps=float(i))
                for i, gpu in enumerate(["H100-SXM", "B200", "H100-SXM"], start=1)]
    figures = plan_figures(plan, supplied, base_rate_rps(plan))
    assert "gpu_types" in figures
    (ax,) = figures["frontier"].axes
    # the three frontier points, and the staircase carried to the left and bottom edges of the axes
    assert len(ax.lines) == 1 and len(ax.lines[0].get_xdata()) == 3 + 2


def test_scaling_keeps_each_pools_share_of_its_role():
    # disaggregated fixture: prefill 2 x 4.0 req/s, decode 1 x 8.5 req/s; at 9.6 req/s prefill needs
    # ceil(9.6 / 4.0) = 3 instances and decode ceil(9.6 / 8.5) = 2.
    pools = fixture_plan("disaggregated").pools
    assert pool_instances_at_rate(pools, 9.6) == [3, 2]
    per_instance = [p.cost_usd_per_hour / p.instances for p in pools]
    assert cost_at_rate_usd_per_hour(pools, 9.6) == pytest.approx(3 * per_instance[0] + 2 * per_instance[1])
    assert pool_instances_at_rate(pools, 8.0) == [2, 1]


def _candidate(name, role, gpus, capacity_rps, tpot_p50_ms, cost):
    from layoutopt.optimizer.candidates import Candidate
    from layoutopt.plan import Layout, Percentiles

    tpot = None if role == "prefill" else Percentiles(p50=tpot_p50_ms, p90=tpot_p50_ms, p99=tpot_p50_ms)
    return Candidate(name=name, role=role, gpu="H100-SXM", layout=Layout(tp_size=gpus), cost_usd_per_hour=cost,
                     capacity_rps=capacity_rps, max_batch_size=8, tpot_ms=tpot)


def test_candidate_points_are_per_layout_with_cost_per_token():
    from layoutopt.optimizer.candidates import CandidateTable

    table = CandidateTable(candidates=(
        _candidate("c1", "colocated", 1, 2.0, 25.0, 4.0), _candidate("p2", "prefill", 2, 8.0, 0.0, 8.0),
        _candidate("d1", "decode", 1, 4.0, 20.0, 4.0)), gpu_limits={"H100-SXM": 8}, mean_output_tokens=250.0)
    colocated, pair = candidate_points(table)
    # colocated: 2 req/s x 250 tokens on 1 GPU; 1000 / 25 ms
    assert (colocated.tok_per_s_per_gpu, colocated.tok_per_s_per_user) == (500.0, 40.0)
    assert colocated.usd_per_million_output_tokens == pytest.approx(4.0 / (500 * 3600) * 1e6)
    # P/D pair per req/s: 2/8 + 1/4 = 0.5 GPUs, 8/8 + 4/4 = 2 USD/h -> 500 tok/s/GPU, 50 tok/s/user
    assert (pair.tok_per_s_per_gpu, pair.tok_per_s_per_user) == (500.0, 50.0)
    assert pair.requests_per_usd == pytest.approx(3600 / 2.0) and not pair.whole_plan
    fig = frontier_figure(candidate_points(table))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["layouts evaluated",
                                                                           "Pareto frontier (1 layout)"]
    for xlabel, ylabel in _axes_labels(fig):
        assert UNIT.search(xlabel) and UNIT.search(ylabel)


def test_frontier_of_near_identical_plans_is_not_a_hairline_span():
    near = [FrontierPoint(label=f"alt {i}", gpu_type="H100-SXM", tok_per_s_per_gpu=1000.0 + i,
                          tok_per_s_per_user=50.0 + 0.01 * i, cost_usd_per_hour=10.0, goodput_rps=5.0) for i in range(3)]
    ax = frontier_figure(near).axes[0]
    low, high = ax.get_xlim()
    assert (high - low) / ((high + low) / 2) > 0.149  # 15 % of the values wide, not 0.15 %


def test_prefill_decode_split_against_the_formula():
    plan = fixture_plan("disaggregated")  # 8 prefill + 8 decode GPUs; formula 0.92
    fig = split_figure(plan)
    (ax,) = fig.axes
    assert UNIT.search(ax.get_xlabel()) and UNIT.search(ax.get_ylabel())
    widths = [patch.get_width() for patch in ax.patches]
    assert widths[:2] == [8, 8] and widths[2] == pytest.approx(16 * 0.92 / 1.92)
    assert "prefill_decode_split" in plan_figures(plan, None, base_rate_rps(plan))
    assert split_figure(fixture_plan("colocated")) is None
