"""Engine rules between a prefill and a decode pool of one plan: KV goes from one to the other.

``check_pair`` returns one ``RuleViolation`` per rule the pair breaks, with the engine source line
the rule comes from; ``pair_rule_key`` is everything it reads of one side, so the search checks
each pair of keys once. The rules, and the facts of ``data/<engine>-<version>.yaml`` each reads:

- ``pd_tp_divisibility`` (``pd_tp_rule``): prefill and decode pools exchange KV between TP ranks;
  vLLM 0.13 needs the decode TP to be a multiple of the prefill TP, vLLM 0.33 and SGLang need one
  TP to divide the other.
- ``pd_pp_mismatch`` (``pd_pp_rule``, SGLang): a decode pool's PP equals the prefill pool's or is 1
  (0.5.23), or divides it (0.5.3).
- ``pd_kv_cache_dtype`` (``pd_kv_cache_dtype``): one KV cache dtype on both sides (vLLM's NIXL
  handshake hashes it; SGLang's NIXL transfer writes prefill slots at the decode's stride).
- ``pd_attention_backend`` (``pd_attention_backend``): both sides on one GPU vendor and generation
  (vLLM hashes the default attention backend's name; SGLang pages KV by the backend's page size).
- ``pd_checkpoint`` (``pd_checkpoint``, vLLM): both sides load one checkpoint (the handshake hashes
  the model path).
- ``pd_dcp_mismatch`` (``pd_dcp_rule``, SGLang 0.5.23): equal DCP sizes on both sides, or a prefill
  DCP of 1 beside a decode DCP > 1 for an MLA model (its KV is re-laid out per decode DCP rank).
- ``pd_context_parallel`` (``pd_context_parallel``, vLLM 0.33): a side with PCP > 1 and DCP 1 (KV
  replicated over its PCP ranks) cannot pair with a peer with DCP > 1 (KV sharded).
"""

from __future__ import annotations

from layoutopt.engines.loader import load_engine_data
from layoutopt.engines.quantization import weight_source
from layoutopt.engines.ref import EngineRef, parse_engine_ref
from layoutopt.engines.schema import EngineData
from layoutopt.engines.violations import RuleChecker, RuleViolation
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.plan import Layout


def check_pair(engine: "str | EngineRef", model: ModelSpec, prefill_layout: Layout,
               decode_layout: Layout, prefill_gpu: GpuSpec | None = None,
               decode_gpu: GpuSpec | None = None) -> list[RuleViolation]:
    """The rules between a prefill and a decode pool of one plan (KV goes from one to the other);
    the GPU rules apply when both GPUs are given. The same violations, in the same order, as
    ``check_pair_layouts`` followed by ``check_pair_gpus``."""
    check = _checker(engine)
    if check is None:
        return []
    layout_pair_rules(check, model, prefill_layout, decode_layout)
    if prefill_gpu is not None and decode_gpu is not None:
        _gpu_side_rules(check, model, prefill_layout, decode_layout, prefill_gpu, decode_gpu)
    return check.found


def check_pair_layouts(engine: "str | EngineRef", model: ModelSpec, prefill_layout: Layout,
                       decode_layout: Layout) -> list[RuleViolation]:
    """The pair rules that read the two layouts alone (TP, PP, KV cache dtype, context parallelism):
    they read nothing of a side but its ``pair_layout_key``."""
    return check_pair(engine, model, prefill_layout, decode_layout)


def check_pair_gpus(engine: "str | EngineRef", model: ModelSpec, prefill_layout: Layout, decode_layout: Layout,
                    prefill_gpu: GpuSpec, decode_gpu: GpuSpec) -> list[RuleViolation]:
    """The other pair rules: the GPUs' attention-backend families and the checkpoint each side's
    weight precision loads on its GPU; of a layout they read its weight precision alone."""
    check = _checker(engine)
    if check is None:
        return []
    _gpu_side_rules(check, model, prefill_layout, decode_layout, prefill_gpu, decode_gpu)
    return check.found


