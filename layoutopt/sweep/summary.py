"""Procurement summary of a sweep: cheapest fleets, cheapest option by rate range, crossovers,
fleet options by requests per dollar.

Computed from the result rows alone (no solver), with ``pyarrow.compute`` for the group-bys:

- cheapest fleet: for each model, workload, SLO and swept rate, the ``min-cost`` cell with the
  lowest cost in USD/h across the fleet options (budgets or GPU types), with its requests per
  dollar at the demanded rate and at the fleet's capacity, and its GPUs by type;
- cheapest option by rate range (:mod:`.steps`): cost is a step function of the rate (whole GPUs),
  so the rates are split at the swept rates and at each fleet's capacity, never interpolated; a
  range the swept rates do not settle is reported as such, with the options that may be cheapest;
- crossovers: where the cheapest option changes, at one rate (a step) or between two rates;
- comparison: for each model, workload, SLO and objective, every option's requests per dollar at
  each rate (at the demanded rate, and at capacity).

``write_summary`` writes ``summary.json``, ``summary.md`` and the plots of :mod:`.plots`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.sweep.results import SOLVED_STATUSES, CellResult, rows_table, write_atomically
from layoutopt.sweep.steps import CheapestRange, Crossover, OptionSteps, cheapest_ranges, crossovers_of

SUMMARY_SCHEMA_VERSION = 2
JSON_NAME = "summary.json"
MARKDOWN_NAME = "summary.md"
SCENARIO_KEYS = ["model", "workload", "slo"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FleetOption(_Out):
    """One option's min-cost fleet at one rate."""

    budget: str
    cost_usd_per_hour: float
    gpus: int
    gpus_by_type: str = Field(description="e.g. 'H100-SXM:2'")
    capacity_rps: float = Field(description="the highest rate this fleet serves within the SLO")
    requests_per_usd_at_demand: float = Field(description="demanded rate x 3600 / cost")
    requests_per_usd_at_capacity: float = Field(description="capacity x 3600 / cost")
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
    cost_usd_per_hour: float
    gpus: int
    capacity_rps: float
    requests_per_usd_at_demand: float | None = Field(description="None for cells without a demanded rate")
    requests_per_usd_at_capacity: float


class OptionComparison(_Out):
    """One fleet option's requests per dollar across the rates of one scenario and objective."""

    model: str
    workload: str
    slo: str
    objective: str
    budget: str
    points: list[RatePoint]
    best_requests_per_usd_at_demand: float | None
    best_requests_per_usd_at_capacity: float | None
    num_wins: int = Field(description="rates at which this option gives the most requests per dollar at the "
                          "demanded rate (at capacity for cells without a rate)")


class SweepSummary(_Out):
    schema_version: int = SUMMARY_SCHEMA_VERSION
    name: str
    num_cells: int
    status_counts: dict[str, int]
    cheapest_fleets: list[CheapestFleet]
    cheapest_ranges: list[CheapestRange]
    crossovers: list[Crossover]
    comparisons: list[OptionComparison]
    plots: list[str] = Field(default_factory=list, description="plot files, relative to the output folder")


