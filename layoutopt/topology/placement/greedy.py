"""A greedy placement in near-linear time: each pool dealt to racks in proportion, then packed.

1. Rack quotas. Each pool's instances are dealt to the racks in proportion to the rack's free
   GPUs of the pool's type (largest remainder), never more than the rack can hold and, with
   ``spread_racks``, never more than the pool's spread lower bound per rack. Pools that take KV
   (decode) are dealt first; pools that send it (prefill) are then dealt in proportion to the KV
   each rack takes, so a rack's prefill:decode split follows the plan's and little KV leaves it.
2. Packing, rack by rack, largest instances first: a whole instance into the domain with the
   least room that holds it (best fit), else its stages one by one into the rack's domains.
3. What a rack could not hold goes to the racks with the fewest of its pool, whole instance in
   one rack first, then stage by stage to any rack.
4. KV repair: whole prefill or decode instances move from racks that send more KV than they take
   to racks that take more, while each move lowers the KV leaving racks and no pool's most
   instances in one rack grows.

The result is a candidate the solver checks (``evaluate``) and compares with lower bounds
(``bounds``); it is never reported as optimal unless a bound proves it.
"""

from __future__ import annotations

from collections import defaultdict

from layoutopt.topology.placement.bounds import spread_instances_per_rack
from layoutopt.topology.placement.data import PlacementData, StageDemand
from layoutopt.topology.placement.evaluate import Counts
from layoutopt.topology.placement.improve import improve_domains


# Receiving racks (largest deficit first) tried for each surplus rack while rebalancing KV.
RECEIVERS_TRIED = 8


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
    """One instance into ``names``: whole in one domain if one holds it, else stage by stage (parts
    of a ``parts_apart`` demand always one per domain, each in a different one)."""
    whole = None if demand.parts_apart else room.best_fit(names, demand.stage_gpus * demand.pp_size)
    if whole is not None:
        room.free[whole] -= demand.stage_gpus * demand.pp_size
        counts[demand.pool_index, whole] = counts.get((demand.pool_index, whole), 0) + demand.pp_size
        return True
    taken: list[str] = []
    for _ in range(demand.pp_size):
        name = room.best_fit([n for n in names if n not in taken] if demand.parts_apart else names, demand.stage_gpus)
        if name is None:
            for undo in taken:
                room.free[undo] += demand.stage_gpus
            return False
        room.free[name] -= demand.stage_gpus
        taken.append(name)
    for name in taken:
        counts[demand.pool_index, name] = counts.get((demand.pool_index, name), 0) + 1
    return True


def _pack_rack(room: _Room, rack: str, demands: list[StageDemand],
               wanted: dict[int, int]) -> tuple[dict[int, int], Counts, dict[str, int]]:
    """Instances of each pool packed into ``rack`` (up to ``wanted``), on a copy of its room:
    (instances fitted per pool, counts added, free GPUs left per domain of the rack)."""
    local = _Room.__new__(_Room)
    local.by_rack, local.racks = room.by_rack, room.racks
    names = {d.gpu: room.by_rack.get((rack, d.gpu), []) for d in demands}
    local.free = {name: room.free[name] for group in names.values() for name in group}
    added: Counts = {}
    fitted = dict.fromkeys(wanted, 0)
    for demand in demands:
        for _ in range(wanted[demand.pool_index]):
            if not _place_instance(local, names[demand.gpu], demand, added):
                break
            fitted[demand.pool_index] += 1
    return fitted, added, local.free


def _place_stages_anywhere(room: _Room, demand: StageDemand, counts: Counts) -> bool:
    """One instance's stages in any domains of its GPU type (the last resort)."""
    names = [n for rack in room.racks for n in room.by_rack.get((rack, demand.gpu), [])]
    return _place_instance(room, names, demand, counts)


def greedy_counts(data: PlacementData) -> Counts | None:
    """Stage groups per (pool index, domain) of a greedy placement; None when it places not all.

    When giving up KV-neutral instances in full racks leaves one that fits nowhere else (a TP8
    instance on a cluster short of empty nodes), the greedy runs again without giving them up."""
    counts = _greedy(data, give_up_neutral=True)
    return counts if counts is not None or not data.has_kv else _greedy(data, give_up_neutral=False)


