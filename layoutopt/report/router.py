"""The router in front of a plan's instances: a maintained project, never a home-made proxy.

Disaggregated pools get the prefill/decode router of the engine's project: ``vllm-router`` in PD
mode for vLLM (``--vllm-pd-disaggregation --prefill URL --decode URL``), ``sglang-router`` for
SGLang (``--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL``). Colocated pools of
more than one instance get the same router in load-balancing mode (``--worker-urls``). A mixed
plan gets both; the front door splits traffic between them by the planned capacity.

Flags read from the routers' wheels (generated into ``layoutopt/engines/data/routers/`` by
``scripts/refresh_engine_data.py``; the emitted-file tests check every router command against it):

- vllm-router 0.1.17, vllm_router/router_args.py: ``--host``/``--port`` (l.126, l.132), ``--worker-urls``
  (l.139), ``--vllm-pd-disaggregation`` (l.282), ``--prefill URL [BOOTSTRAP_PORT]`` (l.287, nargs='+',
  repeated), ``--decode URL`` (l.295), ``--service-discovery`` (l.405), ``--selector`` (l.410),
  ``--service-discovery-port`` (l.417), ``--service-discovery-namespace`` (l.423),
  ``--prefill-selector``/``--decode-selector`` (l.428-435); console script ``vllm-router``.
- sglang-router 0.3.2, sglang_router/router_args.py: ``--pd-disaggregation`` (l.346), ``--prefill``
  (l.351), ``--decode`` (l.359), the same service-discovery flags (l.395-425); discovered prefill
  pods give their bootstrap port in the ``sglang.ai/bootstrap-port`` annotation (l.55, l.925);
  ``python3 -m sglang_router.launch_router`` (launch_router.py:103).

In Kubernetes the routers find their workers by label (service discovery), so the router needs
a ServiceAccount allowed to list and watch pods in the namespace.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from layoutopt.engines.loader import ROUTER_RELEASES
from layoutopt.plan import Plan
from layoutopt.report.engine_flags import EngineRelease, load_router_flags
from layoutopt.report.kubernetes import KubernetesOptions, dump_yaml
from layoutopt.report.launch import IDEALISED_NODES_NOTE, InstanceSpec, command_lines
from layoutopt.report.plan_inputs import placed_on_cluster
from layoutopt.report.names import dns_name
from layoutopt.report.node_launch import BASE_PORT

ROUTER_PORT = 30000
# The router releases (engines.loader.ROUTER_RELEASES); their launchers' programs and flags are the
# generated data/routers/<package>-<version>.yaml, which tests check every router command against.
ROUTER_PACKAGES = ROUTER_RELEASES


def _program(engine: str) -> tuple[str, ...]:
    return tuple(load_router_flags(engine)[2])
ROUTER_IMAGE = "python:3.11-slim"
SERVES_LABEL = "layoutopt.io/serves"


class Router(BaseModel):
    """One router: its name, mode and the instances behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    mode: str  # "pd" or "lb"
    port: int
    instances: list[InstanceSpec]
    share_fraction: float


def plan_routers(plan: Plan, instances: list[InstanceSpec]) -> list[Router]:
    """The routers a plan needs: one PD router over its prefill and decode pools, one load balancer
    over its colocated pools when they hold more than one instance."""
    roles = {i.instance_id: plan.pools[i.pool_index].role for i in instances}
    pd = [i for i in instances if roles[i.instance_id] in ("prefill", "decode")]
    lb = [i for i in instances if roles[i.instance_id] == "colocated"]

    def capacity(group: list[InstanceSpec], role: str) -> float:
        return sum(plan.pools[i.pool_index].capacity_rps for i in group if roles[i.instance_id] == role)

    # A request needs a prefill and a decode: the PD part serves the smaller of the two capacities.
    pd_rps = min(capacity(pd, "prefill"), capacity(pd, "decode")) if pd else 0.0
    lb_rps = capacity(lb, "colocated")
    total = pd_rps + lb_rps or 1.0
    routers = []
    if pd:
        routers.append(Router(name="router" if not lb else "router-pd", mode="pd", port=ROUTER_PORT, instances=pd,
                              share_fraction=pd_rps / total if lb else 1.0))
    if len(lb) > 1 or (lb and pd):
        routers.append(Router(name="router" if not pd else "router-colocated", mode="lb",
                              port=ROUTER_PORT + (1 if pd else 0), instances=lb,
                              share_fraction=lb_rps / total if pd else 1.0))
    return routers


def _worker_args(plan: Plan, release: EngineRelease, router: Router, url) -> list[str]:
    if router.mode == "lb":
        return ["--worker-urls", *(url(i) for i in router.instances)]
    args = ["--vllm-pd-disaggregation" if release.engine == "vllm" else "--pd-disaggregation"]
    for instance in router.instances:
        if plan.pools[instance.pool_index].role == "prefill":
            # vLLM's NIXL handshake needs no bootstrap port; SGLang's prefill servers run one each.
            args += ["--prefill", url(instance)] + ([str(instance.bootstrap_port)] if release.engine == "sglang" else [])
    for instance in router.instances:
        if plan.pools[instance.pool_index].role == "decode":
            args += ["--decode", url(instance)]
    return args


