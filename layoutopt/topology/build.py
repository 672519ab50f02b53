"""From a cluster file (or a budget) to a :class:`Cluster`: names, domains, racks and GPU states.

``load_cluster(path)`` reads and validates a file (shape in :mod:`layoutopt.topology.spec`);
``cluster_from_spec`` resolves an already-parsed spec; ``cluster_from_budget`` expands a budget
such as ``32xH100`` into default nodes in one rack. Every bad value raises ``InputError`` whose
field is the path inside the file (``racks[1].nodes[0].type``).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import ValidationError

from layoutopt.errors import InputError, unknown_name_error
from layoutopt.hardware_catalog.budget import Budget
from layoutopt.hardware_catalog.catalog import HardwareCatalog, load_catalog
from layoutopt.hardware_catalog.loaders import normalize_name, read_yaml
from layoutopt.hardware_catalog.schemas import NodeType
from layoutopt.topology.cluster import (
    Cluster,
    ClusterNode,
    GpuId,
    GpuState,
    NvlinkDomain,
    Rack,
)
from layoutopt.topology.spec import (
    ClusterSpec,
    NodeGroupSpec,
    RackSpec,
    UnavailableSpec,
)

GBIT_PER_GB = 8.0


def load_cluster(path: str | Path, catalog: HardwareCatalog | None = None) -> Cluster:
    """Read the cluster file at ``path`` and resolve it against ``catalog`` (built-in by default)."""
    path = Path(path)
    data = read_yaml(path, "cluster")
    if not isinstance(data, dict):
        raise InputError(str(path), type(data).__name__, "a mapping with racks: (see layoutopt.topology.spec)")
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as error:
        raise _spec_error(path, error) from None
    return cluster_from_spec(spec, catalog, origin=str(path))


def _spec_error(path: Path, error: ValidationError) -> InputError:
    first = error.errors()[0]
    field = ""
    for part in first["loc"]:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    message = first["msg"].removeprefix("Value error, ")
    got = first.get("input")
    return InputError(f"{path}: {field or 'cluster'}", got if not isinstance(got, dict) else "{...}", message)


def cluster_from_spec(spec: ClusterSpec, catalog: HardwareCatalog | None = None, origin: str = "cluster") -> Cluster:
    """Resolve node types, name every node, build NVLink domains and racks, mark unavailable GPUs."""
    catalog = load_catalog() if catalog is None else catalog
    inline = _inline_node_types(spec, catalog, origin)
    states = _GpuStates(spec.unavailable, origin)
    nodes: list[ClusterNode] = []
    domains: list[NvlinkDomain] = []
    racks: list[Rack] = []
    gpu_specs = {}
    for r, rack_spec in enumerate(spec.racks):
        rack_nodes: list[ClusterNode] = []
        for g, group in enumerate(rack_spec.nodes):
            where = f"{origin}: racks[{r}].nodes[{g}]"
            node_type = _resolve_node_type(group.type, inline, catalog, f"{where}.type")
            gpu = catalog.gpu(node_type.gpu)
            gpu_specs[gpu.name] = gpu
            names = group.names or [f"{rack_spec.name}-n{len(rack_nodes) + i}" for i in range(group.count)]
            new_nodes, new_domains = _expand_group(rack_spec, group, node_type, gpu.scaleup_gb_per_s, names,
                                                   len(domains), where)
            rack_nodes += new_nodes
            domains += new_domains
        nodes += rack_nodes
        racks.append(_rack(rack_spec, rack_nodes, spec.network.oversubscription))
    _check_unique_nodes(nodes, origin)
    nodes = [n.model_copy(update={"gpu_states": states.of(n)}) for n in nodes]
    states.check_known({n.name: n.num_gpus for n in nodes})
    return Cluster(spec.name, nodes, domains, racks, gpu_specs,
                   spec.network.leaf_latency_us, spec.network.spine_latency_us)


def _inline_node_types(spec: ClusterSpec, catalog: HardwareCatalog, origin: str) -> dict[str, NodeType]:
    resolved: dict[str, NodeType] = {}
    for i, node_type in enumerate(spec.node_types):
        try:
            gpu = catalog.gpu(node_type.gpu)
        except InputError as error:
            raise InputError(f"{origin}: node_types[{i}].gpu", node_type.gpu, error.allowed, error.hint) from None
        key = normalize_name(node_type.name)
        if key in resolved:
            raise InputError(f"{origin}: node_types[{i}].name", node_type.name, "a name not used by another row")
        resolved[key] = node_type.model_copy(update={"gpu": gpu.name})
    return resolved


def _resolve_node_type(name: str, inline: dict[str, NodeType], catalog: HardwareCatalog, field: str) -> NodeType:
    if normalize_name(name) in inline:
        return inline[normalize_name(name)]
    try:
        return catalog.node_type(name)
    except InputError:
        known = [n.name for n in catalog.node_types] + [n.name for n in inline.values()]
        error = unknown_name_error(field, name, known)
        raise InputError(field, name, f"a catalog or inline node type; {error.allowed}", error.hint) from None


def _expand_group(
    rack: RackSpec, group: NodeGroupSpec, node_type: NodeType, scaleup_gb_per_s: float,
    names: list[str], num_domains_before: int, where: str,
) -> tuple[list[ClusterNode], list[NvlinkDomain]]:
    """The nodes of one ``racks[].nodes[]`` entry and the NVLink domains they form."""
    per_node = node_type.gpus_per_node
    nics_per_gpu = group.nics_per_gpu if group.nics_per_gpu is not None else node_type.nics_per_node / per_node
    nic_gbit_per_s = group.nic_gbit_per_s if group.nic_gbit_per_s is not None else node_type.nic_gbit_per_s
    num_nics = min(per_node, math.ceil(per_node * nics_per_gpu - 1e-9))
    nic_gb_per_s_per_gpu = nics_per_gpu * nic_gbit_per_s / GBIT_PER_GB
    nodes_per_domain = node_type.nodes_per_nvlink_domain
    if group.count % nodes_per_domain:
        raise InputError(f"{where}.count", group.count,
                         f"a multiple of {nodes_per_domain}: {node_type.name} nodes form {node_type.nvlink_domain_gpus}-GPU "
                         f"NVLink domains of {nodes_per_domain} nodes")
    domain_gpus = min(node_type.nvlink_domain_gpus, per_node)
    nodes, domains = [], []
    for start in range(0, group.count, nodes_per_domain):
        members = names[start:start + nodes_per_domain]
        if nodes_per_domain > 1:
            domain_names = [f"{rack.name}-nvl{num_domains_before + len(domains)}"]
            gpu_domains = {m: (domain_names[0],) * per_node for m in members}
        else:
            # One node holds one or more domains: the node itself on HGX, each GPU on PCIe boxes.
            parts = per_node // domain_gpus
            (member,) = members
            domain_names = [member] if parts == 1 else [f"{member}/d{k}" for k in range(parts)]
            gpu_domains = {member: tuple(domain_names[i // domain_gpus] for i in range(per_node))}
        for member in members:
            nodes.append(ClusterNode(
                name=member, rack=rack.name, node_type=node_type.name, gpu=node_type.gpu,
                gpu_states=("free",) * per_node, gpu_domains=gpu_domains[member], num_nics=num_nics,
                nic_gb_per_s_per_gpu=nic_gb_per_s_per_gpu,
            ))
        for domain_name in domain_names:
            gpus = tuple(GpuId(m, i) for m in members for i in range(per_node) if gpu_domains[m][i] == domain_name)
            domains.append(NvlinkDomain(name=domain_name, rack=rack.name, gpu=node_type.gpu, gpus=gpus,
                                        nodes=tuple(dict.fromkeys(g.node for g in gpus)),
                                        scaleup_gb_per_s=scaleup_gb_per_s if len(gpus) > 1 else 0.0))
    return nodes, domains


def _rack(spec: RackSpec, nodes: list[ClusterNode], default_ratio: float) -> Rack:
    nic_total_gb_per_s = sum(n.nic_gb_per_s_per_gpu * n.num_gpus for n in nodes)
    if spec.uplink_gbit_per_s is not None:
        uplink_gb_per_s = spec.uplink_gbit_per_s / GBIT_PER_GB
    else:
        ratio = spec.oversubscription if spec.oversubscription is not None else default_ratio
        uplink_gb_per_s = max(nic_total_gb_per_s, 1e-9) / ratio
    return Rack(name=spec.name, nodes=tuple(n.name for n in nodes), num_gpus=sum(n.num_gpus for n in nodes),
                uplink_gb_per_s=uplink_gb_per_s, oversubscription=max(nic_total_gb_per_s, 1e-9) / uplink_gb_per_s)


def _check_unique_nodes(nodes: list[ClusterNode], origin: str) -> None:
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise InputError(f"{origin}: racks[].nodes[].names", node.name, "node names unique over the cluster")
        seen.add(node.name)


class _GpuStates:
    """The ``unavailable`` section applied node by node; down wins over in use."""

    def __init__(self, spec: UnavailableSpec, origin: str):
        self.spec = spec
        self.origin = origin

    def of(self, node: ClusterNode) -> tuple[GpuState, ...]:
        states: list[GpuState] = ["free"] * node.num_gpus
        for field, state in (("gpus_in_use", "in_use"), ("gpus_down", "down")):
            for position, index in enumerate(getattr(self.spec, field).get(node.name, ())):
                if not 0 <= index < node.num_gpus:
                    raise InputError(f"{self.origin}: unavailable.{field}.{node.name}[{position}]", index,
                                     f"a GPU index 0..{node.num_gpus - 1} ({node.name} is a {node.node_type})")
                states[index] = state
        if node.name in self.spec.nodes_down:
            states = ["down"] * node.num_gpus
        return tuple(states)

    def check_known(self, gpus_per_node: dict[str, int]) -> None:
        for position, name in enumerate(self.spec.nodes_down):
            if name not in gpus_per_node:
                raise unknown_name_error(f"{self.origin}: unavailable.nodes_down[{position}]", name, gpus_per_node)
        for field in ("gpus_in_use", "gpus_down"):
            for name in getattr(self.spec, field):
                if name not in gpus_per_node:
                    raise unknown_name_error(f"{self.origin}: unavailable.{field}", name, gpus_per_node)


def cluster_from_budget(budget: Budget, catalog: HardwareCatalog | None = None) -> Cluster:
    """Default nodes of every budgeted GPU type in one rack, GPUs beyond the budget marked in use.

    ``32xH100`` becomes four ``hgx-h100-8`` nodes; ``8xGB200`` one NVL72 (18 trays) of which 8
    GPUs are free, since an NVLink domain larger than a node only exists whole.
    """
    if not budget.gpu_counts:
        raise InputError("budget", budget.text or budget.describe(), "GPU counts to expand into nodes, e.g. 32xH100")
    catalog = load_catalog() if catalog is None else catalog
    groups, in_use = [], {}
    for gpu_name, count in budget.gpu_counts.items():
        node_type = catalog.default_node_type(gpu_name)
        unit_gpus = max(node_type.gpus_per_node, node_type.nvlink_domain_gpus)
        num_nodes = math.ceil(count / unit_gpus) * unit_gpus // node_type.gpus_per_node
        names = [f"{node_type.name}-n{i}" for i in range(num_nodes)]
        groups.append(NodeGroupSpec(type=node_type.name, count=num_nodes, names=names))
        extra = num_nodes * node_type.gpus_per_node - count
        for name in reversed(names):
            taken = min(extra, node_type.gpus_per_node)
            if taken:
                in_use[name] = list(range(node_type.gpus_per_node - taken, node_type.gpus_per_node))
            extra -= taken
    spec = ClusterSpec(name=f"budget {budget.text or budget.describe()}",
                       racks=[RackSpec(name="rack-0", nodes=groups)],
                       unavailable=UnavailableSpec(gpus_in_use=in_use))
    return cluster_from_spec(spec, catalog, origin="budget")
