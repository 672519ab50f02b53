"""Engine rules: which layouts an engine version can run, read from its generated data.

``check_layout`` returns one ``RuleViolation`` per rule a layout breaks, each naming the rule,
the values that break it and the engine source line the rule comes from. The rules, and the
facts of ``data/<engine>-<version>.yaml`` each one reads:

- ``model_unsupported`` (``model_architectures``): the release implements the model's architecture
  (vLLM's model registry, SGLang's EntryClass modules); vLLM 0.13.0 and SGLang 0.5.3 predate
  Qwen3.5/3.6, GLM-5 and Kimi-K2.5 (SGLang 0.5.3 also MiniMax-M2).
- the rules between a prefill and a decode pool (``check_pair``: TP, PP, KV dtype, GPU generation,
  checkpoint) are in ``pair_rules``.
- ``pp_kv_connector`` (``pp_kv_connector``, ``pp_kv_connector_linear_attention``,
  ``pp_kv_connector_hybrid_attention``, vLLM): PP on a prefill or decode instance with the NIXL
  connector, and on a prefill of a linear-attention or sliding-window model (not of chunked local
  attention, whose hybrid KV cache manager is off by default).
- ``pcp_unsupported`` (``pcp_attention``, ``pcp_multimodal``, ``pcp_dcp_sizes``, ``pcp_dcp_attention``,
  ``pcp_kv_connector_roles``, ``pcp_dcp_kv_connector``): prefill context parallelism needs an
  attention implementation that declares it (vLLM 0.33: MLA only; vLLM 0.13: none). In vLLM 0.33
  only the V2 model runner runs it, and not for a model with a vision encoder; beside it DCP must
  be 1, PCP or TP x PCP, and DCP > 1 only for sparse-attention MLA (GLM-5, not DeepSeek-V3). With
  the NIXL connector it runs on prefill instances only, and together with DCP only at TP 1 with
  DCP = PCP. layoutopt's PCP is
  vLLM's (extra GPUs); SGLang's attention CP splits the --tp-size group and is not modelled.
- ``dcp_unsupported`` (``dcp_attention``, ``dcp_gqa_max``, ``dcp_gqa_q_per_kv``, ``dcp_kv_connector``;
  SGLang ``dcp_divides_tp``, ``dcp_attention_backend``): decode context parallelism by attention kind,
  KV heads, (vLLM 0.33) with the KV connector and on AMD GPUs (MLA only). SGLang 0.5.23 runs GQA DCP in its Triton backend
  only (emit names it, ``engines.attention_backend``), whose prefill refuses sliding-window layers,
  so a prefilling (colocated) instance of such a model cannot use DCP.
- ``expert_parallel`` (``ep_size``): EP only on MoE models; vLLM's EP group is all tp x dp ranks.
- ``dp_pp_placement`` (``dp_rank_gpus``, vLLM): a MoE instance with DP and PP over several local
  domains. vLLM orders ranks DP x PP x (PCP x) TP and places each DP rank's GPUs together (the
  multiprocessing launcher gives local DP rank r the GPUs [r x world_size, ...) of its node, Ray
  one placement group per DP rank), so every domain holds GPUs of all PP stages and a stage's
  EP / attention-DP group spans the whole instance instead of the stage's own domains, as the
  performance model and placement have it. Allowed with the instance inside one domain, or when a
  DP rank's TP x PCP fills whole domains (each domain then holds one stage). SGLang spreads PP
  ranks outermost over ``--nnodes`` (``node_rank_layout``: each stage on nnodes / pp whole
  nodes) and checks only ``(tp x pp) % nnodes`` (``nnodes_divides_world``), which whole-node
  instances meet: it runs these layouts as planned and has no such rule.
- ``uneven_nodes`` (``node_rank_layout``, ``dp_rank_node_packing``; ``check_node_split``): an
  instance a cluster file's placement spreads unevenly over nodes. SGLang gives every node
  (tp x pp) / nnodes ranks; vLLM needs whole DP ranks per node (or a rank over whole, equal nodes).
- ``checkpoint_unavailable`` (``online_quantization_<precision>``, model_catalog/data/checkpoints.yaml):
  the weight precision needs a checkpoint of it (the model's release, a catalog variant, a known
  pre-quantized id, or the user's ``--checkpoint``) or the engine's load-time quantization of the
  16-bit checkpoint (``engines.quantization.weight_source``).
- ``precision_unsupported`` (``fp8_compute_min_capability``, ``fp4_weight_only_min_capability``,
  quantization methods, ``--kv-cache-dtype`` choices): the GPU's compute capability must reach
  the engine's kernels for the precision the performance model assumes.

TensorRT-LLM has a performance-model profile only; no data, so ``check_layout`` checks nothing
for it and ``engine_notes`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.engines.architectures import HF_ARCHITECTURES
from layoutopt.engines.loader import load_engine_data
from layoutopt.engines.pair_rules import layout_pair_rules
from layoutopt.engines.quantization import weight_source
from layoutopt.engines.ref import EngineRef, parse_engine_ref
from layoutopt.engines.schema import SourceRef
from layoutopt.engines.violations import RuleChecker, RuleViolation
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Layout, Role

DISAGGREGATED: tuple[Role, ...] = ("prefill", "decode")
# layoutopt precision -> the engine's quantization method for a checkpoint of that precision.
# Weight-only INT4 checkpoints (Kimi-K2.5) are compressed-tensors; gpt-oss ships OCP MXFP4.
QUANTIZATION_METHOD = {"vllm": {"fp8": "fp8", "fp4": "modelopt_fp4", "int4": "compressed-tensors", "mxfp4": "mxfp4"},
                       "sglang": {"fp8": "fp8", "fp4": "modelopt_fp4", "int4": "compressed-tensors", "mxfp4": "mxfp4"}}
KV_FP8_DTYPE = {"vllm": "fp8", "sglang": "fp8_e4m3"}


class RuleSummary(BaseModel):
    """What one rule says for one engine version, for ``layoutopt catalog engines``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    summary: str
    source: SourceRef | None = None
    data_file: str | None = Field(default=None, description="layoutopt data file the rule reads, where no "
                                  "engine line states it")


