"""Probes that read the facts layoutopt's engine rules depend on out of one wheel's sources.

Each probe looks for the statement that decides a fact (an assertion, a class attribute, an
environment default) and records the value it implies with the file and line. A probe that
finds none of the statements it knows raises ``ProbeError``: the engine changed and a developer
must read the new source before the data is refreshed. Facts that exist only in some versions
(a check added later) are recorded only where their statement is found.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from engine_source import Facts, ProbeError, Wheel, class_attribute, method_return

KV_UTILS = "vllm/distributed/kv_transfer/kv_connector/utils.py"
ATTENTION_DIRS = ("vllm/v1/attention/", "vllm/attention/")
QUANT_DIR = "vllm/model_executor/layers/quantization/"


def _first(wheel: Wheel, files: list[str], pattern: str) -> tuple[str, int] | None:
    for rel in files:
        line = wheel.find(rel, pattern)
        if line is not None:
            return rel, line
    return None


# ----------------------------------------------------------------------------------------------
# vLLM

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
    _flag_facts(facts, flags, {
        "multi_node_dp_flags": ["--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
                                "--data-parallel-start-rank", "--headless"],
        "multi_node_pp_flags": ["--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr",
                                "--master-port"],
    })
    return facts.items, _with_choices(vllm_quantization(wheel), flags)


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
        assert_at = _first(wheel, wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/"),
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
        found = _first(wheel, files, pattern)
        if found is None:
            return
        facts.add(name, value, *found, note)


def _vllm_pd_attention_backend(wheel: Wheel, facts: Facts) -> None:
    """The NIXL handshake hashes the attention backend's name; the backend follows the GPU's generation."""
    files = wheel.files_under("vllm/distributed/kv_transfer/kv_connector/v1/")
    hashed = _first(wheel, files, r'"attn_backend_name": attn_backend_name')
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
    consumer = _first(wheel, files, r"consumer \(decode\) does not support")
    if consumer is not None:
        facts.add("pp_kv_connector", {"prefill": True, "decode": False}, *consumer,
                  "NIXL: a prefill (kv_producer) instance may run pipeline_parallel_size > 1 (it writes its "
                  "layer slice into a PP=1 decode); a decode (kv_consumer) instance may not. Hybrid (HMA) KV "
                  "layouts need NixlPushConnector for PP.")
        mamba = _first(wheel, files, r"does not support pipeline_parallel_size > 1\s*\"?$|with Mamba/SSM hybrid")
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
    pull = _first(wheel, files, r"NixlConnector \(pull\) does not support pipeline_parallel_size")
    if pull is None:
        return
    config = "vllm/config/vllm.py"
    chunked = wheel.find(config, r"Hybrid KV cache manager is not yet supported with chunked")
    connector = _first(wheel, files, r"^class NixlBaseConnector\(.*SupportsHMA")
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


def vllm_quantization(wheel: Wheel, directory: str = QUANT_DIR) -> list[dict[str, Any]]:
    """Every QuantizationConfig class with its method name and minimum compute capability."""
    rows = []
    for rel in wheel.files_under(directory):
        for node in ast.walk(wheel.tree(rel)):
            if not isinstance(node, ast.ClassDef):
                continue
            name = method_return(node, "get_name")
            capability = method_return(node, "get_min_capability")
            if name is None or capability is None or not isinstance(name[0], str):
                continue
            rows.append({"method": name[0], "min_capability": int(capability[0]),
                         "source": {"file": rel, "line": capability[1]}})
    return sorted({r["method"]: r for r in rows}.values(), key=lambda r: r["method"])


# ----------------------------------------------------------------------------------------------
# SGLang

def sglang_facts(wheel: Wheel, flags: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    facts = Facts(wheel)
    disagg = wheel.files_under("sglang/srt/disaggregation/")
    either = _first(wheel, disagg, r"One attention TP size must divide the other")
    if either is None:
        either = _first(wheel, disagg, r"elif self\.kv_mgr\.attn_tp_size > self\.prefill_attn_tp_size")
    if either is None:
        raise ProbeError(f"{wheel.path.name}: no P/D attention-TP mapping found")
    facts.add("pd_tp_rule", "either_divides", *either,
              "The KV receiver maps its attention-TP ranks onto the prefill's when either side is the larger "
              "(integer ratio of the two attention TP sizes): one must divide the other.")
    pp = _first(wheel, disagg, r"assert self\.pp_size == info\.pp_size or self\.pp_size == 1")
    if pp is not None:
        facts.add("pd_pp_rule", "decode_equal_or_one", *pp,
                  "A decode server's PP size must equal the prefill server's or be 1.")
    else:
        ratio = _first(wheel, disagg, r"self\.prefill_pp_size // self\.kv_mgr\.pp_size")
        if ratio is not None:
            facts.add("pd_pp_rule", "decode_divides_prefill", *ratio,
                      "A decode rank reads the KV of prefill_pp_size // decode pp_size prefill PP ranks: the "
                      "decode PP size must divide the prefill's.")
    _sglang_pd_kv_cache_dtype(wheel, facts)
    _sglang_pd_page_size(wheel, facts)
    _sglang_page_size_resolution(wheel, facts)
    _sglang_required_attention_backend(wheel, facts)
    _flag_facts(facts, flags, {
        "disaggregation_flags": ["--disaggregation-mode", "--disaggregation-bootstrap-port",
                                 "--disaggregation-transfer-backend"],
        "multi_node_flags": ["--nnodes", "--node-rank", "--dist-init-addr"],
        "attention_dp_flags": [f for f in ("--attn-dp-size", "--enable-dp-attention", "--dp-size")
                               if any(x["name"] == f for x in flags)],
        "expert_parallel_flags": ["--ep-size", "--moe-a2a-backend"],
        "decode_context_parallel_flags": [f for f in ("--dcp-size",) if any(x["name"] == f for x in flags)],
    })
    host = next(f for f in flags if f["name"] == "--host")
    facts.items["host_default"] = {"value": host["default"], "source": host["source"], "quote": "--host",
                                   "note": "SGLang binds this address unless --host is given; pods need 0.0.0.0."}
    server_args = "sglang/srt/server_args.py"
    line = wheel.find(server_args, r"assert self\.tp_size % self\.dp_size == 0")
    if line is not None:
        facts.add("dp_attention_tp_divisible", "tp_size % dp_size == 0", server_args, line,
                  "With --enable-dp-attention the DP ranks split the --tp-size GPUs: tp_size % dp_size == 0.")
    world = "sglang/srt/runtime_context.py"
    line = wheel.exists(world) and wheel.find(world, r"return cfg\.ep_join_rank_offset \+ cfg\.tp_size \* cfg\.pp_size")
    if line:
        facts.add("world_size", "tp_size x pp_size", world, line,
                  "SGLang's world is --tp-size x --pp-size GPUs: attention DP (--attn-dp-size), attention CP "
                  "(--attn-cp-size) and expert parallelism (--ep-size) split the --tp-size group instead of "
                  "adding GPUs (derive_parallel_widths: attn_tp = tp / (cp x dp), moe_tp = tp / ep / moe_dp).")
    _sglang_node_ranks(wheel, facts)
    hook = "sglang/srt/arg_groups/attention_hook.py"
    if wheel.exists(hook):
        line = wheel.find(hook, r"--dcp-size \{dcp_size\} must divide --tp-size")
        if line is not None:
            facts.add("dcp_divides_tp", "tp_size % dcp_size == 0", hook, line,
                      "SGLang's decode context parallelism reuses the TP ranks: --dcp-size must divide --tp-size.")
    fp8 = "sglang/srt/layers/quantization/fp8.py"
    line = wheel.require(fp8, r"# If checkpoint not serialized fp8, quantize the weights\.")
    facts.add("online_quantization_fp8", "fp8", fp8, line,
              "Fp8LinearMethod.process_weights_after_loading quantizes the weights of a checkpoint that is not "
              "FP8-serialized: --quantization fp8 on a BF16 checkpoint is online FP8.")
    # The method table: the --quantization choices, with the minimum capability where a config class states it.
    capabilities = {r["method"]: r for r in vllm_quantization(wheel, "sglang/srt/layers/quantization/")}
    quantization = [capabilities.get(m) or {"method": m, "min_capability": None,
                                            "source": _flag_source(flags, "--quantization")}
                    for m in _choices(flags, "--quantization")]
    return facts.items, quantization


def _sglang_pd_kv_cache_dtype(wheel: Wheel, facts: Facts) -> None:
    """The NIXL backend (the one emitted) copies prefill KV slots into decode slots of the decode's
    own stride: the bytes per token, and so the KV cache dtype, must match."""
    conn = "sglang/srt/disaggregation/nixl/conn.py"
    statements = (  # 0.5.23, then 0.5.3: the first found is the release's
        (r"if xfer_len > item_len:",
         "SGLang's NIXL transfer writes each prefill KV slot (xfer_len bytes) into the decode's slots (item_len "
         "apart): a larger prefill slot raises 'NIXL prepared dlist transfer length exceeds item stride', a smaller "
         "one lands FP8 bytes in BF16 slots. Prefill and decode must keep one KV cache dtype (--kv-cache-dtype)."),
        (r"dst_addr = dst_ptr \+ int\(decode_index\[0\]\) \* item_len",
         "SGLang's NIXL transfer addresses the decode's KV buffer with the prefill's item length (dst_ptr + "
         "decode_index * item_len): prefill and decode must keep one KV cache dtype (--kv-cache-dtype), or the KV "
         "lands in the wrong slots."),
    )
    for pattern, note in statements:
        line = wheel.find(conn, pattern)
        if line is not None:
            facts.add("pd_kv_cache_dtype", "equal", conn, line, note)
            return


def _sglang_pd_page_size(wheel: Wheel, facts: Facts) -> None:
    """The NIXL transfer reads the decode's bytes per token with the prefill's page size, and the page
    size follows the default attention backend, which follows the GPU generation."""
    conn = "sglang/srt/disaggregation/nixl/conn.py"
    for pattern in (r"assert page_size \* bytes_per_token_dst == dst_kv_item_len",  # 0.5.23
                    r"bytes_per_token_on_decode = dst_kv_item_len // page_size"):  # 0.5.3
        line = wheel.find(conn, pattern)
        if line is not None:
            facts.add("pd_attention_backend", "same_gpu_generation", conn, line,
                      "SGLang's NIXL transfer divides the decode's KV slot by the prefill's page size "
                      "(self.kv_args.page_size), so both sides must page KV alike. The page size follows the "
                      "default attention backend, chosen by GPU: fa3 on Hopper, trtllm_mha / trtllm_mla on "
                      "Blackwell sm100, which need pages of 16-128 tokens and default to 64 "
                      "(arg_groups/model_override_base.py get_default_attn_backend, arg_groups/overrides.py "
                      "_mla_backend_page_constraints; 0.5.3 server_args.py). So prefill and decode run on the "
                      "same vendor and compute capability major (AMD: the same GPU model).")
            return


SGLANG_OVERRIDES = "sglang/srt/arg_groups/overrides.py"
SGLANG_SERVER_ARGS = "sglang/srt/server_args.py"
SGLANG_MODEL_OVERRIDES = "sglang/srt/arg_groups/model_overrides/"


def _int_in(wheel: Wheel, rel: str, line: int, pattern: str) -> int:
    return int(re.search(pattern, wheel.line_text(rel, line)).group(1))


def _registered_architectures(wheel: Wheel, rel: str, line: int) -> list[str]:
    """The architectures of the ``@_register_for(...)`` provider whose body holds ``line``."""
    for node in ast.walk(wheel.tree(rel)):
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (node.end_lineno or node.lineno):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "_register_for":
                    return [a.value for a in decorator.args if isinstance(a, ast.Constant)]
    raise ProbeError(f"{wheel.path.name}: {rel}:{line} is not inside a _register_for provider")


def _string_constants(wheel: Wheel, rel: str, function: str) -> list[str]:
    """The architecture names (``...For...``) a predicate such as ``is_deepseek_dsa`` compares against."""
    for node in ast.walk(wheel.tree(rel)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and "For" in c.value]
    raise ProbeError(f"{wheel.path.name}: no {function} in {rel}")


def _sglang_required_attention_backend(wheel: Wheel, facts: Facts) -> None:
    """Model families a release starts only with an explicit ``--attention-backend`` from a list:
    0.5.3 asserts one for Llama 4 before choosing any default (server_args.py
    _handle_model_specific_adjustments); 0.5.23 picks one itself (arg_groups/model_overrides/llama4.py)
    and states none."""
    rel = "sglang/srt/server_args.py"
    if not wheel.exists(rel):
        return
    line = wheel.find(rel, r'^\s*\}, "[\w, ]+ is required for Llama4 model"$')
    if line is None:
        return
    backends = re.findall(r"\w+", wheel.line_text(rel, line).split('"')[1].split(" is required")[0].replace(" or ", " "))
    facts.add("required_attention_backend", {"Llama4": backends}, rel, line,
              f"A Llama 4 server asserts --attention-backend in {{{', '.join(backends)}}} before any default is "
              "chosen (the default stays None until the model runner picks one), so its launch must name one.")


def _sglang_page_size_resolution(wheel: Wheel, facts: Facts) -> None:
    """How SGLang resolves ``--page-size`` when it is not given, so that emit can pass the value the
    engine would pick on both sides of a P/D pair: the default, the default attention backend of a
    Blackwell (SM100) GPU and the page sizes those backends accept, and the model overrides that set
    the backend or the page size themselves."""
    new = wheel.exists(SGLANG_OVERRIDES) and wheel.find(SGLANG_OVERRIDES, r"^def _page_size_default\(") is not None
    if new:  # 0.5.23: declarative resolution passes (arg_groups/)
        rel = SGLANG_OVERRIDES
        start = wheel.require(rel, r"^def _page_size_default\(")
        line = wheel.require(rel, r'return \{"page_size": \d+\}', after=wheel.require(
            rel, r"if not get_platform\(\)\.is_musa:", after=start))
        facts.add("page_size_default", _int_in(wheel, rel, line, r'"page_size": (\d+)'), rel, line,
                  "_page_size_default: without --page-size (and no backend or model override setting one) a CUDA or "
                  "ROCm server pages its KV cache by this many tokens; an explicit --page-size is kept "
                  "(the pass returns nothing when page_size is set).")
        constraints, snap_pattern, check_pattern = "_mla_backend_page_constraints", r"page_size = (\d+)$", \
            r"if page_size not in (\[[\d, ]+\]):"
    else:  # 0.5.3: ServerArgs.__post_init__
        rel = SGLANG_SERVER_ARGS
        start = wheel.require(rel, r"def _handle_page_size\(self\)")
        line = wheel.require(rel, r"self\.page_size = \d+$", after=start)
        facts.add("page_size_default", _int_in(wheel, rel, line, r"= (\d+)"), rel, line,
                  "_handle_page_size: without --page-size the server pages its KV cache by this many tokens; it runs "
                  "in ServerArgs.__post_init__ after _handle_attention_backend_compatibility and before the model "
                  "runner picks a default attention backend, which then no longer changes the page size.")
        constraints, snap_pattern, check_pattern = "def _handle_attention_backend_compatibility", \
            r"self\.page_size = (\d+)$", r"if self\.page_size not in (\[[\d, ]+\]):"
    start = wheel.require(rel, rf"{constraints}")
    for backend in ("trtllm_mha", "trtllm_mla"):
        named = wheel.require(rel, rf'attention_backend == "{backend}"', after=start)
        check = wheel.require(rel, check_pattern, after=named)
        snap = wheel.require(rel, snap_pattern, after=check)
        accepts = ast.literal_eval(re.search(check_pattern, wheel.line_text(rel, check)).group(1))
        facts.add(f"page_size_{backend}", {"accepts": accepts, "otherwise": _int_in(wheel, rel, snap, snap_pattern)},
                  rel, check,
                  f"The {backend} attention backend keeps a page size it accepts (an explicit --page-size "
                  f"among them is kept) and replaces any other, the unset default included, with the 'otherwise' "
                  f"value (line {snap}).")
    if new:
        rel = SGLANG_OVERRIDES
        start = wheel.require(rel, r"^def _fa4_page_constraint\(")
        line = wheel.require(rel, r'return \{"page_size": 128\}', after=start)
        facts.add("page_size_fa4", {"accepts": [128], "otherwise": 128}, rel, line,
                  "_fa4_page_constraint: on SM100 the fa4 backend of a non-MLA model (chosen for K/V of unequal "
                  "widths) runs pages of 128 tokens whatever --page-size says.")
        rel = "sglang/srt/arg_groups/model_override_base.py"
        start = wheel.require(rel, r"^def get_default_attn_backend\(")
        asymmetric = wheel.require(rel, r"if model_config\.has_asymmetric_kv:", after=start)
        gqa = wheel.require(rel, r'^\s*return "\w+"$', after=asymmetric + 1)
        mla = wheel.require(rel, r'^\s*return "\w+"$', after=wheel.require(
            rel, r"elif get_platform\(\)\.is_sm100:", after=wheel.require(rel, r"# MLA architecture", after=start)))
        word = r'"(\w+)"'
        facts.add("sm100_attention_backend", {
            "gqa": re.search(word, wheel.line_text(rel, gqa)).group(1),
            "gqa_asymmetric_kv": re.search(word, wheel.line_text(rel, asymmetric + 1)).group(1),
            "mla": re.search(word, wheel.line_text(rel, mla)).group(1)}, rel, gqa,
            f"get_default_attn_backend on an SM100 GPU (compute capability 10.x; is_sm100 reads the major) without "
            f"speculative decoding: MHA/GQA models get this backend (K/V of unequal widths: gqa_asymmetric_kv, "
            f"line {asymmetric + 1}), MLA models the 'mla' one (line {mla}). Other NVIDIA GPUs get fa3 (Hopper), "
            "flashinfer or triton, and ROCm aiter or triton: backends without a page-size constraint, so those "
            "run page_size_default.")
        overrides: dict[str, str] = {}
        lines = []
        for name, pattern in (("deepseek_v2.py", r'overrides\["attention_backend"\] = "(trtllm_mla)"'),
                              ("gpt_oss.py", r'overrides\["attention_backend"\] = "(trtllm_mha)"'),
                              ("llama4.py", r'backend, platform = "(trtllm_mha)", "sm100"'),
                              ("qwen3_5.py", r'sm100_default_attn_backend = "(trtllm_mha)"')):
            rel = SGLANG_MODEL_OVERRIDES + name
            line = wheel.require(rel, pattern)
            backend = re.search(pattern, wheel.line_text(rel, line)).group(1)
            overrides.update({arch: backend for arch in _registered_architectures(wheel, rel, line)})
            lines.append((rel, line, backend))
        first = lines[0]
        facts.add("sm100_model_attention_backend", dict(sorted(overrides.items())), first[0], first[1],
                  "Model overrides that pick the SM100 backend themselves when --attention-backend is unset (the "
                  "model override runs before the default backend and the page-size passes): "
                  + "; ".join(f"{b} at {r}:{n}" for r, n, b in lines) + ". DeepSeek-family DSA models take "
                  "page_size_dsa instead; Qwen3.5 hybrids get trtllm_mha with pages of 64 where the radix cache is "
                  "off (a decode server) or keeps extra mamba buffers, which an explicit --page-size > 1 selects on a "
                  "prefill server (overrides.py _mamba_radix_cache_resolution), else triton with pages of 1.")
        rel = SGLANG_MODEL_OVERRIDES + "deepseek_v2.py"
        line = wheel.require(rel, r"page_size = 64 \* index_kpool")
        facts.add("page_size_dsa", {"page_size": _int_in(wheel, rel, line, r"= (\d+) \*"),
                                    "architectures": _string_constants(wheel, "sglang/srt/configs/model_config.py",
                                                                       "is_deepseek_dsa"),
                                    "rocm": None}, rel, line,
                  "DeepSeek sparse attention (DSA) models set the page size themselves, whatever --page-size says: "
                  "64 x index_kpool (index_kpool defaults to 1) on CUDA; on ROCm 1 or 64 depending on the aiter "
                  "kernels found at start-up (rocm: null, decided on the host).")
        rel = "sglang/srt/disaggregation/common/conn.py"
        line = wheel.find(rel, r"if info\.page_size is not None and info\.page_size != self\.kv_args\.page_size:")
        if line is not None:
            facts.add("pd_page_size_check", "equal", rel, line,
                      "The decode server refuses a prefill server of another page size when it first fetches the "
                      "prefill's bootstrap info ('Page size mismatch ... Both servers must use the same --page-size "
                      "value').")
        return
    rel = "sglang/srt/model_executor/model_runner.py"
    start = wheel.require(rel, r"if server_args\.attention_backend is None:")
    gqa = wheel.require(rel, r'"flashinfer" if is_flashinfer_available\(\) else "triton"', after=start)
    mla = wheel.require(rel, r'server_args\.attention_backend = "\w+"', after=wheel.require(
        rel, r"elif is_sm100_supported\(\):", after=wheel.require(rel, r"# MLA architecture", after=start)))
    facts.add("sm100_attention_backend", {"gqa": "flashinfer",
                                          "mla": re.search(r'"(\w+)"', wheel.line_text(rel, mla)).group(1)},
              rel, gqa,
              f"ModelRunner picks the default attention backend after ServerArgs resolved the page size: on SM100 "
              f"flashinfer for MHA/GQA (triton without FlashInfer) and the 'mla' one for MLA (line {mla}); Hopper "
              "gets fa3, others flashinfer or triton, ROCm aiter or triton. None of these changes the page size.")
    rel = SGLANG_SERVER_ARGS
    line = wheel.require(rel, r'self\.attention_backend = "trtllm_mha"')
    arch_line = next(n for n in range(line, 0, -1) if re.search(r"if model_arch in \[", wheel.line_text(rel, n)))
    archs = ast.literal_eval(re.search(r"(\[.*\])", wheel.line_text(rel, arch_line)).group(1))
    facts.add("sm100_model_attention_backend", {a: "trtllm_mha" for a in archs}, rel, line,
              f"_handle_model_specific_adjustments (line {arch_line}) gives these models trtllm_mha on SM100 when "
              "--attention-backend is unset, before _handle_attention_backend_compatibility applies its page sizes.")
    line = wheel.require(rel, r"self\.page_size = 64$", after=wheel.require(rel, r"if is_deepseek_nsa\(hf_config\):"))
    facts.add("page_size_dsa", {"page_size": 64, "architectures": _string_constants(
        wheel, "sglang/srt/configs/model_config.py", "is_deepseek_nsa"), "rocm": 64}, rel, line,
        "DeepSeek sparse attention (NSA) models with index_topk set the page size to 64 themselves, whatever "
        "--page-size says (every platform but NPU).")


def _sglang_node_ranks(wheel: Wheel, facts: Facts) -> None:
    """How a server spreads over ``--nnodes``: PP ranks outermost, each on nnodes / pp whole nodes."""
    engine = "sglang/srt/entrypoints/engine.py"
    line = wheel.find(engine, r"nnodes_per_pp_rank = max\(nnodes // parallel\.pp_size, 1\)")
    if line is None:
        line = wheel.require(engine, r"nnodes_per_tp_group = max\(server_args\.nnodes // server_args\.pp_size, 1\)")
    facts.add("node_rank_layout", "pp_outer", engine, line,
              "_calculate_rank_ranges: with nnodes_per_pp_rank = nnodes // pp_size, node n runs PP rank "
              "n // nnodes_per_pp_rank (or pp_size // nnodes consecutive PP ranks when pp_size >= nnodes) and its "
              "share of that stage's --tp-size ranks: one pipeline stage spreads over nnodes / pp whole nodes, or a node holds pp / nnodes "
              "whole stages, so a stage's attention-DP and EP ranks share only that stage's nodes.")
    for rel, pattern in (("sglang/srt/arg_groups/validation_hook.py", r"assert \(cfg\.tp_size \* cfg\.pp_size\) % cfg\.nnodes == 0"),
                         ("sglang/srt/server_args.py", r"\) % self\.nnodes == 0, \"tp_size must be divisible")):
        found = wheel.exists(rel) and wheel.find(rel, pattern)
        if found:
            facts.add("nnodes_divides_world", "(tp_size x pp_size) % nnodes == 0", rel, found,
                      "check_server_args refuses a --tp-size x --pp-size world that the nodes do not split evenly.")
            return
    raise ProbeError(f"{wheel.path.name}: no (tp_size * pp_size) % nnodes check found")


# ----------------------------------------------------------------------------------------------

def _flag_source(flags: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(f["source"] for f in flags if f["name"] == name)


def _choices(flags: list[dict[str, Any]], name: str) -> list[str]:
    return list(next(f for f in flags if f["name"] == name)["choices"] or [])


def _flag_facts(facts: Facts, flags: list[dict[str, Any]], groups: dict[str, list[str]]) -> None:
    """Record which of a group's flags this version has (each flag's own line is in the flag table)."""
    names = {f["name"]: f for f in flags}
    for alias_owner in flags:
        for alias in alias_owner["aliases"]:
            names.setdefault(alias, alias_owner)
    for key, wanted in groups.items():
        present = [w for w in wanted if w in names]
        if not present:
            continue
        source = names[present[0]]["source"]
        facts.add(key, present, source["file"], source["line"],
                  "Flags of this group the version accepts (missing: "
                  + (", ".join(w for w in wanted if w not in names) or "none") + ").")


def _with_choices(rows: list[dict[str, Any]], flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per --quantization choice: the config class's minimum capability where it has one."""
    by_method = {r["method"]: r for r in rows}
    source = _flag_source(flags, "--quantization")
    return [by_method.get(m) or {"method": m, "min_capability": None, "source": source}
            for m in _choices(flags, "--quantization")]
