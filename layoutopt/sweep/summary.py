"""Procurement summary of a sweep: cheapest fleets, fleet options by goodput per dollar, crossovers.

Three answers, computed from the result rows alone (no solver):

- cheapest fleet: for each model, workload, SLO and rate, the ``min-cost`` cell with the lowest
  cost in USD/h across the fleet options (budgets or GPU types);
- comparison: for each model, workload, SLO and objective, every fleet option's requests per
  dollar (goodput per dollar / 3600) at each rate, and its best;
- crossovers: as the rate grows, the rates where another fleet option starts to give the most
  requests per dollar, with the rate where the two curves cross by linear interpolation.

``write_summary`` writes ``summary.json``, ``summary.md`` and the plots of :mod:`.plots`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.sweep.results import CellResult, write_atomically

SUMMARY_SCHEMA_VERSION = 1
JSON_NAME = "summary.json"
MARKDOWN_NAME = "summary.md"


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FleetOption(_Out):
    budget: str
    cost_usd_per_hour: float
    gpus: int
    layout: str


class CheapestFleet(_Out):
    """The cheapest fleet option holding the SLO at one rate (``best`` None: none does)."""

    model: str
    workload: str
    slo: str
    rate_rps: float
    best: FleetOption | None
    options: list[FleetOption] = Field(description="every feasible option, cheapest first")
    infeasible_budgets: list[str]


class RatePoint(_Out):
    rate_rps: float | None
    requests_per_usd: float
    goodput_rps: float
    cost_usd_per_hour: float


class OptionComparison(_Out):
    """One fleet option's requests per dollar across the rates of one scenario and objective."""

    model: str
    workload: str
    slo: str
    objective: str
    budget: str
    points: list[RatePoint]
    best_requests_per_usd: float | None
    num_wins: int = Field(description="rates at which this option gives the most requests per dollar")


class Crossover(_Out):
    """As the rate grows from ``below_rate_rps`` to ``at_rate_rps``, ``to_budget`` overtakes ``from_budget``.

    ``metric``: ``cost_usd_per_hour`` (it becomes the cheapest fleet; min-cost cells) or
    ``requests_per_usd`` (it starts to give the most requests per dollar).
    """

    metric: Literal["cost_usd_per_hour", "requests_per_usd"]
    model: str
    workload: str
    slo: str
    objective: str
    from_budget: str
    to_budget: str
    below_rate_rps: float
    at_rate_rps: float
    interpolated_rate_rps: float | None = Field(description="where the two options' lines cross (linear)")


class SweepSummary(_Out):
    schema_version: int = SUMMARY_SCHEMA_VERSION
    name: str
    num_cells: int
    status_counts: dict[str, int]
    cheapest_fleets: list[CheapestFleet]
    comparisons: list[OptionComparison]
    crossovers: list[Crossover]
    plots: list[str] = Field(default_factory=list, description="plot files, relative to the output folder")


def _order(values: Sequence[str]) -> list[str]:
    """Distinct values in first-seen order."""
    return list(dict.fromkeys(values))


def _cheapest_fleets(rows: Sequence[CellResult]) -> list[CheapestFleet]:
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for row in rows:
        if row.objective == "min-cost" and row.rate_rps is not None:
            groups[(row.model, row.workload, row.slo, row.rate_rps)].append(row)
    fleets = []
    for (model, workload, slo, rate), members in groups.items():
        solved = sorted((r for r in members if r.has_plan),
                        key=lambda r: (r.cost_usd_per_hour, r.gpus or 0, r.cell_index))
        options = [FleetOption(budget=r.budget, cost_usd_per_hour=r.cost_usd_per_hour, gpus=r.gpus or 0,
                               layout=r.layout) for r in solved]
        fleets.append(CheapestFleet(model=model, workload=workload, slo=slo, rate_rps=rate,
                                    best=options[0] if options else None, options=options,
                                    infeasible_budgets=[r.budget for r in members if not r.has_plan]))
    return sorted(fleets, key=lambda f: (f.model, f.workload, f.slo, f.rate_rps))