def engine_notes(engine: "str | EngineRef") -> list[str]:
    """Caveats about how much of an engine is checked (TensorRT-LLM: nothing)."""
    ref = parse_engine_ref(engine)
    if ref.has_data:
        return []
    return [f"{ref.name} has a performance-model profile only: no engine data is generated for it, so no "
            "engine rule (P/D TP pairing, PCP/DCP support, PP with KV transfer, precision) is checked"]


def check_layout(engine: "str | EngineRef", model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role, *,
                 prefill_layout: Layout | None = None, decode_layout: Layout | None = None) -> list[RuleViolation]:
    """Every rule of ``engine`` that ``layout`` (one instance of ``role`` on ``gpu``) breaks.

    ``prefill_layout`` / ``decode_layout`` name the other pool of a disaggregated plan, for the
    rules between the two (give the decode layout when checking a prefill one, and vice versa).
    """
    ref = parse_engine_ref(engine)
    if not ref.has_data:
        return []
    data = load_engine_data(ref.name, ref.version)
    check = RuleChecker(ref, data)
    for rule in _SINGLE_RULES[ref.name]:
        rule.check(check, model, gpu, layout, role)
    if role == "prefill" and decode_layout is not None:
        layout_pair_rules(check, model, layout, decode_layout)
    elif role == "decode" and prefill_layout is not None:
        layout_pair_rules(check, model, prefill_layout, layout)
    return check.found


