"""Placement of a plan's instances on concrete GPUs (CP-SAT), and a solver-independent validator.

Modules, in the order a placement flows through them: ``data`` (the problem prepared for the
solver), ``explain`` (reasons found without a solver), ``variables``, ``constraints`` and
``objectives`` (the CP-SAT model), ``greedy`` and ``improve`` (a placement in near-linear time),
``bounds`` and ``lp_bound`` (lower bounds that prove it without search), ``solver`` (``place``),
``assign`` (GPU indices, instances, links), ``node_rule`` (the engine's rule on splitting an
instance over nodes, and placing a pool in equal parts per node where the rule-free placement
broke it), ``report`` (the result), ``encoding`` (PlacedInstance fields), ``traffic`` (KV per
rack), ``validate`` (``validate_placement``, no CP-SAT import).
"""

from layoutopt.topology.placement.result import (
    InstanceAssignment,
    KvPairing,
    PlacementResult,
    PlacementStatus,
    RackKvTraffic,
    RuleRefusal,
)
from layoutopt.topology.placement.solver import place
from layoutopt.topology.placement.validate import validate_placement

__all__ = [
    "InstanceAssignment",
    "KvPairing",
    "PlacementResult",
    "PlacementStatus",
    "RackKvTraffic",
    "RuleRefusal",
    "place",
    "validate_placement",
]
