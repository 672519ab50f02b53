"""Constraint modules: one class per constraint family, each with ``build(variables)``.

``default_constraints(table)`` lists the families every plan obeys, in the order the solver's
docstring states them.
"""

from __future__ import annotations

from layoutopt.optimizer.constraints.capacity import ColocatedCapacity, DecodeCapacity, PrefillCapacity
from layoutopt.optimizer.constraints.cluster import DisaggregatedInOneRack, DomainPacking
from layoutopt.optimizer.constraints.cost_cap import CostCap
from layoutopt.optimizer.constraints.distinct import ExcludePlanStructure
from layoutopt.optimizer.constraints.engine_pairs import EnginePairs
from layoutopt.optimizer.constraints.gpu_budget import GpuBudget
from layoutopt.optimizer.constraints.kv_transfer import KvTransferBandwidth
from layoutopt.optimizer.constraints.mode import ModeChoice
from layoutopt.optimizer.constraints.rate import RateBalance

__all__ = [
    "ColocatedCapacity", "CostCap", "DecodeCapacity", "DisaggregatedInOneRack", "DomainPacking", "EnginePairs",
    "ExcludePlanStructure", "GpuBudget",
    "KvTransferBandwidth", "ModeChoice", "PrefillCapacity", "RateBalance", "default_constraints",
]


def default_constraints() -> list:
    """The constraint families of every solve."""
    return [GpuBudget(), CostCap(), PrefillCapacity(), DecodeCapacity(), ColocatedCapacity(),
            RateBalance(), KvTransferBandwidth(), ModeChoice(), DomainPacking(), DisaggregatedInOneRack(),
            EnginePairs()]
