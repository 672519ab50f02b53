"""Discrete-event simulation of a plan under a workload (DESIGN section 8).

    from layoutopt.simulator import simulate
    result = simulate("plan.json", rate_rps=10.0, num_requests=20_000, seed=0)

Modules: ``step_times`` (the step-time protocol and interpolating tables), ``perf_tables``
(tables from the performance model), ``pools`` (pools, requests, counters), ``engine`` (the event
loop), ``result`` (SimulationResult), ``run`` (simulate()), ``plot`` (histograms).
"""

from layoutopt.simulator.result import PoolStats, SimulationResult
from layoutopt.simulator.run import simulate, simulate_pools

__all__ = ["PoolStats", "SimulationResult", "simulate", "simulate_pools"]
