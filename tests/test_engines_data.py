"""Generated engine data: schema, the facts read from each release, references and the catalog command."""

from __future__ import annotations

import json
import sys
from importlib import resources

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded
from layoutopt.engines import DEFAULT_VERSIONS, available_versions, load_engine_data, parse_engine_ref
from layoutopt.errors import InputError

VERSIONS = [("vllm", "0.33.0"), ("vllm", "0.13.0"), ("sglang", "0.5.23"), ("sglang", "0.5.3")]


@pytest.mark.parametrize("engine,version", VERSIONS)
def test_every_data_file_loads_with_sources(engine, version):
    data = load_engine_data(engine, version)
    assert (data.engine, data.version) == (engine, version)
    assert data.wheel.startswith(f"{engine}-{version}-") and len(data.wheel_sha256) == 64
    top = engine + "/"
    for name, fact in data.facts.items():
        assert fact.source.file.startswith(top) and fact.source.line >= 1, name
        assert fact.quote and fact.note, name
    for flag in data.flags:
        assert flag.name.startswith("--") and flag.source.file.startswith(top), flag.name
    names = [f.name for f in data.flags]
    assert len(names) == len(set(names))


# (engine, version, fact, value the release's source gives)
FACTS = [
    ("vllm", "0.13.0", "pd_tp_rule", "decode_multiple_of_prefill"),
    ("vllm", "0.33.0", "pd_tp_rule", "either_divides"),
    ("vllm", "0.13.0", "pcp_attention", []),
    ("vllm", "0.33.0", "pcp_attention", ["mla"]),
    ("vllm", "0.13.0", "dcp_attention", ["gqa", "mla"]),
    ("vllm", "0.33.0", "dcp_kv_connector", "mla_only"),
    ("vllm", "0.13.0", "pp_kv_connector", {"prefill": False, "decode": False}),
    ("vllm", "0.33.0", "pp_kv_connector", {"prefill": True, "decode": False}),
    ("vllm", "0.33.0", "pp_kv_connector_hybrid_attention", {"sliding_window": False, "chunked_local_attention": True}),
    ("vllm", "0.33.0", "pcp_kv_connector_roles", ["prefill"]),
    ("vllm", "0.33.0", "pcp_dcp_kv_connector", "tp1_dcp_equals_pcp"),
    ("sglang", "0.5.23", "pd_dcp_rule", "equal_or_mla_from_one"),
    ("sglang", "0.5.23", "chunked_prefill_page_multiple", "chunked_prefill_size // attention_dp % page_size == 0"),
    ("sglang", "0.5.3", "chunked_prefill_page_multiple", "chunked_prefill_size // attention_dp % page_size == 0"),
    ("vllm", "0.33.0", "dcp_attention_rocm", ["mla"]),
    ("vllm", "0.33.0", "pcp_dcp_sizes", "1, pcp_size or tp_size x pcp_size"),
    ("vllm", "0.33.0", "pcp_dcp_attention", ["sparse_mla"]),
    ("vllm", "0.33.0", "pcp_multimodal", False),
    ("vllm", "0.33.0", "pcp_dcp_comm_backend", "ag_rs"),
    ("vllm", "0.33.0", "pd_context_parallel", "no_replicated_pcp_with_dcp_peer"),
    ("vllm", "0.13.0", "nixl_side_channel_port_offset", "data_parallel_rank"),
    ("vllm", "0.33.0", "nixl_side_channel_port_offset", "data_parallel_index"),
    ("vllm", "0.33.0", "nixl_side_channel_host", {"env": "VLLM_NIXL_SIDE_CHANNEL_HOST", "default": "localhost"}),
    ("vllm", "0.33.0", "nixl_side_channel_port", {"env": "VLLM_NIXL_SIDE_CHANNEL_PORT", "default": 5600}),
    ("vllm", "0.33.0", "fp8_compute_min_capability", 89),
    ("sglang", "0.5.23", "pd_tp_rule", "either_divides"),
    ("sglang", "0.5.23", "pd_pp_rule", "decode_equal_or_one"),
    ("sglang", "0.5.23", "host_default", "127.0.0.1"),
    ("sglang", "0.5.3", "required_attention_backend", {"Llama4": ["fa3", "aiter", "triton"]}),
    ("sglang", "0.5.23", "page_size_default", 1),
    ("sglang", "0.5.3", "page_size_default", 1),
    ("sglang", "0.5.23", "page_size_trtllm_mha", {"accepts": [16, 32, 64, 128], "otherwise": 64}),
    ("sglang", "0.5.3", "page_size_trtllm_mha", {"accepts": [16, 32, 64], "otherwise": 64}),
    ("sglang", "0.5.23", "page_size_trtllm_mla", {"accepts": [32, 64], "otherwise": 64}),
    ("sglang", "0.5.23", "sm100_attention_backend", {"gqa": "trtllm_mha", "gqa_asymmetric_kv": "fa4",
                                                     "mla": "flashinfer"}),
    ("sglang", "0.5.3", "sm100_attention_backend", {"gqa": "flashinfer", "mla": "flashinfer"}),
    ("sglang", "0.5.3", "sm100_model_attention_backend", {"GptOssForCausalLM": "trtllm_mha"}),
    ("sglang", "0.5.23", "pd_page_size_check", "equal"),
]


