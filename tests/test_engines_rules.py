"""Each engine rule on concrete layouts, with the values and source lines the violation names."""

from __future__ import annotations

import pytest

from layoutopt.engines import check_layout, check_node_split, check_pair, engine_notes
from layoutopt.engines.loader import load_engine_data
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.model_catalog.checkpoints import with_user_checkpoints
from layoutopt.plan import Layout

QWEN = get_model("qwen3-32b")          # dense GQA, 8 KV heads, 64 query heads
DEEPSEEK = get_model("deepseek-v3")    # MLA + MoE
QWEN_MOE = get_model("qwen3-30b-a3b")  # GQA + MoE
GLM5 = get_model("glm-5")              # sparse-attention MLA + MoE
# qwen3-32b with an NVFP4 checkpoint of the user's, so the precision rules are seen apart from checkpoint_unavailable.
QWEN_FP4 = with_user_checkpoints(QWEN, ["fp4=me/Qwen3-32B-NVFP4"])
H100, A100, B200, MI300X = (get_gpu(n) for n in ("H100-SXM", "A100-80GB-SXM", "B200", "MI300X"))
# A GPU below Marlin's minimum (a V100-class part, compute capability 7.0; not in the catalog).
TURING = A100.model_copy(update={"name": "V100-like", "compute_capability": 7.0})


def rules(engine, model, gpu, layout, role, **pair):
    return [v.rule for v in check_layout(engine, model, gpu, layout, role, **pair)]


# (engine, prefill TP, decode TP, allowed) from the NIXL tp_ratio rule of each release
PD_TP = [
    ("vllm==0.13.0", 2, 1, False), ("vllm==0.13.0", 1, 2, True), ("vllm==0.13.0", 2, 4, True),
    ("vllm==0.13.0", 4, 4, True), ("vllm==0.33.0", 2, 1, True), ("vllm==0.33.0", 1, 8, True),
    ("vllm==0.33.0", 4, 6, False), ("sglang==0.5.23", 8, 2, True), ("sglang==0.5.3", 2, 1, True),
]


@pytest.mark.parametrize("engine,prefill_tp,decode_tp,allowed", PD_TP)
def test_pd_tp_divisibility(engine, prefill_tp, decode_tp, allowed):
    found = check_pair(engine, QWEN, Layout(tp_size=prefill_tp), Layout(tp_size=decode_tp))
    assert (not found) == allowed
    if not allowed:
        assert found[0].rule == "pd_tp_divisibility"
        assert found[0].values == {"prefill_tp": prefill_tp, "decode_tp": decode_tp}
        assert found[0].source.file == "vllm/distributed/kv_transfer/kv_connector/utils.py"


def test_the_0_13_violation_names_its_source_line():
    [violation] = check_layout("vllm==0.13.0", QWEN, H100, Layout(tp_size=2), "prefill",
                               decode_layout=Layout(tp_size=1))
    assert str(violation) == ("pd_tp_divisibility: decode TP 1 must be a multiple of prefill TP 2 for the KV "
                              "handshake (vllm==0.13.0 vllm/distributed/kv_transfer/kv_connector/utils.py:261)")
    # the same pair seen from the decode side
    assert rules("vllm==0.13.0", QWEN, H100, Layout(tp_size=1), "decode",
                 prefill_layout=Layout(tp_size=2)) == ["pd_tp_divisibility"]


@pytest.mark.parametrize("engine,model,expected", [
    ("vllm==0.33.0", QWEN, ["pcp_unsupported"]),      # only MLA impls declare supports_pcp
    ("vllm==0.33.0", DEEPSEEK, []),
    ("vllm==0.13.0", DEEPSEEK, ["pcp_unsupported"]),  # no impl declares it
    ("sglang==0.5.23", DEEPSEEK, ["pcp_unsupported"]),
])
def test_pcp_by_attention_kind(engine, model, expected):
    layout = Layout(tp_size=8, pcp_size=2, weight_precision="fp8") if model is DEEPSEEK else Layout(tp_size=2, pcp_size=2)
    assert rules(engine, model, B200, layout, "colocated") == expected


