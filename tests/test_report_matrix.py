"""A matrix of plans (dense, MoE, MLA; colocated, disaggregated, mixed; one node and multi-node)
emitted for every engine release: every engine flag and choice exists in that release's generated
data, every script parses with bash -n, every manifest validates against the Kubernetes schemas."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from layoutopt.report.emit import render
from layoutopt.report.engine_flags import (
    bad_choices,
    load_bench_flags,
    load_engine_flags,
    load_router_flags,
    parse_engine,
    unknown_flags,
)
from test_report_flags import RELEASES, manifest_commands
from test_report_helpers import engine_commands, fixture_plan, manifest_program_commands, program_commands
from test_report_kubernetes import _as_pod_template, _validate


def _pool(role, gpu="H100-SXM", instances=1, tp=1, pp=1, ep=1, dp=1, dcp=1, pcp=1, precision="fp8", kv="fp8",
          batch=64):
    return dict(role=role, gpu=gpu, instances=instances, gpus_per_instance=tp * pp * pcp * dp, tp_size=tp,
                pp_size=pp, ep_size=ep, dp_size=dp, dcp_size=dcp, pcp_size=pcp, precision=precision,
                kv_precision=kv, max_batch_size=batch, capacity_rps=2.0, cost_usd_per_hour=10.0 * tp * pp * pcp * dp)


# name -> (model, mode, pools)
PLANS = {
    "mla-disaggregated-multinode": ("deepseek-v3", "disaggregated", [
        _pool("prefill", "H200-SXM", 2, tp=1, dp=8, ep=8), _pool("decode", "H200-SXM", 1, tp=1, dp=16, ep=16, batch=512)]),
    "moe-colocated-dp-pp-ray": ("qwen3-235b-a22b", "colocated", [
        _pool("colocated", instances=1, tp=8, pp=2, dp=2, ep=16, batch=256)]),
    "dense-mixed": ("llama-3.1-70b", "mixed", [
        _pool("prefill", instances=2, tp=4, kv="bf16"), _pool("decode", instances=1, tp=8, kv="bf16"),
        _pool("colocated", instances=2, tp=4, kv="bf16")]),
    "dense-colocated-pp-multinode": ("llama-3.1-405b", "colocated", [
        _pool("colocated", instances=2, tp=8, pp=2, precision="bf16", kv="bf16")]),
    # Stages spread over whole nodes, as the search proposes them (optimizer/space.py).
    "dense-tp16-two-nodes": ("llama-3.1-405b", "colocated", [
        _pool("colocated", instances=1, tp=16, precision="fp8", kv="fp8")]),
    "moe-dep32-across-nodes": ("deepseek-v3", "disaggregated", [
        _pool("prefill", "H200-SXM", 1, tp=1, dp=16, ep=16),
        _pool("decode", "H200-SXM", 1, tp=2, dp=16, ep=32, batch=1024)]),
    "dense-tp16-pp2-four-nodes": ("llama-3.1-405b", "colocated", [
        _pool("colocated", instances=1, tp=16, pp=2, precision="bf16", kv="bf16")]),
    "dense-tp4-pcie": ("llama-3.1-70b", "colocated", [
        _pool("colocated", "L40S", instances=2, tp=4, kv="bf16")]),
}


def _plan(name):
    model, mode, pools = PLANS[name]
    base = fixture_plan("disaggregated")
    return base.model_validate({**base.model_dump(), "model": model, "mode": mode, "pools": pools, "placement": []})


CASES = [(name, release) for name in PLANS for release in RELEASES]


@pytest.mark.parametrize(("name", "release"), CASES)
def test_matrix_files_are_valid_for_the_release(name, release):
    ref = parse_engine(release)
    plan = _plan(name)
    files = render(plan, engine=release, model_id=None, plots=False)
    commands = check_emitted_files(files, ref.engine, ref.version)
    assert commands >= len(plan.pools)
    if plan.mode != "colocated" or sum(p.instances for p in plan.pools) > 1:
        assert "router/router.sh" in files and "k8s/router.yaml" in files
    assert "bench/bench.sh" in files
    _check_router_and_bench(files, ref)


def check_emitted_files(files: dict[str, str], engine: str, version: str) -> int:
    """Every script parses with ``bash -n``, every manifest validates against the Kubernetes schemas
    (LeaderWorkerSet pod templates as PodTemplates), and every engine command in the launch scripts
    and the manifests uses only flags and choices of the release; returns how many commands."""
    flags = load_engine_flags(engine, version)
    commands = 0
    for path, text in files.items():
        if path.endswith(".sh") and shutil.which("bash"):
            result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
            assert result.returncode == 0, f"{path}: {result.stderr}"
        if path.startswith("launch/"):
            found = engine_commands(text)
        elif path.startswith("k8s/"):
            for doc in yaml.safe_load_all(text):
                if doc["kind"] == "LeaderWorkerSet":
                    for key in ("leaderTemplate", "workerTemplate"):
                        _validate(_as_pod_template(doc["spec"]["leaderWorkerTemplate"][key], "default"))
                else:
                    _validate(doc)
            found = [] if "router" in path else manifest_commands(text)
        else:
            continue
        for argv in found:
            assert unknown_flags(argv, flags) == [] and bad_choices(argv, flags) == [], f"{path}: {argv}"
            commands += 1
    return commands


def _check_router_and_bench(files, ref):
    """Router commands against the router release's generated flags, bench.sh against the engine wheel's benchmark."""
    _, _, program, router_flags = load_router_flags(ref.engine)
    routers = [argv for path, text in files.items() for argv in (
        program_commands(text, [program]) if path.startswith("router/") else
        manifest_program_commands(text, program) if path == "k8s/router.yaml" else [])]
    assert bool(routers) == ("router/router.sh" in files)
    for argv in routers:
        assert unknown_flags(argv, router_flags) == [] and bad_choices(argv, router_flags) == [], argv
    bench_program, bench_flags = load_bench_flags(ref.engine, ref.version)
    benches = program_commands(files["bench/bench.sh"], [bench_program])
    assert benches
    for argv in benches:
        assert unknown_flags(argv, bench_flags) == [] and bad_choices(argv, bench_flags) == [], argv


def test_mla_prefill_context_parallel_is_allowed_on_vllm_033_only():
    model, mode, _ = PLANS["mla-disaggregated-multinode"]
    pools = [_pool("prefill", "H200-SXM", 1, tp=8, pcp=2), _pool("decode", "H200-SXM", 1, tp=1, dp=16, ep=16, batch=512)]
    base = fixture_plan("disaggregated")
    plan = base.model_validate({**base.model_dump(), "model": model, "mode": mode, "pools": pools, "placement": []})
    files = render(plan, engine="vllm", plots=False)
    assert any("--prefill-context-parallel-size 2" in t.replace(" \\\n  ", " ") for p, t in files.items()
               if p.startswith("launch/prefill"))
    with pytest.raises(Exception, match="pcp_unsupported"):
        render(plan, engine="vllm==0.13.0", plots=False)


def test_dp_times_pp_over_ray_spans_whole_nodes():
    files = render(_plan("moe-colocated-dp-pp-ray"), engine="vllm", plots=False)
    (script,) = [t for p, t in files.items() if p.startswith("launch/")]
    assert "export VLLM_RAY_DP_PACK_STRATEGY=span" in script
    assert script.count("ray start --address=") == 3 and "--data-parallel-backend ray" in script.replace(" \\\n", "")


@pytest.mark.parametrize("release", RELEASES)
def test_dep_times_pp_over_nodes_runs_on_sglang_and_is_refused_by_vllm(release):
    """DEP16 x PP2 (one GPU per DP rank) over four HGX nodes: SGLang puts each pipeline stage on
    two whole nodes (--pp-size 2 --nnodes 4); vLLM keeps each DP rank's two stages on one node, so
    emit refuses it with the rule and its source."""
    base = fixture_plan("disaggregated")
    pools = [_pool("colocated", "H200-SXM", 1, tp=1, dp=16, ep=16, pp=2, batch=512)]
    plan = base.model_validate({**base.model_dump(), "model": "deepseek-v3", "mode": "colocated", "pools": pools,
                                "placement": []})
    ref = parse_engine(release)
    if ref.engine == "vllm":
        with pytest.raises(Exception, match=r"dp_pp_placement: .*vllm/distributed/parallel_state\.py:\d+"):
            render(plan, engine=release, plots=False)
        return
    files = render(plan, engine=release, plots=False)
    assert check_emitted_files(files, ref.engine, ref.version) >= 4
    (script,) = [t for p, t in files.items() if p.startswith("launch/")]  # one script, a branch per node rank
    for flag in ("--tp-size 16", "--pp-size 2", "--nnodes 4"):
        assert script.count(flag) == 4, flag
    assert [f"--node-rank {r}" in script for r in range(4)] == [True] * 4


def test_an_instance_spanning_nvl72_trays_stays_in_one_nvlink_domain():
    base = fixture_plan("disaggregated")
    pools = [_pool("colocated", "GB200", 1, tp=8, precision="fp8", kv="fp8")]
    plan = base.model_validate({**base.model_dump(), "model": "llama-3.1-70b", "mode": "colocated", "pools": pools,
                                "placement": []})
    files = render(plan, engine="vllm", gpus_per_node=4, plots=False)
    (text,) = [t for p, t in files.items() if p.startswith("k8s/") and "router" not in p]
    lws = next(yaml.safe_load_all(text))
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] == "nvidia.com/gpu.clique"


def test_router_and_bench_flag_data_catches_what_a_release_lacks():
    _, version, program, flags = load_router_flags("vllm")
    assert (version, program) == ("0.1.17", ("vllm-router",))
    assert flags.defined_at["--vllm-pd-disaggregation"].startswith("vllm_router/router_args.py:")
    assert unknown_flags(["vllm-router", "--pd-disaggregation"], flags) == ["--pd-disaggregation"]
    _, _, _, sglang = load_router_flags("sglang")
    assert "--pd-disaggregation" in sglang.flags and "--vllm-pd-disaggregation" not in sglang.flags
    # SGLang 0.5.3's bench_serving has no --goodput, so bench.sh leaves it out there.
    program_053, bench_053 = load_bench_flags("sglang", "0.5.3")
    assert program_053 == ("python3", "-m", "sglang.bench_serving") and "--goodput" not in bench_053.flags
    assert "--goodput" in load_bench_flags("sglang", "0.5.23")[1].flags
    program_033, bench_033 = load_bench_flags("vllm", "0.33.0")
    assert program_033 == ("vllm", "bench", "serve")
    assert bench_033.defined_at["--random-range-ratio"].startswith("vllm/benchmarks/datasets/datasets.py:")


def test_report_says_the_default_image_tag_was_not_verified():
    plan = fixture_plan("colocated")
    report = render(plan, engine="sglang", model_id=None, plots=False)["report.md"]
    assert "`lmsysorg/sglang:v0.5.23`" in report and "did not check that this tag is published" in report
    given = render(plan, engine="sglang", model_id=None, plots=False, image="registry.local/sglang:mine")["report.md"]
    assert "`registry.local/sglang:mine`, as given with --image" in given and "did not check" not in given


@pytest.mark.parametrize("release", ["vllm", "sglang"])
def test_an_instance_placed_on_other_gpus_of_each_node_pins_each_nodes_own(release):
    """A cluster file's placement may use GPUs 4,5 on one node and 0,1 on the next (fragmented-h100):
    each node's launch pins its own GPUs (SGLang maps a node's ranks to base_gpu_id 0 of its visible
    devices, vLLM's ranks to its CUDA_VISIBLE_DEVICES); the other node's indices may be another job's."""
    base = fixture_plan("disaggregated")
    pools = [_pool("colocated", instances=1, tp=1, pp=2, dp=2, ep=2, batch=64)]
    placed = {"instance_id": "colocated-0-0", "role": "colocated", "node": "f2", "gpus": [4, 5],
              "nodes": ["f2", "f3"], "cuda_visible_devices": "f2:4,5;f3:0,1", "pool_index": 0,
              "gpus_by_node": {"f2": [4, 5], "f3": [0, 1]}}
    plan = base.model_validate({**base.model_dump(), "model": "qwen3-235b-a22b", "mode": "colocated", "pools": pools,
                                "placement": [placed]})
    files = render(plan, engine=release, plots=False)
    script = files["launch/colocated-0-0.sh"]
    node0, node1 = script.split("  1)  # f3")
    assert "export CUDA_VISIBLE_DEVICES=4,5" in node0 and "export CUDA_VISIBLE_DEVICES=0,1" in node1
    assert "# runs on: f2 (GPUs 4,5), f3 (GPUs 0,1)" in script
    assert "| f2, f3 | f2: 4,5; f3: 0,1 |" in files["report.md"]
    ref = parse_engine(release)
    check_emitted_files(files, ref.engine, ref.version)


