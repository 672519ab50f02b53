"""The plan's rate is what its two modes serve, and at least the target rate when one is given."""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class RateBalance:
    """r = r_disagg + r_coloc;  r >= R_min (the target rate, 0 when maximizing)."""

    name = "target rate"

    def build(self, variables: LayoutVariables) -> None:
        model = variables.model
        # Traffic splits between disaggregated pools and colocated instances.
        model.add(
            variables.total_rate == variables.disaggregated_rate + variables.colocated_rate
        ).with_name("rate_balance")
        minimum = variables.table.min_rate_units
        if minimum > 0:
            # A forecast rate (--rate) must be served in full.
            model.add(variables.total_rate >= minimum).with_name("rate_target")
