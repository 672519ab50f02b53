"""Kubernetes manifests, one file per pool: the workload and a Service in front of it.

Single-node instances become a ``Deployment`` (one replica per instance); instances that span
nodes become a ``LeaderWorkerSet`` (leaderworkerset.x-k8s.io/v1, LWS >= 0.6 for the injected
``LWS_WORKER_INDEX``) with one group per instance and one pod per node.

Scheduling works on any cluster that has the GPUs: pods select nodes by the labels NVIDIA GPU
Feature Discovery sets (``nvidia.com/gpu.product``, ``nvidia.com/gpu.count``); a multi-node group
whose GPUs share a multi-node NVLink domain (GB200 NVL72) stays inside one through LWS's
exclusive topology on GFD's ``nvidia.com/gpu.clique`` label. Host names are pinned only when the
plan was placed on a ``--cluster`` file naming real nodes (:func:`placed_on_cluster`). Pods carry startup,
readiness and liveness probes on ``/health``, a ``/dev/shm`` with a size limit, the HF token from
a Secret, a model cache volume, named container ports for the KV side channel and SGLang's
bootstrap server, and an RDMA device where KV crosses the NIC. Objects are dicts serialized by
PyYAML, never formatted text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError
from layoutopt.plan import Plan, Pool
from layoutopt.report import names
from layoutopt.report.deployment import PoolDeployment
from layoutopt.report.engine_flags import ENGINE_PROGRAMS, EngineRelease
from layoutopt.report.launch import InstanceSpec, node_context
from layoutopt.report.plan_inputs import placed_on_cluster
from layoutopt.report.names import dns_name, shell_word
from layoutopt.report.node_launch import BASE_PORT, BOOTSTRAP_BASE_PORT, NIXL_SIDE_CHANNEL_BASE_PORT, NodeLaunch, node_launch
from layoutopt.io_safe import load_package_yaml

# Images the engine projects publish, tagged by version (hub.docker.com/r/vllm/vllm-openai tags
# v0.13.0 ...; hub.docker.com/r/lmsysorg/sglang tags v0.5.3 ...).
IMAGE_REPOSITORIES = {"vllm": "vllm/vllm-openai", "sglang": "lmsysorg/sglang"}
LWS_LEADER = "${LWS_LEADER_ADDRESS}"
# GFD labels (github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery).
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
NVLINK_CLIQUE_LABEL = "nvidia.com/gpu.clique"
LWS_EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
# Per-node values that differ between LWS workers: flag -> shell expression replacing its value.
_WORKER_VALUES = {"--node-rank": "${LWS_WORKER_INDEX}"}
# Model loading of the largest checkpoints takes tens of minutes: 10 s x 360 = one hour.
STARTUP_PERIOD_S = 10
STARTUP_FAILURES = 360


class KubernetesOptions(BaseModel):
    """Cluster conventions the manifests follow; every field has a default that works on a plain cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = "default"
    image: str | None = None
    hf_token_secret: str = Field(default="hf-token", description="Secret holding the HuggingFace token")
    hf_token_key: str = "token"
    model_cache_pvc: str | None = Field(default=None, description="PVC for the HF cache; None: an emptyDir")
    model_cache_gib: int = Field(default=1024, ge=1, description="size limit of the emptyDir model cache")
    shm_gib: int = Field(default=32, ge=1, description="size limit of /dev/shm")
    rdma_resource: str | None = Field(default="rdma/ib", description="device-plugin resource for the KV NIC; "
                                      "None when KV rides the pod network")
    pin_nodes: bool | None = Field(default=None, description="pin host names; None: when plan.cluster is set")


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated dicts (shared labels) out in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objects, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=4096)


@lru_cache(maxsize=None)
def _gpu_products() -> dict[str, dict[str, str]]:
    text = (resources.files("layoutopt.report") / "data" / "gpu_products.yaml").read_text()
    return load_package_yaml(text)["gpus"]


