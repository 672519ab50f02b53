"""Why the plan looks the way it does: binding constraints, notes, and the seeds' ratio check."""

from __future__ import annotations

from layoutopt.optimizer.candidates import Candidate, CandidateTable
from layoutopt.plan import RatioCheck
from layoutopt.optimizer.scaling import rate_rps
from layoutopt.optimizer.solver import SolveOutcome
from layoutopt.workloads.slo import SLO

# A constraint binds when less than this fraction of it is left over.
BINDING_SLACK_FRACTION = 0.02
# The plan "follows" the seeds' ratio when within this fraction of it.
RATIO_AGREEMENT_FRACTION = 0.05


def _slo_key(targets: dict[str, float]) -> str:
    return max(targets, key=lambda k: float(k[1:]))


def bottleneck_label(candidate: Candidate, slo: SLO) -> str:
    """What limits one instance's capacity, in the words of the SLO ('TTFT p90', 'decode KV capacity')."""
    kind = candidate.bottleneck
    if kind == "kv_capacity":
        return "decode KV capacity"
    if kind == "queueing" and candidate.role != "decode":
        return f"TTFT {_slo_key(slo.ttft_ms)}"
    if candidate.role == "prefill":
        return f"TTFT {_slo_key(slo.ttft_ms)} ({kind}-bound prefill)" if kind else f"TTFT {_slo_key(slo.ttft_ms)}"
    return f"TPOT {_slo_key(slo.tpot_ms)} ({kind}-bound decode)" if kind else f"TPOT {_slo_key(slo.tpot_ms)}"


def binding_constraints(table: CandidateTable, outcome: SolveOutcome, used: list[tuple[Candidate, int]],
                        slo: SLO, objective: str = "goodput-per-dollar") -> list[str]:
    """Constraints with (almost) no slack in the plan, budget first, then pools, then SLO terms."""
    binding: list[str] = []
    gpus: dict[str, int] = {}
    for c, n in used:
        gpus[c.gpu] = gpus.get(c.gpu, 0) + n * c.gpus_per_instance
    for gpu, limit in table.gpu_limits.items():
        smallest = min((c.gpus_per_instance for c in table.candidates if c.gpu == gpu), default=None)
        if smallest is not None and limit - gpus.get(gpu, 0) < smallest:
            binding.append(f"{gpu} count")
    for gpu, capacities in table.domain_capacity_gpus.items():
        for size, capacity in sorted(capacities.items()):
            grouped = sum(n * c.gpus_per_instance for c, n in used
                          if c.gpu == gpu and c.domain_group_gpus >= size)
            if size > 1 and grouped and capacity - grouped < size and capacity < table.gpu_limits.get(gpu, 0):
                binding.append(f"{gpu} NVLink domain packing")
                break
    for gpu, limit in (table.disaggregated_gpu_limits or {}).items():
        kv_gpus = sum(n * c.gpus_per_instance for c, n in used if c.gpu == gpu and c.is_disaggregated)
        smallest = min((c.gpus_per_instance for c in table.candidates if c.gpu == gpu and c.is_disaggregated),
                       default=None)
        if kv_gpus and smallest is not None and limit - kv_gpus < smallest:
            binding.append("prefill and decode in one rack")
    cost = sum(c.cost_usd_per_hour * n for c, n in used)
    if table.max_usd_per_hour is not None:
        cheapest = min((c.cost_usd_per_hour for c in table.candidates), default=0.0)
        if table.max_usd_per_hour - cost < cheapest:
            binding.append("$ cap")
    rate = outcome.rate_units
    # The cheapest fleet is sized by the rate it must serve; other objectives only when it is tight.
    near_target = bool(table.min_rate_rps) and (
        abs(rate_rps(rate) - table.min_rate_rps) <= table.min_rate_rps * BINDING_SLACK_FRACTION)
    if table.min_rate_rps and (objective == "min-cost" or near_target):
        binding.append("target rate")
    capacity: dict[str, float] = {}
    for c, n in used:
        capacity[c.role] = capacity.get(c.role, 0.0) + c.pool_capacity_rps(n)
    disaggregated_rps = rate_rps(outcome.disaggregated_rate_units)
    for role in ("prefill", "decode"):
        if disaggregated_rps and capacity.get(role, 0.0) <= disaggregated_rps * (1 + BINDING_SLACK_FRACTION):
            binding.append(f"{role} capacity")
    if disaggregated_rps:
        kv = max((c.kv_bytes_per_request for c, _ in used if c.role == "prefill"), default=0.0) * disaggregated_rps
        nic = sum(c.nic_gb_per_s * 1e9 * n for c, n in used if c.role == "prefill")
        if kv and nic and kv >= nic * (1 - BINDING_SLACK_FRACTION):
            binding.append("KV transfer bandwidth")
    for c, _ in used:
        label = bottleneck_label(c, slo)
        if label not in binding:
            binding.append(label)
    return binding


