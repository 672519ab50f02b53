"""Model catalog: HF config import, derived sizes against published numbers, name resolution.

Published sizes come from shared/reference/hardware_and_models.md section 3 and the model cards;
tolerances are stated per check (1-2 % for parameter counts that the cards round).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from layoutopt.errors import InputError
from layoutopt.model_catalog import SUPPORTED_MODEL_TYPES, ModelSpec, get_model, list_models, spec_from_hf_config
from layoutopt.model_catalog.catalog import catalog_names, is_catalog_model
from layoutopt.model_catalog.hf_import import checkpoint_precision
from layoutopt.model_catalog.summary import model_summary

KIB, MIB = 2**10, 2**20

CATALOG = [
    "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b",
    "qwen3-235b-a22b", "qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b",
    "qwen3.6-27b", "deepseek-v3", "deepseek-r1", "mixtral-8x7b", "mixtral-8x22b", "gpt-oss-20b",
    "gpt-oss-120b", "minimax-m2.5", "kimi-k2.5", "glm-5", "llama-4-scout",
]


def test_catalog_holds_every_listed_model():
    assert catalog_names() == CATALOG
    specs = list_models()
    assert [s.name for s in specs] == CATALOG
    assert all(isinstance(s, ModelSpec) and s.hf_id and s.source for s in specs)


# (model, published total params, published active params, relative tolerance)
PUBLISHED_PARAMS = [
    ("llama-3.1-8b", 8.03e9, 8.03e9, 0.005),
    ("llama-3.1-70b", 70.6e9, 70.6e9, 0.005),
    ("llama-3.1-405b", 405.9e9, 405.9e9, 0.005),
    ("qwen3-8b", 8.2e9, 8.2e9, 0.01),
    ("qwen3-32b", 32.8e9, 32.8e9, 0.005),
    ("qwen3-30b-a3b", 30.5e9, 3.35e9, 0.01),
    ("qwen3-235b-a22b", 235.1e9, 22.2e9, 0.005),
    ("qwen3.5-27b", 26.9e9, 26.9e9, 0.01),
    ("qwen3.5-35b-a3b", 34.7e9, 3.45e9, 0.01),
    ("qwen3.5-397b-a17b", 396.4e9, 17.4e9, 0.01),
    ("deepseek-v3", 671e9, 37e9, 0.02),  # 685B on HF counts the MTP layer, left out here
    ("mixtral-8x7b", 46.7e9, 12.9e9, 0.01),
    ("mixtral-8x22b", 141e9, 39e9, 0.01),
    ("llama-4-scout", 109e9, 17e9, 0.02),  # 109B includes the vision encoder
    ("minimax-m2.5", 229e9, None, 0.01),
    ("glm-5", 744e9, None, 0.01),
]


@pytest.mark.parametrize("name,total,active,tol", PUBLISHED_PARAMS)
def test_parameter_counts_match_published(name, total, active, tol):
    spec = get_model(name)
    assert spec.total_params == pytest.approx(total, rel=tol)
    if active is not None:
        assert spec.active_params == pytest.approx(active, rel=tol)


def test_llama_8b_parameters_by_hand():
    spec = get_model("llama-3.1-8b")
    h, v, inter, layers = 4096, 128256, 14336, 32
    attention = h * h + 2 * h * 1024 + h * h  # q, k and v (8 KV heads x 128), o
    ffn = 3 * h * inter
    by_hand = 2 * v * h + layers * (attention + ffn + 2 * h) + h  # untied head, 2 norms/layer, final norm
    assert by_hand == 8_030_261_248  # safetensors total on the model card
    assert spec.total_params == by_hand
    assert spec.head_dim == 128  # absent from the config: hidden / heads


def test_active_params_without_input_embedding_match_gpt_oss_card():
    # The gpt-oss card's 5.1B active counts the unembedding once; the input lookup is no matmul.
    spec = get_model("gpt-oss-120b")
    assert spec.total_params == pytest.approx(116.8e9, rel=0.005)
    assert spec.matmul_flops_per_token / 2 == pytest.approx(5.13e9, rel=0.01)
    assert get_model("gpt-oss-20b").matmul_flops_per_token / 2 == pytest.approx(3.61e9, rel=0.01)


@pytest.mark.parametrize("name,kib", [
    ("llama-3.1-8b", 128), ("llama-3.1-70b", 320), ("llama-3.1-405b", 504), ("qwen3-32b", 256),
    ("qwen3-30b-a3b", 96), ("qwen3-235b-a22b", 188), ("mixtral-8x7b", 128), ("qwen3.5-27b", 64),
    ("qwen3.5-35b-a3b", 20), ("qwen3.5-397b-a17b", 30), ("gpt-oss-120b", 36),
])
def test_kv_bytes_per_token_match_reference(name, kib):
    spec = get_model(name)
    assert spec.kv_cache_bytes_per_token("bf16") == kib * KIB
    assert spec.kv_cache_bytes_per_token("fp8") == kib * KIB / 2


def test_llama_70b_kv_by_hand():
    # 80 layers x 8 KV heads x 128 x (K and V) x 2 bytes
    assert get_model("llama-3.1-70b").kv_cache_bytes_per_token() == 80 * 8 * 128 * 2 * 2 == 320 * KIB


def test_deepseek_mla_latent_cache():
    spec = get_model("deepseek-v3")
    assert spec.attention_kind == "mla"
    assert spec.kv_values_per_token_per_layer == 512 + 64
    assert spec.kv_cache_bytes_per_token() == 61 * 576 * 2 == pytest.approx(68.6 * KIB, rel=0.001)
    assert (spec.num_dense_layers, spec.num_moe_layers, spec.num_shared_experts) == (3, 58, 1)
    assert spec.checkpoint_precision == "fp8"
    assert spec.expert_native_precision is None  # FP8 experts can be served upcast


def test_qwen35_linear_state_by_hand():
    spec = get_model("qwen3.5-27b")
    assert (spec.num_linear_attention_layers, spec.num_full_attention_layers) == (48, 16)
    recurrent = 48 * 128 * 128 * 4  # V heads x key dim x value dim x FP32 = 3 MiB per layer
    conv = (2 * 16 * 128 + 48 * 128) * (4 - 1) * 2  # q, k, v channels x (kernel - 1) x BF16
    assert recurrent == 3 * MIB
    assert spec.linear_state_bytes_per_sequence == 48 * (recurrent + conv)
    assert spec.linear_state_bytes_per_sequence == pytest.approx(147 * MIB, rel=0.01)
    assert spec.attention_output_gate


def test_qwen35_397b_state_and_kv():
    spec = get_model("qwen3.5-397b-a17b")
    assert spec.linear_state_bytes_per_sequence == pytest.approx(183 * MIB, rel=0.01)
    assert spec.sequence_state_bytes(1000) == 1000 * 30 * KIB + spec.linear_state_bytes_per_sequence
    assert (spec.num_experts, spec.num_experts_per_token, spec.num_shared_experts) == (512, 10, 1)


def test_gpt_oss_sliding_window_caps_its_kv():
    spec = get_model("gpt-oss-120b")
    assert (spec.num_sliding_window_layers, spec.sliding_window_tokens) == (18, 128)
    cap = 18 * 8 * 64 * 2 * 2 * 128  # layers x KV heads x head_dim x (K,V) x bytes x window
    assert cap == 4.5 * MIB
    assert spec.sequence_state_bytes(100) == 100 * 36 * KIB + 18 * 8 * 64 * 2 * 2 * 100
    assert spec.sequence_state_bytes(10_000) == 10_000 * 36 * KIB + cap
    # Past the window only the full-attention layers grow.
    assert spec.sequence_state_bytes(20_000) - spec.sequence_state_bytes(10_000) == 10_000 * 36 * KIB


def test_gpt_oss_experts_stay_mxfp4():
    spec = get_model("gpt-oss-120b")
    assert spec.expert_native_precision == "mxfp4" and spec.checkpoint_precision == "mxfp4"
    non_expert = spec.attention_params + spec.dense_params_total
    # MXFP4: 4 bits plus one 8-bit E8M0 scale per 32 values = 0.53125 bytes per value.
    expected = spec.embedding_params * 2 + non_expert * 2 + spec.expert_params_total * 0.53125
    assert spec.weight_bytes("bf16") == pytest.approx(expected)
    assert spec.weight_bytes("bf16") < 70e9  # not the 234 GB a BF16 copy of the experts would take


def test_weight_bytes_per_precision():
    spec = get_model("llama-3.1-70b")
    assert spec.weight_bytes("bf16") == 2 * spec.total_params
    # FP8 quantizes everything but the embedding table and the output head.
    assert spec.weight_bytes("fp8") == spec.embedding_params * 2 + (spec.total_params - spec.embedding_params)


@pytest.mark.parametrize("name,precision", [
    ("deepseek-r1", "fp8"), ("minimax-m2.5", "fp8"), ("qwen3-32b", "bf16"), ("gpt-oss-120b", "mxfp4"),
    ("kimi-k2.5", "int4"), ("qwen3.6-27b", "fp4"), ("glm-5", "bf16"),
])
def test_checkpoint_precision(name, precision):
    assert get_model(name).checkpoint_precision == precision


def test_kimi_and_glm_shapes():
    kimi = get_model("kimi-k2.5")
    assert kimi.total_params == pytest.approx(1.03e12, rel=0.01)
    assert kimi.active_params == pytest.approx(32.9e9, rel=0.01)
    assert kimi.expert_native_precision == "int4"  # INT4 routed experts, BF16 scale per 32 values
    glm = get_model("glm-5")
    assert (glm.indexer_num_heads, glm.indexer_head_dim, glm.indexer_topk_tokens) == (32, 128, 2048)
    assert glm.kv_values_per_token_per_layer == 512 + 64 + 128
    # Sparse attention: the main attention reads 2048 tokens at most, the indexer all of them.
    grow = glm.attention_flops_per_token(200_000) - glm.attention_flops_per_token(100_000)
    assert grow == pytest.approx(78 * 2 * 32 * 128 * 100_000)


def test_llama4_chunked_attention_counts_as_window():
    spec = get_model("llama-4-scout")
    assert (spec.num_full_attention_layers, spec.num_sliding_window_layers) == (12, 36)
    assert spec.sliding_window_tokens == 8192
    assert (spec.num_experts, spec.num_experts_per_token, spec.num_shared_experts) == (16, 1, 1)


# ---------------------------------------------------------------- name resolution
@pytest.mark.parametrize("alias,name", [
    ("Qwen/Qwen3-32B", "qwen3-32b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"),
    ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
    ("META-LLAMA/llama-3.1-70b", "llama-3.1-70b"),
    ("QWEN3-32B", "qwen3-32b"),
    ("Llama-3.1-70B-Instruct", "llama-3.1-70b"),
])
def test_aliases_resolve_case_insensitively(alias, name):
    assert is_catalog_model(alias)
    assert get_model(alias).name == name


def test_fp8_variant_keeps_architecture_and_reports_its_checkpoint():
    base, fp8 = get_model("qwen3-235b-a22b"), get_model("qwen/qwen3-235b-a22b-fp8")
    assert fp8.hf_id == "Qwen/Qwen3-235B-A22B-FP8" and fp8.checkpoint_precision == "fp8"
    assert base.checkpoint_precision == "bf16"
    assert fp8.total_params == base.total_params
    assert fp8.kv_cache_bytes_per_token() == base.kv_cache_bytes_per_token()


def test_unknown_name_suggests_closest():
    with pytest.raises(InputError, match="did you mean qwen3-32b"):
        get_model("qwen3-33b")


def test_config_path_and_directory(tmp_path):
    config = _llama_config()
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    from_file, from_dir = get_model(str(folder / "config.json")), get_model(str(folder))
    assert from_file.name == from_dir.name == "my-llama"
    assert from_file.total_params == get_model("llama-3.1-8b").total_params
    assert from_file.hf_id is None and "my-llama" in from_file.source


@pytest.mark.parametrize("content,message", [
    ("{not json", "valid JSON"),
    ("[1, 2]", "a JSON object"),
    (json.dumps({"model_type": "bert"}), "supported: "),
    (json.dumps({"model_type": "llama", "hidden_size": 4096}), "required for model_type .llama."),
])
def test_bad_config_files_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as caught:
        get_model(str(path))
    assert "bad" in str(caught.value)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(InputError, match="absent.json"):
        get_model(str(tmp_path / "absent.json"))


def test_unsupported_model_type_lists_supported():
    with pytest.raises(InputError) as caught:
        spec_from_hf_config({"model_type": "falcon"}, "x", None, "test")
    assert "'falcon'" in str(caught.value) and all(t in str(caught.value) for t in ("llama", "gpt_oss", "deepseek_v3"))
    assert "qwen3_5_moe" in SUPPORTED_MODEL_TYPES


def test_inconsistent_layer_types_rejected():
    config = _llama_config() | {"layer_types": ["full_attention"] * 3}
    with pytest.raises(InputError, match="layer_types"):
        spec_from_hf_config(config, "x", None, "test")


@pytest.mark.parametrize("quantization,precision", [
    (None, "bf16"),
    ({"quant_method": "fp8"}, "fp8"),
    ({"quant_method": "mxfp4"}, "mxfp4"),
    ({"quant_method": "gptq", "bits": 4}, "int4"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "group_size": 32}}}}, "int4"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8}}}}, "fp8"),
])
def test_checkpoint_precision_from_quantization_config(quantization, precision):
    assert checkpoint_precision(quantization) == precision


def test_summary_has_units_and_moe_facts():
    summary = model_summary(get_model("qwen3-30b-a3b"))
    assert summary["kv_cache_bytes_per_token"] == {"bf16": 96 * KIB, "fp8": 48 * KIB}
    assert summary["moe"]["num_experts"] == 128 and summary["moe"]["num_experts_per_token"] == 8
    assert set(summary["weight_bytes"]) == {"bf16", "fp8", "fp4"}


def test_no_io_at_import():
    code = (
        "import layoutopt.model_catalog, layoutopt.cli.catalog\n"
        "from layoutopt.model_catalog.catalog import catalog_entries, _built_in\n"
        "print(catalog_entries.cache_info().currsize, _built_in.cache_info().currsize)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "0"]


def _llama_config() -> dict:
    return {
        "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 131072, "tie_word_embeddings": False,
    }


def test_layer_kinds_without_layer_types():
    # Qwen3.5 configs without layer_types fall back to full_attention_interval.
    config = json.loads(json.dumps(_qwen35_27b_config()))
    del config["text_config"]["layer_types"]
    spec = spec_from_hf_config(config, "q", None, "test")
    assert (spec.num_linear_attention_layers, spec.num_full_attention_layers) == (48, 16)
    # Mistral slides every layer when sliding_window is set; Qwen only with use_sliding_window.
    mistral = spec_from_hf_config(_llama_config() | {"model_type": "mistral", "sliding_window": 4096}, "m", None, "t")
    assert (mistral.num_sliding_window_layers, mistral.sliding_window_tokens) == (32, 4096)
    qwen = spec_from_hf_config(_llama_config() | {"model_type": "qwen3", "sliding_window": 4096}, "q", None, "t")
    assert qwen.num_sliding_window_layers == 0


def _qwen35_27b_config() -> dict:
    from importlib import resources

    path = resources.files("layoutopt.model_catalog").joinpath("data", "hf_configs", "Qwen--Qwen3.5-27B.json")
    return json.loads(path.read_text())
