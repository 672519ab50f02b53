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

from layoutopt.engines import EngineRef
from layoutopt.engines.pair_rules import PairKey, check_pair_gpus, check_pair_layouts, pair_layout_key, pair_rule_key
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


class _PairFit:
    """``not check_pair(engine, model, prefill layout, decode layout, prefill GPU, decode GPU)``, each
    of its two parts checked once per pair of its own keys: ``check_pair_layouts`` reads the sides'
    ``pair_layout_key``s, ``check_pair_gpus`` their GPUs and weight precisions (the GPUs are
    keyed by identity: they must outlive this object)."""

    def __init__(self, engine: EngineRef, model: ModelSpec):
        self.engine, self.model = engine, model
        self._layouts: dict[tuple, bool] = {}
        self._gpus: dict[tuple, bool] = {}

    def __call__(self, prefill: Layout, decode: Layout, prefill_gpu: GpuSpec, decode_gpu: GpuSpec,
                 layout_key: tuple | None = None) -> bool:
        """``layout_key``: (pair_layout_key(prefill), pair_layout_key(decode)) where known."""
        layout_key = layout_key or (pair_layout_key(prefill), pair_layout_key(decode))
        fits = self._layouts.get(layout_key)
        if fits is None:
            fits = self._layouts[layout_key] = not check_pair_layouts(self.engine, self.model, prefill, decode)
        if not fits:
            return False
        gpu_key = (id(prefill_gpu), prefill.weight_precision, id(decode_gpu), decode.weight_precision)
        fits = self._gpus.get(gpu_key)
        if fits is None:
            fits = self._gpus[gpu_key] = not check_pair_gpus(self.engine, self.model, prefill, decode, prefill_gpu,
                                                             decode_gpu)
        return fits


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
    fit = _PairFit(engine, model)
    for p in prefills:
        key = _pair_key(p, gpus)
        if key not in refused:
            fits = {dk: fit(p.layout, d.layout, _gpu_of(p, gpus), _gpu_of(d, gpus)) for dk, d in examples.items()}
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
    # Pair keys by their index in ``keys``: the cache below is a matrix, not a dict of key pairs.
    index = {(role, k): i for role, role_keys in keys.items() for i, k in enumerate(role_keys)}
    cache: list[list[bool | None]] = [[None] * len(keys["decode"]) for _ in keys["prefill"]]
    fit = _PairFit(engine, model) if engine else None
    def pairs(prefill: int, decode: int, prefill_proposal: Proposal, decode_proposal: Proposal,
              layout_key: tuple) -> bool:
        found = cache[prefill][decode]
        if found is None:
            found = cache[prefill][decode] = fit(prefill_proposal.layout, decode_proposal.layout, prefill_proposal.gpu,
                                                 decode_proposal.gpu, layout_key) if fit else True
        return found

    examples = {(p.role, k): p for p, k in zip(proposals, proposal_keys)}
    prefill_examples = [examples[("prefill", k)] for k in keys["prefill"]]
    decode_examples = [examples[("decode", k)] for k in keys["decode"]]
    prefill_layouts = [pair_layout_key(p.layout) for p in prefill_examples]
    decode_layouts = [pair_layout_key(d.layout) for d in decode_examples]
    # A signature depends on the role and the pair key alone (``pairs`` is cached by keys).
    by_key: dict[tuple, tuple[bool, ...]] = {}
    signatures: dict[str, tuple[bool, ...]] = {}
    for p, key in zip(proposals, proposal_keys):
        signature = by_key.get((p.role, key))
        if signature is None:
            if p.role == "prefill":
                i, own = index[("prefill", key)], pair_layout_key(p.layout)
                signature = tuple(pairs(i, j, p, d, (own, other))
                                  for j, (d, other) in enumerate(zip(decode_examples, decode_layouts)))
            elif p.role == "decode":
                j, own = index[("decode", key)], pair_layout_key(p.layout)
                signature = tuple(pairs(i, j, q, p, (other, own))
                                  for i, (q, other) in enumerate(zip(prefill_examples, prefill_layouts)))
            else:
                signature = ()
            by_key[(p.role, key)] = signature
        signatures[p.name] = signature
    return signatures
