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


def _with_checkpoints(model, checkpoints):
    """The model's spec with the user's ``--checkpoint PRECISION=ID`` ids (the search may use those precisions)."""
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.model_catalog.checkpoints import with_user_checkpoints
    from layoutopt.optimizer.solve import DEFAULT_MODEL

    return with_user_checkpoints(get_model(model or DEFAULT_MODEL), checkpoints)


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
@click.option("--checkpoint", "checkpoints", multiple=True, metavar="PRECISION=ORG/NAME",
              help="a checkpoint of the model at one weight precision besides the catalog's (e.g. "
                   "fp4=nvidia/Qwen3-32B-FP4): the search may then propose that precision; repeatable")
@click.option("--precision", type=click.Choice(["auto", "bf16", "fp8", "fp4"]), default="auto", show_default=True,
              help="weight precision; auto lets the solver choose weights and KV cache")
@click.option("--headroom", type=FiniteFloatRange(), default=0.7, show_default=True, help="target utilization of each instance")
@click.option("--top-k", type=click.IntRange(0, MAX_TOP_K), default=0, show_default=True, help="also list this many next-best distinct plans")
@click.option("--time-limit", "time_limit_s", type=float, default=10.0, show_default=True,
              help="seconds for the solvers (CP-SAT deterministic time: the same plan on any machine); candidate "
                   "evaluation comes on top")
@click.option("--tolerance", "--gap-tolerance", "tolerance_fraction", type=FiniteFloatRange(0.0, 0.5), default=0.02,
              show_default=True,
              help="status optimal = the plan's objective is proven within this fraction of the best; with "
                   "goodput-per-dollar also the share of the best ratio given up for more goodput")
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
@click.option("--fleet", "fleet_path", type=click.Path(dir_okay=False), default=None,
              help="fleet YAML: several models (workload, SLO, rate each) planned together on one budget")
@click.option("--scenarios", "scenarios_path", type=click.Path(dir_okay=False), default=None,
              help="scenarios YAML (name, weight, rate_rps, workload, optional slo): one plan for all of them")
@click.option("--robust", type=click.Choice(["all", "expected", "worst"]), default="all", show_default=True,
              help="with --scenarios: hold every scenario's rate at least cost, or maximize weighted (expected) or "
                   "worst-case goodput per dollar")
@click.option("--route-by-length", is_flag=True,
              help="also try routing short and long prompts to pools of their own (thresholds at the p50, p75 and "
                   "p90 prompt length) and keep the cheapest; needs --objective min-cost and --rate; evaluates the "
                   "candidates once per length class, so it takes longer")
def command(model, budget, cluster_path, spread_racks, slo_path, workload_path, isl, osl, rate_rps, objective, mode, engine,
            profile_path, precision, headroom, top_k, time_limit_s, tolerance_fraction, gpus_path, prices_path, verify,
            verify_requests, emit_dir, output_format,
            output_path, fleet_path, scenarios_path, robust, route_by_length, checkpoints) -> None:
    """Find the layout that maximizes goodput per dollar (or another --objective) under the SLO."""
    from layoutopt import api

    if checkpoints and (fleet_path is not None or scenarios_path is not None or route_by_length):
        raise InputError("--checkpoint", checkpoints[0], "--checkpoint for a single-model solve, not with --fleet, "
                         "--scenarios or --route-by-length", "plan that model alone with its --checkpoint")

    if fleet_path is not None:
        _solve_fleet(fleet_path, budget, engine, precision, headroom, time_limit_s, tolerance_fraction, gpus_path,
                     prices_path, output_format, output_path)
        return
    if route_by_length:
        given = {"--fleet": fleet_path, "--scenarios": scenarios_path, "--cluster": cluster_path,
                 "--profile": profile_path, "--top-k": top_k or None}
        for flag, value in given.items():
            if value is not None:
                raise InputError("--route-by-length", f"with {flag}", f"--route-by-length or {flag}, not both")
        if objective != "min-cost":
            raise InputError("--objective", objective, "min-cost with --route-by-length (it plans for a --rate)")
        _solve_length_routed(model, budget, slo_path, workload_path, isl, osl, rate_rps, mode, engine, precision,
                             headroom, time_limit_s, tolerance_fraction, gpus_path, prices_path, emit_dir,
                             output_format, output_path, verify_requests if verify else None)
        return
    if scenarios_path is not None:
        _solve_robust(model, budget, scenarios_path, robust, slo_path, engine, precision, headroom, time_limit_s,
                      tolerance_fraction, gpus_path, prices_path, output_format, output_path)
        return

    if budget is None and cluster_path is None:
        raise InputError("--budget", None, "a budget such as 32xH100 or '$400/h', or --cluster cluster.yaml")
    workload = _checked_workload(model, workload_path, isl, osl)
    if verify and profile_path:
        # The simulator builds its step tables from the built-in profile of plan.engine.
        raise InputError("--verify", "with --profile", "--verify or --profile, not both: the simulator replays "
                         "with the built-in constants, so it would not check the profile's plan")
    if checkpoints:
        model = _with_checkpoints(model, checkpoints)
    plan = api.solve(model, budget, slo_path, workload, isl=isl, osl=osl, rate_rps=rate_rps,
                     objective=objective, mode=mode, engine=engine, precision=precision, headroom=headroom,
                     top_k=top_k, time_limit_s=time_limit_s, gpus_path=gpus_path, prices_path=prices_path,
                     cluster=cluster_path, spread_racks=spread_racks, profile=profile_path,
                     tolerance_fraction=tolerance_fraction)
    if verify and plan.pools:
        from layoutopt.simulator.verify import verify_plan

        plan = verify_plan(plan, num_requests=verify_requests)
    text = json_text(plan)
    if output_path:
        write_atomically(output_path, text + "\n")
    written = api.emit(plan, emit_dir, engine=engine, checkpoints=checkpoints) if emit_dir and plan.pools else []
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



