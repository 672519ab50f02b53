"""Why the plan looks the way it does: binding constraints, notes, and the seeds' ratio check."""

from __future__ import annotations

from layoutopt.optimizer.candidates import Candidate, CandidateTable
from layoutopt.plan import RatioCheck
from layoutopt.optimizer.scaling import rate_rps
from layoutopt.optimizer.solver import SolveOutcome
from layoutopt.workloads.slo import SLO

# A constraint binds when less than this fraction of it is left over.
BINDING_SLACK_FRACTION = 0.02


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
        capacity[c.role] = capacity.get(c.role, 0.0) + c.capacity_rps * n
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


def ratio_check(table: CandidateTable, used: list[tuple[Candidate, int]]) -> RatioCheck | None:
    """The plan's prefill:decode GPU split against N_p : N_d = (Tin / P) : (Tout / D) (seeds/002).

    P and D are the per-GPU token rates of the plan's own pools at their SLO capacity (with
    headroom), so the formula and the plan use the same numbers; what remains are the reasons
    the note names: whole instances, pools that differ in kind, and budget slack.
    """
    prefill = [(c, n) for c, n in used if c.role == "prefill"]
    decode = [(c, n) for c, n in used if c.role == "decode"]
    if not prefill or not decode:
        return None
    prefill_gpus = sum(c.gpus_per_instance * n for c, n in prefill)
    decode_gpus = sum(c.gpus_per_instance * n for c, n in decode)
    p_per_gpu = sum(c.capacity_rps * n for c, n in prefill) * table.mean_input_tokens / prefill_gpus
    d_per_gpu = sum(c.capacity_rps * n for c, n in decode) * table.mean_output_tokens / decode_gpus
    formula = (table.mean_input_tokens / p_per_gpu) / (table.mean_output_tokens / d_per_gpu)
    plan = prefill_gpus / decode_gpus
    return RatioCheck(
        plan_prefill_gpus=prefill_gpus, plan_decode_gpus=decode_gpus, formula_prefill_to_decode=formula,
        plan_prefill_to_decode=plan, prefill_tok_per_s_per_gpu=p_per_gpu, decode_tok_per_s_per_gpu=d_per_gpu,
        note=_ratio_note(formula, plan, prefill, decode, prefill_gpus, decode_gpus),
    )


def _ratio_note(formula: float, plan: float, prefill, decode, prefill_gpus: int, decode_gpus: int) -> str:
    shown = f"plan {prefill_gpus}:{decode_gpus} GPUs ({plan:.2f}) vs formula {formula:.2f}"
    if abs(plan - formula) <= 0.05 * formula:
        return f"{shown}: the plan follows the formula"
    ideal_prefill = formula * decode_gpus
    step = max(c.gpus_per_instance for c, _ in prefill)
    reasons = []
    if abs(ideal_prefill - prefill_gpus) < step or abs(prefill_gpus / formula - decode_gpus) < max(
            c.gpus_per_instance for c, _ in decode):
        reasons.append(f"pools come in whole instances ({step} GPUs per prefill instance), so the split rounds")
    if plan > formula:
        reasons.append("the prefill pool has spare capacity: its capacity is TTFT-bound at the SLO, or the "
                       "remaining budget fits prefill instances better than decode ones")
    else:
        reasons.append("the decode pool has spare capacity: the remaining budget fits decode instances better")
    if len({c.gpu for c, _ in prefill + decode}) > 1:
        reasons.append("the pools use different GPU types, so per-GPU rates differ in price")
    return f"{shown}: " + "; ".join(reasons)


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
            f"{pair_per_usd:,.0f} requests/$ (prefill:decode GPUs {split:.2f}:1 by the seeds' formula)")
