"""Plots of a plan and its neighbours: Pareto frontier, cost against request rate, GPU types.

Inputs are small pydantic models so the solver can hand over its own points later
(:class:`FrontierPoint`); from a ``Plan`` alone, :func:`frontier_points` derives them from the plan
and its alternatives. Figures are built with matplotlib's Agg backend and returned, so tests can
read labels before anything is saved; saving strips dates so output is reproducible.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.plan import Latency, Percentiles, Plan, Pool, Totals

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from layoutopt.optimizer.candidates import CandidateTable


class FrontierPoint(BaseModel):
    """One candidate plan as a point: throughput per GPU, speed per user, cost, goodput."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    gpu_type: str = Field(description="GPU type of the plan, or 'mixed'")
    tok_per_s_per_gpu: float = Field(ge=0, description="output tokens/s per GPU at the goodput rate")
    tok_per_s_per_user: float | None = Field(default=None, ge=0, description="1000 / TPOT p50 in ms; None if unknown")
    cost_usd_per_hour: float = Field(ge=0)
    goodput_rps: float = Field(ge=0)
    chosen: bool = False
    whole_plan: bool = Field(default=True, description="a plan (cost and goodput of a fleet); False: one layout "
                             "per req/s of capacity, from the candidate table")

    output_tok_per_s: float | None = Field(default=None, ge=0, description="output tokens/s at goodput_rps")

    @property
    def requests_per_usd(self) -> float:
        return self.goodput_rps * 3600.0 / self.cost_usd_per_hour if self.cost_usd_per_hour else 0.0

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """Cost of a million output tokens at ``goodput_rps``; None without the token rate."""
        if not self.output_tok_per_s:
            return None
        return self.cost_usd_per_hour / (self.output_tok_per_s * 3600.0) * 1e6


def _gpu_type(totals: Totals) -> str:
    used = [gpu for gpu, count in sorted(totals.gpus_by_type.items()) if count > 0]
    return used[0] if len(used) == 1 else "mixed"


def _per_user_tok_per_s(latency: Latency | None) -> float | None:
    """Decode speed one user sees: 1000 / TPOT p50 in ms; None without a latency prediction."""
    return 1000.0 / latency.tpot_ms.p50 if latency and latency.tpot_ms.p50 > 0 else None


def frontier_points(plan: Plan) -> list[FrontierPoint]:
    """The chosen plan and each alternative as points (per-user speed None where TPOT is unknown)."""
    points: list[FrontierPoint] = []
    if plan.totals is not None:
        points.append(FrontierPoint(label="chosen", gpu_type=_gpu_type(plan.totals), chosen=True,
                                    tok_per_s_per_gpu=plan.totals.tok_per_s_per_gpu,
                                    tok_per_s_per_user=_per_user_tok_per_s(plan.latency),
                                    cost_usd_per_hour=plan.totals.cost_usd_per_hour,
                                    goodput_rps=plan.totals.goodput_rps, output_tok_per_s=plan.totals.output_tok_per_s))
    for alt in sorted(plan.alternatives, key=lambda a: a.rank):
        points.append(FrontierPoint(label=f"alt {alt.rank}", gpu_type=_gpu_type(alt.totals),
                                    tok_per_s_per_gpu=alt.totals.tok_per_s_per_gpu,
                                    tok_per_s_per_user=_per_user_tok_per_s(alt.latency),
                                    cost_usd_per_hour=alt.totals.cost_usd_per_hour, goodput_rps=alt.totals.goodput_rps,
                                    output_tok_per_s=alt.totals.output_tok_per_s))
    return points


