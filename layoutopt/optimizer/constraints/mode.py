"""Serving mode: disaggregated pools, colocated instances, or both, as --mode allows.

The two mode bools are any-or-none switches: a mode that is off carries no instance and no rate;
a mode that is on runs at least one instance of each of its roles.
"""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class ModeChoice:
    """n_c <= U_c * u_mode(c);  r_mode <= R_max * u_mode;  u_mode <= sum of each role's n."""

    name = "mode"

    def build(self, variables: LayoutVariables) -> None:
        model = variables.model
        table = variables.table
        uses = {"disaggregated": variables.uses_disaggregated, "colocated": variables.uses_colocated}
        # --mode colocated / disaggregated switch the other mode off.
        if table.mode == "colocated":
            model.add(variables.uses_disaggregated == 0).with_name("mode_fixed[colocated]")
        elif table.mode == "disaggregated":
            model.add(variables.uses_colocated == 0).with_name("mode_fixed[disaggregated]")
        # An unused mode runs no instance.
        for c in table.candidates:
            switch = uses["colocated" if c.role == "colocated" else "disaggregated"]
            model.add(variables.num_instances[c.name] <= c.max_instances * switch)
        # An unused mode serves no traffic.
        model.add(variables.disaggregated_rate <= table.max_rate_units * variables.uses_disaggregated)
        model.add(variables.colocated_rate <= table.max_rate_units * variables.uses_colocated)
        # A used mode has every role it needs (one prefill and one decode instance at least).
        roles = {"disaggregated": ("prefill", "decode"), "colocated": ("colocated",)}
        for mode, switch in uses.items():
            for role in roles[mode]:
                model.add(variables.num_role_instances(role) >= switch).with_name(f"mode_roles[{mode},{role}]")
