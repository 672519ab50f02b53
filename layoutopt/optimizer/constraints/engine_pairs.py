"""Prefill and decode candidates the engine cannot connect are never used together.

Every prefill instance of a plan hands KV to every decode instance (one router over the pools),
so the engine's P/D rules (TP divisibility, PP) must hold between every used pair.
"""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class EnginePairs:
    """is_used[p] + is_used[d] <= 1 for every (prefill p, decode d) in table.incompatible_pairs."""

    name = "engine P/D pairing"

    def build(self, variables: LayoutVariables) -> None:
        for prefill, decode in variables.table.incompatible_pairs:
            # The engine refuses this KV handshake (layoutopt.engines.check_pair says which rule).
            variables.model.add(variables.is_used(prefill) + variables.is_used(decode) <= 1).with_name(
                f"engine_pair[{prefill},{decode}]")
