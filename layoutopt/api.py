"""The public Python API: the same functions and pydantic models the CLI uses.

    from layoutopt import api
    plan = api.solve(model="qwen3-32b", budget="32xH100", slo=api.load_slo("examples/slo.yaml"))

Each entry point lives with the subsystem that implements it and is re-exported here.
"""

from __future__ import annotations

import importlib

# name -> module that defines it
_EXPORTS = {
    # estimate and solve with ``profile=`` (a profile file) and the expected error band
    "estimate": "layoutopt.calibrate.apply",
    "solve": "layoutopt.calibrate.apply",
    "load_profile": "layoutopt.calibrate.profile_file",
    "solve_fleet": "layoutopt.optimizer.fleet",
    "load_fleet": "layoutopt.optimizer.fleet_spec",
    "solve_robust": "layoutopt.optimizer.scenarios",
    "solve_length_routed": "layoutopt.optimizer.length_routing",
    "emit_length_routed": "layoutopt.report.length_router",
    "load_scenarios": "layoutopt.optimizer.scenarios",
    "simulate": "layoutopt.simulator.run",
    "sweep": "layoutopt.sweep.run",
    "emit": "layoutopt.report.emit",
    "get_model": "layoutopt.model_catalog.catalog",
    "list_models": "layoutopt.model_catalog.catalog",
    "get_gpu": "layoutopt.hardware_catalog.catalog",
    "list_gpus": "layoutopt.hardware_catalog.catalog",
    "list_node_types": "layoutopt.hardware_catalog.catalog",
    "parse_budget": "layoutopt.hardware_catalog.budget",
    "load_slo": "layoutopt.workloads.loaders",
    "load_workload": "layoutopt.workloads.loaders",
    "preset_workload": "layoutopt.workloads.presets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'layoutopt.api' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
