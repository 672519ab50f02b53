"""Check a plan in the simulator at its planned rate and record analytic vs simulated figures."""

from __future__ import annotations

from layoutopt.errors import InputError
from layoutopt.plan import Plan, Verification
from layoutopt.simulator.run import simulate

DEFAULT_VERIFY_REQUESTS = 20_000


def verify_plan(plan: Plan, *, num_requests: int = DEFAULT_VERIFY_REQUESTS, seed: int = 0) -> Plan:
    """Return ``plan`` with ``verification`` filled from a simulation at its goodput rate."""
    if not plan.pools or plan.totals is None or plan.latency is None:
        raise InputError("plan", plan.status, "a plan with pools to verify (this one has none)")
    result = simulate(plan, rate_rps=plan.totals.goodput_rps, num_requests=num_requests, seed=seed)
    verification = Verification(
        rate_rps=result.rate_rps,
        num_requests=result.num_requests,
        seed=seed,
        analytic_ttft_ms=plan.latency.ttft_ms,
        simulated_ttft_ms=result.ttft_ms,
        analytic_tpot_ms=plan.latency.tpot_ms,
        simulated_tpot_ms=result.tpot_ms,
        analytic_slo_attainment=plan.latency.slo_attainment,
        simulated_slo_attainment=result.slo_attainment,
        simulated_goodput_rps=result.goodput_rps,
        meets_slo=result.meets_slo,
    )
    return plan.model_copy(update={"verification": verification})