def gpu_resource(gpu: str) -> dict[str, str]:
    """``resource`` (device-plugin resource name) and, when known, ``product_label``/``product``."""
    row = _gpu_products().get(gpu)
    if row is None:
        vendor_amd = gpu.upper().startswith("MI")
        return {"resource": "amd.com/gpu" if vendor_amd else "nvidia.com/gpu"}
    return dict(row)


def default_image(release: EngineRelease) -> str:
    return f"{IMAGE_REPOSITORIES[release.engine]}:v{release.version}"


def _affinity(pool: Pool, gpus: int, nodes: list[str]) -> dict[str, Any] | None:
    expressions = []
    if nodes:
        expressions.append({"key": "kubernetes.io/hostname", "operator": "In", "values": nodes})
    row = gpu_resource(pool.gpu)
    if "product" in row:
        expressions.append({"key": row["product_label"], "operator": "In", "values": [row["product"]]})
    if row["resource"] == "nvidia.com/gpu":
        expressions.append({"key": GPU_COUNT_LABEL, "operator": "Gt", "values": [str(gpus - 1)]})
    term = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}


def _shell(launch: NodeLaunch, dp_local: int | None) -> str:
    steps = [" ".join(shell_word(t) for t in step) for step in launch.setup]
    if launch.argv is not None:
        argv = list(launch.argv)
        for i, token in enumerate(argv[:-1]):
            if token in _WORKER_VALUES:
                argv[i + 1] = _WORKER_VALUES[token]
            elif token == "--data-parallel-start-rank" and dp_local:
                argv[i + 1] = f"$((LWS_WORKER_INDEX * {dp_local}))"
        steps.append("exec " + " ".join(shell_word(t) for t in argv))
    return " && ".join(steps)


def _ports(pool: Pool, release: EngineRelease, serves: bool) -> list[dict[str, Any]]:
    ports = [{"name": "http", "containerPort": BASE_PORT}] if serves else []
    if pool.role in ("prefill", "decode") and release.engine == "vllm":
        # One NIXL handshake listener per DP rank: base + DP rank.
        ports += [{"name": f"nixl-{r}", "containerPort": NIXL_SIDE_CHANNEL_BASE_PORT + r} for r in range(pool.dp_size)]
    if pool.role == "prefill" and release.engine == "sglang" and serves:
        ports.append({"name": "bootstrap", "containerPort": BOOTSTRAP_BASE_PORT})
    return ports


def _probes(container: dict[str, Any]) -> None:
    probe = {"httpGet": {"path": "/health", "port": "http"}}
    container["startupProbe"] = {**probe, "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": STARTUP_FAILURES}
    container["readinessProbe"] = {**probe, "periodSeconds": 10, "failureThreshold": 3}
    container["livenessProbe"] = {**probe, "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 5}


def _env(launch: NodeLaunch, options: KubernetesOptions) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": options.hf_token_secret,
                                                             "key": options.hf_token_key, "optional": True}}},
        {"name": "HF_HOME", "value": "/models"},
    ]
    # The device plugin picks the GPUs inside a pod, so CUDA_VISIBLE_DEVICES is not carried over.
    env += [{"name": k, "value": v} for k, v in launch.env.items() if k != "CUDA_VISIBLE_DEVICES"]
    return env


def _container(release: EngineRelease, pool: Pool, launch: NodeLaunch, image: str, gpus: int, shell: bool,
               dp_local: int | None, serves: bool, rdma: bool, options: KubernetesOptions) -> dict[str, Any]:
    resource = gpu_resource(pool.gpu)["resource"]
    container: dict[str, Any] = {"name": "engine", "image": image}
    if shell:
        container["command"] = ["/bin/sh", "-c", _shell(launch, dp_local)]
    else:
        program = len(ENGINE_PROGRAMS[release.engine])
        container["command"] = list(launch.argv[:program])
        container["args"] = list(launch.argv[program:])
    container["env"] = _env(launch, options)
    ports = _ports(pool, release, serves)
    if ports:
        container["ports"] = ports
    if serves:
        _probes(container)
    limits: dict[str, Any] = {resource: gpus}
    if rdma and options.rdma_resource:
        limits[options.rdma_resource] = 1
    container["resources"] = {"limits": limits, "requests": dict(limits)}
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"},
                                 {"name": "model-cache", "mountPath": "/models"}]
    return container


