"""Each pool sustains the rate routed through it (capacities are per instance, at the SLO).

A disaggregated request passes through one prefill and one decode instance, so both pools must
carry the whole disaggregated rate; a colocated request needs one colocated instance only.
"""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class PrefillCapacity:
    """sum_{c in prefill} cap_c * n_c >= r_disagg."""

    name = "prefill capacity"

    def build(self, variables: LayoutVariables) -> None:
        # Prompts of the disaggregated traffic are all computed by the prefill pool.
        variables.model.add(
            variables.capacity("prefill") >= variables.disaggregated_rate
        ).with_name("capacity[prefill]")


class DecodeCapacity:
    """sum_{c in decode} cap_c * n_c >= r_disagg."""

    name = "decode capacity"

    def build(self, variables: LayoutVariables) -> None:
        # Every disaggregated request then decodes on the decode pool.
        variables.model.add(
            variables.capacity("decode") >= variables.disaggregated_rate
        ).with_name("capacity[decode]")


class ColocatedCapacity:
    """sum_{c in colocated} cap_c * n_c >= r_coloc."""

    name = "colocated capacity"

    def build(self, variables: LayoutVariables) -> None:
        # Colocated instances run both phases of the traffic routed to them.
        variables.model.add(
            variables.capacity("colocated") >= variables.colocated_rate
        ).with_name("capacity[colocated]")
