"""ModelSpec: the architecture facts of a model and the sizes derived from them.

A ``ModelSpec`` is built from a HuggingFace ``config.json`` (see ``hf_import``) or from the
built-in catalog. Everything the performance model needs is here as plain numbers: per-layer
parameter counts by kind, KV-cache bytes per token, constant per-sequence state, FLOPs per token.
Sizes are counted for the text decoder only (vision towers and MTP heads are not served
by the decode path and are left out).
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from layoutopt.hardware_catalog.schemas import Precision

# Bytes per stored value of each precision. 4-bit formats carry scales: NVFP4 ('fp4') one FP8 per
# 16 values, 0.5 + 1/16 = 0.5625; MXFP4 one E8M0 per 32, 0.5 + 1/32 = 0.53125 (gpt-oss); INT4
# weight-only one BF16 per group of 32, 0.5 + 2/32 = 0.5625 (Kimi-K2.5: compressed-tensors,
# group_size 32, reference/hf_configs/moonshotai--Kimi-K2.5.json).
BYTES_PER_VALUE: dict[str, float] = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625, "mxfp4": 0.53125, "int4": 0.5625}
# The 4-bit formats, which a MoE checkpoint fixes for its experts (served as shipped).
FOUR_BIT_PRECISIONS: tuple[str, ...] = ("fp4", "mxfp4", "int4")

AttentionKind = Literal["gqa", "mla"]


class ModelSpec(BaseModel):
    """Architecture of a decoder-only transformer, dense or mixture-of-experts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="catalog name, e.g. 'qwen3-32b'")
    hf_id: str | None = Field(default=None, description="HuggingFace repository id")
    family: str = Field(description="HF model_type, e.g. 'llama', 'qwen3_moe', 'deepseek_v3'")
    source: str = Field(description="where the architecture numbers come from")

    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    max_context_tokens: int = Field(gt=0)

    # Attention (full and sliding-window layers share these shapes).
    attention_kind: AttentionKind = "gqa"
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0, description="KV heads; for MLA the latent cache is shared (1)")
    head_dim: int = Field(gt=0, description="query/key head size (for MLA: qk_nope + qk_rope)")
    v_head_dim: int | None = Field(default=None, description="value head size when it differs")
    attention_output_gate: bool = False
    # MLA (DeepSeek): low-rank projections and the latent cache.
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    # Sparse attention (DeepSeek sparse attention in GLM-5): a small indexer scores every cached
    # token with its own key cache, then the main attention reads only the top-k tokens.
    indexer_num_heads: int = Field(default=0, ge=0)
    indexer_head_dim: int = Field(default=0, ge=0, description="indexer key size, cached per token per layer")
    indexer_topk_tokens: int | None = Field(default=None, gt=0, description="tokens the main attention reads")

    # Layer kinds: full + sliding + linear == num_layers.
    num_full_attention_layers: int = Field(ge=0)
    num_sliding_window_layers: int = Field(default=0, ge=0)
    sliding_window_tokens: int | None = Field(default=None, gt=0)
    # The sliding layers attend within fixed chunks of sliding_window_tokens (Llama 4's chunked local
    # attention) rather than over a window that slides: the same cache bound, but engines treat it apart.
    sliding_window_chunked: bool = False
    # The checkpoint ships an encoder for images, video or audio, whose inputs an engine accepts
    # unless it is told to serve text only (the decoder's numbers above are the same either way).
    multimodal: bool = False
    num_linear_attention_layers: int = Field(default=0, ge=0)
    # Linear attention (Gated DeltaNet in Qwen3.5/3.6).
    linear_num_key_heads: int = 0
    linear_key_head_dim: int = 0
    linear_num_value_heads: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    linear_state_bytes_per_value: float = Field(default=4.0, description="recurrent state dtype size (FP32)")

    # Feed-forward: dense layers first (DeepSeek's first_k_dense), then MoE layers.
    intermediate_size: int = Field(gt=0, description="dense FFN width")
    num_dense_layers: int = Field(ge=0, description="layers with a dense FFN")
    num_experts: int = Field(default=0, ge=0, description="routed experts per MoE layer")
    num_experts_per_token: int = Field(default=0, ge=0)
    moe_intermediate_size: int = Field(default=0, ge=0)
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: int = Field(default=0, ge=0)
    gated_ffn: bool = Field(default=True, description="SwiGLU-style FFN with 3 matrices")
    # Weights that stay in BF16 whatever precision the rest is served in.
    expert_native_precision: Precision | None = Field(
        default=None, description="precision experts ship in when fixed by the checkpoint (gpt-oss: fp4)"
    )
    checkpoint_precision: Precision = Field(
        default="bf16", description="precision most weights of the published checkpoint are stored in"
    )
    user_checkpoints: tuple[tuple[Precision, str], ...] = Field(
        default=(), description="(weight precision, HuggingFace id) of checkpoints the user serves besides the "
        "catalog's (solve --checkpoint fp4=ORG/NAME); the search may propose these weight precisions"
    )

    @model_validator(mode="after")
    def _check_layers(self) -> "ModelSpec":
        kinds = self.num_full_attention_layers + self.num_sliding_window_layers + self.num_linear_attention_layers
        if kinds != self.num_layers:
            raise ValueError(
                f"layer kinds add up to {kinds} (full {self.num_full_attention_layers} + sliding "
                f"{self.num_sliding_window_layers} + linear {self.num_linear_attention_layers}), "
                f"not num_layers={self.num_layers}"
            )
        if self.num_dense_layers > self.num_layers:
            raise ValueError("num_dense_layers exceeds num_layers")
        if self.num_experts and not (0 < self.num_experts_per_token <= self.num_experts):
            raise ValueError("num_experts_per_token must be in 1..num_experts for a MoE model")
        if self.num_sliding_window_layers and not self.sliding_window_tokens:
            raise ValueError("sliding-window layers need sliding_window_tokens")
        if self.attention_kind == "mla" and not (self.kv_lora_rank and self.qk_rope_head_dim):
            raise ValueError("MLA needs kv_lora_rank and qk_rope_head_dim")
        if bool(self.indexer_num_heads and self.indexer_head_dim) != bool(self.indexer_topk_tokens):
            raise ValueError("a sparse-attention indexer needs indexer_num_heads, indexer_head_dim and indexer_topk_tokens")
        return self

    # ---------------------------------------------------------------- structure
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def num_attention_layers(self) -> int:
        """Layers with softmax attention over a KV cache (full or sliding)."""
        return self.num_full_attention_layers + self.num_sliding_window_layers

    @property
    def _v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    # ---------------------------------------------------------------- parameters
    @cached_property
    def attention_params_per_layer(self) -> int:
        """Parameters of one softmax-attention block (projections only)."""
        h, nq = self.hidden_size, self.num_attention_heads
        if self.attention_kind == "mla":
            rope = self.qk_rope_head_dim or 0
            nope = self.head_dim - rope
            q_rank = self.q_lora_rank
            q_proj = (h * q_rank + q_rank * nq * self.head_dim) if q_rank else h * nq * self.head_dim
            kv_down = h * (self.kv_lora_rank + rope)
            kv_up = self.kv_lora_rank * nq * (nope + self._v_dim)
            out = nq * self._v_dim * h
            return q_proj + kv_down + kv_up + out + self._indexer_params
        q = h * nq * self.head_dim * (2 if self.attention_output_gate else 1)
        kv = 2 * h * self.num_kv_heads * self.head_dim
        out = nq * self.head_dim * h
        return q + kv + out

    @property
    def _indexer_params(self) -> int:
        """Sparse-attention indexer: query up-projection, key projection, per-head weights."""
        if not self.indexer_num_heads:
            return 0
        q_in = self.q_lora_rank or self.hidden_size
        wq = q_in * self.indexer_num_heads * self.indexer_head_dim
        wk = self.hidden_size * self.indexer_head_dim
        head_weights = self.hidden_size * self.indexer_num_heads
        return wq + wk + head_weights

    @cached_property
    def linear_attention_params_per_layer(self) -> int:
        """Parameters of one Gated DeltaNet block: q/k/v/z/gates, short conv, output."""
        if not self.num_linear_attention_layers:
            return 0
        h = self.hidden_size
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        qkv = h * (2 * key_dim + value_dim)
        z_gate = h * value_dim
        ab = 2 * h * self.linear_num_value_heads
        conv = (2 * key_dim + value_dim) * self.linear_conv_kernel
        out = value_dim * h
        return qkv + z_gate + ab + conv + out

    def _ffn_params(self, width: int) -> int:
        return (3 if self.gated_ffn else 2) * self.hidden_size * width

    @property
    def dense_ffn_params_per_layer(self) -> int:
        return self._ffn_params(self.intermediate_size)

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert."""
        return self._ffn_params(self.moe_intermediate_size) if self.is_moe else 0

    @property
    def shared_expert_params_per_layer(self) -> int:
        width = self.shared_expert_intermediate_size or self.moe_intermediate_size
        return self.num_shared_experts * self._ffn_params(width) if self.is_moe else 0

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts if self.is_moe else 0

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the output head (once when tied)."""
        table = self.vocab_size * self.hidden_size
        return table if self.tie_word_embeddings else 2 * table

    @cached_property
    def attention_params(self) -> int:
        """All mixer parameters: softmax and linear attention blocks, norms included."""
        # Two RMSNorms per layer plus the final norm before the output head.
        norms = 2 * self.hidden_size * self.num_layers + self.hidden_size
        return (
            self.num_attention_layers * self.attention_params_per_layer
            + self.num_linear_attention_layers * self.linear_attention_params_per_layer
            + norms
        )

    @cached_property
    def expert_params_total(self) -> int:
        """All routed-expert parameters (the part expert parallelism splits)."""
        return self.num_moe_layers * self.num_experts * self.expert_params

    @cached_property
    def dense_params_total(self) -> int:
        """FFN parameters every token uses: dense FFNs, shared experts, routers."""
        return self.num_dense_layers * self.dense_ffn_params_per_layer + self.num_moe_layers * (
            self.shared_expert_params_per_layer + self.router_params_per_layer
        )

    @cached_property
    def total_params(self) -> int:
        return self.embedding_params + self.attention_params + self.dense_params_total + self.expert_params_total

    @cached_property
    def active_params(self) -> int:
        """Parameters touched per token: all but the routed experts not chosen."""
        active_experts = self.num_moe_layers * self.num_experts_per_token * self.expert_params
        return self.embedding_params + self.attention_params + self.dense_params_total + active_experts

    # ---------------------------------------------------------------- bytes
    def weight_bytes(self, precision: Precision) -> float:
        """Bytes of all weights served at ``precision``.

        Embeddings and the output head stay in BF16 (engines do not quantize them); experts keep
        their checkpoint precision when the checkpoint fixes one (gpt-oss ships MXFP4 experts).
        """
        bytes_per = BYTES_PER_VALUE[precision]
        expert_bytes_per = BYTES_PER_VALUE[self.expert_native_precision or precision]
        if self.expert_native_precision and BYTES_PER_VALUE[precision] < expert_bytes_per:
            expert_bytes_per = bytes_per
        return (
            self.embedding_params * BYTES_PER_VALUE["bf16"]
            + (self.attention_params + self.dense_params_total) * bytes_per
            + self.expert_params_total * expert_bytes_per
        )

    @property
    def kv_values_per_token_per_layer(self) -> int:
        """Values cached per token in one softmax-attention layer, summed over KV heads."""
        if self.attention_kind == "mla":
            # The latent (kv_lora_rank) plus the shared RoPE key, and the indexer key under DSA.
            return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0) + self.indexer_head_dim
        return self.num_kv_heads * (self.head_dim + self._v_dim)

    def kv_cache_bytes_per_token(self, kv_precision: Precision = "bf16") -> float:
        """KV bytes one token adds in the full-attention layers (grows with context)."""
        return self.num_full_attention_layers * self.kv_values_per_token_per_layer * BYTES_PER_VALUE[kv_precision]

    def sequence_state_bytes(self, context_tokens: float, kv_precision: Precision = "bf16") -> float:
        """Cache bytes of one sequence at ``context_tokens``: full KV, capped sliding KV, linear state."""
        per_layer_token = self.kv_values_per_token_per_layer * BYTES_PER_VALUE[kv_precision]
        full = self.kv_cache_bytes_per_token(kv_precision) * context_tokens
        window = min(context_tokens, self.sliding_window_tokens or 0)
        sliding = self.num_sliding_window_layers * per_layer_token * window
        return full + sliding + self.linear_state_bytes_per_sequence

    @cached_property
    def linear_state_bytes_per_sequence(self) -> float:
        """Constant recurrent state of the linear-attention layers (plus their conv state)."""
        if not self.num_linear_attention_layers:
            return 0.0
        recurrent = self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        conv = (2 * key_dim + value_dim) * max(self.linear_conv_kernel - 1, 0)
        per_layer = recurrent * self.linear_state_bytes_per_value + conv * BYTES_PER_VALUE["bf16"]
        return self.num_linear_attention_layers * per_layer

    # ---------------------------------------------------------------- FLOPs
    @property
    def matmul_flops_per_token(self) -> float:
        """FLOPs of the weight matmuls for one token (2 per active parameter, embeddings lookups excluded)."""
        lookup = self.vocab_size * self.hidden_size  # the input embedding is a gather, not a matmul
        return 2.0 * (self.active_params - lookup)

    def attention_flops_per_token(self, context_tokens: float) -> float:
        """Softmax-attention FLOPs (QK^T and PV) of one token attending to ``context_tokens``.

        Under sparse attention the main attention reads only ``indexer_topk_tokens`` tokens while
        the indexer scores all of them (one dot product per indexer head and cached token).
        """
        per_layer = 2.0 * self.num_attention_heads * (self.head_dim + self._v_dim)
        window = min(context_tokens, self.sliding_window_tokens or 0)
        full_tokens = min(context_tokens, self.indexer_topk_tokens or context_tokens)
        indexer = 2.0 * self.indexer_num_heads * self.indexer_head_dim * context_tokens
        return self.num_full_attention_layers * (per_layer * full_tokens + indexer) + (
            self.num_sliding_window_layers * per_layer * window
        )

    @property
    def linear_attention_flops_per_token(self) -> float:
        """Recurrent-state FLOPs of the linear-attention layers for one token (context-independent).

        Per value head the Gated DeltaNet step decays the key x value state (1 FLOP per entry),
        reads it with the key and the query (2 + 2) and adds a rank-1 update (2): 7 per entry.
        """
        state_values = self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        return 7.0 * state_values * self.num_linear_attention_layers

    def flops_per_token(self, context_tokens: float = 0.0) -> float:
        """Total forward FLOPs of one token at a given context length."""
        return (
            self.matmul_flops_per_token
            + self.attention_flops_per_token(context_tokens)
            + self.linear_attention_flops_per_token
        )
