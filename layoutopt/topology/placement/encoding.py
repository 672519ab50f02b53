"""How a placed instance's GPUs are written into ``PlacedInstance``, and read back.

An instance's GPUs, in stage order (stage 0's TP/DP/PCP ranks, then stage 1's ...), are cut into
runs of consecutive GPUs on one node. ``PlacedInstance`` then holds

    node                  the node of the first run
    gpus                  the GPU indices of the first run (the whole instance on one node)
    nodes                 the node of every run, in stage order
    cuda_visible_devices  '0,1,2,3' for a one-node instance; for an instance over several nodes
                          one setting per node, 'node-a:0,1,2,3;node-b:4,5,6,7', in run order
    gpus_by_node          the same per node as a mapping, {'node-a': [0, 1, 2, 3], 'node-b': [4, 5, 6, 7]}
    pool_index            the instance's pool (position in plan.pools)

so the full assignment can be read back from the plan alone (``instance_gpus``). Instance ids
are ``<role>-<pool index>-<k>`` (``decode-1-0``): the pool index is the position in plan.pools.
"""

from __future__ import annotations

import re

from layoutopt.plan import PlacedInstance
from layoutopt.plan import Role
from layoutopt.topology.cluster import GpuId

RUN_SEPARATOR = ";"
NODE_SEPARATOR = ":"
_ID_RE = re.compile(r"^(?P<role>prefill|decode|colocated)-(?P<pool>\d+)-(?P<k>\d+)$")


def instance_id(role: Role, pool_index: int, k: int) -> str:
    return f"{role}-{pool_index}-{k}"


def pool_index_of(instance_id_text: str) -> int | None:
    """The pool index written in an instance id, or None when the id has another form."""
    match = _ID_RE.match(instance_id_text)
    return int(match.group("pool")) if match else None


def node_runs(gpus: list[GpuId]) -> list[tuple[str, list[int]]]:
    """Consecutive GPUs on one node, as (node, indices) in order."""
    runs: list[tuple[str, list[int]]] = []
    for gpu in gpus:
        if runs and runs[-1][0] == gpu.node:
            runs[-1][1].append(gpu.index)
        else:
            runs.append((gpu.node, [gpu.index]))
    return runs


def placed_instance(instance_id_text: str, role: Role, gpus: list[GpuId],
                    pool_index: int | None = None) -> PlacedInstance:
    """The ``PlacedInstance`` of an instance whose GPUs in stage order are ``gpus``."""
    runs = node_runs(gpus)
    if len(runs) == 1:
        devices = ",".join(str(i) for i in runs[0][1])
    else:
        devices = RUN_SEPARATOR.join(f"{node}{NODE_SEPARATOR}{','.join(map(str, idx))}" for node, idx in runs)
    by_node: dict[str, list[int]] = {}
    for gpu in gpus:
        by_node.setdefault(gpu.node, []).append(gpu.index)
    return PlacedInstance.model_construct(instance_id=instance_id_text, role=role, node=runs[0][0], gpus=list(runs[0][1]),
                          nodes=[node for node, _ in runs], cuda_visible_devices=devices, pool_index=pool_index,
                          gpus_by_node=by_node)


def instance_gpus(placed: PlacedInstance) -> list[GpuId]:
    """Every GPU of ``placed`` in stage order; raises ValueError when the fields disagree."""
    text = placed.cuda_visible_devices.strip()
    if NODE_SEPARATOR not in text:
        indices = _indices(text)
        if indices != list(placed.gpus):
            raise ValueError(f"cuda_visible_devices {text!r} does not list gpus {placed.gpus}")
        if placed.nodes and placed.nodes != [placed.node]:
            raise ValueError(f"one-node devices {text!r} but nodes {placed.nodes}")
        one_node = [GpuId(placed.node, i) for i in indices]
        _check_by_node(placed, one_node)
        return one_node
    gpus: list[GpuId] = []
    run_nodes: list[str] = []
    for run in text.split(RUN_SEPARATOR):
        node, _, devices = run.partition(NODE_SEPARATOR)
        run_nodes.append(node.strip())
        gpus += [GpuId(node.strip(), i) for i in _indices(devices)]
    if run_nodes != list(placed.nodes) or run_nodes[0] != placed.node:
        raise ValueError(f"cuda_visible_devices runs on {run_nodes} but node {placed.node!r}, nodes {placed.nodes}")
    if [g.index for g in gpus if g.node == placed.node][: len(placed.gpus)] != list(placed.gpus):
        raise ValueError(f"gpus {placed.gpus} differ from the first run of {text!r}")
    _check_by_node(placed, gpus)
    return gpus


def _check_by_node(placed: PlacedInstance, gpus: list[GpuId]) -> None:
    """``gpus_by_node``, when given, must list the same GPUs as ``cuda_visible_devices``."""
    if not placed.gpus_by_node:
        return
    expected: dict[str, list[int]] = {}
    for gpu in gpus:
        expected.setdefault(gpu.node, []).append(gpu.index)
    if expected != placed.gpus_by_node:
        raise ValueError(f"gpus_by_node {placed.gpus_by_node} differs from cuda_visible_devices "
                         f"{placed.cuda_visible_devices!r}")


def _indices(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"GPU indices {text!r} are not comma-separated integers") from None