def _write_json(result, output_format: str, output_path) -> bool:
    """Write ``result``'s JSON to ``output_path`` (if given) and print it for --format json; True then."""
    text = json_text(result)
    if output_path:
        write_atomically(output_path, text + "\n")
    if output_format == "json":
        click.echo(text)
        return True
    return False


def _pool_text(pool) -> str:
    """'2 x prefill H100-SXM tp2 pp2' for the fleet and scenario tables."""
    text = f"{pool.instances} x {pool.role} {pool.gpu} tp{pool.tp_size}"
    return text + (f" pp{pool.pp_size}" if pool.pp_size > 1 else "")

def _solve_fleet(fleet_path, budget, engine, precision, headroom, time_limit_s, tolerance_fraction, gpus_path,
                 prices_path, output_format, output_path) -> None:
    """``solve --fleet``: one plan per model from one CP-SAT model, and the naive split's cost."""
    from layoutopt import api

    fleet = api.solve_fleet(fleet_path, budget, engine=engine, precision=precision, headroom=headroom,
                            time_limit_s=time_limit_s, tolerance_fraction=tolerance_fraction, gpus_path=gpus_path,
                            prices_path=prices_path)
    if not _write_json(fleet, output_format, output_path):
        click.echo(f"fleet of {len(fleet.plans) or len(fleet.split)} models on {fleet.budget} — objective "
                   f"{fleet.objective}, status {fleet.status}")
        for plan in fleet.plans:
            pools = ", ".join(_pool_text(p) for p in plan.pools)
            click.echo(f"  {plan.model}: {pools}; ${plan.totals.cost_usd_per_hour:,.2f}/h, "
                       f"{plan.totals.goodput_rps:.2f} req/s")
        if fleet.totals is not None:
            by_type = ", ".join(f"{n}x{g}" for g, n in fleet.totals.gpus_by_type.items())
            click.echo(f"total: {fleet.totals.gpus} GPUs ({by_type}), ${fleet.totals.cost_usd_per_hour:,.2f}/h")
        for member in fleet.split:
            shown = f"${member.cost_usd_per_hour:,.2f}/h" if member.cost_usd_per_hour is not None else member.status
            click.echo(f"  alone on {member.budget}: {member.model} {shown}")
        click.echo(f"solver: {fleet.solver.status}, {fleet.solver.proof}")
        for note in fleet.notes:
            click.echo(f"note: {note}")
    if not fleet.plans:
        raise InfeasibleError(f"status {fleet.status}: no fleet plan meets every model's rate and SLO", [])


def _solve_robust(model, budget, scenarios_path, robust, slo_path, engine, precision, headroom, time_limit_s,
                  tolerance_fraction, gpus_path, prices_path, output_format, output_path) -> None:
    """``solve --scenarios``: one set of instances for every traffic scenario."""
    from layoutopt import api
    from layoutopt.optimizer.solve import DEFAULT_MODEL, DEFAULT_SLO

    if budget is None:
        raise InputError("--budget", None, "a budget such as 32xH100 or '$400/h' (with --scenarios)")
    slo = api.load_slo(slo_path) if slo_path else DEFAULT_SLO
    plan = api.solve_robust(model or DEFAULT_MODEL, budget, scenarios_path, slo, robust, engine=engine,
                            precision=precision, headroom=headroom, time_limit_s=time_limit_s,
                            tolerance_fraction=tolerance_fraction, gpus_path=gpus_path, prices_path=prices_path)
    if not _write_json(plan, output_format, output_path):
        click.echo(f"{plan.model} on {plan.budget}, robust {plan.robust} over {len(plan.scenarios)} scenarios — "
                   f"status {plan.status}")
        for pool in plan.pools:
            click.echo(f"  {_pool_text(pool)} {pool.precision}")
        if plan.cost_usd_per_hour is not None:
            click.echo(f"cost: ${plan.cost_usd_per_hour:,.2f}/h")
        for s in plan.scenarios:
            alone = f"${s.alone_cost_usd_per_hour:,.2f}/h" if s.alone_cost_usd_per_hour is not None else s.alone_status
            click.echo(f"  {s.name}: serves {s.served_rps:.2f} of {s.rate_rps:g} req/s"
                       f"{' (binds)' if s.binds else ''}; alone {alone}")
        click.echo(f"solver: {plan.status}, {plan.proof}")
        for note in plan.notes:
            click.echo(f"note: {note}")
    if not plan.pools:
        raise InfeasibleError(f"status {plan.status}: no single plan serves every scenario", [])


