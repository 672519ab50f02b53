"""The HF architecture (config.json ``architectures``) of each model_type layoutopt reads, the name
both engines' model registries key their implementations by (vLLM model_executor/models/registry.py,
SGLang each model module's ``EntryClass``; facts ``model_architectures``)."""

from __future__ import annotations

from layoutopt.engines.loader import available_versions, load_engine_data

# One per model_type of model_catalog/hf_import.py _READERS; tests check it against the catalog's
# config.json files.
HF_ARCHITECTURES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "qwen3_5": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
    "mixtral": "MixtralForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "kimi_k2": "DeepseekV3ForCausalLM",
    "kimi_k25": "KimiK25ForConditionalGeneration",
    "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "llama4": "Llama4ForConditionalGeneration",
}


def releases_implementing(family: str, engines: tuple[str, ...] = ("vllm", "sglang")) -> list[str]:
    """``engine==version`` of every release with engine data whose model registry lists the
    architecture of ``family`` (fact ``model_architectures``)."""
    architecture = HF_ARCHITECTURES.get(family)
    if architecture is None:
        return []
    found = []
    for engine in engines:
        for version in available_versions(engine):
            fact = load_engine_data(engine, version).fact("model_architectures")
            if fact is not None and architecture in fact.value:
                found.append(f"{engine}=={version}")
    return found
