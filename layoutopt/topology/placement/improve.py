"""Local improvement of a greedy placement on the two NVLink-domain objectives, rack by rack.

The objectives before them (spread over racks, pipelines in one rack, KV across racks) depend
only on how many instances of each pool a rack holds, so every step here keeps those numbers or
changes them in ways that cannot worsen those objectives:

1. Repack: each rack whose pipelined pools hold whole instances only is packed again from its
   instance counts (``pack_rack``) and kept when (pipeline stages across domains, domains
   touched) drops, lexicographically. Racks already at a floor (no split stage, and no fewer
   domains could hold their GPUs in use) are skipped.
2. Moves: one instance of a pool that sends and takes no KV (so KV is unchanged) moves from a
   rack with stages split over domains to another rack (with spread over racks, only to one
   holding fewer of that pool than the pool's most in any rack, so the spread stays); the two racks
   are repacked and the move kept when the pair's (stages across domains, domains touched) drops.
   The donor must have stages split over domains and the receiver room for the instance whole.
3. Repack again, this time opening the unused domain with the most room when a group fits no
   used one (fewer domains touched where capacity is not tight), kept only when it is better.

Every kept step lowers a bounded non-negative integer pair, so the passes end; racks are visited
in a fixed order, so the result is deterministic.
"""

from __future__ import annotations

from collections import defaultdict

from layoutopt.topology.placement.data import DomainSlot, PlacementData, StageDemand
from layoutopt.topology.placement.evaluate import Counts

# Receiving racks tried for each donor rack and pool (most whole-instance room first).
RECEIVERS_TRIED = 6
# Move passes over all donors (each pass only keeps improving moves).
MOVE_PASSES = 3


def pack_rack(domains: list[DomainSlot], demands: list[StageDemand], instances: dict[int, int],
              largest: bool = False) -> Counts | None:
    """Stage groups per (pool index, domain) holding ``instances`` of each pool in ``domains``, or None.

    Largest instances first (whole-instance GPUs, then stage GPUs). A whole instance goes to the
    domain with the least room that holds it, a domain already in use first; an instance no
    domain holds whole is split into stages, each into the used domain with the least room that
    holds it, else the unused one with the least room. Small groups thus fill domains already
    touched before opening new ones, and large free domains stay whole for the large instances.
    """
    free = {d.name: d.num_free for d in domains}
    by_gpu: dict[str, list[str]] = defaultdict(list)
    for d in domains:
        by_gpu[d.gpu].append(d.name)
    used: set[str] = set()
    counts: Counts = {}
    order = sorted(demands, key=lambda d: (-d.stage_gpus * d.pp_size, -d.stage_gpus, d.pool_index))
    for demand in order:
        names = by_gpu.get(demand.gpu, [])
        for _ in range(instances.get(demand.pool_index, 0)):
            whole = None if demand.parts_apart else _fit(names, free, used, demand.stage_gpus * demand.pp_size,
                                                          largest)
            if whole is not None:
                free[whole] -= demand.stage_gpus * demand.pp_size
                used.add(whole)
                counts[demand.pool_index, whole] = counts.get((demand.pool_index, whole), 0) + demand.pp_size
                continue
            mine: list[str] = []
            for _ in range(demand.pp_size):
                name = _fit([n for n in names if n not in mine] if demand.parts_apart else names, free, used,
                            demand.stage_gpus, largest)
                if name is None:
                    return None
                mine.append(name)
                free[name] -= demand.stage_gpus
                used.add(name)
                counts[demand.pool_index, name] = counts.get((demand.pool_index, name), 0) + 1
    return counts


def _fit(names: list[str], free: dict[str, int], used: set[str], size: int, largest: bool) -> str | None:
    """The used domain with the least room >= size, else the unused one with the least (``largest``:
    the most) room (first on ties)."""
    best, best_key = None, None
    for name in names:
        room = free[name]
        if room >= size:
            key = (name not in used, -room if largest and name not in used else room)
            if best_key is None or key < best_key:
                best, best_key = name, key
    return best


def _value(demands: dict[int, StageDemand], counts: Counts) -> tuple[int, int]:
    """(stage groups of instances split over domains, domains touched) of ``counts``."""
    split = sum(n % demands[p].pp_size for (p, _), n in counts.items())
    return split, len({name for (_, name), n in counts.items() if n})


