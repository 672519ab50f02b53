"""The plan and its parts: the typed, versioned result every layer reads.

This package sits below perf_model, topology, optimizer, simulator and report, so each of them
can read a Plan (or a Layout) without importing a layer above it. It imports only the catalogs'
schemas.
"""

from layoutopt.plan.error_band import ErrorBand, LatencyBand
from layoutopt.plan.io import load_plan
from layoutopt.plan.layout import ROLES, Layout, Role
from layoutopt.plan.schema import (
    READABLE_SCHEMA_VERSIONS,
    SCHEMA_VERSION,
    Alternative,
    EpExchange,
    Explanation,
    Latency,
    Mode,
    Objective,
    Percentiles,
    PlacedInstance,
    Plan,
    Pool,
    RatioCheck,
    SolverInfo,
    SolverStatus,
    Totals,
    Verification,
)

__all__ = [
    "READABLE_SCHEMA_VERSIONS", "ROLES", "SCHEMA_VERSION", "Alternative", "EpExchange", "ErrorBand", "Explanation", "Latency", "LatencyBand", "Layout",
    "Mode", "Objective", "Percentiles", "PlacedInstance", "Plan", "Pool", "RatioCheck", "Role", "SolverInfo",
    "SolverStatus", "Totals", "Verification", "load_plan",
]
