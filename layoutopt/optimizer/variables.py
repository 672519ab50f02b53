"""The CP-SAT decision variables, in one container with query methods.

Constraint and objective modules ask this container for what they need (instances of one role,
GPUs of one type, total cost) instead of building expressions of their own, so each expression
has one definition.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.optimizer.scaling import IntegerCandidate, IntegerTable
from layoutopt.plan import Role


class LayoutVariables:
    """``num_instances[name]``, the rates served per mode and the mode choices."""

    def __init__(self, model: cp_model.CpModel, table: IntegerTable, prefix: str = ""):
        # ``prefix`` names the variables of one member when several tables share a model (fleets).
        self.model = model
        self.table = table
        self.prefix = prefix
        # How many instances of each candidate the plan runs: the main decision.
        self.num_instances: dict[str, cp_model.IntVar] = {
            c.name: model.new_int_var(0, c.max_instances, f"num_instances[{prefix}{c.name}]") for c in table.candidates
        }
        max_rate = max(table.max_rate_units, 0)
        # Requests/s (in rate units) served by prefill+decode pools and by colocated instances;
        # kept apart because each is bounded by different capacities.
        self.disaggregated_rate = model.new_int_var(0, max_rate, f"rate_units[{prefix}disaggregated]")
        self.colocated_rate = model.new_int_var(0, max_rate, f"rate_units[{prefix}colocated]")
        # The rate the whole plan serves: the goodput the objectives reward.
        self.total_rate = model.new_int_var(0, max_rate, f"rate_units[{prefix}total]")
        # Whether the plan runs disaggregated pools / colocated instances at all (any-or-none).
        self.uses_disaggregated = model.new_bool_var(f"uses_mode[{prefix}disaggregated]")
        self.uses_colocated = model.new_bool_var(f"uses_mode[{prefix}colocated]")
        # Whether a candidate is used at all; created on demand (no-good cuts for --top-k).
        self._is_used: dict[str, cp_model.IntVar] = {}
        # Rate units a pooled candidate's instances sustain together (candidates whose per-instance
        # rate grows with the pool size: one queue behind the router); created on demand.
        self._pool_capacity: dict[str, cp_model.IntVar] = {}

    # ------------------------------------------------------------------ queries
    def candidates(self, role: Role | None = None) -> list[IntegerCandidate]:
        return [c for c in self.table.candidates if role is None or c.role == role]

    def capacity(self, role: Role) -> cp_model.LinearExpr:
        """Rate units the instances of ``role`` sustain together."""
        linear = [c for c in self.candidates(role) if not c.pool_rate_units]
        pooled = [self.pool_capacity(c) for c in self.candidates(role) if c.pool_rate_units]
        return cp_model.LinearExpr.weighted_sum(
            [self.num_instances[c.name] for c in linear] + pooled,
            [c.capacity_rate_units for c in linear] + [1] * len(pooled),
        )

    def pool_capacity(self, c: IntegerCandidate) -> cp_model.IntVar:
        """y_c <= r_k n_c on the segment k of pool sizes n_k <= n_c < n_{k+1} that n_c falls in.

        The per-instance rate r_k grows with the pool (a shared queue), so y_c(n) is convex in n;
        one bool per segment picks it (exact at grid points, conservative between them)."""
        if c.name in self._pool_capacity:
            return self._pool_capacity[c.name]
        model, count = self.model, self.num_instances[c.name]
        bounds = [0] + [n for n, _ in c.pool_rate_units] + [c.max_instances + 1]
        rates = [c.capacity_rate_units] + [r for _, r in c.pool_rate_units]
        # The most any count reaches (not the count at U_c: a grid rate may lie below a smaller count's).
        y = model.new_int_var(0, max(rates) * c.max_instances, f"pool_capacity[{self.prefix}{c.name}]")
        segments = []
        for k, rate in enumerate(rates):
            on = model.new_bool_var(f"pool_segment[{self.prefix}{c.name},{bounds[k]}]")
            model.add(count >= bounds[k]).only_enforce_if(on)
            model.add(count <= bounds[k + 1] - 1).only_enforce_if(on)
            model.add(y <= rate * count).only_enforce_if(on)
            segments.append(on)
        model.add_exactly_one(segments)
        # Valid on every segment (rates grow with the pool): the LP relaxation sees the segment
        # bounds only through fractional booleans, so without this cut its bound is the variable's
        # range and a big budget's first ratio step cannot be proved (2,048 GPUs: 2.5x gap).
        model.add(y <= max(rates) * count)
        self._pool_capacity[c.name] = y
        return y

    def num_role_instances(self, role: Role) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.sum([self.num_instances[c.name] for c in self.candidates(role)])

    def gpus_of_type(self, gpu: str) -> cp_model.LinearExpr:
        rows = [c for c in self.table.candidates if c.gpu == gpu]
        return cp_model.LinearExpr.weighted_sum(
            [self.num_instances[c.name] for c in rows], [c.gpus_per_instance for c in rows]
        )

    def total_cost(self) -> cp_model.LinearExpr:
        """Cost units of the whole plan."""
        rows = self.table.candidates
        return cp_model.LinearExpr.weighted_sum([self.num_instances[c.name] for c in rows],
                                                [c.cost_units for c in rows])

    def is_used(self, name: str) -> cp_model.IntVar:
        """A bool equal to ``num_instances[name] >= 1`` (created the first time it is asked for)."""
        if name not in self._is_used:
            used = self.model.new_bool_var(f"is_used[{name}]")
            count = self.num_instances[name]
            self.model.add(count >= 1).only_enforce_if(used)
            self.model.add(count == 0).only_enforce_if(~used)
            self._is_used[name] = used
        return self._is_used[name]

    # ------------------------------------------------------------------ reading a solution
    def counts(self, solver: cp_model.CpSolver) -> dict[str, int]:
        """Instances per candidate in the solver's current solution (zeros left out)."""
        values = {name: int(solver.value(var)) for name, var in self.num_instances.items()}
        return {name: n for name, n in values.items() if n}