def _checker(engine: "str | EngineRef") -> RuleChecker | None:
    ref = parse_engine_ref(engine)
    if not ref.has_data:
        return None
    return RuleChecker(ref, load_engine_data(ref.name, ref.version))


def _gpu_side_rules(check: RuleChecker, model: ModelSpec, prefill_layout: Layout, decode_layout: Layout,
                    prefill_gpu: GpuSpec, decode_gpu: GpuSpec) -> None:
    _pair_gpu_rules(check, prefill_gpu, decode_gpu)
    _pair_checkpoint_rule(check, model, prefill_layout, decode_layout, prefill_gpu, decode_gpu)


PairKey = tuple[int, int, str, str, tuple[str, str], bool, int]


def pair_rule_key(layout: Layout, gpu: GpuSpec) -> PairKey:
    """Everything ``check_pair`` reads of one side: TP and PP (the KV handshake maps TP and PP ranks),
    the KV cache precision, the weight precision (which checkpoint is served), the GPU's
    attention-backend family (the handshake hashes these), whether its KV is replicated over PCP
    ranks, and over how many DCP ranks it is sharded. Two instances with one key pair with the same partners."""
    return (layout.tp_size, layout.pp_size, layout.kv_precision, layout.weight_precision,
            attention_backend_family(gpu), _replicated_pcp(layout), layout.dcp_size)


def pair_layout_key(layout: Layout) -> tuple[int, int, str, bool, int]:
    """Everything ``check_pair_layouts`` reads of one side (``pair_rule_key`` without the weight
    precision and the GPU)."""
    return layout.tp_size, layout.pp_size, layout.kv_precision, _replicated_pcp(layout), layout.dcp_size


def _replicated_pcp(layout: Layout) -> bool:
    """PCP without DCP: every PCP rank holds the whole KV of its sequences."""
    return layout.pcp_size > 1 and layout.dcp_size == 1


def attention_backend_family(gpu: GpuSpec) -> tuple[str, str]:
    """What the engine's default attention backend choice reads of a GPU: NVIDIA's compute
    capability major (vllm/platforms/cuda.py chooses by it), else the GPU model itself."""
    if gpu.cuda_major is not None:
        return gpu.vendor, f"sm{gpu.cuda_major}x"
    return gpu.vendor, gpu.name


