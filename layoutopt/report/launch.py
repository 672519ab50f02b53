"""Per-instance launch scripts: which node and GPUs each instance uses, and the shell to start it.

Instances come from ``plan.placement`` when the plan has one (matched to pools by ``pool_index``,
or by role in pool order for placements written without it); otherwise they are packed in pool order onto generic nodes ``node-0``, ``node-1``, ... of
``gpus_per_node`` GPUs each. A PP instance spanning nodes uses the same GPU indices on every node
(``PlacedInstance.gpus`` names those of its first stage).
"""

from __future__ import annotations

import math
import re
import shlex

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.plan import PlacedInstance, Plan, Pool
from layoutopt.report.engine_flags import BASE_PORT, ENGINE_VERSIONS, NodeLaunch, flags_file_name, node_launch

# HGX-style 8-GPU servers; plans without a placement do not carry the node shape.
DEFAULT_GPUS_PER_NODE = 8


class InstanceSpec(BaseModel):
    """One instance of one pool, placed: nodes in stage order and GPU indices used on each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_id: str
    pool_index: int
    pool_name: str
    nodes: list[str]
    gpus: list[int]
    port: int

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)


def dns_name(text: str, limit: int = 63) -> str:
    """``text`` as a Kubernetes DNS-1123 label (also a safe file name)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:limit].rstrip("-") or "x"


def pool_names(plan: Plan) -> list[str]:
    """A unique readable name per pool, e.g. 'decode-h100-sxm-tp4-fp8'."""
    names: list[str] = []
    for index, pool in enumerate(plan.pools):
        name = dns_name(f"{pool.role}-{pool.gpu}-{pool.layout.short_name()}", limit=55)
        names.append(f"{name}-{index}" if name in names else name)
    return names


def _placed_by_pool(plan: Plan) -> list[list[PlacedInstance]] | None:
    """Placed instances per pool from their ``pool_index``; None unless every instance has one."""
    if any(p.pool_index is None or p.pool_index >= len(plan.pools) for p in plan.placement):
        return None
    by_pool: list[list[PlacedInstance]] = [[] for _ in plan.pools]
    for placed in plan.placement:
        by_pool[placed.pool_index].append(placed)
    return by_pool


def _from_placement(plan: Plan, names: list[str]) -> list[InstanceSpec]:
    by_role: dict[str, list[PlacedInstance]] = {}
    for placed in plan.placement:
        by_role.setdefault(placed.role, []).append(placed)
    by_pool = _placed_by_pool(plan)
    taken: dict[str, int] = {}
    specs: list[InstanceSpec] = []
    for index, pool in enumerate(plan.pools):
        start = taken.get(pool.role, 0)
        if by_pool is not None:
            chosen = by_pool[index][:pool.instances]
        else:
            chosen = by_role.get(pool.role, [])[start:start + pool.instances]
        if len(chosen) < pool.instances:
            raise InputError(
                "placement", f"{len(by_role.get(pool.role, []))} {pool.role} instances",
                f"the {pool.role} pools need {sum(p.instances for p in plan.pools if p.role == pool.role)}",
            )
        taken[pool.role] = start + pool.instances
        for placed in chosen:
            specs.append(InstanceSpec(instance_id=dns_name(placed.instance_id), pool_index=index,
                                      pool_name=names[index], nodes=list(placed.nodes or [placed.node]),
                                      gpus=list(placed.gpus), port=BASE_PORT + len(specs)))
    return specs


def _sequential(plan: Plan, names: list[str], gpus_per_node: int) -> list[InstanceSpec]:
    specs: list[InstanceSpec] = []
    node, used = 0, 0
    for index, pool in enumerate(plan.pools):
        for k in range(pool.instances):
            need = pool.gpus_per_instance
            if need > gpus_per_node:
                node += 1 if used else 0
                num_nodes = math.ceil(need / gpus_per_node)
                nodes = [f"node-{node + i}" for i in range(num_nodes)]
                gpus = list(range(math.ceil(need / num_nodes)))
                node, used = node + num_nodes, 0
            else:
                if used + need > gpus_per_node:
                    node, used = node + 1, 0
                nodes, gpus = [f"node-{node}"], list(range(used, used + need))
                used += need
            specs.append(InstanceSpec(instance_id=f"{names[index]}-{k}", pool_index=index, pool_name=names[index],
                                      nodes=nodes, gpus=gpus, port=BASE_PORT + len(specs)))
    return specs


