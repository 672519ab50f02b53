"""Hand-built plans for the placement tests (imported by the other test_placement*/test_topology* files).

Only the fields placement reads carry meaning (pools: role, GPU, degrees, instances,
capacity_rps); the rest hold simple placeholder values.
"""

from __future__ import annotations

from layoutopt.plan import Explanation, Plan, Pool, SolverInfo


def pool(role: str = "decode", gpu: str = "H100-SXM", instances: int = 1, tp: int = 1, pp: int = 1,
         dp: int = 1, pcp: int = 1, capacity_rps: float = 1.0) -> Pool:
    """A pool with the given degrees; EP = 1, DCP = 1, bf16."""
    return Pool(role=role, gpu=gpu, instances=instances, gpus_per_instance=tp * pp * dp * pcp, tp_size=tp,
                pp_size=pp, ep_size=1, dp_size=dp, dcp_size=1, pcp_size=pcp, precision="bf16",
                kv_precision="bf16", max_batch_size=1, capacity_rps=capacity_rps, cost_usd_per_hour=0.0)


def plan(*pools: Pool) -> Plan:
    """A plan holding ``pools`` and nothing else of substance."""
    roles = {p.role for p in pools}
    mode = "colocated" if roles == {"colocated"} else "disaggregated" if "colocated" not in roles else "mixed"
    return Plan(status="optimal", objective="goodput-per-dollar", mode=mode, model="test-model", engine="vllm",
                workload={}, pools=list(pools), totals=None, latency=None,
                solver=SolverInfo(status="optimal", wall_time_s=0.0, objective_value=None, best_bound=None, gap=None,
                                  num_candidates=0),
                explanation=Explanation(binding_constraints=[], notes=[]))


def test_plan_helper_counts_gpus():
    built = plan(pool("prefill", tp=2, instances=3), pool("decode", tp=4, pp=2))
    assert [p.num_gpus for p in built.pools] == [6, 8]
    assert built.mode == "disaggregated"
