"""Per-instance launch scripts: which node and GPUs each instance uses, and the shell to start it.

Instances come from ``plan.placement`` when the plan has one (matched to pools by ``pool_index``,
or by role in pool order for placements written without it); otherwise they are packed in pool
order onto generic nodes ``node-0``, ``node-1``, ... of ``gpus_per_node`` GPUs each. A PP instance
spanning nodes uses the same GPU indices on every node (``PlacedInstance.gpus`` names those of its
first stage). Every port an instance opens is its own: HTTP, the NIXL side-channel range of its DP
ranks, SGLang's bootstrap port, the rendezvous ports of multi-node instances.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.plan import PlacedInstance, Plan, Pool
from layoutopt.report.deployment import PoolDeployment
from layoutopt.report.engine_flags import EngineRelease, flags_file_name
from layoutopt.report.plan_inputs import placed_on_cluster
from layoutopt.report.names import dns_name, shell_word
from layoutopt.report.node_launch import (
    BASE_PORT,
    BOOTSTRAP_BASE_PORT,
    NIXL_SIDE_CHANNEL_BASE_PORT,
    NodeContext,
    NodeLaunch,
    node_launch,
)

# Said in every bare-metal file of a plan made for a plain budget.
IDEALISED_NODES_NOTE = ("node names are the standard nodes of a plain budget, not your hosts: run each script on "
                        "a host of that shape and name (or plan with --cluster, whose nodes are real)")
# HGX-style 8-GPU servers; plans without a placement do not carry the node shape.
DEFAULT_GPUS_PER_NODE = 8

__all__ = ["DEFAULT_GPUS_PER_NODE", "InstanceSpec", "dns_name", "expand_instances", "launch_scripts", "pool_names",
           "shell_word"]


class InstanceSpec(BaseModel):
    """One instance of one pool, placed: nodes in stage order, GPU indices used on each, its ports."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_id: str
    index: int = 0
    pool_index: int
    pool_name: str
    nodes: list[str]
    gpus: list[int]
    # GPU indices on each node where they differ from ``gpus`` (a placement on a cluster file)
    gpus_by_node: dict[str, list[int]] = {}
    port: int
    side_channel_port: int = NIXL_SIDE_CHANNEL_BASE_PORT
    bootstrap_port: int = BOOTSTRAP_BASE_PORT

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)

    def gpus_on(self, node: str) -> list[int]:
        """GPU indices the instance uses on ``node`` (one of ``nodes``)."""
        return self.gpus_by_node.get(node, self.gpus)

    @property
    def gpus_text(self) -> str:
        """'4,5', or 'f2: 4,5; f3: 0,1' when the indices differ from node to node."""
        per_node = [",".join(str(g) for g in self.gpus_on(node)) for node in self.nodes]
        if len(set(per_node)) <= 1:
            return self.cuda_visible_devices
        return "; ".join(f"{node}: {gpus}" for node, gpus in zip(self.nodes, per_node))


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


def _from_placement(plan: Plan, names: list[str]) -> list[tuple[int, str, list[str], list[int]]]:
    by_role: dict[str, list[PlacedInstance]] = {}
    for placed in plan.placement:
        by_role.setdefault(placed.role, []).append(placed)
    by_pool = _placed_by_pool(plan)
    taken: dict[str, int] = {}
    rows = []
    for index, pool in enumerate(plan.pools):
        start = taken.get(pool.role, 0)
        chosen = by_pool[index][:pool.instances] if by_pool is not None else \
            by_role.get(pool.role, [])[start:start + pool.instances]
        if len(chosen) < pool.instances:
            raise InputError(
                "placement", f"{len(by_role.get(pool.role, []))} {pool.role} instances",
                f"the {pool.role} pools need {sum(p.instances for p in plan.pools if p.role == pool.role)}",
            )
        taken[pool.role] = start + pool.instances
        for placed in chosen:
            rows.append((index, dns_name(placed.instance_id), list(placed.nodes or [placed.node]), list(placed.gpus),
                         {node: list(gpus) for node, gpus in placed.gpus_by_node.items()}))
    return rows


def _sequential(plan: Plan, names: list[str], gpus_per_node: int) -> list[tuple[int, str, list[str], list[int]]]:
    rows = []
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
            rows.append((index, f"{names[index]}-{k}", nodes, gpus, {}))
    return rows


