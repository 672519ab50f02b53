"""Objective terms of the placement model, optimized one after another in priority order.

1. spread over racks (only with ``spread_racks``): minimize sum_p max_r instances of p in rack r
   (stages / pp, rounded up), so losing one rack loses as few instances of a pool as possible;
2. pipelines in one rack: minimize the stages of PP instances that do not complete a whole
   instance in their rack (those instances send activations over the uplinks);
3. KV locality: minimize sum_r kv_egress[r], the KV traffic that leaves its rack (proved to
   within 1% of all KV traffic);
4. pipelines in one domain: minimize the stages of PP instances that do not complete a whole
   instance in their NVLink domain (the performance model counts NVLink between the stages of an
   instance that fits one domain, so splitting it would make the plan slower than predicted);
5. tidy packing: minimize the NVLink domains touched, leaving whole domains free.

Each ``build`` adds its auxiliary variables and returns the expression to minimize.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.topology.placement.data import KV_UNITS_TOTAL
from layoutopt.topology.placement.variables import PlacementVariables


class SpreadOverRacks:
    name = "spread over racks"
    key = "spread"

    def build(self, v: PlacementVariables) -> cp_model.LinearExpr:
        terms = []
        for demand in v.data.demands:
            if demand.num_instances < 2:
                continue
            # max_in_rack[p]: the most instances of pool p one rack failure takes down (a PP
            # instance counts in every rack holding one of its stages, hence pp x worst).
            worst = v.model.new_int_var(0, demand.num_instances, f"max_in_rack[{demand.label}]")
            for rack in v.data.racks:
                v.model.add(demand.pp_size * worst >= v.in_rack(demand, rack)).with_name(
                    f"max_in_rack[{demand.label},{rack}]")
            terms.append(worst)
        return cp_model.LinearExpr.sum(terms)


class KvLocality:
    name = "KV traffic across racks"
    key = "kv_egress"
    # Balancing integer instance counts rack by rack is a partition problem whose last units are
    # slow to prove; 1% of all KV traffic is close enough to count as optimal.
    absolute_gap = KV_UNITS_TOTAL // 100

    def build(self, v: PlacementVariables) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.sum(list(v.kv_egress.values()))


class PipelinesInRack:
    name = "pipeline stages across racks"
    key = "pipelines_in_rack"

    def build(self, v: PlacementVariables) -> cp_model.LinearExpr:
        terms = []
        for demand in v.data.demands:
            if demand.pp_size == 1:
                continue
            for rack in v.data.racks:
                # whole[p, r]: complete PP instances in rack r; leftover[p, r]: stages that are not.
                whole = v.model.new_int_var(0, demand.num_instances, f"whole_instances[{demand.label},{rack}]")
                leftover = v.model.new_int_var(0, demand.pp_size - 1, f"leftover_stages[{demand.label},{rack}]")
                v.model.add(v.in_rack(demand, rack) == demand.pp_size * whole + leftover).with_name(
                    f"pipeline_in_rack[{demand.label},{rack}]")
                terms.append(leftover)
        return cp_model.LinearExpr.sum(terms)


class PipelinesInDomain:
    name = "pipeline stages across NVLink domains"
    key = "pipelines_in_domain"

    def build(self, v: PlacementVariables) -> cp_model.LinearExpr:
        terms, coefficients = [], []
        for c, cls in enumerate(v.data.classes):
            pipelined = [p for p in cls.pool_indices if v.demands[p].pp_size > 1]
            if not pipelined:
                continue
            if cls.patterns:
                # A pattern's leftover stages (a_p mod pp_p) are a constant of the pattern.
                for k, pattern in enumerate(cls.patterns):
                    leftover = sum(pattern[cls.pool_indices.index(p)] % v.demands[p].pp_size for p in pipelined)
                    if leftover:
                        terms.append(v.domains_with[c, k])
                        coefficients.append(leftover)
                continue
            for name in cls.members:
                for p in pipelined:
                    demand = v.demands[p]
                    upper = v.stage_upper[p, name]
                    whole = v.model.new_int_var(0, upper // demand.pp_size, f"whole_in_domain[{demand.label}@{name}]")
                    leftover = v.model.new_int_var(0, demand.pp_size - 1, f"leftover_in_domain[{demand.label}@{name}]")
                    v.model.add(v.stages[p, name] == demand.pp_size * whole + leftover).with_name(
                        f"pipeline_in_domain[{demand.label}@{name}]")
                    terms.append(leftover)
                    coefficients.append(1)
        return cp_model.LinearExpr.weighted_sum(terms, coefficients)


class FewestDomains:
    name = "NVLink domains touched"
    key = "domains"

    def build(self, v: PlacementVariables) -> cp_model.LinearExpr:
        # Pattern counts are domains touched already (the bin-packing bound is tight over them);
        # a domain with its own counts gets used[d] >= stages[p, d] / upper.
        terms = list(v.domains_with.values())
        for cls in v.data.classes:
            if cls.patterns:
                continue
            for name in cls.members:
                used = v.model.new_bool_var(f"used[{name}]")
                for p in cls.pool_indices:
                    v.model.add(v.stages[p, name] <= v.stage_upper[p, name] * used)
                terms.append(used)
        return cp_model.LinearExpr.sum(terms)


def objectives_in_order(spread_racks: bool, has_kv: bool, has_pipelines: bool) -> list:
    terms: list = [SpreadOverRacks()] if spread_racks else []
    if has_pipelines:
        terms.append(PipelinesInRack())
    if has_kv:
        terms.append(KvLocality())
    if has_pipelines:
        terms.append(PipelinesInDomain())
    terms.append(FewestDomains())
    return terms
