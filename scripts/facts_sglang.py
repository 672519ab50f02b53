"""SGLang probes: the facts the engine rules read, each from the statement in the wheel that decides it."""

from __future__ import annotations

import ast
import re
from typing import Any

from engine_source import Facts, ProbeError, Wheel, module_assignment
from facts_common import first, flag_facts, quantization_methods, with_choices


def sglang_facts(wheel: Wheel, flags: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    facts = Facts(wheel)
    disagg = wheel.files_under("sglang/srt/disaggregation/")
    either = first(wheel, disagg, r"One attention TP size must divide the other")
    if either is None:
        either = first(wheel, disagg, r"elif self\.kv_mgr\.attn_tp_size > self\.prefill_attn_tp_size")
    if either is None:
        raise ProbeError(f"{wheel.path.name}: no P/D attention-TP mapping found")
    facts.add("pd_tp_rule", "either_divides", *either,
              "The KV receiver maps its attention-TP ranks onto the prefill's when either side is the larger "
              "(integer ratio of the two attention TP sizes): one must divide the other.")
    pp = first(wheel, disagg, r"assert self\.pp_size == info\.pp_size or self\.pp_size == 1")
    if pp is not None:
        facts.add("pd_pp_rule", "decode_equal_or_one", *pp,
                  "A decode server's PP size must equal the prefill server's or be 1.")
    else:
        ratio = first(wheel, disagg, r"self\.prefill_pp_size // self\.kv_mgr\.pp_size")
        if ratio is not None:
            facts.add("pd_pp_rule", "decode_divides_prefill", *ratio,
                      "A decode rank reads the KV of prefill_pp_size // decode pp_size prefill PP ranks: the "
                      "decode PP size must divide the prefill's.")
    dcp = first(wheel, disagg, r"Unsupported PD DCP topology")
    if dcp is not None:
        relayout = wheel.require(dcp[0], r"def requires_dcp_relayout")
        facts.add("pd_dcp_rule", "equal_or_mla_from_one", *dcp,
                  "When a decode registers with a prefill, the KV manager (requires_dcp_relayout, "
                  f"{dcp[0]}:{relayout}, called by the NIXL and Mooncake backends) accepts equal DCP sizes on both "
                  "sides, or a prefill DCP of 1 beside a decode DCP > 1 for an MLA model (the KV is re-laid out "
                  "per decode DCP rank); any other pair raises.")
    _sglang_pd_kv_cache_dtype(wheel, facts)
    _sglang_pd_page_size(wheel, facts)
    _sglang_page_size_resolution(wheel, facts)
    _sglang_chunk_pages(wheel, facts)
    _sglang_dcp_backends(wheel, facts)
    _sglang_model_architectures(wheel, facts)
    _sglang_required_attention_backend(wheel, facts)
    flag_facts(facts, flags, {
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
    state = "sglang/srt/distributed/parallel_state.py"
    line = wheel.find(state, r"if tensor_model_parallel_size % decode_context_parallel_size != 0")
    if line is not None:
        facts.add("dcp_divides_tp", "tp_size % dcp_size == 0", state, line,
                  "SGLang's decode context parallelism reuses the TP ranks: initialize_model_parallel splits each "
                  "TP group into DCP groups and raises unless --dcp-size divides --tp-size.")
    fp8 = "sglang/srt/layers/quantization/fp8.py"
    line = wheel.require(fp8, r"# If checkpoint not serialized fp8, quantize the weights\.")
    facts.add("online_quantization_fp8", "fp8", fp8, line,
              "Fp8LinearMethod.process_weights_after_loading quantizes the weights of a checkpoint that is not "
              "FP8-serialized: --quantization fp8 on a BF16 checkpoint is online FP8.")
    # The method table: the --quantization choices, with the minimum capability where a config class states it.
    return facts.items, with_choices(quantization_methods(wheel, "sglang/srt/layers/quantization/"), flags)


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


def _sglang_chunk_pages(wheel: Wheel, facts: Facts) -> None:
    """Attention DP divides --chunked-prefill-size over its ranks, and the start-up check then wants
    each rank's chunk in whole pages (except on a decode server)."""
    for check, split, pattern in (
            ("sglang/srt/arg_groups/validation_hook.py", "sglang/srt/arg_groups/parallel_hook.py",
             r"chunked_prefill_size=cfg\.chunked_prefill_size // cfg\.attn_dp_size"),           # 0.5.23
            ("sglang/srt/server_args.py", "sglang/srt/server_args.py",
             r"self\.chunked_prefill_size = self\.chunked_prefill_size // self\.dp_size")):     # 0.5.3
        if not wheel.exists(check):
            continue
        line = wheel.find(check, r"chunked_prefill_size must be divisible by page_size")
        divided = wheel.find(split, pattern)
        if line is not None and divided is not None:
            facts.add("chunked_prefill_page_multiple", "chunked_prefill_size // attention_dp % page_size == 0",
                      check, line,
                      "A prefill or colocated server checks at start-up that its chunked prefill size is a whole "
                      "number of KV pages (a decode server skips it), after attention DP has divided the size "
                      f"over its ranks ({split}:{divided}).")
            return


def _sglang_model_architectures(wheel: Wheel, facts: Facts) -> None:
    """The architectures SGLang implements: import_model_classes registers the EntryClass of every
    top-level module of sglang/srt/models (its class names are the config.json architectures)."""
    registry = "sglang/srt/models/registry.py"
    line = wheel.require(registry, r'if hasattr\(module, "EntryClass"\)')
    names: set[str] = set()
    for rel in wheel.files_under("sglang/srt/models/"):
        if rel.count("/") != 3 or not rel.endswith(".py"):
            continue
        entry = module_assignment(wheel.tree(rel), "EntryClass")
        values = entry.elts if isinstance(entry, (ast.List, ast.Tuple)) else [entry]
        names |= {v.id for v in values if isinstance(v, ast.Name)}
    if len(names) < 50:
        raise ProbeError(f"{wheel.path.name}: only {len(names)} EntryClass architectures found")
    facts.add("model_architectures", sorted(names), registry, line,
              f"The {len(names)} model architectures this release implements (the EntryClass of each module of "
              "sglang/srt/models, registered by name). A checkpoint of another architecture falls back to the "
              "Transformers backend, or stops at start-up; layoutopt plans neither.")


def _sglang_dcp_backends(wheel: Wheel, facts: Facts) -> None:
    """The attention backend a DCP server has to name where SGLang's default has no DCP path: the
    MHA/GQA merge of per-rank attention exists in the Triton backend only, and Hopper's default MLA
    backend (fa3) has none, where FlashInfer's MLA backend has."""
    attention = "sglang/srt/layers/attention/"
    if not wheel.exists("sglang/srt/layers/dcp/__init__.py"):
        return
    triton = wheel.find(attention + "triton_backend.py", r"o = cp_lse_ag_out_rs_mha\(o_for_decode")
    window = wheel.find(attention + "triton_backend.py", r"DCP Triton extend does not support sliding window")
    flashinfer_mla = wheel.find(attention + "flashinfer_mla_backend.py", r"update_local_kv_lens_for_dcp\(")
    defaults = "sglang/srt/arg_groups/model_override_base.py"
    hopper_mla = wheel.find(defaults, r"# MLA architecture")
    fa3_dcp = [n for n, text in enumerate(wheel.lines(attention + "flashattention_backend.py"), 1)
               if "dcp" in text and "dcp_kv_mask is not None" not in text]
    if None in (triton, window, flashinfer_mla, hopper_mla) or fa3_dcp:
        raise ProbeError(f"{wheel.path.name}: DCP found, but not the backends that run it as 0.5.23 has them")
    rel = attention + "triton_backend.py"
    facts.add("dcp_attention_backend", {"gqa": "triton", "mla_sm90": "flashinfer"}, rel, triton,
              "Decode context parallelism needs a backend that attends over the rank's KV shard and merges the "
              "ranks' outputs by LSE. For MHA/GQA only the Triton backend does (this line; Hopper's default fa3, "
              "SM100's trtllm_mha and flashinfer have no DCP path). For MLA, Hopper's default is fa3 "
              f"({defaults}:{hopper_mla}), which has none, while FlashInfer's MLA backend has "
              f"({attention}flashinfer_mla_backend.py:{flashinfer_mla}); SM100's trtllm_mla / flashinfer "
              f"defaults and the DSA backend have their own. The Triton DCP prefill refuses sliding-window "
              f"layers ({rel}:{window}).")


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