def candidate_points(table: "CandidateTable", plan: Plan | None = None) -> list[FrontierPoint]:
    """Every layout the solver evaluated, as a point at its capacity, and the chosen plan.

    A colocated candidate is one point; a disaggregated layout is a prefill candidate with a
    decode candidate of the same GPU type, each pool sized for the same rate (fractional
    instances, so the point is the layout's own, not one fleet's rounding). Tokens/s per GPU at
    rate r: r x mean output tokens / GPUs needed for r; speed per user: 1000 / TPOT p50.
    """
    mean_output = table.mean_output_tokens
    points: list[FrontierPoint] = []
    for c in table.by_role("colocated"):
        points.append(FrontierPoint(
            label=f"{c.gpu} {c.layout.short_name()}", gpu_type=c.gpu,
            tok_per_s_per_gpu=c.capacity_rps * mean_output / c.gpus_per_instance,
            tok_per_s_per_user=_tpot_speed(c.tpot_ms), cost_usd_per_hour=c.cost_usd_per_hour,
            goodput_rps=c.capacity_rps, output_tok_per_s=c.capacity_rps * mean_output, whole_plan=False))
    for p in table.by_role("prefill"):
        for d in table.by_role("decode"):
            if d.gpu != p.gpu:
                continue
            # GPUs and dollars per req/s of the pair, each pool sized for the same rate
            gpus_per_rps = p.gpus_per_instance / p.capacity_rps + d.gpus_per_instance / d.capacity_rps
            usd_per_rps = p.cost_usd_per_hour / p.capacity_rps + d.cost_usd_per_hour / d.capacity_rps
            points.append(FrontierPoint(
                label=f"{p.gpu} P {p.layout.short_name()} / D {d.layout.short_name()}", gpu_type=p.gpu,
                tok_per_s_per_gpu=mean_output / gpus_per_rps, tok_per_s_per_user=_tpot_speed(d.tpot_ms),
                cost_usd_per_hour=usd_per_rps, goodput_rps=1.0, output_tok_per_s=mean_output, whole_plan=False))
    if plan is not None and plan.totals is not None and plan.pools:
        points.append(FrontierPoint(label=" + ".join(f"{pool.instances}x {pool.role[0].upper()} "
                                                     f"{pool.layout.short_name()}" for pool in plan.pools),
                                    gpu_type=_gpu_type(plan.totals), chosen=True,
                                    tok_per_s_per_gpu=plan.totals.tok_per_s_per_gpu,
                                    tok_per_s_per_user=_per_user_tok_per_s(plan.latency),
                                    cost_usd_per_hour=plan.totals.cost_usd_per_hour,
                                    goodput_rps=plan.totals.goodput_rps, output_tok_per_s=plan.totals.output_tok_per_s))
    return points


def plan_candidate_points(plan: Plan) -> list[FrontierPoint] | None:
    """The layouts the solver evaluated for ``plan``, rebuilt from the inputs the plan records
    (model, budget, workload, SLO, engine, headroom) for the GPU types of the budget, plus the
    plan's alternatives. None when they cannot be rebuilt as the plan saw them: inputs not
    recorded, a model or GPU this catalog does not have, or prices that differ from the catalog's
    (a prices file was used)."""
    inputs = plan.workload if isinstance(plan.workload, dict) else {}
    if not plan.pools or not all(isinstance(inputs.get(k), dict) for k in ("workload", "slo")) \
            or not inputs.get("budget"):
        return None
    from pydantic import ValidationError

    from layoutopt.errors import LayoutoptError

    try:
        from layoutopt.hardware_catalog.budget import parse_budget
        from layoutopt.hardware_catalog.catalog import load_catalog
        from layoutopt.model_catalog.catalog import get_model
        from layoutopt.optimizer.enumeration import build_candidate_table
        from layoutopt.workloads.slo import SLO
        from layoutopt.workloads.workload import Workload

        catalog = load_catalog()
        budget = parse_budget(inputs["budget"], catalog)
        names = list(budget.gpu_counts) or sorted({pool.gpu for pool in plan.pools})
        gpus = [catalog.gpu(name) for name in names]
        for pool in plan.pools:
            price = catalog.gpu(pool.gpu).price
            per_gpu = pool.cost_usd_per_hour / max(1, pool.num_gpus)
            if price is None or abs(price.typical_usd_per_hour - per_gpu) > 1e-6 * per_gpu + 1e-9:
                return None
        table = build_candidate_table(
            get_model(plan.model), gpus, Workload.model_validate(inputs["workload"]),
            SLO.model_validate(inputs["slo"]), gpu_limits=budget.gpu_counts, max_usd_per_hour=budget.max_usd_per_hour,
            min_rate_rps=None, engine=plan.engine.split("==")[0],
            headroom=float(inputs.get("headroom_fraction", 0.7)), prune_dominated=False)
    except (LayoutoptError, ValidationError, OSError, KeyError, ValueError):
        return None
    alternatives = [p for p in frontier_points(plan) if not p.chosen]
    return candidate_points(table, plan) + alternatives