def _placed_plan(layout: dict, gpus_by_node: dict[str, list[int]], model="qwen3-235b-a22b"):
    base = fixture_plan("disaggregated")
    nodes = list(gpus_by_node)
    placed = {"instance_id": "colocated-0-0", "role": "colocated", "node": nodes[0], "gpus": gpus_by_node[nodes[0]],
              "nodes": nodes, "pool_index": 0, "gpus_by_node": gpus_by_node,
              "cuda_visible_devices": ";".join(f"{n}:{','.join(map(str, g))}" for n, g in gpus_by_node.items())}
    return base.model_validate({**base.model_dump(), "model": model, "mode": "colocated",
                                "pools": [_pool("colocated", **layout)], "placement": [placed]})


def test_an_uneven_split_over_nodes_is_refused_by_sglang_and_run_over_ray_by_vllm():
    plan = _placed_plan(dict(tp=1, pp=4, batch=64), {"f0": [5, 6, 7], "f1": [5]})
    with pytest.raises(Exception, match=r"uneven_nodes: sglang splits .* \[3, 1\] GPUs .*engine\.py:\d+"):
        render(plan, engine="sglang", plots=False)
    files = render(plan, engine="vllm", plots=False)
    script = files["launch/colocated-0-0.sh"]
    assert "ray start --head --port=6379 --num-gpus=3" in script and "--num-gpus=1 --block" in script
    check_emitted_files(files, "vllm", "0.33.0")
    # DP ranks of 2 GPUs (TP1 x PP2) cannot sit on a node with 1 free GPU: vLLM refuses too.
    with pytest.raises(Exception, match=r"uneven_nodes: vLLM places each DP rank's TP x PP x PCP = 2 GPUs"):
        render(_placed_plan(dict(tp=1, pp=2, dp=2, ep=2), {"f0": [5, 6, 7], "f1": [5]}), engine="vllm", plots=False)


def test_vllm_picks_one_launch_mode_for_every_node():
    """DEP8 on 2 + 2 + 1 + 3 GPUs: whole (1-GPU) ranks on each node, two ranks on two of them, so no
    node may take the multiprocessing DP path (--data-parallel-size-local 2) while the others run Ray."""
    plan = _placed_plan(dict(tp=1, dp=8, ep=8), {"f0": [0, 1], "f1": [0, 1], "f2": [0], "f3": [0, 1, 2]})
    files = render(plan, engine="vllm", plots=False)
    script = files["launch/colocated-0-0.sh"]
    assert "--data-parallel-size-local" not in script and "--data-parallel-backend ray" in script.replace(" \\\n", "")
    assert [f"--num-gpus={n}" in script for n in (1, 2, 3)] == [True] * 3
    check_emitted_files(files, "vllm", "0.33.0")
