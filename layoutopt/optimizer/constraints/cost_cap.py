"""The plan's price per hour stays within a dollar budget, when one is given."""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class CostCap:
    """sum_c cost_c * n_c <= C_max ($/hour, in cost units)."""

    name = "$ cap"

    def build(self, variables: LayoutVariables) -> None:
        cap = variables.table.max_cost_units
        if cap is None:
            return
        # A '$400/h' budget bounds the sum of instance prices, whatever the GPU types.
        variables.model.add(variables.total_cost() <= cap).with_name("cost_cap")
