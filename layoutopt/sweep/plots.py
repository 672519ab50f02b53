"""Plots of a sweep summary (PNG, matplotlib's Agg backend; no display needed).

- ``cost-*.png``: fleet cost [USD/h] against request rate [req/s], one line per fleet option,
  from the min-cost cells, with the cheapest option at each rate and the crossovers marked;
- ``requests-per-usd-*.png``: requests per dollar [req/USD] against request rate [req/s], one
  line per fleet option, with the crossovers marked; a bar chart when the scenario has no rates.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

from layoutopt.sweep.summary import CheapestFleet, Crossover, OptionComparison, SweepSummary

PLOTS_DIR = "plots"
MAX_PLOTS_PER_KIND = 24
_DPI = 120


def _slug(*parts: str) -> str:
    text = "-".join(parts)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]
    return f"{slug}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    return figure, figure.add_subplot()


def _mark_crossovers(axes, crossovers: list[Crossover]) -> None:
    """A dashed vertical line where each crossover happens, labelled with the option that takes over."""
    for crossover in crossovers:
        rate = crossover.interpolated_rate_rps or crossover.at_rate_rps
        axes.axvline(rate, color="grey", linestyle="--", linewidth=1)
        axes.annotate(f"{crossover.to_budget}\ntakes over", (rate, axes.get_ylim()[1]), fontsize=7, ha="left",
                      va="top")


def _cost_plot(key: tuple[str, str, str], fleets: list[CheapestFleet], crossovers: list[Crossover],
               path: Path) -> None:
    figure, axes = _figure()
    by_budget: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for fleet in fleets:
        for option in fleet.options:
            by_budget[option.budget].append((fleet.rate_rps, option.cost_usd_per_hour))
    for budget, points in by_budget.items():
        points.sort()
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=budget)
    cheapest = [(f.rate_rps, f.best.cost_usd_per_hour) for f in fleets if f.best is not None]
    if cheapest:
        axes.scatter([p[0] for p in cheapest], [p[1] for p in cheapest], s=140, facecolors="none",
                     edgecolors="black", label="cheapest", zorder=3)
    _mark_crossovers(axes, crossovers)
    axes.set_xlabel("request rate [req/s]")
    axes.set_ylabel("fleet cost [USD/h]")
    axes.set_title(f"Cheapest fleet: {', '.join(key)}", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.savefig(path, dpi=_DPI)


def _requests_plot(key: tuple[str, str, str, str], options: list[OptionComparison], summary: SweepSummary,
                   path: Path) -> None:
    figure, axes = _figure()
    numeric = any(p.rate_rps is not None for o in options for p in o.points)
    if numeric:
        for option in options:
            points = [p for p in option.points if p.rate_rps is not None]
            axes.plot([p.rate_rps for p in points], [p.requests_per_usd for p in points], marker="o",
                      label=option.budget)
        _mark_crossovers(axes, [c for c in summary.crossovers if c.metric == "requests_per_usd"
                                and (c.model, c.workload, c.slo, c.objective) == key])
        axes.set_xlabel("request rate [req/s]")
        axes.legend(fontsize=8)
    else:
        values = [(o.budget, o.best_requests_per_usd or 0.0) for o in options]
        axes.bar([v[0] for v in values], [v[1] for v in values])
        axes.set_xlabel("fleet option (rate: the highest each can serve)")
        axes.tick_params(axis="x", labelsize=8, rotation=20)
    axes.set_ylabel("requests per dollar [req/USD]")
    axes.set_title(f"Goodput per dollar: {', '.join(key)}", fontsize=10)
    axes.grid(alpha=0.3)
    figure.savefig(path, dpi=_DPI)


def draw_plots(summary: SweepSummary, out_dir: str | Path) -> list[str]:
    """Draw the plots of ``summary`` under ``out_dir/plots``; returns their paths relative to ``out_dir``."""
    out = Path(out_dir)
    (out / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    fleets: dict[tuple[str, str, str], list[CheapestFleet]] = defaultdict(list)
    for fleet in summary.cheapest_fleets:
        fleets[(fleet.model, fleet.workload, fleet.slo)].append(fleet)
    for key, members in list(fleets.items())[:MAX_PLOTS_PER_KIND]:
        relative = f"{PLOTS_DIR}/cost-{_slug(*key)}.png"
        crossovers = [c for c in summary.crossovers
                      if c.metric == "cost_usd_per_hour" and (c.model, c.workload, c.slo) == key]
        _cost_plot(key, members, crossovers, out / relative)
        written.append(relative)
    scenarios: dict[tuple[str, str, str, str], list[OptionComparison]] = defaultdict(list)
    for comparison in summary.comparisons:
        scenarios[(comparison.model, comparison.workload, comparison.slo, comparison.objective)].append(comparison)
    for key, options in list(scenarios.items())[:MAX_PLOTS_PER_KIND]:
        if not any(o.points for o in options):
            continue
        relative = f"{PLOTS_DIR}/requests-per-usd-{_slug(*key)}.png"
        _requests_plot(key, options, summary, out / relative)
        written.append(relative)
    return written
