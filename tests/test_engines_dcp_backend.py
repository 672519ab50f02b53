"""SGLang 0.5.23 runs decode context parallelism only in some attention backends (fact
``dcp_attention_backend``): a DCP server names one, and a GQA model with sliding-window layers
cannot prefill under DCP (the Triton backend refuses it)."""

from __future__ import annotations

import pytest

from layoutopt.engines import check_layout, load_engine_data
from layoutopt.engines.attention_backend import required_attention_backend
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.plan import Layout
from layoutopt.report.emit import render
from test_report_helpers import MODEL_IDS, engine_commands, fixture_plan


@pytest.mark.parametrize("engine,model,gpu,dcp,expected", [
    ("sglang==0.5.23", "qwen3-32b", "H100-SXM", 2, "triton"),    # fa3 has no DCP path
    ("sglang==0.5.23", "qwen3-32b", "B200", 2, "triton"),        # nor trtllm_mha
    ("sglang==0.5.23", "qwen3-32b", "H100-SXM", 1, None),
    ("sglang==0.5.23", "deepseek-v3", "H200", 8, "flashinfer"),   # Hopper's MLA default is fa3
    ("sglang==0.5.23", "deepseek-v3", "B200", 8, None),           # trtllm_mla has its own DCP path
    ("sglang==0.5.23", "glm-5", "H200", 8, None),                 # the DSA backend has one
    ("sglang==0.5.3", "qwen3-32b", "H100-SXM", 2, None),          # no DCP in 0.5.3 (the rules refuse it)
    ("vllm==0.33.0", "qwen3-32b", "H100-SXM", 2, None),
])
def test_the_backend_a_dcp_server_names(engine, model, gpu, dcp, expected):
    assert required_attention_backend(engine, get_model(model), get_gpu(gpu), dcp) == expected


def test_the_fact_and_its_source():
    fact = load_engine_data("sglang", "0.5.23").fact("dcp_attention_backend")
    assert fact.value == {"gqa": "triton", "mla_sm90": "flashinfer"}
    assert fact.source.file == "sglang/srt/layers/attention/triton_backend.py"
    assert load_engine_data("sglang", "0.5.3").fact("dcp_attention_backend") is None


def test_sliding_window_gqa_cannot_prefill_under_dcp():
    gpt_oss, h100 = get_model("gpt-oss-120b"), get_gpu("H100-SXM")
    layout = Layout(tp_size=16, dcp_size=2, weight_precision="mxfp4")
    assert gpt_oss.num_sliding_window_layers and gpt_oss.num_kv_heads == 8
    [v] = check_layout("sglang==0.5.23", gpt_oss, h100, layout, "colocated")
    assert v.rule == "dcp_unsupported" and "sliding-window" in v.message
    assert check_layout("sglang==0.5.23", gpt_oss, h100, layout, "decode") == []
    assert check_layout("sglang==0.5.23", get_model("qwen3-32b"), h100, Layout(tp_size=16, dcp_size=2),
                        "colocated") == []


def test_an_emitted_sglang_dcp_server_names_triton():
    plan = fixture_plan("colocated")
    pools = [p.model_copy(update={"tp_size": 16, "dcp_size": 2, "gpus_per_instance": 16}) for p in plan.pools]
    plan = plan.model_copy(update={"pools": pools})
    files = render(plan, engine="sglang", model_id=MODEL_IDS[plan.model], namespace="llm")
    commands = [argv for path, text in files.items() if path.startswith("launch/") for argv in engine_commands(text)]
    assert commands
    for argv in commands:
        assert argv[argv.index("--dcp-size") + 1] == "2"
        assert argv[argv.index("--attention-backend") + 1] == "triton"


def test_mla_dcp_with_fp8_kv_on_hopper_is_refused():
    # fa3 has no DCP path, FlashMLA asserts DCP 1 with FP8 KV, FlashInfer MLA casts the KV pool every step.
    deepseek, h200 = get_model("deepseek-v3"), get_gpu("H200")
    fp8_kv = Layout(tp_size=8, dcp_size=8, weight_precision="fp8", kv_precision="fp8")
    [v] = check_layout("sglang==0.5.23", deepseek, h200, fp8_kv, "decode")
    assert v.rule == "dcp_unsupported" and "FP8 KV" in v.message
    bf16_kv = fp8_kv.model_copy(update={"kv_precision": "bf16"})
    assert check_layout("sglang==0.5.23", deepseek, h200, bf16_kv, "decode") == []
    assert check_layout("sglang==0.5.23", deepseek, get_gpu("B200"), fp8_kv, "decode") == []  # trtllm_mla
