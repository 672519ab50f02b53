"""Kubernetes manifests, one file per pool: the workload and a Service in front of it.

Single-node instances become a ``Deployment`` (one replica per instance); instances that span
nodes become a ``LeaderWorkerSet`` (leaderworkerset.x-k8s.io/v1, LWS >= 0.6 for the injected
``LWS_WORKER_INDEX``) with one group per instance and one pod per node. Pods request the pool's
GPUs per node, carry ``layoutopt.io/role``, and are pinned by node affinity to the placement's
hostnames (when the plan has a placement) and to the GPU product label.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from layoutopt.plan import Plan, Pool
from layoutopt.report.engine_flags import BASE_PORT, ENGINE_PROGRAMS, ENGINE_VERSIONS, NodeLaunch, node_launch
from layoutopt.report.launch import InstanceSpec, dns_name, shell_word

# Images published by the engine projects for the versions layoutopt targets.
DEFAULT_IMAGES = {"vllm": f"vllm/vllm-openai:v{ENGINE_VERSIONS['vllm']}",
                  "sglang": f"lmsysorg/sglang:v{ENGINE_VERSIONS['sglang']}"}
LWS_LEADER = "${LWS_LEADER_ADDRESS}"
# Per-node values that differ between LWS workers: flag -> shell expression replacing its value.
_WORKER_VALUES = {"--node-rank": "${LWS_WORKER_INDEX}"}


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated dicts (shared labels) out in full instead of as YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


@lru_cache(maxsize=None)
def _gpu_products() -> dict[str, dict[str, str]]:
    text = (resources.files("layoutopt.report") / "data" / "gpu_products.yaml").read_text()
    return yaml.safe_load(text)["gpus"]


def gpu_resource(gpu: str) -> dict[str, str]:
    """``resource`` (device-plugin resource name) and, when known, ``product_label``/``product``."""
    row = _gpu_products().get(gpu)
    if row is None:
        vendor_amd = gpu.upper().startswith("MI")
        return {"resource": "amd.com/gpu" if vendor_amd else "nvidia.com/gpu"}
    return dict(row)


def _affinity(pool: Pool, nodes: list[str]) -> dict[str, Any] | None:
    expressions = []
    if nodes:
        expressions.append({"key": "kubernetes.io/hostname", "operator": "In", "values": nodes})
    row = gpu_resource(pool.gpu)
    if "product" in row:
        expressions.append({"key": row["product_label"], "operator": "In", "values": [row["product"]]})
    if not expressions:
        return None
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


def _container(engine: str, pool: Pool, launch: NodeLaunch, image: str, gpus: int, shell: bool,
               dp_local: int | None, serves: bool) -> dict[str, Any]:
    resource = gpu_resource(pool.gpu)["resource"]
    # The device plugin picks the GPUs inside a pod, so CUDA_VISIBLE_DEVICES is not carried over.
    env = [{"name": k, "value": v} for k, v in launch.env.items() if k != "CUDA_VISIBLE_DEVICES"]
    container: dict[str, Any] = {"name": "engine", "image": image}
    if shell:
        container["command"] = ["/bin/sh", "-c", _shell(launch, dp_local)]
    else:
        program = len(ENGINE_PROGRAMS[engine])
        container["command"] = list(launch.argv[:program])
        container["args"] = list(launch.argv[program:])
    if env:
        container["env"] = env
    if serves:
        container["ports"] = [{"name": "http", "containerPort": BASE_PORT}]
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
    container["resources"] = {"limits": {resource: gpus}, "requests": {resource: gpus}}
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return container


def _pod_spec(engine: str, pool: Pool, launch: NodeLaunch, image: str, gpus: int, nodes: list[str],
              shell: bool, dp_local: int | None = None, serves: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    affinity = _affinity(pool, nodes)
    if affinity:
        spec["affinity"] = affinity
    spec["containers"] = [_container(engine, pool, launch, image, gpus, shell, dp_local, serves)]
    # NCCL and the engines' worker processes share tensors through /dev/shm.
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    return spec


def _labels(plan: Plan, pool: Pool, name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "layoutopt",
            "layoutopt.io/pool": name, "layoutopt.io/role": pool.role, "layoutopt.io/gpu": dns_name(pool.gpu),
            "layoutopt.io/model": dns_name(plan.model)}


def _annotations(pool: Pool, engine: str, instances: list[InstanceSpec]) -> dict[str, str]:
    placed = "; ".join(f"{s.instance_id}: {'+'.join(s.nodes)} GPUs {s.cuda_visible_devices}" for s in instances)
    return {"layoutopt.io/engine": f"{engine} {ENGINE_VERSIONS[engine]}",
            "layoutopt.io/layout": pool.layout.short_name(), "layoutopt.io/placement": placed}


def pool_manifests(plan: Plan, pool_index: int, instances: list[InstanceSpec], *, engine: str, model: str,
                   namespace: str, image: str | None, placed: bool) -> list[dict[str, Any]]:
    """The workload and Service of one pool, as Kubernetes objects (dicts)."""
    pool = plan.pools[pool_index]
    name = instances[0].pool_name
    image = image or DEFAULT_IMAGES[engine]
    labels = _labels(plan, pool, name)
    nodes = sorted({node for spec in instances for node in spec.nodes}) if placed else []
    num_nodes = instances[0].num_nodes
    gpus = len(instances[0].gpus)
    metadata = {"name": name, "namespace": namespace, "labels": labels,
                "annotations": _annotations(pool, engine, instances)}
    selector = {"layoutopt.io/pool": name}
    if num_nodes == 1:
        launch = node_launch(engine, pool, model=model, port=BASE_PORT)
        workload = {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": pool.instances, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": labels},
                                  "spec": _pod_spec(engine, pool, launch, image, gpus, nodes, shell=False)}},
        }
    else:
        leader, worker = (node_launch(engine, pool, model=model, port=BASE_PORT, num_nodes=num_nodes,
                                      node_rank=rank, head=LWS_LEADER, gpus_on_node=gpus) for rank in (0, 1))
        dp_local = pool.dp_size // num_nodes if pool.dp_size % num_nodes == 0 else None
        workload = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": metadata,
            "spec": {"replicas": pool.instances, "leaderWorkerTemplate": {
                "size": num_nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": labels},
                                   "spec": _pod_spec(engine, pool, leader, image, gpus, nodes, True, dp_local)},
                "workerTemplate": {"metadata": {"labels": labels},
                                   "spec": _pod_spec(engine, pool, worker, image, gpus, nodes, True, dp_local,
                                                   serves=False)}}},
        }
        # Only leaders serve the API.
        selector = {**selector, "leaderworkerset.sigs.k8s.io/worker-index": "0"}
        launch = leader
    if launch.notes:
        # Features the engine version lacks, as in the launch scripts' NOTE comments.
        metadata["annotations"]["layoutopt.io/engine-notes"] = "; ".join(launch.notes)
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"selector": selector, "ports": [{"name": "http", "port": BASE_PORT, "targetPort": "http"}]},
    }
    return [workload, service]


def kubernetes_manifests(plan: Plan, instances: list[InstanceSpec], *, engine: str, model: str,
                         namespace: str = "default", image: str | None = None) -> dict[str, str]:
    """``k8s/<pool>.yaml`` -> YAML text (a multi-document stream), for every pool."""
    files: dict[str, str] = {}
    for index in range(len(plan.pools)):
        mine = [spec for spec in instances if spec.pool_index == index]
        objects = pool_manifests(plan, index, mine, engine=engine, model=model, namespace=namespace,
                                 image=image, placed=bool(plan.placement))
        header = (f"# layoutopt manifests for pool {mine[0].pool_name}; engine: {engine} {ENGINE_VERSIONS[engine]}\n")
        body = yaml.dump_all(objects, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=4096)
        files[f"k8s/{mine[0].pool_name}.yaml"] = header + body
    return files
