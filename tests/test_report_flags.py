"""Every flag of every generated engine command exists in the flag list of the engine version the
file names; layout features an engine version lacks become comments, never invented flags."""

from __future__ import annotations

import pytest
import yaml

from layoutopt.errors import InputError
from layoutopt.plan import Pool
from layoutopt.report.emit import render
from layoutopt.report.engine_flags import ENGINE_VERSIONS, load_engine_flags, node_launch, unknown_flags
from test_report_helpers import MODEL_IDS, PLAN_NAMES, engine_commands, engine_named_in, fixture_plan

CASES = [(name, engine) for name in PLAN_NAMES for engine in ("vllm", "sglang")]


def _pool(**changes) -> Pool:
    base = dict(role="colocated", gpu="H100-SXM", instances=1, gpus_per_instance=4, tp_size=4, pp_size=1, ep_size=1,
                dp_size=1, dcp_size=1, pcp_size=1, precision="bf16", kv_precision="bf16", max_batch_size=64,
                capacity_rps=1.0, cost_usd_per_hour=10.0)
    return Pool(**{**base, **changes})


def _manifest_commands(text: str) -> list[list[str]]:
    commands = []
    for doc in yaml.safe_load_all(text):
        spec = doc["spec"]
        templates = ([spec["template"]] if "template" in spec else
                     [spec["leaderWorkerTemplate"][k] for k in ("leaderTemplate", "workerTemplate")]
                     if "leaderWorkerTemplate" in spec else [])
        for template in templates:
            for container in template["spec"]["containers"]:
                argv = container["command"] + container.get("args", [])
                commands += engine_commands(argv[2]) if argv[:2] == ["/bin/sh", "-c"] else [argv]
    return commands


@pytest.mark.parametrize(("name", "engine"), CASES)
def test_every_generated_flag_exists_in_the_named_engine_version(name, engine):
    plan = fixture_plan(name)
    files = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], plots=False)
    checked = 0
    for path, text in files.items():
        if path.startswith("launch/"):
            commands = engine_commands(text)
            assert commands, f"{path} starts no engine"
        elif path.startswith("k8s/"):
            commands = _manifest_commands(text)
        else:
            continue
        named_engine, version = engine_named_in(text)
        assert (named_engine, version) == (engine, ENGINE_VERSIONS[engine])
        flags = load_engine_flags(named_engine, version)
        for argv in commands:
            assert unknown_flags(argv, flags) == [], f"{path}: {argv}"
            checked += sum(token.startswith("--") for token in argv)
    assert checked > 0


def test_flag_lists_name_their_version_and_sources():
    for engine, version in ENGINE_VERSIONS.items():
        flags = load_engine_flags(engine)
        assert flags.version == version
        assert flags.sources and all(s.startswith("http") for s in flags.sources)
        assert all(f.startswith("--") and " " not in f for f in flags.flags)


@pytest.mark.parametrize(("engine", "version"), [("trtllm", None), ("vllm", "0.0.1")])
def test_unknown_engine_or_version_is_an_input_error(engine, version):
    with pytest.raises(InputError):
        load_engine_flags(engine, version)


def test_unknown_flags_spots_invented_flags():
    flags = load_engine_flags("vllm")
    argv = ["vllm", "serve", "m", "--tensor-parallel-size", "2", "--max-num-seqs=8", "--expert-parallel-size", "4"]
    assert unknown_flags(argv, flags) == ["--expert-parallel-size"]


@pytest.mark.parametrize(("pool_changes", "engine", "flag", "note_word"), [
    # vLLM has only ep = tp x dp; a partial EP split is a comment, not a flag.
    (dict(tp_size=4, dp_size=2, gpus_per_instance=8, ep_size=4), "vllm", "--enable-expert-parallel", "ep_size=4"),
    # SGLang 0.5.3 has no general DCP / PCP.
    (dict(dcp_size=2), "sglang", "--decode-context-parallel-size", "decode context parallel"),
    (dict(pcp_size=2, gpus_per_instance=8), "sglang", "--prefill-context-parallel-size", "prefill context parallel"),
    # FP4 weights come from the checkpoint; neither engine quantizes to FP4 from a flag.
    (dict(precision="fp4"), "vllm", "--quantization", "FP4"),
    (dict(precision="fp4"), "sglang", "--quantization", "FP4"),
])
def test_missing_features_become_notes(pool_changes, engine, flag, note_word):
    launch = node_launch(engine, _pool(**pool_changes), model="m", port=8000)
    assert flag not in launch.argv
    assert any(note_word in note for note in launch.notes)


@pytest.mark.parametrize(("pool_changes", "engine", "expected"), [
    (dict(tp_size=2, dp_size=4, ep_size=8, gpus_per_instance=8), "vllm",
     ["--tensor-parallel-size", "2", "--data-parallel-size", "4", "--enable-expert-parallel"]),
    (dict(tp_size=2, dp_size=4, ep_size=8, gpus_per_instance=8), "sglang",
     ["--tp-size", "8", "--dp-size", "4", "--enable-dp-attention", "--ep-size", "8"]),
    (dict(role="prefill", precision="fp8", kv_precision="fp8"), "vllm",
     ["--quantization", "fp8", "--kv-cache-dtype", "fp8", "--kv-transfer-config",
      '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}']),
    (dict(role="decode", kv_precision="fp8", max_batch_size=300), "sglang",
     ["--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "300", "--disaggregation-mode", "decode"]),
    (dict(tp_size=8, dcp_size=2, pcp_size=2, gpus_per_instance=16), "vllm",
     ["--decode-context-parallel-size", "2", "--prefill-context-parallel-size", "2"]),
])
def test_layout_maps_to_engine_flags(pool_changes, engine, expected):
    argv = list(node_launch(engine, _pool(**pool_changes), model="m", port=8000).argv)
    text = " ".join(argv)
    for i in range(0, len(expected)):
        assert expected[i] in argv
    assert " ".join(expected[:2]) in text


def test_decode_instances_on_one_host_get_distinct_nixl_ports():
    first = node_launch("vllm", _pool(role="decode"), model="m", port=8000)
    second = node_launch("vllm", _pool(role="decode"), model="m", port=8003)
    assert first.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] != second.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]