def first_broken_rules(engine: "str | EngineRef", model: ModelSpec, gpu: GpuSpec,
                       columns: Mapping[str, np.ndarray]) -> list[str | None]:
    """For many instances of ``model`` on ``gpu`` at once, the rule of ``check_layout``'s first
    violation (None: the instance breaks none).

    ``columns`` holds ``role`` and one array per ``Layout`` field, one entry per instance. Each
    rule runs once per distinct value of what it reads (``_Rule.reads``), on the first instance
    with that value; the instances it breaks take its first violation.
    """
    num_rows = len(columns["role"])
    first: list[str | None] = [None] * num_rows
    ref = parse_engine_ref(engine)
    if not ref.has_data or not num_rows:
        return first
    data = load_engine_data(ref.name, ref.version)
    # Each column as small integers, so the values a rule reads combine into one integer key.
    codes = {name: np.unique(column, return_inverse=True)[1].reshape(-1) for name, column in columns.items()}
    pending = np.arange(num_rows)  # rows no earlier rule broke
    for rule in _SINGLE_RULES[ref.name]:
        key = np.zeros(len(pending), dtype=np.int64)
        for name in rule.reads:
            key = key * (int(codes[name].max()) + 1) + codes[name][pending]
        _, representatives, group_of = np.unique(key, return_index=True, return_inverse=True)
        group_of = group_of.reshape(-1)
        verdicts: list[str | None] = []
        for row in pending[representatives].tolist():
            check = RuleChecker(ref, data)
            layout = Layout(**{field: columns[field][row].item() for field in Layout.model_fields})
            rule.check(check, model, gpu, layout, str(columns["role"][row]))
            verdicts.append(check.found[0].rule if check.found else None)
        hit = np.array([v is not None for v in verdicts], dtype=bool)[group_of]
        for row, group in zip(pending[hit].tolist(), group_of[hit].tolist()):
            first[row] = verdicts[group]
        pending = pending[~hit]
        if not len(pending):
            break
    return first


def check_node_split(engine: "str | EngineRef", layout: Layout, node_gpus: Sequence[int]) -> list[RuleViolation]:
    """The rules on how an instance placed over several nodes splits its GPUs (``uneven_nodes``).

    ``node_gpus``: how many GPUs the instance uses on each of its nodes, in stage order. SGLang
    runs (--tp-size x --pp-size) / --nnodes ranks on every node (``node_rank_layout``); vLLM puts
    whole DP ranks on each node, or one rank over whole, homogeneous nodes (``dp_rank_node_packing``).
    """
    ref = parse_engine_ref(engine)
    if not ref.has_data or len(node_gpus) < 2:
        return []
    check = RuleChecker(ref, load_engine_data(ref.name, ref.version))
    counts = [int(g) for g in node_gpus]
    fact = check.fact("node_rank_layout")
    if fact is not None and len(set(counts)) > 1:
        world = layout.tp_size * layout.dp_size * layout.pp_size
        check.add("uneven_nodes", f"sglang splits --tp-size x --pp-size = {world} ranks into equal shares of the "
                  f"--nnodes {len(counts)} nodes; the placement uses {counts} GPUs on them", fact.source,
                  node_gpus=counts, world_size=world)
    fact = check.fact("dp_rank_node_packing")
    rank = layout.tp_size * layout.pp_size * layout.pcp_size
    if fact is not None and layout.dp_size > 1:
        whole_ranks = all(g % rank == 0 for g in counts) if rank <= max(counts) else \
            len(set(counts)) == 1 and rank % counts[0] == 0
        if not whole_ranks:
            check.add("uneven_nodes", f"vLLM places each DP rank's TP x PP x PCP = {rank} GPUs inside one node, or one "
                      f"rank over whole, equal nodes; the placement uses {counts} GPUs on the instance's nodes",
                      fact.source, node_gpus=counts, rank_gpus=rank)
    return check.found


# ----------------------------------------------------------------------------------------------
# Rules of one instance

