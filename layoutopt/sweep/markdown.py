"""``summary.md``: a sweep's procurement summary as Markdown tables (also the body of ``--report``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from layoutopt.sweep.steps import CheapestRange, Crossover
from layoutopt.sweep.summary import OptionComparison, SweepSummary


def rate_text(rate: float | None) -> str:
    return "max" if rate is None else f"{rate:.3g}"


def md_table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(cells) + " |" for cells in body]


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def cheapest_fleet_lines(summary: SweepSummary) -> list[str]:
    if not summary.cheapest_fleets:
        return ["No min-cost cells in this sweep (add `min-cost` to `objectives`)."]
    body = []
    for fleet in summary.cheapest_fleets:
        best = fleet.best
        cells = [fleet.model, fleet.workload, fleet.slo, rate_text(fleet.rate_rps)]
        cells += ([best.budget, best.gpus_by_type, _money(best.cost_usd_per_hour),
                   _count(best.requests_per_usd_at_demand), _count(best.requests_per_usd_at_capacity),
                   f"{best.capacity_rps:.3g}", best.layout] if best
                  else ["none holds the SLO", "-", "-", "-", "-", "-", "-"])
        body.append(cells)
    return [
        "Requests per dollar at demand = demanded rate x 3600 / cost: what the fleet delivers for its price at "
        "that rate. At capacity = the fleet's capacity x 3600 / cost: only if traffic grows to fill it.", "",
        *md_table(["model", "workload", "SLO", "rate [req/s]", "cheapest option", "GPUs by type", "cost [USD/h]",
                   "req/USD at demand", "req/USD at capacity", "capacity [req/s]", "layout"], body)]


def _range_option(item: CheapestRange) -> str:
    if item.budget is not None:
        return item.budget
    if item.contenders:
        return f"not settled by the swept rates: {' or '.join(item.contenders)}"
    return "no option serves these rates"


def _cost_span(item: CheapestRange) -> str:
    if item.min_cost_usd_per_hour is None:
        return "-"
    if item.min_cost_usd_per_hour == item.max_cost_usd_per_hour:
        return _money(item.min_cost_usd_per_hour)
    return f"{_money(item.min_cost_usd_per_hour)} to {_money(item.max_cost_usd_per_hour)}"


def range_lines(summary: SweepSummary) -> list[str]:
    if not summary.cheapest_ranges:
        return []
    body = [[r.model, r.workload, r.slo, f"{rate_text(r.from_rate_rps)} to {rate_text(r.to_rate_rps)}",
             _range_option(r), _cost_span(r)] for r in summary.cheapest_ranges]
    return ["Cost steps with whole GPUs; ranges end at the swept rates and at the fleets' capacities, "
            "never at an interpolated point.", "",
            *md_table(["model", "workload", "SLO", "rates [req/s]", "cheapest option", "cost [USD/h]"], body)]


def crossover_text(c: Crossover) -> str:
    where = (f"at {rate_text(c.low_rate_rps)} req/s" if c.exact
             else f"between {rate_text(c.low_rate_rps)} and {rate_text(c.high_rate_rps)} req/s (sweep rates in "
                  "between to settle it)")
    return f"{c.model}, {c.workload}, {c.slo}: {c.to_budget} becomes cheaper than {c.from_budget} {where}."


def comparison_lines(summary: SweepSummary) -> list[str]:
    lines: list[str] = []
    scenarios: dict[tuple, list[OptionComparison]] = defaultdict(list)
    for comparison in summary.comparisons:
        scenarios[(comparison.model, comparison.workload, comparison.slo, comparison.objective)].append(comparison)
    for (model, workload, slo, objective), options in scenarios.items():
        rates = sorted({p.rate_rps for o in options for p in o.points}, key=lambda r: (r is None, r or 0.0))

        def score(point) -> float:
            value = point.requests_per_usd_at_demand
            return point.requests_per_usd_at_capacity if value is None else value

        best_at = {rate: max(score(p) for o in options for p in o.points if p.rate_rps == rate) for rate in rates}
        lines += [f"### {model}, {workload}, {slo}, {objective}", ""]
        body = []
        for option in options:
            by_rate = {p.rate_rps: p for p in option.points}
            cells = [option.budget]
            for rate in rates:
                point = by_rate.get(rate)
                if point is None:
                    cells.append("-")
                    continue
                text = (f"{_count(point.requests_per_usd_at_demand)} / {_count(point.requests_per_usd_at_capacity)}"
                        if point.requests_per_usd_at_demand is not None else _count(point.requests_per_usd_at_capacity))
                cells.append(f"**{text}**" if score(point) == best_at[rate] else text)
            body.append(cells + [str(option.num_wins)])
        lines += md_table(["option", *(f"{rate_text(r)} req/s" for r in rates), "wins"], body) + [""]
    return lines


def render_markdown(summary: SweepSummary, plots: bool = True) -> str:
    """``summary.md``: cheapest fleets, rate ranges, crossovers, requests per dollar, then the plots."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.status_counts.items()))
    lines = [f"# Sweep {summary.name}: procurement summary", "", f"{summary.num_cells} cells: {counts}.", ""]
    lines += ["## Cheapest fleet per rate (min-cost cells)", "", *cheapest_fleet_lines(summary), ""]
    if summary.cheapest_ranges:
        lines += ["## Cheapest option by rate range", "", *range_lines(summary), ""]
    lines += ["## Crossovers", ""]
    if summary.crossovers:
        lines += [f"- {crossover_text(c)}" for c in summary.crossovers]
    elif summary.cheapest_ranges:
        lines.append("No crossovers: the same option is the cheapest over every rate swept.")
    else:
        lines.append("No crossovers: no min-cost cells with rates.")
    lines += ["", "## Fleet options by requests per dollar", "",
              "Each cell: requests per dollar at the demanded rate / at the fleet's capacity (cells without a rate: "
              "at capacity only); the best option at each rate is in bold.", "", *comparison_lines(summary)]
    if plots and summary.plots:
        pngs = [p for p in summary.plots if p.endswith(".png")]
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in pngs]
    return "\n".join(lines).rstrip("\n") + "\n"
