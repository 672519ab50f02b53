"""Build a ``ModelSpec`` from a HuggingFace ``config.json`` (already parsed into a dict).

One small reader per architecture family maps the config's keys onto ``ModelSpec`` fields.
Multimodal checkpoints nest the language model under ``text_config``; its keys override the
top-level ones, and the family is the top-level ``model_type``. Vision towers and multi-token
prediction (MTP) layers are not part of the spec (see ``spec.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.schemas import Precision
from layoutopt.model_catalog.spec import ModelSpec

Config = dict[str, Any]

# Layer kinds named in ``layer_types`` and the ModelSpec counter each one adds to.
_LAYER_KIND_FIELDS = {
    "full_attention": "num_full_attention_layers",
    "sliding_attention": "num_sliding_window_layers",
    "linear_attention": "num_linear_attention_layers",
}


# Largest integer a config.json may give (sizes, counts, context length): real models stay far below.
MAX_CONFIG_INT = 2**31 - 1


class _Reader:
    """Reads keys of one config, naming the key and the model type in every error."""

    def __init__(self, config: Config, model_type: str, name: str):
        self.config = config
        self.model_type = model_type
        self.name = name

    def req(self, key: str) -> Any:
        value = self.config.get(key)
        if value is None:
            raise InputError(
                f"{self.name}: config.json {key}", None, f"required for model_type {self.model_type!r}"
            )
        return value

    def int(self, key: str, default: int | None = None) -> int:
        """An integer key; required unless ``default`` is given."""
        value = self.config.get(key)
        if value is None:
            return self.req(key) if default is None else default
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{self.name}: config.json {key}", value, "an integer")
        if not 0 <= value <= MAX_CONFIG_INT:
            raise InputError(f"{self.name}: config.json {key}", value, f"an integer in 0..{MAX_CONFIG_INT:,} (2^31 - 1)")
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return default if value is None else value


def _base(r: _Reader) -> dict[str, Any]:
    """Fields every decoder shares: sizes, vocabulary, GQA attention shape, FFN width."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    return {
        "num_layers": r.int("num_hidden_layers"),
        "hidden_size": hidden,
        "vocab_size": r.int("vocab_size"),
        "tie_word_embeddings": bool(r.get("tie_word_embeddings", False)),
        "max_context_tokens": r.int("max_position_embeddings"),
        "num_attention_heads": heads,
        "num_kv_heads": r.int("num_key_value_heads", heads),
        # Configs without head_dim (Llama, Mixtral) use hidden / heads.
        "head_dim": r.int("head_dim", hidden // heads),
        # MoE-only configs (Qwen3.5 MoE) have no dense width; any positive value serves.
        "intermediate_size": r.int("intermediate_size", r.get("moe_intermediate_size")),
        "num_dense_layers": r.int("num_hidden_layers"),
    }


def _layer_kinds(r: _Reader, num_layers: int) -> dict[str, int]:
    """Counts of full, sliding-window and linear-attention layers from ``layer_types``."""
    types = r.get("layer_types")
    if types is None:
        return {"num_full_attention_layers": num_layers}
    if len(types) != num_layers:
        raise InputError(f"{r.name}: config.json layer_types", f"{len(types)} entries", f"{num_layers} (num_hidden_layers)")
    counts = Counter(types)
    unknown = sorted(set(counts) - set(_LAYER_KIND_FIELDS))
    if unknown:
        raise InputError(f"{r.name}: config.json layer_types", unknown[0], f"one of {', '.join(_LAYER_KIND_FIELDS)}")
    return {field: counts.get(kind, 0) for kind, field in _LAYER_KIND_FIELDS.items()}


def _moe(r: _Reader, experts_key: str, num_moe_layers: int, num_layers: int, width: int) -> dict[str, Any]:
    top_k = r.get("num_experts_per_tok") or r.int("experts_per_token")
    return {
        "num_experts": r.int(experts_key),
        "num_experts_per_token": top_k,
        "moe_intermediate_size": width,
        "num_dense_layers": num_layers - num_moe_layers,
    }


def _dense(r: _Reader) -> dict[str, Any]:
    """Llama 3.x, Qwen2/Qwen3 dense, Mistral: layer kinds from ``layer_types`` when the config has them.

    Without ``layer_types`` Mistral-style configs slide every layer when ``sliding_window`` is set;
    Qwen configs carry a ``sliding_window`` they do not use unless ``use_sliding_window`` is true.
    """
    fields = _base(r)
    n = fields["num_layers"]
    fields |= _layer_kinds(r, n)
    slides_all = r.get("layer_types") is None and (
        r.get("use_sliding_window", False) if r.model_type.startswith("qwen") else r.model_type in ("mistral", "mixtral")
    )
    if slides_all and r.get("sliding_window"):
        fields |= {"num_full_attention_layers": 0, "num_sliding_window_layers": n}
    if fields.get("num_sliding_window_layers"):
        fields["sliding_window_tokens"] = r.int("sliding_window")
    return fields


