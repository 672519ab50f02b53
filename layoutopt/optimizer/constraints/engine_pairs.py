"""Prefill and decode candidates the engine cannot connect are never used together.

Every prefill instance of a plan hands KV to every decode instance (one router over the pools),
so the engine's P/D rules (TP divisibility, PP, KV precision, attention backend) must hold between
every used pair.

The pairs are not written one by one (``is_used[p] + is_used[d] <= 1`` is P x D rows: 4,500 of
the 5,300 constraints of deepseek-v3 on '$400/h'). Prefill candidates that refuse the same decode
candidates form one class, and decode candidates that refuse the same prefill candidates another;
two classes that refuse each other refuse every pair between them (a complete block), so one row
per pair of classes says it all:

    n_c <= U_c uses_class[A]             for every candidate c of class A
    uses_class[A] + uses_class[B] <= 1   for every prefill class A and decode class B that refuse each other

The LP relaxation is the pairwise one's (n_p / U_p + n_d / U_d <= 1 follows), and a plan is
feasible here exactly when no used pair is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from layoutopt.optimizer.variables import LayoutVariables


def refusal_classes(pairs: Iterable[tuple[str, str]]
                    ) -> tuple[list[list[str]], list[list[str]], list[tuple[int, int]]]:
    """(prefill classes, decode classes, refusing (prefill class, decode class) index pairs) of the
    incompatible (prefill, decode) name pairs; everything in first-seen order (deterministic)."""
    refuses: dict[str, dict[str, None]] = defaultdict(dict)  # prefill -> decodes (an ordered set)
    refused: dict[str, dict[str, None]] = defaultdict(dict)  # decode -> prefills
    for prefill, decode in pairs:
        refuses[prefill][decode] = None
        refused[decode][prefill] = None

    def classes(partners: dict[str, dict[str, None]]) -> tuple[list[list[str]], dict[str, int]]:
        groups: dict[frozenset[str], list[str]] = {}
        for name, others in partners.items():
            groups.setdefault(frozenset(others), []).append(name)
        members = list(groups.values())
        return members, {name: i for i, names in enumerate(members) for name in names}

    prefill_classes, prefill_class = classes(refuses)
    decode_classes, decode_class = classes(refused)
    blocks = dict.fromkeys((prefill_class[p], decode_class[d]) for p, decodes in refuses.items() for d in decodes)
    return prefill_classes, decode_classes, list(blocks)


class EnginePairs:
    """One class boolean per group of candidates with the same refused partners, and one row per
    pair of classes that refuse each other (see the module docstring)."""

    name = "engine P/D pairing"

    def build(self, variables: LayoutVariables) -> None:
        prefill_classes, decode_classes, blocks = refusal_classes(variables.table.incompatible_pairs)
        bound = {c.name: c.max_instances for c in variables.table.candidates}
        uses = {}
        for role, classes in (("prefill", prefill_classes), ("decode", decode_classes)):
            for index, members in enumerate(classes):
                flag = variables.model.new_bool_var(f"uses_pair_class[{variables.prefix}{role}{index}]")
                for name in members:
                    variables.model.add(variables.num_instances[name] <= bound[name] * flag)
                uses[(role, index)] = flag
        for a, b in blocks:
            # The engine refuses these KV handshakes (layoutopt.engines.check_pair says which rule).
            variables.model.add(uses[("prefill", a)] + uses[("decode", b)] <= 1).with_name(
                f"engine_pair[{variables.prefix}prefill{a},decode{b}]")