def _greedy(data: PlacementData, give_up_neutral: bool) -> Counts | None:
    room = _Room(data)
    quotas = _quotas(data)
    counts: Counts = {}
    largest_first = sorted(data.demands, key=lambda d: (-d.stage_gpus * d.pp_size, -d.stage_gpus, d.pool_index))
    placed = defaultdict(int)
    in_rack: dict[tuple[int, str], int] = defaultdict(int)
    for rack in data.racks:
        wanted = {d.pool_index: quotas[d.pool_index, rack] for d in largest_first}
        while True:
            fitted, rack_counts, free = _pack_rack(room, rack, largest_first, wanted)
            short = any(fitted[p] < n for p, n in wanted.items())
            # A rack that cannot hold its quotas gives up an instance that sends and takes no KV
            # first, so its prefill:decode split (and the KV kept in the rack) survives.
            neutral = [d.pool_index for d in largest_first if not d.kv_units_per_stage and wanted[d.pool_index]]
            if not short or not neutral or not data.has_kv or not give_up_neutral:
                break
            wanted[neutral[0]] -= 1
        room.free.update(free)
        for key, n in rack_counts.items():
            counts[key] = counts.get(key, 0) + n
        for p, n in fitted.items():
            placed[p] += n
            in_rack[p, rack] += n
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
    _rebalance_kv(data, room, counts, in_rack)
    return improve_domains(data, {key: n for key, n in counts.items() if n})


def _egress(balance: int) -> int:
    return max(0, balance)


def _rebalance_kv(data: PlacementData, room: _Room, counts: Counts, in_rack: dict[tuple[int, str], int]) -> None:
    """Move whole KV-sending or -taking instances from racks with surplus to racks with deficit
    while that lowers the KV leaving racks, never raising any pool's most instances in one rack."""
    if not data.has_kv:
        return
    rack_of = {d.name: d.rack for d in data.domains}
    balance = dict.fromkeys(data.racks, 0)
    units = {d.pool_index: d.kv_units_per_stage for d in data.demands}
    for (p, name), n in counts.items():
        balance[rack_of[name]] += units[p] * n
    worst = {d.pool_index: max((in_rack[d.pool_index, r] for r in data.racks), default=0) for d in data.demands}
    movable = [d for d in data.demands if d.kv_units_per_stage]
    moved = True
    while moved:
        moved = False
        for demand in movable:
            moved |= _move_round(data, room, counts, in_rack, balance, worst, demand)


def _move_round(data, room: _Room, counts: Counts, in_rack, balance: dict[str, int], worst: dict[int, int],
                demand: StageDemand) -> bool:
    """One pass of improving moves of ``demand``'s instances; True when any was made."""
    shift = demand.kv_units_per_stage * demand.pp_size
    sign = 1 if shift > 0 else -1
    donors = sorted((r for r in data.racks if balance[r] * sign > 0 and in_rack[demand.pool_index, r]),
                    key=lambda r: -balance[r] * sign)
    moved = False
    for donor in donors:
        receivers = sorted((r for r in data.racks if balance[r] * sign < 0), key=lambda r: balance[r] * sign)
        for receiver in receivers[:RECEIVERS_TRIED]:
            if not in_rack[demand.pool_index, donor] or in_rack[demand.pool_index, receiver] >= worst[demand.pool_index]:
                continue
            change = (_egress(balance[donor] - shift) - _egress(balance[donor])
                      + _egress(balance[receiver] + shift) - _egress(balance[receiver]))
            if change >= 0:
                continue
            held = [name for name in room.by_rack.get((donor, demand.gpu), [])
                    if counts.get((demand.pool_index, name), 0)]
            if sum(counts[demand.pool_index, n] for n in held) < demand.pp_size:
                break
            if not _place_instance(room, room.by_rack.get((receiver, demand.gpu), []), demand, counts):
                continue
            # Take the instance out of the donor's domains holding fewest of its stages (frees domains).
            left = demand.pp_size
            for name in sorted(held, key=lambda n: counts[demand.pool_index, n]):
                take = min(left, counts[demand.pool_index, name])
                counts[demand.pool_index, name] -= take
                room.free[name] += take * demand.stage_gpus
                left -= take
                if not left:
                    break
            in_rack[demand.pool_index, donor] -= 1
            in_rack[demand.pool_index, receiver] += 1
            balance[donor] -= shift
            balance[receiver] += shift
            moved = True
            if balance[donor] * sign <= 0:
                break
    return moved
