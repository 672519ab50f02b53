"""The exact minimum of pipeline stages across NVLink domains when the spread fixes each rack's
share: a dynamic program per rack shape, then one over racks.

With spread over racks proven at S and each pool's own bound t_p (``spread_instances_per_rack``)
adding up to S, every optimal placement has at most t_p instances of pool p in any rack. A pool
with exactly t_p x |racks| instances must then hold exactly t_p in every rack ("forced"). When
every pool but at most one ("free", which sends and takes no KV) is forced, the racks are coupled
only through the free pool's total:

    min sum_r g_r(x_r)   s.t.  sum_r x_r = stages of the free pool,  0 <= x_r <= pp t_free

where g_r(x) is the fewest stages split over domains of any packing of rack r's domains with the
forced pools' shares and x stages of the free pool (a multiple of pp when pipelines in one rack
are proven 0). g_r is computed exactly by a dynamic program over the rack's domains (one fill
pattern or none per domain, the state the stages placed per pool), once per rack shape, and the
allocation by a min-plus dynamic program over racks. KV: forced pools fix every rack's KV
balance, so KV is a constant the placement cannot change; the uplinks are checked.

This is the optimum of the placement model with the earlier objectives held, not a relaxation
of it, except that KV egress and spread are taken as given (they are fixed by the shares).
Returns None whenever the structure does not hold, or the state space is large
(``MAX_STATES``); then the LP and pooled bounds apply alone.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from layoutopt.topology.placement.data import PlacementData

# Largest per-rack state space (product over pools of stages per rack + 1) the DP runs over.
MAX_STATES = 50_000
INFEASIBLE = np.iinfo(np.int64).max // 4


def forced_shares(data: PlacementData, own: dict[int, int]) -> tuple[dict[int, int], int | None] | None:
    """(pool index -> stages per rack of each forced pool, the free pool or None), or None when
    more than one pool is free or the free one carries KV."""
    num_racks = len(data.racks)
    forced, free = {}, []
    for d in data.demands:
        if d.pool_index in own and d.num_instances == own[d.pool_index] * num_racks:
            forced[d.pool_index] = own[d.pool_index] * d.pp_size
        else:
            free.append(d)
    if len(free) > 1 or (free and free[0].kv_units_per_stage):
        return None
    return forced, (free[0].pool_index if free else None)


def _rack_values(data: PlacementData, rack: str, dims: list[int], order: list[int]) -> np.ndarray:
    """Fewest split stages for each state (stages per pool in ``order``) of rack ``rack``."""
    demands = {d.pool_index: d for d in data.demands}
    values = np.full(dims, INFEASIBLE, dtype=np.int64)
    values[(0,) * len(dims)] = 0
    position = {p: i for i, p in enumerate(order)}
    for cls in data.classes:
        if cls.rack != rack:
            continue
        moves = []
        for pattern in cls.patterns:
            shift = [0] * len(dims)
            for p, a in zip(cls.pool_indices, pattern):
                shift[position[p]] = a
            if all(s < n for s, n in zip(shift, dims)):
                split = sum(a % demands[p].pp_size for p, a in zip(cls.pool_indices, pattern))
                moves.append((tuple(shift), split))
        for _ in cls.members:
            after = values.copy()
            for shift, split in moves:
                target = tuple(slice(s, None) for s in shift)
                source = tuple(slice(0, n - s) for s, n in zip(shift, dims))
                np.minimum(after[target], values[source] + split, out=after[target])
            values = np.minimum(after, INFEASIBLE)
    return values


def split_stages_optimum(data: PlacementData, proven: dict[str, int], own: dict[int, int]) -> int | None:
    """The fewest pipeline stages across NVLink domains given the proven spread (and pipelines in
    one rack), when the shares are forced as described above; None otherwise."""
    if not data.spread_racks or "spread" not in proven or sum(own.values()) != proven["spread"]:
        return None
    if any(not c.patterns for c in data.classes):
        return None
    shares = forced_shares(data, own)
    if shares is None:
        return None
    forced, free = shares
    demands = {d.pool_index: d for d in data.demands}
    order = sorted(forced) + ([free] if free is not None else [])
    free_cap = 0
    if free is not None:
        pool = demands[free]
        free_cap = pool.pp_size * own[free] if free in own else pool.num_stages
    dims = [forced[p] + 1 for p in sorted(forced)] + ([free_cap + 1] if free is not None else [])
    if math.prod(dims) > MAX_STATES:
        return None
    whole_only = proven.get("pipelines_in_rack", 1) == 0
    shape: dict[str, list] = defaultdict(list)
    for d in data.domains:
        shape[d.rack].append((d.gpu, d.num_free))
    by_shape: dict[tuple, np.ndarray] = {}
    per_rack = []
    target = tuple(forced[p] for p in sorted(forced))
    for rack in data.racks:
        key = tuple(sorted(shape[rack]))
        if key not in by_shape:
            values = _rack_values(data, rack, dims, order)
            row = values[target] if free is not None else values[target][None]
            row = np.array(row, dtype=np.int64).reshape(-1)
            if free is not None and whole_only:
                row[np.arange(row.size) % demands[free].pp_size != 0] = INFEASIBLE
            by_shape[key] = row
        per_rack.append(by_shape[key])
    if data.uplink_kv_units is not None:
        balance = sum(forced[p] * demands[p].kv_units_per_stage for p in forced)
        if any(abs(balance) > data.uplink_kv_units[rack] for rack in data.racks):
            return None
    total = demands[free].num_stages if free is not None else 0
    best = np.full(total + 1, INFEASIBLE, dtype=np.int64)
    best[0] = 0
    for row in per_rack:
        after = np.full(total + 1, INFEASIBLE, dtype=np.int64)
        for x in range(min(row.size, total + 1)):
            if row[x] < INFEASIBLE:
                np.minimum(after[x:], best[:total + 1 - x] + row[x], out=after[x:])
        best = np.minimum(after, INFEASIBLE)
    if best[total] >= INFEASIBLE:
        return None
    return int(best[total])
