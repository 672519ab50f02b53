"""``layoutopt solve``: the best serving layout for a model, a budget (or a cluster file) and SLOs."""

from __future__ import annotations

import click

from layoutopt.bounds import MAX_SIM_REQUESTS, check_context_length
from layoutopt.cli.common import (
    RATE_RPS,
    TOKENS,
    FiniteFloatRange,
    console,
    format_option,
    json_text,
    write_atomically,
)
from layoutopt.errors import InfeasibleError, InputError

# Next-best plans --top-k may ask for: each is one more solver run.
MAX_TOP_K = 100


def _checked_workload(model, workload_path, isl, osl):
    """The workload file loaded (or None), after checking its lengths (or --isl/--osl) fit the model's context."""
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.optimizer.solve import DEFAULT_MODEL

    if workload_path is None and isl is None:
        return None
    spec = get_model(model or DEFAULT_MODEL)
    if workload_path is None:
        check_context_length("--isl", isl, spec.max_context_tokens, spec.name, output_tokens=osl or 0)
        return None
    from layoutopt.workloads.loaders import load_workload
    from layoutopt.workloads.workload import check_fits_context

    if isl is not None:
        return workload_path  # api.solve reports giving both
    workload = load_workload(workload_path)
    check_fits_context(workload, spec.max_context_tokens, spec.name, "--workload")
    return workload


@click.command("solve")
@click.option("--model", default=None, help="catalog name or path to a HuggingFace config.json [default: qwen3-32b]")
@click.option("--budget", default=None,
              help="e.g. 32xH100, 16xH100+16xH200, '$400/h'; with --cluster, a further limit (optional)")
@click.option("--cluster", "cluster_path", type=click.Path(dir_okay=False), default=None,
              help="cluster.yaml (examples/clusters/): plan for its free GPUs, NVLink domains and racks")
@click.option("--spread-racks", is_flag=True, help="spread each pool's instances over the cluster's racks")
@click.option("--slo", "slo_path", type=click.Path(dir_okay=False), default=None,
              help="slo.yaml [default: TTFT p90 1000 ms, TPOT p90 30 ms, attainment 0.9]")
@click.option("--workload", "workload_path", type=click.Path(dir_okay=False), default=None,
              help="workload.yaml [default: the chat preset]")
@click.option("--isl", type=TOKENS, default=None, help="fixed input length in tokens (with --osl, instead of --workload)")
@click.option("--osl", type=TOKENS, default=None, help="fixed output length in tokens")
@click.option("--rate", "rate_rps", type=RATE_RPS, default=None, help="request rate the plan must serve (req/s)")
@click.option("--objective", type=click.Choice(["goodput-per-dollar", "max-goodput", "min-cost"]),
              default="goodput-per-dollar", show_default=True)
@click.option("--mode", type=click.Choice(["auto", "colocated", "disaggregated"]), default="auto", show_default=True)
@click.option("--engine", default="vllm", show_default=True,
              help="vllm (0.33.0), vllm==0.13.0, sglang (0.5.23), sglang==0.5.3 or trtllm; the version selects the "
                   "engine rules the plan obeys (layoutopt catalog engines)")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              help="profile YAML from layoutopt calibrate, instead of the built-in constants of its GPU generation")
@click.option("--precision", type=click.Choice(["auto", "bf16", "fp8", "fp4"]), default="auto", show_default=True,
              help="weight precision; auto lets the solver choose weights and KV cache")
@click.option("--headroom", type=FiniteFloatRange(), default=0.7, show_default=True, help="target utilization of each instance")
@click.option("--top-k", type=click.IntRange(0, MAX_TOP_K), default=0, show_default=True, help="also list this many next-best distinct plans")
@click.option("--time-limit", "time_limit_s", type=float, default=10.0, show_default=True,
              help="seconds for the solver")
@click.option("--gpus", "gpus_path", type=click.Path(dir_okay=False), default=None, help="extra GPU catalog rows")
@click.option("--prices", "prices_path", type=click.Path(dir_okay=False), default=None, help="prices file")
@click.option("--verify", is_flag=True, help="replay the plan in the simulator at its planned rate")
@click.option("--verify-requests", type=click.IntRange(100, MAX_SIM_REQUESTS), default=20_000, show_default=True,
              help=f"requests to simulate with --verify (at most {MAX_SIM_REQUESTS:,})")
@click.option("--emit", "emit_dir", type=click.Path(file_okay=False), default=None,
              help="write plan.json, report.md, launch scripts, Kubernetes manifests and plots to this directory")
@format_option
@click.option("--output", "output_path", type=click.Path(dir_okay=False), default=None,
              help="also write the plan as JSON to this file")
def command(model, budget, cluster_path, spread_racks, slo_path, workload_path, isl, osl, rate_rps, objective, mode, engine,
            profile_path, precision, headroom, top_k, time_limit_s, gpus_path, prices_path, verify, verify_requests, emit_dir, output_format,
            output_path) -> None:
    """Find the layout that maximizes goodput per dollar (or another --objective) under the SLO."""
    from layoutopt import api

    if budget is None and cluster_path is None:
        raise InputError("--budget", None, "a budget such as 32xH100 or '$400/h', or --cluster cluster.yaml")
    workload = _checked_workload(model, workload_path, isl, osl)
    if verify and profile_path:
        # The simulator builds its step tables from the built-in profile of plan.engine.
        raise InputError("--verify", "with --profile", "--verify or --profile, not both: the simulator replays "
                         "with the built-in constants, so it would not check the profile's plan")
    plan = api.solve(model, budget, slo_path, workload, isl=isl, osl=osl, rate_rps=rate_rps,
                     objective=objective, mode=mode, engine=engine, precision=precision, headroom=headroom,
                     top_k=top_k, time_limit_s=time_limit_s, gpus_path=gpus_path, prices_path=prices_path,
                     cluster=cluster_path, spread_racks=spread_racks, profile=profile_path)
    if verify and plan.pools:
        from layoutopt.simulator.verify import verify_plan

        plan = verify_plan(plan, num_requests=verify_requests)
    text = json_text(plan)
    if output_path:
        write_atomically(output_path, text + "\n")
    written = api.emit(plan, emit_dir, engine=engine) if emit_dir and plan.pools else []
    if output_format == "json":
        click.echo(text)
    else:
        from layoutopt.report.plan_table import render_plan, render_verification

        out = console()
        render_plan(plan, out)
        if plan.verification is not None:
            render_verification(plan.verification, out)
        if written:
            click.echo(f"wrote {len(written)} files to {emit_dir}:")
            for path in written:
                click.echo(f"  {path}")
    if not plan.pools:
        # Exit status 1 through the shared error path; the table above already lists the reasons.
        shown = [] if output_format == "table" else plan.explanation.reasons + [
            f"try: {s}" for s in plan.explanation.suggestions]
        raise InfeasibleError(f"status {plan.status}: no plan meets the constraints", shown)
