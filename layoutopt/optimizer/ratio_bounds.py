"""Bounds on goodput per dollar that need no solver: they certify the ratio objective's gap.

Both read the integer table. ``relaxed_ratio_bound`` drops integrality, budgets and KV limits:
then the best plan runs only the best kind of instance (colocated) or best pair of kinds
(prefill + decode), because the ratio of a mix never exceeds the best ratio of its parts.
"""

from __future__ import annotations

from fractions import Fraction

from layoutopt.optimizer.scaling import IntegerTable


def _allowed_modes(table: IntegerTable) -> tuple[str, ...]:
    if table.mode == "colocated":
        return ("colocated",)
    if table.mode == "disaggregated":
        return ("disaggregated",)
    return ("colocated", "disaggregated")


def relaxed_ratio_bound(table: IntegerTable) -> Fraction | None:
    """Largest rate units per cost unit of any fractional plan; None when nothing serves traffic."""
    options: list[Fraction] = []
    modes = _allowed_modes(table)
    if "colocated" in modes:
        options += [Fraction(c.best_rate_units, c.cost_units) for c in table.by_role("colocated")]
    if "disaggregated" in modes and table.by_role("prefill") and table.by_role("decode"):
        # Cost per rate unit of a disaggregated request is the sum of both pools' cost per unit.
        prefill = min(Fraction(c.cost_units, c.best_rate_units) for c in table.by_role("prefill"))
        decode = min(Fraction(c.cost_units, c.best_rate_units) for c in table.by_role("decode"))
        options.append(1 / (prefill + decode))
    return max(options) if options else None


def cheapest_serving_cost_units(table: IntegerTable) -> int:
    """Cost of the cheapest plan that serves any traffic (a lower bound on every plan's cost)."""
    options: list[int] = []
    modes = _allowed_modes(table)
    if "colocated" in modes:
        options += [c.cost_units for c in table.by_role("colocated")]
    if "disaggregated" in modes and table.by_role("prefill") and table.by_role("decode"):
        options.append(min(c.cost_units for c in table.by_role("prefill"))
                       + min(c.cost_units for c in table.by_role("decode")))
    return min(options) if options else 0
