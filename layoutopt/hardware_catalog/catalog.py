"""Public loaders of the hardware catalog: GPUs, node types and prices.

The built-in rows live in ``data/gpus.yaml`` and ``data/nodes.yaml`` (each with its source);
they are read on first use and cached, never at import. User files of the same row shape
replace built-in rows of the same name (or alias) and add new ones: ``gpus_path`` for GPU rows,
``nodes_path`` for node types, ``prices_path`` for prices (shapes in :mod:`.loaders` and
:mod:`.prices`). GPU names match case-insensitively with spaces, '_' and '-' ignored, so
``h100``, ``H100 SXM5`` and ``h100_sxm`` all mean ``H100-SXM``; unknown names raise
``InputError`` suggesting the closest known names.

Use :func:`load_catalog` to resolve many names against one set of files; the module-level
functions (``get_gpu`` ...) are shortcuts that read the files on each call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from layoutopt.errors import InputError, unknown_name_error
from layoutopt.hardware_catalog.loaders import load_gpus, load_node_types, normalize_name, resolve_gpu
from layoutopt.hardware_catalog.prices import load_prices, with_prices
from layoutopt.hardware_catalog.schemas import GpuSpec, NodeType

PathLike = str | Path | None

__all__ = [
    "HardwareCatalog",
    "default_node_type",
    "get_gpu",
    "get_node_type",
    "list_gpus",
    "list_node_types",
    "load_catalog",
    "load_prices",
    "with_prices",
]


class HardwareCatalog:
    """An immutable set of GPU rows and node types with name resolution.

    Build it with :func:`load_catalog`; it performs no I/O itself.
    """

    __slots__ = ("_gpus", "_node_types")

    def __init__(self, gpus: Sequence[GpuSpec], node_types: Sequence[NodeType]):
        self._gpus = tuple(gpus)
        self._node_types = tuple(node_types)

    def __repr__(self) -> str:
        return f"HardwareCatalog({len(self._gpus)} GPUs, {len(self._node_types)} node types)"

    @property
    def gpus(self) -> tuple[GpuSpec, ...]:
        return self._gpus

    @property
    def node_types(self) -> tuple[NodeType, ...]:
        return self._node_types

    @property
    def gpu_names(self) -> tuple[str, ...]:
        """Canonical GPU names in catalog order."""
        return tuple(g.name for g in self._gpus)

    def gpu(self, name: str) -> GpuSpec:
        """The GPU called ``name`` (canonical name or alias, any case and separators)."""
        return resolve_gpu(name, self._gpus)

    def node_type(self, name: str) -> NodeType:
        """The node type called ``name`` (case, spaces, '_' and '-' ignored)."""
        key = normalize_name(name)
        for node in self._node_types:
            if normalize_name(node.name) == key:
                return node
        raise unknown_name_error("node_type", name, (n.name for n in self._node_types))

    def node_types_for(self, gpu_name: str) -> tuple[NodeType, ...]:
        """All node types built from the GPU ``gpu_name`` (alias allowed)."""
        canonical = self.gpu(gpu_name).name
        return tuple(n for n in self._node_types if n.gpu == canonical)

    def default_node_type(self, gpu_name: str) -> NodeType:
        """The node type a budget naming only ``gpu_name`` expands to.

        The row flagged ``default_for_gpu``, or the only node type of that GPU.
        """
        canonical = self.gpu(gpu_name).name
        candidates = self.node_types_for(canonical)
        flagged = [n for n in candidates if n.default_for_gpu]
        if flagged:
            return flagged[0]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise InputError("gpu", gpu_name, f"a GPU with a node type; add a node_types row with gpu: {canonical}")
        names = ", ".join(n.name for n in candidates)
        raise InputError("gpu", gpu_name, f"one node type of {canonical} marked default_for_gpu: true (have {names})")


def generic_node_type(gpu: GpuSpec) -> NodeType:
    """A node of a GPU no node type names (a row of a ``--gpus`` file): 8 GPUs (or one scale-up
    domain, when the domain does not divide into or across 8-GPU nodes) sharing the GPU row's
    scale-up domain, one NIC of the row's bandwidth per GPU."""
    domain = gpu.scaleup_domain_gpus
    per_node = 8 if domain % 8 == 0 or 8 % domain == 0 else domain
    return NodeType(name=f"generic-{gpu.name.lower()}-{per_node}", gpu=gpu.name, gpus_per_node=per_node,
                    nvlink_domain_gpus=domain, nics_per_node=per_node,
                    nic_gbit_per_s=gpu.nic_gbit_per_s, default_for_gpu=True,
                    source=f"derived from the {gpu.name} GPU row: no node_types row names this GPU")


def load_catalog(
    gpus_path: PathLike = None, nodes_path: PathLike = None, prices_path: PathLike = None
) -> HardwareCatalog:
    """Built-in catalog with optional user GPU rows, node rows and prices merged over it."""
    gpus = load_gpus(gpus_path)
    if prices_path is not None:
        gpus = with_prices(gpus, load_prices(prices_path, gpus))
    nodes = load_node_types(nodes_path, gpus)
    # a GPU row of a --gpus file that no node type names gets a generic node, so a plain budget works
    named = {node.gpu for node in nodes}
    return HardwareCatalog(gpus, [*nodes, *(generic_node_type(gpu) for gpu in gpus if gpu.name not in named)])


def list_gpus(path: PathLike = None) -> list[GpuSpec]:
    """All GPU rows: the built-ins, with the rows of the user file ``path`` merged over them."""
    return load_gpus(path)


def get_gpu(name: str, path: PathLike = None) -> GpuSpec:
    """The GPU called ``name`` (alias, any case); ``path`` is an optional user GPU file."""
    return resolve_gpu(name, load_gpus(path))


def list_node_types(path: PathLike = None, gpus_path: PathLike = None) -> list[NodeType]:
    """All node types: built-ins merged with the user file ``path``; GPUs from ``gpus_path``."""
    return load_node_types(path, load_gpus(gpus_path))


def get_node_type(name: str, path: PathLike = None, gpus_path: PathLike = None) -> NodeType:
    """The node type called ``name`` (case, spaces, '_' and '-' ignored)."""
    return load_catalog(gpus_path, path).node_type(name)


def default_node_type(gpu_name: str, path: PathLike = None, gpus_path: PathLike = None) -> NodeType:
    """The node type a budget naming only ``gpu_name`` expands to (``hgx-h100-8`` for H100)."""
    return load_catalog(gpus_path, path).default_node_type(gpu_name)
