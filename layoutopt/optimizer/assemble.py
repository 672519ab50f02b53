"""Turn a solver outcome (instances per candidate, rates) into the Plan's pools, totals and latency."""

from __future__ import annotations

from layoutopt.optimizer.candidates import Candidate, CandidateTable
from layoutopt.optimizer.latency import combine, fraction_within
from layoutopt.plan import Latency, Mode, Pool, Totals
from layoutopt.optimizer.scaling import rate_rps
from layoutopt.optimizer.solver import SolveOutcome
from layoutopt.workloads.slo import SLO

ROLE_ORDER = {"prefill": 0, "decode": 1, "colocated": 2}
SECONDS_PER_HOUR = 3600.0


def used_candidates(table: CandidateTable, outcome: SolveOutcome) -> list[tuple[Candidate, int]]:
    """(candidate, instances) of the plan, prefill pools first, then decode, then colocated."""
    by_name = {c.name: c for c in table.candidates}
    used = [(by_name[name], n) for name, n in outcome.counts.items() if n > 0]
    return sorted(used, key=lambda item: (ROLE_ORDER[item[0].role], item[0].gpu, item[0].name))


def plan_mode(used: list[tuple[Candidate, int]]) -> Mode:
    roles = {c.role for c, _ in used}
    if roles == {"colocated"}:
        return "colocated"
    if "colocated" in roles:
        return "mixed"
    return "disaggregated"


def pools_of(used: list[tuple[Candidate, int]]) -> list[Pool]:
    pools = []
    for c, n in used:
        layout = c.layout
        pools.append(Pool(
            role=c.role, gpu=c.gpu, instances=n, gpus_per_instance=layout.gpus_per_instance,
            tp_size=layout.tp_size, pp_size=layout.pp_size, ep_size=layout.ep_size, dp_size=layout.dp_size,
            dcp_size=layout.dcp_size, pcp_size=layout.pcp_size, precision=layout.weight_precision,
            kv_precision=layout.kv_precision, max_batch_size=c.max_batch_size, capacity_rps=c.capacity_rps,
            cost_usd_per_hour=c.cost_usd_per_hour * n,
        ))
    return pools


def totals_of(pools: list[Pool], goodput_rps: float, mean_output_tokens: float) -> Totals:
    gpus_by_type: dict[str, int] = {}
    for pool in pools:
        gpus_by_type[pool.gpu] = gpus_by_type.get(pool.gpu, 0) + pool.num_gpus
    gpus = sum(gpus_by_type.values())
    cost = sum(pool.cost_usd_per_hour for pool in pools)
    output_tok_per_s = goodput_rps * mean_output_tokens
    return Totals(
        gpus=gpus, gpus_by_type=gpus_by_type, cost_usd_per_hour=cost, goodput_rps=goodput_rps,
        output_tok_per_s=output_tok_per_s, tok_per_s_per_gpu=output_tok_per_s / gpus if gpus else 0.0,
        requests_per_usd=goodput_rps * SECONDS_PER_HOUR / cost if cost else 0.0,
    )


def traffic_weights(used: list[tuple[Candidate, int]], outcome: SolveOutcome) -> dict[str, float]:
    """Share of all requests each used candidate's pool serves (per phase it runs).

    Inside a role, a load balancer spreads requests in proportion to capacity; the two modes
    carry the rates the solver assigned them.
    """
    total = outcome.rate_units
    share = {"colocated": outcome.colocated_rate_units / total if total else 0.0,
             "disaggregated": outcome.disaggregated_rate_units / total if total else 0.0}
    capacity: dict[str, float] = {}
    for c, n in used:
        capacity[c.role] = capacity.get(c.role, 0.0) + c.pool_capacity_rps(n)
    weights = {}
    for c, n in used:
        mode = "colocated" if c.role == "colocated" else "disaggregated"
        weights[c.name] = share[mode] * c.pool_capacity_rps(n) / capacity[c.role] if capacity[c.role] else 0.0
    return weights


def latency_of(used: list[tuple[Candidate, int]], outcome: SolveOutcome, slo: SLO) -> Latency | None:
    """Plan percentiles from the pools' percentiles at capacity, and the share meeting the SLO.

    Attainment is the share of requests within the strictest TTFT target times the share within
    the strictest TPOT target: the two phases are treated as independent.
    """
    weights = traffic_weights(used, outcome)
    ttft = [(weights[c.name], c.ttft_ms) for c, _ in used if c.ttft_ms is not None and weights[c.name] > 0]
    tpot = [(weights[c.name], c.tpot_ms) for c, _ in used if c.tpot_ms is not None and weights[c.name] > 0]
    if not ttft or not tpot:
        return None
    _, ttft_target = slo.strictest_ttft
    _, tpot_target = slo.strictest_tpot
    attainment = fraction_within(ttft, ttft_target) * fraction_within(tpot, tpot_target)
    return Latency(ttft_ms=combine(ttft), tpot_ms=combine(tpot), slo_attainment=min(1.0, max(0.0, attainment)))


def goodput_rps(outcome: SolveOutcome) -> float:
    return rate_rps(outcome.rate_units)