def expand_instances(plan: Plan, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> list[InstanceSpec]:
    """Every instance of the plan, in pool order, with its nodes, GPUs and port."""
    names = pool_names(plan)
    if plan.placement:
        return _from_placement(plan, names)
    return _sequential(plan, names, gpus_per_node)


def shell_word(token: str) -> str:
    """Quote ``token`` for sh; tokens holding a ``$`` expansion are double-quoted so it expands."""
    if "$" in token:
        return f'"{token}"'
    return shlex.quote(token)


def command_lines(argv: tuple[str, ...], indent: str) -> list[str]:
    """``argv`` one flag (with its value) per line, joined with backslash continuations."""
    lines: list[str] = []
    current: list[str] = []
    for token in argv:
        if token.startswith("--") and current:
            lines.append(" ".join(current))
            current = []
        current.append(shell_word(token))
    lines.append(" ".join(current))
    continuation = " \\"
    return [indent + ("" if i == 0 else "  ") + line + (continuation if i < len(lines) - 1 else "")
            for i, line in enumerate(lines)]


def node_body(launch: NodeLaunch, indent: str) -> list[str]:
    """Shell lines one node runs: notes as comments, env exports, setup, then exec of the engine."""
    lines = [f"{indent}# NOTE: {note}" for note in launch.notes]
    lines += [f"{indent}export {key}={shell_word(value)}" for key, value in launch.env.items()]
    lines += [f"{indent}{' '.join(shell_word(t) for t in step)}" for step in launch.setup]
    if launch.argv is not None:
        lines += command_lines(("exec", *launch.argv), indent)
    return lines


def node_launches(engine: str, pool: Pool, instance: InstanceSpec, model: str) -> list[NodeLaunch]:
    """The launch of every node of ``instance``, head (rank 0) first."""
    return [node_launch(engine, pool, model=model, port=instance.port, num_nodes=instance.num_nodes,
                        node_rank=rank, head=instance.nodes[0], gpus_on_node=len(instance.gpus),
                        cuda_visible_devices=instance.cuda_visible_devices)
            for rank in range(instance.num_nodes)]


def launch_script(plan: Plan, instance: InstanceSpec, *, engine: str, model: str) -> str:
    """The bash script that starts ``instance`` (multi-node instances switch on ``NODE_RANK``)."""
    pool = plan.pools[instance.pool_index]
    version = ENGINE_VERSIONS[engine]
    where = ", ".join(f"{node} (GPUs {instance.cuda_visible_devices})" for node in instance.nodes)
    lines = [
        "#!/usr/bin/env bash",
        f"# layoutopt launch script for instance {instance.instance_id}",
        f"# engine: {engine} {version} (flags checked against layoutopt/report/data/{flags_file_name(engine, version)})",
        f"# model: {model} (plan model: {plan.model})",
        f"# pool: {instance.pool_name} (role {pool.role}, {pool.gpu}, {pool.layout.short_name()}, "
        f"{pool.gpus_per_instance} GPUs per instance)",
        f"# runs on: {where}; serves http on port {instance.port}",
    ]
    if pool.role in ("prefill", "decode"):
        lines.append("# disaggregated serving: a router that sends each request to a prefill and then a decode "
                     "instance (KV moves over NIXL) is deployed separately")
    lines.append("set -euo pipefail")
    launches = node_launches(engine, pool, instance, model)
    if instance.num_nodes == 1:
        lines += node_body(launches[0], "")
        return "\n".join(lines) + "\n"
    last = instance.num_nodes - 1
    lines += [
        f"# This instance spans {instance.num_nodes} nodes. Run this script on each of them with NODE_RANK set",
        f"# (0 = {instance.nodes[0]}, the head); start NODE_RANK=0 first.",
        f'NODE_RANK="${{NODE_RANK:?set NODE_RANK to 0..{last}}}"',
        'case "$NODE_RANK" in',
    ]
    for rank, launch in enumerate(launches):
        lines += [f"  {rank})  # {instance.nodes[rank]}", *node_body(launch, "    "), "    ;;"]
    lines += [f'  *) echo "NODE_RANK must be 0..{last}" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"


def launch_scripts(plan: Plan, instances: list[InstanceSpec], *, engine: str, model: str) -> dict[str, str]:
    """``launch/<instance-id>.sh`` -> script text, for every instance."""
    return {f"launch/{spec.instance_id}.sh": launch_script(plan, spec, engine=engine, model=model)
            for spec in instances}
