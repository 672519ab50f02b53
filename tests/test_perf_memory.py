"""Memory per GPU and layout rules: hand-computed sizes with tolerances, and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog import get_model
from layoutopt.plan import Layout
from layoutopt.perf_model.memory import (
    check_fits,
    check_layout,
    max_batch_size,
    memory_breakdown,
    sglang_mem_fraction_static,
    weight_bytes_per_gpu,
)

GIB = 2.0**30
H100 = get_gpu("H100")


def test_llama_8b_weights_and_kv_on_one_h100():
    llama8 = get_model("llama-3.1-8b")
    mem = memory_breakdown(llama8, H100, Layout(), context_tokens=2048)
    # 8.03 B parameters x 2 B = 16.06 GB (both embedding tables included).
    assert mem.weights_bytes == pytest.approx(16.06e9, rel=0.01)
    # KV: 2 x 32 layers x 8 heads x 128 x 2 B = 128 KiB per token -> 256 MiB at 2,048 tokens.
    assert mem.kv_bytes_per_sequence == pytest.approx(2048 * 128 * 1024)
    # vLLM 0.33: gpu_memory_utilization 0.92 x total minus the profiled peak.
    usable = 0.92 * H100.memory_bytes
    assert mem.usable_bytes == pytest.approx(usable)
    assert mem.kv_capacity_bytes == pytest.approx(usable - mem.weights_bytes - mem.activation_bytes
                                                  - mem.reserve_bytes)
    # CUDA graphs (~1 GiB), no NCCL buffers for a single GPU; the CUDA context is outside the 0.92.
    assert mem.reserve_bytes == pytest.approx(1.0 * GIB)
    assert 0.3 * GIB < mem.activation_bytes < 3 * GIB
    assert mem.max_batch_size == int(mem.kv_capacity_bytes // mem.kv_bytes_per_sequence)
    assert 200 < mem.max_batch_size < 240


def test_llama_70b_fp8_needs_two_h100_except_at_short_contexts_on_vllm():
    llama70 = get_model("llama-3.1-70b")
    with pytest.raises(LayoutError, match=r"misses by \d+\.\d GiB"):
        check_fits(llama70, H100, Layout(weight_precision="fp8"), context_tokens=2048, engine="trtllm")
    assert max_batch_size(llama70, H100, Layout(weight_precision="fp8"), 2048, engine="sglang") == 0
    # vLLM's 0.92 budget less ~1 GiB leaves a few GiB of KV next to 67.7 GiB of weights: a handful
    # of 2,048-token sequences (vLLM does start Llama-3.1-70B FP8 on one H100 at short contexts).
    assert 1 <= max_batch_size(llama70, H100, Layout(weight_precision="fp8"), 2048) < 10
    mem = check_fits(llama70, H100, Layout(tp_size=2, weight_precision="fp8"), context_tokens=2048)
    # 70.6 B at 1 B/value with BF16 embeddings (2 x 1.05 B values): ~36 GB per GPU at TP2.
    assert mem.weights_bytes == pytest.approx((70.55e9 + 2 * 1.05e9) / 2, rel=0.02)
    # KV heads (8) split over TP2: 160 KiB per token per GPU.
    assert mem.kv_bytes_per_sequence == pytest.approx(2048 * 160 * 1024)
    assert mem.max_batch_size > 50


def test_qwen3_32b_bf16_fits_one_h100_only_for_a_few_sequences():
    qwen32 = get_model("qwen3-32b")
    one = memory_breakdown(qwen32, H100, Layout(), 4096)
    two = memory_breakdown(qwen32, H100, Layout(tp_size=2), 4096)
    assert one.weights_bytes == pytest.approx(32.76e9 * 2, rel=0.01)  # 32.8 B params in BF16
    assert 0 < one.max_batch_size < 16 < two.max_batch_size


def test_dcp_shrinks_kv_per_gpu_when_tp_exceeds_kv_heads():
    hybrid = get_model("qwen3.5-397b-a17b")  # 2 KV heads, linear-attention state per sequence
    state_per_gpu = hybrid.linear_state_bytes_per_sequence / 8
    base = memory_breakdown(hybrid, H100, Layout(tp_size=8, ep_size=8, weight_precision="fp8"), 65536)
    dcp4 = memory_breakdown(hybrid, H100, Layout(tp_size=8, ep_size=8, dcp_size=4, weight_precision="fp8"), 65536)
    # TP8 over 2 KV heads replicates each head 4 times; DCP 4 shards the sequence instead.
    assert base.kv_bytes_per_sequence - state_per_gpu == pytest.approx(
        65536 * hybrid.kv_cache_bytes_per_token("bf16") / 2)
    assert dcp4.kv_bytes_per_sequence - state_per_gpu == pytest.approx(
        (base.kv_bytes_per_sequence - state_per_gpu) / 4)
    assert dcp4.max_batch_size > base.max_batch_size
    check_layout(hybrid, H100, Layout(tp_size=8, ep_size=8, dcp_size=4))
    with pytest.raises(LayoutError, match="dcp_size 8 exceeds tp_size / KV heads = 8 / 2 = 4"):
        check_layout(hybrid, H100, Layout(tp_size=8, ep_size=8, dcp_size=8))


def test_mla_latent_is_replicated_over_tp_and_sharded_by_dcp():
    deepseek = get_model("deepseek-v3")
    tp8 = memory_breakdown(deepseek, get_gpu("H200"), Layout(tp_size=8, ep_size=8, weight_precision="fp8"), 4096)
    # 61 layers x 576 values x 2 B = 70,272 B per token, whole on every rank.
    assert tp8.kv_bytes_per_sequence == pytest.approx(4096 * 61 * 576 * 2)
    dcp8 = memory_breakdown(deepseek, get_gpu("H200"),
                            Layout(tp_size=8, ep_size=8, dcp_size=8, weight_precision="fp8"), 4096)
    assert dcp8.kv_bytes_per_sequence == pytest.approx(tp8.kv_bytes_per_sequence / 8)


def test_sliding_window_layers_are_capped_and_fp8_kv_halves():
    oss = get_model("gpt-oss-120b")
    layout = Layout(tp_size=2)
    short = memory_breakdown(oss, H100, layout, 128).kv_bytes_per_sequence
    long = memory_breakdown(oss, H100, layout, 128 + 10000).kv_bytes_per_sequence
    per_token_full = 18 * 8 * 128 * 2 / 2  # 18 full layers, 8 KV heads x (64 + 64), BF16, over TP2
    assert long - short == pytest.approx(10000 * per_token_full)
    fp8 = memory_breakdown(oss, H100, Layout(tp_size=2, kv_precision="fp8"), 128 + 10000).kv_bytes_per_sequence
    assert fp8 == pytest.approx(long / 2)


def test_pipeline_stages_split_layers_and_keep_one_embedding_table():
    llama70 = get_model("llama-3.1-70b")
    pp2 = weight_bytes_per_gpu(llama70, Layout(pp_size=2))
    table = 128256 * 8192 * 2
    assert pp2 == pytest.approx((llama70.weight_bytes("bf16") - 2 * table) / 2 + table)


def test_reserve_adds_nccl_buffers_for_multi_gpu_instances():
    llama8 = get_model("llama-3.1-8b")
    assert memory_breakdown(llama8, H100, Layout(tp_size=2), 1).reserve_bytes == pytest.approx(1.4 * GIB)
    assert memory_breakdown(llama8, H100, Layout(tp_size=1), 1, engine="trtllm").reserve_bytes == pytest.approx(
        3.5 * GIB)


def test_sglang_kv_is_its_static_fraction_of_the_gpu_minus_weights():
    """mem_fraction_static = (total - reserved) / total, reserved = 512 MiB + 1.5 MiB x chunked_prefill_size
    + tp pp / 8 GiB + 2 MiB x decode graph max_bs (memory_hook.py:309-325, SGLang 0.5.23)."""
    llama8 = get_model("llama-3.1-8b")
    total_mib = H100.memory_bytes / 2**20
    # H100 (80 GiB): chunk 8,192, max_bs 256 at tp 1: 512 + 12,288 + 128 + 512 = 13,440 MiB.
    assert sglang_mem_fraction_static(H100, Layout()) == pytest.approx(round((total_mib - 13440) / total_mib, 3))
    mem = memory_breakdown(llama8, H100, Layout(), 2048, engine="sglang")
    static = sglang_mem_fraction_static(H100, Layout())
    assert mem.kv_capacity_bytes == pytest.approx(static * H100.memory_bytes - mem.weights_bytes)
    # The report's --mem-fraction-static is (weights + KV) / total: the same number.
    assert (mem.weights_bytes + mem.kv_capacity_bytes) / H100.memory_bytes == pytest.approx(static)
    # The 10 GiB floor on > 60 GiB GPUs binds when the chunk is small; DP attention adds graph padding.
    assert sglang_mem_fraction_static(H100, Layout(), chunked_prefill_tokens=2048) == pytest.approx(
        round((total_mib - 10240) / total_mib, 3))
    b200 = get_gpu("B200")
    dp8 = Layout(tp_size=1, dp_size=8, ep_size=8)
    assert sglang_mem_fraction_static(b200, dp8) < sglang_mem_fraction_static(b200, Layout(tp_size=8))
    # An explicit fraction replaces the rule.
    pinned = memory_breakdown(llama8, H100, Layout(), 2048, engine="sglang", gpu_memory_utilization=0.7)
    assert pinned.kv_capacity_bytes == pytest.approx(0.7 * H100.memory_bytes - pinned.weights_bytes)


def test_engine_kv_policies_differ_as_their_sources_say():
    llama8 = get_model("llama-3.1-8b")
    kv = {e: memory_breakdown(llama8, H100, Layout(), 2048, engine=e).kv_capacity_bytes
          for e in ("vllm", "sglang", "trtllm")}
    # vLLM budgets 0.92 of the GPU less ~1 GiB; SGLang reserves ~13 GiB; the fixed policy 0.9 less 3.5 GiB.
    assert kv["vllm"] > kv["trtllm"] > kv["sglang"]
    assert kv["vllm"] - kv["trtllm"] == pytest.approx(0.02 * H100.memory_bytes + 2.5 * GIB, rel=0.01)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        memory_breakdown(llama8, H100, Layout(), 2048, gpu_memory_utilization=1.5)


@pytest.mark.parametrize("model,layout,rule", [
    ("llama-3.1-8b", Layout(tp_size=3), "attention heads 32 must be divisible by tp_size 3"),
    ("qwen3-30b-a3b", Layout(tp_size=8), None),
    ("llama-3.1-8b", Layout(tp_size=16), "exceed the 8-GPU local domain"),
    ("llama-3.1-8b", Layout(pp_size=64), "pp_size 64 exceeds the model's 32 layers"),
    ("mixtral-8x7b", Layout(tp_size=8, dp_size=2, ep_size=16), "routed experts 8 must be divisible by ep_size 16"),
    ("llama-3.1-8b", Layout(tp_size=2, ep_size=2), "need a MoE model"),
    ("llama-3.1-8b", Layout(weight_precision="fp4"), None),  # weight-only FP4 (dequantized to BF16)
    ("qwen3.5-27b", Layout(tp_size=8), None),
])
def test_check_layout_rules(model, layout, rule):
    if rule is None:
        check_layout(get_model(model), H100, layout)
        return
    with pytest.raises(LayoutError, match=rule):
        check_layout(get_model(model), H100, layout)


def test_check_layout_precision_and_cross_domain():
    llama8 = get_model("llama-3.1-8b")
    # FP8 weights on A100 (no FP8 math) are served weight-only, dequantized into BF16 GEMMs.
    check_layout(llama8, get_gpu("A100-80GB-SXM"), Layout(weight_precision="fp8"))
    check_layout(llama8, H100, Layout(tp_size=16), allow_cross_domain=True)
    # A PCIe server is the local domain of PCIe cards (links.local_domain): TP8 inside it is no
    # cross-domain layout; TP16 over two servers is.
    check_layout(llama8, get_gpu("L40S"), Layout(tp_size=8))
    with pytest.raises(LayoutError, match="8-GPU local domain of L40S"):
        check_layout(llama8, get_gpu("L40S"), Layout(tp_size=16))
    check_layout(get_model("llama-3.1-405b"), H100, Layout(tp_size=8, pp_size=2))


MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b", "deepseek-v3",
          "qwen3.5-397b-a17b", "gpt-oss-120b", "mixtral-8x7b"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
       st.sampled_from(["bf16", "fp8"]), st.sampled_from([1, 2]))
def test_more_tp_never_raises_weight_bytes_per_gpu(model_name, tp, factor, precision, pp):
    model = get_model(model_name)
    small = Layout(tp_size=tp, pp_size=pp, weight_precision=precision)
    large = Layout(tp_size=tp * factor, pp_size=pp, weight_precision=precision)
    assert weight_bytes_per_gpu(model, large) <= weight_bytes_per_gpu(model, small) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.floats(1, 100_000), st.floats(1.0, 4.0))
def test_longer_context_never_fits_more_sequences(model_name, context, factor):
    model = get_model(model_name)
    layout = Layout(tp_size=8, weight_precision="fp8")
    assert max_batch_size(model, H100, layout, context * factor) <= max_batch_size(model, H100, layout, context)


def test_weight_only_formats_need_a_kernel_for_them():
    from layoutopt.hardware_catalog.catalog import get_gpu

    check_layout(get_model("llama-3.1-8b"), H100, Layout(weight_precision="int4"))
    with pytest.raises(LayoutError, match="MI300X has no int4 support"):
        check_layout(get_model("llama-3.1-8b"), get_gpu("MI300X"), Layout(weight_precision="int4"))
