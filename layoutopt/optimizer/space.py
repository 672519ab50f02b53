"""The space of instance layouts the optimizer considers, before any filter.

No heuristic narrows the space: every layout below is evaluated by the performance model, and
only exact dominance (``filters.drop_dominated``) removes one that could be in a plan. The space:
- degrees are powers of two (the sizes the model catalog's head, KV-head, expert and layer counts
  divide into); a group that talks each layer (TP x DP x PCP: one pipeline stage) sits inside one
  local domain (the scale-up domain, or a PCIe server for PCIe cards: ``links.local_domain``) or
  spreads over whole ones (``stage_span_problem``: attention DP x EP across nodes for MoE models,
  TP over two domains for dense ones), and the performance model costs its groups over the NICs;
  PP may follow such a stage: where an engine does not place an instance's stages as the plan
  does (vLLM keeps a DP rank's PP stages together), that is its rule (``engines.rules``
  ``dp_pp_placement``), screened with the engine's other rules;
- attention DP and expert parallelism only for MoE models (a dense model has neither); with EP
  the experts are spread over all ``tp x dp`` ranks of a stage (vLLM's --enable-expert-parallel);
- DCP only on decoding roles and only while ``tp > num_kv_heads`` (it shards the KV cache that
  TP duplicates beyond the KV heads; there is nothing to shard below that);
- PCP 2 and 4 on every prefilling role, whatever the prompt length;
- PP at every depth up to ``MAX_PP_SIZE``.
The heuristics that used to narrow it (PCP only for long prompts, PP only where one stage less
does not fit) live in ``pre_cuts``; tests show that they never improve a plan. The PP one is still
on by default, for a disagreement between the performance model and the simulator on deep-PP
prefill (see ``pre_cuts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.hardware_catalog.schemas import PRECISIONS, GpuSpec, Precision
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.perf_model.precision import weight_precision_supported
from layoutopt.perf_model.spans import local_domain_gpus
from layoutopt.plan import Layout, Role

PCP_SIZES = (2, 4)
MAX_TP_SIZE = 64
MAX_PP_SIZE = 8
# A stage larger than one local domain spreads over whole domains (``perf_model.spans``). MoE
# models do it as attention DP x EP: each DP rank's tp x pcp inside one domain, the experts over
# every rank of the stage, at most this many GPUs (DeepSeek's and SGLang's large deployments run
# EP32 to EP144; 128 is the largest power of two of that range).
MAX_SPANNING_STAGE_GPUS = 128
# Dense models spread TP over at most this many domains (TP16 over two HGX nodes, as issue 12 asks).
MAX_TP_SPAN_DOMAINS = 2
# vLLM's default KV-cache dtype follows the model dtype (bf16 caches for bf16 and fp8 weights).


class Proposal(BaseModel):
    """One (role, GPU, layout) the enumeration proposes; filters decide whether it is kept."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    role: Role
    gpu: GpuSpec
    layout: Layout

    @property
    def name(self) -> str:
        return f"{self.role}-{self.gpu.name}-{self.layout.short_name()}"


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (the degrees engines support)."""
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def precision_pairs(gpu: GpuSpec, precision: str, model: ModelSpec | None = None) -> list[tuple[Precision, Precision]]:
    """(weight, KV) precisions to try: all the GPU serves under 'auto', else the one asked for.

    Under 'auto' the weights are each compute precision the GPU has, plus the checkpoint's own
    format where it is weight-only on this GPU (Kimi-K2.5's INT4, gpt-oss's MXFP4 on Hopper: the
    engines dequantize them into BF16 GEMMs). The KV cache is BF16 or, where the GPU computes in
    FP8, FP8 (``--kv-cache-dtype fp8``), with any weight precision. A fixed precision the GPU
    lacks is still proposed, so the ``precision_support`` filter can say why nothing is left.
    """
    kvs: list[Precision] = ["bf16"] + (["fp8"] if gpu.supports("fp8") else [])
    if precision != "auto":
        return [(precision, kv) for kv in kvs]  # type: ignore[misc]
    weights: list[Precision] = [p for p in PRECISIONS if gpu.supports(p)]
    native = model.checkpoint_precision if model is not None else None
    if native is not None and native not in weights and weight_precision_supported(gpu, native):
        weights.append(native)
    return [(w, kv) for w in weights for kv in kvs]


def stage_spans_allowed(model: ModelSpec, gpu: GpuSpec, tp, dp, pcp, ep) -> np.ndarray:
    """Whether a stage of these degrees (ints or arrays) is one the search proposes: inside one
    local domain, or over whole domains as ``stage_span_problem`` describes."""
    tp, dp, pcp, ep = (np.asarray(x, dtype=np.int64) for x in (tp, dp, pcp, ep))
    domain = local_domain_gpus(gpu)
    stage = tp * dp * pcp
    inside = stage <= domain
    whole = stage % domain == 0
    if model.is_moe:
        spread = whole & (tp * pcp <= domain) & (ep == tp * dp) & (stage <= MAX_SPANNING_STAGE_GPUS)
    else:
        spread = whole & (dp == 1) & (stage <= MAX_TP_SPAN_DOMAINS * domain)
    return inside | spread


def stage_span_problem(model: ModelSpec, gpu: GpuSpec, layout: Layout) -> str | None:
    """Why the search does not propose ``layout``'s stage, or None.

    A stage (tp x dp x pcp GPUs) of at most one local domain is always proposed. A larger one
    spreads evenly over whole domains (the stage a multiple of the domain, as ``links.SpanningGroup``
    costs it): for MoE models as attention DP x EP (each DP rank's tp x pcp inside one domain, EP
    over all tp x dp ranks) up to ``MAX_SPANNING_STAGE_GPUS`` GPUs; for dense models as TP (with
    PCP) over at most ``MAX_TP_SPAN_DOMAINS`` domains; at any PP depth. These are the stages the
    performance model and placement cost; what an engine cannot start or places otherwise is an
    engine rule (``engines.check_layout``), not this."""
    if bool(stage_spans_allowed(model, gpu, layout.tp_size, layout.dp_size, layout.pcp_size, layout.ep_size)):
        return None
    domain = local_domain_gpus(gpu)
    stage = layout.gpus_per_stage
    head = f"{layout.short_name()}: {stage} GPUs per stage exceed the {domain}-GPU local domain of {gpu.name}"
    if stage % domain:
        return f"{head} and are no whole number of domains"
    if model.is_moe:
        return (f"{head}; a MoE stage spreads over domains only as attention DP x EP (tp x pcp <= {domain}, "
                f"ep = tp x dp) of at most {MAX_SPANNING_STAGE_GPUS} GPUs")
    return f"{head}; a dense model's TP spreads over at most {MAX_TP_SPAN_DOMAINS} domains"


def degree_combinations(model: ModelSpec, gpu: GpuSpec, role: Role) -> Iterator[dict]:
    """Parallel degrees (tp, pp, ep, dp, dcp, pcp) of one role on one GPU type."""
    domain = local_domain_gpus(gpu)
    tp_limit = domain if model.is_moe else MAX_TP_SPAN_DOMAINS * domain
    tps = powers_of_two(min(tp_limit, MAX_TP_SIZE))
    dps = powers_of_two(max(domain, MAX_SPANNING_STAGE_GPUS)) if model.is_moe else [1]
    pcps = [1] + (list(PCP_SIZES) if role != "decode" else [])
    for tp in tps:
        dcps = [1]
        if role != "prefill" and tp > model.num_kv_heads:
            # MLA counts as one KV head: its latent cache is duplicated on every TP rank.
            dcps += [d for d in powers_of_two(tp // model.num_kv_heads) if d > 1]
        for dp in dps:
            for pcp in pcps:
                if tp * dp * pcp > domain and tp * dp * pcp % domain:
                    continue
                eps = [1] + ([tp * dp] if model.is_moe and tp * dp > 1 else [])
                for ep in eps:
                    if tp * dp * pcp > domain and not stage_spans_allowed(model, gpu, tp, dp, pcp, ep):
                        continue
                    for dcp in dcps:
                        for pp in powers_of_two(MAX_PP_SIZE):
                            yield dict(tp_size=tp, pp_size=pp, ep_size=ep, dp_size=dp, dcp_size=dcp, pcp_size=pcp)


def enumerate_proposals(model: ModelSpec, gpus: list[GpuSpec], roles: list[Role],
                        precision: str) -> Iterator[Proposal]:
    """Every proposal of the space, in a fixed order (GPU, role, precision, degrees)."""
    for gpu in gpus:
        # One Layout object per layout of this GPU, whatever the role: the memos downstream
        # (memory coefficients, forward-pass costs) look arguments up by identity first.
        layouts: dict[tuple, Layout] = {}
        for role in roles:
            for weight, kv in precision_pairs(gpu, precision, model):
                for degrees in degree_combinations(model, gpu, role):
                    key = (*degrees.values(), weight, kv)
                    layout = layouts.get(key)
                    if layout is None:
                        layout = layouts[key] = Layout(**degrees, weight_precision=weight, kv_precision=kv)
                    yield Proposal(role=role, gpu=gpu, layout=layout)


def proposal_count(model: ModelSpec, gpu: GpuSpec, roles: list[Role], precision: str) -> int:
    """How many proposals ``enumerate_proposals`` makes for ``gpu``, without building them."""
    pairs = len(precision_pairs(gpu, precision, model))
    return sum(pairs * sum(1 for _ in degree_combinations(model, gpu, role)) for role in roles)


LAYOUT_DEGREES = ("tp_size", "pp_size", "ep_size", "dp_size", "dcp_size", "pcp_size")


@dataclass(frozen=True)
class ProposalColumns:
    """The proposals ``enumerate_proposals`` makes for one GPU type, as columns in its order:
    screens test many proposals at once and build ``Proposal`` objects only for the survivors."""

    gpu: GpuSpec
    role: np.ndarray               # str, one entry per proposal
    degrees: np.ndarray            # int64, shape (n, 6): ``LAYOUT_DEGREES``
    weight_precision: np.ndarray   # str
    kv_precision: np.ndarray       # str

    def __len__(self) -> int:
        return len(self.role)

    def degree(self, field: str) -> np.ndarray:
        return self.degrees[:, LAYOUT_DEGREES.index(field)]

    @property
    def gpus_per_stage(self) -> np.ndarray:
        return self.degree("tp_size") * self.degree("pcp_size") * self.degree("dp_size")

    @property
    def gpus_per_instance(self) -> np.ndarray:
        return self.gpus_per_stage * self.degree("pp_size")

    def layouts(self, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """One array per ``Layout`` field (of ``rows``, all by default)."""
        take = slice(None) if rows is None else rows
        columns = {field: self.degrees[take, i] for i, field in enumerate(LAYOUT_DEGREES)}
        return columns | {"weight_precision": self.weight_precision[take], "kv_precision": self.kv_precision[take]}

    def layout_key(self, row: int) -> tuple:
        return (*self.degrees[row].tolist(), str(self.weight_precision[row]), str(self.kv_precision[row]))

    def layout(self, row: int) -> Layout:
        key = self.layout_key(row)
        return Layout(**dict(zip(LAYOUT_DEGREES, key[:6])), weight_precision=key[6], kv_precision=key[7])

    def proposal(self, row: int, layout: Layout | None = None) -> Proposal:
        return Proposal(role=str(self.role[row]), gpu=self.gpu, layout=layout or self.layout(row))


def proposal_columns(model: ModelSpec, gpu: GpuSpec, roles: list[Role], precision: str) -> ProposalColumns:
    """``enumerate_proposals(model, [gpu], roles, precision)`` as columns, in the same order."""
    pairs = precision_pairs(gpu, precision, model)
    role_parts, degree_parts, weight_parts, kv_parts = [], [], [], []
    for role in roles:
        degrees = np.array([[d[f] for f in LAYOUT_DEGREES] for d in degree_combinations(model, gpu, role)],
                           dtype=np.int64).reshape(-1, len(LAYOUT_DEGREES))
        count = len(degrees) * len(pairs)
        role_parts.append(np.full(count, role))
        degree_parts.append(np.tile(degrees, (len(pairs), 1)))
        weight_parts.append(np.repeat(np.array([w for w, _ in pairs], dtype=object), len(degrees)))
        kv_parts.append(np.repeat(np.array([kv for _, kv in pairs], dtype=object), len(degrees)))

    def joined(parts: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    return ProposalColumns(gpu=gpu, role=joined(role_parts, str),
                           degrees=np.concatenate(degree_parts) if degree_parts else np.zeros((0, 6), np.int64),
                           weight_precision=joined(weight_parts, str), kv_precision=joined(kv_parts, str))
