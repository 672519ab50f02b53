"""The cheapest fleet option over ranges of request rate, from min-cost cells, without interpolation.

The cost of the cheapest fleet of one option is a step function of the rate ``x``: it buys whole
GPUs, and a fleet that serves ``x`` serves every lower rate. A min-cost cell at rate ``r`` that
found a fleet costing ``c`` with capacity ``k >= r`` therefore tells, for every rate ``x``:

- an upper bound ``U(x) = min{c_j : k_j >= x}`` (that fleet serves ``x``), and
- a lower bound ``L(x) = max{c_i : r_i <= x}`` (when proven optimal: serving ``x >= r_i`` costs at
  least what serving ``r_i`` costs), ``L(x) = inf`` once a proven-infeasible rate ``r_i <= x``.

Where ``L = U`` the cost is known exactly (on ``[r_i, k_i]`` for each cell). Between the swept rates
and the fleets' capacities (the breakpoints) both bounds are constant, so the cheapest option can
only change at a breakpoint: the ranges below are split there, and a range where the bounds of two
options overlap is reported as undetermined, with the options that may be cheapest, instead of
guessing a crossing point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# Relative tolerance for "costs equal" (prices are cents; costs sum a few of them).
COST_TOLERANCE = 1e-9


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepPoint(_Out):
    """One min-cost cell of one option: the fleet found at ``rate_rps`` (cost None: no plan)."""

    rate_rps: float
    status: str
    cost_usd_per_hour: float | None = None
    capacity_rps: float | None = None
    gpus: int | None = None


class OptionSteps(_Out):
    """An option's min-cost cells in one scenario, by rate."""

    budget: str
    points: list[StepPoint]

    @classmethod
    def from_rows(cls, budget: str, rows: Sequence[dict]) -> "OptionSteps":
        points = [StepPoint(rate_rps=r["rate_rps"], status=r["status"], cost_usd_per_hour=r["cost_usd_per_hour"],
                            capacity_rps=r["goodput_rps"], gpus=r["gpus"]) for r in rows]
        return cls(budget=budget, points=sorted(points, key=lambda p: p.rate_rps))

    @property
    def solved(self) -> list[StepPoint]:
        return [p for p in self.points if p.cost_usd_per_hour is not None and p.capacity_rps is not None]

    @property
    def first_infeasible_rps(self) -> float | None:
        """The lowest swept rate proven infeasible: this option serves no rate from there up."""
        return min((p.rate_rps for p in self.points if p.status == "infeasible"), default=None)

    @property
    def capacity_limit_rps(self) -> float | None:
        """The largest capacity of any fleet found; None when no fleet was found."""
        return max((p.capacity_rps for p in self.solved), default=None)

    def upper_usd_per_hour(self, rate_rps: float) -> float:
        """``U``: the cheapest fleet found that serves ``rate_rps`` (inf: none found)."""
        return min((p.cost_usd_per_hour for p in self.solved if p.capacity_rps >= rate_rps * (1 - COST_TOLERANCE)),
                   default=math.inf)

    def lower_usd_per_hour(self, rate_rps: float) -> float:
        """``L``: what serving ``rate_rps`` costs at least (inf: proven impossible)."""
        infeasible = self.first_infeasible_rps
        if infeasible is not None and rate_rps >= infeasible:
            return math.inf
        return max((p.cost_usd_per_hour for p in self.solved if p.status == "optimal" and p.rate_rps <= rate_rps),
                   default=0.0)

    def gpus_at(self, rate_rps: float) -> int | None:
        """GPUs of the fleet behind ``U(rate_rps)``."""
        serving = [p for p in self.solved if p.capacity_rps >= rate_rps * (1 - COST_TOLERANCE)]
        best = min(serving, key=lambda p: (p.cost_usd_per_hour, p.gpus or 0), default=None)
        return None if best is None else best.gpus


class CheapestRange(_Out):
    """Over ``[from_rate_rps, to_rate_rps]`` the option ``budget`` gives the cheapest fleet.

    ``budget`` None: the swept rates do not settle which option is cheapest here; ``contenders``
    are the options that may be (none: no option serves these rates).
    """

    model: str
    workload: str
    slo: str
    from_rate_rps: float
    to_rate_rps: float
    budget: str | None
    min_cost_usd_per_hour: float | None = Field(description="the cheapest fleet's cost over the range, lowest")
    max_cost_usd_per_hour: float | None = Field(description="... and highest (a step inside the range)")
    contenders: list[str] = Field(default_factory=list)