def test_pcp_violation_says_what_the_model_uses():
    [v] = check_layout("vllm==0.33.0", QWEN, H100, Layout(tp_size=2, pcp_size=4), "prefill")
    assert "MLA in this version" in v.message and "uses GQA" in v.message
    assert str(v.source) == "vllm/v1/attention/backend.py:1038"


@pytest.mark.parametrize("engine,layout,role,expected", [
    ("vllm==0.13.0", Layout(tp_size=16, dcp_size=2), "colocated", []),                 # 16 // 8 = 2
    ("vllm==0.13.0", Layout(tp_size=16, dcp_size=4), "colocated", ["dcp_unsupported"]),  # > tp // kv heads
    ("vllm==0.13.0", Layout(tp_size=8, dcp_size=2), "decode", ["dcp_unsupported"]),    # tp not > kv heads
    ("vllm==0.13.0", Layout(tp_size=16, dcp_size=2), "decode", []),                    # no P/D DCP check in 0.13
    ("vllm==0.33.0", Layout(tp_size=16, dcp_size=2), "decode", ["dcp_unsupported"]),   # NIXL + DCP: MLA only
    ("vllm==0.33.0", Layout(tp_size=16, dcp_size=2), "colocated", []),
    ("sglang==0.5.3", Layout(tp_size=16, dcp_size=2), "colocated", ["dcp_unsupported"]),  # no --dcp-size flag
    ("sglang==0.5.23", Layout(tp_size=16, dcp_size=2), "colocated", []),
])
def test_dcp(engine, layout, role, expected):
    assert rules(engine, QWEN, B200, layout, role) == expected


def test_vllm_dcp_on_amd_needs_an_mla_model():
    # vllm/platforms/rocm.py picks among rocm_* / triton_* backends; only the MLA ones declare DCP.
    [v] = check_layout("vllm==0.33.0", QWEN, MI300X, Layout(tp_size=16, dcp_size=2), "colocated")
    assert v.rule == "dcp_unsupported" and v.source.file == "vllm/platforms/rocm.py" and "MI300X" in v.message
    assert rules("vllm==0.33.0", QWEN, H100, Layout(tp_size=16, dcp_size=2), "colocated") == []
    assert rules("vllm==0.33.0", DEEPSEEK, MI300X, Layout(tp_size=8, dcp_size=8, weight_precision="fp8"),
                 "colocated") == []
    assert rules("vllm==0.33.0", GLM5, MI300X, Layout(tp_size=8, dcp_size=8), "colocated") == ["dcp_unsupported"]
    assert rules("vllm==0.13.0", QWEN, MI300X, Layout(tp_size=16, dcp_size=2), "colocated") == []  # no such fact


def test_dcp_with_the_connector_on_mla_needs_dcp_equal_to_tp():
    assert rules("vllm==0.33.0", DEEPSEEK, B200, Layout(tp_size=8, dcp_size=8, weight_precision="fp8"), "decode") == []
    found = check_layout("vllm==0.33.0", DEEPSEEK, B200, Layout(tp_size=8, dcp_size=4, weight_precision="fp8"),
                         "decode")
    assert [v.rule for v in found] == ["dcp_unsupported"] and "max(TP, PCP) = 8" in found[0].message


@pytest.mark.parametrize("engine,role,expected", [
    ("vllm==0.13.0", "prefill", ["pp_kv_connector"]), ("vllm==0.13.0", "decode", ["pp_kv_connector"]),
    ("vllm==0.33.0", "prefill", []), ("vllm==0.33.0", "decode", ["pp_kv_connector"]),
    ("vllm==0.33.0", "colocated", []), ("vllm==0.13.0", "colocated", []),
])
def test_pp_with_the_kv_connector(engine, role, expected):
    assert rules(engine, QWEN, H100, Layout(tp_size=2, pp_size=2), role) == expected


