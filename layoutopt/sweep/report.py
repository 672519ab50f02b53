"""``report.md`` of a sweep (``layoutopt sweep ... --report``): one page a buyer can forward.

The answer first (the cheapest option per rate range and the crossovers), then the tables and
plots of the summary, then every assumption the figures rest on: GPU prices with their dates and
sources, SLO targets, workloads, solver settings, and how the figures are defined.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from layoutopt.sweep.markdown import (
    cheapest_fleet_lines, comparison_lines, crossover_text, md_table, range_lines, rate_text,
)
from layoutopt.sweep.results import CellResult, write_atomically
from layoutopt.sweep.spec import Cell
from layoutopt.sweep.summary import SweepSummary

REPORT_NAME = "report.md"
MAX_PLAN_PLOTS = 4  # scenarios whose recommended plan gets its own plots (each rebuilds its candidates)


def _gpu_types(cells: Sequence[Cell]) -> list:
    """The catalog rows of every GPU type the sweep's fleet options may use, in catalog order."""
    from layoutopt.hardware_catalog.budget import parse_budget
    from layoutopt.hardware_catalog.catalog import load_catalog

    if not cells:
        return []
    solver = cells[0].solver
    catalog = load_catalog(gpus_path=solver.gpus_path, prices_path=solver.prices_path)
    names: set[str] = set()
    for budget in {cell.budget for cell in cells}:
        parsed = parse_budget(budget, catalog)
        names |= set(parsed.gpu_counts) if parsed.gpu_counts else set(catalog.gpu_names)
    return [gpu for gpu in catalog.gpus if gpu.name in names]


def price_lines(cells: Sequence[Cell]) -> list[str]:
    body = []
    for gpu in _gpu_types(cells):
        price = gpu.price
        if price is None:
            body.append([gpu.name, "no price", "-", "-", "-"])
            continue
        spread = f"{price.low_usd_per_hour:.2f} to {price.high_usd_per_hour:.2f}"
        body.append([gpu.name, f"{price.typical_usd_per_hour:.2f}", spread, price.as_of,
                     " ".join(price.source.split())])
    if not body:
        return []
    return ["Costs use the typical on-demand price; the spread is what was observed (spot and contract "
            "prices included in the low end).", "",
            *md_table(["GPU", "USD per GPU-hour", "observed spread [USD/GPU-h]", "as of", "source"], body)]


def _first_by_name(cells: Sequence[Cell], attribute: str) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for cell in cells:
        found.setdefault(getattr(cell, f"{attribute}_name"), getattr(cell, attribute))
    return found


def slo_lines(cells: Sequence[Cell]) -> list[str]:
    body = []
    for name, slo in _first_by_name(cells, "slo").items():
        ttft = ", ".join(f"{k} <= {v:g}" for k, v in slo["ttft_ms"].items())
        tpot = ", ".join(f"{k} <= {v:g}" for k, v in slo["tpot_ms"].items())
        body.append([name, ttft, tpot, f"{slo['attainment']:g}"])
    return md_table(["SLO", "TTFT [ms]", "TPOT [ms]", "attainment (fraction of requests meeting both)"], body)


def workload_lines(cells: Sequence[Cell]) -> list[str]:
    from layoutopt.workloads.workload import Workload

    body = []
    for name, data in _first_by_name(cells, "workload").items():
        summary = Workload.model_validate(data).summary()
        source = f"trace {summary['trace_source']}" if summary["trace_source"] else summary["input_tokens_kind"]
        body.append([name, f"{summary['mean_input_tokens']:g} / {summary['p90_input_tokens']:g}",
                     f"{summary['mean_output_tokens']:g} / {summary['p90_output_tokens']:g}",
                     f"{summary['prefix_cache_hit_fraction']:g}", source])
    return md_table(["workload", "input tokens mean / p90", "output tokens mean / p90", "prefix-cache hit fraction",
                     "length distribution"], body)


def answer_lines(summary: SweepSummary) -> list[str]:
    """One line per scenario: which option to buy over which rates."""
    lines = []
    scenarios: dict[tuple, list] = {}
    for item in summary.cheapest_ranges:
        scenarios.setdefault((item.model, item.workload, item.slo), []).append(item)
    for (model, workload, slo), ranges in scenarios.items():
        parts = []
        for item in ranges:
            span = (f"at {rate_text(item.from_rate_rps)} req/s" if item.from_rate_rps == item.to_rate_rps
                    else f"{rate_text(item.from_rate_rps)} to {rate_text(item.to_rate_rps)} req/s")
            if item.budget is not None:
                parts.append(f"{item.budget} {span}")
            elif item.contenders:
                parts.append(f"{' or '.join(item.contenders)} {span} (not settled)")
            else:
                parts.append(f"nothing {span}")
        lines.append(f"- **{model}, {workload}, {slo}**: cheapest is " + "; ".join(parts) + ".")
    for crossover in summary.crossovers:
        lines.append(f"- Crossover: {crossover_text(crossover)}")
    return lines or ["- No min-cost cells with rates: see the requests-per-dollar tables below."]


