"""Objective terms and the constraints that carry one phase's optimum into the next.

Every objective is optimized lexicographically in two solves rather than one weighted sum: the
weights a single solve would need (larger than the whole range of the second term) push
coefficients past what the LP relaxation represents exactly, and make optimality hard to prove.
"""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class MaximizeGoodput:
    """max r: the most requests/s the plan serves within the SLO."""

    name = "max-goodput"

    def build(self, variables: LayoutVariables) -> None:
        variables.model.maximize(variables.total_rate)


class MinimizeCost:
    """min sum_c cost_c n_c: the cheapest plan."""

    name = "min-cost"

    def build(self, variables: LayoutVariables) -> None:
        variables.model.minimize(variables.total_cost())


class ParametricRatio:
    """max  d * r - p * cost: Dinkelbach's subproblem for the ratio r / cost at q = p / d.

    Its optimum is positive exactly when some plan has r / cost > q, and zero when q is the best
    ratio, which is how the iterations prove optimality.
    """

    name = "goodput-per-dollar"

    def __init__(self, numerator: int, denominator: int):
        self.numerator = numerator
        self.denominator = denominator

    def build(self, variables: LayoutVariables) -> None:
        variables.model.maximize(self.denominator * variables.total_rate - self.numerator * variables.total_cost())


class PositiveRate:
    """r >= 1 rate unit: a ratio objective must not pick the empty plan (0 / 0)."""

    name = "positive rate"

    def build(self, variables: LayoutVariables) -> None:
        # The empty plan has no ratio; every plan considered serves some traffic.
        variables.model.add(variables.total_rate >= 1).with_name("positive_rate")


class RateAtLeast:
    """r >= R*: keep the goodput the previous phase reached."""

    name = "rate floor"

    def __init__(self, rate_units: int):
        self.rate_units = rate_units

    def build(self, variables: LayoutVariables) -> None:
        # The secondary phase may only pick among plans as good as the primary optimum.
        variables.model.add(variables.total_rate >= self.rate_units).with_name("rate_floor")


class CostAtMost:
    """cost <= C*: keep the price the previous phase reached."""

    name = "cost ceiling"

    def __init__(self, cost_units: int):
        self.cost_units = cost_units

    def build(self, variables: LayoutVariables) -> None:
        # The secondary phase may only pick among plans as cheap as the primary optimum.
        variables.model.add(variables.total_cost() <= self.cost_units).with_name("cost_ceiling")


class RatioFloor:
    """d * r >= p * cost: keep goodput per dollar at least p / d while the next phase maximizes goodput."""

    name = "ratio floor"

    def __init__(self, numerator: int, denominator: int):
        self.numerator = numerator
        self.denominator = denominator

    def build(self, variables: LayoutVariables) -> None:
        # The second phase may trade a sliver of the best ratio for using more of the budget.
        variables.model.add(
            self.denominator * variables.total_rate >= self.numerator * variables.total_cost()
        ).with_name("ratio_floor")