def test_pp_on_a_linear_attention_prefill_with_0_33():
    hybrid = get_model("qwen3.5-27b")
    assert hybrid.num_linear_attention_layers
    assert rules("vllm==0.33.0", hybrid, H100, Layout(tp_size=2, pp_size=2), "prefill") == ["pp_kv_connector"]


def test_pp_on_a_sliding_window_prefill_with_0_33_but_not_on_chunked_local_attention():
    # gpt-oss keeps vLLM's hybrid KV cache manager on under NIXL, and the pull connector then refuses
    # PP (nixl/base_worker.py:872-876); Llama 4's chunked attention turns the manager off by default.
    sliding, chunked = get_model("gpt-oss-120b"), get_model("llama-4-scout")
    assert sliding.num_sliding_window_layers and not sliding.sliding_window_chunked
    assert chunked.num_sliding_window_layers and chunked.sliding_window_chunked
    layout = Layout(tp_size=2, pp_size=2, weight_precision="mxfp4")  # gpt-oss's own checkpoint
    found = check_layout("vllm==0.33.0", sliding, H100, layout, "prefill")
    assert [v.rule for v in found] == ["pp_kv_connector"] and "sliding-window" in found[0].message
    assert found[0].source.line == load_engine_data("vllm", "0.33.0").fact("pp_kv_connector_hybrid_attention").source.line
    assert rules("vllm==0.33.0", chunked, H100, Layout(tp_size=2, pp_size=2, weight_precision="bf16"), "prefill") == []
    assert rules("vllm==0.33.0", sliding, H100, Layout(tp_size=2, weight_precision="mxfp4"), "prefill") == []
    assert rules("vllm==0.33.0", sliding, H100, layout, "colocated") == []


def test_pcp_with_the_nixl_connector_runs_on_prefill_only_and_with_dcp_only_at_tp1():
    pcp = Layout(tp_size=8, pcp_size=2, weight_precision="fp8")
    assert rules("vllm==0.33.0", DEEPSEEK, B200, pcp, "prefill") == []
    assert rules("vllm==0.33.0", DEEPSEEK, B200, pcp, "colocated") == []   # no connector
    [v] = check_layout("vllm==0.33.0", DEEPSEEK, B200, pcp, "decode")
    assert v.rule == "pcp_unsupported" and v.source.file.endswith("nixl/connector.py") and "prefill" in v.message
    # GLM-5 (sparse MLA): the one kind of model whose PCP may run beside DCP at all.
    [v] = check_layout("vllm==0.33.0", GLM5, B200, Layout(tp_size=2, pcp_size=2, dcp_size=2), "prefill")
    assert v.rule == "pcp_unsupported" and v.values == {"pcp_size": 2, "dcp_size": 2, "tp_size": 2}
    assert v.source.file.endswith("nixl/connector.py")
    assert rules("vllm==0.33.0", GLM5, B200, Layout(tp_size=2, pcp_size=2, dcp_size=2), "colocated") == []


@pytest.mark.parametrize("model,layout,allowed", [
    (GLM5, Layout(tp_size=4, pcp_size=2, dcp_size=2), True),     # DCP = PCP
    (GLM5, Layout(tp_size=4, pcp_size=2, dcp_size=4), False),    # config/parallel.py: 1, PCP or TP x PCP
    (GLM5, Layout(tp_size=8, pcp_size=2, dcp_size=8), False),
    (DEEPSEEK, Layout(tp_size=8, pcp_size=2, dcp_size=2, weight_precision="fp8"), False),   # dense MLA
    (DEEPSEEK, Layout(tp_size=8, pcp_size=2, dcp_size=8, weight_precision="fp8"), False),
    (DEEPSEEK, Layout(tp_size=8, pcp_size=2, weight_precision="fp8"), True),
])
def test_pcp_beside_dcp_on_any_instance(model, layout, allowed):
    # vLLM 0.33 runs PCP in the V2 model runner only, which refuses PCP + DCP for dense MLA
    # (v1/worker/gpu/pcp_manager.py:198-201); ParallelConfig bounds DCP beside PCP (config/parallel.py:598-608).
    found = check_layout("vllm==0.33.0", model, B200, layout, "colocated")
    assert (not found) == allowed
    if not allowed:
        [v] = found
        assert v.rule == "pcp_unsupported"
        fact = "pcp_dcp_sizes" if layout.dcp_size not in (layout.pcp_size, layout.tp_size * layout.pcp_size) \
            else "pcp_dcp_attention"
        assert v.source == load_engine_data("vllm", "0.33.0").fact(fact).source