def _volumes(options: KubernetesOptions) -> list[dict[str, Any]]:
    # NCCL and the engines' worker processes share tensors through /dev/shm.
    shm = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{options.shm_gib}Gi"}}
    if options.model_cache_pvc:
        cache = {"name": "model-cache", "persistentVolumeClaim": {"claimName": options.model_cache_pvc}}
    else:
        cache = {"name": "model-cache", "emptyDir": {"sizeLimit": f"{options.model_cache_gib}Gi"}}
    return [shm, cache]


def _pod_spec(release: EngineRelease, pool: Pool, launch: NodeLaunch, image: str, gpus: int, nodes: list[str],
              shell: bool, options: KubernetesOptions, rdma: bool, dp_local: int | None = None,
              serves: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"affinity": _affinity(pool, gpus, nodes)}
    spec["containers"] = [_container(release, pool, launch, image, gpus, shell, dp_local, serves, rdma, options)]
    spec["volumes"] = _volumes(options)
    return spec


def _labels(plan: Plan, pool: Pool, name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "layoutopt",
            "layoutopt.io/pool": name, "layoutopt.io/role": pool.role, "layoutopt.io/gpu": dns_name(pool.gpu),
            "layoutopt.io/model": dns_name(plan.model)}


def _annotations(pool: Pool, release: EngineRelease, instances: list[InstanceSpec], pinned: bool) -> dict[str, str]:
    placed = "; ".join(f"{s.instance_id}: {'+'.join(s.nodes)} GPUs {s.gpus_text}" for s in instances)
    key = "layoutopt.io/placement" if pinned else "layoutopt.io/planned-placement"
    return {"layoutopt.io/engine": f"{release.engine} {release.version}",
            "layoutopt.io/layout": pool.layout.short_name(), key: placed}


def _spans_nvlink_domain(pool: Pool, gpus_on_node: int) -> bool:
    """Whether one instance's nodes must share a multi-node NVLink domain (NVL72 trays)."""
    from layoutopt.hardware_catalog.catalog import get_gpu

    return pool.layout.gpus_per_stage > gpus_on_node and get_gpu(pool.gpu).scaleup_domain_gpus > gpus_on_node


