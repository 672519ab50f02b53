"""Every generated manifest parses with yaml.safe_load_all and has the fields Kubernetes requires."""

from __future__ import annotations

import re

import pytest
import yaml

from layoutopt.report.emit import render
from test_report_helpers import MODEL_IDS, PLAN_NAMES, fixture_plan

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
WORKLOAD_API = {"Deployment": "apps/v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1", "Service": "v1"}
CASES = [(name, engine) for name in PLAN_NAMES for engine in ("vllm", "sglang")]


def _manifests(name: str, engine: str = "vllm") -> dict[str, list[dict]]:
    plan = fixture_plan(name)
    files = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], namespace="llm", plots=False)
    return {path: list(yaml.safe_load_all(text)) for path, text in files.items() if path.startswith("k8s/")}


def _check_pod_template(template: dict, role: str) -> None:
    assert template["metadata"]["labels"]["layoutopt.io/role"] == role
    spec = template["spec"]
    assert spec["containers"], "a pod needs a container"
    for container in spec["containers"]:
        assert container["name"] and container["image"] and container["command"]
        limits = container["resources"]["limits"]
        gpu_keys = [k for k in limits if k in ("nvidia.com/gpu", "amd.com/gpu")]
        assert len(gpu_keys) == 1 and limits[gpu_keys[0]] >= 1
        assert container["resources"]["requests"] == limits
        mounts = {m["name"] for m in container.get("volumeMounts", [])}
        assert mounts <= {v["name"] for v in spec.get("volumes", [])}


@pytest.mark.parametrize(("name", "engine"), CASES)
def test_manifests_have_required_fields(name, engine):
    plan = fixture_plan(name)
    manifests = _manifests(name, engine)
    assert len([p for p in manifests if "router" not in p]) == len(plan.pools), "one file per pool"
    for path, docs in manifests.items():
        if "router" in path:
            continue
        kinds = [doc["kind"] for doc in docs]
        assert kinds[-1] == "Service" and len(kinds) == 2
        for doc in docs:
            assert doc["apiVersion"] == WORKLOAD_API[doc["kind"]]
            assert DNS_LABEL.match(doc["metadata"]["name"]), doc["metadata"]["name"]
            assert doc["metadata"]["namespace"] == "llm"
            assert isinstance(doc["spec"], dict)
        workload, service = docs
        role = workload["metadata"]["labels"]["layoutopt.io/role"]
        assert role in ("prefill", "decode", "colocated")
        if workload["kind"] == "Deployment":
            spec = workload["spec"]
            assert spec["replicas"] >= 1
            selector = spec["selector"]["matchLabels"]
            assert selector.items() <= spec["template"]["metadata"]["labels"].items()
            _check_pod_template(spec["template"], role)
        else:
            group = workload["spec"]["leaderWorkerTemplate"]
            assert group["size"] >= 2
            _check_pod_template(group["leaderTemplate"], role)
            _check_pod_template(group["workerTemplate"], role)
        assert service["spec"]["ports"][0]["port"] > 0
        assert service["spec"]["selector"]["layoutopt.io/pool"] == workload["metadata"]["name"]


def _node_terms(pod_spec: dict) -> dict[str, list[str]]:
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return {e["key"]: e["values"] for e in terms["nodeSelectorTerms"][0]["matchExpressions"]}


def test_a_plain_budget_selects_nodes_by_gpu_labels_not_hostnames():
    manifests = _manifests("disaggregated")
    prefill = next(d for p, d in manifests.items() if "prefill" in p)[0]
    assert _node_terms(prefill["spec"]["template"]["spec"]) == {
        "nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3"], "nvidia.com/gpu.count": ["3"]}
    assert prefill["spec"]["replicas"] == 2


def test_a_cluster_placement_becomes_hostname_affinity():
    plan = fixture_plan("disaggregated").model_copy(update={"cluster": "lab"})
    files = render(plan, model_id=MODEL_IDS[plan.model], namespace="llm", plots=False)
    manifests = {p: list(yaml.safe_load_all(t)) for p, t in files.items() if p.startswith("k8s/") and "router" not in p}
    prefill = next(d for p, d in manifests.items() if "prefill" in p)[0]
    decode = next(d for p, d in manifests.items() if "decode" in p)[0]
    assert _node_terms(prefill["spec"]["template"]["spec"])["kubernetes.io/hostname"] == ["gpu-node-01"]
    assert _node_terms(decode["spec"]["template"]["spec"])["kubernetes.io/hostname"] == ["gpu-node-02"]


