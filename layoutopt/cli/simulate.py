"""``layoutopt simulate``: replay a workload on a plan and report latencies, attainment and pool loads."""

from __future__ import annotations

from pathlib import Path

import click

from layoutopt.bounds import MAX_SIM_REQUESTS
from layoutopt.cli.common import (
    POSITIVE_FINITE,
    RATE_RPS,
    SEED,
    SIM_REQUESTS,
    console,
    echo_json,
    format_option,
    simple_table,
)
from layoutopt.errors import InputError
from layoutopt.simulator.result import SimulationResult

_PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def rendersimple_table(result: SimulationResult) -> None:
    """Latency percentiles, SLO checks, rates and pool loads as terminal tables."""
    out = console()
    verdict = "meets the SLO" if result.meets_slo else "misses the SLO"
    out.print(f"Simulated {result.model} ({result.engine}) at {result.rate_rps:,.3g} req/s (seed {result.seed}): "
              f"{verdict}")
    out.print(f"{result.num_measured:,} of {result.num_requests:,} requests measured over {result.window_s:,.1f} s "
              f"(warm-up and cool-down left out)")
    latency = simple_table("Latency (ms)", [("metric", "left"), ("p50", "right"), ("p90", "right"), ("p99", "right"),
                                      ("mean", "right"), ("target", "right")])
    latency.add_row("TTFT", *(f"{v:,.1f}" for v in (result.ttft_ms.p50, result.ttft_ms.p90, result.ttft_ms.p99,
                                                    result.mean_ttft_ms, result.ttft_target_ms)))
    latency.add_row("TPOT", *(f"{v:,.2f}" for v in (result.tpot_ms.p50, result.tpot_ms.p90, result.tpot_ms.p99,
                                                    result.mean_tpot_ms, result.tpot_target_ms)))
    out.print(latency)
    checks = simple_table("SLO", [("target", "left"), ("simulated ms", "right"), ("target ms", "right"), ("met", "left")])
    for check in result.slo_checks:
        checks.add_row(f"{check.metric} {check.percentile}", f"{check.simulated_ms:,.2f}", f"{check.target_ms:,.2f}",
                       "yes" if check.met else "no")
    checks.add_row("attainment", f"{result.slo_attainment:.3f}", f"{result.required_attainment:.3f}",
                   "yes" if result.slo_attainment >= result.required_attainment else "no")
    out.print(checks)
    out.print(f"goodput {result.goodput_rps:,.3g} req/s   throughput {result.throughput_rps:,.3g} req/s   "
              f"output {result.output_tok_per_s:,.0f} tok/s")
    pools = simple_table("Pools (queue: requests waiting, summed over instances; batch: sequences per decode step)",
                   [("pool", "left"), ("instances", "right"), ("busy", "right"), ("queue mean", "right"),
                    ("max", "right"), ("growth/s", "right"), ("batch", "right")])
    for pool in result.pools:
        pools.add_row(pool.name, str(pool.instances), f"{pool.utilization_fraction:.0%}",
                      f"{pool.mean_queue_length:,.1f}", f"{pool.max_queue_length:,}",
                      f"{pool.queue_growth_per_s:,.2f}", f"{pool.mean_decode_batch:,.1f}")
    out.print(pools)


@click.command(name="simulate")
@click.argument("plan_path", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--workload", "workload_path", type=click.Path(dir_okay=False, path_type=Path),
              help="workload YAML; default: the workload recorded in the plan")
@click.option("--slo", "slo_path", type=click.Path(dir_okay=False, path_type=Path),
              help="SLO YAML; default: the SLO recorded in the plan")
@click.option("--rate", "rate_rps", type=RATE_RPS,
              help="arrival rate in requests/s; default: the workload's rate, else the plan's goodput")
@click.option("--requests", "num_requests", type=SIM_REQUESTS,
              help=f"requests to simulate (default 10,000; at most {MAX_SIM_REQUESTS:,})")
@click.option("--duration-s", "duration_s", type=POSITIVE_FINITE,
              help="simulate arrivals for this many seconds instead of a request count")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="random seed of arrivals and lengths, 0 .. 2^64 - 1")
@click.option("--histogram", "histogram_path", type=click.Path(dir_okay=False, path_type=Path),
              help="write a TTFT/TPOT histogram (.png, .svg or .pdf)")
@format_option
def command(plan_path: Path, workload_path: Path | None, slo_path: Path | None, rate_rps: float | None,
            num_requests: int | None, duration_s: float | None, seed: int, histogram_path: Path | None,
            output_format: str) -> None:
    """Replay a workload on PLAN (a plan JSON) and report TTFT/TPOT percentiles, SLO attainment,
    goodput and the load on each pool."""
    from layoutopt.simulator.run import simulate
    from layoutopt.workloads.loaders import load_slo, load_workload

    if num_requests is not None and duration_s is not None:
        raise InputError("--requests", num_requests, "give --requests or --duration-s, not both")
    if histogram_path is not None and histogram_path.suffix.lower() not in _PLOT_SUFFIXES:
        raise InputError("--histogram", str(histogram_path), f"a file ending in {', '.join(_PLOT_SUFFIXES)}")
    workload = load_workload(workload_path) if workload_path else None
    slo = load_slo(slo_path) if slo_path else None
    result = simulate(plan_path, workload, rate_rps=rate_rps, num_requests=num_requests, duration_s=duration_s,
                      seed=seed, slo=slo)
    if histogram_path is not None:
        from layoutopt.simulator.plot import save_latency_histogram

        save_latency_histogram(result, histogram_path)
    if output_format == "json":
        echo_json(result)
    else:
        rendersimple_table(result)
        for violation in result.rule_violations:
            click.echo(f"engine rule broken: {violation}")
        if histogram_path is not None:
            click.echo(f"histogram written to {histogram_path}")
