"""KV caches shipped from prefill to decode fit in the scale-out bandwidth of both pools.

Each disaggregated request moves its prompt's KV cache once, so the traffic is
``kv_bytes_per_request x r_disagg`` bytes/s; it leaves through the prefill instances' NICs and
arrives through the decode instances' NICs (the usable share of each is in ``nic_kb_per_s``).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from layoutopt.optimizer.scaling import RATE_SCALE_PER_RPS
from layoutopt.optimizer.variables import LayoutVariables


class KvTransferBandwidth:
    """kv_kb * r_disagg <= RATE_SCALE * sum_{c in pool} nic_kb_per_s_c * n_c, for both pools."""

    name = "KV transfer bandwidth"

    def build(self, variables: LayoutVariables) -> None:
        prefill = variables.candidates("prefill")
        if not prefill or not variables.candidates("decode"):
            return
        # Prefill instances may differ in KV bytes (KV precision); the largest bounds the traffic.
        kv_kb_per_request = max(c.kv_kb_per_request for c in prefill)
        if kv_kb_per_request == 0:
            return
        traffic = kv_kb_per_request * variables.disaggregated_rate
        for role in ("prefill", "decode"):
            rows = variables.candidates(role)
            bandwidth = cp_model.LinearExpr.weighted_sum(
                [variables.num_instances[c.name] for c in rows],
                [RATE_SCALE_PER_RPS * c.nic_kb_per_s for c in rows],
            )
            # Sending (prefill) and receiving (decode) NICs both carry every KV cache.
            variables.model.add(traffic <= bandwidth).with_name(f"kv_transfer[{role}]")
