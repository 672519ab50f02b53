"""Constraint families of the placement model; each adds its rows in ``build``."""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.topology.placement.variables import PlacementVariables


class EveryStagePlaced:
    """sum over domains of stage groups of p = instances_p x pp_p: every stage of every instance placed."""

    name = "every stage placed"

    def build(self, v: PlacementVariables) -> None:
        for demand in v.data.demands:
            v.model.add(v.in_rack(demand) == demand.num_stages).with_name(f"every_stage_placed[{demand.label}]")


class DomainCapacity:
    """Free GPUs only, never one GPU twice.

    A class's patterns fit one domain by construction, so it suffices that at most as many
    domains take a pattern as the class has: sum_k domains_with[c, k] <= |c|. A domain with its
    own counts keeps sum_p stage_gpus_p x stages[p, d] <= free GPUs of d.
    """

    name = "NVLink domain capacity"

    def build(self, v: PlacementVariables) -> None:
        for c, cls in enumerate(v.data.classes):
            if cls.patterns:
                used = cp_model.LinearExpr.sum([v.domains_with[c, k] for k in range(len(cls.patterns))])
                v.model.add(used <= len(cls.members)).with_name(f"class_size[{cls.label}]")
                continue
            for name in cls.members:
                used = cp_model.LinearExpr.weighted_sum([v.stages[p, name] for p in cls.pool_indices],
                                                        [v.demands[p].stage_gpus for p in cls.pool_indices])
                v.model.add(used <= cls.num_free).with_name(f"domain_capacity[{name}]")


class KvUplink:
    """egress_r >= balance_r, ingress_r >= -balance_r, both <= uplink_r: KV fits each rack's uplink.

    The balance is the rack's produced minus consumed KV; routing to the nearest decode first
    sends only that imbalance over the uplink, and the uplink is full duplex.
    """

    name = "KV traffic over rack uplinks"

    def __init__(self, enforce_capacity: bool = True):
        self.enforce_capacity = enforce_capacity

    def build(self, v: PlacementVariables) -> None:
        if not v.kv_egress:
            return
        for rack in v.data.racks:
            balance = v.kv_balance(rack)
            v.model.add(v.kv_egress[rack] >= balance).with_name(f"kv_egress_floor[{rack}]")
            v.model.add(v.kv_ingress[rack] >= -balance).with_name(f"kv_ingress_floor[{rack}]")
            if self.enforce_capacity and v.data.uplink_kv_units is not None:
                capacity = v.data.uplink_kv_units[rack]
                v.model.add(v.kv_egress[rack] <= capacity).with_name(f"kv_uplink_out[{rack}]")
                v.model.add(v.kv_ingress[rack] <= capacity).with_name(f"kv_uplink_in[{rack}]")


def rack_classes(data) -> list[list[str]]:
    """Racks that are interchangeable: the same (GPU type, free GPUs) of every domain and the same
    uplink; each class in rack order, classes of one rack left out."""
    groups: dict[tuple, list[str]] = {}
    shape: dict[str, list[tuple[str, int]]] = {rack: [] for rack in data.racks}
    for d in data.domains:
        shape[d.rack].append((d.gpu, d.num_free))
    for rack in data.racks:
        uplink = data.uplink_kv_units[rack] if data.uplink_kv_units is not None else None
        groups.setdefault((uplink, tuple(sorted(shape[rack]))), []).append(rack)
    return [racks for racks in groups.values() if len(racks) > 1]


class IdenticalRacksOrdered:
    """S_{p*, r_1} >= S_{p*, r_2} >= ... over each class of interchangeable racks (p*: the pool with
    the most stage groups).

    Every objective and constraint is symmetric in such racks, so any placement can be permuted
    to meet this order with the same values: it only removes copies the search would otherwise
    have to rule out one by one.
    """

    name = "interchangeable racks in order"

    def build(self, v: PlacementVariables) -> None:
        if not v.data.demands:
            return
        leader = max(v.data.demands, key=lambda d: (d.num_stages, -d.pool_index))
        for racks in rack_classes(v.data):
            for first, second in zip(racks, racks[1:]):
                v.model.add(v.in_rack(leader, first) >= v.in_rack(leader, second)).with_name(
                    f"racks_in_order[{first},{second}]")


def default_constraints(enforce_kv_capacity: bool = True) -> list:
    return [EveryStagePlaced(), DomainCapacity(), KvUplink(enforce_kv_capacity), IdenticalRacksOrdered()]