class _Racks:
    """The placement split by rack: its domains, its counts, and its instances per pool."""

    def __init__(self, data: PlacementData, counts: Counts):
        self.demands = {d.pool_index: d for d in data.demands}
        self.domains: dict[str, list[DomainSlot]] = defaultdict(list)
        rack_of = {}
        for d in data.domains:
            self.domains[d.rack].append(d)
            rack_of[d.name] = d.rack
        self.counts: dict[str, Counts] = defaultdict(dict)
        stages: dict[tuple[int, str], int] = defaultdict(int)
        for (p, name), n in counts.items():
            if n:
                self.counts[rack_of[name]][p, name] = n
                stages[p, rack_of[name]] += n
        self.instances: dict[str, dict[int, int]] = defaultdict(dict)
        # Racks holding part of a PP instance are left as they are (repacking them would need the
        # rack's share of a cut instance, which a count per pool does not say).
        self.whole = {rack: True for rack in data.racks}
        for (p, rack), n in stages.items():
            self.instances[rack][p] = n // self.demands[p].pp_size
            if n % self.demands[p].pp_size:
                self.whole[rack] = False
        self.value = {rack: _value(self.demands, self.counts[rack]) for rack in data.racks}
        self._room: dict[tuple[str, int], int] = {}

    def update(self, rack: str, found: tuple[Counts, tuple[int, int]], instances: dict[int, int]) -> None:
        self.counts[rack], self.value[rack] = found
        self.instances[rack] = instances
        for p in self.demands:
            self._room.pop((rack, p), None)

    def at_floor(self, rack: str) -> bool:
        """No stage split over domains and no fewer domains could hold the rack's GPUs in use."""
        split, touched = self.value[rack]
        if split:
            return False
        need = sum(n * self.demands[p].stage_gpus for (p, _), n in self.counts[rack].items())
        for fewest, room in enumerate(sorted((d.num_free for d in self.domains[rack]), reverse=True)):
            if need <= 0:
                return touched <= fewest
            need -= room
        return need <= 0 and touched <= len(self.domains[rack])

    def repack(self, rack: str, instances: dict[int, int],
               largest: bool = False) -> tuple[Counts, tuple[int, int]] | None:
        packed = pack_rack(self.domains[rack], list(self.demands.values()), instances, largest)
        return None if packed is None else (packed, _value(self.demands, packed))

    def whole_room(self, rack: str, demand: StageDemand) -> int:
        """Domains of the rack with room for a whole instance of ``demand`` as packed now."""
        key = (rack, demand.pool_index)
        if key not in self._room:
            self._room[key] = self._whole_room(rack, demand)
        return self._room[key]

    def _whole_room(self, rack: str, demand: StageDemand) -> int:
        size = demand.stage_gpus * demand.pp_size
        taken: dict[str, int] = defaultdict(int)
        for (p, name), n in self.counts[rack].items():
            taken[name] += n * self.demands[p].stage_gpus
        return sum(1 for d in self.domains[rack] if d.gpu == demand.gpu and d.num_free - taken[d.name] >= size)


def improve_domains(data: PlacementData, counts: Counts) -> Counts:
    """``counts`` with the NVLink-domain objectives lowered by repacking racks and moving
    KV-neutral instances between racks; the earlier objectives are never worsened."""
    racks = _Racks(data, counts)
    for rack in data.racks:
        if racks.whole[rack] and not racks.at_floor(rack):
            found = racks.repack(rack, racks.instances[rack])
            if found is not None and found[1] < racks.value[rack]:
                racks.update(rack, found, racks.instances[rack])
    neutral = [d for d in data.demands if not d.kv_units_per_stage]
    for demand in neutral:
        p = demand.pool_index
        # With spread over racks no rack may take more of the pool than its worst rack holds now.
        worst = max((racks.instances[r].get(p, 0) for r in data.racks), default=0) if data.spread_racks else None
        for _ in range(MOVE_PASSES):
            if not _move_pass(data, racks, demand, worst):
                break
    for rack in data.racks:
        if racks.whole[rack] and not racks.at_floor(rack):
            found = racks.repack(rack, racks.instances[rack], largest=True)
            if found is not None and found[1] < racks.value[rack]:
                racks.update(rack, found, racks.instances[rack])
    merged: Counts = {}
    for rack in data.racks:
        merged.update(racks.counts[rack])
    return merged


def _move_pass(data: PlacementData, racks: _Racks, demand: StageDemand, worst: int | None) -> bool:
    p = demand.pool_index
    donors = [r for r in data.racks if racks.whole[r] and racks.value[r][0] and racks.instances[r].get(p, 0)]
    donors.sort(key=lambda r: -racks.value[r][0])
    # Receivers with room for the instance whole, most room first (ranked once per pass).
    ranked = [r for r in data.racks if racks.whole[r] and racks.whole_room(r, demand)]
    ranked.sort(key=lambda r: -racks.whole_room(r, demand))
    moved = False
    for donor in donors:
        if not racks.value[donor][0] or not racks.instances[donor].get(p, 0):
            continue
        less = dict(racks.instances[donor])
        less[p] -= 1
        given = racks.repack(donor, less)
        if given is None or given[1][0] >= racks.value[donor][0]:
            continue
        tried = 0
        for receiver in ranked:
            if tried == RECEIVERS_TRIED:
                break
            full = worst is not None and racks.instances[receiver].get(p, 0) >= worst
            if receiver == donor or full or not racks.whole_room(receiver, demand):
                continue
            tried += 1
            more = dict(racks.instances[receiver])
            more[p] = more.get(p, 0) + 1
            taken = racks.repack(receiver, more)
            if taken is None:
                continue
            before = tuple(a + b for a, b in zip(racks.value[donor], racks.value[receiver]))
            after = tuple(a + b for a, b in zip(given[1], taken[1]))
            if after < before:
                racks.update(donor, given, less)
                racks.update(receiver, taken, more)
                moved = True
                break
    return moved