def router_argv(plan: Plan, release: EngineRelease, router: Router) -> tuple[str, ...]:
    """The router command for hosts named by the plan (bare-metal launch)."""
    def url(instance: InstanceSpec) -> str:
        return f"http://{instance.nodes[0]}:{instance.port}"

    return (*_program(release.engine), "--host", "0.0.0.0", "--port", str(router.port),
            *_worker_args(plan, release, router, url))


def router_script(plan: Plan, release: EngineRelease, routers: list[Router]) -> str:
    package, version = ROUTER_PACKAGES[release.engine]
    lines = [
        "#!/usr/bin/env bash",
        f"# layoutopt router for {len(routers)} front door(s); engine: {release.engine} {release.version}",
        f"# router: {package} {version} (pip install {package}=={version}); start it after the instances.",
    ]
    for router in routers:
        kind = "prefill -> decode (KV over NIXL)" if router.mode == "pd" else "load balancing"
        lines.append(f"# {router.name}: {kind} over {len(router.instances)} instances on port {router.port}; "
                     f"{router.share_fraction:.0%} of the planned traffic")
    if not placed_on_cluster(plan):
        lines.append(f"# {IDEALISED_NODES_NOTE}; the URLs below name them")
    lines.append("set -euo pipefail")
    for k, router in enumerate(routers):
        argv = router_argv(plan, release, router)
        if k < len(routers) - 1:
            lines += command_lines(argv, "")
            lines[-1] += " &"
        else:
            lines += command_lines(("exec", *argv), "")
    return "\n".join(lines) + "\n"


def _selector_args(plan: Plan, release: EngineRelease, router: Router, namespace: str) -> list[str]:
    model = dns_name(plan.model)
    base = [f"layoutopt.io/model={model}", f"{SERVES_LABEL}=true"]
    args = ["--service-discovery", "--service-discovery-port", str(BASE_PORT),
            "--service-discovery-namespace", namespace]
    if router.mode == "lb":
        return args + ["--selector", *base, "layoutopt.io/role=colocated"]
    return (args + ["--vllm-pd-disaggregation" if release.engine == "vllm" else "--pd-disaggregation",
                    "--prefill-selector", *base, "layoutopt.io/role=prefill",
                    "--decode-selector", *base, "layoutopt.io/role=decode"])


def router_manifests(plan: Plan, release: EngineRelease, routers: list[Router],
                     options: KubernetesOptions) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding for pod discovery, then a Deployment and Service per router."""
    namespace = options.namespace
    package, version = ROUTER_PACKAGES[release.engine]
    labels = {"app.kubernetes.io/part-of": "layoutopt", "layoutopt.io/model": dns_name(plan.model)}
    account = "layoutopt-router"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": account, "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": account, "namespace": namespace},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}},
    ]
    for router in routers:
        argv = [*_program(release.engine), "--host", "0.0.0.0", "--port", str(router.port),
                *_selector_args(plan, release, router, namespace)]
        mine = {**labels, "app.kubernetes.io/name": router.name, "layoutopt.io/router": router.name}
        container = {
            "name": "router", "image": ROUTER_IMAGE,
            # The router is a pip package; the container installs the pinned release at start.
            "command": ["/bin/sh", "-c", f"pip install --no-cache-dir {package}=={version} && exec \"$0\" \"$@\"",
                        *argv],
            "ports": [{"name": "http", "containerPort": router.port}],
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10},
            "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 30, "initialDelaySeconds": 120},
            "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
        }
        objects.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": router.name, "namespace": namespace, "labels": mine,
                         "annotations": {"layoutopt.io/traffic-share": f"{router.share_fraction:.3f}"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"layoutopt.io/router": router.name}},
                     "template": {"metadata": {"labels": mine},
                                  "spec": {"serviceAccountName": account, "containers": [container]}}},
        })
        objects.append({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": router.name, "namespace": namespace,
                                                                "labels": mine},
            "spec": {"selector": {"layoutopt.io/router": router.name},
                     "ports": [{"name": "http", "port": router.port, "targetPort": "http"}]},
        })
    return objects


def router_files(plan: Plan, instances: list[InstanceSpec], release: EngineRelease,
                 options: KubernetesOptions) -> dict[str, str]:
    """``router/router.sh`` and ``k8s/router.yaml`` when the plan needs a router."""
    routers = plan_routers(plan, instances)
    if not routers:
        return {}
    header = f"# layoutopt router manifests; engine: {release.engine} {release.version}\n"
    return {"router/router.sh": router_script(plan, release, routers),
            "k8s/router.yaml": header + dump_yaml(router_manifests(plan, release, routers, options))}
