"""Expert load imbalance, MoE kernel costs and weight-only precisions (hand-computed)."""

from __future__ import annotations

import math

import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.calibration import get_engine_profile
import numpy as np

from layoutopt.perf_model.coefficients import forward_coefficients
from layoutopt.perf_model.compute import forward_pass_costs
from layoutopt.perf_model.expert_routing import (
    EXPERT_POPULARITY_ZIPF,
    expert_load_imbalance,
    expected_distinct_experts,
    max_rank_touched_experts,
    touched_expert_share,
)
from layoutopt.perf_model.precision import compute_precision, is_weight_only, weight_precision_supported
from layoutopt.plan import Layout

H100, B200 = get_gpu("H100"), get_gpu("B200")


def test_expert_imbalance_falls_with_the_batch_to_the_hot_expert_skew():
    # 512 routed pairs over 8 ranks: 1 + sqrt(2 ln 8 x 7 / 512) = 1.2385.
    assert expert_load_imbalance(512.0, 8, 1.0) == pytest.approx(1 + math.sqrt(2 * math.log(8) * 7 / 512))
    assert expert_load_imbalance(512.0, 8, 1.2) == pytest.approx(1.2 * 1.2385, rel=1e-3)
    assert expert_load_imbalance(1e9, 8, 1.3) == pytest.approx(1.3, rel=1e-3)
    assert expert_load_imbalance(1.0, 8, 1.3) == 8.0  # one pair: all of it on one rank
    assert expert_load_imbalance(64.0, 1, 1.3) == 1.0  # no EP, no rank imbalance


def _simulated_routing(rng, tokens: int, skew: float) -> np.ndarray:
    """Touched experts of one step: each token picks 8 distinct of 256 experts in proportion to a
    Zipf(skew) popularity (Gumbel top-k), the popularity ranks placed on random expert ids."""
    popularity = np.arange(1, 257, dtype=float) ** -skew
    log_p = np.log(popularity / popularity.sum())[rng.permutation(256)]
    picks = np.argsort(-(log_p + rng.gumbel(size=(tokens, 256))), axis=1)[:, :8]
    touched = np.zeros(256, dtype=bool)
    touched[picks.ravel()] = True
    return touched


@pytest.mark.parametrize("tokens", [4, 16, 64, 512])
def test_busiest_rank_touches_the_distinct_experts_a_simulated_routing_gives(tokens):
    # Monte Carlo: tokens pick 8 distinct experts of 256 with the routers' popularity skew
    # (EXPERT_POPULARITY_ZIPF); 8 EP ranks of 32 experts each.
    rng = np.random.default_rng(0)
    steps = [_simulated_routing(rng, tokens, EXPERT_POPULARITY_ZIPF) for _ in range(400)]
    busiest = [touched.reshape(8, 32).sum(axis=1).max() for touched in steps]
    assert max_rank_touched_experts(256, 8, float(tokens), 8) == pytest.approx(np.mean(busiest), rel=0.1)
    assert expected_distinct_experts(256, 8, float(tokens)) == pytest.approx(np.mean([t.sum() for t in steps]),
                                                                            rel=0.03)
    # Never more than a rank holds; without EP, the layer's expected distinct experts.
    assert max_rank_touched_experts(256, 8, float(tokens), 8) <= 32.0
    assert max_rank_touched_experts(256, 8, float(tokens), 1) == expected_distinct_experts(256, 8, float(tokens))


def test_skewed_routing_touches_fewer_experts_than_uniform_routing():
    # One token touches its k experts whatever the skew; uniform routing is the upper bound between
    # (the count is concave in the popularities), and every expert is touched by a large batch.
    uniform = touched_expert_share(128, 4, 32.0, skew=0.0)
    assert uniform == pytest.approx(1 - (124 / 128) ** 32)
    assert touched_expert_share(128, 4, 1.0) == pytest.approx(4 / 128)
    assert touched_expert_share(128, 4, 32.0) < uniform
    assert touched_expert_share(128, 4, 32.0, skew=1.0) < touched_expert_share(128, 4, 32.0, skew=0.2)
    assert touched_expert_share(128, 4, 1e5) == pytest.approx(1.0)
    # The popularity classes stand for the expert-by-expert sum (within 0.5 % of the experts).
    popularity = np.arange(1, 385, dtype=float) ** -EXPERT_POPULARITY_ZIPF
    picked = 8 * popularity / popularity.sum()
    for tokens in (4.0, 16.0, 64.0, 256.0, 1024.0):
        exact = 1 - np.mean((1 - picked) ** tokens)
        assert touched_expert_share(384, 8, tokens) == pytest.approx(exact, abs=0.005)
        assert touched_expert_share(384, 8, np.array([tokens]))[0] == pytest.approx(touched_expert_share(384, 8, tokens))


def test_hot_expert_skew_piles_pairs_not_distinct_experts_on_a_rank():
    # A decode step of TEP8 DeepSeek-R1 on B200: the expert weight reads (the memory part) hardly move
    # with the profile's hot-expert skew, which scales the pairs (permutation bytes) only.
    model = get_model("deepseek-r1")
    layout = Layout(tp_size=8, ep_size=8, weight_precision="fp4")
    base = get_engine_profile("trtllm", "blackwell")
    memory = {}
    for skew in (1.0, 2.0):
        c = forward_coefficients(model, B200, layout, base.model_copy(update={"moe_imbalance": skew}), None)
        memory[skew] = forward_pass_costs(c, tokens=16.0, logit_tokens=16.0, decode_seqs=16.0, decode_ctx=2048.0)[1]
    assert memory[2.0] == pytest.approx(memory[1.0], rel=0.05)


