"""Pool capacity as a function of instance count: the router's shared queue, from the perf model.

``estimate`` models n instances of one kind behind the router as one pool (prefill: one G/G/c
queue; decode and colocated: shared sequence slots), so n instances sustain more than n times one
instance with its own queue. Each candidate gets the per-instance rate of a pool of n instances on
``POOL_GRID`` (up to the most instances the budget allows), from the same perf-model function
(:func:`~layoutopt.perf_model.capacity.pool_capacities_rps`, run in worker processes by
``evaluation.pool_capacities``). The rate per instance is made non-decreasing by a running minimum from the largest pool down (pooling never hurts, so a dip is
search noise; the minimum keeps every grid value at or below the model's). The solver encodes the
step function n x rate(largest grid point <= n): exact at grid points, conservative between them.
"""

from __future__ import annotations

from collections.abc import Mapping

from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import Candidate, CandidateTable
from layoutopt.optimizer.evaluation import PoolJob, pool_capacities
from layoutopt.perf_model.links import Link
from layoutopt.workloads.slo import SLO
from layoutopt.workloads.workload import Workload

# Roles whose pool capacity grows with n. Not decode: its share of the SLO is TPOT, so a pooled
# decode capacity would count shared KV slots without the wait for a slot they add to TTFT
# (a plan so sized missed TTFT in simulation); n x one instance stays there (conservative).
POOLED_ROLES = ("prefill", "colocated")
# Pool sizes evaluated; between them the solver uses the rate of the grid point below.
POOL_GRID: tuple[int, ...] = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def monotone_per_instance(grid: list[tuple[int, float]], single_rps: float) -> tuple[tuple[int, float], ...]:
    """Per-instance rates made non-decreasing in n and at most the model's at every point."""
    out, floor = [], float("inf")
    for n, rate in reversed(grid):
        floor = min(floor, rate)
        out.append((n, floor))
    return tuple((n, rate) for n, rate in reversed(out) if rate > single_rps)


def with_pool_capacities(table: CandidateTable, model: ModelSpec, gpus: Mapping[str, GpuSpec], workload: Workload,
                         slo: SLO, engine, headroom: float, kv_links: Mapping[str, Link] | None) -> CandidateTable:
    """``table`` with ``pool_rps_per_instance`` filled for every candidate that can run 2+ instances."""
    from layoutopt.optimizer.enumeration import kv_link_of

    pooled: dict[int, PoolJob] = {}
    for i, c in enumerate(table.candidates):
        sizes = tuple(n for n in POOL_GRID if n <= table.max_instances(c))
        if sizes and c.role in POOLED_ROLES:
            gpu = gpus[c.gpu]
            pooled[i] = (gpu, c.layout, c.role, kv_link_of(gpu, kv_links) if c.role == "prefill" else None, sizes)
    found = dict(zip(pooled, pool_capacities(model, workload, slo, engine, headroom, list(pooled.values()))))
    rows: list[Candidate] = []
    for i, c in enumerate(table.candidates):
        if i not in found:
            rows.append(c)
            continue
        grid = [(n, rps / n) for n, rps in zip(pooled[i][4], found[i])]
        rows.append(c.model_copy(update={"pool_rps_per_instance": monotone_per_instance(grid, c.capacity_rps)}))
    return table.model_copy(update={"candidates": tuple(rows)})
