"""Plots exist, are non-empty, reproducible, and carry axis labels with units."""

from __future__ import annotations

import re

import pytest

from layoutopt.report.emit import emit
from layoutopt.report.markdown import base_rate_rps
from layoutopt.report.plots import (
    FrontierPoint, cost_at_rate_usd_per_hour, figure_bytes, frontier_points, pareto_front, plan_figures,
    pool_instances_at_rate,
)
from test_report_helpers import MODEL_IDS, fixture_plan

UNIT = re.compile(r"\[[^\]]+\]")


def _axes_labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]


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
    assert len(ax.lines) == 1 and len(ax.lines[0].get_xdata()) == 3


def test_scaling_keeps_each_pools_share_of_its_role():
    # disaggregated fixture: prefill 2 x 4.0 req/s, decode 1 x 8.5 req/s; at 9.6 req/s prefill needs
    # ceil(9.6 / 4.0) = 3 instances and decode ceil(9.6 / 8.5) = 2.
    pools = fixture_plan("disaggregated").pools
    assert pool_instances_at_rate(pools, 9.6) == [3, 2]
    per_instance = [p.cost_usd_per_hour / p.instances for p in pools]
    assert cost_at_rate_usd_per_hour(pools, 9.6) == pytest.approx(3 * per_instance[0] + 2 * per_instance[1])
    assert pool_instances_at_rate(pools, 8.0) == [2, 1]