def _solve_length_routed(model, budget, slo_path, workload_path, isl, osl, rate_rps, mode, engine, precision, headroom,
                         time_limit_s, tolerance_fraction, gpus_path, prices_path, emit_dir, output_format,
                         output_path, verify_requests=None) -> None:
    """``solve --route-by-length``: the cheapest plan with or without a prompt-length split.

    ``verify_requests``: replay each class's plan in the simulator under its own class workload.
    """
    from layoutopt import api
    from layoutopt.optimizer.solve import DEFAULT_MODEL, DEFAULT_SLO
    from layoutopt.workloads.presets import default_workload

    if budget is None:
        raise InputError("--budget", None, "a budget such as 32xH100 or '$400/h' (with --route-by-length)")
    if isl is not None or osl is not None:
        raise InputError("--route-by-length", "with --isl/--osl", "a --workload with a spread of prompt lengths: "
                         "fixed lengths cannot be split")
    slo = api.load_slo(slo_path) if slo_path else DEFAULT_SLO
    workload = api.load_workload(workload_path) if workload_path else default_workload()
    routed = api.solve_length_routed(model or DEFAULT_MODEL, budget, slo, workload, rate_rps, mode=mode, engine=engine,
                                     precision=precision, headroom=headroom, time_limit_s=time_limit_s,
                                     tolerance_fraction=tolerance_fraction, gpus_path=gpus_path,
                                     prices_path=prices_path)
    if verify_requests is not None and routed.classes:
        from layoutopt.simulator.verify import verify_plan

        classes = [c.model_copy(update={"plan": verify_plan(c.plan, num_requests=verify_requests)})
                   for c in routed.classes]
        routed = routed.model_copy(update={"classes": classes})
    written = api.emit_length_routed(routed, emit_dir, engine=engine) if emit_dir and routed.classes else []
    if not _write_json(routed, output_format, output_path):
        split = (f"split at {routed.threshold_tokens:,} prompt tokens" if routed.threshold_tokens is not None
                 else "no split")
        click.echo(f"{routed.model} on {routed.budget} at {routed.rate_rps:g} req/s, route by length — {split}, "
                   f"status {routed.status}")
        for c in routed.classes:
            pools = ", ".join(_pool_text(p) for p in c.plan.pools)
            targets = ", ".join([f"TTFT {k} {v:g} ms" for k, v in c.slo.ttft_ms.items()]
                                + [f"TPOT {k} {v:g} ms" for k, v in c.slo.tpot_ms.items()])
            click.echo(f"  {c.name} (prompts {c.min_input_tokens:,}-{c.max_input_tokens:,} tokens, "
                       f"{c.rate_share_fraction:.0%} of requests, {c.rate_rps:.2f} req/s; {targets}): {pools}; "
                       f"${c.plan.totals.cost_usd_per_hour:,.2f}/h")
            v = c.plan.verification
            if v is not None:
                click.echo(f"    simulated: SLO attainment {v.simulated_slo_attainment:.3f} at {v.rate_rps:.2f} req/s "
                           f"({'meets' if v.meets_slo else 'misses'} the SLO)")
        verified = [c.plan.verification for c in routed.classes]
        if len(verified) > 1 and all(v is not None for v in verified):
            whole = sum(c.rate_share_fraction * v.simulated_slo_attainment for c, v in zip(routed.classes, verified))
            click.echo(f"  simulated together: SLO attainment {whole:.3f} (the SLO asks {routed.slo.attainment:g})")
        if routed.cost_usd_per_hour is not None:
            click.echo(f"cost: ${routed.cost_usd_per_hour:,.2f}/h")
        for o in routed.options:
            where = "no split" if o.threshold_tokens is None else (
                f"split at {o.threshold_tokens:,}" + (f", long-class SLO shift {o.long_shift_fraction:g}"
                                                       if o.long_shift_fraction else ""))
            shown = f"${o.cost_usd_per_hour:,.2f}/h" if o.cost_usd_per_hour is not None else "no plan"
            click.echo(f"  {where}: {shown} ({o.status})")
        click.echo(f"solver: {routed.status}, {routed.solver.proof}")
        for note in routed.notes:
            click.echo(f"note: {note}")
        if written:
            click.echo(f"wrote {len(written)} files to {emit_dir}")
    if not routed.classes:
        raise InfeasibleError(f"status {routed.status}: no plan serves the rate within the SLO, split or not", [])
