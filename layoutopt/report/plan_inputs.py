"""The workload and SLO a plan was made for, from ``plan.workload``.

Plans from ``solve`` record ``{"workload": ..., "slo": ..., "budget": ...}``; hand-written plans
may hold the workload's fields at the top level with an ``slo`` beside them. Both are read.
"""

from __future__ import annotations

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload


def plan_workload(plan: Plan) -> Workload | None:
    from layoutopt.workloads.loaders import workload_from_dict

    data = plan.workload.get("workload") if isinstance(plan.workload.get("workload"), dict) else plan.workload
    fields = {k: v for k, v in data.items() if k not in ("slo", "budget", "headroom_fraction")}
    if "input_tokens" not in fields:
        return None
    try:
        return workload_from_dict(fields, field="plan.workload")
    except InputError:
        raise
    except ValueError as error:
        raise InputError("plan.workload", "...", "a workload as solve records it", str(error)) from None


def plan_slo(plan: Plan) -> SLO | None:
    from layoutopt.workloads.loaders import slo_from_dict

    data = plan.workload.get("slo")
    return slo_from_dict(data, field="plan.workload.slo") if isinstance(data, dict) else None


def plan_rate_rps(plan: Plan) -> float | None:
    """The arrival rate the plan was made for, else the goodput it serves."""
    workload = plan_workload(plan)
    if workload is not None and workload.arrival_rate_rps:
        return float(workload.arrival_rate_rps)
    return plan.totals.goodput_rps if plan.totals else None


def placed_on_cluster(plan: Plan) -> bool:
    """Whether ``placement[]`` names the nodes of a real cluster (a ``--cluster`` file) rather than
    the standard nodes a plain budget expands to. ``plan.cluster`` says so; plans that predate it
    record the cluster in their budget text (``"cluster <name>"``, optimizer/cluster_fit.py)."""
    if plan.cluster is not None:
        return True
    budget = plan.workload.get("budget") if isinstance(plan.workload, dict) else None
    return isinstance(budget, str) and budget.startswith("cluster ")