class Crossover(_Out):
    """As the rate grows, ``to_budget`` takes over from ``from_budget`` as the cheapest option.

    At one rate when ``low_rate_rps == high_rate_rps`` (a cost step of one option), else somewhere
    between the two (the swept rates do not say where).
    """

    model: str
    workload: str
    slo: str
    from_budget: str
    to_budget: str
    low_rate_rps: float
    high_rate_rps: float

    @property
    def exact(self) -> bool:
        return self.low_rate_rps == self.high_rate_rps


def breakpoints(options: Sequence[OptionSteps]) -> list[float]:
    """Swept rates and fleet capacities inside the swept span, ascending."""
    rates = [p.rate_rps for o in options for p in o.points]
    low, high = min(rates), max(rates)
    capacities = [p.capacity_rps for o in options for p in o.solved if low <= p.capacity_rps <= high]
    return sorted(set(rates) | set(capacities))


def _positions(points: list[float]) -> list[tuple[float, bool]]:
    """Each breakpoint, and the midpoint of each gap between breakpoints (flag: is a breakpoint)."""
    out: list[tuple[float, bool]] = []
    for index, point in enumerate(points):
        out.append((point, True))
        if index + 1 < len(points):
            out.append(((point + points[index + 1]) / 2, False))
    return out


def _leader(options: Sequence[OptionSteps], rate_rps: float) -> tuple[str | None, tuple[str, ...], float]:
    """(cheapest option or None, the options that may be cheapest, its cost) at ``rate_rps``."""
    upper = np.array([o.upper_usd_per_hour(rate_rps) for o in options])
    lower = np.array([o.lower_usd_per_hour(rate_rps) for o in options])
    best = int(np.argmin(upper))  # ties: the first option in grid order
    if not np.isfinite(upper[best]):
        maybe = tuple(o.budget for o, low in zip(options, lower) if np.isfinite(low))
        return None, maybe, math.inf
    others = np.delete(lower, best)
    if others.size == 0 or upper[best] <= others.min() * (1 + COST_TOLERANCE):
        return options[best].budget, (), float(upper[best])
    maybe = tuple(o.budget for o, low in zip(options, lower) if low <= upper[best] * (1 + COST_TOLERANCE))
    return None, maybe, math.inf


def cheapest_ranges(key: tuple[str, str, str], options: Sequence[OptionSteps]) -> list[CheapestRange]:
    """The rate ranges over which each option is cheapest, split at breakpoints only."""
    points = breakpoints(options)
    positions = _positions(points)
    runs: list[list] = []  # [leader, contenders, first position index, last position index, costs]
    for index, (rate, _) in enumerate(positions):
        leader, maybe, cost = _leader(options, rate)
        if runs and (runs[-1][0], runs[-1][1]) == (leader, maybe):
            runs[-1][3] = index
            runs[-1][4].append(cost)
        else:
            runs.append([leader, maybe, index, index, [cost]])
    ranges = []
    for leader, maybe, first, last, costs in runs:
        # a run that starts or ends at a midpoint reaches the breakpoint next to it: inside a gap
        # the bounds are constant, so the leader changes at the breakpoint itself
        low = positions[first][0] if positions[first][1] else positions[first - 1][0]
        high = positions[last][0] if positions[last][1] else positions[last + 1][0]
        finite = [c for c in costs if math.isfinite(c)]
        ranges.append(CheapestRange(model=key[0], workload=key[1], slo=key[2], from_rate_rps=low, to_rate_rps=high,
                                    budget=leader, min_cost_usd_per_hour=min(finite, default=None),
                                    max_cost_usd_per_hour=max(finite, default=None), contenders=list(maybe)))
    return ranges


def crossovers_of(ranges: Sequence[CheapestRange]) -> list[Crossover]:
    """Each change of the cheapest option along ``ranges`` (one scenario, ascending)."""
    found = []
    previous: CheapestRange | None = None
    for current in ranges:
        if current.budget is None:
            if not current.contenders:
                previous = None  # nothing serves these rates: no crossover across them
            continue
        if previous is not None and previous.budget != current.budget:
            found.append(Crossover(model=current.model, workload=current.workload, slo=current.slo,
                                   from_budget=previous.budget, to_budget=current.budget,
                                   low_rate_rps=previous.to_rate_rps, high_rate_rps=current.from_rate_rps))
        previous = current
    return found