def _per_gpu(c: Candidate, tokens: float) -> float:
    """Tokens/s one GPU of ``c`` delivers at its SLO capacity (headroom included)."""
    return c.capacity_rps * tokens / c.gpus_per_instance


def ratio_check(table: CandidateTable, used: list[tuple[Candidate, int]],
                outcome: SolveOutcome | None = None) -> RatioCheck | None:
    """The plan's prefill:decode GPU split against N_p : N_d = (Tin / P) : (Tout / D) (seeds/002).

    P is the best prompt tok/s per GPU of any prefill candidate at the TTFT target and D the best
    output tok/s per GPU of any decode candidate at the TPOT target, both from the candidate table
    and independent of the plan, as the seeds' formula is meant to be used. The note explains a
    difference in two steps: the plan's pools may run other layouts (or GPU types) than the ones
    with the best P and D, which moves the formula to the pools' own rates; what is left comes from
    whole instances and spare capacity of a pool.
    """
    prefill = [(c, n) for c, n in used if c.role == "prefill"]
    decode = [(c, n) for c, n in used if c.role == "decode"]
    prefills, decodes = table.by_role("prefill"), table.by_role("decode")
    if not prefill or not decode or not prefills or not decodes:
        return None
    t_in, t_out = table.mean_input_tokens, table.mean_output_tokens
    best_p = max(prefills, key=lambda c: (_per_gpu(c, t_in), c.name))
    best_d = max(decodes, key=lambda c: (_per_gpu(c, t_out), c.name))
    p_best, d_best = _per_gpu(best_p, t_in), _per_gpu(best_d, t_out)
    prefill_gpus = sum(c.gpus_per_instance * n for c, n in prefill)
    decode_gpus = sum(c.gpus_per_instance * n for c, n in decode)
    p_plan = sum(c.pool_capacity_rps(n) for c, n in prefill) * t_in / prefill_gpus
    d_plan = sum(c.pool_capacity_rps(n) for c, n in decode) * t_out / decode_gpus
    formula = (t_in / p_best) / (t_out / d_best)
    own = (t_in / p_plan) / (t_out / d_plan)
    plan = prefill_gpus / decode_gpus
    served_rps = rate_rps(outcome.disaggregated_rate_units) if outcome is not None else None
    return RatioCheck(
        plan_prefill_gpus=prefill_gpus, plan_decode_gpus=decode_gpus, formula_prefill_to_decode=formula,
        plan_prefill_to_decode=plan, prefill_tok_per_s_per_gpu=p_best, decode_tok_per_s_per_gpu=d_best,
        best_prefill_candidate=best_p.name, best_decode_candidate=best_d.name,
        plan_prefill_tok_per_s_per_gpu=p_plan, plan_decode_tok_per_s_per_gpu=d_plan,
        formula_at_plan_rates=own,
        note=_ratio_note(formula, own, plan, prefill, decode, best_p, best_d, p_plan, d_plan, p_best, d_best,
                         prefill_gpus, decode_gpus, served_rps),
    )


def _ratio_note(formula: float, own: float, plan: float, prefill, decode, best_p: Candidate, best_d: Candidate,
                p_plan: float, d_plan: float, p_best: float, d_best: float, prefill_gpus: int, decode_gpus: int,
                served_rps: float | None) -> str:
    shown = (f"plan {prefill_gpus}:{decode_gpus} GPUs ({plan:.2f}) vs formula {formula:.2f} "
             f"(P {p_best:,.0f} tok/s/GPU {best_p.name}, D {d_best:,.0f} tok/s/GPU {best_d.name})")
    if abs(plan - formula) <= RATIO_AGREEMENT_FRACTION * formula:
        return f"{shown}: the plan follows the formula"
    reasons = []
    if abs(own - formula) > RATIO_AGREEMENT_FRACTION * formula:
        parts = []
        if p_plan < p_best * (1 - RATIO_AGREEMENT_FRACTION):
            parts.append(f"prefill runs at {p_plan:,.0f} tok/s/GPU, not P")
        if d_plan < d_best * (1 - RATIO_AGREEMENT_FRACTION):
            parts.append(f"decode runs at {d_plan:,.0f} tok/s/GPU, not D")
        cheaper = _cheaper_per_token(prefill, best_p) or _cheaper_per_token(decode, best_d)
        why = ("the layouts with the best rate per GPU are not the best per dollar" if cheaper
               else "the budget, the mode or the KV link favour other layouts")
        reasons.append(f"{' and '.join(parts) or 'the pools run other layouts'} ({why}): at the pools' own rates "
                       f"the formula gives {own:.2f}")
    if abs(plan - own) > RATIO_AGREEMENT_FRACTION * own:
        step_p = max(c.gpus_per_instance for c, _ in prefill)
        step_d = max(c.gpus_per_instance for c, _ in decode)
        if abs(own * decode_gpus - prefill_gpus) < step_p or abs(prefill_gpus / own - decode_gpus) < step_d:
            reasons.append(f"pools come in whole instances ({_instance_sizes(prefill)} GPUs per prefill, "
                           f"{_instance_sizes(decode)} per decode instance), so the split rounds")
        if served_rps:
            for role, pool in (("prefill", prefill), ("decode", decode)):
                capacity = sum(c.pool_capacity_rps(n) for c, n in pool)
                if capacity > served_rps * (1 + RATIO_AGREEMENT_FRACTION):
                    reasons.append(f"the {role} pool has {capacity / served_rps - 1:.0%} spare capacity over the "
                                   f"{served_rps:.2f} req/s it serves (the budget fits {role} instances better)")
    if len({c.gpu for c, _ in prefill + decode}) > 1:
        reasons.append("the pools use different GPU types, so per-GPU rates differ in price")
    if not reasons:
        reasons.append("the difference is within the rounding of whole instances")
    return f"{shown}: " + "; ".join(reasons)