def pool_manifests(plan: Plan, pool_index: int, instances: list[InstanceSpec], release: EngineRelease,
                   deployment: PoolDeployment, options: KubernetesOptions) -> list[dict[str, Any]]:
    """The workload and Service of one pool, as Kubernetes objects (dicts)."""
    pool = plan.pools[pool_index]
    name = instances[0].pool_name
    image = options.image or default_image(release)
    labels = _labels(plan, pool, name)
    pinned = options.pin_nodes if options.pin_nodes is not None else placed_on_cluster(plan)
    nodes = sorted({node for spec in instances for node in spec.nodes}) if pinned else []
    num_nodes = instances[0].num_nodes
    gpus = len(instances[0].gpus)
    # KV crosses the NIC between prefill and decode pods, and activations between an instance's nodes.
    rdma = pool.role in ("prefill", "decode") or num_nodes > 1
    metadata = {"name": name, "namespace": options.namespace, "labels": labels,
                "annotations": _annotations(pool, release, instances, pinned)}
    selector = {"layoutopt.io/pool": name}
    pod_instance = instances[0].model_copy(update={"port": BASE_PORT, "side_channel_port": NIXL_SIDE_CHANNEL_BASE_PORT,
                                                   "bootstrap_port": BOOTSTRAP_BASE_PORT, "index": 0})
    # Pods that serve HTTP carry the label the routers discover them by; SGLang prefill pods
    # name their bootstrap port for sglang-router (sglang_router/router_args.py:55).
    serving = {"metadata": {"labels": {**labels, "layoutopt.io/serves": "true"}}}
    if pool.role == "prefill" and release.engine == "sglang":
        serving["metadata"]["annotations"] = {"sglang.ai/bootstrap-port": str(BOOTSTRAP_BASE_PORT)}
    if num_nodes == 1:
        context = node_context(release, deployment, pod_instance, 0, "127.0.0.1", "$(POD_IP)", in_pod=True)
        launch = node_launch(release, pool, context)
        workload = {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": pool.instances, "selector": {"matchLabels": selector},
                     "template": {**serving,
                                  "spec": _pod_spec(release, pool, launch, image, gpus, nodes, False, options, rdma)}},
        }
    else:
        leader, worker = (node_launch(release, pool, node_context(release, deployment, pod_instance, rank, LWS_LEADER,
                                                                  "$(POD_IP)", in_pod=True))
                          for rank in (0, 1))
        dp_local = pool.dp_size // num_nodes if pool.dp_size % num_nodes == 0 else None
        group: dict[str, Any] = {
            "size": num_nodes, "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {**serving,
                               "spec": _pod_spec(release, pool, leader, image, gpus, nodes, True, options, rdma,
                                                 dp_local)},
            "workerTemplate": {"metadata": {"labels": labels},
                               "spec": _pod_spec(release, pool, worker, image, gpus, nodes, True, options, rdma,
                                                 dp_local, serves=False)}}
        if _spans_nvlink_domain(pool, gpus):
            metadata["annotations"][LWS_EXCLUSIVE_TOPOLOGY] = NVLINK_CLIQUE_LABEL
        workload = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": metadata,
                    "spec": {"replicas": pool.instances, "leaderWorkerTemplate": group}}
        # Only leaders serve the API.
        selector = {**selector, "leaderworkerset.sigs.k8s.io/worker-index": "0"}
        launch = leader
    notes = (*deployment.notes, *launch.notes)
    if notes:
        # Features the engine version lacks and memory warnings, as in the launch scripts' NOTE comments.
        metadata["annotations"]["layoutopt.io/engine-notes"] = "; ".join(notes)
    service_ports = [{"name": "http", "port": BASE_PORT, "targetPort": "http"}]
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": options.namespace, "labels": labels},
        "spec": {"selector": selector, "ports": service_ports},
    }
    return [workload, service]


def kubernetes_manifests(plan: Plan, instances: list[InstanceSpec], release: EngineRelease,
                         deployments: list[PoolDeployment], options: KubernetesOptions) -> dict[str, str]:
    """``k8s/<pool>.yaml`` -> YAML text (a multi-document stream), for every pool."""
    names.namespace(options.namespace)
    names.secret_name(options.hf_token_secret)
    names.secret_key(options.hf_token_key, "--hf-token-key")
    if options.model_cache_pvc:
        names.secret_name(options.model_cache_pvc, "--model-cache-pvc")
    if options.image:
        names.image(options.image)
    if options.rdma_resource and not re.fullmatch(r"[a-z0-9.-]+/[A-Za-z0-9._-]+", options.rdma_resource):
        raise InputError("--rdma-resource", options.rdma_resource, "an extended resource name such as rdma/ib, or none")
    files: dict[str, str] = {}
    for index in range(len(plan.pools)):
        mine = [spec for spec in instances if spec.pool_index == index]
        objects = pool_manifests(plan, index, mine, release, deployments[index], options)
        header = f"# layoutopt manifests for pool {mine[0].pool_name}; engine: {release.engine} {release.version}\n"
        files[f"k8s/{mine[0].pool_name}.yaml"] = header + dump_yaml(objects)
    return files
