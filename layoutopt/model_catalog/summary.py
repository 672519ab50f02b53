"""A plain-number summary of a ``ModelSpec``: its architecture and derived sizes, units in every key.

Used by ``layoutopt catalog`` (table and JSON) and by anything else that reports a model.
"""

from __future__ import annotations

from typing import Any

from layoutopt.hardware_catalog.schemas import PRECISIONS, Precision
from layoutopt.model_catalog.checkpoints import available_checkpoints
from layoutopt.model_catalog.spec import BYTES_PER_VALUE, ModelSpec


def layer_kinds(spec: ModelSpec) -> dict[str, int]:
    """Layers per attention kind, leaving out kinds the model lacks."""
    kinds = {
        "full_attention": spec.num_full_attention_layers,
        "sliding_attention": spec.num_sliding_window_layers,
        "linear_attention": spec.num_linear_attention_layers,
    }
    return {kind: count for kind, count in kinds.items() if count}


def _sliding_kv_cap_bytes(spec: ModelSpec, kv_precision: Precision) -> float:
    """KV bytes of the sliding-window layers once a sequence is longer than the window."""
    window = spec.sliding_window_tokens or 0
    per_token_layer = spec.kv_values_per_token_per_layer * BYTES_PER_VALUE[kv_precision]
    return spec.num_sliding_window_layers * per_token_layer * window


def model_summary(spec: ModelSpec) -> dict[str, Any]:
    """Architecture facts and derived sizes of ``spec`` as JSON-ready plain numbers.

    Parameters are counts (not billions); weights are bytes per serving precision (embeddings
    stay BF16, fixed-precision experts stay as shipped); KV bytes are per token of context in the
    full-attention layers; state bytes are per sequence and do not grow with context.
    """
    attention: dict[str, Any] = {
        "kind": spec.attention_kind,
        "num_attention_heads": spec.num_attention_heads,
        "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "v_head_dim": spec.v_head_dim or spec.head_dim,
        "output_gate": spec.attention_output_gate,
    }
    if spec.attention_kind == "mla":
        attention |= {"q_lora_rank": spec.q_lora_rank, "kv_lora_rank": spec.kv_lora_rank,
                      "qk_rope_head_dim": spec.qk_rope_head_dim}
    if spec.indexer_topk_tokens:
        attention |= {"indexer_num_heads": spec.indexer_num_heads, "indexer_head_dim": spec.indexer_head_dim,
                      "indexer_topk_tokens": spec.indexer_topk_tokens}
    summary: dict[str, Any] = {
        "name": spec.name,
        "hf_id": spec.hf_id,
        "family": spec.family,
        "source": spec.source,
        "checkpoint_precision": spec.checkpoint_precision,
        # Known checkpoints per weight precision (the search's checkpoint_unavailable rule reads the same list).
        "checkpoints": [{"precision": c.precision, "hf_id": c.hf_id, "origin": c.origin}
                        for c in available_checkpoints(spec)],
        "num_layers": spec.num_layers,
        "layer_kinds": layer_kinds(spec),
        "sliding_window_tokens": spec.sliding_window_tokens,
        "hidden_size": spec.hidden_size,
        "vocab_size": spec.vocab_size,
        "max_context_tokens": spec.max_context_tokens,
        "attention": attention,
        "ffn": {"num_dense_layers": spec.num_dense_layers, "intermediate_size": spec.intermediate_size},
        "total_params": spec.total_params,
        "active_params": spec.active_params,
        "weight_bytes": {p: spec.weight_bytes(p) for p in PRECISIONS},
        "kv_cache_bytes_per_token": {p: spec.kv_cache_bytes_per_token(p) for p in ("bf16", "fp8")},
        "sliding_kv_bytes_per_sequence_max": {p: _sliding_kv_cap_bytes(spec, p) for p in ("bf16", "fp8")},
        "linear_state_bytes_per_sequence": spec.linear_state_bytes_per_sequence,
        "matmul_flops_per_token": spec.matmul_flops_per_token,
    }
    if spec.num_linear_attention_layers:
        summary["linear_attention"] = {
            "num_key_heads": spec.linear_num_key_heads, "key_head_dim": spec.linear_key_head_dim,
            "num_value_heads": spec.linear_num_value_heads, "value_head_dim": spec.linear_value_head_dim,
            "conv_kernel": spec.linear_conv_kernel,
        }
    if spec.is_moe:
        summary["moe"] = {
            "num_moe_layers": spec.num_moe_layers,
            "num_experts": spec.num_experts,
            "num_experts_per_token": spec.num_experts_per_token,
            "moe_intermediate_size": spec.moe_intermediate_size,
            "num_shared_experts": spec.num_shared_experts,
            "shared_expert_intermediate_size": spec.shared_expert_intermediate_size or None,
            "expert_params_total": spec.expert_params_total,
            "expert_native_precision": spec.expert_native_precision,
        }
    return summary
