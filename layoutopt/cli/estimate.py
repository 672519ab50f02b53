"""``layoutopt estimate``: predicted TTFT/TPOT, throughput and memory of one deployment.

    layoutopt estimate --model llama-3.1-70b --gpu H100 --tp 4 --isl 1024 --osl 1024 --concurrency 32
    layoutopt estimate --model qwen3-32b --gpu H100 --isl 4000 --osl 1000 --rate 2 \\
        --prefill-tp 2 --prefill-instances 2 --decode-tp 4 --decode-instances 1 --format json
"""

from __future__ import annotations

import math

import click
from pydantic import ValidationError

from layoutopt.bounds import MAX_GPUS, check_context_length
from layoutopt.cli.common import INSTANCES, RATE_RPS, TOKENS, FiniteFloatRange, echo_json, format_option
from layoutopt.errors import InputError
from layoutopt.plan import Layout


DEGREE = click.IntRange(1, MAX_GPUS)
BATCH = click.IntRange(1, 1_000_000)
CONCURRENCY = FiniteFloatRange(min=0, max=1e7, min_open=True)


def _layout(prefix: str, values: dict, precision: str, kv_precision: str | None) -> Layout:
    degrees = {f"{name}_size": values[f"{prefix}{name}"] for name in ("tp", "pp", "ep", "dp", "dcp", "pcp")}
    try:
        return Layout(**degrees, weight_precision=precision, kv_precision=kv_precision or "bf16")
    except ValidationError as error:
        message = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        shown = " ".join(f"{k.removesuffix('_size')}={v}" for k, v in degrees.items() if v != 1) or "defaults"
        raise InputError(f"{prefix.replace('_', ' ')}layout".strip(), shown, message) from None


def _degree_options(prefix: str, label: str):
    def decorate(function):
        for name, help_text in reversed((("tp", "tensor parallel"), ("pp", "pipeline parallel"),
                                         ("ep", "expert parallel"), ("dp", "attention data parallel (MoE)"),
                                         ("dcp", "decode context parallel"), ("pcp", "prefill context parallel"))):
            flag = f"--{prefix}{name}"
            function = click.option(flag, f"{prefix.replace('-', '_')}{name}", type=DEGREE,
                                    default=1, show_default=True, help=f"{label}{help_text} degree")(function)
        return function
    return decorate


@click.command("estimate")
@click.option("--model", required=True, help="catalog name, HuggingFace id or path to config.json")
@click.option("--gpu", required=True, help="GPU name, e.g. H100")
@click.option("--engine", default="vllm", show_default=True,
              help="vllm (0.33.0), vllm==0.13.0, sglang (0.5.23), sglang==0.5.3 or trtllm; the version selects the "
                   "engine rules checked")
@click.option("--precision", type=click.Choice(["bf16", "fp8", "fp4"]), default="bf16", show_default=True,
              help="weight precision")
@click.option("--kv-precision", type=click.Choice(["bf16", "fp8"]), default=None, help="KV-cache precision")
@click.option("--checkpoint", "checkpoints", multiple=True, metavar="PRECISION=ORG/NAME",
              help="a checkpoint of the model at one weight precision besides the catalog's (as solve --checkpoint); "
                   "repeatable")