def _pp_kv_connector(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    if layout.pp_size == 1 or role not in DISAGGREGATED:
        return
    fact = check.fact("pp_kv_connector")
    if fact is not None and not fact.value.get(role, True):
        check.add("pp_kv_connector", f"a {role} instance cannot run PP {layout.pp_size} with the NIXL KV connector",
                  fact.source, role=role, pp_size=layout.pp_size)
        return
    fact = check.fact("pp_kv_connector_linear_attention")
    if fact is not None and fact.value is False and model.num_linear_attention_layers:
        check.add("pp_kv_connector", f"PP {layout.pp_size} with the NIXL KV connector refuses linear-attention "
                  f"(Mamba/SSM) hybrids; {model.name} has {model.num_linear_attention_layers} such layers",
                  fact.source, role=role, pp_size=layout.pp_size)
        return
    fact = check.fact("pp_kv_connector_hybrid_attention")
    kind = "chunked_local_attention" if model.sliding_window_chunked else "sliding_window"
    if fact is not None and model.num_sliding_window_layers and not fact.value.get(kind, True):
        check.add("pp_kv_connector", f"PP {layout.pp_size} with the NIXL KV connector refuses a hybrid KV cache "
                  f"(its hybrid KV cache manager stays on for sliding-window attention); {model.name} has "
                  f"{model.num_sliding_window_layers} sliding-window layers", fact.source, role=role,
                  pp_size=layout.pp_size)


def _vllm_pcp(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    if layout.pcp_size == 1:
        return
    fact = check.fact("pcp_attention")
    if fact is not None and model.attention_kind not in fact.value:
        supported = ", ".join(k.upper() for k in fact.value) or "no attention implementation"
        check.add("pcp_unsupported", f"PCP {layout.pcp_size} needs an attention implementation with PCP support "
                  f"({supported} in this version); {model.name} uses {model.attention_kind.upper()}",
                  fact.source, pcp_size=layout.pcp_size, attention=model.attention_kind)
        return
    fact = check.fact("pcp_multimodal")
    if fact is not None and fact.value is False and model.multimodal:
        check.add("pcp_unsupported", f"PCP {layout.pcp_size}: vLLM's model runner refuses PCP for a model that "
                  f"accepts multimodal inputs, and {model.name} ships a vision encoder", fact.source,
                  pcp_size=layout.pcp_size, model=model.name)
        return
    if layout.dcp_size > 1 and _vllm_pcp_with_dcp(check, model, layout):
        return
    if role not in DISAGGREGATED:
        return
    fact = check.fact("pcp_kv_connector_roles")
    if fact is not None and role not in fact.value:
        check.add("pcp_unsupported", f"PCP {layout.pcp_size} on a {role} instance: the NIXL KV connector runs PCP "
                  f"only on {' and '.join(fact.value)} instances", fact.source, pcp_size=layout.pcp_size, role=role)
        return
    fact = check.fact("pcp_dcp_kv_connector")
    if (fact is not None and fact.value == "tp1_dcp_equals_pcp" and layout.dcp_size > 1
            and (layout.tp_size != 1 or layout.dcp_size != layout.pcp_size)):
        check.add("pcp_unsupported", f"PCP {layout.pcp_size} with DCP {layout.dcp_size} and TP {layout.tp_size}: the "
                  "NIXL KV connector needs TP 1 and DCP equal to PCP when both are on", fact.source,
                  pcp_size=layout.pcp_size, dcp_size=layout.dcp_size, tp_size=layout.tp_size)


def _vllm_pcp_with_dcp(check: RuleChecker, model: ModelSpec, layout: Layout) -> bool:
    """PCP and DCP on one instance, any role: the DCP sizes ParallelConfig accepts beside PCP and
    the attention the model runner runs both for. True when a rule is broken."""
    pcp, dcp, tp = layout.pcp_size, layout.dcp_size, layout.tp_size
    fact = check.fact("pcp_dcp_sizes")
    if fact is not None and dcp not in (pcp, tp * pcp):
        check.add("pcp_unsupported", f"PCP {pcp} with DCP {dcp} and TP {tp}: beside PCP, DCP must be 1, PCP ({pcp}) "
                  f"or TP x PCP ({tp * pcp})", fact.source, pcp_size=pcp, dcp_size=dcp, tp_size=tp)
        return True
    fact = check.fact("pcp_dcp_attention")
    if fact is not None and "sparse_mla" in fact.value and not model.indexer_topk_tokens:
        check.add("pcp_unsupported", f"PCP {pcp} with DCP {dcp}: vLLM's model runner runs both together only for "
                  f"sparse-attention MLA models, and {model.name} uses dense attention", fact.source,
                  pcp_size=pcp, dcp_size=dcp, model=model.name)
        return True
    return False


def _vllm_dcp(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    dcp = layout.dcp_size
    if dcp == 1:
        return
    fact = check.fact("dcp_attention")
    if fact is not None and model.attention_kind not in fact.value:
        check.add("dcp_unsupported", f"DCP {dcp}: no {model.attention_kind.upper()} attention implementation "
                  "returns the softmax LSE DCP needs", fact.source, dcp_size=dcp, attention=model.attention_kind)
        return
    fact = check.fact("dcp_attention_rocm")
    kind = model.attention_kind + ("_sparse" if model.indexer_topk_tokens else "")
    if fact is not None and gpu.vendor == "amd" and kind not in fact.value:
        check.add("dcp_unsupported", f"DCP {dcp} on {gpu.name}: none of the attention backends vLLM runs on ROCm "
                  f"for {kind.replace('_', ' ').upper()} supports DCP", fact.source, dcp_size=dcp, gpu=gpu.name)
        return
    if model.attention_kind != "mla":
        heads = model.num_kv_heads
        fact = check.fact("dcp_gqa_max")
        if fact is not None and (layout.tp_size <= heads or dcp > layout.tp_size // heads):
            check.add("dcp_unsupported", f"DCP {dcp} with TP {layout.tp_size} and {heads} KV heads: DCP needs "
                      f"TP > KV heads and DCP <= TP // KV heads", fact.source,
                      dcp_size=dcp, tp_size=layout.tp_size, num_kv_heads=heads)
            return
        fact = check.fact("dcp_gqa_q_per_kv")
        q_per_kv = model.num_attention_heads // heads
        if fact is not None and q_per_kv % dcp:
            check.add("dcp_unsupported", f"DCP {dcp} must divide the {q_per_kv} query heads per KV head",
                      fact.source, dcp_size=dcp, q_per_kv=q_per_kv)
            return
    fact = check.fact("dcp_kv_connector")
    if fact is not None and role in DISAGGREGATED:
        if model.attention_kind != "mla":
            check.add("dcp_unsupported", f"DCP {dcp} on a {role} instance with the NIXL KV connector is accepted "
                      f"for MLA models only; {model.name} uses {model.attention_kind.upper()}",
                      fact.source, dcp_size=dcp, role=role, attention=model.attention_kind)
        elif dcp != max(layout.tp_size, layout.pcp_size):
            check.add("dcp_unsupported", f"DCP {dcp} with the NIXL KV connector must be 1 or equal to "
                      f"max(TP, PCP) = {max(layout.tp_size, layout.pcp_size)}", fact.source,
                      dcp_size=dcp, tp_size=layout.tp_size, role=role)


def _vllm_expert_parallel(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    if layout.ep_size == 1:
        return
    fact = check.fact("ep_size")
    source = fact.source if fact is not None else None
    if not model.is_moe:
        check.add("expert_parallel", f"EP {layout.ep_size} on {model.name}, which has no experts", source,
                  ep_size=layout.ep_size)
    elif layout.ep_size != layout.tp_size * layout.dp_size:
        check.add("expert_parallel", f"EP {layout.ep_size}: with --enable-expert-parallel the expert group is all "
                  f"TP x DP = {layout.tp_size * layout.dp_size} ranks", source,
                  ep_size=layout.ep_size, tp_size=layout.tp_size, dp_size=layout.dp_size)
    elif layout.pcp_size > 1 and fact is not None and "pcp" in str(fact.value):
        check.add("expert_parallel", f"EP with PCP {layout.pcp_size}: vLLM spreads experts over TP x DP x PCP = "
                  f"{layout.ep_size * layout.pcp_size} ranks, a layout layoutopt does not model", source,
                  ep_size=layout.ep_size, pcp_size=layout.pcp_size)


def _vllm_dp_pp_placement(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    dp, pp = layout.dp_size, layout.pp_size
    if dp == 1 or pp == 1 or not model.is_moe:
        return  # without DP ranks sharing MoE layers, where each rank's stages sit costs nothing
    fact = check.fact("dp_rank_gpus")
    domain = gpu.local_domain_gpus
    rank_stage = layout.tp_size * layout.pcp_size
    if fact is None or fact.value != "dp_outer_pp_inner" or layout.gpus_per_instance <= domain \
            or rank_stage % domain == 0:
        return
    instance_domains = -(-layout.gpus_per_instance // domain)
    stage_domains = -(-layout.gpus_per_stage // domain)
    planned = "the one domain" if stage_domains == 1 else f"the {stage_domains} domains"
    check.add("dp_pp_placement", f"DP {dp} x PP {pp} over {instance_domains} local domains of {domain} {gpu.name}: "
              f"vLLM keeps each DP rank's TP x PP x PCP = {rank_stage * pp} GPUs together, so every domain holds GPUs "
              f"of every pipeline stage and a stage's EP group spans {'both' if instance_domains == 2 else f'all {instance_domains}'} "
              f"domains, not {planned} "
              f"the plan places it in; use PP 1, an instance inside one domain, or TP x PCP of whole domains "
              f"({domain} GPUs) per DP rank",
              fact.source, dp_size=dp, pp_size=pp, tp_size=layout.tp_size, pcp_size=layout.pcp_size,
              local_domain_gpus=domain)


def _sglang_context_parallel(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    if layout.pcp_size > 1:
        fact = check.fact("world_size")
        check.add("pcp_unsupported", "SGLang has no prefill context parallelism over extra GPUs (vLLM's "
                  "--prefill-context-parallel-size, which layoutopt models)"
                  + ("; its --attn-cp-size splits the --tp-size group instead" if fact is not None else
                     f"; no context-parallel flag in sglang {check.ref.version}"),
                  fact.source if fact is not None else None, pcp_size=layout.pcp_size)
    if layout.dcp_size > 1:
        flag = check.data.flag("--dcp-size")
        if flag is None:
            check.add("dcp_unsupported", f"sglang {check.ref.version} has no decode-context-parallel flag",
                      None, dcp_size=layout.dcp_size)
        else:
            fact = check.fact("dcp_divides_tp")
            sglang_tp = layout.tp_size * layout.dp_size
            if fact is not None and sglang_tp % layout.dcp_size:
                check.add("dcp_unsupported", f"--dcp-size {layout.dcp_size} must divide --tp-size {sglang_tp}",
                          fact.source, dcp_size=layout.dcp_size, tp_size=sglang_tp)
                return
            fact = check.fact("dcp_attention_backend")
            if (fact is not None and model.attention_kind == "mla" and not model.indexer_topk_tokens
                    and gpu.cuda_major == 9
                    and layout.kv_precision == "fp8"):
                check.add("dcp_unsupported", f"DCP {layout.dcp_size} with an FP8 KV cache of {model.name} on "
                          f"{gpu.name}: of SGLang's Hopper MLA backends fa3 has no DCP path, FlashMLA refuses DCP "
                          "with FP8 KV (flashmla_backend.py:458) and FlashInfer casts the whole KV pool to BF16 "
                          "at every decode step (flashinfer_mla_backend.py:822)", fact.source,
                          dcp_size=layout.dcp_size, kv_precision="fp8", gpu=gpu.name)
                return
            if (fact is not None and role != "decode" and model.attention_kind != "mla"
                    and model.num_sliding_window_layers):
                check.add("dcp_unsupported", f"DCP {layout.dcp_size} on a {role} instance of {model.name}: GQA DCP "
                          "runs in SGLang's Triton backend only, whose prefill refuses sliding-window layers",
                          fact.source, dcp_size=layout.dcp_size, role=role)


def _sglang_expert_parallel(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    if layout.ep_size > 1 and not model.is_moe:
        flag = check.data.flag("--ep-size")
        check.add("expert_parallel", f"EP {layout.ep_size} on {model.name}, which has no experts",
                  flag.source if flag else None, ep_size=layout.ep_size)
    if layout.dp_size > 1 and not any(check.data.has_flag(f) for f in ("--attn-dp-size", "--enable-dp-attention")):
        check.add("expert_parallel", f"attention DP {layout.dp_size}: sglang {check.ref.version} has no "
                  "attention data-parallel flag", None, dp_size=layout.dp_size)


def _precision(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    engine = check.ref.name
    weight = layout.weight_precision
    capability = gpu.compute_capability_x10
    if weight != "bf16" and capability is not None:
        name = QUANTIZATION_METHOD.get(engine, {}).get(weight)
        method = check.data.quantization(name) if name else None
        if method is not None and method.min_capability is not None and capability < method.min_capability:
            check.add("precision_unsupported", f"{weight} weights: {engine}'s {method.method} quantization needs "
                      f"compute capability {method.min_capability / 10:.1f}; {gpu.name} has "
                      f"{gpu.compute_capability:.1f}", method.source,
                      precision=weight, gpu=gpu.name, compute_capability=gpu.compute_capability)
            return
        fact = check.fact("fp8_compute_min_capability")
        if weight == "fp8" and fact is not None and capability < fact.value:
            # vLLM does run FP8 checkpoints weight-only (Marlin W8A16) below this capability, but the
            # generated data holds no source line for that kernel's own minimum, so no plan relies on it.
            check.add("precision_unsupported", f"FP8 compute needs compute capability {fact.value / 10:.1f}; on "
                      f"{gpu.name} ({gpu.compute_capability:.1f}) {engine} would run FP8 weight-only (Marlin "
                      "W8A16), whose minimum capability the engine data does not record", fact.source,
                      precision=weight, gpu=gpu.name, compute_capability=gpu.compute_capability)
            return
        # Without FP4 tensor cores FP4 checkpoints run weight-only: Marlin W4A16 dequantizes into BF16
        # GEMMs (the performance model's weight-only path, perf_model/precision.py) from this capability.
        fact = check.fact("fp4_weight_only_min_capability")
        if weight in ("fp4", "mxfp4") and not gpu.supports("fp4") and fact is not None and capability < fact.value:
            check.add("precision_unsupported", f"{gpu.name} ({gpu.compute_capability:.1f}) has no FP4 compute, and "
                      f"{engine}'s weight-only FP4 kernels (Marlin W4A16) need compute capability "
                      f"{fact.value / 10:.1f}", fact.source,
                      precision=weight, gpu=gpu.name, compute_capability=gpu.compute_capability)
            return
    if layout.kv_precision == "fp8":
        flag = check.data.flag("--kv-cache-dtype")
        wanted = KV_FP8_DTYPE[engine]
        if flag is not None and flag.choices is not None and wanted not in flag.choices:
            check.add("precision_unsupported", f"--kv-cache-dtype has no {wanted} choice", flag.source,
                      kv_precision="fp8")


def _architecture(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    fact = check.fact("model_architectures")
    architecture = HF_ARCHITECTURES.get(model.family)
    if fact is not None and architecture is not None and architecture not in fact.value:
        check.add("model_unsupported", f"{check.ref.name} {check.ref.version} has no implementation of "
                  f"{architecture} ({model.name}): its model registry lists {len(fact.value)} other architectures, "
                  "and layoutopt does not plan the Transformers-backend fallback", fact.source,
                  model=model.name, architecture=architecture)


def _checkpoint(check: RuleChecker, model: ModelSpec, gpu: GpuSpec, layout: Layout, role: Role) -> None:
    found = weight_source(check.data, model, gpu, layout.weight_precision)
    if not found.available:
        check.add("checkpoint_unavailable", f"{layout.weight_precision} weights: {found.problem}; pass --checkpoint "
                  f"{layout.weight_precision}=ORG/NAME to plan with a checkpoint of your own", found.source,
                  precision=layout.weight_precision, model=model.name)


@dataclass(frozen=True)
class _Rule:
    """A rule of one instance and what it reads of the role and layout (besides the model, the
    GPU and the engine data); ``first_broken_rules`` checks it once per distinct value of these.
    A rule that reads more must name it here (tests/test_engines_rules_columns.py compares)."""

    check: Callable[[RuleChecker, ModelSpec, GpuSpec, Layout, Role], None]
    reads: tuple[str, ...]


_ARCHITECTURE = _Rule(_architecture, ())
_PCP = _Rule(_vllm_pcp, ("pcp_size", "dcp_size", "tp_size", "role"))
_DCP = _Rule(_vllm_dcp, ("dcp_size", "tp_size", "pcp_size", "role"))
_PP_KV = _Rule(_pp_kv_connector, ("pp_size", "role"))
_EP = _Rule(_vllm_expert_parallel, ("ep_size", "tp_size", "dp_size", "pcp_size"))
_PRECISION = _Rule(_precision, ("weight_precision", "kv_precision"))
_CHECKPOINT = _Rule(_checkpoint, ("weight_precision",))
_DP_PP = _Rule(_vllm_dp_pp_placement, ("tp_size", "dp_size", "pcp_size", "pp_size"))
_SGLANG_CP = _Rule(_sglang_context_parallel, ("pcp_size", "dcp_size", "tp_size", "dp_size", "role", "kv_precision"))
_SGLANG_EP = _Rule(_sglang_expert_parallel, ("ep_size", "dp_size"))

_SINGLE_RULES: dict[str, tuple[_Rule, ...]] = {
    "vllm": (_ARCHITECTURE, _PCP, _DCP, _PP_KV, _EP, _DP_PP, _PRECISION, _CHECKPOINT),
    "sglang": (_ARCHITECTURE, _SGLANG_CP, _PP_KV, _SGLANG_EP, _PRECISION, _CHECKPOINT),
}
