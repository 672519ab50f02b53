"""The chosen engine's rules inside the search (``layoutopt.engines``).

Three hooks keep ``solve`` from proposing what the engine version cannot run:

- the screen (``enumeration._screen_gpu`` with ``engines.first_broken_rules``): a proposal that
  breaks a rule of one instance (PCP or DCP the attention kind lacks, PP with the KV connector,
  EP, precision on the GPU generation) is dropped before the performance model, counted as
  ``engine_rule:<rule>`` (``RULE_PREFIX``) with the rule's source line;
- ``incompatible_pairs``: prefill and decode candidates the engine cannot connect (P/D TP
  divisibility, SGLang's P/D PP rule) become pairs the solver may not use together
  (``constraints.engine_pairs``), since every prefill instance of a plan hands KV to every decode
  instance;
- ``drop_dominated_within_pairing``: dominance pruning only between candidates that pair with the
  same partners, so a smaller instance never replaces one that a partner pool needs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from layoutopt.engines import EngineRef, check_pair
from layoutopt.engines.pair_rules import PairKey, pair_rule_key
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import Candidate
from layoutopt.optimizer.filters import drop_dominated
from layoutopt.optimizer.space import Proposal
from layoutopt.plan import Layout

RULE_PREFIX = "engine_rule:"


def _gpu_of(candidate: Candidate | Proposal, gpus: Mapping[str, GpuSpec]) -> GpuSpec:
    """A candidate's GPU (a proposal carries its spec, a candidate its name)."""
    return candidate.gpu if isinstance(candidate.gpu, GpuSpec) else gpus[candidate.gpu]


def _pair_key(candidate: Candidate | Proposal, gpus: Mapping[str, GpuSpec]) -> PairKey:
    return pair_rule_key(candidate.layout, _gpu_of(candidate, gpus))


def incompatible_pairs(engine: EngineRef | None, model: ModelSpec, candidates: Sequence[Candidate],
                       gpus: Mapping[str, GpuSpec]) -> tuple[tuple[str, str], ...]:
    """(prefill name, decode name) of every candidate pair the engine cannot connect (``gpus``: the
    candidates' GPUs by name)."""
    if engine is None:
        return ()
    prefills = [c for c in candidates if c.role == "prefill"]
    decodes = [c for c in candidates if c.role == "decode"]
    # The pair rules read the pair key alone: check each pair of keys once, on its first two instances.
    decode_keys = [_pair_key(d, gpus) for d in decodes]
    examples: dict[PairKey, Candidate] = {}
    for d, key in zip(decodes, decode_keys):
        examples.setdefault(key, d)
    refused: dict[PairKey, list[str]] = {}  # prefill key -> decode names it cannot pair with
    pairs = []
    for p in prefills:
        key = _pair_key(p, gpus)
        if key not in refused:
            fits = {dk: not check_pair(engine, model, p.layout, d.layout, _gpu_of(p, gpus), _gpu_of(d, gpus))
                    for dk, d in examples.items()}
            refused[key] = [d.name for d, dk in zip(decodes, decode_keys) if not fits[dk]]
        pairs.extend((p.name, name) for name in refused[key])
    return tuple(pairs)


def drop_dominated_within_pairing(candidates: list[Candidate], pairs: Sequence[tuple[str, str]],
                                  gpus: Mapping[str, GpuSpec]) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """``filters.drop_dominated`` inside each group of candidates with the same incompatible partners."""
    partners: dict[str, set[str]] = defaultdict(set)
    key = {c.name: str(_pair_key(c, gpus)) for c in candidates}  # once per candidate, not per pair
    for p, d in pairs:
        partners[p].add(key[d])
        partners[d].add(key[p])
    groups: dict[frozenset[str], list[Candidate]] = defaultdict(list)
    for c in candidates:
        groups[frozenset(partners.get(c.name, ()))].append(c)
    kept_names: set[str] = set()
    dropped: list[tuple[Candidate, str]] = []
    for group in groups.values():
        kept, gone = drop_dominated(group)
        kept_names.update(c.name for c in kept)
        dropped += gone
    return [c for c in candidates if c.name in kept_names], dropped


def prune_with_pairing(engine: EngineRef | None, model: ModelSpec, candidates: list[Candidate],
                       gpus: Mapping[str, GpuSpec]
                       ) -> tuple[list[Candidate], list[tuple[Candidate, str]], tuple[tuple[str, str], ...]]:
    """(kept candidates, dominated ones with reasons, incompatible pairs among the kept)."""
    pairs = incompatible_pairs(engine, model, candidates, gpus)
    kept, dominated = drop_dominated_within_pairing(candidates, pairs, gpus)
    names = {c.name for c in kept}
    return kept, dominated, tuple((p, d) for p, d in pairs if p in names and d in names)


def pairing_signatures(engine: EngineRef | None, model: ModelSpec, proposals: Sequence[Proposal]
                       ) -> dict[str, tuple[bool, ...]]:
    """Per proposal name, whether it can pair with each pair key of the other disaggregated role
    among ``proposals`` (colocated: empty). Two proposals with the same signature have the same
    incompatible partners in any table built from these proposals, so dominance may compare them."""
    proposal_keys = [pair_rule_key(p.layout, p.gpu) for p in proposals]  # a proposal carries its GPU
    keys = {role: sorted({k for p, k in zip(proposals, proposal_keys) if p.role == role})
            for role in ("prefill", "decode")}
    cache: dict[tuple, bool] = {}

    def pairs(prefill: PairKey, decode: PairKey, prefill_proposal: Proposal, decode_proposal: Proposal) -> bool:
        if (prefill, decode) not in cache:
            cache[(prefill, decode)] = not check_pair(
                engine, model, prefill_proposal.layout, decode_proposal.layout, prefill_proposal.gpu,
                decode_proposal.gpu) if engine else True
        return cache[(prefill, decode)]

    examples = {(p.role, k): p for p, k in zip(proposals, proposal_keys)}
    # A signature depends on the role and the pair key alone (``pairs`` is cached by keys).
    by_key: dict[tuple, tuple[bool, ...]] = {}
    signatures: dict[str, tuple[bool, ...]] = {}
    for p, key in zip(proposals, proposal_keys):
        signature = by_key.get((p.role, key))
        if signature is None:
            if p.role == "prefill":
                signature = tuple(pairs(key, d, p, examples[("decode", d)]) for d in keys["decode"])
            elif p.role == "decode":
                signature = tuple(pairs(q, key, examples[("prefill", q)], p) for q in keys["prefill"])
            else:
                signature = ()
            by_key[(p.role, key)] = signature
        signatures[p.name] = signature
    return signatures
