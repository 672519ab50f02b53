"""The router: the engine project's PD router with the plan's endpoints, a load balancer for
colocated pools, and Kubernetes objects whose selectors find exactly the serving pods."""

from __future__ import annotations

import shlex

import pytest
import yaml

from layoutopt.report.emit import render
from layoutopt.report.launch import expand_instances
from layoutopt.report.router import plan_routers
from test_report_helpers import MODEL_IDS, PLAN_NAMES, fixture_plan
from test_report_kubernetes import _validate


def _render(name, engine="vllm", plan=None):
    plan = plan or fixture_plan(name)
    return render(plan, engine=engine, model_id=MODEL_IDS[plan.model], namespace="llm", plots=False)


def _argv(script: str) -> list[list[str]]:
    body = script.split("set -euo pipefail\n", 1)[1].replace("\\\n", " ")
    return [shlex.split(line.rstrip("& ")) for line in body.splitlines() if line.strip()]


def _values(argv, flag):
    return [argv[i + 1:i + 3] for i, t in enumerate(argv) if t == flag]


def test_vllm_pd_router_names_every_prefill_and_decode_instance():
    plan = fixture_plan("disaggregated")
    (argv,) = _argv(_render("disaggregated")["router/router.sh"])
    assert argv[:2] == ["exec", "vllm-router"] and "--vllm-pd-disaggregation" in argv
    specs = expand_instances(plan)
    prefill = [f"http://{s.nodes[0]}:{s.port}" for s in specs if plan.pools[s.pool_index].role == "prefill"]
    decode = [f"http://{s.nodes[0]}:{s.port}" for s in specs if plan.pools[s.pool_index].role == "decode"]
    assert [v[0] for v in _values(argv, "--prefill")] == prefill
    assert [v[0] for v in _values(argv, "--decode")] == decode


def test_sglang_pd_router_passes_each_prefill_bootstrap_port():
    plan = fixture_plan("disaggregated")
    files = _render("disaggregated", "sglang")
    (argv,) = _argv(files["router/router.sh"])
    assert argv[1:4] == ["python3", "-m", "sglang_router.launch_router"] and "--pd-disaggregation" in argv
    ports = [v[1] for v in _values(argv, "--prefill")]
    launched = [t.split("--disaggregation-bootstrap-port ")[1].split()[0] for p, t in files.items()
                if p.startswith("launch/prefill")]
    assert sorted(ports) == sorted(launched) and len(set(ports)) == len(ports) == 2


def test_colocated_pool_of_several_instances_gets_a_load_balancer():
    (argv,) = _argv(_render("colocated")["router/router.sh"])
    urls = argv[argv.index("--worker-urls") + 1:]
    assert len(urls) == fixture_plan("colocated").pools[0].instances


def test_a_single_colocated_instance_needs_no_router():
    assert "router/router.sh" not in _render("multinode_pp")


def test_a_mixed_plan_gets_a_pd_router_and_a_load_balancer():
    plan = fixture_plan("disaggregated")
    colocated = plan.pools[1].model_copy(update={"role": "colocated", "instances": 2})
    plan = plan.model_copy(update={"pools": [*plan.pools, colocated], "placement": [], "mode": "mixed"})
    routers = plan_routers(plan, expand_instances(plan))
    assert [(r.name, r.mode) for r in routers] == [("router-pd", "pd"), ("router-colocated", "lb")]
    assert sum(r.share_fraction for r in routers) == pytest.approx(1.0)
    commands = _argv(render(plan, model_id=MODEL_IDS[plan.model], plots=False)["router/router.sh"])
    assert len(commands) == 2 and commands[0][0] == "vllm-router" and commands[1][0] == "exec"


def _pods(files, role):
    pods = []
    for path, text in files.items():
        if not path.startswith("k8s/") or "router" in path:
            continue
        for doc in yaml.safe_load_all(text):
            spec = doc["spec"]
            templates = [spec["template"]] if "template" in spec else list(
                spec.get("leaderWorkerTemplate", {}).get(k) for k in ("leaderTemplate", "workerTemplate"))
            pods += [t for t in templates if t and t["metadata"]["labels"]["layoutopt.io/role"] == role]
    return pods


def _selected(selector: list[str], pods: list[dict]) -> list[dict]:
    wanted = dict(item.split("=", 1) for item in selector)
    return [p for p in pods if wanted.items() <= p["metadata"]["labels"].items()]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("name", ["disaggregated", "moe_ep_dp"])
def test_router_selectors_find_exactly_the_serving_pods(name, engine):
    files = _render(name, engine)
    docs = list(yaml.safe_load_all(files["k8s/router.yaml"]))
    for doc in docs:
        _validate(doc)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    argv = command[3:]

    def selector(flag):
        start = argv.index(flag) + 1
        end = next((i for i in range(start, len(argv)) if argv[i].startswith("--")), len(argv))
        return argv[start:end]

    for role, flag in (("prefill", "--prefill-selector"), ("decode", "--decode-selector")):
        pods = _pods(files, role)
        chosen = _selected(selector(flag), pods)
        servers = [p for p in pods if "ports" in p["spec"]["containers"][0]
                   and any(q["name"] == "http" for q in p["spec"]["containers"][0]["ports"])]
        assert chosen and chosen == servers
    if engine == "sglang":
        prefill = _selected(selector("--prefill-selector"), _pods(files, "prefill"))
        assert all(p["metadata"]["annotations"]["sglang.ai/bootstrap-port"] for p in prefill)
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_router_manifests_validate(name):
    files = _render(name)
    for doc in yaml.safe_load_all(files.get("k8s/router.yaml", "")):
        if doc:
            _validate(doc)
