"""Lower bounds on the placement objectives, so a greedy placement that meets them needs no search.

Each bound is a value no placement can beat, given the earlier objectives at their proven optimum:

- spread: for every pool, the least t with sum_r min(stage room of rack r, pp t) >= stages,
  raised while the racks cannot hold all pools at those caps together (``spread_lower_bound``);
- pipelines in one rack: 0;
- KV across racks: the plan's net KV units, sum_p k_p n_p pp_p, when positive (the egress of all
  racks covers at least what all of them send minus what all take; units are rounded up for
  senders and down for receivers, so this is not 0 even when every rack is balanced);
- both NVLink-domain objectives, when the proven spread fixes every rack's share of all pools
  but one KV-neutral pool: the exact optimum by dynamic programs per rack shape and over racks
  (``rack_dp``, which also gives a placement attaining it);
- pipelines in one NVLink domain and domains touched otherwise: the larger of two relaxations. The *rack
  LP* (``lp_bound``) keeps the racks, the proven spread and KV values (and, for domains, the
  proven pipelines value) and drops integrality; the *pooled relaxation* keeps integrality and
  merges every rack into one. Each only enlarges the feasible set, so its optimum can only be
  lower. Domains touched are first bounded by GPUs needed / largest domain.

The rack LP has a column per (rack shape, domain class, pattern) and is solved first (HiGHS,
a fraction of a second at 65,536 GPUs); the pooled model, one class per (GPU type, free GPUs),
a few dozen integers at any cluster size, is solved only when the LP does not already match the
greedy value. Only proven earlier objectives are held: an unproven one's greedy value may be
worse than its optimum, and holding it could cut off the lexicographic optimum.
"""

from __future__ import annotations

import itertools
import math

from ortools.sat.python import cp_model

from layoutopt.topology.placement.budget import SolveBudget
from layoutopt.topology.placement.constraints import DomainCapacity, EveryStagePlaced
from layoutopt.topology.placement.data import PlacementData, domain_classes
from layoutopt.topology.placement.lp_bound import lp_lower_bound
from layoutopt.topology.placement.objectives import FewestDomains, KvLocality, PipelinesInDomain
from layoutopt.topology.placement.rack_dp import RackOptimum, rack_optimum
from layoutopt.topology.placement.variables import PlacementVariables

POOLED_RACK = "*"
# Cap raises the spread bound tries before settling for "one more than tried".
SPREAD_RAISES_TRIED = 3


