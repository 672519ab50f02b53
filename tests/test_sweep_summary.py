"""Procurement summary: cheapest fleets, step-aware rate ranges and crossovers, requests per dollar at
the demanded rate and at capacity, partial results of an interrupted sweep, plots; hand-built rows."""

from __future__ import annotations

import json
import math
import re

import pytest

from layoutopt.plan import Plan
from layoutopt.sweep import SweepSpec, sweep
from layoutopt.sweep.markdown import render_markdown
from layoutopt.sweep.results import CellResult, read_csv_rows
from layoutopt.sweep.summary import option_steps, summarize, write_summary
from test_sweep import FIXTURE_PLAN, SLO

UNIT = re.compile(r"\[[^\]]+\]")

# Step-function fixture. Option A: 1 GPU at 2 USD/h serves 2.5 req/s. Option H: 1 GPU at 3 USD/h
# serves 6 req/s. Min-cost fleets (n = ceil(rate / per-GPU capacity)):
#   rate 1, 2: A 1 GPU, 2 USD/h, capacity 2.5   | H 1 GPU, 3 USD/h, capacity 6
#   rate 3, 4: A 2 GPUs, 4 USD/h, capacity 5    | H 1 GPU, 3 USD/h, capacity 6
#   rate 8:    A infeasible (budget of 2 GPUs)  | H 2 GPUs, 6 USD/h, capacity 12
PER_GPU = {"A": (2.0, 2.5, 2), "H": (3.0, 6.0, 8)}  # USD/h, req/s, GPUs in the budget


def _step_row(index: int, budget: str, rate: float) -> CellResult:
    price, per_gpu_rps, limit = PER_GPU[budget]
    gpus = math.ceil(rate / per_gpu_rps)
    base = dict(cell_id=f"c{index}", cell_index=index, model="m", budget=budget, workload="chat", slo="slo",
                objective="min-cost", rate_rps=rate)
    if gpus > limit:
        return CellResult(**base, status="infeasible")
    cost, capacity = gpus * price, gpus * per_gpu_rps
    return CellResult(**base, status="optimal", gpus=gpus, gpus_by_type=f"{budget}:{gpus}", cost_usd_per_hour=cost,
                      goodput_rps=capacity, requests_per_usd_at_demand=rate * 3600 / cost,
                      requests_per_usd_at_capacity=capacity * 3600 / cost, layout=f"{gpus} x colocated {budget}")


RATES = [1.0, 2.0, 3.0, 4.0, 8.0]
ROWS = [_step_row(i, b, r) for i, (b, r) in enumerate((b, r) for b in ("A", "H") for r in RATES)]


def test_cheapest_fleet_per_rate_with_both_requests_per_dollar():
    fleets = summarize(ROWS).cheapest_fleets
    assert [(f.rate_rps, f.best.budget, f.best.cost_usd_per_hour) for f in fleets] == [
        (1.0, "A", 2.0), (2.0, "A", 2.0), (3.0, "H", 3.0), (4.0, "H", 3.0), (8.0, "H", 6.0)]
    one = fleets[0].best
    # 1 req/s on a 2 USD/h GPU: 1800 requests per dollar; the GPU could serve 2.5 req/s: 4500
    assert one.requests_per_usd_at_demand == pytest.approx(1800.0)
    assert one.requests_per_usd_at_capacity == pytest.approx(4500.0)
    assert (one.gpus_by_type, one.capacity_rps) == ("A:1", 2.5)
    assert fleets[4].infeasible_budgets == ["A"] and [o.budget for o in fleets[0].options] == ["A", "H"]


