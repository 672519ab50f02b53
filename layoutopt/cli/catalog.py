"""``layoutopt catalog``: list the built-in GPUs, node types and models, or show one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from layoutopt.cli.common import console, echo_json, format_option, simple_table
from layoutopt.errors import InputError, closest_matches
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.hardware_catalog.schemas import GpuSpec, NodeType
from layoutopt.model_catalog.catalog import catalog_names, get_model, is_catalog_model, list_models
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.model_catalog.summary import model_summary


@click.group(name="catalog")
def command() -> None:
    """Browse the built-in GPUs, node types, models and serving engines."""


# ---------------------------------------------------------------- formatting
def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _binary_bytes(value: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 (KV and state sizes)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:,.0f} B"


def _billions(count: float) -> str:
    return f"{count / 1e9:,.2f}B"


def _layers(spec: ModelSpec, short: bool = False) -> str:
    """Layer count, split by kind when the model mixes kinds: '64 (48 linear + 16 full)'."""
    parts = [
        (spec.num_linear_attention_layers, "lin" if short else "linear"),
        (spec.num_sliding_window_layers, f"win{_tokens(spec.sliding_window_tokens or 0)}" if short
         else f"sliding-{spec.sliding_window_tokens}"),
        (spec.num_full_attention_layers, "full"),
    ]
    mixed = [f"{count} {kind}" for count, kind in parts if count]
    if len(mixed) == 1:
        return str(spec.num_layers)
    return " + ".join(mixed) if short else f"{spec.num_layers} ({' + '.join(mixed)})"


def _tokens(count: int) -> str:
    """Context lengths as people write them: 128k, 10M."""
    if count >= 2**20 and count % 2**20 == 0:
        return f"{count // 2**20}M"
    return f"{count / 1024:g}k" if count >= 1024 else str(count)


# ---------------------------------------------------------------- listings
@command.command("gpus")
@format_option
def gpus(output_format: str) -> None:
    """GPU models: peak dense TFLOPS, memory, bandwidths, power and on-demand price."""
    rows = load_catalog().gpus
    if output_format == "json":
        echo_json(list(rows))
        return
    table = simple_table("GPUs (dense TFLOPS; GB/s per direction)", [
        ("GPU", "left"), ("BF16", "right"), ("FP8", "right"), ("FP4", "right"), ("Mem GiB", "right"),
        ("HBM GB/s", "right"), ("Scale-up GB/s", "right"), ("Domain", "right"), ("NIC Gb/s", "right"),
        ("$/GPU-h", "right"),
    ])
    for g in rows:
        price = _num(g.price.typical_usd_per_hour, 2) if g.price else "-"
        table.add_row(g.name, _num(g.bf16_tflops), _num(g.fp8_tflops), _num(g.fp4_tflops), _num(g.memory_gib),
                      _num(g.memory_bandwidth_gb_per_s), _num(g.scaleup_gb_per_s), str(g.scaleup_domain_gpus),
                      _num(g.nic_gbit_per_s), price)
    console().print(table)


@command.command("nodes")
@format_option
def nodes(output_format: str) -> None:
    """Node types: GPUs per node, NVLink domain size and NICs."""
    rows = load_catalog().node_types
    if output_format == "json":
        echo_json(list(rows))
        return
    table = simple_table("Node types", [
        ("Node type", "left"), ("GPU", "left"), ("GPUs/node", "right"), ("NVLink domain", "right"),
        ("NICs", "right"), ("Gb/s per NIC", "right"), ("Default", "left"),
    ])
    for n in rows:
        table.add_row(n.name, n.gpu, str(n.gpus_per_node), str(n.nvlink_domain_gpus), str(n.nics_per_node),
                      _num(n.nic_gbit_per_s), "yes" if n.default_for_gpu else "")
    console().print(table)


@command.command("models")
@format_option
def models(output_format: str) -> None:
    """Built-in models: parameters, layer kinds, KV cache per token and state per sequence."""
    specs = list_models()
    if output_format == "json":
        echo_json([model_summary(spec) for spec in specs])
        return
    table = simple_table("Models (BF16 KV cache grows per token of context; state is fixed per sequence)", [
        ("Model", "left"), ("Params B", "right"), ("Active B", "right"), ("Layers", "left"),
        ("KV KiB/tok", "right"), ("State MiB", "right"), ("Ckpt", "left"), ("Ctx", "right"),
    ])
    for spec in specs:
        summary = model_summary(spec)
        state = summary["sliding_kv_bytes_per_sequence_max"]["bf16"] + summary["linear_state_bytes_per_sequence"]
        table.add_row(spec.name, _num(spec.total_params / 1e9, 1), _num(spec.active_params / 1e9, 2),
                      _layers(spec, short=True), _num(spec.kv_cache_bytes_per_token() / 2**10, 1),
                      _num(state / 2**20, 1) if state else "-", spec.checkpoint_precision,
                      _tokens(spec.max_context_tokens))
    console().print(table)


# ---------------------------------------------------------------- show
def _show_model(spec: ModelSpec, output_format: str) -> None:
    summary = model_summary(spec)
    if output_format == "json":
        echo_json({"kind": "model", **summary})
        return
    rows: list[tuple[str, str]] = [
        ("HuggingFace id", spec.hf_id or "-"), ("family", spec.family), ("source", spec.source),
        ("checkpoint precision", spec.checkpoint_precision),
        ("checkpoints", ", ".join(f"{c['precision']} {c['hf_id'] or '(this config)'}" for c in summary["checkpoints"])),
        ("layers", _layers(spec)),
        ("hidden size", _num(spec.hidden_size)), ("vocabulary", _num(spec.vocab_size)),
        ("max context", f"{_num(spec.max_context_tokens)} tokens"),
    ]
    attention = summary["attention"]
    rows.append(("attention", ", ".join(f"{k} {v}" for k, v in attention.items() if v not in (None, False))))
    if "linear_attention" in summary:
        rows.append(("linear attention", ", ".join(f"{k} {v}" for k, v in summary["linear_attention"].items())))
    if spec.num_dense_layers:
        rows.append(("dense FFN", f"{spec.num_dense_layers} layers x intermediate {_num(spec.intermediate_size)}"))
    if "moe" in summary:
        moe = summary["moe"]
        rows.append(("MoE", f"{moe['num_moe_layers']} layers, {moe['num_experts']} experts, top-"
                            f"{moe['num_experts_per_token']}, expert intermediate {moe['moe_intermediate_size']}"))
        shared = moe["shared_expert_intermediate_size"] or moe["moe_intermediate_size"]
        rows.append(("shared experts", f"{moe['num_shared_experts']}" + (f" x {shared}" if moe["num_shared_experts"] else "")))
        if moe["expert_native_precision"]:
            rows.append(("expert weights", f"fixed at {moe['expert_native_precision']} by the checkpoint"))
    rows += [
        ("parameters total", _billions(spec.total_params)),
        ("parameters active/token", _billions(spec.active_params)),
        ("weights", ", ".join(f"{p} {b / 1e9:,.1f} GB" for p, b in summary["weight_bytes"].items())),
        ("KV cache per token", ", ".join(f"{p} {_binary_bytes(b)}" for p, b in summary["kv_cache_bytes_per_token"].items())),
    ]
    if spec.num_sliding_window_layers:
        caps = summary["sliding_kv_bytes_per_sequence_max"]
        rows.append(("sliding KV per sequence", ", ".join(f"{p} <= {_binary_bytes(b)}" for p, b in caps.items())))
    if spec.num_linear_attention_layers:
        rows.append(("linear state per sequence", _binary_bytes(spec.linear_state_bytes_per_sequence)))
    rows.append(("matmul FLOPs per token", f"{spec.matmul_flops_per_token / 1e9:,.1f} GFLOP"))
    _print_pairs(f"Model {spec.name}", rows)


def _show_gpu(gpu: GpuSpec, node_types: tuple[NodeType, ...], output_format: str) -> None:
    if output_format == "json":
        echo_json({"kind": "gpu", "gpu": gpu, "node_types": list(node_types)})
        return
    rows = [
        ("vendor", gpu.vendor), ("aliases", ", ".join(gpu.aliases) or "-"),
        ("compute capability", "-" if gpu.compute_capability is None else f"{gpu.compute_capability:.1f}"),
        ("dense TFLOPS", f"BF16 {_num(gpu.bf16_tflops)}, FP8 {_num(gpu.fp8_tflops)}, FP4 {_num(gpu.fp4_tflops)}"),
        ("memory", f"{_num(gpu.memory_gib)} GiB, {_num(gpu.memory_bandwidth_gb_per_s)} GB/s"),
        ("scale-up", f"{_num(gpu.scaleup_gb_per_s)} GB/s per direction, domain of {gpu.scaleup_domain_gpus} GPUs"),
        ("PCIe", f"{_num(gpu.pcie_gb_per_s)} GB/s"), ("NIC", f"{_num(gpu.nic_gbit_per_s)} Gb/s per GPU"),
        ("TDP", f"{_num(gpu.tdp_w)} W"),
    ]
    if gpu.price:
        p = gpu.price
        rows.append(("price", f"${p.typical_usd_per_hour:.2f}/GPU-hour (range ${p.low_usd_per_hour:.2f}-"
                              f"${p.high_usd_per_hour:.2f}, as of {p.as_of})"))
        rows.append(("price source", p.source))
    rows.append(("node types", ", ".join(n.name for n in node_types) or "-"))
    rows.append(("source", gpu.source))
    _print_pairs(f"GPU {gpu.name}", rows)


def _print_pairs(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("property", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    console().print(table)


def _find_hardware(name: str) -> tuple[Any, Any]:
    """(GPU, node type) called ``name``; each None when it is not one."""
    hardware = load_catalog()
    for lookup in (hardware.gpu, hardware.node_type):
        try:
            found = lookup(name)
        except InputError:
            continue
        return (found, None) if isinstance(found, GpuSpec) else (None, found)
    return None, None


@command.command("show")
@click.argument("name")
@format_option
def show(name: str, output_format: str) -> None:
    """One model (catalog name, HuggingFace id or config.json path), GPU or node type in detail."""
    if is_catalog_model(name) or name.lower().endswith(".json") or Path(name).exists():
        _show_model(get_model(name), output_format)
        return
    gpu, node = _find_hardware(name)
    hardware = load_catalog()
    if gpu is not None:
        _show_gpu(gpu, hardware.node_types_for(gpu.name), output_format)
    elif node is not None:
        if output_format == "json":
            echo_json({"kind": "node_type", "node_type": node})
        else:
            _print_pairs(f"Node type {node.name}", [(k, str(v)) for k, v in node.model_dump().items() if k != "name"])
    else:
        choices = catalog_names() + list(hardware.gpu_names) + [n.name for n in hardware.node_types]
        close = closest_matches(name, choices)
        raise InputError(
            "NAME", name,
            "a model, GPU or node type of the catalog (see `layoutopt catalog models|gpus|nodes`) or a config.json path",
            f"did you mean {', '.join(close)}?" if close else None,
        )


def _register_engines() -> None:
    from layoutopt.cli.catalog_engines import engines

    command.add_command(engines)


_register_engines()