def test_pcp_refused_for_a_model_with_a_vision_encoder():
    kimi = get_model("kimi-k2.5")  # MLA, so PCP's attention check passes; its checkpoint ships a vision tower
    assert kimi.multimodal and not DEEPSEEK.multimodal
    layout = Layout(tp_size=8, pcp_size=2, weight_precision="int4")
    [v] = check_layout("vllm==0.33.0", kimi, B200, layout, "prefill")
    assert v.rule == "pcp_unsupported" and "vision encoder" in v.message
    assert v.source.file == "vllm/v1/worker/gpu/pcp_manager.py"
    assert rules("vllm==0.33.0", kimi, B200, Layout(tp_size=8, weight_precision="int4"), "prefill") == []


def test_a_replicated_pcp_prefill_cannot_pair_with_a_dcp_decode():
    # nixl/base_worker.py: "Replicated PCP cannot be paired with a DCP-sharded NIXL peer".
    prefill = Layout(tp_size=8, pcp_size=2, weight_precision="fp8")
    [v] = check_pair("vllm==0.33.0", DEEPSEEK, prefill, Layout(tp_size=8, dcp_size=8, weight_precision="fp8"))
    assert v.rule == "pd_context_parallel" and v.values["prefill_pcp"] == 2 and v.values["decode_dcp"] == 8
    assert check_pair("vllm==0.33.0", DEEPSEEK, prefill, Layout(tp_size=8, weight_precision="fp8")) == []
    assert check_pair("vllm==0.33.0", DEEPSEEK, Layout(tp_size=8, weight_precision="fp8"),
                      Layout(tp_size=8, dcp_size=8, weight_precision="fp8")) == []


@pytest.mark.parametrize("model,prefill_dcp,decode_dcp,allowed", [
    (QWEN, 1, 1, True), (QWEN, 2, 2, True),
    (QWEN, 1, 2, False),          # GQA KV is not re-laid out per decode DCP rank
    (DEEPSEEK, 1, 8, True),       # MLA: re-laid out
    (DEEPSEEK, 2, 4, False), (DEEPSEEK, 2, 1, False),
])
def test_sglang_pd_dcp_sizes(model, prefill_dcp, decode_dcp, allowed):
    # disaggregation/common/conn.py requires_dcp_relayout: "Unsupported PD DCP topology".
    precision = "fp8" if model is DEEPSEEK else "bf16"
    prefill = Layout(tp_size=16, dcp_size=prefill_dcp, weight_precision=precision)
    decode = Layout(tp_size=16, dcp_size=decode_dcp, weight_precision=precision)
    found = check_pair("sglang==0.5.23", model, prefill, decode)
    assert [v.rule for v in found] == ([] if allowed else ["pd_dcp_mismatch"])
    if not allowed:
        assert found[0].source.file == "sglang/srt/disaggregation/common/conn.py"
        assert found[0].values == {"prefill_dcp": prefill_dcp, "decode_dcp": decode_dcp}
    assert check_pair("sglang==0.5.3", model, Layout(tp_size=16, weight_precision=precision),
                      Layout(tp_size=16, weight_precision=precision)) == []


def test_sglang_decode_pp_equals_prefill_pp_or_one():
    assert check_pair("sglang==0.5.23", QWEN, Layout(pp_size=2), Layout(pp_size=1)) == []
    assert check_pair("sglang==0.5.23", QWEN, Layout(pp_size=2), Layout(pp_size=2)) == []
    [v] = check_pair("sglang==0.5.23", QWEN, Layout(pp_size=1), Layout(pp_size=2))
    assert v.rule == "pd_pp_mismatch" and v.values == {"prefill_pp": 1, "decode_pp": 2}


