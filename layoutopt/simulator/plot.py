"""Histograms of simulated TTFT and TPOT, with the SLO targets marked (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from layoutopt.simulator.result import SimulationResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_BINS = 60


def latency_histogram_figure(result: SimulationResult) -> "Figure":
    """Two panels: TTFT and TPOT distributions of the measured requests (ms), targets dashed."""
    from matplotlib.figure import Figure

    ttft_ms, tpot_ms = result.latency_samples_ms()
    fig = Figure(figsize=(9.6, 3.8), layout="constrained")
    panels = fig.subplots(1, 2)
    for ax, values_ms, target_ms, label in (
        (panels[0], ttft_ms, result.ttft_target_ms, "TTFT (ms)"),
        (panels[1], tpot_ms, result.tpot_target_ms, "TPOT (ms)"),
    ):
        finite = values_ms[np.isfinite(values_ms)]
        if len(finite):
            ax.hist(finite, bins=_BINS, color="#4477aa")
        ax.axvline(target_ms, color="#cc3311", linestyle="--", label=f"target {target_ms:g} ms")
        ax.set_xlabel(label)
        ax.set_ylabel("requests")
        ax.legend(loc="upper right", frameon=False)
    fig.suptitle(f"{result.model} at {result.rate_rps:.3g} req/s: SLO attainment {result.slo_attainment:.1%} "
                 f"({result.num_measured} requests)")
    return fig


def save_latency_histogram(result: SimulationResult, path: str | Path) -> Path:
    """Write the histogram figure to ``path`` (format from the suffix: png, svg, pdf)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    latency_histogram_figure(result).savefig(path, dpi=120)
    return path
