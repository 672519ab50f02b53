"""report.md: what to run, why this layout, what the next-best plans give up, what +20 % rate costs."""

from __future__ import annotations

from layoutopt.plan import Alternative, Plan, Pool
from layoutopt.report.engine_flags import ENGINE_VERSIONS
from layoutopt.report.launch import InstanceSpec, pool_names
from layoutopt.report.plots import pool_instances_at_rate

RATE_RISE_FRACTION = 0.20


def base_rate_rps(plan: Plan) -> float:
    """The rate the plan was asked for (workload arrival rate), else the goodput it reaches."""
    inputs = plan.workload if isinstance(plan.workload, dict) else {}
    # solve records {"workload": {...}, "slo": ..., "budget": ...}; older plans the workload's own keys
    workload = inputs.get("workload") if isinstance(inputs.get("workload"), dict) else inputs
    rate = workload.get("arrival_rate_rps")
    if isinstance(rate, (int, float)) and rate > 0:
        return float(rate)
    return plan.totals.goodput_rps if plan.totals else 0.0


def _num(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _degrees(pool: Pool) -> str:
    return (f"TP {pool.tp_size} / PP {pool.pp_size} / EP {pool.ep_size} / DP {pool.dp_size} / "
            f"DCP {pool.dcp_size} / PCP {pool.pcp_size}")


def _pools_summary(pools: list[Pool]) -> str:
    return "; ".join(f"{p.instances} x {p.role} {p.gpu} {p.layout.short_name()}" for p in pools)


def _what_to_run(plan: Plan, instances: list[InstanceSpec], engine: str, version: str, model: str) -> list[str]:
    names = pool_names(plan)
    lines = ["## What to run", "",
             f"Engine: {engine} {version}; model `{model}`; mode {plan.mode}; "
             f"solver status {plan.status} (objective {plan.objective}).", "",
             "| pool | role | GPU | instances | GPUs/instance | degrees | weights / KV | max batch | "
             "capacity per instance [req/s] | pool cost [USD/h] |",
             "|---|---|---|---:|---:|---|---|---:|---:|---:|"]
    for name, p in zip(names, plan.pools):
        lines.append(f"| {name} | {p.role} | {p.gpu} | {p.instances} | {p.gpus_per_instance} | {_degrees(p)} | "
                     f"{p.precision} / {p.kv_precision} | {p.max_batch_size} | {_num(p.capacity_rps, 3)} | "
                     f"{_num(p.cost_usd_per_hour)} |")
    if plan.totals:
        t = plan.totals
        by_type = ", ".join(f"{count} x {gpu}" for gpu, count in sorted(t.gpus_by_type.items()))
        lines += ["", f"Totals: {t.gpus} GPUs ({by_type}), {_num(t.cost_usd_per_hour)} USD/h, goodput "
                  f"{_num(t.goodput_rps, 3)} req/s, {_num(t.output_tok_per_s, 1)} output tok/s, "
                  f"{_num(t.tok_per_s_per_gpu, 1)} tok/s per GPU, {_num(t.requests_per_usd, 1)} requests per USD."]
    if plan.latency:
        ttft, tpot = plan.latency.ttft_ms, plan.latency.tpot_ms
        lines += ["", f"Predicted latency: TTFT p50/p90/p99 {_num(ttft.p50, 1)} / {_num(ttft.p90, 1)} / "
                  f"{_num(ttft.p99, 1)} ms; TPOT p50/p90/p99 {_num(tpot.p50, 1)} / {_num(tpot.p90, 1)} / "
                  f"{_num(tpot.p99, 1)} ms; SLO attainment {_num(100 * plan.latency.slo_attainment, 1)} %."]
    lines += ["", "| instance | pool | nodes | GPUs | port | launch script |", "|---|---|---|---|---:|---|"]
    for spec in instances:
        lines.append(f"| {spec.instance_id} | {spec.pool_name} | {', '.join(spec.nodes)} | "
                     f"{spec.gpus_text} | {spec.port} | launch/{spec.instance_id}.sh |")
    if not plan.placement:
        lines += ["", "The plan has no placement: instances are packed in pool order onto generic nodes "
                  "`node-0`, `node-1`, ...; replace them with real hostnames."]
    return lines


def _why(plan: Plan) -> list[str]:
    ex = plan.explanation
    lines = ["## Why this layout", "", "Binding constraints:", ""]
    lines += [f"- {c}" for c in ex.binding_constraints] or ["- none reported"]
    if ex.notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in ex.notes]
    rc = ex.ratio_check
    if rc is not None:
        lines += ["", "### Prefill:decode ratio", "",
                  "Checked against N_p : N_d = (T_in / P) : (T_out / D), where T_in and T_out are the prompt and "
                  "output tokens/s the workload demands and P and D the tokens/s one prefill and one decode GPU "
                  "sustain at the SLO.", "",
                  f"- P = {_num(rc.prefill_tok_per_s_per_gpu, 1)} tok/s per prefill GPU; "
                  f"D = {_num(rc.decode_tok_per_s_per_gpu, 1)} tok/s per decode GPU",
                  f"- formula N_p / N_d = {_num(rc.formula_prefill_to_decode, 3)}",
                  f"- plan: {rc.plan_prefill_gpus} prefill GPUs : {rc.plan_decode_gpus} decode GPUs = "
                  f"{_num(rc.plan_prefill_to_decode, 3)}",
                  f"- {rc.note}"]
    return lines