def test_sglang_0_5_3_decode_pp_divides_prefill_pp():
    assert check_pair("sglang==0.5.3", QWEN, Layout(pp_size=4), Layout(pp_size=2)) == []
    [v] = check_pair("sglang==0.5.3", QWEN, Layout(pp_size=2), Layout(pp_size=4))
    assert v.rule == "pd_pp_mismatch" and v.source.file == "sglang/srt/disaggregation/common/conn.py"


@pytest.mark.parametrize("engine,model,layout,expected", [
    ("vllm==0.33.0", QWEN, Layout(tp_size=2, ep_size=2), ["expert_parallel"]),       # no experts
    ("vllm==0.33.0", QWEN_MOE, Layout(tp_size=2, dp_size=2, ep_size=4), []),        # ep = tp x dp
    ("vllm==0.33.0", QWEN_MOE, Layout(tp_size=2, dp_size=2, ep_size=2), ["expert_parallel"]),
    ("vllm==0.33.0", QWEN_MOE, Layout(tp_size=2, ep_size=2, pcp_size=2), ["pcp_unsupported", "expert_parallel"]),
    ("sglang==0.5.23", QWEN_MOE, Layout(tp_size=2, dp_size=2, ep_size=2), []),      # ep divides --tp-size 4
    ("sglang==0.5.23", QWEN, Layout(tp_size=2, ep_size=2), ["expert_parallel"]),
])
def test_expert_parallel(engine, model, layout, expected):
    assert rules(engine, model, H100, layout, "colocated") == expected


@pytest.mark.parametrize("engine,gpu,weight,kv,expected", [
    ("vllm==0.33.0", H100, "fp8", "fp8", []),
    ("vllm==0.33.0", A100, "fp8", "bf16", ["precision_unsupported"]),  # FP8 compute needs 8.9
    ("vllm==0.13.0", A100, "fp8", "bf16", ["precision_unsupported"]),
    ("vllm==0.33.0", H100, "fp4", "bf16", []),                         # no FP4 compute: Marlin weight-only
    ("vllm==0.33.0", A100, "fp4", "bf16", []),                         # Marlin W4A16 from capability 7.5
    ("vllm==0.33.0", TURING, "fp4", "bf16", ["precision_unsupported"]),  # 7.0: below Marlin's minimum
    ("vllm==0.33.0", B200, "fp4", "fp8", []),
    ("vllm==0.33.0", MI300X, "fp8", "bf16", []),                       # not CUDA: no capability rule
    ("sglang==0.5.23", A100, "bf16", "fp8", []),
])
def test_precision_by_gpu_generation(engine, gpu, weight, kv, expected):
    layout = Layout(tp_size=2, weight_precision=weight, kv_precision=kv)
    assert rules(engine, QWEN_FP4, gpu, layout, "colocated") == expected


def test_fp4_below_marlin_cites_the_weight_only_kernel():
    [v] = check_layout("vllm==0.33.0", QWEN_FP4, TURING, Layout(tp_size=2, weight_precision="fp4"), "colocated")
    # The checkpoint's quantization method (modelopt_fp4) states the same minimum as the Marlin kernel.
    assert str(v.source).startswith("vllm/model_executor/layers/quantization/") and "7.5" in v.message


def test_fp8_on_ampere_cites_the_capability_check():
    [v] = check_layout("vllm==0.33.0", QWEN, A100, Layout(tp_size=2, weight_precision="fp8"), "colocated")
    assert str(v.source) == "vllm/platforms/cuda.py:588" and v.values["compute_capability"] == 8.0
    assert "weight-only" in v.message


def test_trtllm_has_no_rules_and_says_so():
    assert check_layout("trtllm", QWEN, H100, Layout(tp_size=2, pcp_size=2), "prefill") == []
    assert "performance-model profile only" in engine_notes("trtllm")[0]
    assert engine_notes("vllm") == []


