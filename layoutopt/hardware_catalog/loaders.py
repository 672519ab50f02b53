"""Reading catalog YAML files into validated rows, and merging user rows over the built-ins.

File shapes (the built-in ``data/gpus.yaml`` and ``data/nodes.yaml`` are examples)::

    gpus:                       # list of GpuSpec rows; a bare list is accepted too
      - name: H100-SXM          # a row whose name (or alias) is a built-in GPU replaces it whole
        vendor: nvidia
        bf16_tflops: 989
        ...
        source: "where the numbers come from"

    node_types:                 # list of NodeType rows; a bare list is accepted too
      - name: my-h100-box       # a row with a built-in name replaces it; others are added
        gpu: h100               # any GPU name or alias; stored as the canonical name
        ...
        default_for_gpu: true   # clears the built-in default of that GPU

Any bad row raises ``InputError`` naming the file, the row index and name, and the field.
Nothing here runs at import; the built-in rows are read once on first use and cached.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from layoutopt import io_safe
from layoutopt.errors import InputError, closest_matches
from layoutopt.hardware_catalog.schemas import GpuSpec, NodeType

DATA_DIR = Path(__file__).parent / "data"
BUILTIN_GPUS_PATH = DATA_DIR / "gpus.yaml"
BUILTIN_NODES_PATH = DATA_DIR / "nodes.yaml"

Row = TypeVar("Row", bound=BaseModel)


def normalize_name(name: str) -> str:
    """Key for case-insensitive matching: lower case, with spaces, '_' and '-' removed."""
    return "".join(ch for ch in name.strip().lower() if ch not in " _-")


def read_yaml(path: str | Path, field: str) -> Any:
    """Parse a catalog YAML file through the shared reader (:func:`layoutopt.io_safe.read_yaml`)."""
    return io_safe.read_yaml(path, field)


def dates_to_text(value: Any) -> Any:
    # YAML turns an unquoted 2026-05-01 into a date; the schemas keep dates as text.
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()[:10]
    if isinstance(value, dict):
        return {k: dates_to_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dates_to_text(v) for v in value]
    return value


def row_error(path: Path, where: str, error: ValidationError, label: object = None) -> InputError:
    """An ``InputError`` for the first problem of one row, listing the other fields at fault.

    A problem of a single field names that field and its value; one that concerns the whole row
    (a cross-field rule) names the row and shows ``label`` (its name) as the value.
    """
    problems = error.errors()
    first = problems[0]
    field = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    others = sorted({".".join(str(p) for p in item["loc"]) for item in problems[1:]} - {field, ""})
    hint = f"also check: {', '.join(others)}" if others else None
    if not field:
        return InputError(f"{path}: {where}", label if label is not None else where, message, hint)
    return InputError(f"{path}: {where}.{field}", first.get("input"), message, hint)


def read_rows(path: str | Path, key: str, model: type[Row]) -> list[Row]:
    """Validate the rows under ``key`` (or a bare list) of a YAML file as ``model`` instances."""
    path = Path(path)
    data = dates_to_text(read_yaml(path, f"{key} file"))
    if isinstance(data, dict) and set(data) == {key}:
        data = data[key]
    if not isinstance(data, list):
        raise InputError(str(path), type(data).__name__, f"a mapping with one key '{key}:' holding a list of rows")
    rows = []
    for index, raw in enumerate(data):
        where = f"{key}[{index}]"
        if not isinstance(raw, dict):
            raise InputError(f"{path}: {where}", raw, "a mapping of field: value")
        if isinstance(raw.get("name"), str):
            where += f" ({raw['name']})"
        try:
            rows.append(model.model_validate(raw))
        except ValidationError as error:
            raise row_error(path, where, error, raw.get("name")) from None
    return rows


def gpu_alias_index(gpus: Sequence[GpuSpec], origin: str = "catalog") -> dict[str, str]:
    """Map each normalized name and alias to its canonical GPU name; collisions are errors."""
    index: dict[str, str] = {}
    for gpu in gpus:
        for alias in (gpu.name, *gpu.aliases):
            key = normalize_name(alias)
            owner = index.setdefault(key, gpu.name)
            if owner != gpu.name:
                raise InputError(
                    f"{origin}: gpus ({gpu.name}).aliases", alias,
                    f"a name not already used by GPU {owner}",
                    f"to change {owner}, give the row name: {owner}",
                )
    return index


def unknown_gpu_error(name: str, gpus: Sequence[GpuSpec], field: str = "gpu") -> InputError:
    """``InputError`` for an unknown GPU name, suggesting canonical names via names and aliases."""
    index = gpu_alias_index(gpus)
    suggested: list[str] = []
    for key in closest_matches(normalize_name(name), index, n=6):
        if index[key] not in suggested:
            suggested.append(index[key])
    if not suggested:
        suggested = closest_matches(name, (g.name for g in gpus))
    known = ", ".join(sorted(g.name for g in gpus))
    hint = f"did you mean {', '.join(suggested[:3])}?" if suggested else None
    return InputError(field, name, f"known GPUs: {known}", hint)


def resolve_gpu(name: str, gpus: Sequence[GpuSpec], field: str = "gpu") -> GpuSpec:
    """The GPU whose canonical name or alias matches ``name`` (case, ' ', '_', '-' ignored)."""
    canonical = gpu_alias_index(gpus).get(normalize_name(name))
    if canonical is None:
        raise unknown_gpu_error(name, gpus, field)
    return next(g for g in gpus if g.name == canonical)


def merge_gpus(base: Sequence[GpuSpec], extra: Sequence[GpuSpec], origin: str) -> list[GpuSpec]:
    """``base`` with rows of ``extra`` replacing same-named rows (name or alias) or appended."""
    base_index = gpu_alias_index(base)
    by_name = {g.name: g for g in base}
    replacements: list[GpuSpec] = []
    for row in extra:
        canonical = base_index.get(normalize_name(row.name))
        if canonical is None:
            replacements.append(row)
            continue
        # A replacing row keeps the built-in name and aliases so existing spellings still resolve.
        aliases = dict.fromkeys((*by_name[canonical].aliases, *row.aliases, row.name))
        aliases.pop(canonical, None)
        replacements.append(row.model_copy(update={"name": canonical, "aliases": tuple(aliases)}))
    _check_unique((g.name for g in replacements), origin, "gpus")
    replaced = {g.name for g in replacements}
    merged = [g for g in base if g.name not in replaced] + replacements
    gpu_alias_index(merged, origin)
    return merged


def merge_node_types(
    base: Sequence[NodeType], extra: Sequence[NodeType], gpus: Sequence[GpuSpec], origin: str
) -> list[NodeType]:
    """Merge node rows, canonicalize their GPU names, and keep one default per GPU."""
    _check_unique((n.name for n in extra), origin, "node_types")
    resolved = []
    for index, node in enumerate(extra):
        gpu = resolve_gpu(node.gpu, gpus, f"{origin}: node_types[{index}] ({node.name}).gpu")
        resolved.append(node.model_copy(update={"gpu": gpu.name}))
    new_defaults = {n.gpu for n in resolved if n.default_for_gpu}
    replaced = {normalize_name(n.name) for n in resolved}
    kept = [
        n.model_copy(update={"default_for_gpu": False}) if n.gpu in new_defaults else n
        for n in base if normalize_name(n.name) not in replaced
    ]
    merged = kept + resolved
    check_node_types(merged, gpus, origin)
    return merged


def check_node_types(nodes: Sequence[NodeType], gpus: Sequence[GpuSpec], origin: str) -> None:
    """Every node names a known GPU, and no GPU has two default node types."""
    known = {g.name for g in gpus}
    defaults: dict[str, str] = {}
    for node in nodes:
        if node.gpu not in known:
            raise unknown_gpu_error(node.gpu, gpus, f"{origin}: node_types ({node.name}).gpu")
        if node.default_for_gpu and defaults.setdefault(node.gpu, node.name) != node.name:
            raise InputError(
                f"{origin}: node_types ({node.name}).default_for_gpu", True,
                f"at most one default node type per GPU; {defaults[node.gpu]} is already the default for {node.gpu}",
            )


def _check_unique(names: Iterable[str], origin: str, key: str) -> None:
    seen: set[str] = set()
    for name in names:
        if normalize_name(name) in seen:
            raise InputError(f"{origin}: {key}", name, "each name (or a spelling of it) at most once per file")
        seen.add(normalize_name(name))


@lru_cache(maxsize=1)
def builtin_gpus() -> tuple[GpuSpec, ...]:
    """The built-in GPU rows (read on first call, then cached)."""
    gpus = read_rows(BUILTIN_GPUS_PATH, "gpus", GpuSpec)
    _check_unique((g.name for g in gpus), str(BUILTIN_GPUS_PATH), "gpus")
    gpu_alias_index(gpus, str(BUILTIN_GPUS_PATH))
    return tuple(gpus)


@lru_cache(maxsize=1)
def builtin_node_types() -> tuple[NodeType, ...]:
    """The built-in node rows (read on first call, then cached)."""
    nodes = read_rows(BUILTIN_NODES_PATH, "node_types", NodeType)
    _check_unique((n.name for n in nodes), str(BUILTIN_NODES_PATH), "node_types")
    check_node_types(nodes, builtin_gpus(), str(BUILTIN_NODES_PATH))
    return tuple(nodes)


def load_gpus(path: str | Path | None = None) -> list[GpuSpec]:
    """Built-in GPU rows, with the rows of the user file ``path`` (if any) merged over them."""
    if path is None:
        return list(builtin_gpus())
    return merge_gpus(builtin_gpus(), read_rows(path, "gpus", GpuSpec), str(path))


def load_node_types(path: str | Path | None = None, gpus: Sequence[GpuSpec] | None = None) -> list[NodeType]:
    """Built-in node rows, with the rows of the user file ``path`` (if any) merged over them."""
    gpus = list(builtin_gpus()) if gpus is None else gpus
    extra = [] if path is None else read_rows(path, "node_types", NodeType)
    return merge_node_types(builtin_node_types(), extra, gpus, str(path or BUILTIN_NODES_PATH))
