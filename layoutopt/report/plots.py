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

from layoutopt.plan import Latency, Plan, Pool, Totals

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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

    @property
    def requests_per_usd(self) -> float:
        return self.goodput_rps * 3600.0 / self.cost_usd_per_hour if self.cost_usd_per_hour else 0.0


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
                                    goodput_rps=plan.totals.goodput_rps))
    for alt in sorted(plan.alternatives, key=lambda a: a.rank):
        points.append(FrontierPoint(label=f"alt {alt.rank}", gpu_type=_gpu_type(alt.totals),
                                    tok_per_s_per_gpu=alt.totals.tok_per_s_per_gpu,
                                    tok_per_s_per_user=_per_user_tok_per_s(alt.latency),
                                    cost_usd_per_hour=alt.totals.cost_usd_per_hour, goodput_rps=alt.totals.goodput_rps))
    return points


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


def frontier_figure(points: list[FrontierPoint]) -> "Figure":
    """Tokens/s per GPU against tokens/s per user, Pareto front drawn as a line."""
    fig = _figure()
    ax = fig.add_subplot()
    known = [p for p in points if p.tok_per_s_per_user is not None]
    others = [p for p in known if not p.chosen]
    if others:
        ax.scatter([p.tok_per_s_per_user for p in others], [p.tok_per_s_per_gpu for p in others],
                   color="tab:gray", label="candidate plans")
    front = pareto_front(points)
    if front:
        ax.plot([p.tok_per_s_per_user for p in front], [p.tok_per_s_per_gpu for p in front],
                color="tab:blue", marker="o", label="Pareto frontier")
    for p in known:
        if p.chosen:
            ax.scatter([p.tok_per_s_per_user], [p.tok_per_s_per_gpu], color="tab:red", marker="*", s=160,
                       zorder=3, label="chosen plan")
        ax.annotate(p.label, (p.tok_per_s_per_user, p.tok_per_s_per_gpu), textcoords="offset points",
                    xytext=(5, 5), fontsize=8)
    missing = len(points) - len(known)
    if missing:
        ax.text(0.01, 0.01, f"{missing} plan(s) without TPOT not shown", transform=ax.transAxes, fontsize=8)
    ax.set_xlabel("tokens/s per user (1000 / TPOT p50 in ms) [tok/s/user]")
    ax.set_ylabel("output tokens/s per GPU [tok/s/GPU]")
    ax.set_title("Throughput per GPU against speed per user")
    ax.grid(True, alpha=0.3)
    if known:
        ax.legend(loc="best", fontsize=8)
    return fig


def cost_rate_figure(plan: Plan, points: list[FrontierPoint], base_rate_rps: float) -> "Figure":
    """Cost of the chosen layout scaled by whole instances, 0.1x..2x the base rate, plus other plans."""
    fig = _figure()
    ax = fig.add_subplot()
    if plan.pools and base_rate_rps > 0:
        rates = [base_rate_rps * step / 50 for step in range(5, 101)]
        ax.step(rates, [cost_at_rate_usd_per_hour(plan.pools, r) for r in rates], where="post",
                color="tab:blue", label="chosen layout, scaled by whole instances")
        ax.axvline(base_rate_rps, color="tab:gray", linestyle="--", linewidth=1, label="planned rate")
    for p in points:
        ax.scatter([p.goodput_rps], [p.cost_usd_per_hour], color="tab:red" if p.chosen else "tab:gray",
                   marker="*" if p.chosen else "o", zorder=3)
        ax.annotate(p.label, (p.goodput_rps, p.cost_usd_per_hour), textcoords="offset points", xytext=(5, -10),
                    fontsize=8)
    ax.set_xlabel("request rate [requests/s]")
    ax.set_ylabel("cost [USD/hour]")
    ax.set_title("Cost against request rate")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
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
    points = points if points is not None else frontier_points(plan)
    figures = {"frontier": frontier_figure(points), "cost_vs_rate": cost_rate_figure(plan, points, base_rate_rps)}
    by_type = gpu_type_figure(points) or plan_gpu_types_figure(plan)
    if by_type is not None:
        figures["gpu_types"] = by_type
    return figures
