"""Probes that read the facts layoutopt's engine rules depend on out of one wheel's sources.

Each probe looks for the statement that decides a fact (an assertion, a class attribute, an
environment default) and records the value it implies with the file and line. A probe that
finds none of the statements it knows raises ``ProbeError``: the engine changed and a developer
must read the new source before the data is refreshed. Facts that exist only in some versions
(a check added later) are recorded only where their statement is found.

The probes live in facts_vllm.py and facts_sglang.py, what they share in facts_common.py.
"""

from __future__ import annotations

from facts_sglang import sglang_facts
from facts_vllm import vllm_facts

__all__ = ["sglang_facts", "vllm_facts"]