def _instance_sizes(pool) -> str:
    """The GPUs per instance of a role's pools, e.g. "8" or "4 or 8" (a role may run several layouts)."""
    return " or ".join(str(size) for size in sorted({c.gpus_per_instance for c, _ in pool}))


def _cheaper_per_token(pool, best: Candidate) -> bool:
    """Whether some layout of ``pool`` delivers more tokens per dollar than the best-per-GPU one."""
    best_per_usd = best.capacity_rps / best.cost_usd_per_hour
    return any(c.capacity_rps / c.cost_usd_per_hour > best_per_usd * (1 + 1e-9) for c, _ in pool)


def filter_notes(table: CandidateTable) -> list[str]:
    considered = table.num_considered
    dropped = ", ".join(f"{f.name} {f.num_dropped}" for f in table.filters)
    return [f"{considered} layouts considered, {len(table.candidates)} candidates kept"
            + (f" (dropped: {dropped})" if dropped else "")]


def mode_note(table: CandidateTable, used: list[tuple[Candidate, int]]) -> str | None:
    """Why the plan runs the mode it does: best requests per dollar of each mode, per instance kind.

    Compares the best colocated instance with the best prefill + decode pair the engine can connect,
    each at its capacity (integrality and budget aside), and gives the seeds' split for that pair.
    """
    if table.mode != "auto":
        return f"mode fixed by --mode {table.mode}"
    colocated = table.by_role("colocated")
    prefill, decode = table.by_role("prefill"), table.by_role("decode")
    if not colocated or not (prefill and decode):
        return None
    best_colocated = max(colocated, key=lambda c: c.capacity_rps / c.cost_usd_per_hour)
    # The best pair the engine can connect (vLLM 0.13 refuses a decode TP below the prefill TP).
    barred = set(table.incompatible_pairs)
    pairs = [(p, d) for p in prefill for d in decode if (p.name, d.name) not in barred]
    if not pairs:
        return None
    best_prefill, best_decode = min(pairs, key=lambda pd: pd[0].cost_usd_per_hour / pd[0].capacity_rps
                                    + pd[1].cost_usd_per_hour / pd[1].capacity_rps)
    colocated_per_usd = best_colocated.capacity_rps / best_colocated.cost_usd_per_hour * 3600
    pair_usd_per_rps = (best_prefill.cost_usd_per_hour / best_prefill.capacity_rps
                        + best_decode.cost_usd_per_hour / best_decode.capacity_rps)
    pair_per_usd = 3600 / pair_usd_per_rps
    split = (best_decode.capacity_rps / best_decode.gpus_per_instance) / (
        best_prefill.capacity_rps / best_prefill.gpus_per_instance)
    roles = {c.role for c, _ in used}
    winner = "colocated" if roles == {"colocated"} else ("disaggregated" if "colocated" not in roles else "both")
    return (f"{winner} wins: best colocated {best_colocated.layout.short_name()} {colocated_per_usd:,.0f} requests/$ "
            f"vs prefill {best_prefill.layout.short_name()} + decode {best_decode.layout.short_name()} "
            f"{pair_per_usd:,.0f} requests/$, each at its full capacity with fractional instances (the plan's whole "
            f"instances and budget come on top; prefill:decode GPUs {split:.2f}:1 by the seeds' formula)")