def _gives_up(plan: Plan, alt: Alternative) -> str:
    if plan.totals is None:
        return "-"
    chosen, other = plan.totals, alt.totals
    parts = []
    if chosen.requests_per_usd > 0:
        drop = 100 * (1 - other.requests_per_usd / chosen.requests_per_usd)
        parts.append(f"{_num(drop, 1)} % less goodput per dollar" if drop >= 0
                     else f"{_num(-drop, 1)} % more goodput per dollar")
    parts.append(f"goodput {other.goodput_rps - chosen.goodput_rps:+,.3f} req/s")
    parts.append(f"cost {other.cost_usd_per_hour - chosen.cost_usd_per_hour:+,.2f} USD/h")
    return "; ".join(parts)


def _alternatives(plan: Plan) -> list[str]:
    lines = ["## What the next-best plans give up", ""]
    if not plan.alternatives:
        return lines + ["The solver reported no alternative plans (ask for them with --top-k)."]
    lines += ["| rank | pools | GPUs | cost [USD/h] | goodput [req/s] | requests per USD | versus the chosen plan |",
              "|---:|---|---:|---:|---:|---:|---|"]
    for alt in sorted(plan.alternatives, key=lambda a: a.rank):
        t = alt.totals
        lines.append(f"| {alt.rank} | {_pools_summary(alt.pools)} | {t.gpus} | {_num(t.cost_usd_per_hour)} | "
                     f"{_num(t.goodput_rps, 3)} | {_num(t.requests_per_usd, 1)} | {_gives_up(plan, alt)} |")
    return lines


def _rate_rise(plan: Plan) -> list[str]:
    base = base_rate_rps(plan)
    target = base * (1 + RATE_RISE_FRACTION)
    lines = [f"## If the request rate rose by {RATE_RISE_FRACTION:.0%}".replace("%", " %"), ""]
    if not plan.pools or base <= 0:
        return lines + ["No rate to scale from."]
    needed = pool_instances_at_rate(plan.pools, target)
    lines += [f"From {_num(base, 3)} to {_num(target, 3)} req/s, each pool keeping its share of its role's "
              "capacity (capacity per instance as planned, with its headroom):", "",
              "| pool | instances now | instances needed | extra | added cost [USD/h] |",
              "|---|---:|---:|---:|---:|"]
    added_usd_per_hour, extra_gpus = 0.0, 0
    for name, pool, n in zip(pool_names(plan), plan.pools, needed):
        extra = max(0, n - pool.instances)
        cost = extra * pool.cost_usd_per_hour / pool.instances
        added_usd_per_hour += cost
        extra_gpus += extra * pool.gpus_per_instance
        lines.append(f"| {name} | {pool.instances} | {n} | {extra} | {_num(cost)} |")
    if extra_gpus == 0:
        lines += ["", "The planned capacity already covers the higher rate; nothing to add."]
    else:
        lines += ["", f"In total: {extra_gpus} more GPUs, {_num(added_usd_per_hour)} USD/h more."]
    return lines


def _images(image: str, image_given: bool) -> list[str]:
    if image_given:
        return ["## Container images", "", f"The manifests run `{image}`, as given with --image."]
    return ["## Container images", "",
            f"The manifests run `{image}`: the engine project's image repository with its release tag scheme "
            "(v + version). layoutopt works offline and did not check that this tag is published; run "
            f"`docker manifest inspect {image}` before applying, or pass --image with the image you use. The "
            "router pods install their router release with pip (see router/router.sh)."]


def report_markdown(plan: Plan, instances: list[InstanceSpec], *, engine: str, model: str,
                    files: list[str], version: str | None = None, image: str | None = None,
                    image_given: bool = False) -> str:
    """The whole report as Markdown; ``files`` are the other artifacts written next to it.

    ``version`` is the engine release the files were written for (default: the current one);
    ``image`` the engine container image of the manifests (``image_given``: named by the user)."""
    lines = [f"# Serving plan for {plan.model}", ""]
    lines += _what_to_run(plan, instances, engine, version or ENGINE_VERSIONS[engine], model) + [""]
    lines += _why(plan) + [""]
    lines += _alternatives(plan) + [""]
    lines += _rate_rise(plan) + [""]
    if plan.defaults_used:
        lines += ["## Defaults used", ""] + [f"- {d}" for d in plan.defaults_used] + [""]
    if image is not None:
        lines += _images(image, image_given) + [""]
    lines += ["## Files", ""] + [f"- `{f}`" for f in sorted(files)]
    return "\n".join(lines) + "\n"
