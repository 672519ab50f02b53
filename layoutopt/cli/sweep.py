"""``layoutopt sweep``: solve a grid of scenarios and write results and a procurement summary."""

from __future__ import annotations

import functools
from pathlib import Path

import click
from rich import box
from rich.table import Table

from layoutopt.cli.common import console, echo_json, format_option
from layoutopt.sweep.markdown import crossover_text


def _render(result) -> None:
    out = console()
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result.summary.status_counts.items()))
    out.print(f"Sweep {result.name}: {result.num_cells} cells ({counts}); {result.num_run} solved now, "
              f"{result.num_skipped} already done; {result.wall_time_s:,.1f} s")
    fleets = result.summary.cheapest_fleets
    if fleets:
        table = Table(title="Cheapest fleet per rate (min-cost cells; layouts in summary.md)", title_justify="left",
                      header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
        # a column that has one value for every row is said once, in the caption
        varying = [key for key in ("model", "workload", "slo") if len({getattr(f, key) for f in fleets}) > 1]
        fixed = [f"{key} {getattr(fleets[0], key)}" for key in ("model", "workload", "slo") if key not in varying]
        if fixed:
            table.caption = "; ".join(fixed)
            table.caption_justify = "left"
        for header in varying:
            table.add_column(header, justify="left")
        for header in ("req/s", "option", "GPUs", "USD/h", "req/USD at demand", "at capacity"):
            table.add_column(header, justify="left" if header in ("option", "GPUs") else "right")
        for fleet in fleets:
            best = fleet.best
            gpus = best and " + ".join(f"{n}x{gpu}" for gpu, n in
                                       (part.split(":") for part in best.gpus_by_type.split(" + ") if part))
            chosen = ([best.budget, gpus, f"{best.cost_usd_per_hour:,.2f}", f"{best.requests_per_usd_at_demand:,.0f}",
                       f"{best.requests_per_usd_at_capacity:,.0f}"] if best
                      else ["none holds the SLO", "-", "-", "-", "-"])
            table.add_row(*(getattr(fleet, key) for key in varying), f"{fleet.rate_rps:g}", *chosen)
        out.print(table)
    for crossover in result.summary.crossovers:
        out.print(f"crossover: {crossover_text(crossover)}")
    out.print(f"results: {result.csv_path}, {result.parquet_path}")
    out.print(f"summary: {result.summary_markdown_path}, {result.summary_json_path}")
    if result.report_path:
        out.print(f"report: {result.report_path}")


@click.command(name="sweep")
@click.argument("spec_path", metavar="SWEEP_YAML", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="output folder; cells already recorded there are skipped")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local processes, or tasks on a Ray cluster")
@click.option("--ray-address", "--address", "address", metavar="ADDRESS",
              help="Ray cluster to run on with --executor ray: 'auto' (this node joined a cluster with "
              "`ray start`), host:6379, or ray://head:10001 (Ray Client); default: start a local Ray")
@click.option("--workers", type=click.IntRange(min=1), help="parallel cells (default: one per CPU)")
@click.option("--retry-errors", is_flag=True, help="run again the cells recorded with status error")
@click.option("--no-plots", is_flag=True, help="skip the SVG and PNG plots of the summary")
@click.option("--report", "report", is_flag=True,
              help="also write report.md: one page with the tables, plots and assumptions (prices with dates "
              "and sources, SLOs, workloads) to forward")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              help="profile YAML from layoutopt calibrate for every cell (use a fresh --out: done cells are skipped)")
@format_option
def command(spec_path: Path, out_dir: Path, executor: str, address: str | None, workers: int | None,
            retry_errors: bool, no_plots: bool, report: bool, no_progress: bool, profile_path: str | None,
            output_format: str) -> None:
    """Solve every cell of the grid in SWEEP_YAML (models x GPU types or budgets x rates x workloads x
    SLOs x objectives) and write results.csv, results.parquet, summary.md, summary.json and plots/ to
    --out. Cells already in --out are skipped; a failed cell is recorded with its error."""
    from layoutopt.errors import InputError
    from layoutopt.sweep.run import sweep

    if address is not None and executor != "ray":
        raise InputError("--ray-address", address, "only with --executor ray")
    from layoutopt.calibrate.apply import resolve_profile, solve

    # Each cell solves with the profile (loaded once here) and reports its error bands.
    solve_fn = functools.partial(solve, profile=resolve_profile(profile_path))
    result = sweep(spec_path, out_dir, executor=executor, address=address, workers=workers, solve_fn=solve_fn,
                   progress=not no_progress, retry_errors=retry_errors,
                   plots=not no_plots, report=report)
    if output_format == "json":
        echo_json(result.summary)
    else:
        _render(result)
