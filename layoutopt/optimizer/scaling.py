"""The one place floats become integers for CP-SAT.

CP-SAT works on integers. Every float of the ``CandidateTable`` is scaled here, with the scale in
the constant's name, and rounded in the direction that keeps the integer model conservative:
capacities and bandwidths down, KV bytes up, the $ cap down. Prices are kept to a tenth of a cent.
``IntegerTable`` is what the variables and constraint modules read; they never see a float.
"""

from __future__ import annotations

import math
from fractions import Fraction

from pydantic import BaseModel, ConfigDict

from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.plan import Role

# One rate unit is 1e-4 requests/s: capacities as small as 0.02 req/s (128k-token prompts on a
# big model) keep 0.5 % resolution, while 1e5 req/s still fits int64 products with costs.
RATE_SCALE_PER_RPS = 10_000
# One cost unit is a tenth of a cent per hour.
COST_SCALE_PER_USD_PER_HOUR = 1_000
# KV traffic and NIC bandwidth are counted in kilobytes (1e3 bytes).
KV_SCALE_PER_BYTE = 1e-3
# Largest magnitude we let any CP-SAT linear expression reach (CP-SAT needs sums below 2**63).
MAX_SAFE_INT = 2**61


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class IntegerCandidate(_Frozen):
    """A candidate's numbers as the solver uses them."""

    name: str
    role: Role
    gpu: str
    gpus_per_instance: int
    cost_units: int
    capacity_rate_units: int
    kv_kb_per_request: int
    nic_kb_per_s: int
    max_instances: int
    domain_group_gpus: int = 0  # GPUs that must share one NVLink domain (a stage, or a whole PP instance)
    # (n, rate units per instance from n instances on), increasing rates: a pooled queue's gain.
    pool_rate_units: tuple[tuple[int, int], ...] = ()

    @property
    def best_rate_units(self) -> int:
        """Highest rate units per instance at any pool size (bounds use it)."""
        return max([self.capacity_rate_units] + [r for _, r in self.pool_rate_units])

    def pool_capacity_units(self, num_instances: int) -> int:
        """Rate units ``num_instances`` instances sustain (the step function the solver encodes)."""
        per_instance = self.capacity_rate_units
        for n, rate in self.pool_rate_units:
            if n <= num_instances:
                per_instance = rate
        return num_instances * per_instance


class IntegerTable(_Frozen):
    """The candidate table in integers: instance data, limits, target rate, mode."""

    candidates: tuple[IntegerCandidate, ...]
    gpu_limits: dict[str, int]
    max_cost_units: int | None
    min_rate_units: int
    mode: str
    max_rate_units: int
    domain_capacity_gpus: dict[str, dict[int, int]] = {}
    disaggregated_gpu_limits: dict[str, int] | None = None
    incompatible_pairs: tuple[tuple[str, str], ...] = ()  # (prefill, decode) names the engine cannot connect

    def by_role(self, role: Role) -> list[IntegerCandidate]:
        return [c for c in self.candidates if c.role == role]

    @property
    def max_total_cost_units(self) -> int:
        """Cost of the most expensive plan the limits allow (bounds the cost variable)."""
        by_type: dict[str, int] = {}
        for c in self.candidates:
            by_type[c.gpu] = max(by_type.get(c.gpu, 0), c.cost_units * c.max_instances)
        total = sum(by_type.values())
        return min(total, self.max_cost_units) if self.max_cost_units is not None else total


def rate_units(rate_rps: float) -> int:
    """Requests/s -> rate units, rounded down."""
    return int(math.floor(rate_rps * RATE_SCALE_PER_RPS + 1e-9))


def rate_units_up(rate_rps: float) -> int:
    """Requests/s -> rate units, rounded up (for a rate that must be served)."""
    return int(math.ceil(rate_rps * RATE_SCALE_PER_RPS - 1e-9))


def rate_rps(units: int) -> float:
    return units / RATE_SCALE_PER_RPS


def cost_units(cost_usd_per_hour: float) -> int:
    return int(round(cost_usd_per_hour * COST_SCALE_PER_USD_PER_HOUR))