def _mixtral_like(r: _Reader) -> dict[str, Any]:
    """Mixtral and MiniMax-M2: every layer MoE, ``intermediate_size`` is the expert width."""
    fields = _dense(r)
    n = fields["num_layers"]
    fields |= _moe(r, "num_local_experts", n, n, r.int("intermediate_size"))
    shared = r.int("shared_intermediate_size", 0)
    if shared:
        fields |= {"num_shared_experts": 1, "shared_expert_intermediate_size": shared}
    return fields


def _qwen_moe_layers(r: _Reader, n: int) -> int:
    """MoE layers of Qwen MoE configs: every ``decoder_sparse_step``-th, minus ``mlp_only_layers``."""
    step = r.int("decoder_sparse_step", 1)
    dense_only = set(r.get("mlp_only_layers", []))
    return sum(1 for i in range(n) if i not in dense_only and (i + 1) % step == 0)


def _qwen(r: _Reader) -> dict[str, Any]:
    """Qwen3 MoE and the Qwen3.5/3.6 hybrids (Gated DeltaNet linear attention + gated full attention)."""
    fields = _base(r)
    n = fields["num_layers"]
    fields |= _layer_kinds(r, n)
    if r.get("layer_types") is None and r.get("full_attention_interval"):
        interval = r.int("full_attention_interval")
        full = sum(1 for i in range(n) if (i + 1) % interval == 0)
        fields |= {"num_full_attention_layers": full, "num_linear_attention_layers": n - full}
    if fields.get("num_linear_attention_layers"):
        fields |= {
            "linear_num_key_heads": r.int("linear_num_key_heads"),
            "linear_key_head_dim": r.int("linear_key_head_dim"),
            "linear_num_value_heads": r.int("linear_num_value_heads"),
            "linear_value_head_dim": r.int("linear_value_head_dim"),
            "linear_conv_kernel": r.int("linear_conv_kernel_dim"),
        }
    fields["attention_output_gate"] = bool(r.get("attn_output_gate", False))
    if r.get("num_experts"):
        fields |= _moe(r, "num_experts", _qwen_moe_layers(r, n), n, r.int("moe_intermediate_size"))
        shared = r.int("shared_expert_intermediate_size", 0)
        if shared:
            fields |= {"num_shared_experts": 1, "shared_expert_intermediate_size": shared}
    return fields


def _mla(r: _Reader) -> dict[str, Any]:
    """DeepSeek-V3/R1, Kimi-K2.x and GLM-5: multi-head latent attention, dense first layers, shared experts."""
    fields = _base(r)
    n = fields["num_layers"]
    nope, rope = r.int("qk_nope_head_dim"), r.int("qk_rope_head_dim")
    first_dense = r.int("first_k_dense_replace", 0)
    freq = r.int("moe_layer_freq", 1)
    num_moe = sum(1 for i in range(first_dense, n) if i % freq == 0)
    fields |= {
        "attention_kind": "mla",
        "num_kv_heads": 1,  # one latent vector per token is shared by all heads
        "head_dim": nope + rope,
        "v_head_dim": r.int("v_head_dim"),
        "q_lora_rank": r.get("q_lora_rank"),
        "kv_lora_rank": r.int("kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "num_full_attention_layers": n,
    }
    fields |= _moe(r, "n_routed_experts", num_moe, n, r.int("moe_intermediate_size"))
    fields["num_shared_experts"] = r.int("n_shared_experts", 0)
    if r.get("index_n_heads"):
        fields |= {
            "indexer_num_heads": r.int("index_n_heads"),
            "indexer_head_dim": r.int("index_head_dim"),
            "indexer_topk_tokens": r.int("index_topk"),
        }
    return fields


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    """gpt-oss: alternating sliding-window (``sliding_window`` tokens) and full attention, all layers MoE."""
    fields = _base(r)
    n = fields["num_layers"]
    fields |= _layer_kinds(r, n)
    if fields.get("num_sliding_window_layers"):
        fields["sliding_window_tokens"] = r.int("sliding_window")
    fields |= _moe(r, "num_local_experts", n, n, r.int("intermediate_size"))
    return fields


def _llama4(r: _Reader) -> dict[str, Any]:
    """Llama 4: MoE every ``interleave_moe_layer_step`` layers with one shared expert; chunked local attention.

    Three of four layers attend within chunks of ``attention_chunk_size`` tokens; their cache never
    holds more than one chunk, so they are counted as sliding-window layers of that size.
    """
    fields = _base(r)
    n = fields["num_layers"]
    step = r.int("interleave_moe_layer_step", 1)
    num_moe = sum(1 for i in range(n) if (i + 1) % step == 0)
    expert_width = r.int("intermediate_size")
    fields |= _moe(r, "num_local_experts", num_moe, n, expert_width)
    fields |= {
        "intermediate_size": r.int("intermediate_size_mlp", expert_width),
        "num_shared_experts": 1,
        "shared_expert_intermediate_size": expert_width,
    }
    chunk = r.get("attention_chunk_size")
    no_rope = r.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    num_global = sum(1 for flag in no_rope[:n] if not flag)  # NoPE layers attend globally
    if chunk:
        fields |= {
            "num_full_attention_layers": num_global,
            "num_sliding_window_layers": n - num_global,
            "sliding_window_tokens": int(chunk),
            "sliding_window_chunked": True,
        }
    else:
        fields["num_full_attention_layers"] = n
    return fields


_READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": _dense,
    "mistral": _dense,
    "qwen2": _dense,
    "qwen3": _dense,
    "qwen3_moe": _qwen,
    "qwen3_5": _qwen,
    "qwen3_5_moe": _qwen,
    "mixtral": _mixtral_like,
    "minimax_m2": _mixtral_like,
    "deepseek_v3": _mla,
    "kimi_k2": _mla,
    "kimi_k25": _mla,
    "glm_moe_dsa": _mla,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_READERS))


