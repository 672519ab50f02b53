"""The exact optimum of both NVLink-domain objectives when the spread fixes each rack's share: a
dynamic program per rack shape, then one over racks, and the placement that attains it.

With spread over racks proven at S and each pool's own bound t_p (``spread_instances_per_rack``)
adding up to S, every optimal placement has at most t_p instances of pool p in any rack. A pool
with exactly t_p x |racks| instances must then hold exactly t_p in every rack ("forced"). When
every pool but at most one ("free", which sends and takes no KV) is forced, the racks are coupled
only through the free pool's total:

    min sum_r g_r(x_r)   s.t.  sum_r x_r = stages of the free pool,  0 <= x_r <= pp t_free

where g_r(x) = W x (stages split over domains) + (domains touched), minimized over the packings
of rack r's domains with the forced pools' shares and x stages of the free pool (a multiple of
pp when pipelines in one rack are proven 0). W exceeds the number of domains, so the weighted
sum orders placements exactly as the two objectives do lexicographically. g_r is computed by a
dynamic program over the rack's domains (one fill pattern or none per domain, the state the
stages placed per pool), once per rack shape, and the allocation by a min-plus dynamic program
over racks; both keep their choices, so the optimal placement is read back. KV: forced pools fix
every rack's KV balance, so KV is a constant the placement cannot change; the uplinks are checked.

This is the optimum of the placement model with the earlier objectives at their proven values
(spread and KV are fixed by the shares), not a relaxation. Returns None whenever the structure
does not hold or the state space is large (``MAX_STATES``); then the LP and pooled bounds apply.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from layoutopt.topology.placement.data import PlacementData
from layoutopt.topology.placement.evaluate import Counts

# Largest per-rack state space (product over pools of stages per rack + 1) the DP runs over, and
# most states x domains over all rack shapes (the choices kept take 2 bytes each: 40 MB).
MAX_STATES = 50_000
MAX_CELLS = 20_000_000
INFEASIBLE = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class RackOptimum:
    """The lexicographic optimum (stages split over domains, then domains touched) and a placement."""

    split_stages: int
    domains: int
    counts: Counts


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


class _ShapeProgram:
    """The DP over one rack shape's domains (sorted by GPU type and free GPUs), with its choices."""

    def __init__(self, steps: list[tuple[tuple[int, ...], list[tuple[tuple[int, ...], int, tuple]]]],
                 dims: list[int]):
        values = np.full(dims, INFEASIBLE, dtype=np.int64)
        values[(0,) * len(dims)] = 0
        self.steps = steps
        self.choices: list[np.ndarray] = []
        for _, moves in steps:
            after = values.copy()
            choice = np.full(dims, -1, dtype=np.int16)
            for k, (shift, cost, _) in enumerate(moves):
                target = tuple(slice(s, None) for s in shift)
                source = tuple(slice(0, n - s) for s, n in zip(shift, dims))
                candidate = values[source] + cost
                view, chosen = after[target], choice[target]
                better = candidate < view
                view[better] = candidate[better]
                chosen[better] = k
            values = np.minimum(after, INFEASIBLE)
            self.choices.append(choice)
        self.values = values

    def read_back(self, state: tuple[int, ...]) -> list[tuple | None]:
        """The pattern (counts per pool, as in its class) chosen for each step, or None (empty)."""
        picked: list[tuple | None] = [None] * len(self.steps)
        state = list(state)
        for i in range(len(self.steps) - 1, -1, -1):
            k = int(self.choices[i][tuple(state)])
            if k >= 0:
                shift, _, pattern = self.steps[i][1][k]
                picked[i] = pattern
                state = [a - b for a, b in zip(state, shift)]
        return picked


