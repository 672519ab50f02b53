"""SGLang's KV page size: what the engine resolves per GPU and model (engines/page_size.py, from the
engine data), and the one explicit --page-size emit gives both sides of a disaggregated SGLang plan."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from layoutopt.engines import load_engine_data
from layoutopt.engines.architectures import HF_ARCHITECTURES
from layoutopt.engines.page_size import PageSize, sglang_page_size
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.catalog import get_gpu, list_gpus
from layoutopt.model_catalog.catalog import get_model, list_models
from layoutopt.model_catalog.hf_import import SUPPORTED_MODEL_TYPES
from layoutopt.report.deployment import disaggregated_page_sizes
from layoutopt.report.emit import render
from test_report_helpers import MODEL_IDS, engine_commands, fixture_plan

RELEASES = ("sglang==0.5.23", "sglang==0.5.3")


def _models():
    return [get_model(m if isinstance(m, str) else m.name) for m in list_models()]


def test_architectures_cover_every_family_layoutopt_reads_and_match_the_catalog_configs():
    assert set(HF_ARCHITECTURES) == set(SUPPORTED_MODEL_TYPES)
    configs = resources.files("layoutopt.model_catalog").joinpath("data", "hf_configs")
    for config in configs.iterdir():
        data = json.loads(config.read_text())
        assert HF_ARCHITECTURES[data["model_type"]] == data["architectures"][0], config.name


# (release, GPU, model, page size SGLang resolves unset). 0.5.23: fa3 on Hopper and the others without a
# constraint run pages of 1 (arg_groups/overrides.py:1362); SM100 picks trtllm_mha (model_override_base.py:325)
# or, for the DeepSeek family, trtllm_mla (model_overrides/deepseek_v2.py:185), both snapping the unset page
# size to 64 (overrides.py:1183, 1159); DSA models set 64 themselves (deepseek_v2.py:171). 0.5.3 resolves 1
# before the model runner picks flashinfer on SM100 (server_args.py:939, model_runner.py:531), except GPT-OSS's
# trtllm_mha (server_args.py:737, 924).
EXPECTED = [
    ("sglang==0.5.23", "H100-SXM", "llama-3.1-70b", 1),
    ("sglang==0.5.23", "H200-SXM", "deepseek-v3", 1),
    ("sglang==0.5.23", "A100-80GB-SXM", "qwen3-32b", 1),
    ("sglang==0.5.23", "L40S", "llama-3.1-8b", 1),
    ("sglang==0.5.23", "MI300X", "llama-3.1-70b", 1),
    ("sglang==0.5.23", "B200", "llama-3.1-70b", 64),
    ("sglang==0.5.23", "GB300", "qwen3.5-397b-a17b", 64),
    ("sglang==0.5.23", "B200", "gpt-oss-120b", 64),
    ("sglang==0.5.23", "B300", "deepseek-r1", 64),
    ("sglang==0.5.23", "B200", "kimi-k2.5", 64),
    ("sglang==0.5.23", "H100-SXM", "glm-5", 64),
    ("sglang==0.5.23", "B200", "glm-5", 64),
    ("sglang==0.5.3", "H100-SXM", "llama-3.1-70b", 1),
    ("sglang==0.5.3", "B200", "llama-3.1-70b", 1),
    ("sglang==0.5.3", "B200", "deepseek-v3", 1),
    ("sglang==0.5.3", "B200", "gpt-oss-20b", 64),
    ("sglang==0.5.3", "H100-SXM", "gpt-oss-20b", 1),
]


@pytest.mark.parametrize("release,gpu,model,tokens", EXPECTED, ids=[f"{r}-{g}-{m}" for r, g, m, _ in EXPECTED])
def test_the_page_size_sglang_resolves(release, gpu, model, tokens):
    page = sglang_page_size(release, get_model(model), get_gpu(gpu))
    assert page is not None and page.tokens == tokens
    assert page.sources and all(s.file.startswith("sglang/") for s in page.sources)


def test_a_dsa_model_on_rocm_is_left_to_the_host_in_0_5_23():
    assert sglang_page_size("sglang==0.5.23", get_model("glm-5"), get_gpu("MI300X")) is None


def test_vllm_has_no_page_size_rule():
    assert sglang_page_size("vllm", get_model("llama-3.1-70b"), get_gpu("H100-SXM")) is None


@pytest.mark.parametrize("release", RELEASES)
def test_every_resolved_page_size_is_one_its_backend_accepts(release):
    data = load_engine_data(*release.split("=="))
    for gpu in list_gpus():
        for model in _models():
            page = sglang_page_size(release, model, gpu)
            if page is None:
                continue
            constraint = data.fact(f"page_size_{page.backend}") if page.backend else None
            if constraint is not None:
                assert page.tokens in constraint.value["accepts"], (gpu.name, model.name, page)
            # SGLang asserts chunked_prefill_size % page_size == 0 on prefill servers, and emit pins
            # --chunked-prefill-size to the profile's step budget (8,192 or 16,384 tokens).
            assert 8192 % page.tokens == 0


def _sglang_disagg_scripts(plan, release="sglang"):
    files = render(plan, engine=release, model_id=MODEL_IDS[plan.model], namespace="llm")
    return {path: engine_commands(text) for path, text in files.items() if path.startswith("launch/")}


def _page_sizes(commands):
    sizes = []
    for argv in commands:
        assert argv.count("--page-size") == 1, argv
        sizes.append(int(argv[argv.index("--page-size") + 1]))
    return sizes


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("gpu", ["H100-SXM", "B200"])
def test_both_sides_of_an_sglang_disaggregated_plan_launch_with_one_page_size(release, gpu):
    plan = fixture_plan("disaggregated")
    plan = plan.model_copy(update={"pools": [p.model_copy(update={"gpu": gpu}) for p in plan.pools]})
    scripts = _sglang_disagg_scripts(plan, release)
    roles = {argv[argv.index("--disaggregation-mode") + 1] for cmds in scripts.values() for argv in cmds}
    assert roles == {"prefill", "decode"}
    sizes = _page_sizes([argv for cmds in scripts.values() for argv in cmds])
    expected = sglang_page_size(release, get_model(plan.model), get_gpu(gpu))
    assert set(sizes) == {expected.tokens}
    data = load_engine_data(*release.split("=="))
    assert data.flag("--page-size") is not None
    if expected.backend and data.fact(f"page_size_{expected.backend}") is not None:
        assert expected.tokens in data.fact(f"page_size_{expected.backend}").value["accepts"]


def test_aggregated_sglang_plans_keep_the_engine_default():
    files = render(fixture_plan("colocated"), engine="sglang", model_id=MODEL_IDS[fixture_plan("colocated").model],
                   namespace="llm")
    commands = [argv for path, text in files.items() if path.startswith("launch/") for argv in engine_commands(text)]
    assert commands and not any("--page-size" in argv for argv in commands)


def test_pools_that_would_page_differently_are_refused():
    plan = fixture_plan("disaggregated")
    model = get_model(plan.model)
    gpus = [get_gpu("H100-SXM" if p.role == "prefill" else "B200") for p in plan.pools]
    with pytest.raises(InputError, match="one page size on both sides"):
        disaggregated_page_sizes(plan, parse_release("sglang"), model, gpus)
    assert set(disaggregated_page_sizes(plan, parse_release("sglang"), model, [get_gpu("B200")] * len(gpus))) == {64}
    assert set(disaggregated_page_sizes(plan, parse_release("vllm"), model, gpus)) == {None}


def parse_release(text):
    from layoutopt.report.engine_flags import parse_engine

    return parse_engine(text)


@pytest.mark.parametrize("release", RELEASES)
def test_attention_dp_must_leave_each_rank_whole_pages_of_its_chunk(release, monkeypatch):
    # SGLang divides --chunked-prefill-size over attention-DP ranks and then asserts each rank's
    # share is a multiple of the page size (0.5.23 arg_groups/validation_hook.py; 0.5.3 server_args.py).
    import layoutopt.report.deployment as deployment

    plan = fixture_plan("moe_ep_dp")  # an attention-DP prefill (DP8) and decode (DP16)
    [prefill] = [p for p in plan.pools if p.role == "prefill"]
    assert prefill.dp_size == 8
    model_id = MODEL_IDS[plan.model]
    assert render(plan, engine=release, model_id=model_id, namespace="llm")  # 8,192 // 8 in pages of 1
    fact = load_engine_data(*release.split("==")).fact("chunked_prefill_page_multiple")
    # A budget whose per-rank share is not whole pages, with the 64-token pages of SM100's trtllm backends.
    monkeypatch.setattr(deployment, "step_token_budget", lambda release, gpu: 8192 + 8 * 32)
    monkeypatch.setattr("layoutopt.engines.page_size.sglang_page_size",
                        lambda *args: PageSize(tokens=64, backend="trtllm_mla", sources=()))
    with pytest.raises(InputError, match=r"dp_size.*1056 tokens each.*64-token page") as refused:
        render(plan, engine=release, model_id=model_id, namespace="llm")
    assert str(fact.source) in str(refused.value)
    monkeypatch.setattr(deployment, "step_token_budget", lambda release, gpu: 8192 + 8 * 64)
    assert render(plan, engine=release, model_id=model_id, namespace="llm")
