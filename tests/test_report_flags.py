"""Every flag of every generated engine command exists in the flag list of the engine version the
file names; layouts map onto each version's own flags; features a version lacks become comments."""

from __future__ import annotations

import pytest
import yaml

from layoutopt.engines.loader import load_engine_data
from layoutopt.errors import InputError
from layoutopt.plan import Pool
from layoutopt.model_catalog.checkpoints import prequantized_checkpoints
from layoutopt.report.checkpoints import served_checkpoint
from layoutopt.report.emit import render
from layoutopt.report.engine_flags import SUPPORTED_VERSIONS, bad_choices, load_engine_flags, parse_engine, unknown_flags
from layoutopt.report.node_launch import node_launch
from layoutopt.report.vllm_launch import max_num_seqs_per_rank
from test_report_helpers import MODEL_IDS, PLAN_NAMES, engine_commands, engine_named_in, fixture_plan

RELEASES = [f"{engine}=={version}" for engine, versions in SUPPORTED_VERSIONS.items() for version in versions]
CASES = [(name, release) for name in PLAN_NAMES for release in RELEASES]


def _pool(**changes) -> Pool:
    base = dict(role="colocated", gpu="H100-SXM", instances=1, gpus_per_instance=4, tp_size=4, pp_size=1, ep_size=1,
                dp_size=1, dcp_size=1, pcp_size=1, precision="bf16", kv_precision="bf16", max_batch_size=64,
                capacity_rps=1.0, cost_usd_per_hour=10.0)
    return Pool(**{**base, **changes})


def manifest_commands(text: str) -> list[list[str]]:
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


@pytest.mark.parametrize(("name", "release"), CASES)
def test_every_generated_flag_exists_in_the_named_engine_version(name, release):
    plan = fixture_plan(name)
    files = render(plan, engine=release, model_id=MODEL_IDS[plan.model], plots=False)
    engine, version = parse_engine(release).engine, parse_engine(release).version
    checked = 0
    for path, text in files.items():
        if path.startswith("launch/"):
            commands = engine_commands(text)
            assert commands, f"{path} starts no engine"
        elif path.startswith("k8s/") and "router" not in path:
            commands = manifest_commands(text)
        else:
            continue
        assert engine_named_in(text) == (engine, version)
        flags = load_engine_flags(engine, version)
        for argv in commands:
            assert unknown_flags(argv, flags) == [], f"{path}: {argv}"
            assert bad_choices(argv, flags) == [], f"{path}: {argv}"
            checked += sum(token.startswith("--") for token in argv)
    assert checked > 0


def test_flag_data_names_its_version_source_and_lines():
    from layoutopt.engines import available_versions

    for engine, versions in SUPPORTED_VERSIONS.items():
        assert set(versions) <= set(available_versions(engine))
        for version in versions:
            flags = load_engine_flags(engine, version)
            assert flags.version == version
            assert flags.sources and all(s.startswith(f"https://pypi.org/project/{engine}/{version}/") for s in flags.sources)
            assert all(where.split(":")[-1].isdigit() and where.startswith(engine) for where in flags.defined_at.values())


def test_choice_checking_spots_a_wrong_value():
    flags = load_engine_flags("sglang", "0.5.23")
    assert bad_choices(["--disaggregation-transfer-backend", "nixl"], flags) == []
    assert bad_choices(["--disaggregation-transfer-backend", "carrier-pigeon"], flags) == [
        "--disaggregation-transfer-backend carrier-pigeon"]
    assert bad_choices(["--kv-cache-dtype=fp8"], flags) == ["--kv-cache-dtype fp8"]


@pytest.mark.parametrize(("text", "expected"), [("vllm", "vllm==0.33.0"), ("sglang", "sglang==0.5.23"),
                                                ("vllm==0.13.0", "vllm==0.13.0"), (" SGLang==0.5.3 ", "sglang==0.5.3")])
def test_engine_specs(text, expected):
    assert parse_engine(text).spec == expected


@pytest.mark.parametrize("text", ["trtllm", "vllm==0.0.1", "vllm==", "sglang==0.5.23\n--x"])
def test_unknown_engine_or_version_is_an_input_error(text):
    with pytest.raises(InputError, match="--engine"):
        parse_engine(text)


def test_unknown_flags_spots_invented_flags():
    flags = load_engine_flags("vllm")
    argv = ["vllm", "serve", "m", "--tensor-parallel-size", "2", "--max-num-seqs=8", "--expert-parallel-size", "4"]
    assert unknown_flags(argv, flags) == ["--expert-parallel-size"]


@pytest.mark.parametrize(("pool_changes", "release", "flag", "note_word"), [
    # vLLM has only ep = tp x dp; a partial EP split is a comment, not a flag.
    (dict(tp_size=4, dp_size=2, gpus_per_instance=8, ep_size=4), "vllm", "--enable-expert-parallel", "ep_size=4"),
    # SGLang 0.5.3 has no DCP; 0.5.23 has --dcp-size.
    (dict(dcp_size=2), "sglang==0.5.3", "--dcp-size", "decode context parallel"),
    (dict(pcp_size=2, gpus_per_instance=8), "sglang", "--prefill-context-parallel-size", "prefill context parallel"),
])
def test_missing_features_become_notes(pool_changes, release, flag, note_word):
    launch = node_launch(release, _pool(**pool_changes))
    assert flag not in launch.argv
    assert any(note_word in note for note in launch.notes)