def checkpoint_precision(quantization_config: Config | None) -> Precision:
    """Precision most weights of a checkpoint are stored in, from its ``quantization_config``.

    The narrowest weight format named wins (an NVFP4 checkpoint with FP8 attention is 'fp4').
    OCP MXFP4 (gpt-oss) is 'mxfp4'; integer 4-bit weights (compressed-tensors ``type: int``,
    GPTQ/AWQ ``bits: 4``, ModelOpt ``W4A16_AWQ``/``INT4``) are 'int4', served weight-only.
    """
    q = quantization_config or {}
    method = str(q.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    groups = list((q.get("config_groups") or {}).values())
    int_weights = [g.get("weights", {}) for g in groups if (g.get("weights") or {}).get("type") == "int"]
    algo_upper = str(q.get("quant_algo", "")).upper()
    if (any(w.get("num_bits") == 4 for w in int_weights) or (method in ("gptq", "awq") and q.get("bits") == 4)
            or "INT4" in algo_upper or "AWQ" in algo_upper):
        return "int4"
    bits = [g.get("weights", {}).get("num_bits") for g in groups]
    bits.append(q.get("bits"))
    algo = str(q.get("quant_algo", "")).upper()
    bits.append(4 if "FP4" in algo or "INT4" in algo else 8 if "FP8" in algo or "INT8" in algo else None)
    known = [b for b in bits if isinstance(b, int)]
    if not known:
        return "bf16"
    return "fp4" if min(known) <= 4 else "fp8" if min(known) <= 8 else "bf16"


def _multimodal(config: Config) -> bool:
    """Whether the checkpoint carries a vision or audio encoder: its config has the encoder's own
    section, or its architecture is a ``...ForConditionalGeneration`` class (transformers' name for a
    decoder with a multimodal front end, e.g. Llama 4's and Kimi-K2.5's)."""
    if any(key in config for key in ("vision_config", "audio_config")):
        return True
    architectures = config.get("architectures")
    return isinstance(architectures, list) and any(
        isinstance(a, str) and a.endswith("ForConditionalGeneration") for a in architectures)


def spec_from_hf_config(config: Config, name: str, hf_id: str | None, source: str) -> ModelSpec:
    """The ``ModelSpec`` of a parsed HuggingFace ``config.json``.

    Raises ``InputError`` for an unsupported ``model_type``, a missing or mistyped key, or numbers
    that do not make a consistent model.
    """
    if not isinstance(config, dict):
        raise InputError(f"{name}: config.json", type(config).__name__, "a JSON object")
    model_type = config.get("model_type")
    read = _READERS.get(model_type) if isinstance(model_type, str) else None
    if read is None:
        raise InputError(
            f"{name}: config.json model_type", model_type, f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    text = config.get("text_config") or {}
    if not isinstance(text, dict):
        raise InputError(f"{name}: config.json text_config", type(text).__name__, "a JSON object")
    merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")} | text
    fields = read(_Reader(merged, model_type, name))
    precision = checkpoint_precision(merged.get("quantization_config"))
    fields |= {"name": name, "hf_id": hf_id, "family": model_type, "source": source}
    fields["checkpoint_precision"] = precision
    fields["multimodal"] = _multimodal(config)
    if precision in ("fp4", "mxfp4", "int4") and fields.get("num_experts"):
        # 4-bit expert weights (gpt-oss MXFP4, Kimi INT4) are served as shipped.
        fields["expert_native_precision"] = precision
    try:
        return ModelSpec(**fields)
    except ValidationError as error:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        raise InputError(f"{name}: config.json", model_type, f"a consistent architecture ({problems})") from None