def expand_instances(plan: Plan, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> list[InstanceSpec]:
    """Every instance of the plan, in pool order, with its nodes, GPUs and ports."""
    names = pool_names(plan)
    rows = _from_placement(plan, names) if plan.placement else _sequential(plan, names, gpus_per_node)
    specs: list[InstanceSpec] = []
    side_channel = NIXL_SIDE_CHANNEL_BASE_PORT
    prefill_index = 0
    for k, (index, instance_id, nodes, gpus, gpus_by_node) in enumerate(rows):
        pool = plan.pools[index]
        specs.append(InstanceSpec(instance_id=instance_id, index=k, pool_index=index, pool_name=names[index],
                                  nodes=nodes, gpus=gpus, gpus_by_node=gpus_by_node, port=BASE_PORT + k,
                                  side_channel_port=side_channel,
                                  bootstrap_port=BOOTSTRAP_BASE_PORT + prefill_index))
        # Each DP rank listens on base + its DP rank: the next instance starts past the range.
        side_channel += pool.dp_size
        prefill_index += pool.role == "prefill"
    return specs


def node_context(release: EngineRelease, deployment: PoolDeployment, instance: InstanceSpec, node_rank: int,
                 head: str, advertise_host: str, in_pod: bool = False) -> NodeContext:
    return NodeContext(
        release=release, model=deployment.served.hf_id, online_quantization=deployment.served.online_quantization,
        port=instance.port, num_nodes=instance.num_nodes, node_rank=node_rank, head=head,
        # Each node's own GPU indices: a placement on a cluster file may use other indices on each node.
        gpus_on_node=len(instance.gpus_on(instance.nodes[node_rank])),
        node_gpus=tuple(len(instance.gpus_on(node)) for node in instance.nodes),
        cuda_visible_devices=",".join(str(g) for g in instance.gpus_on(instance.nodes[node_rank])),
        advertise_host=advertise_host, side_channel_port=instance.side_channel_port,
        bootstrap_port=instance.bootstrap_port, instance_index=instance.index,
        gpu_memory_utilization=deployment.gpu_memory_utilization, mem_fraction_static=deployment.mem_fraction_static,
        step_token_budget=deployment.step_token_budget, ep_exchange=deployment.ep_exchange,
        graphed_prompt_tokens=deployment.graphed_prompt_tokens, page_size=deployment.page_size,
        attention_backend=deployment.attention_backend, kv_cache_dtype=deployment.kv_cache_dtype, in_pod=in_pod)


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


def _comment(text: str) -> str:
    """One comment line: a newline in a value must not end the comment."""
    return " ".join(str(text).split())


def node_body(launch: NodeLaunch, indent: str) -> list[str]:
    """Shell lines one node runs: notes as comments, env exports, setup, then exec of the engine."""
    lines = [f"{indent}# NOTE: {_comment(note)}" for note in launch.notes]
    lines += [f"{indent}export {key}={shell_word(value)}" for key, value in launch.env.items()]
    lines += [f"{indent}{' '.join(shell_word(t) for t in step)}" for step in launch.setup]
    if launch.argv is not None:
        lines += command_lines(("exec", *launch.argv), indent)
    return lines


def node_launches(release: EngineRelease, pool: Pool, deployment: PoolDeployment,
                  instance: InstanceSpec) -> list[NodeLaunch]:
    """The launch of every node of ``instance``, head (rank 0) first."""
    head = instance.nodes[0]
    launches = []
    for rank, node in enumerate(instance.nodes):
        # Other instances reach this node at NODE_IP when set, else at the placement's host name.
        context = node_context(release, deployment, instance, rank, head, f"${{NODE_IP:-{node}}}")
        launch = node_launch(release, pool, context)
        launches.append(launch.model_copy(update={"notes": (*deployment.notes, *launch.notes)} if rank == 0 else {}))
    return launches


def launch_script(plan: Plan, instance: InstanceSpec, release: EngineRelease, deployment: PoolDeployment) -> str:
    """The bash script that starts ``instance`` (multi-node instances switch on ``NODE_RANK``)."""
    pool = plan.pools[instance.pool_index]
    where = ", ".join(f"{node} (GPUs {','.join(str(g) for g in instance.gpus_on(node))})" for node in instance.nodes)
    lines = [
        "#!/usr/bin/env bash",
        f"# layoutopt launch script for instance {instance.instance_id}",
        f"# engine: {release.engine} {release.version} (flags checked against {flags_file_name(release.engine, release.version)})",
        f"# model: {deployment.served.hf_id} (plan model: {_comment(plan.model)})",
        f"# pool: {instance.pool_name} (role {pool.role}, {pool.gpu}, {pool.layout.short_name()}, "
        f"{pool.gpus_per_instance} GPUs per instance)",
        f"# runs on: {where}; serves http on port {instance.port}",
    ]
    if not placed_on_cluster(plan):
        lines.append(f"# {IDEALISED_NODES_NOTE}")
    if pool.role in ("prefill", "decode"):
        lines.append("# disaggregated serving: router/router.sh sends each request to a prefill and then a decode "
                     "instance (KV moves over NIXL); set NODE_IP to this node's address on the KV network")
    lines.append("set -euo pipefail")
    launches = node_launches(release, pool, deployment, instance)
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


def launch_scripts(plan: Plan, instances: list[InstanceSpec], release: EngineRelease,
                   deployments: list[PoolDeployment]) -> dict[str, str]:
    """``launch/<instance-id>.sh`` -> script text, for every instance."""
    return {f"launch/{spec.instance_id}.sh": launch_script(plan, spec, release, deployments[spec.pool_index])
            for spec in instances}