def _scenarios(rows: Sequence[CellResult]) -> dict[tuple, list[CellResult]]:
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for row in rows:
        groups[(row.model, row.workload, row.slo, row.objective)].append(row)
    return groups


def _winners(members: Sequence[CellResult], metric: str = "requests_per_usd") -> dict[float | None, CellResult]:
    """The best row at each rate: most requests per dollar, or (metric cost) the cheapest.

    Ties go to the cheaper row, then to grid order.
    """
    best: dict[float | None, CellResult] = {}

    def rank(row: CellResult) -> tuple:
        lead = -row.requests_per_usd if metric == "requests_per_usd" else row.cost_usd_per_hour
        return lead, row.cost_usd_per_hour, row.cell_index

    for row in members:
        if not row.has_plan or row.requests_per_usd is None:
            continue
        incumbent = best.get(row.rate_rps)
        if incumbent is None or rank(row) < rank(incumbent):
            best[row.rate_rps] = row
    return best


def _comparisons(rows: Sequence[CellResult]) -> list[OptionComparison]:
    comparisons = []
    for (model, workload, slo, objective), members in _scenarios(rows).items():
        wins = Counter(row.budget for row in _winners(members).values())
        for budget in _order([r.budget for r in members]):
            points = [RatePoint(rate_rps=r.rate_rps, requests_per_usd=r.requests_per_usd, goodput_rps=r.goodput_rps,
                                cost_usd_per_hour=r.cost_usd_per_hour)
                      for r in members if r.budget == budget and r.has_plan and r.requests_per_usd is not None]
            points.sort(key=lambda p: (p.rate_rps is None, p.rate_rps or 0.0))
            comparisons.append(OptionComparison(
                model=model, workload=workload, slo=slo, objective=objective, budget=budget, points=points,
                best_requests_per_usd=max((p.requests_per_usd for p in points), default=None),
                num_wins=wins.get(budget, 0)))
    return comparisons


def _value_at(members: Sequence[CellResult], budget: str, rate: float, metric: str) -> float | None:
    """The advantage score of ``budget`` at ``rate``: requests per dollar, or minus the cost."""
    for row in members:
        if row.budget == budget and row.rate_rps == rate and row.has_plan:
            return row.requests_per_usd if metric == "requests_per_usd" else -row.cost_usd_per_hour
    return None


def _crossovers_of(key: tuple[str, str, str, str], members: Sequence[CellResult], metric: str) -> list[Crossover]:
    found = []
    winners = _winners(members, metric)
    rates = sorted(rate for rate in winners if rate is not None)
    for low, high in pairwise(rates):
        old, new = winners[low].budget, winners[high].budget
        if old == new:
            continue
        interpolated = None
        before = (_value_at(members, new, low, metric), _value_at(members, old, low, metric))
        after = (_value_at(members, new, high, metric), _value_at(members, old, high, metric))
        if None not in before and None not in after:
            gap_low, gap_high = before[0] - before[1], after[0] - after[1]
            if gap_low <= 0 < gap_high:
                interpolated = low + (high - low) * (-gap_low) / (gap_high - gap_low)
        model, workload, slo, objective = key
        found.append(Crossover(metric=metric, model=model, workload=workload, slo=slo, objective=objective,
                               from_budget=old, to_budget=new, below_rate_rps=low, at_rate_rps=high,
                               interpolated_rate_rps=interpolated))
    return found


def _crossovers(rows: Sequence[CellResult]) -> list[Crossover]:
    """Crossovers of the cheapest fleet (min-cost cells), then of requests per dollar per objective."""
    found = []
    for key, members in _scenarios(rows).items():
        if key[3] == "min-cost":
            found += _crossovers_of(key, members, "cost_usd_per_hour")
    for key, members in _scenarios(rows).items():
        found += _crossovers_of(key, members, "requests_per_usd")
    return found


def summarize(rows: Sequence[CellResult], name: str = "sweep") -> SweepSummary:
    """The procurement summary of ``rows`` (plots not drawn; see ``write_summary``)."""
    return SweepSummary(name=name, num_cells=len(rows), status_counts=dict(Counter(r.status for r in rows)),
                        cheapest_fleets=_cheapest_fleets(rows), comparisons=_comparisons(rows),
                        crossovers=_crossovers(rows))