def cost_usd_per_hour(units: int) -> float:
    return units / COST_SCALE_PER_USD_PER_HOUR


def to_integer_table(table: CandidateTable) -> IntegerTable:
    """Scale every float of ``table``; drop candidates that can hold no instance."""
    rows = []
    for c in table.candidates:
        max_instances = table.max_instances(c)
        capacity = rate_units(c.capacity_rps)
        if max_instances < 1 or capacity < 1:
            continue
        rows.append(IntegerCandidate(
            name=c.name, role=c.role, gpu=c.gpu, gpus_per_instance=c.gpus_per_instance,
            cost_units=max(1, cost_units(c.cost_usd_per_hour)), capacity_rate_units=capacity,
            kv_kb_per_request=int(math.ceil(c.kv_bytes_per_request * KV_SCALE_PER_BYTE)),
            nic_kb_per_s=int(math.floor(c.nic_gb_per_s * 1e9 * KV_SCALE_PER_BYTE)),
            max_instances=max_instances, domain_group_gpus=c.domain_group_gpus,
            pool_rate_units=_pool_steps(c.pool_rps_per_instance, capacity, max_instances),
        ))
    max_cost = None
    if table.max_usd_per_hour is not None:
        max_cost = int(math.floor(table.max_usd_per_hour * COST_SCALE_PER_USD_PER_HOUR + 1e-6))
    return IntegerTable(
        candidates=tuple(rows), gpu_limits=dict(table.gpu_limits), max_cost_units=max_cost,
        min_rate_units=rate_units_up(table.min_rate_rps) if table.min_rate_rps else 0,
        mode=table.mode, max_rate_units=_max_rate_units(rows),
        domain_capacity_gpus={g: dict(caps) for g, caps in table.domain_capacity_gpus.items()},
        disaggregated_gpu_limits=None if table.disaggregated_gpu_limits is None
        else dict(table.disaggregated_gpu_limits),
        incompatible_pairs=_kept_pairs(table.incompatible_pairs, rows),
    )


def _pool_steps(grid: tuple[tuple[int, float], ...], capacity: int, max_instances: int) -> tuple[tuple[int, int], ...]:
    """The grid points (n <= max_instances, n >= 2) where the per-instance rate (rounded down) rises."""
    steps, last = [], capacity
    for n, rate_rps_per_instance in grid:
        units = rate_units(rate_rps_per_instance)
        if 2 <= n <= max_instances and units > last:
            steps.append((n, units))
            last = units
    return tuple(steps)


def _kept_pairs(pairs: tuple[tuple[str, str], ...], rows: list[IntegerCandidate]) -> tuple[tuple[str, str], ...]:
    names = {r.name for r in rows}
    return tuple((p, d) for p, d in pairs if p in names and d in names)


def _max_rate_units(rows: list[IntegerCandidate]) -> int:
    """An upper bound on the rate any plan serves: every candidate at its instance limit."""
    def total(role: str) -> int:
        return sum(c.pool_capacity_units(c.max_instances) for c in rows if c.role == role)

    return total("colocated") + min(total("prefill"), total("decode"))


def ratio_coefficients(ratio: Fraction, max_rate: int, max_cost: int) -> tuple[int, int]:
    """(numerator, denominator) of ``ratio`` small enough that ``den*rate - num*cost`` fits int64.

    The exact fraction is used whenever it fits (the usual case); otherwise the nearest fraction
    not above ``ratio`` with a denominator that fits, which keeps a ratio floor a valid floor.
    """
    ratio = Fraction(ratio)
    if ratio.denominator * max_rate + ratio.numerator * max_cost <= MAX_SAFE_INT:
        return ratio.numerator, ratio.denominator
    limit = max(1, MAX_SAFE_INT // (2 * max(1, max_rate + int(ratio * max_cost))))
    approx = ratio.limit_denominator(limit)
    if approx > ratio:
        approx = Fraction(math.floor(ratio * approx.denominator), approx.denominator)
    return approx.numerator, approx.denominator
