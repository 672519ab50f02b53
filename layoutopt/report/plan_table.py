"""Render a ``Plan`` for the terminal with rich: pools, totals, latency, solver, explanation, placement.

Rendering only reads the Plan; ``render_plan`` prints to a given console so tests can capture it.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from layoutopt.plan import Alternative, PlacedInstance, Plan, Pool, Verification


def _degrees(pool: Pool) -> str:
    parts = [f"TP{pool.tp_size}"]
    for label, value in (("PP", pool.pp_size), ("EP", pool.ep_size), ("DP", pool.dp_size),
                         ("DCP", pool.dcp_size), ("PCP", pool.pcp_size)):
        if value > 1:
            parts.append(f"{label}{value}")
    return " ".join(parts)


def pools_table(pools: list[Pool], title: str = "Pools") -> Table:
    table = Table(title=title, title_justify="left")
    for header in ("role", "GPU", "instances", "GPUs/inst", "degrees", "precision", "batch", "req/s/inst", "$/h"):
        table.add_column(header, justify="right" if header not in ("role", "GPU", "degrees", "precision") else "left")
    for pool in pools:
        precision = pool.precision
        if pool.kv_precision != pool.precision:
            precision = f"{pool.precision} (KV {pool.kv_precision})"
        table.add_row(pool.role, pool.gpu, str(pool.instances), str(pool.gpus_per_instance), _degrees(pool),
                      precision, str(pool.max_batch_size), f"{pool.capacity_rps:.2f}", f"{pool.cost_usd_per_hour:.2f}")
    return table


def _totals_table(plan: Plan) -> Table:
    totals = plan.totals
    table = Table(title="Totals", title_justify="left", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    by_type = ", ".join(f"{n} {g}" for g, n in totals.gpus_by_type.items())
    for label, value in (("GPUs", f"{totals.gpus} ({by_type})"), ("cost", f"${totals.cost_usd_per_hour:,.2f}/h"),
                         ("goodput", f"{totals.goodput_rps:,.2f} req/s"),
                         ("output tokens",
                          f"{totals.output_tok_per_s:,.0f} tok/s ({totals.tok_per_s_per_gpu:,.0f} per GPU)"),
                         ("requests per dollar", f"{totals.requests_per_usd:,.0f}")):
        table.add_row(label, value)
    return table


def _latency_table(plan: Plan) -> Table:
    slo = plan.workload.get("slo", {})
    table = Table(title="Predicted latency (ms)", title_justify="left")
    for header in ("metric", "p50", "p90", "p99", "SLO"):
        table.add_column(header, justify="left" if header == "metric" else "right")
    for name, values in (("TTFT", plan.latency.ttft_ms), ("TPOT", plan.latency.tpot_ms)):
        target = ", ".join(f"{k} <= {v:g}" for k, v in slo.get(f"{name.lower()}_ms", {}).items())
        table.add_row(name, f"{values.p50:.1f}", f"{values.p90:.1f}", f"{values.p99:.1f}", target)
    return table


def _solver_line(plan: Plan) -> str:
    s = plan.solver
    parts = [f"solver: {s.status}"]
    if s.objective_value is not None:
        parts.append(f"{plan.objective} {s.objective_value:,.2f} {s.objective_unit}")
    if s.best_bound is not None:
        parts.append(f"bound {s.best_bound:,.2f}")
    if s.gap is not None:
        parts.append(f"gap {s.gap:.2%}")
    parts.append(f"{s.wall_time_s:.2f} s")
    parts.append(f"{s.num_candidates} candidates of {s.num_layouts_considered} layouts")
    return ", ".join(parts)


def _alternatives_table(alternatives: list[Alternative], unit: str) -> Table:
    table = Table(title="Alternatives (different layouts)", title_justify="left")
    for header in ("rank", "mode", "pools", "GPUs", "$/h", "req/s", f"score ({unit})"):
        table.add_column(header, justify="left" if header in ("mode", "pools") else "right")
    for alt in alternatives:
        pools = "; ".join(f"{p.instances}x {p.role} {p.gpu} {_degrees(p)} {p.precision}" for p in alt.pools)
        table.add_row(str(alt.rank), alt.mode, pools, str(alt.totals.gpus), f"{alt.totals.cost_usd_per_hour:,.2f}",
                      f"{alt.totals.goodput_rps:,.2f}", f"{alt.objective_value:,.2f}")
    return table


# Placement rows shown in the terminal; the JSON output always has every instance.
MAX_PLACEMENT_ROWS = 24


def _nodes_text(placed: PlacedInstance) -> str:
    return ", ".join(placed.nodes or [placed.node])


def _gpus_text(placed: PlacedInstance) -> str:
    by_node = placed.gpus_by_node or {placed.node: list(placed.gpus)}
    if len(by_node) == 1:
        return ",".join(str(i) for i in next(iter(by_node.values())))
    return "; ".join(f"{node}: {','.join(str(i) for i in indices)}" for node, indices in by_node.items())


def placement_table(placement: list[PlacedInstance], max_rows: int = MAX_PLACEMENT_ROWS) -> Table:
    """One row per placed instance: id, role, node(s), GPU indices, CUDA_VISIBLE_DEVICES."""
    table = Table(title="Placement", title_justify="left")
    for header in ("instance", "role", "node(s)", "GPUs", "CUDA_VISIBLE_DEVICES"):
        table.add_column(header)
    for placed in placement[:max_rows]:
        table.add_row(placed.instance_id, placed.role, _nodes_text(placed), _gpus_text(placed),
                      placed.cuda_visible_devices)
    if len(placement) > max_rows:
        table.add_row(f"... {len(placement) - max_rows} more", "", "", "", "(all in --format json)")
    return table


def render_plan(plan: Plan, console: Console) -> None:
    """Print ``plan`` as tables and short lines."""
    console.print(f"[bold]{plan.model}[/bold] on {plan.workload.get('budget', '')} — objective {plan.objective}, "
                  f"engine {plan.engine}, status [bold]{plan.status}[/bold]")
    for default in plan.defaults_used:
        console.print(f"default used: {default}")
    if not plan.pools:
        for reason in plan.explanation.reasons:
            console.print(f"[red]why:[/red] {reason}")
        for suggestion in plan.explanation.suggestions:
            console.print(f"try: {suggestion}")
        console.print(_solver_line(plan))
        return
    console.print(f"mode: {plan.mode}")
    console.print(pools_table(plan.pools))
    console.print(_totals_table(plan))
    if plan.latency is not None:
        console.print(_latency_table(plan))
        console.print(f"SLO attainment (predicted): {plan.latency.slo_attainment:.1%}")
        for band in plan.error_bands or []:
            console.print(f"expected error: {band.shown()}")
    console.print(_solver_line(plan))
    if plan.explanation.binding_constraints:
        console.print("binding: " + ", ".join(plan.explanation.binding_constraints))
    check = plan.explanation.ratio_check
    if check is not None:
        console.print(f"prefill:decode ratio check: {check.note}")
    for note in plan.explanation.notes:
        if not note.startswith("default "):
            console.print(f"note: {note}")
    if plan.placement:
        console.print(placement_table(plan.placement))
    if plan.alternatives:
        console.print(_alternatives_table(plan.alternatives, plan.solver.objective_unit))


def render_verification(verification: Verification, console: Console) -> None:
    """Analytic and simulated percentiles side by side (``solve --verify``)."""
    table = Table(title=f"Simulator check at {verification.rate_rps:,.2f} req/s "
                        f"({verification.num_requests:,} requests, seed {verification.seed})", title_justify="left")
    for header in ("metric", "source", "p50", "p90", "p99"):
        table.add_column(header, justify="left" if header in ("metric", "source") else "right")
    for name, analytic, simulated in (("TTFT ms", verification.analytic_ttft_ms, verification.simulated_ttft_ms),
                                      ("TPOT ms", verification.analytic_tpot_ms, verification.simulated_tpot_ms)):
        for source, values in (("analytic", analytic), ("simulated", simulated)):
            table.add_row(name, source, f"{values.p50:,.1f}", f"{values.p90:,.1f}", f"{values.p99:,.1f}")
    console.print(table)
    verdict = "meets the SLO" if verification.meets_slo else "MISSES the SLO"
    console.print(f"SLO attainment: analytic {verification.analytic_slo_attainment:.1%}, simulated "
                  f"{verification.simulated_slo_attainment:.1%}; simulated goodput "
                  f"{verification.simulated_goodput_rps:,.2f} req/s; the simulated plan {verdict}")