@click.option("--isl", type=TOKENS, help="input (prompt) tokens per request")
@click.option("--osl", type=TOKENS, help="output tokens per request")
@click.option("--workload", "workload_path", type=click.Path(dir_okay=False), help="workload YAML instead of isl/osl")
@_degree_options("", "")
@click.option("--batch", type=BATCH, help="max decode sequences per instance (--max-num-seqs)")
@click.option("--instances", type=INSTANCES, default=1, show_default=True, help="colocated instances")
@_degree_options("prefill-", "prefill ")
@click.option("--prefill-instances", type=INSTANCES, default=None, help="prefill instances (disaggregated)")
@_degree_options("decode-", "decode ")
@click.option("--decode-instances", type=INSTANCES, default=None, help="decode instances (disaggregated)")
@click.option("--concurrency", type=CONCURRENCY, help="requests in flight (closed loop)")
@click.option("--rate", type=RATE_RPS, help="Poisson arrivals in requests/s (open loop)")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              help="profile YAML from layoutopt calibrate, instead of the built-in constants")
@format_option
def command(model, gpu, engine, precision, kv_precision, checkpoints, isl, osl, workload_path, batch, instances,
            prefill_instances, decode_instances, concurrency, rate, profile_path, output_format, **degrees) -> None:
    """Predict latency (TTFT, TPOT percentiles), throughput, memory and bottlenecks of one deployment."""
    from layoutopt.api import estimate
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.workloads.workload import check_fits_context

    from layoutopt.model_catalog.checkpoints import with_user_checkpoints

    spec = with_user_checkpoints(get_model(model), checkpoints)
    workload = None
    if workload_path:
        from layoutopt.workloads.loaders import load_workload

        workload = load_workload(workload_path)
        check_fits_context(workload, spec.max_context_tokens, spec.name, "--workload")
    elif isl is not None:
        check_context_length("--isl", isl, spec.max_context_tokens, spec.name, output_tokens=osl or 0)
    disaggregated = prefill_instances is not None or decode_instances is not None or any(
        value != 1 for key, value in degrees.items() if key.startswith(("prefill_", "decode_")))
    kwargs = {}
    if disaggregated:
        kwargs = dict(prefill_layout=_layout("prefill_", degrees, precision, kv_precision),
                      prefill_instances=prefill_instances or 1,
                      decode_layout=_layout("decode_", degrees, precision, kv_precision),
                      decode_instances=decode_instances or 1)
    else:
        kwargs = dict(layout=_layout("", degrees, precision, kv_precision), instances=instances)
    result = estimate(spec, gpu, engine=engine, workload=workload, isl=isl, osl=osl, concurrency=concurrency,
                      rate=rate, max_batch_size=batch, profile=profile_path, **kwargs)
    if output_format == "json":
        echo_json(result)
    else:
        _render(result)


def _ms(value: float) -> str:
    return "inf" if not math.isfinite(value) else f"{value:,.1f}"


def _render(result) -> None:
    from rich.table import Table

    from layoutopt.cli.common import console

    out = console()
    pools = ", ".join(f"{count} x {role} {result.layouts[role]}" for role, count in result.instances.items())
    if result.load == "closed":
        load = f"closed loop, {result.concurrency:g} in flight"
    elif result.load == "open":
        load = f"open loop, {result.rate_rps:g} req/s Poisson"
    else:
        load = "one request alone"
    out.print(f"[bold]{result.model}[/bold] on {result.gpu} ({result.engine}): {pools}; {result.num_gpus} GPUs")
    out.print(f"isl {result.mean_input_tokens:g}, osl {result.mean_output_tokens:g}; {load}")
    latency = Table(title="Latency (ms)")
    for column in ("metric", "mean", "p50", "p90", "p99"):
        latency.add_column(column, justify="right" if column != "metric" else "left")
    for name, stats in (("TTFT", result.ttft_ms), ("TPOT", result.tpot_ms)):
        latency.add_row(name, _ms(stats.mean), _ms(stats.p50), _ms(stats.p90), _ms(stats.p99))
    out.print(latency)
    if result.error_band is not None:
        out.print(f"expected error: {result.error_band.shown()}")
    for violation in result.rule_violations:
        out.print(f"[bold red]engine rule broken[/bold red]: {violation}")
    throughput = Table(title="Throughput")
    throughput.add_column("metric")
    throughput.add_column("value", justify="right")
    for name, value in (("requests/s", f"{result.request_throughput_rps:,.2f}"),
                        ("output tok/s", f"{result.output_tok_per_s:,.0f}"),
                        ("output tok/s per GPU", f"{result.output_tok_per_s_per_gpu:,.0f}"),
                        ("output tok/s per user", f"{result.output_tok_per_s_per_user:,.1f}"),
                        ("decode batch per instance", f"{result.decode_batch_per_instance:,.1f}"),
                        ("bottleneck prefill / decode",
                         f"{result.bottleneck['prefill']} / {result.bottleneck['decode']}")):
        throughput.add_row(name, value)
    out.print(throughput)
    memory = Table(title="Memory per GPU (GiB)")
    for column in ("role", "weights", "activations", "reserve", "KV capacity", "KV/sequence", "max batch"):
        memory.add_column(column, justify="right" if column != "role" else "left")
    for m in result.memory:
        memory.add_row(m.role, f"{m.weights_gib:.1f}", f"{m.activation_gib:.1f}", f"{m.reserve_gib:.1f}",
                       f"{m.kv_capacity_gib:.1f}", f"{m.kv_gib_per_sequence:.3f}", str(m.max_batch_size))
    out.print(memory)
    for note in result.notes:
        out.print(f"note: {note}")