def rack_optimum(data: PlacementData, proven: dict[str, int], own: dict[int, int]) -> RackOptimum | None:
    """The exact optimum of the two NVLink-domain objectives given the proven spread (and
    pipelines in one rack), when the shares are forced as described above; None otherwise."""
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
    position = {p: i for i, p in enumerate(order)}
    free_cap = 0
    if free is not None:
        free_cap = demands[free].pp_size * own[free] if free in own else demands[free].num_stages
    dims = [forced[p] + 1 for p in sorted(forced)] + ([free_cap + 1] if free is not None else [])
    if math.prod(dims) > MAX_STATES:
        return None
    if data.uplink_kv_units is not None:
        balance = sum(forced[p] * demands[p].kv_units_per_stage for p in forced)
        if any(abs(balance) > data.uplink_kv_units[rack] for rack in data.racks):
            return None
    weight = len(data.domains) + 1
    patterns = {(c.gpu, c.num_free): (c.pool_indices, c.patterns) for c in data.classes}
    moves_of: dict[tuple[str, int], list] = {}
    for key, (pool_indices, pats) in patterns.items():
        moves = []
        for pattern in pats:
            shift = [0] * len(dims)
            for p, a in zip(pool_indices, pattern):
                shift[position[p]] = a
            if all(s < n for s, n in zip(shift, dims)):
                split = sum(a % demands[p].pp_size for p, a in zip(pool_indices, pattern))
                moves.append((tuple(shift), weight * split + 1, pattern))
        moves_of[key] = moves
    rack_domains: dict[str, list] = defaultdict(list)
    for d in data.domains:
        rack_domains[d.rack].append(d)
    whole_only = proven.get("pipelines_in_rack", 1) == 0
    target = tuple(forced[p] for p in sorted(forced))
    shapes = {tuple(sorted((d.gpu, d.num_free) for d in rack_domains[rack])) for rack in data.racks}
    if sum(len(key) for key in shapes) * math.prod(dims) > MAX_CELLS:
        return None
    programs: dict[tuple, _ShapeProgram] = {}
    rows: dict[tuple, np.ndarray] = {}
    shape_of = {}
    for rack in data.racks:
        rack_domains[rack].sort(key=lambda d: (d.gpu, d.num_free))
        key = tuple((d.gpu, d.num_free) for d in rack_domains[rack])
        shape_of[rack] = key
        if key in programs:
            continue
        program = _ShapeProgram([(k, moves_of[k]) for k in key], dims)
        programs[key] = program
        row = np.array(program.values[target], dtype=np.int64).reshape(-1)
        if free is not None and whole_only:
            row[np.arange(row.size) % demands[free].pp_size != 0] = INFEASIBLE
        rows[key] = row
    total = demands[free].num_stages if free is not None else 0
    best = np.full(total + 1, INFEASIBLE, dtype=np.int64)
    best[0] = 0
    taken: list[np.ndarray] = []
    for rack in data.racks:
        row = rows[shape_of[rack]]
        after = np.full(total + 1, INFEASIBLE, dtype=np.int64)
        pick = np.zeros(total + 1, dtype=np.int32)
        for x in range(min(row.size, total + 1)):
            if row[x] >= INFEASIBLE:
                continue
            candidate = best[:total + 1 - x] + row[x]
            view, chosen = after[x:], pick[x:]
            better = candidate < view
            view[better] = candidate[better]
            chosen[better] = x
        best = np.minimum(after, INFEASIBLE)
        taken.append(pick)
    if best[total] >= INFEASIBLE:
        return None
    optimum = int(best[total])
    counts: Counts = {}
    left = total
    for r in range(len(data.racks) - 1, -1, -1):
        rack = data.racks[r]
        x = int(taken[r][left])
        left -= x
        key = shape_of[rack]
        pool_indices = {k: patterns[k][0] for k in key}
        state = target + ((x,) if free is not None else ())
        for domain, pattern in zip(rack_domains[rack], programs[key].read_back(state)):
            if pattern is None:
                continue
            for p, a in zip(pool_indices[domain.gpu, domain.num_free], pattern):
                if a:
                    counts[p, domain.name] = a
    return RackOptimum(split_stages=optimum // weight, domains=optimum % weight, counts=counts)
