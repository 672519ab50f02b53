"""The placement model's constraints and objective terms, evaluated on plain counts (no solver).

A placement is ``counts[(pool index, domain name)]``: stage groups of a pool in a domain, the
same form the solver returns. ``model_violations`` lists the model's constraints it breaks and
``objective_values`` gives each objective term (keys as ``objectives.*.key``) with exactly the
value the CP-SAT expression takes on the same counts, so a greedy placement can be compared with
a lower bound, and a CP-SAT solution checked against its own objective.
"""

from __future__ import annotations

from collections import defaultdict

from layoutopt.topology.placement.data import PlacementData

Counts = dict[tuple[int, str], int]


def stages_per_rack(data: PlacementData, counts: Counts) -> dict[tuple[int, str], int]:
    """(pool index, rack) -> stage groups of the pool in the rack."""
    rack_of = {d.name: d.rack for d in data.domains}
    totals: dict[tuple[int, str], int] = defaultdict(int)
    for (pool_index, name), n in counts.items():
        if n:
            totals[pool_index, rack_of[name]] += n
    return totals


def kv_balance_units(data: PlacementData, counts: Counts) -> dict[str, int]:
    """Rack -> KV units its stage groups send minus those they take."""
    units = {d.pool_index: d.kv_units_per_stage for d in data.demands}
    balance = dict.fromkeys(data.racks, 0)
    for (pool_index, rack), n in stages_per_rack(data, counts).items():
        balance[rack] += units[pool_index] * n
    return balance


def model_violations(data: PlacementData, counts: Counts, enforce_kv_capacity: bool = True) -> list[str]:
    """The model's constraints ``counts`` breaks: stages placed, domain capacity, KV uplinks."""
    problems = []
    free = {d.name: d for d in data.domains}
    demands = {d.pool_index: d for d in data.demands}
    placed: dict[int, int] = defaultdict(int)
    used: dict[str, int] = defaultdict(int)
    for (pool_index, name), n in counts.items():
        if n < 0:
            problems.append(f"negative count {n} of {demands[pool_index].label} in {name}")
        if n and (name not in free or free[name].gpu != demands[pool_index].gpu):
            problems.append(f"{demands[pool_index].label} placed in {name}, not a domain of its GPU type")
            continue
        if n > demands[pool_index].per_domain_limit:
            problems.append(f"{n} groups of {demands[pool_index].label} in {name}: its instances' parts go to "
                            f"different domains, so at most {demands[pool_index].per_domain_limit}")
        placed[pool_index] += n
        used[name] += n * demands[pool_index].stage_gpus
    problems += [f"{d.label}: {placed[d.pool_index]} of {d.num_stages} stage groups placed"
                 for d in data.demands if placed[d.pool_index] != d.num_stages]
    problems += [f"{name}: {n} GPUs used of {free[name].num_free} free" for name, n in used.items()
                 if name in free and n > free[name].num_free]
    if enforce_kv_capacity and data.uplink_kv_units is not None:
        for rack, balance in kv_balance_units(data, counts).items():
            if abs(balance) > data.uplink_kv_units[rack]:
                problems.append(f"rack {rack}: KV balance {balance} units over its uplink's "
                                f"{data.uplink_kv_units[rack]}")
    return problems


def objective_values(data: PlacementData, counts: Counts) -> dict[str, int]:
    """Every objective term's value on ``counts`` (keys: spread, pipelines_in_rack, kv_egress,
    pipelines_in_domain, domains)."""
    demands = {d.pool_index: d for d in data.demands}
    per_rack = stages_per_rack(data, counts)
    worst: dict[int, int] = defaultdict(int)
    pipelines_in_rack = 0
    for (pool_index, _), n in per_rack.items():
        pp_size = demands[pool_index].pp_size
        worst[pool_index] = max(worst[pool_index], -(-n // pp_size))
        pipelines_in_rack += n % pp_size
    spread = sum(worst[d.pool_index] for d in data.demands if d.num_instances >= 2)
    kv_egress = sum(max(0, b) for b in kv_balance_units(data, counts).values()) if data.has_kv else 0
    pipelines_in_domain = sum(n % demands[p].pp_size for (p, _), n in counts.items())
    domains = len({name for (_, name), n in counts.items() if n})
    return {"spread": spread, "pipelines_in_rack": pipelines_in_rack, "kv_egress": kv_egress,
            "pipelines_in_domain": pipelines_in_domain, "domains": domains}
