"""Analytic performance model against the discrete-event simulator (the reference).

    python benchmarks/sim_vs_analytic.py [--requests 20000] [--seeds 4] [--first-seed 0] [--quick] [--only TEXT]

Scenarios: dense and MoE models, short (chat) and long (RAG) prompts, colocated and
disaggregated deployments, each at 50 %, 75 % and 95 % of its analytic capacity (the highest
Poisson rate at which ``estimate`` predicts every SLO percentile met). Per scenario it prints the
analytic and simulated p90 TTFT, p90 TPOT and SLO attainment; a scenario agrees when both p90s
are within 15 % of the simulation and attainment within 0.05. The analytic attainment is the
optimizer's: share within the TTFT target x share within the TPOT target
(``optimizer.latency.fraction_within``). Both sides use the same KV link (the simulator's striped
NIC path) and the same --max-num-seqs. The simulated side is the mean over ``--seeds`` independent
runs of each figure (p90s and attainment): near a KV or prefill knee one run's tail is noisy.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.optimizer.latency import fraction_within
from layoutopt.plan import Explanation, Percentiles, Plan, Pool, SolverInfo
from layoutopt.perf_model.estimate import Estimate, estimate
from layoutopt.plan import Layout
from layoutopt.simulator.perf_tables import kv_link
from layoutopt.simulator.run import simulate
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

GPU = "H100-SXM"
MAX_NUM_SEQS = 256
LOADS = (0.5, 0.75, 0.95)
REL_TOLERANCE = 0.15
ATTAINMENT_TOLERANCE = 0.05

WORKLOADS = {
    "short": (Workload(name="short", input_tokens={"kind": "lognormal", "mean": 1000, "p90": 2000},
                       output_tokens={"kind": "lognormal", "mean": 200, "p90": 400}),
              SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 60}, attainment=0.9)),
    "long": (Workload(name="long", input_tokens={"kind": "lognormal", "mean": 6000, "p90": 11000},
                      output_tokens={"kind": "lognormal", "mean": 300, "p90": 600}),
             SLO(ttft_ms={"p90": 3000}, tpot_ms={"p90": 60}, attainment=0.9)),
}
# (model, layout, kind): dense and MoE, one layout for both roles.
MODELS = [
    ("llama-3.1-8b", Layout(tp_size=1), "dense"),
    ("qwen3-32b", Layout(tp_size=2), "dense"),
    ("llama-3.1-70b", Layout(tp_size=4), "dense"),
    ("qwen3-30b-a3b", Layout(tp_size=1), "moe"),
    ("mixtral-8x7b", Layout(tp_size=2), "moe"),
    ("qwen3-235b-a22b", Layout(tp_size=8, weight_precision="fp8"), "moe"),
]


@dataclass(frozen=True)
class Deployment:
    model: str
    layout: Layout
    kind: str
    mode: str
    workload: str
    num_prefill: int = 0
    num_decode: int = 0
    num_colocated: int = 0

    @property
    def name(self) -> str:
        counts = (f"{self.num_colocated}x" if self.mode == "colocated"
                  else f"{self.num_prefill}P{self.num_decode}D")
        return f"{self.model} {self.layout.short_name()} {counts} {self.workload}"


def _pool(role: str, layout: Layout, instances: int) -> Pool:
    return Pool(role=role, gpu=GPU, instances=instances, gpus_per_instance=layout.gpus_per_instance,
                tp_size=layout.tp_size, pp_size=layout.pp_size, ep_size=layout.ep_size, dp_size=layout.dp_size,
                dcp_size=layout.dcp_size, pcp_size=layout.pcp_size, precision=layout.weight_precision,
                kv_precision=layout.kv_precision, max_batch_size=MAX_NUM_SEQS, capacity_rps=1.0,
                cost_usd_per_hour=1.0)


def plan_of(d: Deployment) -> Plan:
    workload, slo = WORKLOADS[d.workload]
    pools = ([_pool("colocated", d.layout, d.num_colocated)] if d.mode == "colocated"
             else [_pool("prefill", d.layout, d.num_prefill), _pool("decode", d.layout, d.num_decode)])
    return Plan(status="feasible", objective="goodput-per-dollar", mode=d.mode, model=d.model, engine="vllm",
                workload={"workload": workload.model_dump(mode="json"), "slo": slo.model_dump(mode="json")},
                pools=pools, totals=None, latency=None,
                solver=SolverInfo(status="feasible", wall_time_s=0.0, objective_value=None, best_bound=None,
                                  gap=None, num_candidates=1),
                explanation=Explanation(binding_constraints=[], notes=[]))


def analytic(d: Deployment, rate_rps: float) -> Estimate:
    workload, _ = WORKLOADS[d.workload]
    common = dict(workload=workload, rate=rate_rps, max_batch_size=MAX_NUM_SEQS)
    if d.mode == "colocated":
        return estimate(d.model, GPU, layout=d.layout, instances=d.num_colocated, **common)
    gpu = get_gpu(GPU)
    link = kv_link([(gpu, d.layout)], gpu, d.layout)
    return estimate(d.model, GPU, prefill_layout=d.layout, prefill_instances=d.num_prefill, decode_layout=d.layout,
                    decode_instances=d.num_decode, kv_link=link, **common)


def _meets(e: Estimate, slo: SLO) -> bool:
    return (e.stable and e.ttft_ms.p90 <= slo.strictest_ttft[1] and e.tpot_ms.p90 <= slo.strictest_tpot[1]
            and math.isfinite(e.ttft_ms.p90))


def analytic_capacity_rps(d: Deployment) -> float:
    """Highest rate at which the analytic model meets the p90 targets (bisection in log rate)."""
    _, slo = WORKLOADS[d.workload]
    low, high = 1e-3, 1.0
    while _meets(analytic(d, high), slo) and high < 1e5:
        low, high = high, high * 2.0
    if not _meets(analytic(d, low), slo):
        return 0.0
    for _ in range(30):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if _meets(analytic(d, mid), slo) else (low, mid)
    return low


def analytic_attainment(e: Estimate, slo: SLO) -> float:
    def pct(stats) -> Percentiles:
        return Percentiles(p50=stats.p50, p90=stats.p90, p99=stats.p99)

    if not e.stable or not math.isfinite(e.ttft_ms.p90):
        return 0.0
    return (fraction_within([(1.0, pct(e.ttft_ms))], slo.strictest_ttft[1])
            * fraction_within([(1.0, pct(e.tpot_ms))], slo.strictest_tpot[1]))


def deployments() -> list[Deployment]:
    """Colocated pairs, and disaggregated pools balanced by the analytic per-pool capacity."""
    out = []
    for model, layout, kind in MODELS:
        for workload in WORKLOADS:
            out.append(Deployment(model, layout, kind, "colocated", workload, num_colocated=2))
            # Balance prefill against decode: long prompts need more prefill instances.
            num_prefill, num_decode = (2, 1) if workload == "long" else (1, 1)
            out.append(Deployment(model, layout, kind, "disaggregated", workload, num_prefill, num_decode))
    return out


def _rel(a: float, s: float) -> float:
    return (a - s) / s if s > 0 else (0.0 if a == s else math.inf)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=4, help="simulated runs per scenario (mean of their figures)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="two models only")
    parser.add_argument("--only", default="", help="only scenarios whose name contains this text")
    args = parser.parse_args()
    rows = []
    header = (f"{'scenario':44} {'load':>4} {'rate':>7} | {'TTFT90 an':>9} {'sim':>8} {'err':>6} | "
              f"{'TPOT90 an':>9} {'sim':>7} {'err':>6} | {'att an':>6} {'sim':>6} | ok")
    print(header)
    print("-" * len(header))
    for d in deployments()[: 8 if args.quick else None]:
        if args.only not in d.name:
            continue
        capacity = analytic_capacity_rps(d)
        if capacity <= 0:
            print(f"{d.name:44} analytic model finds no rate meeting the SLO; skipped")
            continue
        _, slo = WORKLOADS[d.workload]
        for load in LOADS:
            rate = capacity * load
            e = analytic(d, rate)
            runs = [simulate(plan_of(d), rate_rps=rate, num_requests=args.requests, seed=args.first_seed + k)
                    for k in range(args.seeds)]
            sim_ttft = float(np.mean([r.ttft_ms.p90 for r in runs]))
            sim_tpot = float(np.mean([r.tpot_ms.p90 for r in runs]))
            sim_att = float(np.mean([r.slo_attainment for r in runs]))
            ttft_err, tpot_err = _rel(e.ttft_ms.p90, sim_ttft), _rel(e.tpot_ms.p90, sim_tpot)
            att_a = analytic_attainment(e, slo)
            ok = (abs(ttft_err) <= REL_TOLERANCE and abs(tpot_err) <= REL_TOLERANCE
                  and abs(att_a - sim_att) <= ATTAINMENT_TOLERANCE)
            rows.append((d, load, ttft_err, tpot_err, att_a - sim_att, ok))
            print(f"{d.name:44} {load:>4.2f} {rate:>7.2f} | {e.ttft_ms.p90:>9.0f} {sim_ttft:>8.0f} "
                  f"{ttft_err:>+6.0%} | {e.tpot_ms.p90:>9.1f} {sim_tpot:>7.1f} {tpot_err:>+6.0%} | "
                  f"{att_a:>6.3f} {sim_att:>6.3f} | {'yes' if ok else 'NO'}")
    _summary(rows)
    return 0


def _summary(rows) -> None:
    if not rows:
        return
    n = len(rows)
    ttft_ok = sum(abs(r[2]) <= REL_TOLERANCE for r in rows)
    tpot_ok = sum(abs(r[3]) <= REL_TOLERANCE for r in rows)
    att_ok = sum(abs(r[4]) <= ATTAINMENT_TOLERANCE for r in rows)
    all_ok = sum(r[5] for r in rows)
    print()
    print(f"scenarios: {n}; p90 TTFT within 15 %: {ttft_ok / n:.0%}; p90 TPOT within 15 %: {tpot_ok / n:.0%}; "
          f"attainment within 0.05: {att_ok / n:.0%}; all three: {all_ok / n:.0%} (target 90 %)")
    print("mean signed error of the analytic side (analytic - simulated) by group:")
    groups: dict[tuple[str, str, float], list] = {}
    for d, load, ttft_err, tpot_err, att_err, _ in rows:
        groups.setdefault((d.mode, d.workload, load), []).append((ttft_err, tpot_err, att_err))
    for (mode, workload, load), errs in sorted(groups.items()):
        e = np.array([[x if math.isfinite(x) else np.nan for x in row] for row in errs])
        print(f"  {mode:14} {workload:6} load {load:.2f}: TTFT p90 {np.nanmean(e[:, 0]):+6.0%}  "
              f"TPOT p90 {np.nanmean(e[:, 1]):+6.0%}  attainment {np.nanmean(e[:, 2]):+.3f}  ({len(errs)} scenarios)")


if __name__ == "__main__":
    raise SystemExit(main())