def test_ranges_split_at_steps_without_interpolation():
    ranges = summarize(ROWS).cheapest_ranges
    found = [(r.from_rate_rps, r.to_rate_rps, r.budget, r.contenders, r.min_cost_usd_per_hour,
              r.max_cost_usd_per_hour) for r in ranges]
    assert found == [
        (1.0, 2.5, "A", [], 2.0, 2.0),            # A's 1-GPU fleet serves up to its capacity 2.5
        (2.5, 3.0, None, ["A", "H"], None, None),  # A may still cost 2 or already 4: not settled
        (3.0, 6.0, "H", [], 3.0, 3.0),            # H's 1-GPU fleet up to 6; A costs 4 from 3 req/s
        (6.0, 8.0, None, ["A", "H"], None, None),  # no A fleet found past 5, but A costs at least 4 and
                                                   # may serve 7 req/s; H's 2-GPU fleet costs 6
        (8.0, 8.0, "H", [], 6.0, 6.0),            # A proven impossible at 8 req/s
    ]


def test_crossovers_are_ranges_between_steps():
    (crossover,) = summarize(ROWS).crossovers
    assert (crossover.from_budget, crossover.to_budget) == ("A", "H")
    assert (crossover.low_rate_rps, crossover.high_rate_rps) == (2.5, 3.0) and not crossover.exact
    markdown = render_markdown(summarize(ROWS))
    assert "H becomes cheaper than A between 2.5 and 3 req/s" in markdown
    assert "near" not in markdown  # no interpolated crossing points


def test_finer_rates_narrow_the_crossover():
    rows = ROWS + [_step_row(10 + i, b, r) for i, (b, r) in enumerate((b, r) for b in ("A", "H") for r in (2.75,))]
    (crossover,) = summarize(rows).crossovers
    # at 2.75 req/s A needs 2 GPUs (4 USD/h) against H's 3 USD/h
    assert (crossover.low_rate_rps, crossover.high_rate_rps) == (2.5, 2.75)


def test_no_option_serving_ends_the_ranges():
    rows = [_step_row(0, "A", 1.0), _step_row(1, "A", 8.0)]
    ranges = summarize(rows).cheapest_ranges
    assert [(r.from_rate_rps, r.to_rate_rps, r.budget, r.contenders) for r in ranges] == [
        (1.0, 2.5, "A", []), (2.5, 8.0, None, ["A"]), (8.0, 8.0, None, [])]
    assert summarize(rows).crossovers == []


def test_comparison_counts_wins_at_the_demanded_rate():
    comparisons = {c.budget: c for c in summarize(ROWS).comparisons}
    assert comparisons["A"].num_wins == 2 and comparisons["H"].num_wins == 3
    assert comparisons["H"].best_requests_per_usd_at_demand == pytest.approx(8 * 3600 / 6)
    assert comparisons["H"].best_requests_per_usd_at_capacity == pytest.approx(6 * 3600 / 3)
    assert [p.rate_rps for p in comparisons["A"].points] == [1.0, 2.0, 3.0, 4.0]


def test_no_rates_means_no_ranges_and_a_bar_per_option(tmp_path):
    rows = [CellResult(cell_id=f"c{i}", cell_index=i, model="m", budget=b, workload="chat", slo="slo",
                       objective="max-goodput", rate_rps=None, status="optimal", cost_usd_per_hour=cost, gpus=8,
                       goodput_rps=goodput, requests_per_usd_at_capacity=goodput * 3600 / cost)
            for i, (b, cost, goodput) in enumerate([("A", 20.0, 10.0), ("H", 40.0, 30.0)])]
    summary = write_summary(rows, tmp_path, "max")
    assert summary.crossovers == [] and summary.cheapest_fleets == [] and summary.cheapest_ranges == []
    assert [p.split("/")[1].split("-m-")[0] for p in summary.plots] == ["requests-per-usd"] * 2
    assert "No min-cost cells" in (tmp_path / "summary.md").read_text()


