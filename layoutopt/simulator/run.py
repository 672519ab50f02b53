"""simulate(): replay a workload on a plan and measure TTFT, TPOT, SLO attainment and pool loads.

    from layoutopt import api
    result = api.simulate("plan.json", rate_rps=12.0, num_requests=20_000, seed=1)
    result.ttft_ms.p90, result.slo_attainment, result.pools[0].utilization_fraction

The plan says what to simulate: its ``model`` and ``engine``, its pools, and (in ``workload``)
the workload and SLO it was made for, as ``{"workload": {...}, "slo": {...}}``. Arguments
override them. The rate defaults to the workload's arrival rate, else the plan's goodput.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layoutopt.bounds import MAX_SEED, MAX_SIM_REQUESTS, check_finite, check_int, check_rate_rps
from layoutopt.errors import InputError
from layoutopt.plan import Plan, load_plan
from layoutopt.plan.io import check_plan_size
from layoutopt.simulator.engine import Simulation
from layoutopt.simulator.pools import PoolSpec, make_requests
from layoutopt.simulator.result import SimulationResult, measured_range, summarize
from layoutopt.workloads.loaders import slo_from_dict, workload_from_dict
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

# Requests simulated when neither a count nor a duration is given: enough for a stable p99.
DEFAULT_NUM_REQUESTS = 10_000
# Requests left out of the statistics: the first 10 % (queues and batches filling from empty) and
# the last 5 % (served while arrivals have stopped, so under a lighter load).
WARMUP_FRACTION = 0.10
COOLDOWN_FRACTION = 0.05
# Fewest requests a run may have: below this the warm-up cut leaves too few to measure.
MIN_NUM_REQUESTS = 20


def plan_workload(plan: Plan) -> Workload | None:
    """The workload the plan was made for, or None when the plan does not record one."""
    data = plan.workload.get("workload")
    if not data:
        return None
    return workload_from_dict(data, field="plan.workload.workload")


def plan_slo(plan: Plan) -> SLO | None:
    data = plan.workload.get("slo")
    return slo_from_dict(data, field="plan.workload.slo") if data else None


def _count(rate_rps: float, num_requests: int | None, duration_s: float | None) -> int:
    if num_requests is not None and duration_s is not None:
        raise InputError("--requests", num_requests, "give the number of requests or a duration, not both")
    if duration_s is not None:
        check_finite("--duration-s", duration_s, "a duration in seconds > 0")
        if not duration_s > 0:
            raise InputError("--duration-s", duration_s, "a duration in seconds > 0")
        arrivals = rate_rps * duration_s
        if arrivals > MAX_SIM_REQUESTS:
            raise InputError("--duration-s", duration_s,
                             f"at most {MAX_SIM_REQUESTS:,} requests: {arrivals:,.0f} would arrive at {rate_rps:g} req/s")
        num_requests = int(np.ceil(arrivals))
    num_requests = DEFAULT_NUM_REQUESTS if num_requests is None else num_requests
    if isinstance(num_requests, bool) or not isinstance(num_requests, (int, np.integer)):
        raise InputError("--requests", num_requests, "a whole number of requests")
    if num_requests < MIN_NUM_REQUESTS:
        raise InputError("--requests", num_requests, f"at least {MIN_NUM_REQUESTS} requests (a longer duration)")
    if num_requests > MAX_SIM_REQUESTS:
        raise InputError("--requests", num_requests,
                         f"at most {MAX_SIM_REQUESTS:,} requests per run (memory grows with the count)")
    return int(num_requests)


def simulate_pools(pools: list[PoolSpec], workload: Workload, slo: SLO, *, rate_rps: float,
                   num_requests: int | None = None, duration_s: float | None = None, seed: int = 0,
                   colocated_share: float = 1.0, model: str = "custom", engine: str = "custom") -> SimulationResult:
    """Simulate pools given directly (any :class:`StepTimes`), e.g. synthetic ones in tests.

    ``colocated_share`` is the fraction of arrivals routed to colocated pools when a plan mixes
    colocated and disaggregated pools.
    """
    check_rate_rps("--rate", rate_rps)
    check_int("--seed", seed, 0, MAX_SEED, "a random seed")
    if not pools:
        raise InputError("plan.pools", [], "at least one pool")
    n = _count(rate_rps, num_requests, duration_s)
    rng = np.random.default_rng(seed)
    input_tokens, output_tokens = workload.sample_requests(rng, n)
    requests = make_requests(rng, input_tokens, output_tokens, rate_rps, workload.prefix_cache_hit_fraction)
    first, last = measured_range(n, WARMUP_FRACTION, COOLDOWN_FRACTION)
    sim = Simulation(pools, requests, float(requests.arrival_s[first]), float(requests.arrival_s[last - 1]),
                     colocated_share=colocated_share, rng=rng)
    trace = sim.run()
    return summarize(trace, requests, pools, slo, model=model, engine=engine, seed=seed, rate_rps=rate_rps,
                     first=first, last=last)


def _colocated_share(plan: Plan) -> float:
    """Arrivals to colocated pools in proportion to their planned capacity."""
    colocated = sum(p.capacity_rps * p.instances for p in plan.pools if p.role == "colocated")
    prefill = sum(p.capacity_rps * p.instances for p in plan.pools if p.role == "prefill")
    decode = sum(p.capacity_rps * p.instances for p in plan.pools if p.role == "decode")
    disaggregated = min(prefill, decode)
    if colocated <= 0 or disaggregated <= 0:
        return 1.0 if colocated > 0 or not disaggregated else 0.0
    return colocated / (colocated + disaggregated)


def simulate(plan: Plan | str | Path, workload: Workload | None = None, *, rate_rps: float | None = None,
             num_requests: int | None = None, duration_s: float | None = None, seed: int = 0,
             slo: SLO | None = None) -> SimulationResult:
    """Simulate ``plan`` under ``workload`` at ``rate_rps`` (req/s) with ``seed``; see the module docstring."""
    from layoutopt.simulator.perf_tables import plan_pool_specs

    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    check_plan_size(plan)
    if not plan.pools:
        raise InputError("plan.pools", [], f"a plan with pools (this plan's status is {plan.status})")
    workload = workload or plan_workload(plan)
    if workload is None:
        raise InputError("workload", None, "a workload: the plan records none, so pass one (--workload w.yaml)")
    slo = slo or plan_slo(plan)
    if slo is None:
        raise InputError("slo", None, "an SLO: the plan records none, so pass one")
    if rate_rps is None:
        rate_rps = workload.arrival_rate_rps or (plan.totals.goodput_rps if plan.totals else None)
    if rate_rps is None:
        raise InputError("--rate", rate_rps, "an arrival rate in requests/s > 0 (--rate)")
    check_rate_rps("--rate", rate_rps)
    pools = plan_pool_specs(plan)
    result = simulate_pools(pools, workload, slo, rate_rps=rate_rps, num_requests=num_requests,
                            duration_s=duration_s, seed=seed, colocated_share=_colocated_share(plan),
                            model=plan.model, engine=plan.engine)
    return result.model_copy(update={"rule_violations": _rule_violations(plan)})


def _rule_violations(plan: Plan) -> list:
    """Engine rules of the plan's engine release its pools break (``engines.plan_rule_violations``)."""
    from layoutopt.engines import engine_ref_of
    from layoutopt.engines.plan_rules import plan_rule_violations
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model

    try:
        ref = engine_ref_of(plan.engine)
    except InputError:  # an engine name this layoutopt has no rules for ('custom' pools in tests)
        return []
    if ref is None:
        return []
    return plan_rule_violations(ref, plan, get_model(plan.model), [get_gpu(pool.gpu) for pool in plan.pools])


__all__ = ["simulate", "simulate_pools", "load_plan", "plan_workload", "plan_slo", "SimulationResult"]