def _dep(tp, dp, pp, pcp=1):
    return Layout(tp_size=tp, dp_size=dp, ep_size=tp * dp, pp_size=pp, pcp_size=pcp, weight_precision="fp8")


# (layout, vLLM refuses it): vLLM keeps each DP rank's PP stages on its node(s) (dp_rank_gpus).
DP_PP = [
    (_dep(1, 16, 2), True),    # DEP16 over two domains, PP 2: every node holds both stages
    (_dep(1, 8, 2), True),     # a stage inside one domain, the instance over two: the same
    (_dep(1, 16, 1), False),   # no PP
    (_dep(1, 4, 2), False),    # the whole instance inside one 8-GPU domain
    (_dep(8, 2, 2), False),    # each DP rank's TP 8 fills a domain: each node holds one stage
    (_dep(4, 4, 2, pcp=2), False),  # TP x PCP = 8 fills a domain too
    (_dep(4, 4, 2), True),
]


@pytest.mark.parametrize("layout,refused", DP_PP)
@pytest.mark.parametrize("engine", ["vllm==0.33.0", "vllm==0.13.0"])
def test_vllm_dp_pp_placement(engine, layout, refused):
    if layout.pcp_size > 1 and engine == "vllm==0.13.0":
        pytest.skip("0.13.0 refuses PCP for every attention kind")
    found = [v for v in check_layout(engine, DEEPSEEK, H100, layout, "colocated") if v.rule == "dp_pp_placement"]
    assert bool(found) == refused
    if refused:
        assert found[0].source.file == "vllm/distributed/parallel_state.py"
        assert found[0].values["local_domain_gpus"] == 8


@pytest.mark.parametrize("layout,refused", DP_PP)
@pytest.mark.parametrize("engine", ["sglang==0.5.23", "sglang==0.5.3"])
def test_sglang_places_each_stage_on_its_own_nodes(engine, layout, refused):
    # SGLang runs PP ranks outermost over --nnodes (node_rank_layout): no DP x PP placement rule.
    assert "dp_pp_placement" not in rules(engine, DEEPSEEK, H100, layout, "colocated")


def test_dp_pp_placement_message_names_the_domains_and_the_source():
    [violation] = [v for v in check_layout("vllm", DEEPSEEK, H100, _dep(1, 16, 2), "decode")
                   if v.rule == "dp_pp_placement"]
    assert str(violation).startswith("dp_pp_placement: DP 16 x PP 2 over 4 local domains of 8 H100-SXM: vLLM keeps "
                                     "each DP rank's TP x PP x PCP = 2 GPUs together")
    assert "spans all 4 domains, not the 2 domains the plan places it in" in str(violation)
    assert str(violation).endswith("(vllm==0.33.0 vllm/distributed/parallel_state.py:2149)")
    # Dense models have no DP ranks sharing MoE layers, whatever their PP (TP16 x PP2 over four nodes).
    assert "dp_pp_placement" not in rules("vllm", QWEN, H100, Layout(tp_size=16, pp_size=2), "colocated")


def test_local_domain_of_the_rules_is_the_performance_models():
    """The rules read GpuSpec.local_domain_gpus; the performance model's fabric (links.local_domain)
    covers the same GPUs."""
    from layoutopt.hardware_catalog.catalog import list_gpus
    from layoutopt.perf_model.links import local_domain

    gpus = list_gpus()
    assert {g.local_domain_gpus for g in gpus} >= {8, 72}  # HGX / PCIe servers and NVL72
    for gpu in gpus:
        assert gpu.local_domain_gpus == local_domain(gpu)[1], gpu.name