def test_written_summary_has_units_and_svg_and_png_plots(tmp_path):
    summary = write_summary(ROWS, tmp_path, "demo")
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["schema_version"] == 2 and data["num_cells"] == 10
    assert data["status_counts"] == {"optimal": 9, "infeasible": 1}
    markdown = (tmp_path / "summary.md").read_text()
    assert "| rate [req/s] |" in markdown and "req/USD at demand" in markdown and "req/USD at capacity" in markdown
    assert sorted(p.rsplit(".", 1)[1] for p in summary.plots) == ["png", "png", "svg", "svg"]
    for plot in summary.plots:
        head = (tmp_path / plot).read_bytes()[:5]
        assert head[:4] == b"\x89PNG" if plot.endswith(".png") else head in (b"<?xml", b"<svg ")
        if plot.endswith(".png"):
            assert f"]({plot})" in markdown


def test_plot_axes_carry_units_and_legends_say_what_was_found():
    from layoutopt.sweep import plots

    steps = option_steps(ROWS)[("m", "chat", "slo")]
    cost = plots.cost_figure("m", steps)
    axes = cost.axes[0]
    assert UNIT.search(axes.get_xlabel()) and UNIT.search(axes.get_ylabel())
    labels = [t.get_text() for t in axes.get_legend().get_texts()]
    assert "A (fleets of 1-2 GPUs)" in labels and "H (fleets of 1-2 GPUs)" in labels
    assert any("capacity ends" in t.get_text() for t in axes.texts)  # A runs out before 8 req/s
    summary = summarize(ROWS)
    requests = plots.requests_figure("m", [c for c in summary.comparisons])
    axes = requests.axes[0]
    assert UNIT.search(axes.get_xlabel()) and UNIT.search(axes.get_ylabel())


def _capacity_solve(**kwargs) -> Plan:
    """Whole GPUs of 3 req/s each at 4 USD/h (8xH100) or 5 USD/h (8xH200): capacity exceeds the rate."""
    plan = Plan.model_validate_json(FIXTURE_PLAN.read_text())
    price = {"8xH100": 4.0, "8xH200": 5.0}[kwargs["budget"]]
    rate = kwargs["rate_rps"]
    gpus = math.ceil(rate / 3.0)
    cost, capacity = gpus * price, gpus * 3.0
    pool = plan.pools[0].model_copy(update={"instances": gpus, "gpus_per_instance": 1, "cost_usd_per_hour": cost})
    totals = plan.totals.model_copy(update={"gpus": gpus, "gpus_by_type": {"H100-SXM": gpus}, "cost_usd_per_hour": cost,
                                            "goodput_rps": capacity, "requests_per_usd": capacity * 3600 / cost})
    return plan.model_copy(update={"pools": [pool], "totals": totals, "objective": kwargs["objective"]})


def _spec(rates: list[float]) -> SweepSpec:
    return SweepSpec.model_validate({"name": "hand", "models": ["qwen3-8b"], "budgets": ["8xH100", "8xH200"],
                                     "rates_rps": rates, "workloads": ["chat"], "slos": [SLO],
                                     "objectives": ["min-cost"]})


def test_hand_checked_sweep_reports_the_demanded_rate(tmp_path):
    result = sweep(_spec([1.0, 4.0]), tmp_path, workers=1, solve_fn=_capacity_solve, plots=False)
    row = result.rows[0]  # 8xH100 at 1 req/s: 1 GPU, 4 USD/h, capacity 3 req/s
    assert row.requests_per_usd_at_demand == pytest.approx(1 * 3600 / 4)  # 900
    assert row.requests_per_usd_at_capacity == pytest.approx(3 * 3600 / 4)  # 2700
    at_four = result.rows[1]  # 4 req/s: 2 GPUs, 8 USD/h, capacity 6
    assert at_four.requests_per_usd_at_demand == pytest.approx(4 * 3600 / 8)
    assert at_four.requests_per_usd_at_capacity == pytest.approx(6 * 3600 / 8)
    csv_row = read_csv_rows(tmp_path / "results.csv")[0]
    assert float(csv_row["requests_per_usd_at_demand"]) == pytest.approx(900.0)
    assert csv_row["gpus_by_type"] == "H100-SXM:1"
    best = result.summary.cheapest_fleets[0].best
    assert (best.budget, best.cost_usd_per_hour, best.requests_per_usd_at_demand) == ("8xH100", 4.0, 900.0)


