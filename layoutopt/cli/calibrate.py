"""``layoutopt calibrate``: fit an engine x GPU-generation profile to your own benchmark results.

    layoutopt calibrate results/*.json --engine vllm --gpu H100 --model llama-3.1-70b --tp 4 \\
        --output h100-vllm.yaml
    layoutopt calibrate my_runs.csv --engine sglang --gpu B200 --parameters memory_efficiency,step_overhead_ms \\
        --folds 5 --output b200-sglang.yaml
    layoutopt estimate --profile h100-vllm.yaml --model llama-3.1-70b --gpu H100 --tp 4 --isl 1024 --osl 256 ...
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter

import click

from layoutopt.cli.common import console, echo_json, format_option, simple_table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


@click.command("calibrate")
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(["vllm", "sglang", "trtllm"]), required=True,
              help="engine that served the runs")
@click.option("--gpu", required=True, help="GPU the runs were measured on (rows of other GPUs are left out)")
@click.option("--model", default=None, help="model of the runs, when the files do not say (catalog name or HF id)")
@click.option("--tp", type=click.IntRange(min=1), default=None, help="tensor parallel degree of the runs")
@click.option("--pp", type=click.IntRange(min=1), default=None, help="pipeline parallel degree")
@click.option("--ep", type=click.IntRange(min=1), default=None, help="expert parallel degree")
@click.option("--dp", type=click.IntRange(min=1), default=None, help="attention data parallel degree (MoE)")
@click.option("--precision", type=click.Choice(["bf16", "fp8", "fp4"]), default=None, help="weight precision")
@click.option("--concurrency", type=click.FloatRange(min=0, min_open=True), default=None,
              help="requests in flight, for exports that do not record it (aiperf/genai-perf CSV)")
@click.option("--run-info", "run_info", type=click.Path(dir_okay=False, exists=True), default=None,
              help="sidecar YAML with model, gpu, layout or prefill/decode pools (default: RUN.yaml next to RUN.json)")
@click.option("--parameters", default=None,
              help="comma-separated constants to fit [default: memory_efficiency,step_overhead_ms,gemm_efficiency,"
                   "request_overhead_ms]")
@click.option("--folds", type=click.IntRange(min=0), default=5, show_default=True,
              help="k of the k-fold error (0: skip)")
@click.option("--loss", type=click.Choice(["soft_l1", "huber", "cauchy", "arctan", "linear"]), default="soft_l1",
              show_default=True, help="robust loss of scipy least_squares")
@click.option("--aiconfigurator-launch", "aiconfigurator_launch", is_flag=True, default=False,
              help="the CSV runs were launched by AIConfigurator's generator, as reference/measurements were: replay "
                   "each with the step token budget its rules set (a step_token_budget column wins; without either, "
                   "the engine's default budget)")
@click.option("--base", "base_path", default=None, type=click.Path(dir_okay=False),
              help="start from this profile YAML (an earlier calibration of the same engine) instead of the built-in "
                   "profile; constants not fitted keep its values")
@click.option("--output", "output_path", required=True, type=click.Path(dir_okay=False), help="profile YAML to write")
@format_option
def command(measurements, engine, gpu, model, tp, pp, ep, dp, precision, concurrency, run_info, parameters, folds,
            loss, aiconfigurator_launch, base_path, output_path, output_format) -> None:
    """Fit the engine x GPU-generation profile to MEASUREMENTS (measurement CSVs in the reference format,
    `vllm bench serve --save-result` JSON, aiperf/genai-perf profile_export JSON or CSV) and write it to
    --output, with the constants' standard errors, the error before and after, the k-fold error and the
    error bands that estimate and solve report when given --profile."""
    from layoutopt.calibrate.fitting import DEFAULT_PARAMETERS, calibrate_cases
    from layoutopt.calibrate.ingest import ingest
    from layoutopt.calibrate.profile_file import load_profile, write_profile
    from layoutopt.errors import InputError
    from layoutopt.calibrate.run_context import RunContext
    from layoutopt.perf_model.fit import fit_cases
    from layoutopt.plan import Layout

    base = None
    if base_path is not None:
        base_file = load_profile(base_path)
        if base_file.engine != engine:
            raise InputError("--base", base_path, f"a profile of {engine} (--engine); this one is {base_file.engine}'s")
        base = base_file.engine_profile()
    degrees = {f"{k}_size": v for k, v in (("tp", tp), ("pp", pp), ("ep", ep), ("dp", dp)) if v is not None}
    if precision is not None:
        degrees["weight_precision"] = precision
    context = RunContext(model=model, gpu=gpu, engine=engine, concurrency=concurrency,
                         layout=Layout(**degrees) if degrees else None)
    read = ingest(list(measurements), context, run_info=run_info, engine=engine, gpu=gpu,
                  aiconfigurator_launch=aiconfigurator_launch)
    cases = fit_cases(read.cases)
    chosen = tuple(p.strip() for p in parameters.split(",") if p.strip()) if parameters else DEFAULT_PARAMETERS
    sources = dict(read.source_of)
    left_out = dict(read.left_out)
    for case in read.cases:
        if case not in cases:
            left_out.setdefault(case.row_id, "disaggregated row without worker counts" if case.worker_counts_assumed
                                else "repeat of a measurement already used")
    args = sys.argv[sys.argv.index("calibrate") + 1:] if "calibrate" in sys.argv else list(measurements)
    command_line = "layoutopt calibrate " + " ".join(shlex.quote(a) for a in args)
    result = calibrate_cases(cases, engine, parameters=chosen, folds=folds, loss=loss, sources=sources,
                             left_out=left_out, command=command_line, base=base)
    write_profile(result.profile, output_path)
    if output_format == "json":
        echo_json(result.profile)
        return
    _render(result, output_path, left_out)


def _render(result, output_path: str, left_out: dict[str, str]) -> None:
    profile = result.profile
    out = console()
    out.print(f"[bold]{profile.engine} on {profile.gpu_generation}[/bold] ({', '.join(profile.gpus)}): "
              f"{profile.provenance.num_rows} rows fitted; {len(left_out)} rows left out")
    for reason, count in Counter(left_out.values()).most_common(5):
        out.print(f"  left out: {count} x {reason}")
    constants = simple_table("Fitted constants", [("constant", "left"), ("before", "right"), ("after", "right"),
                                                  ("std err", "right")])
    for c in profile.fitted:
        constants.add_row(c.name, f"{c.before:.4g}", f"{c.value:.4g}", "-" if c.std_err is None else f"{c.std_err:.2g}")
    out.print(constants)
    table = simple_table("Error on the calibration rows (%)",
                         [("metric", "left"), ("set", "left"), ("rows", "right"), ("MdAPE", "right"),
                          ("bias", "right"), ("within 20 %", "right")])
    errors = profile.errors
    sets = [("before (base profile)", errors.before), ("after (in-sample)", errors.after)]
    if errors.kfold is not None:
        sets.append((f"{errors.folds}-fold held out", errors.kfold))
    for metric in ("ttft", "tpot"):
        for label, summary in sets:
            e = getattr(summary, metric)
            table.add_row(metric.upper(), label, str(e.rows), _pct(e.mdape_pct), _signed(e.bias_pct),
                          _pct(e.within_20_pct))
    out.print(table)
    if errors.kfold is None:
        out.print(f"note: {result.kfold_note}")
    for band in profile.bands:
        out.print(f"error band: {band.shown()}")
    out.print(f"wrote {output_path}")
