"""Constraints a cluster file adds: stage groups pack into NVLink domains; KV pools in one rack.

Both read limits prepared by ``layoutopt.optimizer.cluster_fit``; without a cluster file the
table carries none and these modules add nothing.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.optimizer.variables import LayoutVariables


class DomainPacking:
    """sum_{c: g(c)=g, s_c >= s} gpus_c n_c <= K_{g,s}  for every GPU type g and group size s.

    ``s_c`` is the group of c that shares one NVLink domain (a pipeline stage of tp x dp x pcp
    GPUs; the whole instance when the perf model counted NVLink between its stages) and
    ``K_{g,s} = sum_d s floor(free_d / s)`` over the domains d of type g: with power-of-two group
    sizes, groups of s GPUs or more fill at most that many free GPUs.
    """

    name = "NVLink domain packing"

    def build(self, variables: LayoutVariables) -> None:
        table = variables.table
        for gpu, capacities in sorted(table.domain_capacity_gpus.items()):
            rows = [c for c in table.candidates if c.gpu == gpu]
            limit = table.gpu_limits.get(gpu)
            for size, capacity in sorted(capacities.items()):
                fitting = [c for c in rows if c.domain_group_gpus >= size]
                # Skip limits the GPU budget already implies (whole free domains).
                if not fitting or (limit is not None and capacity >= limit):
                    continue
                # A fragmented cluster (3 free GPUs per node) holds no TP4 group at all.
                variables.model.add(cp_model.LinearExpr.weighted_sum(
                    [variables.num_instances[c.name] for c in fitting], [c.gpus_per_instance for c in fitting],
                ) <= capacity).with_name(f"domain_packing[{gpu},{size}]")
            # Groups larger than any free domain cannot exist.
            largest = max(capacities, default=0)
            for c in rows:
                if c.domain_group_gpus > largest:
                    variables.model.add(variables.num_instances[c.name] == 0).with_name(
                        f"domain_packing[{c.name}]")


class DisaggregatedInOneRack:
    """sum_{c in C_prefill u C_decode, g(c)=g} gpus_c n_c <= B^rack_g, for every GPU type g.

    Used when crossing racks is slower than the KV link the candidates were evaluated with:
    keeping both pools in one rack makes that link the one they get.
    """

    name = "KV pools in one rack"

    def build(self, variables: LayoutVariables) -> None:
        limits = variables.table.disaggregated_gpu_limits
        if limits is None:
            return
        for gpu, limit in sorted(limits.items()):
            rows = [c for c in variables.table.candidates if c.gpu == gpu and c.role in ("prefill", "decode")]
            if not rows:
                continue
            # Prefill ships every prompt's KV to decode; across an oversubscribed spine that is slow.
            variables.model.add(cp_model.LinearExpr.weighted_sum(
                [variables.num_instances[c.name] for c in rows], [c.gpus_per_instance for c in rows],
            ) <= limit).with_name(f"disaggregated_in_one_rack[{gpu}]")
