"""The --attention-backend a launch must name (engines/attention_backend.py): SGLang 0.5.3 starts a
Llama 4 server only with fa3, aiter or triton named (server_args.py:786-791); 0.5.23 picks one."""

from __future__ import annotations

import pytest

from layoutopt.api import solve
from layoutopt.engines import load_engine_data
from layoutopt.engines.attention_backend import required_attention_backend
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.report.emit import render
from test_report_helpers import engine_commands

LLAMA4 = get_model("llama-4-scout")


@pytest.mark.parametrize("gpu,backend", [("H100-SXM", "fa3"), ("H200-SXM", "fa3"), ("B200", "triton"),
                                         ("A100-80GB-SXM", "triton"), ("MI300X", "aiter")])
def test_sglang_0_5_3_names_a_llama4_backend_it_accepts(gpu, backend):
    assert required_attention_backend("sglang==0.5.3", LLAMA4, get_gpu(gpu)) == backend
    assert backend in load_engine_data("sglang", "0.5.3").fact("required_attention_backend").value["Llama4"]


def test_other_models_and_releases_keep_the_engine_choice():
    h100 = get_gpu("H100-SXM")
    assert required_attention_backend("sglang==0.5.3", get_model("qwen3-32b"), h100) is None
    assert required_attention_backend("sglang==0.5.23", LLAMA4, h100) is None   # picks its own
    assert required_attention_backend("vllm", LLAMA4, h100) is None


def test_an_emitted_sglang_0_5_3_llama4_plan_names_the_backend_on_every_server():
    plan = solve("llama-4-scout", "8xH100", engine="sglang==0.5.3")
    files = render(plan, engine="sglang==0.5.3", model_id=LLAMA4.hf_id, namespace="llm")
    commands = [argv for path, text in files.items() if path.startswith("launch/") for argv in engine_commands(text)]
    assert commands
    for argv in commands:
        assert argv.count("--attention-backend") == 1 and argv[argv.index("--attention-backend") + 1] == "fa3", argv
    manifests = [text for path, text in files.items() if path.startswith("k8s/") and "launch_server" in text]
    assert manifests and all("--attention-backend" in text for text in manifests)
