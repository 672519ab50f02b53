r"""The LP relaxation of the placement model, racks of one shape merged: a lower bound on the
NVLink-domain objectives that keeps the racks (and so the spread and KV limits per rack).

The pooled relaxation (``bounds.pooled``) drops the racks altogether, so it cannot see that a
rack short of empty domains must split PP instances when the spread objective holds every rack
to its share of each pool. This one keeps them. In the notation of ``solver``:

    min   sum_{c,k} o_k w_{c,k}     (o_k: stages of split instances in pattern k, or 1 per domain)
    s.t.  sum_k w_{c,k} <= m_c                                   domain capacity
          sum_{c,k} a_{c,k,p} w_{c,k} = n_p pp_p                  every stage placed
          S_{p,r} <= pp_p M_p,  M_p >= t_p,  sum_p M_p <= spread   (with spread over racks held)
          e_r >= sum_p k_p S_{p,r},  |sum_p k_p S_{p,r}| <= U_r     KV balance and uplinks
          sum_r e_r <= KV held + 1% tolerance                       (KV locality held)
          sum_{c,k} leftover_k w_{c,k} <= held                      (pipelines in one domain held)
          w, M, e >= 0 and continuous

t_p is ``spread_instances_per_rack`` (each pool's own bound). Pipelines in one rack (a modulo
condition) are not encoded: dropping a constraint only enlarges the feasible set.

Racks of one shape (same GPU type and free GPUs of every domain, same uplink) are merged into
one with their domains, stage limits and uplinks added up: every constraint is linear and
symmetric in such racks, so averaging an LP solution over them keeps it feasible at the same
cost, and the merged LP has exactly the LP optimum of the full one, at a size that grows with the
number of rack shapes rather than racks.

Every integer placement meeting the held objectives is feasible here, so the LP optimum, less a
tolerance for the solver's floating point, rounded up, bounds the objective from below. Solved
with HiGHS (scipy), dual simplex, one thread: deterministic.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from scipy.sparse import coo_matrix

from layoutopt.topology.placement.data import PlacementData

# The LP optimum is trusted to this much (absolute + relative to its size) before rounding up:
# HiGHS' optimality tolerances (1e-7 on reduced costs) times the variables' sizes stay far below.
ABSOLUTE_TOLERANCE = 1e-3
RELATIVE_TOLERANCE = 1e-6
# Past this many columns (pattern counts) the LP is not built.
MAX_COLUMNS = 200_000


class _Rows:
    """Sparse rows of A_ub x <= b_ub or A_eq x = b_eq, filled one entry at a time."""

    def __init__(self):
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rhs: list[float] = []

    def new(self, rhs: float) -> int:
        self.rhs.append(rhs)
        return len(self.rhs) - 1

    def add(self, row: int, col: int, value: float) -> None:
        self.rows.append(row)
        self.cols.append(col)
        self.vals.append(value)

    def matrix(self, num_cols: int):
        return coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.rhs), num_cols)).tocsr()


def rack_shapes(data: PlacementData) -> dict[str, str]:
    """Rack -> the first rack of its shape (same GPU type and free GPUs of every domain, same uplink)."""
    shape: dict[str, list[tuple[str, int]]] = {rack: [] for rack in data.racks}
    for d in data.domains:
        shape[d.rack].append((d.gpu, d.num_free))
    first: dict[tuple, str] = {}
    leader = {}
    for rack in data.racks:
        uplink = data.uplink_kv_units[rack] if data.uplink_kv_units is not None else None
        leader[rack] = first.setdefault((uplink, tuple(sorted(shape[rack]))), rack)
    return leader


def lp_lower_bound(data: PlacementData, key: str, held: dict[str, int], own_spread: dict[int, int],
                   kv_tolerance: int) -> int | None:
    """A lower bound on objective ``key`` ('pipelines_in_domain' or 'domains') with the objectives
    in ``held`` (keys 'spread', 'kv_egress', 'pipelines_in_domain') at most their value (KV: plus
    ``kv_tolerance``); ``own_spread`` holds each pool's own spread bound t_p. None when the LP is
    not built (a class without patterns, too many columns) or not solved to optimality."""
    if any(not c.patterns for c in data.classes) or sum(len(c.patterns) for c in data.classes) > MAX_COLUMNS:
        return None
    demands = {d.pool_index: d for d in data.demands}
    leader = rack_shapes(data)
    groups = sorted(set(leader.values()), key=data.racks.index)
    group_of = {rack: groups.index(rack) for rack in groups}
    num_racks: dict[str, int] = defaultdict(int)
    for rack in data.racks:
        num_racks[leader[rack]] += 1
    # A group's classes merged by (GPU type, free GPUs): their domain counts add up.
    domains: dict[tuple[int, str, int], int] = defaultdict(int)
    shape: dict[tuple[int, str, int], tuple] = {}
    for cls in data.classes:
        k = (group_of[leader[cls.rack]], cls.gpu, cls.num_free)
        domains[k] += len(cls.members)
        shape[k] = (cls.pool_indices, cls.patterns)
    columns = [(k, shape[k][0], pattern) for k in domains for pattern in shape[k][1]]
    pools = [d.pool_index for d in data.demands]
    spread = "spread" in held
    m_col = {p: len(columns) + i for i, p in enumerate(pools)} if spread else {}
    e_col = {g: len(columns) + len(m_col) + g for g in range(len(groups))} if data.has_kv else {}
    num_cols = len(columns) + len(m_col) + len(e_col)
    ub, eq = _Rows(), _Rows()
    placed = {p: eq.new(demands[p].num_stages) for p in pools}
    capacity = {k: ub.new(n) for k, n in domains.items()}
    in_rack = {(p, g): ub.new(0.0) for p in m_col for g in range(len(groups))}
    balance = {g: ub.new(0.0) for g in e_col}
    uplink = {}
    if e_col and data.uplink_kv_units is not None:
        uplink = {g: (ub.new(num_racks[rack] * data.uplink_kv_units[rack]),
                      ub.new(num_racks[rack] * data.uplink_kv_units[rack])) for g, rack in enumerate(groups)}
    held_split = ub.new(held["pipelines_in_domain"]) if "pipelines_in_domain" in held else None
    cost = np.zeros(num_cols)
    for j, (k, pool_indices, pattern) in enumerate(columns):
        g = k[0]
        split = sum(a % demands[p].pp_size for p, a in zip(pool_indices, pattern))
        cost[j] = split if key == "pipelines_in_domain" else 1.0
        ub.add(capacity[k], j, 1.0)
        if held_split is not None and split:
            ub.add(held_split, j, split)
        units = 0
        for p, a in zip(pool_indices, pattern):
            if a:
                eq.add(placed[p], j, a)
                if (p, g) in in_rack:
                    ub.add(in_rack[p, g], j, a)
                units += a * demands[p].kv_units_per_stage
        if units and e_col:
            ub.add(balance[g], j, units)
            if g in uplink:
                ub.add(uplink[g][0], j, units)
                ub.add(uplink[g][1], j, -units)
    bounds = [(0.0, None)] * num_cols
    if spread:
        # S_{p,r} <= pp_p M_p per rack, so S_{p,group} <= racks x pp_p M_p; sum_p M_p <= spread.
        total = ub.new(held["spread"])
        for p, col in m_col.items():
            bounds[col] = (float(own_spread.get(p, 0)), None)
            ub.add(total, col, 1.0)
            for g, rack in enumerate(groups):
                ub.add(in_rack[p, g], col, -num_racks[rack] * demands[p].pp_size)
        for p in pools:
            if demands[p].num_instances < 2:
                # A pool of one instance is not in the spread objective: M_p is free.
                bounds[m_col[p]] = (0.0, 0.0)
                for g in range(len(groups)):
                    ub.rhs[in_rack[p, g]] = math.inf
    if e_col:
        total_kv = ub.new(held["kv_egress"] + kv_tolerance) if "kv_egress" in held else None
        for g, col in e_col.items():
            ub.add(balance[g], col, -1.0)
            if total_kv is not None:
                ub.add(total_kv, col, 1.0)
    # Imported here: scipy.optimize takes about 0.4 s to import, which every ``import
    # layoutopt.topology`` would pay, and most placements are proven without the LP.
    from scipy.optimize import linprog

    a_ub = ub.matrix(num_cols)
    b_ub = np.array(ub.rhs)
    finite = np.isfinite(b_ub)
    result = linprog(cost, A_ub=a_ub[finite], b_ub=b_ub[finite], A_eq=eq.matrix(num_cols), b_eq=np.array(eq.rhs),
                     bounds=bounds, method="highs-ds")
    if result.status != 0:
        return None
    value = float(result.fun)
    return max(0, math.ceil(value - ABSOLUTE_TOLERANCE - RELATIVE_TOLERANCE * abs(value)))
