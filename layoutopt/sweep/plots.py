"""Plots of a sweep summary, as SVG and PNG (matplotlib's Agg backend; no display needed).

- ``cost-<scenario>``: fleet cost [USD/h] against request rate [req/s] as a step function per
  fleet option (the cheapest fleet found for each rate; whole GPUs), the GPUs of each step, the
  rates the sweep does not settle shaded, and where each option's budget runs out of capacity;
- ``requests-per-usd-<scenario>``: requests per dollar [req/USD] per fleet option at each rate
  (bars: at the demanded rate; ticks: if the fleet ran at its capacity).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

from layoutopt.sweep.steps import OptionSteps, breakpoints
from layoutopt.sweep.summary import OptionComparison, SweepSummary

PLOTS_DIR = "plots"
PLOT_FORMATS = ("svg", "png")
MAX_PLOTS_PER_KIND = 24
_DPI = 120
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def _slug(*parts: str) -> str:
    text = "-".join(parts)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]
    return f"{slug}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def new_figure(width_in: float = 10.0, height_in: float = 5.0):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), layout="constrained")
    return figure, figure.add_subplot()


def save(figure, out_dir: Path, stem: str) -> list[str]:
    """``stem.svg`` and ``stem.png`` under ``out_dir/plots``, reproducibly; paths relative to ``out_dir``."""
    import matplotlib

    written = []
    for fmt in PLOT_FORMATS:
        relative = f"{PLOTS_DIR}/{stem}.{fmt}"
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        with matplotlib.rc_context({"svg.hashsalt": "layoutopt", "svg.fonttype": "none"}):
            figure.savefig(out_dir / relative, format=fmt, dpi=_DPI, metadata=metadata)
        written.append(relative)
    return written


def option_label(option: OptionSteps) -> str:
    """The option and the fleets actually found, e.g. '32xH100 (fleets of 1-10 GPUs)'."""
    sizes = sorted({p.gpus for p in option.solved if p.gpus})
    if not sizes:
        return f"{option.budget} (no fleet found)"
    found = f"{sizes[0]} GPUs" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]} GPUs"
    return f"{option.budget} (fleets of {found})"


def cost_figure(title: str, options: list[OptionSteps]):
    """Cheapest-fleet cost against rate, a step function per option, with capacity limits marked."""
    import numpy as np

    figure, axes = new_figure()
    points = breakpoints(options)
    low, high = points[0], points[-1]
    # dense enough that each step is drawn where it happens (steps sit at breakpoints)
    grid = np.unique(np.concatenate([np.linspace(low, high, 400), points]))
    for index, option in enumerate(options):
        colour = COLOURS[index % len(COLOURS)]
        upper = np.array([option.upper_usd_per_hour(x) for x in grid])
        lower = np.array([option.lower_usd_per_hour(x) for x in grid])
        known = np.isfinite(upper)
        if not known.any():
            continue
        exact = known & np.isclose(lower, upper)
        axes.step(grid, np.where(exact, upper, np.nan), where="post", color=colour, linewidth=2,
                  label=option_label(option))
        unsettled = known & ~exact & np.isfinite(lower)
        if unsettled.any():
            axes.fill_between(grid, np.where(unsettled, lower, np.nan), np.where(unsettled, upper, np.nan),
                              step="post", color=colour, alpha=0.08, linewidth=0)
        for point in option.solved:  # the fleet found at each swept rate, with its size
            axes.plot([point.rate_rps], [point.cost_usd_per_hour], "o", color=colour, markersize=4)
        limit = option.capacity_limit_rps
        if option.first_infeasible_rps is not None and limit is not None and limit < high:
            cost = option.upper_usd_per_hour(limit)
            axes.plot([limit], [cost], marker="X", color=colour, markersize=10, markeredgecolor="black",
                      linestyle="none")
            right_half = (np.log(limit / low) if high / low >= 20 else limit - low) > 0.6 * (
                np.log(high / low) if high / low >= 20 else high - low)
            axes.annotate(f"{option.budget}: capacity ends\nat {limit:.3g} req/s", (limit, cost),
                          textcoords="offset points", xytext=(-8 if right_half else 8, -6), fontsize=7, color=colour,
                          va="top", ha="right" if right_half else "left")
    for index, option in enumerate(options):  # GPUs of each step, where the step starts
        shown: set[int] = set()
        for point in option.solved:
            if point.gpus and point.gpus not in shown:
                shown.add(point.gpus)
                axes.annotate(f"{point.gpus}", (point.rate_rps, point.cost_usd_per_hour), textcoords="offset points",
                              xytext=(-4, 4 + 8 * index), fontsize=7, ha="right", color=COLOURS[index % len(COLOURS)])
    axes.plot([], [], "X", color="grey", markeredgecolor="black", linestyle="none",
              label="capacity limit of the option's budget")
    axes.fill_between([], [], [], color="grey", alpha=0.2, label="cost between these bounds: not settled\n"
                      "by the swept rates")
    axes.set_xlabel("request rate [req/s]" + (" (log scale)" if high / low >= 20 else ""))
    axes.set_ylabel("cheapest fleet cost [USD/h]")
    if high / low >= 20:
        axes.set_xscale("log")
        axes.set_xlim(low / 1.15, high * 1.15)
    else:
        axes.set_xlim(low - 0.03 * (high - low or 1), high + 0.03 * (high - low or 1))
    axes.set_ylim(bottom=0)
    axes.set_title(f"Cheapest fleet per option (numbers: GPUs in the fleet)\n{title}", fontsize=9)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return figure


def requests_figure(title: str, options: list[OptionComparison]):
    """Requests per dollar per option and rate: bars at the demanded rate, ticks at capacity."""
    import numpy as np

    figure, axes = new_figure()
    rates = sorted({p.rate_rps for o in options for p in o.points}, key=lambda r: (r is None, r or 0.0))
    width = 0.8 / max(1, len(options))
    positions = np.arange(len(rates))
    for index, option in enumerate(options):
        colour = COLOURS[index % len(COLOURS)]
        by_rate = {p.rate_rps: p for p in option.points}
        xs = positions + (index - (len(options) - 1) / 2) * width
        demand = [by_rate[r].requests_per_usd_at_demand if r in by_rate else None for r in rates]
        capacity = [by_rate[r].requests_per_usd_at_capacity if r in by_rate else np.nan for r in rates]
        bars = [np.nan if d is None else d for d in demand]
        if not all(np.isnan(bars)):
            axes.bar(xs, bars, width=width * 0.9, color=colour, label=option.budget)
        else:
            axes.bar([], [], color=colour, label=option.budget)
        axes.plot(xs, capacity, linestyle="none", marker="_", markersize=14, markeredgewidth=2, color=colour)
        for x, r in zip(xs, rates):
            if r not in by_rate:
                axes.annotate("no fleet holds the SLO", (x, 0), xycoords=("data", "axes fraction"),
                              textcoords="offset points", xytext=(0, 4), fontsize=7, ha="center", va="bottom",
                              rotation=90, color=colour)
    axes.plot([], [], linestyle="none", marker="_", markersize=14, markeredgewidth=2, color="black",
              label="tick: if the fleet ran at its capacity")
    axes.set_xticks(positions, [("highest it serves" if r is None else f"{r:g}") for r in rates])
    axes.set_xlim(-0.5, len(rates) - 0.5)
    axes.set_xlabel("demanded request rate [req/s]")
    axes.set_ylabel("requests per dollar [req/USD]")
    values = [v for o in options for p in o.points
              for v in (p.requests_per_usd_at_demand, p.requests_per_usd_at_capacity) if v]
    if values and max(values) / min(values) > 30:
        axes.set_yscale("log")
    axes.set_title(f"Requests per dollar per option: {title}", fontsize=10)
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                title="bars: at the demanded rate", title_fontsize=8)
    return figure


def draw_plots(summary: SweepSummary, steps: dict[tuple[str, str, str], list[OptionSteps]],
               out_dir: str | Path) -> list[str]:
    """Draw the plots of ``summary`` under ``out_dir/plots``; returns their paths relative to ``out_dir``."""
    out = Path(out_dir)
    (out / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for key, options in list(steps.items())[:MAX_PLOTS_PER_KIND]:
        if not any(o.solved for o in options):
            continue
        written += save(cost_figure(", ".join(key), options), out, f"cost-{_slug(*key)}")
    scenarios: dict[tuple[str, str, str, str], list[OptionComparison]] = defaultdict(list)
    for comparison in summary.comparisons:
        scenarios[(comparison.model, comparison.workload, comparison.slo, comparison.objective)].append(comparison)
    for key, options in list(scenarios.items())[:MAX_PLOTS_PER_KIND]:
        if not any(o.points for o in options):
            continue
        written += save(requests_figure(", ".join(key), options), out, f"requests-per-usd-{_slug(*key)}")
    return written
