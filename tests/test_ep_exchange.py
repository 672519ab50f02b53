"""The expert-parallel exchange the model costs is the one the engine's launch runs (compute.moe_exchange_time_s,
EngineProfile.ep_exchange, report/node_launch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model import collectives as coll
from layoutopt.perf_model.calibration import get_engine_profile, list_profiles
from layoutopt.perf_model.coefficients import forward_coefficients
from layoutopt.perf_model.compute import moe_exchange_time_s
from layoutopt.perf_model.links import Link
from layoutopt.plan import Layout, Pool
from layoutopt.report.node_launch import node_launch

H100 = get_gpu("H100-SXM")
DSV3 = get_model("deepseek-v3")        # hidden 7168, top-8 of 256 experts
HIDDEN_BF16_BYTES = 7168 * 2.0
# A flat link (one NVSwitch-like fabric) so that all-gather and all-to-all compare byte for byte.
FLAT = Link(kind="nvlink", bandwidth_gb_per_s=450.0, latency_us=1.0)


def _coefficients(engine, tp, dp, link=None, precision="fp8"):
    layout = Layout(tp_size=tp, dp_size=dp, ep_size=tp * dp, weight_precision=precision, kv_precision="bf16")
    profile = get_engine_profile(engine) if isinstance(engine, str) else engine
    return forward_coefficients(DSV3, H100, layout, profile, link)


def test_vllm_dep_costs_the_allgather_of_quantized_tokens_and_the_bf16_reduce_scatter():
    c = _coefficients("vllm", tp=1, dp=8)
    tokens = 64.0 * 8                                     # every DP rank's 64 tokens
    dispatch_bytes = 7168 * 1.0 + 8 * 8.0                 # FP8 hidden vector + 8 (int32 id, fp32 weight)
    latency = c.profile.alltoall_latency_us                # the fixed cost of one EP dispatch or combine
    expected = (coll.allgather_time_s(tokens * dispatch_bytes, 8, c.moe_link, latency)
                + coll.reducescatter_time_s(tokens * HIDDEN_BF16_BYTES, 8, c.moe_link, latency))
    assert moe_exchange_time_s(c, tokens) == pytest.approx(expected, rel=1e-12)
    # The same exchange on prompt steps (vLLM has no separate prefill path).
    assert moe_exchange_time_s(c, tokens, prefill_tokens=tokens) == pytest.approx(expected, rel=1e-12)


def test_allgather_exchange_grows_with_dp_and_beats_the_all_to_all_only_while_ep_is_below_top_k():
    per_rank = 4096.0
    times = [moe_exchange_time_s(_coefficients("vllm", 1, dp, FLAT), per_rank * dp) for dp in (2, 4, 8, 16)]
    assert times == sorted(times) and times[-1] > 5 * times[0]
    deepep = get_engine_profile("vllm").model_copy(update={"ep_exchange": "alltoall"})
    for dp, gather_is_dearer in ((4, False), (16, True)):     # ep = dp here; DeepSeek-V3 routes to 8 experts
        gather = moe_exchange_time_s(_coefficients("vllm", 1, dp, FLAT), per_rank * dp)
        routed = moe_exchange_time_s(_coefficients(deepep, 1, dp, FLAT), per_rank * dp)
        assert (gather > routed) is gather_is_dearer, (dp, gather, routed)


def test_alltoall_profile_costs_the_routed_copies_each_way():
    deepep = get_engine_profile("vllm").model_copy(update={"ep_exchange": "alltoall"})
    c = _coefficients(deepep, tp=2, dp=4)
    tokens = 32.0 * 4
    per_rank = tokens / 8                                  # sequence-parallel: T / tp per rank
    expected = 2.0 * coll.alltoall_time_s(per_rank * 8 * HIDDEN_BF16_BYTES, 8, c.ep_link, deepep.alltoall_latency_us)
    assert moe_exchange_time_s(c, tokens) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_ep_inside_tp_all_reduces_the_outputs_whatever_the_backend(engine):
    c = _coefficients(engine, tp=8, dp=1)
    expected = coll.allreduce_time_s(100.0 * HIDDEN_BF16_BYTES, 8, c.tp_link, c.profile.allreduce_latency_us)
    assert moe_exchange_time_s(c, 100.0) == pytest.approx(expected, rel=1e-12)
    deepep = c.profile.model_copy(update={"ep_exchange": "alltoall"})
    assert moe_exchange_time_s(_coefficients(deepep, 8, 1), 100.0) == pytest.approx(expected, rel=1e-12)


def test_sglang_gathers_prompt_steps_by_all_reduce_and_decode_steps_by_all_gather():
    c = _coefficients("sglang", tp=2, dp=4)
    tokens, latency = 256.0, c.profile.alltoall_latency_us
    bf16 = tokens * HIDDEN_BF16_BYTES                      # SGLang's DP buffer is in the model dtype
    decode = coll.allgather_time_s(bf16, 8, c.moe_link, latency) + coll.reducescatter_time_s(bf16, 8, c.moe_link,
                                                                                            latency)
    prompt = 2.0 * coll.allreduce_time_s(bf16, 8, c.moe_link, latency)   # attention TP 2: all-reduce back too
    assert moe_exchange_time_s(c, tokens) == pytest.approx(decode, rel=1e-12)
    assert moe_exchange_time_s(c, tokens, prefill_tokens=100.0) == pytest.approx(prompt, rel=1e-12)
    mixed = moe_exchange_time_s(c, np.array([tokens, tokens]), prefill_tokens=np.array([0.0, 100.0]))
    np.testing.assert_allclose(mixed, [decode, prompt], rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Emit and model agree: the command runs the exchange the model costs, and the note says so.

def _cross_node_dep_pool(role="decode") -> Pool:
    return Pool(role=role, gpu="H100-SXM", instances=1, gpus_per_instance=16, tp_size=1, pp_size=1, ep_size=16,
                dp_size=16, dcp_size=1, pcp_size=1, precision="fp8", kv_precision="fp8", max_batch_size=512,
                capacity_rps=1.0, cost_usd_per_hour=40.0)


def test_every_profile_of_an_engine_costs_the_same_exchange():
    by_engine: dict[str, set[str]] = {}
    for profile in list_profiles():
        by_engine.setdefault(profile.name, set()).add(profile.ep_exchange)
    assert all(len(kinds) == 1 for kinds in by_engine.values()), by_engine
    assert by_engine["vllm"] == {"allgather_reducescatter"} and by_engine["sglang"] == {"dp_gather"}


@pytest.mark.parametrize(("engine", "flag", "default_words"), [
    ("vllm", "--all2all-backend", "--all2all-backend allgather_reducescatter"),
    ("sglang", "--moe-a2a-backend", "--moe-a2a-backend none"),
])
def test_emitted_backend_is_the_costed_one(engine, flag, default_words):
    launch = node_launch(engine, _cross_node_dep_pool(), num_nodes=2, gpus_on_node=8)
    # The built-in profile costs the engine's default, so the command leaves the default in place...
    assert flag not in launch.argv
    note = " ".join(launch.notes)
    assert default_words in note and "cost exactly that" in note and "deepep" in note
    # ...and a profile costing the all-to-all gets the DeepEP backend selected in the command.
    launch = node_launch(engine, _cross_node_dep_pool(), num_nodes=2, gpus_on_node=8, ep_exchange="alltoall")
    assert flag in launch.argv and launch.argv[list(launch.argv).index(flag) + 1].startswith("deepep")
    assert "DeepEP-style all-to-all" in " ".join(launch.notes)


def test_cross_node_ep_without_attention_dp_says_the_outputs_are_all_reduced():
    pool = _cross_node_dep_pool().model_copy(update={"tp_size": 16, "dp_size": 1})
    note = " ".join(node_launch("vllm", pool, num_nodes=2, gpus_on_node=8).notes)
    assert "all-reduced over the TP group" in note and "all-gathers" not in note
