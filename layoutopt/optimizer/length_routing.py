r"""Routing by prompt length across pools: short prompts to some pools, long ones to others, when it pays.

Sets
    T           thresholds tried: "no split" and the prompt-length quantiles q in ``QUANTILES``
                (``length_split.candidate_thresholds``: distinct, both classes >= 1 % of requests)
    K_t         length classes of threshold t: {all} for no split, {short, long} otherwise; class k
                has the conditional input-length distribution and the rate share p_k
                (``length_split.split_by_input_length``)
Per threshold t and SLO shift d in ``LONG_SHIFTS`` (each class's own SLO, ``class_slos``: the long
class may meet each percentile target d lower, the short class then meets it d (1 - p) / p higher,
so the mixture meets the SLO as given): one CP-SAT model (``fleet.solve_fleet_tables``, the fleet machinery: each class a
member with its own candidate table, evaluated under its own lengths)
    n^k_c       instances of candidate c serving class k (its own pools: the router sends class k
                only there)
    r_k >= R p_k                    every class served at its share of the rate R, within the SLO
    sum_k GPUs of type g <= B_g,   sum_k cost <= C_max      one shared budget
    min sum_k cost_k; then, at that cost, the most rate
Decision over T x shifts: the cheapest proven plan. Status: optimal when every threshold's model is
proven (optimal within the tolerance, or infeasible) and the chosen plan is within the tolerance
of the smallest proven bound over T; the proof says "optimal over the thresholds tried", not over
every possible threshold.

Only ``min-cost`` (a rate to serve): a split serves its classes in the workload's fixed mix, which
the other objectives' free rates would break.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from layoutopt.engines import parse_engine_ref
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.budget import Budget, parse_budget
from layoutopt.hardware_catalog.catalog import load_catalog
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.enumeration import build_candidate_table
from layoutopt.optimizer.fleet import member_plan, solve_fleet_tables
from layoutopt.optimizer.scaling import COST_SCALE_PER_USD_PER_HOUR, IntegerTable, to_integer_table
from layoutopt.optimizer.solver import DEFAULT_TOLERANCE_FRACTION
from layoutopt.plan import SolverInfo
from layoutopt.plan.length_routing import LengthClass, LengthRoutedPlan, ThresholdOption
from layoutopt.workloads.length_split import candidate_thresholds, class_slos, split_by_input_length
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload, check_fits_context

QUANTILES = (0.5, 0.75, 0.9)
# Shares of requests by which the long class's percentiles and attainment may be lowered, the short
# class's raised to compensate (``length_split.class_slos``): 0 = each class meets the SLO as given.
LONG_SHIFTS = (0.0, 0.1)


def solve_options(options: list[list[IntegerTable]], gpu_limits: dict[str, int], max_cost_units: int | None,
                  time_limit_s: float, tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION) -> dict:
    """Solve each option (a list of class tables on one shared budget) for min cost; pick the cheapest.

    Returns ``results`` (one ``solve_fleet_tables`` result per option), ``best`` (index or None),
    ``status``, ``bound`` ($/h, the smallest proven bound over the options) and ``gap``.
    """
    share_s = time_limit_s / max(1, len(options))
    results = [solve_fleet_tables(tables, [1.0] * len(tables), gpu_limits, max_cost_units, "min-cost", share_s,
                                  tolerance_fraction) for tables in options]
    found = [i for i, r in enumerate(results) if r["members"] is not None]
    # Ties go to the earlier option: no split first, then thresholds in increasing quantile order.
    best = min(found, key=lambda i: (results[i]["value"], i)) if found else None
    proven = all(r["status"] in ("optimal", "infeasible") for r in results)
    bounds = [r["bound"] if r["members"] is not None else (math.inf if r["status"] == "infeasible" else 0.0)
              for r in results]
    bound = min(bounds) if bounds else math.inf
    if best is None:
        return dict(results=results, best=None, status="infeasible" if proven else "timeout", bound=None, gap=None)
    value = results[best]["value"]
    gap = max(0.0, (value - bound) / value) if value > 0 else 0.0
    optimal = proven and gap <= tolerance_fraction * (1 + 1e-6) + 1e-9
    timed_out = any(r["status"] == "timeout" for r in results)
    status = "optimal" if optimal else ("timeout" if timed_out else "feasible")
    return dict(results=results, best=best, status=status, bound=bound, gap=gap)


def _targets_text(slo: SLO) -> str:
    parts = [f"TTFT {k} <= {v:g} ms" for k, v in slo.ttft_ms.items()]
    parts += [f"TPOT {k} <= {v:g} ms" for k, v in slo.tpot_ms.items()]
    return ", ".join(parts) + f", attainment {slo.attainment:g}"


def _class_rows(split, rate_rps: float, max_tokens: int) -> list[tuple[str, int, int, float, Workload]]:
    """(name, min input, max input, share, workload) per class of a split (None: no split)."""
    if split is None:
        return []
    t = split.threshold_tokens
    return [("short", 1, t, split.short_fraction, split.short),
            ("long", t + 1, max_tokens, 1 - split.short_fraction, split.long)]


def solve_length_routed(model: str, budget: str | Budget, slo: SLO, workload: Workload, rate_rps: float | None = None,
                        *, quantiles: tuple[float, ...] = QUANTILES, long_shifts: tuple[float, ...] = LONG_SHIFTS,
                        mode: str = "auto", engine: str = "vllm",
                        precision: str = "auto", headroom: float = 0.7, time_limit_s: float = 10.0,
                        tolerance_fraction: float = DEFAULT_TOLERANCE_FRACTION, gpus_path: str | Path | None = None,
                        prices_path: str | Path | None = None) -> LengthRoutedPlan:
    """The cheapest plan serving ``rate_rps`` with or without routing prompts by length (see the module docstring).

    ``time_limit_s`` is CP-SAT deterministic time shared by the thresholds' models; candidate
    evaluation (one table per class and threshold) comes on top.
    """
    if not time_limit_s > 0 or not math.isfinite(time_limit_s):
        raise InputError("--time-limit", time_limit_s, "seconds > 0")
    if not 0 <= tolerance_fraction <= 0.5:
        raise InputError("--tolerance", tolerance_fraction, "a fraction in [0, 0.5]")
    rate = rate_rps if rate_rps is not None else workload.arrival_rate_rps
    if rate is None:
        raise InputError("--rate", None, "--route-by-length plans for a rate: give --rate (objective min-cost)")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate <= 0:
        raise InputError("--rate", rate, "a finite rate > 0 in req/s")
    if not quantiles or any(not 0 < q < 1 for q in quantiles):
        raise InputError("quantiles", quantiles, "prompt-length quantiles strictly between 0 and 1, e.g. (0.5, 0.9)")
    if not long_shifts or any(not 0 <= d < 0.5 for d in long_shifts):
        raise InputError("long_shifts", long_shifts, "shares of requests in [0, 0.5), e.g. (0.0, 0.1)")
    if isinstance(engine, str):
        engine = str(parse_engine_ref(engine))
    spec = get_model(model)
    check_fits_context(workload, spec.max_context_tokens, spec.name, "workload")
    catalog = load_catalog(gpus_path=gpus_path, prices_path=prices_path)
    parsed = budget if isinstance(budget, Budget) else parse_budget(budget, catalog)
    gpus = ([catalog.gpu(n) for n in parsed.gpu_counts] if parsed.gpu_counts
            else [g for g in catalog.gpus if g.price is not None])
    workload = workload.with_arrival_rate(rate)

    def table(w: Workload, class_rate: float, class_slo: SLO):
        return build_candidate_table(spec, gpus, w.with_arrival_rate(class_rate), class_slo,
                                     gpu_limits=dict(parsed.gpu_counts), max_usd_per_hour=parsed.max_usd_per_hour,
                                     min_rate_rps=class_rate, mode=mode, engine=engine, precision=precision,
                                     headroom=headroom)

    # Options: no split, then each threshold (increasing quantile) with each SLO shift (increasing).
    thresholds = []
    for q, t in candidate_thresholds(workload, quantiles):
        split = split_by_input_length(workload, t)
        for shift in dict.fromkeys(long_shifts):
            thresholds.append((q, t, shift, split, class_slos(slo, split.short_fraction, shift)))
    class_rows = [[("all", 1, spec.max_context_tokens, 1.0, workload, slo)]]
    for _, _, _, split, (short_slo, long_slo) in thresholds:
        (s_name, s_low, s_high, s_share, s_w), (l_name, l_low, l_high, l_share, l_w) = _class_rows(
            split, rate, spec.max_context_tokens)
        class_rows.append([(s_name, s_low, s_high, s_share, s_w, short_slo),
                           (l_name, l_low, l_high, l_share, l_w, long_slo)])
    tables = [[table(w, rate * share, class_slo) for _, _, _, share, w, class_slo in rows] for rows in class_rows]
    integer = [[to_integer_table(t) for t in option] for option in tables]
    max_cost = integer[0][0].max_cost_units
    started = time.perf_counter()  # solver time, as solve's wall_time_s: candidate evaluation is not counted
    solved = solve_options(integer, dict(parsed.gpu_counts), max_cost, time_limit_s, tolerance_fraction)
    wall_s = time.perf_counter() - started
    results = solved["results"]
    options = [ThresholdOption(threshold_tokens=None, status=results[0]["status"],
                               cost_usd_per_hour=results[0].get("value") if results[0]["members"] else None,
                               bound_usd_per_hour=results[0].get("bound"))]
    for (q, t, shift, split, _), r in zip(thresholds, results[1:]):
        options.append(ThresholdOption(threshold_tokens=t, quantile=q, short_fraction=split.short_fraction,
                                       long_shift_fraction=shift, status=r["status"],
                                       cost_usd_per_hour=r.get("value") if r["members"] else None,
                                       bound_usd_per_hour=r.get("bound")))
    best = solved["best"]
    points = list(dict.fromkeys(f"{t:,} tokens (p{round(q * 100):d})" for q, t, *_ in thresholds))
    shifts = ", ".join(f"{d:g}" for d in dict.fromkeys(long_shifts))
    tried = ", ".join(["no split"] + points) + (f"; long-class SLO shifts {shifts}" if points else "")
    budget_text = parsed.text or parsed.describe()
    classes: list[LengthClass] = []
    by_type: dict[str, int] = {}
    cost = None
    if best is not None:
        chosen = results[best]
        cost = chosen["value"]
        for (name, low, high, share, w, class_slo), tab, member in zip(class_rows[best], tables[best],
                                                                         chosen["members"]):
            plan = member_plan(member, chosen["status"], f"the {name} class of the length-routed plan",
                               model=spec, table=tab, slo=class_slo, workload=w.with_arrival_rate(rate * share),
                               objective="min-cost", engine=engine, headroom=headroom, budget=parsed,
                               time_limit_s=time_limit_s, tolerance_fraction=tolerance_fraction)
            for g, n in plan.totals.gpus_by_type.items():
                by_type[g] = by_type.get(g, 0) + n
            classes.append(LengthClass(name=name, min_input_tokens=low, max_input_tokens=high,
                                       rate_share_fraction=share, rate_rps=rate * share,
                                       mean_input_tokens=round(w.mean_input_tokens, 1), slo=class_slo, plan=plan))
        cost = sum(c.plan.totals.cost_usd_per_hour for c in classes)
    no_split = options[0].cost_usd_per_hour
    saving = saving_fraction = None
    notes = [f"thresholds tried: {tried}; each is one CP-SAT model over its length classes on the shared budget"]
    if cost is not None and no_split is not None:
        saving = round(no_split - cost, 6) + 0.0
        saving_fraction = saving / no_split if no_split > 0 else 0.0
        if best == 0:
            notes.append("no split is cheapest: routing by length does not pay here")
        else:
            notes.append(f"routing prompts of at most {classes[0].max_input_tokens:,} tokens to their own pools "
                         f"saves ${saving:,.2f}/h ({saving_fraction:.1%}) against no split (${no_split:,.2f}/h)")
            if options[best].long_shift_fraction:
                notes.append(f"each class meets its own SLO (classes[].slo): the long class "
                             f"{_targets_text(classes[1].slo)}, the short class {_targets_text(classes[0].slo)}; "
                             f"together, {classes[0].rate_share_fraction:.1%} x short + "
                             f"{classes[1].rate_share_fraction:.1%} x long meet the SLO as given, "
                             f"{_targets_text(slo)}")
    elif cost is not None:
        notes.append("without routing by length no plan serves the rate within the SLO on this budget")
    bound, gap = solved["bound"], solved["gap"]
    if best is None:
        proof = f"no plan over the thresholds tried ({tried})"
    else:
        proof = (f"min-cost ${cost:,.2f}/h over the thresholds tried ({tried}): within {gap:.2%} of the smallest "
                 f"bound ${bound:,.2f}/h" + (" (every threshold's model proven)"
                                            if all(o.status in ("optimal", "infeasible") for o in options)
                                            else " (not every threshold's model proven: time limit)")
                 + "; thresholds not tried are not covered")
    solver = SolverInfo(status=solved["status"], wall_time_s=wall_s, objective_value=cost,
                        best_bound=bound if bound is None or math.isfinite(bound) else None, gap=gap,
                        num_candidates=sum(len(t.candidates) for option in integer for t in option),
                        objective_unit="$/h", time_limit_s=time_limit_s,
                        num_layouts_considered=sum(t.num_considered for option in tables for t in option),
                        tolerance_fraction=tolerance_fraction, proof=proof)
    return LengthRoutedPlan(status=solved["status"], model=spec.name, budget=budget_text, rate_rps=rate, slo=slo,
                            threshold_tokens=None if best in (None, 0) else thresholds[best - 1][1], classes=classes,
                            long_shift_fraction=0.0 if best in (None, 0) else thresholds[best - 1][2],
                            cost_usd_per_hour=cost, gpus_by_type=by_type, no_split_cost_usd_per_hour=no_split,
                            saving_usd_per_hour=saving, saving_fraction=saving_fraction, options=options,
                            solver=solver, notes=notes)


__all__ = ["QUANTILES", "solve_length_routed", "solve_options"]