def _tpot_speed(tpot_ms: Percentiles | None) -> float | None:
    return 1000.0 / tpot_ms.p50 if tpot_ms is not None and tpot_ms.p50 > 0 else None


def pareto_front(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """Points not beaten on both tokens/s per GPU and tokens/s per user, by per-user speed."""
    known = [p for p in points if p.tok_per_s_per_user is not None]
    front = [p for p in known if not any(
        q.tok_per_s_per_gpu >= p.tok_per_s_per_gpu and q.tok_per_s_per_user >= p.tok_per_s_per_user
        and (q.tok_per_s_per_gpu, q.tok_per_s_per_user) != (p.tok_per_s_per_gpu, p.tok_per_s_per_user) for q in known)]
    return sorted(front, key=lambda p: (p.tok_per_s_per_user, -p.tok_per_s_per_gpu))


def pool_instances_at_rate(pools: list[Pool], rate_rps: float) -> list[int]:
    """Instances each pool needs at ``rate_rps``, keeping the pools' shares of their role's capacity.

    Every request passes through one instance of each role (colocated, or prefill then decode), so
    a role must sustain the whole rate; pool p of that role takes its current share of it.
    """
    role_capacity_rps: dict[str, float] = {}
    for pool in pools:
        role_capacity_rps[pool.role] = role_capacity_rps.get(pool.role, 0.0) + pool.instances * pool.capacity_rps
    needed = []
    for pool in pools:
        total = role_capacity_rps[pool.role]
        if pool.capacity_rps <= 0 or total <= 0:
            needed.append(pool.instances)
            continue
        share = pool.instances * pool.capacity_rps / total
        needed.append(max(1, math.ceil(rate_rps * share / pool.capacity_rps - 1e-9)))
    return needed


def cost_at_rate_usd_per_hour(pools: list[Pool], rate_rps: float) -> float:
    """Cost of the pools scaled to ``rate_rps`` (per-instance cost = pool cost / instances)."""
    return sum(n * pool.cost_usd_per_hour / pool.instances
               for pool, n in zip(pools, pool_instances_at_rate(pools, rate_rps)))


def _figure(width_in: float = 6.4, height_in: float = 4.4) -> "Figure":
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def _label_offsets(count: int) -> list[tuple[int, int]]:
    """Alternating label offsets in points, so neighbouring labels do not sit on each other."""
    cycle = [(6, 6), (6, -12), (-6, 10), (-6, -14)]
    return [cycle[i % len(cycle)] for i in range(count)]


def _pad_span(low: float, high: float, fraction: float = 0.15) -> tuple[float, float]:
    """Axis limits around [low, high], at least ``fraction`` of the values wide (no 0.15 % spans)."""
    middle = (low + high) / 2
    half = max((high - low) / 2 * 1.15, abs(middle) * fraction / 2, 1e-9)
    return max(0.0, middle - half), middle + half


def frontier_figure(points: list[FrontierPoint]) -> "Figure":
    """Tokens/s per GPU against tokens/s per user, coloured by USD per million output tokens, with
    the Pareto frontier drawn as a step line and the chosen plan marked."""
    fig = _figure(width_in=8.0, height_in=6.0)
    ax = fig.add_subplot()
    known = [p for p in points if p.tok_per_s_per_user is not None]
    front = pareto_front(points)
    if known:
        import numpy as np

        usd = np.array([p.usd_per_million_output_tokens or np.nan for p in known])
        finite = np.isfinite(usd)
        colour_range = (np.nanmin(usd), np.nanmax(usd)) if finite.any() else (0.0, 1.0)
        scatter = None
        for marker, group, label in (("o", [p for p in known if not p.whole_plan], "layouts evaluated"),
                                     ("s", [p for p in known if p.whole_plan and not p.chosen],
                                      "next-best plans (--top-k)")):
            if not group:
                continue
            values = np.array([p.usd_per_million_output_tokens or np.nan for p in group])
            scatter = ax.scatter([p.tok_per_s_per_user for p in group], [p.tok_per_s_per_gpu for p in group],
                                 c=np.where(np.isfinite(values), values, colour_range[1]), cmap="viridis_r",
                                 vmin=colour_range[0], vmax=colour_range[1], marker=marker, s=40,
                                 edgecolors="black", linewidths=0.4, label=label, zorder=2)
        if scatter is not None and finite.any():
            fig.colorbar(scatter, ax=ax, label="cost [USD per million output tokens]")
    if known:
        x_span = _pad_span(min(p.tok_per_s_per_user for p in known), max(p.tok_per_s_per_user for p in known))
        y_span = _pad_span(min(p.tok_per_s_per_gpu for p in known), max(p.tok_per_s_per_gpu for p in known))
        ax.set_xlim(*x_span)
        ax.set_ylim(*y_span)
    if front:
        # The frontier is a staircase: every layout under it is beaten on both axes by one on it.
        xs = [x_span[0]] + [p.tok_per_s_per_user for p in front]
        ys = [front[0].tok_per_s_per_gpu] + [p.tok_per_s_per_gpu for p in front]
        xs, ys = xs + [front[-1].tok_per_s_per_user], ys + [y_span[0]]
        ax.plot(xs, ys, drawstyle="steps-pre", color="tab:blue", linewidth=1.5, zorder=1,
                label=f"Pareto frontier ({len(front)} layout{'s' if len(front) > 1 else ''})")
        ax.fill_between(xs, ys, y_span[0], step="pre", color="tab:blue", alpha=0.06, linewidth=0)
    cheapest = min((p for p in known if p.usd_per_million_output_tokens), default=None,
                   key=lambda p: p.usd_per_million_output_tokens)
    labelled = [p for p in front if not p.chosen]
    if cheapest is not None and not cheapest.chosen and cheapest not in labelled:
        labelled.append(cheapest)
    # numbers on the plot, names in a key below it: layout names are long and frontier points close
    from matplotlib.lines import Line2D

    key_handles, key_labels = [], []
    (x_low, x_high), (y_low, y_high) = ax.get_xlim(), ax.get_ylim()
    spots: list[tuple[float, float, list[str]]] = []  # points within 2 % of the axes share one label
    for number, point in enumerate(labelled, start=1):
        x, y = point.tok_per_s_per_user, point.tok_per_s_per_gpu
        spot = next((s for s in spots if abs(s[0] - x) <= 0.02 * (x_high - x_low)
                     and abs(s[1] - y) <= 0.02 * (y_high - y_low)), None)
        if spot is None:
            spots.append((x, y, [str(number)]))
        else:
            spot[2].append(str(number))
        usd = point.usd_per_million_output_tokens
        key_handles.append(Line2D([], [], linestyle="none", marker=f"${number}$", color="black"))
        key_labels.append(f"{point.label}" + (f": {usd:.2f} USD per million output tokens" if usd else ""))
    for x, y, numbers in spots:
        ax.annotate(",".join(numbers), (x, y), textcoords="offset points", xytext=(-4, 5), fontsize=8,
                    fontweight="bold", ha="right")
    for p in known:
        if p.chosen:
            ax.scatter([p.tok_per_s_per_user], [p.tok_per_s_per_gpu], color="tab:red", marker="*", s=260,
                       edgecolors="black", zorder=4, label=f"chosen plan ({p.cost_usd_per_hour:,.2f} USD/h)")
            key_handles.append(Line2D([], [], linestyle="none", marker="*", color="tab:red", markersize=10))
            key_labels.append(f"chosen plan: {p.label}")
    if key_handles:
        fig.legend(key_handles, key_labels, loc="outside lower center", fontsize=7, ncols=1, frameon=False)
    missing = len(points) - len(known)
    if missing:
        ax.text(0.01, 0.01, f"{missing} layout(s) without TPOT not shown", transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("speed per user: 1000 / TPOT p50 [tok/s/user]")
    ax.set_ylabel("output throughput per GPU [tok/s/GPU]")
    num_layouts = sum(not p.whole_plan for p in known)
    what = f"{num_layouts} layouts evaluated at the SLO" if num_layouts else f"{len(known)} plans"
    ax.set_title(f"Throughput per GPU against speed per user: {what}", fontsize=10)
    ax.grid(True, alpha=0.3)
    if known:
        ax.legend(loc="best", fontsize=8)
    return fig


def _budget_limit_rps(plan: Plan, rates: list[float]) -> float | None:
    """The highest of ``rates`` the plan's budget holds when its pools scale by whole instances."""
    text = plan.workload.get("budget") if isinstance(plan.workload, dict) else None
    if not text:
        return None
    try:
        from layoutopt.hardware_catalog.budget import parse_budget
        from layoutopt.hardware_catalog.catalog import load_catalog

        budget = parse_budget(text, load_catalog())
    except Exception:  # noqa: BLE001 - a budget this catalog cannot read: no limit drawn
        return None
    held = None
    for rate in rates:
        counts: dict[str, int] = {}
        for pool, n in zip(plan.pools, pool_instances_at_rate(plan.pools, rate)):
            counts[pool.gpu] = counts.get(pool.gpu, 0) + n * pool.gpus_per_instance
        over_gpus = any(count > budget.gpu_counts.get(gpu, count) for gpu, count in counts.items())
        over_usd = budget.max_usd_per_hour is not None and (
            cost_at_rate_usd_per_hour(plan.pools, rate) > budget.max_usd_per_hour * (1 + 1e-9))
        if over_gpus or over_usd:
            break
        held = rate
    return held


def cost_rate_figure(plan: Plan, points: list[FrontierPoint], base_rate_rps: float) -> "Figure":
    """Cost of the chosen layout scaled by whole instances, 0.1x..2x the base rate, up to what the
    budget holds (marked), plus the other plans as points."""
    fig = _figure(width_in=8.0)
    ax = fig.add_subplot()
    if plan.pools and base_rate_rps > 0:
        rates = [base_rate_rps * step / 200 for step in range(20, 401)]
        limit = _budget_limit_rps(plan, rates)
        inside = [r for r in rates if limit is None or r <= limit]
        ax.step(inside, [cost_at_rate_usd_per_hour(plan.pools, r) for r in inside], where="post",
                color="tab:blue", label="chosen layout, scaled by whole instances")
        ax.axvline(base_rate_rps, color="tab:gray", linestyle="--", linewidth=1, label="planned rate")
        if limit is not None and limit < rates[-1]:
            ax.axvline(limit, color="tab:red", linestyle=":", linewidth=1.5,
                       label=f"budget {plan.workload.get('budget')} holds up to {limit:.3g} req/s")
    plans = [p for p in points if p.whole_plan]
    for p, offset in zip(plans, _label_offsets(len(plans))):
        ax.scatter([p.goodput_rps], [p.cost_usd_per_hour], color="tab:red" if p.chosen else "tab:gray",
                   marker="*" if p.chosen else "o", s=120 if p.chosen else 30, zorder=3)
        ax.annotate(p.label, (p.goodput_rps, p.cost_usd_per_hour), textcoords="offset points", xytext=offset,
                    fontsize=8)
    ax.set_xlabel("request rate [req/s]")
    ax.set_ylabel("cost [USD/h]")
    ax.set_ylim(bottom=0)
    ax.set_title("Cost against request rate (points: plans at their capacity)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def split_figure(plan: Plan) -> "Figure | None":
    """The plan's prefill:decode split of GPUs against the seeds' formula (Tin/P) : (Tout/D)."""
    check = plan.explanation.ratio_check
    if check is None or check.plan_prefill_gpus + check.plan_decode_gpus == 0:
        return None
    total = check.plan_prefill_gpus + check.plan_decode_gpus
    formula_prefill = total * check.formula_prefill_to_decode / (1 + check.formula_prefill_to_decode)
    rows = [("plan", check.plan_prefill_gpus, check.plan_decode_gpus),
            ("seeds' formula\n(Tin/P) : (Tout/D)", formula_prefill, total - formula_prefill)]
    fig = _figure(width_in=8.0, height_in=3.4)
    ax = fig.add_subplot()
    for index, (name, prefill, decode) in enumerate(rows):
        ax.barh(index, prefill, color="tab:orange", label="prefill" if index == 0 else None)
        ax.barh(index, decode, left=prefill, color="tab:blue", label="decode" if index == 0 else None)
        ax.text(prefill / 2, index, f"{prefill:.3g}", ha="center", va="center", color="black", fontsize=9)
        ax.text(prefill + decode / 2, index, f"{decode:.3g}", ha="center", va="center", color="white", fontsize=9)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xlim(0, total)
    ax.set_xlabel(f"GPUs of the plan's {total} prefill + decode GPUs [GPUs]")
    ax.set_ylabel("split [prefill : decode GPUs]")
    ax.set_title(f"Prefill:decode split: plan {check.plan_prefill_to_decode:.2f} vs formula "
                 f"{check.formula_prefill_to_decode:.2f} (P = {check.prefill_tok_per_s_per_gpu:,.0f}, "
                 f"D = {check.decode_tok_per_s_per_gpu:,.0f} tok/s/GPU)", fontsize=9)
    ax.legend(loc="upper left", fontsize=8, bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def gpu_type_figure(points: list[FrontierPoint]) -> "Figure | None":
    """Best tokens/s per GPU and requests per dollar per GPU type; None with fewer than two types."""
    types = sorted({p.gpu_type for p in points})
    if len(types) < 2:
        return None
    fig = _figure(width_in=8.0)
    left, right = fig.subplots(1, 2)
    best_tok = [max(p.tok_per_s_per_gpu for p in points if p.gpu_type == t) for t in types]
    best_req = [max(p.requests_per_usd for p in points if p.gpu_type == t) for t in types]
    left.bar(types, best_tok, color="tab:blue")
    left.set_xlabel("GPU type")
    left.set_ylabel("best output tokens/s per GPU [tok/s/GPU]")
    right.bar(types, best_req, color="tab:green")
    right.set_xlabel("GPU type")
    right.set_ylabel("best goodput per dollar [requests/USD]")
    fig.suptitle("Comparison per GPU type")
    return fig


def plan_gpu_types_figure(plan: Plan) -> "Figure | None":
    """GPUs and cost per GPU type of a plan that mixes types; None when it uses one type."""
    types = sorted({pool.gpu for pool in plan.pools})
    if len(types) < 2:
        return None
    fig = _figure(width_in=8.0)
    left, right = fig.subplots(1, 2)
    left.bar(types, [sum(p.num_gpus for p in plan.pools if p.gpu == t) for t in types], color="tab:blue")
    left.set_xlabel("GPU type")
    left.set_ylabel("GPUs in the plan [GPUs]")
    right.bar(types, [sum(p.cost_usd_per_hour for p in plan.pools if p.gpu == t) for t in types], color="tab:orange")
    right.set_xlabel("GPU type")
    right.set_ylabel("cost [USD/hour]")
    fig.suptitle("Chosen plan per GPU type")
    return fig


def figure_bytes(fig: "Figure", fmt: str) -> bytes:
    """``fig`` encoded as ``png`` or ``svg``, without dates or random ids."""
    import matplotlib

    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with matplotlib.rc_context({"svg.hashsalt": "layoutopt", "svg.fonttype": "none"}):
        fig.savefig(buffer, format=fmt, dpi=100, metadata=metadata)
    return buffer.getvalue()


def plan_figures(plan: Plan, points: list[FrontierPoint] | None, base_rate_rps: float) -> dict[str, "Figure"]:
    """name -> figure for every plot that applies to ``plan``."""
    if points is None:
        points = plan_candidate_points(plan) or frontier_points(plan)
    figures = {"frontier": frontier_figure(points), "cost_vs_rate": cost_rate_figure(plan, points, base_rate_rps)}
    split = split_figure(plan)
    if split is not None:
        figures["prefill_decode_split"] = split
    by_type = gpu_type_figure(points) or plan_gpu_types_figure(plan)
    if by_type is not None:
        figures["gpu_types"] = by_type
    return figures