# (layout, GPUs used on each node, SGLang refuses, vLLM refuses): how a placement splits an instance.
NODE_SPLITS = [
    (Layout(tp_size=1, pp_size=4), [3, 1], True, False),   # vLLM's Ray PP takes any split; SGLang needs equal shares
    (Layout(tp_size=1, pp_size=4), [2, 2], False, False),
    (Layout(tp_size=1, pp_size=2, dp_size=2, ep_size=2), [3, 1], True, True),  # a 2-GPU DP rank cannot fit 1 GPU
    (Layout(tp_size=1, pp_size=2, dp_size=3, ep_size=3), [4, 2], True, False),  # whole 2-GPU ranks: vLLM fits them
    (Layout(tp_size=8, pp_size=2, dp_size=2, ep_size=16), [8, 8, 8, 8], False, False),  # ranks over whole nodes
    (Layout(tp_size=8, pp_size=2, dp_size=2, ep_size=16), [8, 8, 8, 4, 4], True, True),
]


@pytest.mark.parametrize("layout,node_gpus,sglang_refuses,vllm_refuses", NODE_SPLITS)
@pytest.mark.parametrize("engine", ["vllm==0.33.0", "vllm==0.13.0", "sglang==0.5.23", "sglang==0.5.3"])
def test_node_split(engine, layout, node_gpus, sglang_refuses, vllm_refuses):
    found = check_node_split(engine, layout, node_gpus)
    refused = sglang_refuses if engine.startswith("sglang") else vllm_refuses
    assert [v.rule for v in found] == (["uneven_nodes"] if refused else [])
    if refused:
        assert found[0].values["node_gpus"] == node_gpus
        assert found[0].source.file == ("sglang/srt/entrypoints/engine.py" if engine.startswith("sglang")
                                        else "vllm/v1/engine/utils.py")
    assert check_node_split(engine, layout, [sum(node_gpus)]) == []  # one node: nothing to split


# (engine, prefill GPU, decode GPU, allowed): vLLM's NIXL handshake hashes the attention backend's
# name; SGLang's NIXL transfer pages KV by the prefill's page size, which the backend sets; the default
# backend follows the compute capability major (or ROCm's own list).
PD_GPU = [
    ("vllm==0.33.0", "H100-SXM", "H200", True), ("vllm==0.33.0", "H100-SXM", "B200", False),
    ("vllm==0.33.0", "B200", "MI300X", False), ("vllm==0.13.0", "B200", "H100-SXM", False),
    ("vllm==0.33.0", "MI300X", "MI300X", True), ("sglang==0.5.23", "H100-SXM", "B200", False),
    ("sglang==0.5.3", "B200", "H200", False), ("sglang==0.5.23", "H100-SXM", "H200", True),
]


@pytest.mark.parametrize("engine,prefill_gpu,decode_gpu,allowed", PD_GPU)
def test_pd_attention_backend_family(engine, prefill_gpu, decode_gpu, allowed):
    found = check_pair(engine, DEEPSEEK, Layout(tp_size=8), Layout(tp_size=8), get_gpu(prefill_gpu),
                       get_gpu(decode_gpu))
    assert [v.rule for v in found] == ([] if allowed else ["pd_attention_backend"])
    if not allowed:  # vLLM: the handshake hashes the backend; SGLang: NIXL pages KV by the prefill's page size
        assert found[0].source.file.startswith("sglang/srt/disaggregation/nixl/conn.py" if engine.startswith("sglang")
                                               else "vllm/distributed/kv_transfer/kv_connector/v1/")
        assert found[0].values == {"prefill_gpu": get_gpu(prefill_gpu).name, "decode_gpu": get_gpu(decode_gpu).name}
    # Without the GPUs only the layout rules apply.
    assert check_pair(engine, DEEPSEEK, Layout(tp_size=8), Layout(tp_size=8)) == []


# vLLM's NIXL handshake hashes the KV cache dtype; SGLang's NIXL transfer copies prefill slots into
# decode slots of the decode's stride (0.5.23 nixl/conn.py:1199, 0.5.3 nixl/conn.py:332).
@pytest.mark.parametrize("engine,file", [("vllm==0.33.0", "vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py"),
                                         ("vllm==0.13.0", "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"),
                                         ("sglang==0.5.23", "sglang/srt/disaggregation/nixl/conn.py"),
                                         ("sglang==0.5.3", "sglang/srt/disaggregation/nixl/conn.py")])