@pytest.mark.parametrize("engine,version,fact,value", FACTS, ids=[f"{e}=={v}:{f}" for e, v, f, _ in FACTS])
def test_facts_read_from_the_release(engine, version, fact, value):
    assert load_engine_data(engine, version).fact(fact).value == value


def test_the_0_13_tp_rule_quotes_its_assertion():
    fact = load_engine_data("vllm", "0.13.0").fact("pd_tp_rule")
    assert str(fact.source) == "vllm/distributed/kv_transfer/kv_connector/utils.py:261"
    assert "self.tp_size % remote_tp_size == 0" in fact.quote


# (engine, version, flag spelling, choice it must offer or None)
FLAGS = [
    ("vllm", "0.33.0", "--tensor-parallel-size", None), ("vllm", "0.33.0", "-tp", None),
    ("vllm", "0.33.0", "--kv-transfer-config", None), ("vllm", "0.33.0", "--no-enable-expert-parallel", None),
    ("vllm", "0.33.0", "--data-parallel-address", None), ("vllm", "0.33.0", "--headless", None),
    ("vllm", "0.33.0", "--prefill-context-parallel-size", None),
    ("vllm", "0.33.0", "--quantization", "modelopt_fp4"), ("vllm", "0.13.0", "--kv-cache-dtype", "fp8"),
    ("vllm", "0.13.0", "--distributed-executor-backend", "ray"),
    ("sglang", "0.5.23", "--disaggregation-transfer-backend", "nixl"),
    ("sglang", "0.5.23", "--disaggregation-bootstrap-port", None), ("sglang", "0.5.23", "--tp-size", None),
    ("sglang", "0.5.3", "--enable-dp-attention", None), ("sglang", "0.5.3", "--disaggregation-mode", "prefill"),
]


@pytest.mark.parametrize("engine,version,flag,choice", FLAGS, ids=[f"{e}=={v}{f}" for e, v, f, _ in FLAGS])
def test_flags_with_choices(engine, version, flag, choice):
    found = load_engine_data(engine, version).flag(flag)
    assert found is not None
    if choice is not None:
        assert choice in found.choices


def test_flags_absent_where_the_release_lacks_them():
    assert load_engine_data("sglang", "0.5.3").flag("--dcp-size") is None
    assert load_engine_data("vllm", "0.13.0").flag("--no-such-flag") is None


# (text, reference it parses to)
REFS = [("vllm", "vllm==0.33.0"), ("vLLM==0.13.0", "vllm==0.13.0"), ("sglang", "sglang==0.5.23"),
        ("sglang==0.5.3", "sglang==0.5.3"), ("trtllm", "trtllm")]


@pytest.mark.parametrize("text,expected", REFS)
def test_engine_refs(text, expected):
    assert str(parse_engine_ref(text)) == expected


@pytest.mark.parametrize("text,allowed", [
    ("vllm==0.99.0", "versions with engine data: 0.33.0, 0.13.0"), ("vlm", "did you mean vllm"),
    ("trtllm==1.0", "performance-model profile only"), ("vllm==", "engine==version"),
])
def test_bad_engine_refs_name_what_is_allowed(text, allowed):
    with pytest.raises(InputError) as error:
        parse_engine_ref(text)
    assert error.value.field == "--engine" and allowed in str(error.value)


def test_default_versions_have_data():
    for engine, version in DEFAULT_VERSIONS.items():
        assert version == available_versions(engine)[0]


CATALOG = [
    (["catalog", "engines"], "vllm    0.33.0   yes", 0),
    (["catalog", "engines"], "performance-model profile only", 0),
    (["catalog", "engines", "vllm==0.13.0"], "pd_tp_divisibility", 0),
    (["catalog", "engines", "vllm==0.13.0"], "decode TP must be a", 0),
    (["catalog", "engines", "vllm==0.13.0"], "vllm/platforms/cuda.py:407", 0),
    (["catalog", "engines", "vllm==0.33.0"], "PCP supported by: MLA", 0),
    (["catalog", "engines", "sglang"], "sglang==0.5.3 rules", 0),
    (["catalog", "engines", "trtllm"], "performance-model profile only", 0),
]


@pytest.mark.parametrize("args,expected,status", CATALOG, ids=[" ".join(c[0]) + f"~{c[1]}" for c in CATALOG])
def test_catalog_engines(args, expected, status):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status, result.output
    assert expected in result.output


def test_catalog_engines_json():
    result = CliRunner().invoke(cli, ["catalog", "engines", "--format", "json"])
    entries = json.loads(result.output)
    assert [(e["engine"], e["version"]) for e in entries] == VERSIONS + [("trtllm", None)]
    rules = {r["rule"]: r for r in entries[1]["rules"]}
    assert rules["pd_tp_divisibility"]["source"] == "vllm/distributed/kv_transfer/kv_connector/utils.py:261"
    assert entries[0]["bench"]["program"] == ["vllm", "bench", "serve"] and entries[0]["bench"]["num_flags"] > 50
    assert entries[0]["router"] == {"package": "vllm-router", "version": "0.1.17", "program": ["vllm-router"],
                                    "num_flags": 71}
    assert entries[3]["bench"]["program"] == ["python3", "-m", "sglang.bench_serving"]


def test_catalog_engines_unknown_version_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", "catalog", "engines", "vllm==0.1"])
    assert run_guarded(cli) == 2
    err = capsys.readouterr().err
    assert "0.33.0, 0.13.0" in err and err.strip().count("\n") == 0
