"""``layoutopt check-bench PLAN.json RESULT``: the benchmark of an emitted deployment against its plan."""

from __future__ import annotations

import click

from layoutopt.cli.common import echo_json, format_option
from layoutopt.plan import load_plan

EXIT_FAILED = 1


@click.command("check-bench")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.argument("result_file", type=click.Path(dir_okay=False))
@format_option
@click.pass_context
def command(ctx: click.Context, plan_file: str, result_file: str, output_format: str) -> None:
    """Compare a benchmark result (bench/bench.sh) with PLAN_FILE's prediction, per SLO target.

    Prints predicted and measured TTFT/TPOT percentiles, SLO attainment and goodput; exits 0
    when every SLO target holds, 1 when one fails, 2 on bad input.
    """
    from layoutopt.report.bench_check import compare, load_result

    plan = load_plan(plan_file)
    comparison = compare(plan, load_result(result_file))
    if output_format == "json":
        echo_json({"passed": comparison.passed, **comparison.model_dump(mode="json")})
    else:
        def show(value):
            return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"

        click.echo(f"{'metric':<20} {'predicted':>10} {'measured':>10}  {'target':<24} result")
        for check in comparison.checks:
            verdict = {True: "pass", False: "FAIL", None: "not reported"}[check.passed]
            click.echo(f"{check.metric:<20} {show(check.predicted):>10} {show(check.measured):>10}  "
                       f"{check.target:<24} {verdict}")
        click.echo(f"{comparison.num_requests} requests, {comparison.num_failed} failed; "
                   f"{'every SLO target holds' if comparison.passed else 'the plan does not hold'}")
    ctx.exit(0 if comparison.passed else EXIT_FAILED)