def test_pods_have_probes_shm_limit_token_secret_cache_and_kv_ports():
    manifests = _manifests("disaggregated")
    decode = next(d for p, d in manifests.items() if "decode" in p)[0]
    pod = decode["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(container)
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["sizeLimit"].endswith("Gi")
    assert "model-cache" in volumes
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "hf-token"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["value"] == "$(POD_IP)"
    assert {p["name"] for p in container["ports"]} >= {"http", "nixl-0"}
    assert container["resources"]["limits"]["rdma/ib"] == 1
    assert decode["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.33.0"


def test_multi_node_instance_is_a_leader_worker_set_with_gpus_per_node():
    (docs,) = _manifests("multinode_pp").values()
    lws = docs[0]
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["replicas"] == 1
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "ray start --head" in leader["command"][2] and "vllm serve" in leader["command"][2]
    assert '"--address=${LWS_LEADER_ADDRESS}:6379"' in worker["command"][2]
    assert "--num-gpus=8" in worker["command"][2]
    assert "ports" in leader and "ports" not in worker
    assert docs[1]["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


def test_sglang_workers_take_their_rank_from_lws():
    (docs,) = _manifests("multinode_pp", "sglang").values()
    worker = docs[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert '--node-rank "${LWS_WORKER_INDEX}"' in worker["command"][2]
    assert '--dist-init-addr "${LWS_LEADER_ADDRESS}:20000"' in worker["command"][2]


def test_no_yaml_anchors_and_amd_resource():
    from layoutopt.report.kubernetes import gpu_resource

    plan = fixture_plan("colocated")
    text = next(t for p, t in render(plan, model_id="m", plots=False).items() if p.startswith("k8s/"))
    assert "&id" not in text and "*id" not in text
    assert gpu_resource("MI300X")["resource"] == "amd.com/gpu"
    assert gpu_resource("MI999")["resource"] == "amd.com/gpu"
    assert gpu_resource("H100-SXM")["resource"] == "nvidia.com/gpu"


# kubernetes-validate bundles the JSON schemas of each Kubernetes release offline; 1.33 is a
# release every current managed service runs.
K8S_VERSION = "1.33.0"


def _validate(obj: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def _as_pod_template(template: dict, namespace: str) -> dict:
    """An LWS pod template as a v1 PodTemplate, so the core schema checks it (the LWS CRD embeds
    PodTemplateSpec for leaderTemplate and workerTemplate)."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "lws-template", "namespace": namespace},
            "template": template}


@pytest.mark.parametrize(("name", "engine"), CASES)
def test_manifests_validate_against_the_kubernetes_schemas(name, engine):
    validated = 0
    for docs in _manifests(name, engine).values():
        for doc in docs:
            if doc["kind"] == "LeaderWorkerSet":
                group = doc["spec"]["leaderWorkerTemplate"]
                assert set(group) <= {"size", "restartPolicy", "leaderTemplate", "workerTemplate"}
                assert group["restartPolicy"] in ("RecreateGroupOnPodRestart", "None")
                for key in ("leaderTemplate", "workerTemplate"):
                    _validate(_as_pod_template(group[key], doc["metadata"]["namespace"]))
            else:
                _validate(doc)
            validated += 1
    assert validated >= 2


def test_the_validator_catches_a_broken_manifest():
    import kubernetes_validate

    (docs,) = [d for p, d in _manifests("colocated").items() if "router" not in p]
    broken = {**docs[0], "spec": {**docs[0]["spec"], "replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(broken)


def test_plans_placed_on_a_cluster_file_are_recognised_by_their_budget_text():
    from layoutopt.report.plan_inputs import placed_on_cluster

    plan = fixture_plan("disaggregated")
    assert not placed_on_cluster(plan)
    on_cluster = plan.model_copy(update={"workload": {**plan.workload, "budget": "cluster lab-a"}})
    assert placed_on_cluster(on_cluster)
    assert not placed_on_cluster(plan.model_copy(update={"workload": {**plan.workload, "budget": "32xH100"}}))
    files = render(on_cluster, model_id=MODEL_IDS[plan.model], plots=False)
    prefill = next(yaml.safe_load_all(next(t for p, t in files.items() if p.startswith("k8s/prefill"))))
    assert _node_terms(prefill["spec"]["template"]["spec"])["kubernetes.io/hostname"] == ["gpu-node-01"]
    assert "standard nodes of a plain budget" not in files["router/router.sh"]