def layout_pair_rules(check: RuleChecker, model: ModelSpec, prefill: Layout, decode: Layout) -> None:
    fact = check.fact("pd_tp_rule")
    if fact is not None:
        p, d = prefill.tp_size, decode.tp_size
        if fact.value == "decode_multiple_of_prefill" and d % p:
            check.add("pd_tp_divisibility", f"decode TP {d} must be a multiple of prefill TP {p} for the KV handshake",
                      fact.source, prefill_tp=p, decode_tp=d)
        elif fact.value == "either_divides" and max(p, d) % min(p, d):
            check.add("pd_tp_divisibility", f"prefill TP {p} and decode TP {d}: one must divide the other",
                      fact.source, prefill_tp=p, decode_tp=d)
    fact = check.fact("pd_kv_cache_dtype")
    if fact is not None and fact.value == "equal" and prefill.kv_precision != decode.kv_precision:
        check.add("pd_kv_cache_dtype", f"prefill KV cache {prefill.kv_precision} and decode KV cache "
                  f"{decode.kv_precision}: the NIXL KV transfer needs one KV cache dtype on both sides", fact.source,
                  prefill_kv=prefill.kv_precision, decode_kv=decode.kv_precision)
    fact = check.fact("pd_pp_rule")
    if fact is not None and fact.value == "decode_equal_or_one" and decode.pp_size not in (1, prefill.pp_size):
        check.add("pd_pp_mismatch", f"decode PP {decode.pp_size} must equal prefill PP {prefill.pp_size} or be 1",
                  fact.source, prefill_pp=prefill.pp_size, decode_pp=decode.pp_size)
    elif fact is not None and fact.value == "decode_divides_prefill" and prefill.pp_size % decode.pp_size:
        check.add("pd_pp_mismatch", f"decode PP {decode.pp_size} must divide prefill PP {prefill.pp_size}",
                  fact.source, prefill_pp=prefill.pp_size, decode_pp=decode.pp_size)
    fact = check.fact("pd_dcp_rule")
    if (fact is not None and fact.value == "equal_or_mla_from_one" and prefill.dcp_size != decode.dcp_size
            and not (prefill.dcp_size == 1 and model.attention_kind == "mla")):
        why = (f"{model.name} uses {model.attention_kind.upper()}, and only MLA KV is re-laid out from a prefill "
               "DCP of 1" if prefill.dcp_size == 1 else "they must be equal, or the prefill's 1 with an MLA model")
        check.add("pd_dcp_mismatch", f"prefill DCP {prefill.dcp_size} and decode DCP {decode.dcp_size}: {why}",
                  fact.source, prefill_dcp=prefill.dcp_size, decode_dcp=decode.dcp_size)
    fact = check.fact("pd_context_parallel")
    if fact is not None and fact.value == "no_replicated_pcp_with_dcp_peer":
        for side, peer, one, other in (("prefill", "decode", prefill, decode), ("decode", "prefill", decode, prefill)):
            if _replicated_pcp(one) and other.dcp_size > 1:
                check.add("pd_context_parallel", f"{side} PCP {one.pcp_size} without DCP (KV replicated over its "
                          f"PCP ranks) cannot pair with the {peer}'s DCP {other.dcp_size} (KV sharded over DCP ranks) "
                          "over NIXL", fact.source, prefill_pcp=prefill.pcp_size, prefill_dcp=prefill.dcp_size,
                          decode_pcp=decode.pcp_size, decode_dcp=decode.dcp_size)
                break


def _pair_gpu_rules(check: RuleChecker, prefill_gpu: GpuSpec, decode_gpu: GpuSpec) -> None:
    fact = check.fact("pd_attention_backend")
    if fact is None or fact.value != "same_gpu_generation":
        return
    p, d = attention_backend_family(prefill_gpu), attention_backend_family(decode_gpu)
    if p != d:
        check.add("pd_attention_backend", f"prefill on {prefill_gpu.name} and decode on {decode_gpu.name} pick "
                  "different default attention backends, and the KV transfer cannot connect them (vLLM's NIXL "
                  "handshake hashes the backend; SGLang's pages KV by the backend's page size)",
                  fact.source, prefill_gpu=prefill_gpu.name, decode_gpu=decode_gpu.name)


def _served_checkpoint(data: EngineData, model: ModelSpec, gpu: GpuSpec, precision: str) -> str | None:
    """The checkpoint a pool at ``precision`` loads (online quantization loads the 16-bit one;
    "release": the model's own id), or None when none serves it (``checkpoint_unavailable`` refuses
    that pool on its own)."""
    found = weight_source(data, model, gpu, precision)
    if not found.available or found.checkpoint is None:
        return None
    return found.checkpoint.hf_id or "release"


def _pair_checkpoint_rule(check: RuleChecker, model: ModelSpec, prefill: Layout, decode: Layout,
                          prefill_gpu: GpuSpec, decode_gpu: GpuSpec) -> None:
    fact = check.fact("pd_checkpoint")
    if fact is None or fact.value != "equal" or prefill.weight_precision == decode.weight_precision:
        return
    p = _served_checkpoint(check.data, model, prefill_gpu, prefill.weight_precision)
    d = _served_checkpoint(check.data, model, decode_gpu, decode.weight_precision)
    if p is not None and d is not None and p != d:
        def named(checkpoint: str) -> str:
            return f"{model.name}'s own release" if checkpoint == "release" else checkpoint

        check.add("pd_checkpoint", f"prefill {prefill.weight_precision} weights load {named(p)} and decode "
                  f"{decode.weight_precision} weights load {named(d)}: the NIXL handshake requires one checkpoint",
                  fact.source, prefill_checkpoint=p, decode_checkpoint=d)


