"""Procurement summary: cheapest fleets, requests per dollar, crossovers, plots; hand-built rows."""

from __future__ import annotations

import json

import pytest

from layoutopt.sweep.results import CellResult
from layoutopt.sweep.summary import render_markdown, summarize, write_summary


def _row(index: int, budget: str, rate: float | None, cost: float | None, goodput: float | None = None,
         objective: str = "min-cost", status: str = "optimal") -> CellResult:
    goodput = rate if goodput is None else goodput
    plan = {} if cost is None else {"cost_usd_per_hour": cost, "goodput_rps": goodput, "gpus": int(cost),
                                    "requests_per_usd": goodput * 3600 / cost, "layout": f"pools on {budget}"}
    return CellResult(cell_id=f"c{index}", cell_index=index, model="m", budget=budget, workload="chat", slo="slo",
                      objective=objective, rate_rps=rate, status=status if cost is not None else "infeasible",
                      **plan)


# A100 is cheaper at low rates (cost 2 vs 4), H100 at high rates (10 vs 16): H100 becomes the
# cheapest between 4 and 8 req/s. Requests per dollar at rate r are r * 3600 / cost.
ROWS = [
    _row(0, "A100", 1.0, 2.0), _row(1, "A100", 4.0, 6.0), _row(2, "A100", 8.0, 16.0), _row(3, "A100", 16.0, None),
    _row(4, "H100", 1.0, 4.0), _row(5, "H100", 4.0, 5.0), _row(6, "H100", 8.0, 10.0), _row(7, "H100", 16.0, 20.0),
]


def test_cheapest_fleet_per_rate():
    fleets = summarize(ROWS).cheapest_fleets
    assert [(f.rate_rps, f.best.budget, f.best.cost_usd_per_hour) for f in fleets] == [
        (1.0, "A100", 2.0), (4.0, "H100", 5.0), (8.0, "H100", 10.0), (16.0, "H100", 20.0)]
    assert [o.budget for o in fleets[0].options] == ["A100", "H100"]
    assert fleets[3].infeasible_budgets == ["A100"]


def test_cheapest_fleet_when_nothing_fits():
    fleets = summarize([_row(0, "A100", 50.0, None), _row(1, "H100", 50.0, None)]).cheapest_fleets
    assert fleets[0].best is None and fleets[0].infeasible_budgets == ["A100", "H100"]
    assert "none holds the SLO" in render_markdown(summarize([_row(0, "A100", 50.0, None)]))


def test_crossovers_with_interpolation():
    crossovers = summarize(ROWS).crossovers
    cost = [c for c in crossovers if c.metric == "cost_usd_per_hour"]
    assert [(c.from_budget, c.to_budget, c.below_rate_rps, c.at_rate_rps) for c in cost] == [("A100", "H100", 1.0, 4.0)]
    # H100's advantage in -cost goes from -2 (at 1 req/s) to +1 (at 4 req/s): zero at 1 + 3 * 2/3 = 3
    assert cost[0].interpolated_rate_rps == pytest.approx(3.0)
    per_usd = [c for c in crossovers if c.metric == "requests_per_usd"]
    # requests/$ at 1 req/s: A100 1800, H100 900; at 4: A100 2400, H100 2880 -> crossing at
    # 1 + 3 * 900 / (900 + 480)
    assert [(c.from_budget, c.to_budget) for c in per_usd] == [("A100", "H100")]
    assert per_usd[0].interpolated_rate_rps == pytest.approx(1 + 3 * 900 / 1380)


def test_comparison_counts_wins_and_best():
    comparisons = {c.budget: c for c in summarize(ROWS).comparisons}
    assert comparisons["A100"].num_wins == 1 and comparisons["H100"].num_wins == 3
    assert comparisons["H100"].best_requests_per_usd == pytest.approx(16 * 3600 / 20)
    assert [p.rate_rps for p in comparisons["A100"].points] == [1.0, 4.0, 8.0]


def test_no_rates_means_no_crossovers_and_a_bar_chart(tmp_path):
    rows = [_row(0, "A100", None, 20.0, goodput=10.0, objective="max-goodput"),
            _row(1, "H100", None, 40.0, goodput=30.0, objective="max-goodput")]
    summary = write_summary(rows, tmp_path, "max")
    assert summary.crossovers == [] and summary.cheapest_fleets == []
    assert [p.split("/")[1].split("-m-")[0] for p in summary.plots] == ["requests-per-usd"]
    assert "No min-cost cells" in (tmp_path / "summary.md").read_text()


def test_written_summary_has_units_and_plots(tmp_path):
    summary = write_summary(ROWS, tmp_path, "demo")
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["schema_version"] == 1 and data["num_cells"] == 8
    assert data["status_counts"] == {"optimal": 7, "infeasible": 1}
    markdown = (tmp_path / "summary.md").read_text()
    assert "| rate [req/s] |" in markdown and "cost [USD/h]" in markdown
    assert "H100 becomes cheaper than A100 between 1 and 4 req/s; the lines cross near 3 req/s" in markdown
    assert len(summary.plots) == 2
    for plot in summary.plots:
        assert (tmp_path / plot).read_bytes()[:4] == b"\x89PNG"
        assert f"]({plot})" in markdown


def test_plot_axes_carry_units(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from layoutopt.sweep import plots

    labels: list[tuple[str, str]] = []
    original = Figure.savefig

    def recording_savefig(self, *args, **kwargs):
        axes = self.axes[0]
        labels.append((axes.get_xlabel(), axes.get_ylabel()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    plots.draw_plots(summarize(ROWS), tmp_path)
    assert labels == [("request rate [req/s]", "fleet cost [USD/h]"),
                      ("request rate [req/s]", "requests per dollar [req/USD]")]