def _stage_room(data: PlacementData) -> tuple[dict[tuple[str, str], list[int]], dict[int, list[int]]]:
    """(rack, GPU type) -> free GPUs of each domain; pool index -> stage groups each rack holds."""
    room: dict[tuple[str, str], list[int]] = {}
    for d in data.domains:
        room.setdefault((d.rack, d.gpu), []).append(d.num_free)
    caps = {demand.pool_index: [sum(f // demand.stage_gpus for f in room.get((rack, demand.gpu), ()))
                                for rack in data.racks] for demand in data.demands}
    return room, caps


def spread_instances_per_rack(data: PlacementData) -> dict[int, int]:
    """Pool index -> the fewest instances its worst rack can hold (pools of 2 or more instances),
    each pool on its own: the least t with sum_r min(stage room_r, pp t) >= its stages."""
    _, caps = _stage_room(data)
    bounds = {}
    for demand in data.demands:
        if demand.num_instances < 2:
            continue
        rack_caps = caps[demand.pool_index]
        t = max(1, math.ceil(demand.num_instances / max(1, len(rack_caps))))
        while sum(min(cap, demand.pp_size * t) for cap in rack_caps) < demand.num_stages and t < demand.num_instances:
            t += 1
        bounds[demand.pool_index] = t
    return bounds


def spread_lower_bound(data: PlacementData) -> int:
    """The pools' own bounds summed, raised while the racks cannot hold every pool at those caps
    together: a rack holds at most min(its free GPUs, sum_p s_p min(stage room, pp_p m_p)).

    Raising any caps by k in total is tried for k = 0 .. SPREAD_RAISES_TRIED; if none fits, the
    bound is the sum plus one more than that (every cap vector of a smaller sum fails the test,
    and the test only gets easier as caps grow)."""
    own = spread_instances_per_rack(data)
    room, caps = _stage_room(data)
    free = {key: sum(frees) for key, frees in room.items()}
    spread_pools = sorted(own)

    def fits(limit: dict[int, int]) -> bool:
        for gpu in {d.gpu for d in data.demands}:
            pools = [d for d in data.demands if d.gpu == gpu]
            need = sum(d.num_stages * d.stage_gpus for d in pools)
            held = 0
            for r, rack in enumerate(data.racks):
                most = sum(d.stage_gpus * min(caps[d.pool_index][r], d.pp_size * limit.get(d.pool_index, d.num_instances))
                           for d in pools)
                held += min(free.get((rack, gpu), 0), most)
            if held < need:
                return False
        return True

    base = sum(own.values())
    for raised in range(SPREAD_RAISES_TRIED + 1):
        for extra in itertools.combinations_with_replacement(spread_pools, raised):
            limit = dict(own)
            for p in extra:
                limit[p] += 1
            if fits(limit):
                return base + raised
    return base + SPREAD_RAISES_TRIED + 1


def pooled(data: PlacementData) -> PlacementData:
    """``data`` with all racks merged into one and no KV: the relaxation the domain bounds solve."""
    domains = tuple(d.model_copy(update={"rack": POOLED_RACK}) for d in data.domains)
    demands = tuple(d.model_copy(update={"kv_units_per_stage": 0}) for d in data.demands)
    return data.model_copy(update={"demands": demands, "domains": domains, "classes": domain_classes(demands, domains),
                                   "racks": (POOLED_RACK,), "uplink_kv_units": None, "kv_units_per_gb_per_s": None,
                                   "spread_racks": False})


class LowerBounds:
    """Lower bounds per objective key, the pooled relaxation solved lazily from ``budget``."""

    def __init__(self, data: PlacementData, budget: SolveBudget):
        self.data = data
        self.budget = budget
        self._model: cp_model.CpModel | None = None
        self._expressions: dict[str, cp_model.LinearExpr] = {}
        self._own_spread: dict[int, int] | None = None
        self._exact: dict[tuple, RackOptimum | None] = {}

    def of(self, key: str, proven: dict[str, int], greedy_value: int) -> int:
        """A lower bound on objective ``key`` given the ``proven`` optima of the earlier ones."""
        if key == "spread":
            return spread_lower_bound(self.data)
        if key == "pipelines_in_rack":
            return 0
        if key == "kv_egress":
            return max(0, sum(d.kv_units_per_stage * d.num_stages for d in self.data.demands))
        cheap = 0
        if key == "domains" and "pipelines_in_domain" in proven:
            exact = self.exact(proven)
            if exact is not None and exact.split_stages == proven["pipelines_in_domain"]:
                return exact.domains
        if key == "domains":
            for gpu in {d.gpu for d in self.data.demands}:
                needed = sum(d.num_stages * d.stage_gpus for d in self.data.demands if d.gpu == gpu)
                largest = max((d.num_free for d in self.data.domains if d.gpu == gpu), default=1)
                cheap += math.ceil(needed / largest)
            if greedy_value <= cheap:
                return cheap
        elif key == "pipelines_in_domain":
            if greedy_value == 0:
                return 0
            exact = self.exact(proven)
            if exact is not None:
                return exact.split_stages
        racked = self._lp_bound(key, proven) or 0
        if racked >= greedy_value:
            return racked
        return max(cheap, racked, self._pooled_bound(key, proven))

    def _lp_bound(self, key: str, proven: dict[str, int]) -> int | None:
        held = {k: v for k, v in proven.items() if k in ("spread", "kv_egress")}
        if key == "domains" and "pipelines_in_domain" in proven:
            held["pipelines_in_domain"] = proven["pipelines_in_domain"]
        own = self._own() if "spread" in held else {}
        return lp_lower_bound(self.data, key, held, own, KvLocality.absolute_gap)

    def exact(self, proven: dict[str, int]) -> RackOptimum | None:
        """The rack programs' optimum given the proven spread and pipelines in one rack (cached)."""
        if "spread" not in proven:
            return None
        key = (proven["spread"], proven.get("pipelines_in_rack"))
        if key not in self._exact:
            self._exact[key] = rack_optimum(self.data, proven, self._own())
        return self._exact[key]

    def _own(self) -> dict[int, int]:
        if self._own_spread is None:
            self._own_spread = spread_instances_per_rack(self.data)
        return self._own_spread

    def _pooled_bound(self, key: str, proven: dict[str, int]) -> int:
        if self.budget.spent:
            return 0
        if self._model is None:
            relaxed = pooled(self.data)
            if any(not c.patterns for c in relaxed.classes):
                # Per-domain counts at cluster scale would be no cheaper than the full model.
                return 0
            self._model = cp_model.CpModel()
            variables = PlacementVariables(self._model, relaxed)
            EveryStagePlaced().build(variables)
            DomainCapacity().build(variables)
            self._expressions = {o.key: o.build(variables) for o in (PipelinesInDomain(), FewestDomains())}
        if key == "domains" and "pipelines_in_domain" in proven:
            self._model.add(self._expressions["pipelines_in_domain"] <= proven["pipelines_in_domain"])
        self._model.minimize(self._expressions[key])
        code, solver = self.budget.solve(self._model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return 0
        return math.ceil(solver.best_objective_bound - 1e-6)