@pytest.mark.parametrize(("pool_changes", "release", "expected"), [
    (dict(tp_size=2, dp_size=4, ep_size=8, gpus_per_instance=8), "vllm",
     ["--tensor-parallel-size", "2", "--data-parallel-size", "4", "--enable-expert-parallel"]),
    (dict(tp_size=2, dp_size=4, ep_size=8, gpus_per_instance=8), "sglang",
     ["--tp-size", "8", "--attn-dp-size", "4", "--ep-size", "8"]),
    (dict(tp_size=2, dp_size=4, ep_size=8, gpus_per_instance=8), "sglang==0.5.3",
     ["--tp-size", "8", "--dp-size", "4", "--enable-dp-attention", "--ep-size", "8"]),
    (dict(role="decode", kv_precision="fp8", max_batch_size=300), "sglang",
     ["--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "300", "--disaggregation-mode", "decode"]),
    (dict(dcp_size=2), "sglang", ["--dcp-size", "2"]),
    (dict(tp_size=8, dcp_size=2, pcp_size=2, gpus_per_instance=16), "vllm",
     ["--decode-context-parallel-size", "2", "--prefill-context-parallel-size", "2", "--dcp-comm-backend", "ag_rs"]),
])
def test_layout_maps_to_engine_flags(pool_changes, release, expected):
    argv = list(node_launch(release, _pool(**pool_changes)).argv)
    assert all(token in argv for token in expected)
    assert " ".join(expected[:2]) in " ".join(argv)


def test_vllm_names_the_dcp_backend_only_beside_pcp():
    # pcp_manager.py: PCP + DCP needs ag_rs; DCP alone keeps the model's own default.
    assert "--dcp-comm-backend" not in node_launch("vllm", _pool(tp_size=8, dcp_size=2)).argv
    assert "--dcp-comm-backend" not in node_launch("vllm", _pool(tp_size=8, pcp_size=2, gpus_per_instance=16)).argv
    assert load_engine_data("vllm", "0.33.0").fact("pcp_dcp_comm_backend").value == "ag_rs"


def _value(argv, flag):
    return argv[list(argv).index(flag) + 1]


def test_vllm_max_num_seqs_is_per_dp_rank():
    pool = _pool(tp_size=1, dp_size=8, ep_size=8, gpus_per_instance=8, max_batch_size=1000)
    assert max_num_seqs_per_rank(pool) == 125
    assert _value(node_launch("vllm", pool).argv, "--max-num-seqs") == "125"
    # SGLang divides its limit over the attention-DP ranks itself.
    assert _value(node_launch("sglang", pool).argv, "--max-running-requests") == "1000"


def test_servers_listen_on_every_interface():
    assert _value(node_launch("sglang", _pool()).argv, "--host") == "0.0.0.0"
    assert _value(node_launch("vllm", _pool()).argv, "--host") == "0.0.0.0"


def test_nixl_side_channel_host_and_kv_roles():
    launch = node_launch("vllm", _pool(role="prefill"), advertise_host="${NODE_IP:-gpu-a}", side_channel_port=5610)
    assert launch.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "${NODE_IP:-gpu-a}"
    assert launch.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5610"
    assert _value(launch.argv, "--kv-transfer-config") == '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
    decode = node_launch("vllm==0.13.0", _pool(role="decode"))
    assert "kv_consumer" in _value(decode.argv, "--kv-transfer-config")


def test_multi_node_data_parallel_uses_the_dp_flags():
    pool = _pool(tp_size=1, dp_size=16, ep_size=16, gpus_per_instance=16)
    head = node_launch("vllm", pool, num_nodes=2, node_rank=0, head="gpu-a", gpus_on_node=8)
    worker = node_launch("vllm", pool, num_nodes=2, node_rank=1, head="gpu-a", gpus_on_node=8)
    assert _value(head.argv, "--data-parallel-size-local") == "8" and "--headless" not in head.argv
    assert _value(head.argv, "--data-parallel-address") == "gpu-a"
    assert "--headless" in worker.argv and _value(worker.argv, "--data-parallel-start-rank") == "8"
    assert _value(worker.argv, "--data-parallel-rpc-port") == _value(head.argv, "--data-parallel-rpc-port")


def test_ranks_spanning_nodes_run_on_ray_with_span_packing():
    pool = _pool(tp_size=8, pp_size=2, dp_size=2, ep_size=16, gpus_per_instance=32)
    head = node_launch("vllm", pool, num_nodes=4, node_rank=0, head="gpu-a", gpus_on_node=8)
    worker = node_launch("vllm", pool, num_nodes=4, node_rank=3, head="gpu-a", gpus_on_node=8)
    assert head.setup == (("ray", "start", "--head", "--port=6379", "--num-gpus=8"),)
    assert _value(head.argv, "--distributed-executor-backend") == "ray"
    assert _value(head.argv, "--data-parallel-backend") == "ray"
    assert head.env["VLLM_RAY_DP_PACK_STRATEGY"] == "span"
    assert worker.argv is None and worker.setup[0][:3] == ("ray", "start", "--address=gpu-a:6379")


def test_sglang_multi_node_and_bootstrap_port():
    launch = node_launch("sglang", _pool(role="prefill", tp_size=8, pp_size=2, gpus_per_instance=16), num_nodes=2,
                         node_rank=1, head="gpu-a", gpus_on_node=8, bootstrap_port=9001)
    argv = launch.argv
    assert (_value(argv, "--nnodes"), _value(argv, "--node-rank")) == ("2", "1")
    assert _value(argv, "--dist-init-addr") == "gpu-a:20000"
    assert _value(argv, "--disaggregation-bootstrap-port") == "9001"
    assert _value(argv, "--disaggregation-transfer-backend") == "nixl"


def _served(engine: str, model: str, precision: str, gpu: str = "H100-SXM", model_id: str | None = None):
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model

    spec = get_model(model)
    return served_checkpoint(engine, spec, spec.hf_id, get_gpu(gpu), precision, model_id)


def test_checkpoint_resolution():
    assert _served("vllm", "qwen3-32b", "fp8").model_dump() == {
        "hf_id": "Qwen/Qwen3-32B-FP8", "online_quantization": None, "note": None}
    assert _served("vllm", "deepseek-v3", "fp8").online_quantization is None
    assert _served("vllm", "qwen3-8b", "fp4", "B200").hf_id == "nvidia/Qwen3-8B-FP4"
    with pytest.raises(InputError, match="--checkpoint fp4="):
        _served("vllm", "qwen3-30b-a3b", "fp4", "B200")
    assert _served("vllm", "qwen3-30b-a3b", "fp4", "B200", "me/q30-nvfp4").hf_id == "me/q30-nvfp4"
    assert all(row.source.startswith("https://huggingface.co/" + row.hf_id) for row in prequantized_checkpoints())


@pytest.mark.parametrize(("release", "flag"), [("vllm==0.33.0", "fp8_per_tensor"), ("vllm==0.13.0", "fp8"),
                                               ("sglang==0.5.23", "fp8"), ("sglang==0.5.3", "fp8")])
def test_online_fp8_uses_each_versions_own_flag(release, flag):
    # vLLM 0.33 refuses `--quantization fp8` on a BF16 checkpoint (fp8.py:108); its online FP8 is fp8_per_tensor.
    online = _served(release, "llama-3.1-70b", "fp8")
    assert (online.hf_id, online.online_quantization) == ("meta-llama/Llama-3.1-70B", flag)
    engine, version = release.split("==")
    assert flag in load_engine_flags(engine, version).choices["--quantization"]


def test_prequantized_checkpoint_has_no_online_quantization_flag():
    plan = fixture_plan("colocated")  # qwen3-32b FP8
    files = render(plan, engine="vllm", plots=False)
    script = next(t for p, t in files.items() if p.startswith("launch/"))
    assert "vllm serve Qwen/Qwen3-32B-FP8" in script and "--quantization" not in script


@pytest.mark.parametrize(("engine", "gpu"), [("vllm", "H100-SXM"), ("vllm", "B200"), ("sglang", "H100-SXM"),
                                             ("sglang", "B200")])
def test_the_step_token_budget_the_plan_assumed_is_pinned(engine, gpu):
    """Both engines choose their default budget from the GPU's memory (vLLM 16,384 on B200 for the
    API server, SGLang 16,384 from 160 GiB), so emit passes the performance model's own."""
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.perf_model.calibration import resolve_engine
    from layoutopt.report.deployment import step_token_budget
    from layoutopt.report.engine_flags import as_release

    assumed = resolve_engine(engine, get_gpu(gpu)).max_num_batched_tokens
    assert step_token_budget(as_release(engine), get_gpu(gpu)) == assumed
    flag = "--max-num-batched-tokens" if engine == "vllm" else "--chunked-prefill-size"
    argv = node_launch(engine, _pool(gpu=gpu), step_token_budget=assumed).argv
    assert _value(argv, flag) == str(assumed)
    assert flag not in node_launch(engine, _pool(gpu=gpu)).argv  # no budget given: the engine's default


def test_emitted_files_pin_the_budget_of_each_pool():
    plan = fixture_plan(PLAN_NAMES[0])
    for release in ("vllm", "sglang"):
        files = render(plan, engine=release, model_id=MODEL_IDS[plan.model], plots=False)
        flag = "--max-num-batched-tokens" if release == "vllm" else "--chunked-prefill-size"
        scripts = [text for path, text in files.items() if path.startswith("launch/")]
        assert scripts and all(flag in text for text in scripts)
