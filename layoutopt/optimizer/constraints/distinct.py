"""No-good cut for --top-k: the next plan must differ in which instance kinds it uses."""

from __future__ import annotations

from collections.abc import Iterable

from ortools.sat.python import cp_model

from layoutopt.optimizer.variables import LayoutVariables


class ExcludePlanStructure:
    """OR_{c in S} [n_c = 0]  OR  sum_{c not in S} n_c >= 1, for S the candidates a found plan uses."""

    name = "distinct plan"

    def __init__(self, used_names: Iterable[str]):
        self.used_names = frozenset(used_names)

    def build(self, variables: LayoutVariables) -> None:
        model = variables.model
        index = len([p for p in variables.model.proto.constraints if p.name.startswith("exclude_plan")])
        # Alternatives must change the set of layouts, not just add or drop one instance.
        literals = [~variables.is_used(name) for name in sorted(self.used_names) if name in variables.num_instances]
        others = [var for name, var in sorted(variables.num_instances.items()) if name not in self.used_names]
        if others:
            adds_new_kind = model.new_bool_var(f"adds_new_kind[{index}]")
            model.add(cp_model.LinearExpr.sum(others) >= 1).only_enforce_if(adds_new_kind)
            literals.append(adds_new_kind)
        model.add_bool_or(literals).with_name(f"exclude_plan[{index}]")