def _solved(table):
    """The rows with a plan (a solved status and a cost)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    solved = pc.is_in(table["status"], value_set=pa.array(SOLVED_STATUSES))
    return table.filter(pc.and_(solved, pc.is_valid(table["cost_usd_per_hour"])))


def _min_cost_rows(table):
    import pyarrow.compute as pc

    return table.filter(pc.and_(pc.equal(table["objective"], "min-cost"), pc.is_valid(table["rate_rps"])))


def _fleet_option(row: dict) -> FleetOption:
    return FleetOption(budget=row["budget"], cost_usd_per_hour=row["cost_usd_per_hour"], gpus=row["gpus"] or 0,
                       gpus_by_type=row["gpus_by_type"], capacity_rps=row["goodput_rps"],
                       requests_per_usd_at_demand=row["requests_per_usd_at_demand"],
                       requests_per_usd_at_capacity=row["requests_per_usd_at_capacity"], layout=row["layout"])


def _cheapest_fleets(table) -> list[CheapestFleet]:
    keys = [*SCENARIO_KEYS, "rate_rps"]
    min_cost = _min_cost_rows(table)
    # Cheapest first within each group; ties go to fewer GPUs, then to grid order.
    solved = _solved(min_cost).sort_by([*((k, "ascending") for k in keys), ("cost_usd_per_hour", "ascending"),
                                        ("gpus", "ascending"), ("cell_index", "ascending")])
    options: dict[tuple, list[FleetOption]] = defaultdict(list)
    for row in solved.to_pylist():
        options[tuple(row[k] for k in keys)].append(_fleet_option(row))
    # every (scenario, rate) with the budgets that hold no plan there, in grid order
    grouped = min_cost.sort_by([("cell_index", "ascending")]).group_by(keys, use_threads=False).aggregate(
        [("budget", "list"), ("status", "list"), ("cost_usd_per_hour", "list")])
    fleets = []
    for group in grouped.to_pylist():
        key = tuple(group[k] for k in keys)
        solved_budgets = {o.budget for o in options.get(key, [])}
        infeasible = [b for b in group["budget_list"] if b not in solved_budgets]
        found = options.get(key, [])
        fleets.append(CheapestFleet(model=key[0], workload=key[1], slo=key[2], rate_rps=key[3],
                                    best=found[0] if found else None, options=found,
                                    infeasible_budgets=infeasible))
    return sorted(fleets, key=lambda f: (f.model, f.workload, f.slo, f.rate_rps))


def _rate_order(rate: float | None) -> tuple[bool, float]:
    return rate is None, rate or 0.0


def _comparisons(table) -> list[OptionComparison]:
    import pyarrow.compute as pc

    keys = [*SCENARIO_KEYS, "objective"]
    solved = _solved(table)
    # the figure an option wins on: requests per dollar at the demanded rate, at capacity without a rate
    score = pc.coalesce(solved["requests_per_usd_at_demand"], solved["requests_per_usd_at_capacity"])
    solved = solved.append_column("score", score)
    # best score per (scenario, objective, rate); a null rate is its own group
    best = solved.group_by([*keys, "rate_rps"], use_threads=False).aggregate([("score", "max")])
    best_at = {tuple(r[k] for k in [*keys, "rate_rps"]): r["score_max"] for r in best.to_pylist()}
    points: dict[tuple, list[RatePoint]] = defaultdict(list)
    wins: dict[tuple, int] = defaultdict(int)
    won_rates: set[tuple] = set()
    for row in solved.sort_by([("cost_usd_per_hour", "ascending"), ("cell_index", "ascending")]).to_pylist():
        key = tuple(row[k] for k in keys)
        points[(*key, row["budget"])].append(RatePoint(
            rate_rps=row["rate_rps"], cost_usd_per_hour=row["cost_usd_per_hour"], gpus=row["gpus"] or 0,
            capacity_rps=row["goodput_rps"], requests_per_usd_at_demand=row["requests_per_usd_at_demand"],
            requests_per_usd_at_capacity=row["requests_per_usd_at_capacity"]))
        rate_key = (*key, row["rate_rps"])
        # one win per rate: the cheapest row among those with the best score (rows come cheapest first)
        if rate_key not in won_rates and row["score"] >= best_at[rate_key] * (1 - 1e-12):
            won_rates.add(rate_key)
            wins[(*key, row["budget"])] += 1
    comparisons = []
    budgets_in_order = table.sort_by([("cell_index", "ascending")]).group_by(keys, use_threads=False).aggregate(
        [("budget", "distinct")])
    for group in budgets_in_order.to_pylist():
        key = tuple(group[k] for k in keys)
        for budget in group["budget_distinct"]:
            found = sorted(points.get((*key, budget), []), key=lambda p: _rate_order(p.rate_rps))
            at_demand = [p.requests_per_usd_at_demand for p in found if p.requests_per_usd_at_demand is not None]
            comparisons.append(OptionComparison(
                model=key[0], workload=key[1], slo=key[2], objective=key[3], budget=budget, points=found,
                best_requests_per_usd_at_demand=max(at_demand, default=None),
                best_requests_per_usd_at_capacity=max((p.requests_per_usd_at_capacity for p in found), default=None),
                num_wins=wins.get((*key, budget), 0)))
    return comparisons


def option_steps(rows: Sequence[CellResult]) -> dict[tuple[str, str, str], list[OptionSteps]]:
    """Per scenario (model, workload, SLO), each option's min-cost points, options in grid order."""
    table = _min_cost_rows(rows_table(rows)).sort_by([("cell_index", "ascending")])
    found: dict[tuple[str, str, str], dict[str, list[dict]]] = defaultdict(dict)
    for row in table.to_pylist():
        found[tuple(row[k] for k in SCENARIO_KEYS)].setdefault(row["budget"], []).append(row)
    return {key: [OptionSteps.from_rows(budget, members) for budget, members in by_budget.items()]
            for key, by_budget in found.items()}


def summarize(rows: Sequence[CellResult], name: str = "sweep") -> SweepSummary:
    """The procurement summary of ``rows`` (plots not drawn; see ``write_summary``)."""
    import pyarrow.compute as pc

    table = rows_table(rows)
    counts = pc.value_counts(table["status"]).to_pylist() if table.num_rows else []
    ranges: list[CheapestRange] = []
    crossovers: list[Crossover] = []
    for key, options in option_steps(rows).items():
        found = cheapest_ranges(key, options)
        ranges += found
        crossovers += crossovers_of(found)
    return SweepSummary(name=name, num_cells=len(rows), status_counts={c["values"]: c["counts"] for c in counts},
                        cheapest_fleets=_cheapest_fleets(table), cheapest_ranges=ranges, crossovers=crossovers,
                        comparisons=_comparisons(table))


def write_summary(rows: Sequence[CellResult], out_dir: str | Path, name: str = "sweep",
                  plots: bool = True) -> SweepSummary:
    """Write ``summary.json``, ``summary.md`` and (with ``plots``) SVG and PNG plots under ``out_dir/plots``."""
    from layoutopt.sweep.markdown import render_markdown

    out = Path(out_dir)
    summary = summarize(rows, name)
    if plots:
        from layoutopt.sweep.plots import draw_plots

        summary = summary.model_copy(update={"plots": draw_plots(summary, option_steps(rows), out)})
    write_atomically(out / JSON_NAME, json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    write_atomically(out / MARKDOWN_NAME, render_markdown(summary))
    return summary
