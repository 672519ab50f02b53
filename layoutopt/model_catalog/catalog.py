"""The built-in model catalog and the loader of user ``config.json`` files.

``data/models.yaml`` maps catalog names to HuggingFace configs shipped in ``data/hf_configs/``.
A model is asked for by catalog name (``qwen3-32b``), by HuggingFace id or alias
(``Qwen/Qwen3-32B``, any case), or by the path of a ``config.json`` (or of the directory holding
one). Nothing is read at import; files are read on first use and cached.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.errors import InputError, unknown_name_error
from layoutopt.io_safe import parse_json_text, read_text, load_package_yaml
from layoutopt.model_catalog.hf_import import spec_from_hf_config
from layoutopt.model_catalog.spec import ModelSpec

_DATA_PACKAGE = "layoutopt.model_catalog"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CheckpointVariant(_Frozen):
    """Another published checkpoint of an entry's architecture (e.g. its FP8 release)."""

    hf_id: str
    config: str = Field(description="file name under data/hf_configs/")
    source: str


class CatalogEntry(_Frozen):
    """One row of ``data/models.yaml``."""

    name: str = Field(description="catalog name, lower case, e.g. 'qwen3-32b'")
    config: str = Field(description="file name under data/hf_configs/")
    hf_id: str
    source: str
    aliases: tuple[str, ...] = ()
    variants: tuple[CheckpointVariant, ...] = ()


class _Catalog(_Frozen):
    models: tuple[CatalogEntry, ...]


@lru_cache(maxsize=1)
def catalog_entries() -> tuple[CatalogEntry, ...]:
    """The rows of the built-in catalog, in file order."""
    text = resources.files(_DATA_PACKAGE).joinpath("data", "models.yaml").read_text(encoding="utf-8")
    return _Catalog.model_validate(load_package_yaml(text)).models


@lru_cache(maxsize=1)
def _lookup() -> dict[str, tuple[str, str]]:
    """Lower-cased catalog name, HF id, alias or bare repo name -> (catalog name, HF id to report)."""
    table: dict[str, tuple[str, str]] = {}
    bare: dict[str, tuple[str, str]] = {}
    for entry in catalog_entries():
        hf_ids = (entry.hf_id, *entry.aliases, *(v.hf_id for v in entry.variants))
        table[entry.name.lower()] = (entry.name, entry.hf_id)
        for hf_id in hf_ids:
            table[hf_id.lower()] = (entry.name, hf_id)
            # 'Llama-3.1-70B-Instruct' without the organisation resolves too.
            bare.setdefault(hf_id.rsplit("/", 1)[-1].lower(), (entry.name, hf_id))
    return bare | table


def is_catalog_model(name: str) -> bool:
    """Whether ``name`` is a catalog name, HuggingFace id or alias of a built-in model (any case)."""
    return name.strip().lower() in _lookup()


def catalog_names() -> list[str]:
    """Catalog names of the built-in models, in file order."""
    return [entry.name for entry in catalog_entries()]


def _read_config(path: Path, shown: str) -> dict:
    """A parsed config.json through the shared reader: size, UTF-8, duplicate keys, finite numbers."""
    try:
        text = read_text(path, "model", "config.json file")
    except InputError as error:
        raise InputError("model", shown, error.allowed, error.hint) from None
    return parse_json_text(text, "model", shown)


@lru_cache(maxsize=None)
def _built_in(name: str, hf_id: str) -> ModelSpec:
    """The spec of catalog entry ``name`` as published under ``hf_id`` (its own, an alias or a variant)."""
    entry = next(e for e in catalog_entries() if e.name == name)
    config_file, source = entry.config, entry.source
    for variant in entry.variants:
        if variant.hf_id == hf_id:
            config_file, source = variant.config, variant.source
    resource = resources.files(_DATA_PACKAGE).joinpath("data", "hf_configs", config_file)
    config = _read_config(Path(str(resource)), f"built-in {config_file}")
    return spec_from_hf_config(config, name=name, hf_id=hf_id, source=source)


def list_models() -> list[ModelSpec]:
    """Specs of every built-in model, in catalog order."""
    return [_built_in(entry.name, entry.hf_id) for entry in catalog_entries()]


def model_from_config_file(path: str | Path) -> ModelSpec:
    """The spec of a user ``config.json`` (or of a directory holding one), named after its folder."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "config.json"
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    config = _read_config(path, str(path))
    return spec_from_hf_config(config, name=name, hf_id=None, source=f"file {path}")


def get_model(name_or_path: str) -> ModelSpec:
    """A built-in model by catalog name, HuggingFace id or alias (any case), or a config.json path.

    Raises ``InputError`` naming the closest catalog names when nothing matches, and naming the
    file when a path cannot be read or parsed.
    """
    key = name_or_path.strip()
    found = _lookup().get(key.lower())
    if found is not None:
        return _built_in(*found)
    path = Path(key).expanduser()
    if key.lower().endswith(".json") or path.exists():
        return model_from_config_file(path)
    error = unknown_name_error("model", name_or_path, catalog_names())
    raise InputError(
        "model", name_or_path, f"{error.allowed}; or a HuggingFace id of one, or a path to a config.json", error.hint
    )