class _Interrupt(KeyboardInterrupt):
    pass


def test_interrupted_sweep_leaves_readable_partial_csv_and_parquet(tmp_path):
    import pyarrow.parquet as pq

    calls = []

    def stop_after_three(**kwargs):
        calls.append(kwargs["rate_rps"])
        if len(calls) > 3:
            raise _Interrupt
        return _capacity_solve(**kwargs)

    with pytest.raises(_Interrupt):
        sweep(_spec([1.0, 2.0, 4.0, 8.0]), tmp_path, workers=1, solve_fn=stop_after_three, plots=False,
              parquet_every_s=3600.0)
    rows = read_csv_rows(tmp_path / "results.csv")
    assert [float(r["rate_rps"]) for r in rows] == [1.0, 2.0, 4.0]
    table = pq.read_table(tmp_path / "results.parquet")
    assert table.column("rate_rps").to_pylist() == [1.0, 2.0, 4.0]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["num_cells"] == 3 and len(summary["cheapest_fleets"]) == 3
    # the rerun finishes the rest and writes everything in grid order
    done = sweep(_spec([1.0, 2.0, 4.0, 8.0]), tmp_path, workers=1, solve_fn=_capacity_solve, plots=False)
    assert (done.num_skipped, done.num_run) == (3, 5)
    assert len(read_csv_rows(tmp_path / "results.csv")) == 8


def test_results_appear_while_the_sweep_runs(tmp_path):
    import pyarrow.parquet as pq

    seen = []

    def watching_solve(**kwargs):
        if (tmp_path / "results.csv").exists():
            seen.append((len(read_csv_rows(tmp_path / "results.csv")),
                         pq.read_table(tmp_path / "results.parquet").num_rows))
        return _capacity_solve(**kwargs)

    sweep(_spec([1.0, 2.0]), tmp_path, workers=1, solve_fn=watching_solve, plots=False, parquet_every_s=0.0)
    assert seen == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_report_page_has_answer_tables_plots_and_assumptions(tmp_path):
    result = sweep(_spec([1.0, 4.0]), tmp_path, workers=1, solve_fn=_capacity_solve, report=True)
    page = (tmp_path / "report.md").read_text()
    assert result.report_path == str(tmp_path / "report.md")
    assert page.startswith("# What to buy: sweep hand")
    # the answer: 8xH100 (4 USD/h per GPU) is cheaper than 8xH200 (5 USD/h) at every rate
    assert "cheapest is 8xH100 1 to 3 req/s; 8xH100 or 8xH200 3 to 4 req/s (not settled); 8xH100 at 4 req/s" in page
    assert "| 1 | 8xH100 | H100-SXM:1 | 4.00 | 900 | 2,700 | 3 |" in page
    for plot in result.summary.plots:
        assert f"({plot})" in page
    # prices of the GPU types the options may use, with their dates and sources
    assert "| H100-SXM | 3.99 |" in page and "| H200-SXM |" in page and "2026-" in page and "[SKY-L]" in page
    assert "| p90 <= 1000 | p90 <= 30 | 0.9 |" in page
    assert "| chat | 1400 / 2900 | 250 / 550 | 0.2 | lognormal |" in page
    # the cheapest fleet at the highest rate gets its frontier plot, drawn from its plan file
    assert "**qwen3-8b, chat, TTFT p90 1000 ms, TPOT p90 30 ms @ 0.9: 8xH100 at 4 req/s: layouts evaluated" in page
    frontier = next(line for line in page.splitlines() if line.startswith("![plan-frontier-"))
    assert (tmp_path / frontier.split("](")[1].rstrip(")")).read_bytes()[:4] == b"\x89PNG"