def test_moe_layers_pay_their_kernel_overhead_and_permutation_traffic():
    model = get_model("qwen3-30b-a3b")
    vllm = get_engine_profile("vllm")
    layout = Layout(tp_size=1, weight_precision="fp8")
    c = forward_coefficients(model, H100, layout, vllm, None)
    _, _, _, overhead_s = forward_pass_costs(c, tokens=1.0, logit_tokens=1.0)
    expected = (model.num_layers * vllm.layer_overhead_us + model.num_moe_layers * vllm.moe_kernel_overhead_us) * 1e-6
    assert overhead_s == pytest.approx(expected)
    # Permutation: each routed copy of the hidden vector written and read on both sides (4 x h x 2 B).
    no_tokens = forward_pass_costs(c, tokens=1e-9, logit_tokens=0.0, split=False)[0]
    many = forward_pass_costs(c, tokens=4096.0, logit_tokens=0.0, split=False)[0]
    assert many > no_tokens


def test_grouped_expert_gemms_run_at_their_share_of_the_dense_efficiency():
    from layoutopt.perf_model.expert_routing import expected_distinct_experts
    from layoutopt.perf_model.fit import trial_profile

    model = get_model("qwen3-30b-a3b")
    layout = Layout(tp_size=1, weight_precision="fp8")
    tokens = 16384.0  # a prefill step: the expert GEMMs are compute-bound
    dense = forward_coefficients(model, H100, layout, trial_profile("vllm", {"grouped_gemm_efficiency": 1.0}), None)
    half = forward_coefficients(model, H100, layout, trial_profile("vllm", {"grouped_gemm_efficiency": 0.5}), None)
    full_s = forward_pass_costs(dense, tokens=tokens, logit_tokens=1.0, split=False)[0]
    halved_s = forward_pass_costs(half, tokens=tokens, logit_tokens=1.0, split=False)[0]
    # Expert FLOPs at the dense efficiency: (pairs + half-efficiency rows x touched experts) x
    # FLOPs per pair; at half the efficiency they take twice as long. The expert group is a
    # roofline of that and its memory traffic (touched experts' weights, the permutation's
    # 4 x hidden x 2 B per pair); nothing else moves.
    pairs = tokens * model.num_experts_per_token
    touched = min(model.num_experts, expected_distinct_experts(model.num_experts, model.num_experts_per_token, tokens))
    expert_s = ((pairs + dense.gemm_half_rows * touched)
                * dense.expert_slice_flops_per_token * model.num_moe_layers / dense.gemm_flops_per_s)
    memory_s = (touched * dense.expert_slice_bytes + pairs * 4 * model.hidden_size * 2) * model.num_moe_layers / (
        dense.hbm_bytes_per_s)
    assert halved_s - full_s == pytest.approx(max(2 * expert_s, memory_s) - max(expert_s, memory_s), rel=1e-6)
    assert halved_s > full_s
    # Decode reads the touched experts' weights: memory-bound, the GEMM efficiency does not show.
    one = forward_pass_costs(dense, tokens=4.0, logit_tokens=4.0, split=False)[0]
    assert forward_pass_costs(half, tokens=4.0, logit_tokens=4.0, split=False)[0] == pytest.approx(one)


def test_weight_only_formats_read_four_bits_and_compute_in_bf16():
    assert compute_precision(H100, "int4") == "bf16" and is_weight_only(H100, "int4")
    assert compute_precision(H100, "mxfp4") == "bf16" and is_weight_only(H100, "mxfp4")
    assert compute_precision(B200, "mxfp4") == "mxfp4" and not is_weight_only(B200, "fp4")
    assert compute_precision(B200, "int4") == "bf16"  # INT4 is always weight-only
    assert weight_precision_supported(H100, "fp4") and not weight_precision_supported(get_gpu("MI300X"), "int4")
    model = get_model("llama-3.1-70b")
    vllm = get_engine_profile("vllm")
    c = forward_coefficients(model, H100, Layout(tp_size=4, weight_precision="int4"), vllm, None)
    # BF16 peak x efficiency x the dequantization share (0.85); 4.5 bits per weight (BF16 scale per 32).
    assert c.gemm_flops_per_s == pytest.approx(989e12 * vllm.gemm_efficiency * 0.85, rel=1e-3)
    dense = model.attention_params + model.dense_params_total
    assert c.dense_weight_bytes == pytest.approx(dense * 0.5625 / 4)


def test_estimate_serves_native_four_bit_checkpoints():
    from layoutopt.perf_model.estimate import estimate

    kimi = estimate("kimi-k2.5", "B200", engine="vllm==0.33.0", isl=1024, osl=256,
                    layout=Layout(tp_size=8, weight_precision="int4"), concurrency=4)
    gpt_oss = estimate("gpt-oss-120b", "H100", engine="vllm==0.33.0", isl=1024, osl=256,
                       layout=Layout(tp_size=2, weight_precision="mxfp4"), concurrency=4)
    for result in (kimi, gpt_oss):
        assert result.tpot_ms.mean > 0 and not result.rule_violations


def test_remembered_touched_share_is_the_formula_of_any_number_type():
    """The scalar share is remembered by token count: an int, a float and a numpy float of one
    count get the formula's own float."""
    from layoutopt.perf_model.expert_routing import _untouched_log_by_class

    log_untouched, share = _untouched_log_by_class(256, 8, EXPERT_POPULARITY_ZIPF)
    for tokens in (1, 3.0, np.float64(517.0), 4096, 12345.5):
        direct = 1.0 - float(np.exp(tokens * log_untouched) @ share)
        for _ in range(2):
            got = touched_expert_share(256, 8, tokens)
            assert type(got) is float and got == direct