def test_pd_kv_cache_dtype(engine, file):
    found = check_pair(engine, QWEN, Layout(tp_size=2, kv_precision="fp8"), Layout(tp_size=2))
    assert [v.rule for v in found] == ["pd_kv_cache_dtype"]
    assert found[0].values == {"prefill_kv": "fp8", "decode_kv": "bf16"} and found[0].source.file == file
    assert check_pair(engine, QWEN, Layout(tp_size=2, kv_precision="fp8"), Layout(tp_size=2, kv_precision="fp8")) == []


# (engine, model, prefill weights, decode weights, refused checkpoints or None): vLLM's NIXL handshake
# hashes model_config.model, the checkpoint served. On B200 llama-3.1-8b's fp8 weights are its 16-bit
# release quantized at load time, its fp4 weights nvidia's NVFP4 release; qwen3-32b has an FP8 release.
LLAMA_8B = get_model("llama-3.1-8b")
PD_CHECKPOINT = [
    ("vllm==0.33.0", LLAMA_8B, "fp8", "bf16", None), ("vllm==0.33.0", LLAMA_8B, "fp4", "fp4", None),
    ("vllm==0.33.0", LLAMA_8B, "fp4", "fp8", {"nvidia/Llama-3.1-8B-Instruct-FP4", "meta-llama/Llama-3.1-8B"}),
    ("vllm==0.33.0", QWEN, "fp8", "bf16", {"Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B"}),
    ("vllm==0.13.0", QWEN, "bf16", "fp4", {"Qwen/Qwen3-32B", "nvidia/Qwen3-32B-FP4"}),
    ("sglang==0.5.23", QWEN, "fp4", "fp8", None),
]


@pytest.mark.parametrize("engine,model,prefill_weights,decode_weights,refused", PD_CHECKPOINT)
def test_pd_checkpoint(engine, model, prefill_weights, decode_weights, refused):
    b200 = get_gpu("B200")
    found = check_pair(engine, model, Layout(tp_size=2, weight_precision=prefill_weights),
                       Layout(tp_size=2, weight_precision=decode_weights), b200, b200)
    assert [v.rule for v in found] == ([] if refused is None else ["pd_checkpoint"])
    if refused is not None:
        assert found[0].source.file.startswith("vllm/distributed/kv_transfer/kv_connector/v1/")
        assert set(found[0].values.values()) == refused


@pytest.mark.parametrize("engine,model,supported", [
    ("vllm==0.33.0", "glm-5", True), ("sglang==0.5.23", "glm-5", True),
    ("vllm==0.13.0", "glm-5", False), ("sglang==0.5.3", "glm-5", False),
    ("vllm==0.13.0", "qwen3.5-27b", False), ("vllm==0.13.0", "kimi-k2.5", False),
    ("sglang==0.5.3", "minimax-m2.5", False), ("vllm==0.13.0", "minimax-m2.5", True),
    ("sglang==0.5.3", "deepseek-v3", True), ("vllm==0.13.0", "llama-4-scout", True),
])
def test_the_release_must_implement_the_architecture(engine, model, supported):
    spec = get_model(model)
    layout = Layout(tp_size=8, weight_precision=spec.checkpoint_precision)
    found = check_layout(engine, spec, B200, layout, "colocated")
    assert ("model_unsupported" not in [v.rule for v in found]) == supported
    if not supported:
        assert found[0].rule == "model_unsupported" and found[0].values["model"] == model
        assert found[0].source.file.startswith(("vllm/model_executor/models/registry.py", "sglang/srt/models/"))


def test_the_default_releases_implement_every_catalog_family():
    from layoutopt.engines.architectures import HF_ARCHITECTURES, releases_implementing

    for family in HF_ARCHITECTURES:
        assert {"vllm==0.33.0", "sglang==0.5.23"} <= set(releases_implementing(family)), family
    assert releases_implementing("glm_moe_dsa") == ["vllm==0.33.0", "sglang==0.5.23"]