def plan_plots(summary: SweepSummary, rows: Sequence[CellResult], out_dir: Path) -> list[tuple[str, str]]:
    """(caption, PNG path) of the frontier and prefill:decode plots of each scenario's cheapest
    fleet at its highest swept rate (the plan a buyer would deploy), for the first scenarios."""
    from layoutopt.plan import load_plan
    from layoutopt.report.markdown import base_rate_rps
    from layoutopt.report.plots import plan_figures
    from layoutopt.sweep.plots import _slug, save
    from layoutopt.sweep.results import PLANS_DIR

    last: dict[tuple, object] = {}
    for fleet in summary.cheapest_fleets:
        if fleet.best is not None:
            last[(fleet.model, fleet.workload, fleet.slo)] = fleet
    by_cell = {(r.model, r.workload, r.slo, r.rate_rps, r.budget): r for r in rows if r.objective == "min-cost"}
    found = []
    for key, fleet in list(last.items())[:MAX_PLAN_PLOTS]:
        row = by_cell.get((*key, fleet.rate_rps, fleet.best.budget))
        path = out_dir / PLANS_DIR / f"{row.cell_id}.json" if row else None
        if path is None or not path.is_file():
            continue
        plan = load_plan(path)
        figures = plan_figures(plan, None, base_rate_rps(plan))
        what = f"{', '.join(key)}: {fleet.best.budget} at {rate_text(fleet.rate_rps)} req/s"
        for name, caption in (("frontier", "layouts evaluated, frontier and chosen plan"),
                              ("prefill_decode_split", "prefill:decode split against the seeds' formula")):
            if name in figures:
                written = save(figures[name], out_dir, f"plan-{name}-{_slug(*key)}")
                found.append((f"{what}: {caption}", next(w for w in written if w.endswith(".png"))))
    return found


def render_report(summary: SweepSummary, cells: Sequence[Cell], rows: Sequence[CellResult],
                  plan_pngs: Sequence[tuple[str, str]] = ()) -> str:
    """The whole page as Markdown; image links are relative to the sweep's output folder."""
    solver = cells[0].solver if cells else None
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.status_counts.items()))
    models = ", ".join(dict.fromkeys(cell.model for cell in cells))
    options = ", ".join(dict.fromkeys(cell.budget for cell in cells))
    rates = ", ".join(rate_text(r) for r in sorted({c.rate_rps for c in cells if c.rate_rps is not None}))
    lines = [f"# What to buy: sweep {summary.name}", "",
             f"Models: {models}. Fleet options: {options} (each an upper limit; the fleets found use as few GPUs "
             f"as the rate needs). Demanded rates: {rates or 'none (highest rate each option serves)'} req/s. "
             f"{summary.num_cells} solves: {counts}.", "",
             "## The answer", "", *answer_lines(summary), "",
             "## Cheapest fleet per rate", "", *cheapest_fleet_lines(summary), ""]
    if summary.cheapest_ranges:
        lines += ["## Cheapest option by rate range", "", *range_lines(summary), ""]
    lines += ["## Requests per dollar by option and rate", "",
              "Each cell: requests per dollar at the demanded rate / at the fleet's capacity; best in bold.", "",
              *comparison_lines(summary)]
    pngs = [p for p in summary.plots if p.endswith(".png")]
    if pngs:
        lines += ["## Plots", ""]
        for plot in pngs:
            svg = plot.removesuffix(".png") + ".svg"
            lines += [f"![{Path(plot).stem}]({plot})", "", f"Vector version: [{Path(svg).name}]({svg})", ""]
    if plan_pngs:
        lines += ["## The recommended plans", "",
                  "For each scenario, the cheapest fleet at the highest rate swept: throughput per GPU against "
                  "speed per user over every layout the solver evaluated (colour: USD per million output tokens), "
                  "and, for disaggregated plans, the prefill:decode split.", ""]
        for caption, png in plan_pngs:
            lines += [f"**{caption}**", "", f"![{Path(png).stem}]({png})", ""]
    lines += ["## Assumptions", "", "### GPU prices", "", *price_lines(cells), "",
              "### SLOs", "", *slo_lines(cells), "", "### Workloads", "", *workload_lines(cells), ""]
    if solver is not None:
        lines += ["### Solver and performance model", "",
                  f"Objective per cell: {', '.join(dict.fromkeys(c.objective for c in cells))}; engine "
                  f"{solver.engine}; precision {solver.precision}; mode {solver.mode}; each instance run at most "
                  f"{solver.headroom:.0%} utilized; {solver.time_limit_s:g} s solver limit per cell "
                  f"({sum(r.status == 'timeout' for r in rows)} cells reached it). Latencies and capacities come "
                  "from layoutopt's analytic performance model (see the README for its measured accuracy); "
                  "a plan's capacity is the highest Poisson arrival rate at which the SLO holds.", ""]
    lines += ["### Definitions", "",
              "- cost: the fleet's GPUs x the typical price, in USD per hour;",
              "- requests per dollar at demand: demanded rate x 3600 / cost; at capacity: the fleet's capacity "
              "x 3600 / cost (only if traffic grows to fill the fleet);",
              "- rate ranges end at swept rates and at the capacities of the fleets found, never at an "
              "interpolated point; \"not settled\" means the swept rates cannot tell which option is cheaper "
              "there."]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_report(summary: SweepSummary, cells: Sequence[Cell], rows: Sequence[CellResult],
                 out_dir: str | Path) -> Path:
    out = Path(out_dir)
    path = out / REPORT_NAME
    pngs = plan_plots(summary, rows, out) if summary.plots else []
    write_atomically(path, render_report(summary, cells, rows, pngs))
    return path
