"""The ``--kv-cache-dtype`` a launch must name so the engine keeps the KV cache the plan assumed.

vLLM 0.33 lets some architectures' config hooks replace an unset (``auto``) KV cache dtype with
FP8 on one GPU family: GLM-5 (``GlmMoeDsaForCausalLM``) runs an FP8 KV cache on compute capability
10.x (Blackwell B200/GB200, model_executor/models/config.py:96-100, fact
``model_kv_cache_dtype_default``). A plan priced with a 16-bit KV cache there would otherwise run
with another KV capacity and attention cost than predicted, so :func:`explicit_kv_cache_dtype` names
``bfloat16`` for it; the sparse-MLA backends vLLM picks on SM100 accept it
(v1/attention/backends/mla/flashmla_sparse.py:149-155, flashinfer_mla_sparse.py:84-90).
"""

from __future__ import annotations

from layoutopt.engines.loader import load_engine_data
from layoutopt.engines.architectures import HF_ARCHITECTURES
from layoutopt.engines.ref import EngineRef, parse_engine_ref
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec


def explicit_kv_cache_dtype(engine: "str | EngineRef", model: ModelSpec, gpu: GpuSpec,
                            kv_precision: str) -> str | None:
    """``bfloat16`` where a 16-bit KV cache would otherwise become FP8 by the engine's model hook, else None."""
    ref = parse_engine_ref(engine)
    if ref.name != "vllm" or not ref.has_data or kv_precision != "bf16":
        return None
    fact = load_engine_data(ref.name, ref.version).fact("model_kv_cache_dtype_default")
    if fact is None or gpu.cuda_major is None:
        return None
    override = fact.value.get(HF_ARCHITECTURES.get(model.family, ""))
    if override is not None and gpu.cuda_major == override["compute_capability_major"]:
        return "bfloat16"
    return None
