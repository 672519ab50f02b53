"""Step times: hand-computed rooflines with tolerances, parallelism effects and monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog import get_model
from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.perf_model.expert_routing import expected_distinct_experts
from layoutopt.plan import Layout
from layoutopt.perf_model.step import (
    causal_pairs,
    decode_step_time,
    decode_step_time_array,
    mixed_step_time,
    mixed_step_time_array,
    pipeline_bubble_fraction,
    prefill_time,
)

H100 = get_gpu("H100")
VLLM = get_engine_profile("vllm")
LLAMA8 = get_model("llama-3.1-8b")
LLAMA70 = get_model("llama-3.1-70b")


def test_memory_bound_decode_llama_8b_one_h100():
    step = decode_step_time(LLAMA8, H100, Layout(), batch_size=1, context_tokens=1024)
    # Weights read once: all parameters but the input embedding (a gather), BF16: 15.01 GB.
    weight_bytes = (LLAMA8.total_params - 128256 * 4096) * 2
    kv_bytes = 1024 * 128 * 1024
    activation_bytes = 10 * 4096 * 2 * 32
    hbm_bytes_per_s = 3350e9 * VLLM.memory_efficiency
    assert step.memory_s == pytest.approx((weight_bytes + kv_bytes + activation_bytes) / hbm_bytes_per_s, rel=1e-3)
    assert step.compute_s == 0.0 and step.communication_s == 0.0
    assert step.overhead_s == pytest.approx(VLLM.step_overhead_ms * 1e-3 + 32 * VLLM.layer_overhead_us * 1e-6)
    assert step.bottleneck == "memory"
    # ~16 GB / (3.35 TB/s x efficiency) = 5-6 ms at 0.8-0.9 efficiency, plus the step overhead.
    assert 4.4e-3 < step.memory_s < 7.5e-3
    assert step.total_s == pytest.approx(step.memory_s + step.overhead_s)


def test_compute_bound_prefill_llama_8b():
    step = prefill_time(LLAMA8, H100, Layout(), prompt_tokens=8192)
    gemm_flops = 8192 * 2 * (LLAMA8.total_params - 2 * 128256 * 4096) + 2 * 128256 * 4096  # head: last token
    gemm_s = gemm_flops * (8192 + VLLM.gemm_half_efficiency_tokens) / 8192 / (989e12 * VLLM.gemm_efficiency)
    attention_flops = causal_pairs(8192, 0) * 2 * 32 * (128 + 128) * 32
    attention_s = attention_flops / (989e12 * VLLM.attention_efficiency)
    assert step.compute_s == pytest.approx(gemm_s + attention_s, rel=1e-3)
    assert step.bottleneck == "compute"
    assert 0.15 < step.total_s < 0.4


def test_prefix_cache_hit_shortens_prefill():
    full = prefill_time(LLAMA8, H100, Layout(), 4096)
    cached = prefill_time(LLAMA8, H100, Layout(), 4096, cached_tokens=3072)
    assert cached.total_s < 0.4 * full.total_s


def test_tensor_parallel_trades_memory_time_for_all_reduces():
    tp1 = decode_step_time(LLAMA8, H100, Layout(), 8, 2048)
    tp4 = decode_step_time(LLAMA8, H100, Layout(tp_size=4), 8, 2048)
    assert tp4.memory_s == pytest.approx(tp1.memory_s / 4, rel=0.02)
    # 64 all-reduces of 8 x 4,096 x 2 B = 64 KiB each, latency-bound: engine latency + 1 us NVSwitch
    # hop + 1.5 x 64 KiB at 450 GB/s x 1.064 x 0.174 (smallest measured message) = 1.2 us.
    assert tp4.communication_s == pytest.approx(64 * (VLLM.allreduce_latency_us + 1.0 + 1.2) * 1e-6, rel=0.02)
    assert tp4.total_s < tp1.total_s
    fp8 = Layout(weight_precision="fp8")
    times = [decode_step_time(LLAMA70, H100, fp8.model_copy(update={"tp_size": tp}), 4, 1500).total_s
             for tp in (2, 4, 8)]
    assert times[0] > times[1] > times[2]


def test_pipeline_parallel_keeps_decode_latency_and_multiplies_throughput():
    tp4 = Layout(tp_size=4, weight_precision="fp8")
    tp4pp2 = Layout(tp_size=4, pp_size=2, weight_precision="fp8")
    one = decode_step_time(LLAMA70, H100, tp4, 1, 2048).total_s
    piped = decode_step_time(LLAMA70, H100, tp4pp2, 1, 2048).total_s
    assert piped >= one  # same work per token plus stage hops: latency does not drop
    # Two sequences ride two micro-batches: the same time per token, twice the tokens per second.
    assert decode_step_time(LLAMA70, H100, tp4pp2, 2, 2048).total_s == pytest.approx(piped)
    assert prefill_time(LLAMA70, H100, tp4pp2, 4096).total_s >= prefill_time(LLAMA70, H100, tp4, 4096).total_s
    assert pipeline_bubble_fraction(4, 4) == pytest.approx(3 / 7)
    assert pipeline_bubble_fraction(1, 1) == 0.0


def test_expected_distinct_experts():
    assert expected_distinct_experts(128, 8, 1) == pytest.approx(8.0)
    # Below uniform routing's 128 (1 - (120/128)^16) = 82.4: the routers' popularity skew
    # (expert_routing.EXPERT_POPULARITY_ZIPF; tests/test_perf_moe_precision.py checks it against a simulation).
    assert 70.0 < expected_distinct_experts(128, 8, 16) < 128 * (1 - (120 / 128) ** 16)
    assert expected_distinct_experts(128, 8, 10_000) == pytest.approx(128.0)


def test_moe_decode_reads_only_touched_experts():
    moe = get_model("qwen3-30b-a3b")
    layout = Layout(tp_size=1)
    hbm = 3350e9 * VLLM.memory_efficiency
    one = decode_step_time(moe, H100, layout, 1, 1)
    active_bytes = (moe.active_params - 151936 * 2048) * 2
    assert one.memory_s == pytest.approx(active_bytes / hbm, rel=0.02)
    many = decode_step_time(moe, H100, layout, 512, 1)
    all_bytes = (moe.total_params - 151936 * 2048) * 2
    assert many.memory_s + many.compute_s > 0.9 * all_bytes / hbm


def test_expert_parallel_inside_tp_adds_no_exchange_and_attention_dp_adds_the_gather():
    moe = get_model("qwen3-235b-a22b")
    ep1 = decode_step_time(moe, H100, Layout(tp_size=8, weight_precision="fp8"), 64, 2048)
    ep8 = decode_step_time(moe, H100, Layout(tp_size=8, ep_size=8, weight_precision="fp8"), 64, 2048)
    # Without attention DP every TP rank already holds all tokens: no dispatch runs, the expert outputs
    # are all-reduced as with TP-split experts (compute.moe_exchange_time_s); only the expert time differs.
    assert ep8.communication_s == pytest.approx(ep1.communication_s)
    assert ep8.memory_s != pytest.approx(ep1.memory_s)
    # Attention DP: each rank's 8 sequences are gathered to all 8 MoE ranks and reduce-scattered back.
    dp = decode_step_time(moe, H100, Layout(tp_size=1, dp_size=8, ep_size=8, weight_precision="fp8"), 64, 2048)
    assert dp.communication_s > 0 and dp.total_s > 0


def test_mixed_step_reduces_to_decode_and_adds_the_chunk():
    layout = Layout(tp_size=2)
    decode = decode_step_time(LLAMA8, H100, layout, 32, 3000)
    assert mixed_step_time(LLAMA8, H100, layout, 0, 0, 32, 3000).total_s == pytest.approx(decode.total_s)
    mixed = mixed_step_time(LLAMA8, H100, layout, 2048, 1024, 32, 3000)
    assert mixed.total_s > decode.total_s
    assert mixed.total_s < decode.total_s + prefill_time(LLAMA8, H100, layout, 3072, cached_tokens=1024).total_s


def test_fp8_kv_and_dcp_cut_long_context_decode():
    bf16 = decode_step_time(LLAMA8, H100, Layout(), 32, 32768)
    fp8 = decode_step_time(LLAMA8, H100, Layout(kv_precision="fp8"), 32, 32768)
    assert fp8.memory_s < 0.7 * bf16.memory_s
    hybrid = get_model("qwen3.5-397b-a17b")
    base = decode_step_time(hybrid, H100, Layout(tp_size=8, ep_size=8, weight_precision="fp8"), 64, 131072)
    dcp = decode_step_time(hybrid, H100, Layout(tp_size=8, ep_size=8, dcp_size=4, weight_precision="fp8"), 64, 131072)
    assert dcp.communication_s > base.communication_s
    assert dcp.total_s < base.total_s


def test_prefill_context_parallel_cuts_long_prompt_ttft():
    tp4 = Layout(tp_size=4, weight_precision="fp8")
    pcp2 = Layout(tp_size=4, pcp_size=2, weight_precision="fp8")
    single = prefill_time(LLAMA70, H100, tp4, 32768).total_s
    split = prefill_time(LLAMA70, H100, pcp2, 32768).total_s
    assert split < 0.6 * single


def test_array_matches_scalar_and_unknown_engine_fails():
    layout = Layout(tp_size=4, weight_precision="fp8")
    batches, contexts = np.array([1, 7, 64, 300]), np.array([100.0, 2000.0, 8000.0, 30000.0])
    times = decode_step_time_array(LLAMA70, H100, layout, batches, contexts, engine="trtllm")
    for b, c, t in zip(batches, contexts, times):
        assert t == pytest.approx(decode_step_time(LLAMA70, H100, layout, int(b), c, engine="trtllm").total_s)
    with pytest.raises(InputError, match="did you mean vllm"):
        decode_step_time(LLAMA8, H100, Layout(), 1, 1, engine="vlm")


@pytest.mark.parametrize("name,layout", [
    ("llama-3.1-70b", Layout(tp_size=4, pp_size=2, weight_precision="fp8")),
    ("deepseek-v3", Layout(tp_size=8, dp_size=2, ep_size=16, dcp_size=8, weight_precision="fp8")),
    ("gpt-oss-120b", Layout(tp_size=2)),  # sliding-window layers
    ("glm-5", Layout(tp_size=8, weight_precision="fp8")),  # sparse-attention indexer
])
def test_mixed_array_matches_scalar(name, layout):
    """The vectorized mixed step (colocated cost tables) is the scalar one at every point, the
    sliding-window and sparse-attention pair counts included (all three of their cases)."""
    model = get_model(name)
    chunks = np.array([1.0, 200.0, 4000.0, 60000.0])[None, :, None]
    cached = np.array([0.0, 100.0, 9000.0])[None, None, :]
    batches = np.array([1.0, 16.0, 200.0])[:, None, None]
    times = mixed_step_time_array(model, H100, layout, chunks, cached, batches, 3000.0)
    for i, j, k in np.ndindex(times.shape):
        scalar = mixed_step_time(model, H100, layout, int(chunks[0, j, 0]), cached[0, 0, k], int(batches[i, 0, 0]),
                                 3000.0).total_s
        assert times[i, j, k] == pytest.approx(scalar, rel=1e-12)


CASES = [
    ("llama-3.1-8b", Layout()),
    ("llama-3.1-70b", Layout(tp_size=4, pp_size=2, weight_precision="fp8")),
    ("qwen3-235b-a22b", Layout(tp_size=8, ep_size=8, weight_precision="fp8")),
    ("deepseek-v3", Layout(tp_size=8, dp_size=2, ep_size=16, dcp_size=8, weight_precision="fp8")),
    ("qwen3.5-397b-a17b", Layout(tp_size=4, dp_size=2, ep_size=8, weight_precision="fp8")),
    ("gpt-oss-120b", Layout(tp_size=2, pcp_size=2)),
]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(CASES), st.integers(1, 1024), st.integers(1, 8), st.floats(1, 200_000), st.floats(1, 4))
def test_larger_batch_and_longer_context_never_shorten_decode(case, batch, more, context, factor):
    model, layout = get_model(case[0]), case[1]
    base = decode_step_time(model, H100, layout, batch, context).total_s
    assert decode_step_time(model, H100, layout, batch + more, context).total_s >= base * (1 - 1e-12)
    assert decode_step_time(model, H100, layout, batch, context * factor).total_s >= base * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CASES), st.integers(1, 32_000), st.integers(1, 8), st.integers(1, 4))
def test_larger_prefill_batch_or_prompt_never_shortens_the_step(case, prompt, batch, factor):
    model, layout = get_model(case[0]), case[1]
    base = prefill_time(model, H100, layout, prompt, batch).total_s
    assert prefill_time(model, H100, layout, prompt, batch * factor).total_s >= base * (1 - 1e-12)
    assert prefill_time(model, H100, layout, prompt * factor, batch).total_s >= base * (1 - 1e-12)
    chunk = mixed_step_time(model, H100, layout, prompt, 0, batch, 2048).total_s
    assert mixed_step_time(model, H100, layout, prompt, 0, batch * factor, 2048).total_s >= chunk * (1 - 1e-12)


def test_mla_decode_attention_uses_the_absorbed_form():
    # DeepSeek-V3 decode attention per cached token and layer: 128 heads x 2 x (512 + 64 + 512) FLOPs
    # over a 576-value latent (1,152 B): ~242 FLOP/B, compute-bound at TP1 on H200 with 0.45 efficiency.
    deepseek, h200 = get_model("deepseek-v3"), get_gpu("H200")
    layout = Layout(weight_precision="fp8")
    short = decode_step_time(deepseek, h200, layout, 16, 1000)
    long = decode_step_time(deepseek, h200, layout, 16, 9000)
    flops = 16 * 8000 * 61 * 2 * 128 * (512 + 64 + 512)
    assert long.total_s - short.total_s == pytest.approx(flops / (989e12 * VLLM.attention_efficiency), rel=1e-6)


def test_sparse_attention_indexer_costs_prefill_but_caps_attention():
    glm = get_model("glm-5")  # DeepSeek sparse attention: top-2,048 keys per query
    layout = Layout(tp_size=8, ep_size=8, weight_precision="fp8")
    h200 = get_gpu("H200")
    t8k, t32k = (prefill_time(glm, h200, layout, n).compute_s for n in (8192, 32768))
    assert 4 < t32k / t8k < 8  # linear GEMMs plus a quadratic but cheap indexer, not 16x


def test_tp16_across_two_nodes_decodes_with_hierarchical_all_reduces():
    # DeepSeek-R1 TP16 (no EP) on 2 x 8 H100, SGLang, batch 1: 61 attention + 3 dense-FFN + 58 MoE
    # all-reduces of 7,168 x 2 B, each over NVLink inside a node and one NIC per GPU across:
    # NCCL 20 us + 2 NVLink hops + 2 network hops + 0.39 us of bytes = 32.39 us -> 3.95 ms a step
    # (a flat 16-GPU ring over the NIC charged 156 us each, 19 ms). SGLang measured ~8-9 ms TPOT.
    from layoutopt.perf_model import collectives as coll
    from layoutopt.perf_model.coefficients import forward_coefficients
    from layoutopt.perf_model.links import SpanningGroup

    deepseek = get_model("deepseek-r1")
    layout = Layout(tp_size=16, weight_precision="fp8")
    c = forward_coefficients(deepseek, H100, layout, "sglang", None)
    assert isinstance(c.tp_link, SpanningGroup) and c.tp_link.num_domains == 2
    latency_us = get_engine_profile("sglang").allreduce_latency_us
    per_allreduce_s = coll.allreduce_time_s(7168 * 2.0, 16, c.tp_link, latency_us)
    # NCCL's floor (or the engine's larger latency) + 2 NVLink hops + 2 network hops + bytes.
    assert per_allreduce_s == pytest.approx((max(20.0, latency_us) + 12.39) * 1e-6, rel=1e-3)
    step = decode_step_time(deepseek, H100, layout, 1, 1500, engine="sglang")
    assert step.communication_s == pytest.approx(122 * per_allreduce_s, rel=1e-6)
    assert 6e-3 < step.total_s < 10e-3


def test_groups_that_fit_a_node_stay_on_nvlink_inside_a_multi_node_instance():
    # TP4 x DP4 with EP16 on 16 H100: TP all-reduces inside a node, only the EP all-to-all spans.
    from layoutopt.perf_model.coefficients import forward_coefficients
    from layoutopt.perf_model.links import SpanningGroup, nvlink

    layout = Layout(tp_size=4, dp_size=4, ep_size=16, weight_precision="fp8")
    c = forward_coefficients(get_model("qwen3-235b-a22b"), H100, layout, "vllm", None)
    assert c.tp_link == nvlink(H100)
    assert isinstance(c.ep_link, SpanningGroup) and c.ep_link.num_domains == 2


def test_steps_with_prompt_tokens_last_at_least_the_eager_launch_of_their_layers():
    # A profile whose engine graphs only decode steps: 500 us of host launches per layer.
    eager = VLLM.model_copy(update={"eager_layer_launch_us": 500.0, "graphed_prompt_tokens": 0, "name": "eager"})
    floor_s = LLAMA8.num_layers * 500e-6  # 32 layers: 16 ms
    short = prefill_time(LLAMA8, H100, Layout(tp_size=8), 16, engine=eager)
    graphed = prefill_time(LLAMA8, H100, Layout(tp_size=8), 16, engine=VLLM)
    assert graphed.total_s < floor_s  # 16 tokens on 8 GPUs: the GPU work is far below the floor
    assert short.total_s == pytest.approx(floor_s + VLLM.step_overhead_ms * 1e-3, rel=1e-9)
    # GPU work above the floor hides it: an 8k-token prompt on one GPU is unchanged.
    long_eager = prefill_time(LLAMA8, H100, Layout(), 8192, engine=eager)
    assert long_eager.total_s == pytest.approx(prefill_time(LLAMA8, H100, Layout(), 8192, engine=VLLM).total_s)
    assert long_eager.total_s > floor_s
    # Decode steps are graphed: no floor; a mixed step carries a chunk, so it has one.
    assert decode_step_time(LLAMA8, H100, Layout(), 8, 1024, engine=eager).total_s == pytest.approx(
        decode_step_time(LLAMA8, H100, Layout(), 8, 1024, engine=VLLM).total_s)
    mixed = mixed_step_time(LLAMA8, H100, Layout(tp_size=8), 16, 0, 8, 1024, engine=eager)
    assert mixed.total_s == pytest.approx(floor_s + VLLM.step_overhead_ms * 1e-3, rel=1e-9)
    # The array form agrees with the scalar one, with and without a chunk.
    both = mixed_step_time_array(LLAMA8, H100, Layout(tp_size=8), np.array([0.0, 16.0]), np.array([0.0, 0.0]),
                                 np.array([8.0, 8.0]), 1024.0, engine=eager)
    assert both[1] == pytest.approx(mixed.total_s)
    assert both[0] == pytest.approx(mixed_step_time(LLAMA8, H100, Layout(tp_size=8), 0, 0, 8, 1024,
                                                    engine=VLLM).total_s)


def test_mla_layers_add_their_own_eager_launch_time():
    # 500 us per layer and 1,000 more per MLA layer: DeepSeek-V3's 61 MLA layers take 91.5 ms to launch,
    # Llama's GQA layers only the per-layer time, whatever the MLA term.
    eager = VLLM.model_copy(update={"eager_layer_launch_us": 500.0, "eager_mla_layer_launch_us": 1000.0,
                                    "graphed_prompt_tokens": 0, "name": "eager-mla"})
    per_layer_only = eager.model_copy(update={"eager_mla_layer_launch_us": 0.0})
    deepseek, layout = get_model("deepseek-v3"), Layout(tp_size=8, ep_size=8, weight_precision="fp8")
    assert deepseek.attention_kind == "mla" and deepseek.num_layers == 61
    short = prefill_time(deepseek, H100, layout, 16, engine=eager)
    assert short.total_s == pytest.approx(61 * 1500e-6 + VLLM.step_overhead_ms * 1e-3, rel=1e-9)
    assert prefill_time(deepseek, H100, layout, 16, engine=per_layer_only).total_s == pytest.approx(
        61 * 500e-6 + VLLM.step_overhead_ms * 1e-3, rel=1e-9)
    assert prefill_time(LLAMA8, H100, Layout(tp_size=8), 16, engine=eager).total_s == pytest.approx(
        prefill_time(LLAMA8, H100, Layout(tp_size=8), 16, engine=per_layer_only).total_s)
    # The MLA term alone (no per-layer one) still makes the step eager.
    mla_only = eager.model_copy(update={"eager_layer_launch_us": 0.0})
    assert prefill_time(deepseek, H100, layout, 16, engine=mla_only).total_s == pytest.approx(
        61 * 1000e-6 + VLLM.step_overhead_ms * 1e-3, rel=1e-9)


@pytest.mark.parametrize("tp,pp,batch,cached", [(1, 1, 1, 0), (4, 2, 3, 512), (8, 1, 16, 100)])
def test_prefill_time_s_is_prefill_time_total(tp, pp, batch, cached):
    """The optimizer's float path gives the StepTime's total bit for bit."""
    from layoutopt.perf_model.step import prefill_time_s

    layout = Layout(tp_size=tp, pp_size=pp, weight_precision="fp8")
    for engine in ("vllm", "sglang", "trtllm"):
        assert prefill_time_s(LLAMA70, H100, layout, 2048, batch, cached, engine=engine) == prefill_time(
            LLAMA70, H100, layout, 2048, batch, cached, engine=engine).total_s


def test_attention_dp_prompt_chunk_sits_on_one_rank():
    """Lockstep DP ranks: a prompt's chunk on the one rank it was routed to costs that rank its whole
    attention and dense GEMMs (the step waits for it), more than the same tokens spread over every
    rank; the MoE layers see the same tokens either way. Without DP the placement changes nothing."""
    model = get_model("qwen3-30b-a3b")
    dep = Layout(tp_size=1, dp_size=4, ep_size=4)
    one = mixed_step_time(model, H100, dep, 2048, 0, 32, 2048, chunk_ranks=1)
    spread = mixed_step_time(model, H100, dep, 2048, 0, 32, 2048, chunk_ranks=4)
    assert one.total_s > spread.total_s * 1.2
    # The default spreads an instance-wide chunk over the ranks (the simulator's chunk budget).
    assert mixed_step_time(model, H100, dep, 2048, 0, 32, 2048).total_s == spread.total_s
    array = mixed_step_time_array(model, H100, dep, np.array([2048.0]), np.array([0.0]), np.array([32.0]), 2048.0,
                                  chunk_ranks=1)
    assert float(array[0]) == pytest.approx(one.total_s, rel=1e-9)
    tp = Layout(tp_size=4, ep_size=4)
    assert (mixed_step_time(model, H100, tp, 2048, 0, 32, 2048, chunk_ranks=1).total_s
            == mixed_step_time(model, H100, tp, 2048, 0, 32, 2048, chunk_ranks=4).total_s)


def test_attention_dp_lone_prompt_moe_takes_its_tokens_once():
    """A lone prompt on a DP instance: the other ranks run empty (dummy) batches and prompt steps gather
    unpadded, so the experts see the prompt's tokens once, not once per rank: one prompt on dp4 is
    cheaper than four prompts (one per rank), which cost the same per rank and four times the experts."""
    model = get_model("qwen3-30b-a3b")
    dep = Layout(tp_size=1, dp_size=4, ep_size=4)
    lone = prefill_time(model, H100, dep, 4096, batch_size=1).total_s
    full = prefill_time(model, H100, dep, 4096, batch_size=4).total_s
    assert lone < full


@pytest.mark.parametrize("model,layout", [
    ("llama-3.1-70b", Layout(tp_size=2, pp_size=4, weight_precision="fp8")),
    ("deepseek-v3", Layout(tp_size=1, pp_size=2, ep_size=8, dp_size=8, weight_precision="fp8")),
    ("deepseek-v3", Layout(tp_size=8, pp_size=4, dcp_size=1, weight_precision="fp8")),
])
def test_prefill_shares_its_stage_column_across_pipeline_depths(model, layout):
    """Layouts that differ only in pp share one memoized prefill column: exact, because the
    coefficients differ only in the fields forward_pass_costs never reads (pp, pp_link), and the
    shared pass equals the pass computed from the pipelined layout's own coefficients."""
    import dataclasses

    from layoutopt.perf_model import step
    from layoutopt.perf_model.coefficients import forward_coefficients

    spec, gpu = get_model(model), get_gpu("H200")
    flat = layout.model_copy(update={"pp_size": 1})
    for engine in ("vllm", "sglang", "trtllm"):
        piped, column = (forward_coefficients(spec, gpu, x, engine, None) for x in (layout, flat))
        assert piped.pp == layout.pp_size and column.pp == 1
        assert dataclasses.replace(piped, pp=1, pp_link=column.pp_link) == column
        # Both depths read one column object, equal field by field to the one-stage layout's coefficients.
        step._columns.clear()
        shared = step._column_coefficients(spec, gpu, layout, engine, None)
        assert shared == column and shared.pp == 1
        assert step._column_coefficients(spec, gpu, flat, engine, None) is shared
        for prompt, batch, cached in [(2048, 1, 0), (3000, 3, 1000), (17, 16, 5)]:
            step._prefill_column_memo.clear()
            total = step.prefill_time_s(spec, gpu, layout, prompt, batch, cached, engine=engine)
            # The pp = 1 layout's pass is the memo hit the pipelined one reads ...
            assert step.prefill_time_s(spec, gpu, flat, prompt, batch, cached, engine=engine) == step.prefill_time(
                spec, gpu, flat, prompt, batch, cached, engine=engine).total_s
            assert len(step._prefill_column_memo) == 1
            # ... and the pipelined total is its own coefficients' pass plus the stage hops, unmemoized.
            own = step._prefill_column(piped, spec, layout.dp_size, layout.pcp_size, prompt, batch, cached)
            assert own == step._prefill_column(column, spec, layout.dp_size, layout.pcp_size, prompt, batch, cached)
            tokens = -(-batch // layout.dp_size) * (prompt - cached) / layout.pcp_size
            expected = (own[0] + own[1] + (own[2] + step._stage_hop_s(piped, tokens, layout.pp_size - 1))
                        + (own[3] + piped.profile.step_overhead_ms * 1e-3))
            assert total == float(expected)