def _rate_text(rate: float | None) -> str:
    return "max" if rate is None else f"{rate:g}"


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(cells) + " |" for cells in body]


def render_markdown(summary: SweepSummary) -> str:
    """``summary.md``: the three answers as tables, then the plots."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.status_counts.items()))
    lines = [f"# Sweep {summary.name}: procurement summary", "", f"{summary.num_cells} cells: {counts}.", ""]
    lines += ["## Cheapest fleet per rate (min-cost cells)", ""]
    if summary.cheapest_fleets:
        body = []
        for fleet in summary.cheapest_fleets:
            best = fleet.best
            cells = [fleet.model, fleet.workload, fleet.slo, f"{fleet.rate_rps:g}"]
            cells += ([best.budget, f"{best.cost_usd_per_hour:,.2f}", str(best.gpus), best.layout] if best
                      else ["none holds the SLO", "-", "-", "-"])
            body.append(cells)
        lines += _md_table(["model", "workload", "SLO", "rate [req/s]", "cheapest option", "cost [USD/h]",
                            "GPUs", "layout"], body)
    else:
        lines.append("No min-cost cells in this sweep (add `min-cost` to `objectives`).")
    lines += ["", "## Fleet options by requests per dollar", "",
              "Requests per dollar = goodput [req/s] x 3600 / cost [USD/h]; the best option at each rate is in bold.",
              ""]
    scenarios: dict[tuple, list[OptionComparison]] = defaultdict(list)
    for comparison in summary.comparisons:
        scenarios[(comparison.model, comparison.workload, comparison.slo, comparison.objective)].append(comparison)
    for (model, workload, slo, objective), options in scenarios.items():
        rates = sorted({p.rate_rps for o in options for p in o.points}, key=lambda r: (r is None, r or 0.0))
        best_at = {rate: max(p.requests_per_usd for o in options for p in o.points if p.rate_rps == rate)
                   for rate in rates}
        lines += [f"### {model}, {workload}, {slo}, {objective}", ""]
        body = []
        for option in options:
            by_rate = {p.rate_rps: p.requests_per_usd for p in option.points}
            cells = [option.budget]
            for rate in rates:
                value = by_rate.get(rate)
                text = "-" if value is None else f"{value:,.0f}"
                cells.append(f"**{text}**" if value is not None and value == best_at[rate] else text)
            body.append(cells + [str(option.num_wins)])
        lines += _md_table(["option", *(f"{_rate_text(r)} req/s" for r in rates), "wins"], body) + [""]
    lines += ["## Crossovers", ""]
    if summary.crossovers:
        for c in summary.crossovers:
            where = (f"; the lines cross near {c.interpolated_rate_rps:.3g} req/s"
                     if c.interpolated_rate_rps is not None else "")
            what = ("becomes cheaper than" if c.metric == "cost_usd_per_hour"
                    else "gives more requests per dollar than")
            lines.append(f"- {c.model}, {c.workload}, {c.slo}, {c.objective}: {c.to_budget} {what} "
                         f"{c.from_budget} between {c.below_rate_rps:g} and {c.at_rate_rps:g} req/s{where}.")
    else:
        lines.append("No crossovers: the same option is the cheapest and gives the most requests per dollar "
                     "at every rate swept.")
    if summary.plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in summary.plots]
    return "\n".join(lines) + "\n"


def write_summary(rows: Sequence[CellResult], out_dir: str | Path, name: str = "sweep",
                  plots: bool = True) -> SweepSummary:
    """Write ``summary.json``, ``summary.md`` and (with ``plots``) PNG plots under ``out_dir/plots``."""
    out = Path(out_dir)
    summary = summarize(rows, name)
    if plots:
        from layoutopt.sweep.plots import draw_plots

        summary = summary.model_copy(update={"plots": draw_plots(summary, out)})
    write_atomically(out / JSON_NAME, json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    write_atomically(out / MARKDOWN_NAME, render_markdown(summary))
    return summary
