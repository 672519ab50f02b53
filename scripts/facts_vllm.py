"""vLLM probes: the facts the engine rules read, each from the statement in the wheel that decides it."""

from __future__ import annotations

import ast
import re
from typing import Any

from engine_source import Facts, ProbeError, Wheel, class_attribute, module_assignment
from facts_common import first, flag_facts, quantization_methods, with_choices

KV_UTILS = "vllm/distributed/kv_transfer/kv_connector/utils.py"
ATTENTION_DIRS = ("vllm/v1/attention/", "vllm/attention/")
QUANT_DIR = "vllm/model_executor/layers/quantization/"


def vllm_facts(wheel: Wheel, flags: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    facts = Facts(wheel)
    _vllm_pd_tp(wheel, facts)
    _vllm_side_channel(wheel, facts)
    _vllm_context_parallel(wheel, facts)
    _vllm_pp_connector(wheel, facts)
    _vllm_pd_attention_backend(wheel, facts)
    _vllm_expert_parallel(wheel, facts)
    _vllm_dp_rank_gpus(wheel, facts)
    _vllm_precision(wheel, facts)
    _vllm_online_quantization(wheel, facts)
    _vllm_model_kv_cache_dtype(wheel, facts)
    _vllm_model_architectures(wheel, facts)
    flag_facts(facts, flags, {
        "multi_node_dp_flags": ["--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
                                "--data-parallel-start-rank", "--headless"],
        "multi_node_pp_flags": ["--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr",
                                "--master-port"],
    })
    return facts.items, with_choices(quantization_methods(wheel, QUANT_DIR), flags)


def _vllm_pd_tp(wheel: Wheel, facts: Facts) -> None:
    either = wheel.find(KV_UTILS, r"assert remote_tp_size % self\.tp_size == 0")
    local_multiple = wheel.find(KV_UTILS, r"assert self\.tp_size % remote_tp_size == 0")
    if either is not None:
        facts.add("pd_tp_rule", "either_divides", KV_UTILS, either,
                  "TpKVTopology.tp_ratio: when the local (reading, decode) TP is the smaller one the remote "
                  "(prefill) TP must be a multiple of it, else the local TP must be a multiple of the remote: "
                  "either TP may be the larger as long as one divides the other.")
    elif local_multiple is not None:
        facts.add("pd_tp_rule", "decode_multiple_of_prefill", KV_UTILS, local_multiple,
                  "TpKVTopology.tp_ratio asserts that the local TP (the decode instance, which reads the KV) "
                  "is divisible by the remote (prefill) TP; the NIXL handshake then asserts tp_ratio > 0.")
        assert_at = first(wheel, wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/"),
                           r"Decode TP cannot be smaller than prefill TP")
        if assert_at:
            facts.add("pd_tp_assert", "decode_tp >= prefill_tp", *assert_at,
                      "NIXL handshake validation: a decode TP smaller than the prefill TP is refused.")
    else:
        raise ProbeError(f"{wheel.path.name}: no tp_ratio divisibility assertion in {KV_UTILS}")


def _vllm_side_channel(wheel: Wheel, facts: Facts) -> None:
    envs = "vllm/envs.py"
    for name, key, cast in (("VLLM_NIXL_SIDE_CHANNEL_HOST", "nixl_side_channel_host", str),
                            ("VLLM_NIXL_SIDE_CHANNEL_PORT", "nixl_side_channel_port", int)):
        line = wheel.require(envs, rf"^\s*{name}: \w+ = ")
        default = re.search(r"=\s*\"?([\w.]+)\"?", wheel.line_text(envs, line)).group(1)
        facts.add(key, {"env": name, "default": cast(default)}, envs, line,
                  f"Environment variable {name} and its default as vllm/envs.py declares it; the NIXL side "
                  "channel (the handshake socket) binds and advertises this address.")
    files = wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/")
    for rel in files:
        line = wheel.find(rel, r"self\.side_channel_port = \($")
        if line is None:
            continue
        body = " ".join(wheel.lines(rel)[line - 1: line + 3])
        match = re.search(r"VLLM_NIXL_SIDE_CHANNEL_PORT\s*\+\s*vllm_config\.parallel_config\.(\w+)", body)
        if match:
            facts.add("nixl_side_channel_port_offset", match.group(1), rel, line + 2,
                      f"The side-channel port is VLLM_NIXL_SIDE_CHANNEL_PORT + parallel_config.{match.group(1)}: "
                      "DP ranks of one instance on one host use consecutive ports, so instances on one host "
                      "need base ports at least dp_size apart.")
            return
    raise ProbeError(f"{wheel.path.name}: side-channel port assignment not found")


def _impl_classes(wheel: Wheel) -> list[tuple[str, ast.ClassDef]]:
    found = []
    for prefix in ATTENTION_DIRS:
        for rel in wheel.files_under(prefix):
            for node in ast.walk(wheel.tree(rel)):
                if isinstance(node, ast.ClassDef) and "Impl" in node.name:
                    found.append((rel, node))
    return found


def _attention_kind(rel: str, node: ast.ClassDef) -> str:
    """MLA impls live under backends/mla/ or carry MLA in their name; the others are MHA/GQA/MQA."""
    return "mla" if "/mla/" in rel or "MLA" in node.name else "gqa"


def _supporting_kinds(wheel: Wheel, attribute: str) -> tuple[list[dict[str, Any]], tuple[str, int] | None]:
    """Impl classes that set ``attribute = True``, and where the base class declares it False."""
    supporters, base = [], None
    for rel, node in _impl_classes(wheel):
        found = class_attribute(node, attribute)
        if found is None:
            continue
        value, line = found
        if value is True:
            supporters.append({"impl": node.name, "attention": _attention_kind(rel, node),
                               "source": {"file": rel, "line": line}})
        elif value is False and node.name in ("AttentionImpl", "AttentionImplBase") and base is None:
            base = (rel, line)
    return supporters, base


def _vllm_context_parallel(wheel: Wheel, facts: Facts) -> None:
    supporters, base = _supporting_kinds(wheel, "supports_pcp")
    if base is None:
        raise ProbeError(f"{wheel.path.name}: no base declaration of supports_pcp")
    kinds = sorted({s["attention"] for s in supporters})
    rel, line = (supporters[0]["source"]["file"], supporters[0]["source"]["line"]) if supporters else base
    facts.add("pcp_attention", kinds, rel, line,
              "Attention kinds whose implementation declares supports_pcp = True (the CP compatibility check "
              "in v1/worker/cp_utils.py asserts it for --prefill-context-parallel-size > 1). Declaring impls: "
              + (", ".join(f"{s['impl']} ({s['source']['file']}:{s['source']['line']})" for s in supporters)
                 or "none; the base class default is False"))
    attribute = "supports_dcp" if _supporting_kinds(wheel, "supports_dcp")[1] else "can_return_lse_for_decode"
    supporters, base = _supporting_kinds(wheel, attribute)
    kinds = sorted({s["attention"] for s in supporters})
    if not supporters:
        raise ProbeError(f"{wheel.path.name}: no attention impl sets {attribute}")
    first = supporters[0]["source"]
    facts.add("dcp_attention", kinds, first["file"], first["line"],
              f"Attention kinds with an implementation that sets {attribute} = True (DCP needs the softmax LSE "
              "of the decode attention, checked in v1/worker/cp_utils.py). Declaring impls: "
              + ", ".join(f"{s['impl']} ({s['source']['file']}:{s['source']['line']})" for s in supporters))
    _vllm_dcp_on_rocm(wheel, facts, supporters)
    model = "vllm/config/model.py"
    line = wheel.require(model, r"max_dcp_size = tensor_parallel_size // total_num_kv_heads")
    facts.add("dcp_gqa_max", "tp_size // num_kv_heads", model, line,
              "Without MLA, DCP needs tp_size > num_kv_heads and dcp_size <= tp_size // num_kv_heads.")
    line = wheel.require(model, r"num_q_per_kv % decode_context_parallel_size")
    facts.add("dcp_gqa_q_per_kv", "num_attention_heads // num_kv_heads % dcp_size == 0", model, line,
              "Without MLA, the query heads per KV head must be divisible by dcp_size.")
    line = wheel.find("vllm/config/vllm.py", r"PD with decode_context_parallel_size > 1 is only")
    if line is not None:
        facts.add("dcp_kv_connector", "mla_only", "vllm/config/vllm.py", line,
                  "With the NIXL connector, dcp_size > 1 is accepted only for MLA models, and it must be 1 or "
                  "equal to max(tp_size, pcp_size) (the assertion just above).")
    _vllm_context_parallel_kv_connector(wheel, facts)
    _vllm_context_parallel_runner(wheel, facts)


def _vllm_context_parallel_runner(wheel: Wheel, facts: Facts) -> None:
    """What PCP accepts on any instance: the DCP sizes beside it (config/parallel.py) and, in the
    model runner V2 that alone runs PCP, the models and DCP settings it refuses at start-up."""
    parallel = "vllm/config/parallel.py"
    sizes = wheel.find(parallel, r"When PCP is enabled, DCP must be disabled, span the PCP")
    if sizes is None:
        return
    facts.add("pcp_dcp_sizes", "1, pcp_size or tp_size x pcp_size", parallel, sizes,
              "With prefill_context_parallel_size > 1, decode_context_parallel_size must be 1, equal to "
              "pcp_size or equal to tp_size x pcp_size (ParallelConfig's validator raises otherwise).")
    runner = "vllm/v1/worker/gpu/pcp_manager.py"
    v1_only = wheel.find("vllm/config/vllm.py", r"PCP runtime support is implemented only by the V2 model runner")
    sparse = wheel.find(runner, r"MRV2 PCP \+ DCP supports sparse MLA models only")
    multimodal = wheel.find(runner, r"MRV2 PCP does not support MM inputs yet")
    backend = wheel.find(runner, r"MRV2 PCP \+ DCP requires dcp_comm_backend='ag_rs'")
    if v1_only is None or sparse is None or multimodal is None or backend is None:
        raise ProbeError(f"{wheel.path.name}: PCP DCP sizes found, but not the V2 model runner's PCP checks")
    facts.add("pcp_dcp_attention", ["sparse_mla"], runner, sparse,
              "PCP > 1 together with DCP > 1 runs only for sparse (indexer) MLA models such as DeepSeek-V3.2 "
              "and GLM-5: the V2 model runner refuses dense MLA at start-up. Only the V2 runner runs PCP "
              f"(vllm/config/vllm.py:{v1_only} marks it unsupported by V1).")
    facts.add("pcp_multimodal", False, runner, multimodal,
              "The V2 model runner refuses PCP > 1 for a model that accepts multimodal inputs (a vision or audio "
              "encoder), unless the server runs text only (--language-model-only).")
    models = "vllm/model_executor/models/config.py"
    a2a = wheel.find(models, r'comm_backend="a2a"')
    facts.add("pcp_dcp_comm_backend", "ag_rs", runner, backend,
              "PCP > 1 with DCP > 1 needs --dcp-comm-backend ag_rs, and a model's config hook may default it to "
              "another" + (f" (GLM-5: a2a, {models}:{a2a})" if a2a is not None else "") + ", so a launch names it.")


def _vllm_dcp_on_rocm(wheel: Wheel, facts: Facts, supporters: list[dict[str, Any]]) -> None:
    """Which attention kinds have a DCP-capable implementation among the backends vLLM runs on ROCm:
    vllm/platforms/rocm.py chooses only among its rocm_* and triton_* backends (sparse MLA: the AITER
    sparse one alone)."""
    rocm = "vllm/platforms/rocm.py"
    choice = wheel.find(rocm, r"return \[AttentionBackendEnum\.ROCM_AITER_MLA_SPARSE\]")
    if choice is None:
        return
    on_rocm = [s for s in supporters if s["source"]["file"].rsplit("/", 1)[-1].startswith(("rocm_", "triton_"))]
    kinds = sorted({s["attention"] + ("_sparse" if "Sparse" in s["impl"] else "") for s in on_rocm})
    facts.add("dcp_attention_rocm", kinds, rocm, choice,
              "Attention kinds with a DCP-capable implementation among the backends vLLM picks on ROCm (rocm_* "
              "and triton_* files; sparse MLA runs ROCM_AITER_MLA_SPARSE alone, this line): "
              + (", ".join(f"{s['impl']} ({s['source']['file']}:{s['source']['line']})" for s in on_rocm) or "none")
              + ". Other kinds (GQA: ROCM_ATTN, ROCM_AITER_FA, TRITON_ATTN, none declaring it) cannot run DCP on "
              "an AMD GPU.")


# What the NIXL connector accepts of prefill context parallelism, on one instance and across a pair:
# (the statement that says it, fact, value, note). A release without the first states none of them.
_NIXL_CONTEXT_PARALLEL = (
    (r"NixlConnector PCP currently supports kv_producer only", "pcp_kv_connector_roles", ["prefill"],
     "With the NIXL connector, prefill_context_parallel_size > 1 runs only on a kv_producer (prefill) instance; "
     "a consumer (decode) refuses it at start-up."),
    (r"NixlConnector PCP\+DCP requires TP1 with DCP spanning", "pcp_dcp_kv_connector", "tp1_dcp_equals_pcp",
     "With the NIXL connector, an instance with both PCP > 1 and DCP > 1 must run TP 1 with dcp_size equal to "
     "pcp_size; it refuses any other combination at start-up."),
    (r"Replicated PCP cannot be paired with a DCP-sharded NIXL peer", "pd_context_parallel",
     "no_replicated_pcp_with_dcp_peer",
     "At the NIXL handshake, a side with PCP > 1 and DCP 1 (its KV replicated over the PCP ranks) cannot pair "
     "with a peer whose DCP > 1 (its KV sharded over DCP ranks): the first transfer between them raises instead "
     "of moving KV."),
)


def _vllm_context_parallel_kv_connector(wheel: Wheel, facts: Facts) -> None:
    files = wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/nixl/")
    for pattern, name, value, note in _NIXL_CONTEXT_PARALLEL:
        found = first(wheel, files, pattern)
        if found is None:
            return
        facts.add(name, value, *found, note)


def _vllm_pd_attention_backend(wheel: Wheel, facts: Facts) -> None:
    """The NIXL handshake hashes the attention backend's name; the backend follows the GPU's generation."""
    files = wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/")
    hashed = first(wheel, files, r'"attn_backend_name": attn_backend_name')
    blackwell = wheel.find("vllm/platforms/cuda.py", r"if device_capability\.major == 10")
    if hashed is None or blackwell is None:
        return
    cache_dtype = wheel.find(hashed[0], r'"cache_dtype": str\(cache_config\.cache_dtype\)')
    if cache_dtype is not None:
        facts.add("pd_kv_cache_dtype", "equal", hashed[0], cache_dtype,
                  "compute_nixl_compatibility_hash also hashes the KV cache dtype (--kv-cache-dtype): prefill and "
                  "decode instances of one NIXL pair must keep their KV caches in the same precision.")
    model = wheel.find(hashed[0], r'"model": model_config\.model,')
    if model is not None:
        facts.add("pd_checkpoint", "equal", hashed[0], model,
                  "compute_nixl_compatibility_hash also hashes model_config.model, the checkpoint the instance "
                  "serves: prefill and decode instances of one NIXL pair must load the same checkpoint (weight "
                  "precisions that come from different checkpoints, such as an NVFP4 release beside the 16-bit "
                  "one quantized online to FP8, cannot pair).")
    facts.add("pd_attention_backend", "same_gpu_generation", *hashed,
              "compute_nixl_compatibility_hash puts the attention backend's name into the hash that a NIXL "
              "prefill/decode handshake must match (a mismatch raises 'NIXL compatibility hash mismatch'), and "
              "the default backend follows the GPU: by CUDA compute capability major in "
              f"vllm/platforms/cuda.py _get_backend_priorities (line {blackwell}: Blackwell's FLASHINFER(_MLA) "
              "before Hopper's FLASH_ATTN(_MLA)), and ROCm's own list in vllm/platforms/rocm.py. So prefill and "
              "decode must run on the same vendor and compute capability major (AMD: the same GPU model).")


def _vllm_pp_connector(wheel: Wheel, facts: Facts) -> None:
    files = wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/")
    consumer = first(wheel, files, r"consumer \(decode\) does not support")
    if consumer is not None:
        facts.add("pp_kv_connector", {"prefill": True, "decode": False}, *consumer,
                  "NIXL: a prefill (kv_producer) instance may run pipeline_parallel_size > 1 (it writes its "
                  "layer slice into a PP=1 decode); a decode (kv_consumer) instance may not. Hybrid (HMA) KV "
                  "layouts need NixlPushConnector for PP.")
        mamba = first(wheel, files, r"does not support pipeline_parallel_size > 1\s*\"?$|with Mamba/SSM hybrid")
        if mamba is not None:
            facts.add("pp_kv_connector_linear_attention", False, *mamba,
                      "NIXL with pipeline_parallel_size > 1 refuses Mamba/SSM (linear-attention) hybrid models.")
        _vllm_pp_kv_connector_hybrid(wheel, facts, files)
        return
    worker = "vllm/v1/worker/gpu_worker.py"
    line = wheel.find(worker, r"return \{tp_rank: metadata\}")
    if line is None:
        raise ProbeError(f"{wheel.path.name}: no statement about PP with the KV connector found")
    facts.add("pp_kv_connector", {"prefill": False, "decode": False}, worker, line,
              "The KV connector's handshake metadata is keyed by TP rank only ({tp_rank: metadata}); the "
              "engine core merges the workers' dicts (v1/engine/core.py), so with pipeline_parallel_size > 1 "
              "the stages overwrite each other and a peer can reach only one stage's KV: PP is not usable on "
              "either side of a NIXL P/D pair in this version.")



def _vllm_pp_kv_connector_hybrid(wheel: Wheel, facts: Facts, files: list[str]) -> None:
    """PP on a prefill with the pull NixlConnector (the one emit launches) and a hybrid KV cache:
    refused at start-up while the hybrid KV cache manager (HMA) is on, and it is on for a
    sliding-window model, because the NIXL connectors support HMA, but off by default for chunked
    local attention (Llama 4)."""
    pull = first(wheel, files, r"NixlConnector \(pull\) does not support pipeline_parallel_size")
    if pull is None:
        return
    config = "vllm/config/vllm.py"
    chunked = wheel.find(config, r"Hybrid KV cache manager is not yet supported with chunked")
    connector = first(wheel, files, r"^class NixlBaseConnector\(.*SupportsHMA")
    if chunked is None or connector is None:
        raise ProbeError(f"{wheel.path.name}: PP + HMA refusal found, but not when HMA is on")
    facts.add("pp_kv_connector_hybrid_attention", {"sliding_window": False, "chunked_local_attention": True}, *pull,
              "The pull NixlConnector refuses pipeline_parallel_size > 1 when the KV cache is hybrid (a "
              "non-full-attention KV spec) and the hybrid KV cache manager is on. It is on for a sliding-window "
              f"model such as gpt-oss: the NIXL connectors support HMA ({connector[0]}:{connector[1]}), so a "
              "--kv-transfer-config does not turn it off. Chunked local attention (Llama 4) turns it off by "
              f"default ({config}:{chunked}, unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1), "
              "so such a prefill may run PP.")

def _vllm_expert_parallel(wheel: Wheel, facts: Facts) -> None:
    rel = "vllm/model_executor/layers/fused_moe/config.py"
    line = wheel.require(rel, r"^\s*ep_size = tp_size$")
    facts.add("ep_size", "tp_size x dp_size" + (" x pcp_size" if wheel.find(rel, r"pcp_size_ \* tp_size_") else ""),
              rel, line,
              "With --enable-expert-parallel the MoE layers flatten TP across DP (and PCP) and use that whole "
              "group as the expert-parallel group: ep_size is tp x dp, not a free degree.")


def _vllm_dp_rank_gpus(wheel: Wheel, facts: Facts) -> None:
    """Where a DP rank's pipeline stages sit: the rank order puts PP inside DP, and both launchers
    give a DP rank its own contiguous GPUs, so a rank's stages stay together on its node(s)."""
    state = "vllm/distributed/parallel_state.py"
    order = wheel.require(state, r"# the layout order is: ExternalDP x DP x PP")
    utils = "vllm/v1/engine/utils.py"
    indices = wheel.require(utils, r"^\s*local_dp_rank \* world_size,$")
    strict = wheel.require(utils, r'placement_strategy = "STRICT_PACK"')
    span = wheel.require(utils, r"assert world_size % max_device_per_node == 0")
    facts.add("dp_rank_gpus", "dp_outer_pp_inner", state, order,
              f"Ranks are laid out {wheel.line_text(state, order).split('is:')[1].strip()}: the ranks of "
              "one DP rank (its world_size: TP x PP, x PCP where the version has it) are consecutive and each PP stage's EP group takes the stage's ranks of every "
              f"DP rank. Multiprocessing gives local DP rank r the GPUs [r x world_size, ...) of its node "
              f"({utils}:{indices}); Ray gives each DP rank one placement group, STRICT_PACK on one node "
              f"({utils}:{strict}) or, with VLLM_RAY_DP_PACK_STRATEGY=span, whole nodes ({utils}:{span}). "
              "Either way a node holds whole DP ranks, all their PP stages together.")
    facts.add("dp_rank_node_packing", "whole_ranks_per_node", utils, strict,
              "Ray places each DP rank's world_size GPUs as one placement group: STRICT_PACK inside one node (a "
              f"node fits n_devices // world_size ranks, and too few fitting ranks is a start-up error), or with "
              f"VLLM_RAY_DP_PACK_STRATEGY=span over whole, homogeneous nodes ({utils}:{span}); the multiprocessing "
              "launcher runs --data-parallel-size-local whole ranks per node. A node's GPUs must be whole DP ranks.")


def _capability_check(wheel: Wheel, path: str, function: str) -> tuple[int, int]:
    """(x10 capability, line) of the ``has_device_capability(N)`` check in the two lines after ``function``."""
    line = wheel.require(path, function)
    body = " ".join(wheel.lines(path)[line - 1: line + 2])
    return int(re.search(r"has_device_capability\((\d+)\)", body).group(1)), line + 1


def _vllm_precision(wheel: Wheel, facts: Facts) -> None:
    cuda = "vllm/platforms/cuda.py"
    capability, line = _capability_check(wheel, cuda, r"def supports_fp8")
    facts.add("fp8_compute_min_capability", capability, cuda, line,
              "CudaPlatform.supports_fp8: FP8 compute (W8A8) needs this compute capability (x10).")
    fp8 = QUANT_DIR + "fp8.py"
    line = wheel.find(fp8, r"lack FP8 hardware support.*Marlin")
    if line is not None:
        facts.add("fp8_weight_only_below_min", True, fp8, line,
                  "Below that capability vLLM runs FP8 checkpoints weight-only through Marlin (W8A16): the "
                  "weights take FP8 memory but the math runs in BF16.")
    marlin = QUANT_DIR + "utils/marlin_utils_fp4.py"
    capability, line = _capability_check(wheel, marlin, r"def is_fp4_marlin_supported")
    facts.add("fp4_weight_only_min_capability", capability, marlin, line,
              "NVFP4 / MXFP4 weights run weight-only through Marlin (W4A16) from this capability; FP4 compute "
              "(W4A4) needs the CUTLASS FP4 kernels, whose capability check is compiled C++ "
              "(cutlass_scaled_mm_supports_fp4), not readable from the wheel's Python.")


def _vllm_online_quantization(wheel: Wheel, facts: Facts) -> None:
    """Which weight formats the engine quantizes 16-bit checkpoints to at load time, and with which flag."""
    config = "vllm/config/quantization.py"
    if wheel.exists(config) and wheel.find(config, r"^_ONLINE_SHORTHANDS") is not None:
        # 0.33: `--quantization fp8` refuses BF16 checkpoints; the online schemes are shorthands of their own.
        line = wheel.require(config, r'^    "fp8_per_tensor": QuantizationConfigArgs\(')
        facts.add("online_quantization_fp8", "fp8_per_tensor", config, line,
                  "--quantization fp8_per_tensor quantizes a BF16/FP16 checkpoint's linear and MoE weights to FP8 "
                  "(per-tensor scales) while loading: an FP8 plan needs no pre-quantized checkpoint.")
        line = wheel.require(config, r'^    "mxfp4": QuantizationConfigArgs\(')
        facts.add("online_quantization_mxfp4", "mxfp4", config, line,
                  "--quantization mxfp4 on a checkpoint without quantization metadata quantizes linear and MoE "
                  "weights to MXFP4 while loading (_DEFERRED_ONLINE_SHORTHANDS: online only when the checkpoint "
                  "carries no quantization config).")
        line = wheel.find(config, r'^    "nvfp4_per_token": QuantizationConfigArgs\(')
        if line is not None:
            facts.add("online_quantization_fp4_moe_only", "nvfp4_per_token", config, line,
                      "Online NVFP4 quantizes MoE expert weights only (linear layers stay BF16; Blackwell with "
                      "FlashInfer TRTLLM): not the all-FP4 weights layoutopt's fp4 precision means, so an fp4 "
                      "plan still needs an NVFP4 checkpoint.")
        fp8 = QUANT_DIR + "fp8.py"
        line = wheel.find(fp8, r"The `fp8` quantization method no longer supports online")
        if line is not None:
            facts.add("fp8_online_refused", True, fp8, line,
                      "--quantization fp8 on a BF16 checkpoint raises at start-up in this version: online FP8 "
                      "is written as --quantization fp8_per_tensor.")
        base = QUANT_DIR + "online/base.py"
        start = wheel.require(base, r"^class OnlineQuantizationConfig\(")
        line = wheel.require(base, r"def get_min_capability", after=start)
        returned = wheel.require(base, r"return \d+", after=line)
        facts.add("online_quantization_min_capability", int(re.search(r"return (\d+)", wheel.line_text(base, returned))
                  .group(1)), base, returned,
                  "OnlineQuantizationConfig.get_min_capability: the online schemes load from this compute "
                  "capability (x10); the kernels' own limits (FP8 compute from 8.9) still apply.")
        return
    fp8 = QUANT_DIR + "fp8.py"
    line = wheel.require(fp8, r"qweight, weight_scale = ops\.scaled_fp8_quant\(layer\.weight, scale=None\)")
    facts.add("online_quantization_fp8", "fp8", fp8, line,
              "Fp8LinearMethod.process_weights_after_loading quantizes the weights of a checkpoint that is not "
              "FP8-serialized: --quantization fp8 on a BF16 checkpoint is online FP8.")


def _vllm_model_kv_cache_dtype(wheel: Wheel, facts: Facts) -> None:
    """Architectures whose config hook turns an unset (auto) KV cache dtype into FP8 on a GPU family:
    a launch that planned a 16-bit KV cache has to say so."""
    rel = "vllm/model_executor/models/config.py"
    if not wheel.exists(rel):
        return
    lines = wheel.lines(rel)
    classes: dict[str, dict] = {}
    current = None
    for number, text in enumerate(lines, start=1):
        header = re.match(r"^class (\w+)\(", text)
        if header:
            current = {"name": header.group(1), "family": None, "auto": False}
            continue
        if current is None:
            continue
        family = re.search(r"is_device_capability_family\((\d+)\)", text)
        if family:
            current["family"] = int(family.group(1))
        if re.search(r'cache_config\.cache_dtype [!=]= "auto"', text):
            current["auto"] = True
        dtype = re.search(r'^\s*cache_config\.cache_dtype = "(fp8\w*)"', text)
        if dtype and current["family"] is not None and current["auto"]:
            classes.setdefault(current["name"], {"family": current["family"], "dtype": dtype.group(1),
                                                 "line": number})
    registry = module_assignment(wheel.tree(rel), "MODELS_CONFIG_MAP")
    if not isinstance(registry, ast.Dict):
        raise ProbeError(f"{wheel.path.name}: no MODELS_CONFIG_MAP dict in {rel}")
    value, first_line = {}, None
    for key, hook in zip(registry.keys, registry.values):
        if isinstance(key, ast.Constant) and isinstance(hook, ast.Name) and hook.id in classes:
            found = classes[hook.id]
            value[key.value] = {"compute_capability_major": found["family"] // 10, "dtype": found["dtype"]}
            first_line = found["line"] if first_line is None else min(first_line, found["line"])
    if value:
        facts.add("model_kv_cache_dtype_default", dict(sorted(value.items())), rel, first_line,
                  "These architectures' verify_and_update_config hooks replace --kv-cache-dtype auto with an FP8 "
                  "dtype on the GPU family given (compute capability major): a server meant to keep a 16-bit KV "
                  "cache there must pass --kv-cache-dtype bfloat16.")


def _vllm_model_architectures(wheel: Wheel, facts: Facts) -> None:
    """The text-generation and multimodal architectures of vLLM's model registry."""
    rel = "vllm/model_executor/models/registry.py"
    names: set[str] = set()
    line = None
    for table in ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS"):
        registered = module_assignment(wheel.tree(rel), table)
        if isinstance(registered, ast.Dict):
            names |= {k.value for k in registered.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            line = line or registered.lineno
    if line is None or len(names) < 50:
        raise ProbeError(f"{wheel.path.name}: the model registry's architectures not found in {rel}")
    facts.add("model_architectures", sorted(names), rel, line,
              f"The {len(names)} text-generation and multimodal architectures of this release's model registry "
              "(_TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS). A checkpoint of another architecture runs only "
              "through the Transformers backend, if at all; layoutopt plans neither.")
