"""A greedy placement in near-linear time: each pool dealt to racks in proportion, then packed.

1. Rack quotas. Each pool's instances are dealt to the racks in proportion to the rack's free
   GPUs of the pool's type (largest remainder), never more than the rack can hold and, with
   ``spread_racks``, never more than the pool's spread lower bound per rack. Pools that take KV
   (decode) are dealt first; pools that send it (prefill) are then dealt in proportion to the KV
   each rack takes, so a rack's prefill:decode split follows the plan's and little KV leaves it.
2. Packing, rack by rack, largest instances first: a whole instance into the domain with the
   least room that holds it (best fit), else its stages one by one into the rack's domains.
3. What a rack could not hold goes, whole instance first, to the best-fitting domain anywhere,
   then stage by stage to any rack.

The result is a candidate the solver checks (``evaluate``) and compares with lower bounds
(``bounds``); it is never reported as optimal unless a bound proves it.
"""

from __future__ import annotations

from collections import defaultdict

from layoutopt.topology.placement.bounds import spread_instances_per_rack
from layoutopt.topology.placement.data import PlacementData, StageDemand
from layoutopt.topology.placement.evaluate import Counts


class _Room:
    """Free GPUs left in each domain, with the domains of each rack and GPU type."""

    def __init__(self, data: PlacementData):
        self.free = {d.name: d.num_free for d in data.domains}
        self.by_rack: dict[tuple[str, str], list[str]] = defaultdict(list)
        for d in data.domains:
            self.by_rack[d.rack, d.gpu].append(d.name)
        self.racks = data.racks

    def best_fit(self, names: list[str], size: int) -> str | None:
        """The domain of ``names`` with the least free GPUs that still holds ``size`` (first on ties)."""
        best, best_free = None, None
        for name in names:
            room = self.free[name]
            if room >= size and (best_free is None or room < best_free):
                best, best_free = name, room
                if room == size:
                    break
        return best


def _apportion(total: int, weights: list[float], caps: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder), each share <= its cap.

    Shares that reach their cap drop out and the rest is split again among the others; what
    no share can take is left out (the caller places it elsewhere).
    """
    shares = [0] * len(weights)
    left = total
    active = [i for i, w in enumerate(weights) if w > 0 and caps[i] > 0]
    while left > 0 and active:
        weight = sum(weights[i] for i in active)
        ideal = {i: left * weights[i] / weight for i in active}
        for i in active:
            take = min(int(ideal[i]), caps[i] - shares[i])
            shares[i] += take
            left -= take
        # The remainder one by one, largest fractional part first (rack order on ties).
        for i in sorted(active, key=lambda i: -(ideal[i] - int(ideal[i]))):
            if left == 0:
                break
            if shares[i] < caps[i]:
                shares[i] += 1
                left -= 1
        active = [i for i in active if shares[i] < caps[i]]
    return shares


def _quotas(data: PlacementData) -> dict[tuple[int, str], int]:
    """(pool index, rack) -> instances the rack should take."""
    spread_cap = spread_instances_per_rack(data) if data.spread_racks else {}
    free_by_rack: dict[tuple[str, str], list[int]] = defaultdict(list)
    for d in data.domains:
        free_by_rack[d.rack, d.gpu].append(d.num_free)
    quotas: dict[tuple[int, str], int] = {}
    taken_kv = dict.fromkeys(data.racks, 0)
    order = sorted(data.demands, key=lambda d: (d.kv_units_per_stage > 0, d.pool_index))
    for demand in order:
        caps = []
        for rack in data.racks:
            stages = sum(free // demand.stage_gpus for free in free_by_rack.get((rack, demand.gpu), ()))
            cap = stages // demand.pp_size
            if demand.pool_index in spread_cap:
                cap = min(cap, spread_cap[demand.pool_index])
            caps.append(cap)
        weights = [float(sum(free_by_rack.get((rack, demand.gpu), ()))) for rack in data.racks]
        if demand.kv_units_per_stage > 0 and any(taken_kv.values()):
            weights = [float(taken_kv[rack]) for rack in data.racks]
        shares = _apportion(demand.num_instances, weights, caps)
        for rack, share in zip(data.racks, shares):
            quotas[demand.pool_index, rack] = share
            if demand.kv_units_per_stage < 0:
                taken_kv[rack] -= share * demand.pp_size * demand.kv_units_per_stage
    return quotas


def _place_instance(room: _Room, names: list[str], demand: StageDemand, counts: Counts) -> bool:
    """One instance into ``names``: whole in one domain if one holds it, else stage by stage."""
    whole = room.best_fit(names, demand.stage_gpus * demand.pp_size)
    if whole is not None:
        room.free[whole] -= demand.stage_gpus * demand.pp_size
        counts[demand.pool_index, whole] = counts.get((demand.pool_index, whole), 0) + demand.pp_size
        return True
    taken = []
    for _ in range(demand.pp_size):
        name = room.best_fit(names, demand.stage_gpus)
        if name is None:
            for undo in taken:
                room.free[undo] += demand.stage_gpus
            return False
        room.free[name] -= demand.stage_gpus
        taken.append(name)
    for name in taken:
        counts[demand.pool_index, name] = counts.get((demand.pool_index, name), 0) + 1
    return True


def _place_stages_anywhere(room: _Room, demand: StageDemand, counts: Counts) -> bool:
    """One instance's stages in any domains of its GPU type (the last resort)."""
    names = [n for rack in room.racks for n in room.by_rack.get((rack, demand.gpu), [])]
    return _place_instance(room, names, demand, counts)


def greedy_counts(data: PlacementData) -> Counts | None:
    """Stage groups per (pool index, domain) of a greedy placement; None when it places not all."""
    room = _Room(data)
    quotas = _quotas(data)
    counts: Counts = {}
    largest_first = sorted(data.demands, key=lambda d: (-d.stage_gpus * d.pp_size, -d.stage_gpus, d.pool_index))
    placed = defaultdict(int)
    in_rack: dict[tuple[int, str], int] = defaultdict(int)
    for rack in data.racks:
        for demand in largest_first:
            names = room.by_rack.get((rack, demand.gpu), [])
            for _ in range(quotas[demand.pool_index, rack]):
                if not _place_instance(room, names, demand, counts):
                    break
                placed[demand.pool_index] += 1
                in_rack[demand.pool_index, rack] += 1
    for demand in largest_first:
        # What the quotas left over, one instance per pass to each rack with the fewest of the
        # pool (the spread objective's max grows least), whole instances in one rack first.
        missing = demand.num_instances - placed[demand.pool_index]
        while missing:
            order = sorted(room.racks, key=lambda r: in_rack[demand.pool_index, r])
            progress = False
            for rack in order:
                if missing and _place_instance(room, room.by_rack.get((rack, demand.gpu), []), demand, counts):
                    in_rack[demand.pool_index, rack] += 1
                    missing -= 1
                    progress = True
            if not progress:
                break
        while missing and _place_stages_anywhere(room, demand, counts):
            missing -= 1
        if missing:
            return None
    return {key: n for key, n in counts.items() if n}
