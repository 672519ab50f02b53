"""Check a plan against the candidate table, independently of the solver.

``plan_violations`` recomputes every constraint family from the float ``CandidateTable`` (it
imports nothing from the CP-SAT side), so tests can hold the solver to the problem statement and
the API can refuse to return a plan that breaks its own constraints.
"""

from __future__ import annotations

from collections.abc import Mapping

from layoutopt.optimizer.candidates import CandidateTable

# Relative slack for float comparisons; the integer model rounds conservatively, so a correct
# plan passes with room to spare.
TOLERANCE_FRACTION = 1e-6


def _exceeds(value: float, limit: float) -> bool:
    return value > limit * (1 + TOLERANCE_FRACTION) + 1e-9


def plan_violations(table: CandidateTable, counts: Mapping[str, int], disaggregated_rate_rps: float,
                    colocated_rate_rps: float) -> list[str]:
    """Every constraint the plan breaks, as readable lines (empty when the plan is valid)."""
    by_name = {c.name: c for c in table.candidates}
    problems = [f"unknown candidate {name!r}" for name in counts if name not in by_name]
    problems += [f"negative count for {name}" for name, n in counts.items() if n < 0]
    used = {name: n for name, n in counts.items() if name in by_name and n > 0}

    gpus: dict[str, int] = {}
    for name, n in used.items():
        gpus[by_name[name].gpu] = gpus.get(by_name[name].gpu, 0) + n * by_name[name].gpus_per_instance
    for gpu, count in sorted(gpus.items()):
        limit = table.gpu_limits.get(gpu)
        if limit is not None and count > limit:
            problems.append(f"{gpu} count {count} exceeds the budget of {limit}")
        if limit is None and table.max_usd_per_hour is None:
            problems.append(f"{gpu} is not in the budget")

    for gpu, capacities in sorted(table.domain_capacity_gpus.items()):
        for size, capacity in sorted(capacities.items()):
            grouped = sum(n * by_name[name].gpus_per_instance for name, n in used.items()
                          if by_name[name].gpu == gpu and by_name[name].domain_group_gpus >= size)
            if grouped > capacity:
                problems.append(f"{grouped} {gpu} GPUs in stage groups of {size}+ GPUs exceed the {capacity} "
                                "the cluster's NVLink domains hold")
        largest = max(capacities, default=0)
        for name in used:
            if by_name[name].gpu == gpu and by_name[name].domain_group_gpus > largest:
                problems.append(f"{name}: a group of {by_name[name].domain_group_gpus} GPUs fits no "
                                f"NVLink domain (at most {largest} free)")
    for gpu, limit in sorted((table.disaggregated_gpu_limits or {}).items()):
        kv_gpus = sum(n * by_name[name].gpus_per_instance for name, n in used.items()
                      if by_name[name].gpu == gpu and by_name[name].is_disaggregated)
        if kv_gpus > limit:
            problems.append(f"prefill and decode use {kv_gpus} {gpu} GPUs; one rack holds {limit}")

    cost = sum(by_name[name].cost_usd_per_hour * n for name, n in used.items())
    if table.max_usd_per_hour is not None and _exceeds(cost, table.max_usd_per_hour):
        problems.append(f"cost {cost:.2f} $/h exceeds the cap of {table.max_usd_per_hour:.2f} $/h")

    def capacity(role: str) -> float:
        return sum(by_name[name].pool_capacity_rps(n) for name, n in used.items() if by_name[name].role == role)

    for role, rate in (("prefill", disaggregated_rate_rps), ("decode", disaggregated_rate_rps),
                       ("colocated", colocated_rate_rps)):
        if _exceeds(rate, capacity(role)):
            problems.append(f"{role} capacity {capacity(role):.4f} req/s is below the rate {rate:.4f} req/s")

    total = disaggregated_rate_rps + colocated_rate_rps
    if table.min_rate_rps is not None and _exceeds(table.min_rate_rps, total):
        problems.append(f"rate {total:.4f} req/s is below the target {table.min_rate_rps:.4f} req/s")

    if disaggregated_rate_rps > 0:
        prefill = [by_name[name] for name in used if by_name[name].role == "prefill"]
        kv_bytes = max((c.kv_bytes_per_request for c in prefill), default=0.0) * disaggregated_rate_rps
        for role in ("prefill", "decode"):
            bandwidth = sum(by_name[name].nic_gb_per_s * 1e9 * n for name, n in used.items()
                            if by_name[name].role == role)
            if _exceeds(kv_bytes, bandwidth):
                problems.append(f"KV traffic {kv_bytes / 1e9:.2f} GB/s exceeds the {role} pool's "
                                f"{bandwidth / 1e9:.2f} GB/s")

    for prefill_name, decode_name in table.incompatible_pairs:
        if prefill_name in used and decode_name in used:
            problems.append(f"{prefill_name} and {decode_name} are used together, but the engine cannot hand KV "
                            "from one to the other")

    roles = {by_name[name].role for name in used}
    if table.mode == "colocated" and roles & {"prefill", "decode"}:
        problems.append("--mode colocated but the plan has prefill/decode pools")
    if table.mode == "disaggregated" and "colocated" in roles:
        problems.append("--mode disaggregated but the plan has colocated instances")
    return problems
