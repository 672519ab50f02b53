"""Decision variables of the placement model, with the sums the constraints read.

Only counts are decided. Identical domains are grouped into classes (``data.DomainClass``) and
the model counts how many domains of a class take each fill pattern, so neither identical
instances nor identical domains are ever told apart. A class with too many patterns gives each
of its domains its own count per pool instead.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.topology.placement.data import (
    KV_UNITS_TOTAL,
    DomainClass,
    PlacementData,
    StageDemand,
)


class PlacementVariables:
    """The model, its data and every variable family, built once."""

    def __init__(self, model: cp_model.CpModel, data: PlacementData):
        self.model = model
        self.data = data
        self.demands = {d.pool_index: d for d in data.demands}
        # domains_with[c, k]: domains of class c filled with pattern k -- the placement itself.
        self.domains_with: dict[tuple[int, int], cp_model.IntVar] = {}
        # stages[p, d]: stage groups of pool p in domain d, for classes without patterns.
        self.stages: dict[tuple[int, str], cp_model.IntVar] = {}
        self.stage_upper: dict[tuple[int, str], int] = {}
        for c, cls in enumerate(data.classes):
            for k, pattern in enumerate(cls.patterns):
                self.domains_with[c, k] = model.new_int_var(
                    0, len(cls.members), f"domains_with[{cls.label}#{'-'.join(map(str, pattern))}]")
            if cls.patterns:
                continue
            for name in cls.members:
                for p in cls.pool_indices:
                    demand = self.demands[p]
                    upper = min(cls.num_free // demand.stage_gpus, demand.per_domain_limit)
                    self.stage_upper[p, name] = upper
                    self.stages[p, name] = model.new_int_var(0, upper, f"stages[{demand.label}@{name}]")
        # kv_egress[r], kv_ingress[r]: KV units crossing rack r's uplink out and in, after
        # rack-local routing -- what shares the oversubscribed uplinks.
        self.kv_egress: dict[str, cp_model.IntVar] = {}
        self.kv_ingress: dict[str, cp_model.IntVar] = {}
        if data.has_kv:
            bound = 2 * KV_UNITS_TOTAL
            for rack in data.racks:
                self.kv_egress[rack] = model.new_int_var(0, bound, f"kv_egress[{rack}]")
                self.kv_ingress[rack] = model.new_int_var(0, bound, f"kv_ingress[{rack}]")

    def class_terms(self, c: int, cls: DomainClass, pool_index: int) -> tuple[list, list[int]]:
        """Variables and coefficients whose sum is the stage groups of a pool in class c."""
        if pool_index not in cls.pool_indices:
            return [], []
        if cls.patterns:
            position = cls.pool_indices.index(pool_index)
            pairs = [(self.domains_with[c, k], pattern[position]) for k, pattern in enumerate(cls.patterns)
                     if pattern[position]]
            return [x for x, _ in pairs], [a for _, a in pairs]
        return [self.stages[pool_index, name] for name in cls.members], [1] * len(cls.members)

    def in_rack(self, demand: StageDemand, rack: str | None = None) -> cp_model.LinearExpr:
        """Stage groups of ``demand`` in ``rack`` (in the whole cluster when None)."""
        terms, coefficients = [], []
        for c, cls in enumerate(self.data.classes):
            if rack is None or cls.rack == rack:
                x, a = self.class_terms(c, cls, demand.pool_index)
                terms += x
                coefficients += a
        return cp_model.LinearExpr.weighted_sum(terms, coefficients)

    def kv_balance(self, rack: str) -> cp_model.LinearExpr:
        """KV units produced minus consumed by the stage groups in ``rack``."""
        terms, coefficients = [], []
        for demand in self.data.demands:
            if demand.kv_units_per_stage:
                for c, cls in enumerate(self.data.classes):
                    if cls.rack == rack:
                        x, a = self.class_terms(c, cls, demand.pool_index)
                        terms += x
                        coefficients += [demand.kv_units_per_stage * value for value in a]
        return cp_model.LinearExpr.weighted_sum(terms, coefficients)

    def add_hint(self, counts: dict[tuple[int, str], int]) -> None:
        """Hint the placement ``counts`` (stage groups per (pool index, domain)) to the solver."""
        for c, cls in enumerate(self.data.classes):
            if not cls.patterns:
                for key in ((p, name) for name in cls.members for p in cls.pool_indices):
                    self.model.add_hint(self.stages[key], counts.get(key, 0))
                continue
            index = {pattern: k for k, pattern in enumerate(cls.patterns)}
            taken = [0] * len(cls.patterns)
            for name in cls.members:
                pattern = tuple(counts.get((p, name), 0) for p in cls.pool_indices)
                if pattern in index:
                    taken[index[pattern]] += 1
            for k, n in enumerate(taken):
                self.model.add_hint(self.domains_with[c, k], n)
        if self.kv_egress:
            units = {d.pool_index: d.kv_units_per_stage for d in self.data.demands}
            rack_of = {d.name: d.rack for d in self.data.domains}
            balance = dict.fromkeys(self.data.racks, 0)
            for (p, name), n in counts.items():
                balance[rack_of[name]] += units[p] * n
            for rack, value in balance.items():
                self.model.add_hint(self.kv_egress[rack], max(0, value))
                self.model.add_hint(self.kv_ingress[rack], max(0, -value))

    def add_hint_from(self, solver: cp_model.CpSolver) -> None:
        """Hint the solver's current solution (the placement variables) for the next phase."""
        for var in [*self.domains_with.values(), *self.stages.values()]:
            self.model.add_hint(var, solver.value(var))

    def counts_per_domain(self, solver: cp_model.CpSolver) -> dict[tuple[int, str], int]:
        """Stage groups per (pool, domain) in the solution: each class's patterns dealt to its
        members in order, fullest first."""
        counts: dict[tuple[int, str], int] = {}
        for c, cls in enumerate(self.data.classes):
            if not cls.patterns:
                for key in ((p, name) for name in cls.members for p in cls.pool_indices):
                    counts[key] = int(solver.value(self.stages[key]))
                continue
            dealt = []
            for k, pattern in enumerate(cls.patterns):
                dealt += [pattern] * int(solver.value(self.domains_with[c, k]))
            used = {p: self.demands[p].stage_gpus for p in cls.pool_indices}
            dealt.sort(key=lambda pat: -sum(a * used[p] for a, p in zip(pat, cls.pool_indices)))
            for name, pattern in zip(cls.members, dealt):
                for p, count in zip(cls.pool_indices, pattern):
                    counts[p, name] = count
        return counts
