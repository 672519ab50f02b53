"""Read the generated engine data files shipped in ``layoutopt/engines/data`` (cached)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


from layoutopt.engines.schema import EngineData, RouterData
from layoutopt.io_safe import load_package_yaml

_DATA_PACKAGE = "layoutopt.engines"
# The router release emit writes for each engine's disaggregated and load-balanced pools
# (pypi.org/project/vllm-router/0.1.17/, pypi.org/project/sglang-router/0.3.2/).
ROUTER_RELEASES: dict[str, tuple[str, str]] = {"vllm": ("vllm-router", "0.1.17"), "sglang": ("sglang-router", "0.3.2")}


def _data_dir():
    return resources.files(_DATA_PACKAGE) / "data"


@lru_cache(maxsize=None)
def available_versions(engine: str) -> tuple[str, ...]:
    """Versions of ``engine`` with a data file, newest first."""
    prefix = f"{engine}-"
    versions = [p.name[len(prefix):-len(".yaml")] for p in _data_dir().iterdir()
                if p.name.startswith(prefix) and p.name.endswith(".yaml")]
    return tuple(sorted(versions, key=_version_key, reverse=True))


def _version_key(version: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in version.split("."))


@lru_cache(maxsize=None)
def load_engine_data(engine: str, version: str) -> EngineData:
    """The flags, facts and quantization methods of ``engine`` at ``version``.

    Raises FileNotFoundError when no data file exists (``parse_engine_ref`` checks first and
    raises the user-facing InputError).
    """
    path = _data_dir() / f"{engine}-{version}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no engine data for {engine}=={version} in layoutopt/engines/data")
    return EngineData.model_validate(load_package_yaml(path.read_text(encoding="utf-8")))


def all_engine_data() -> list[EngineData]:
    """Every engine version with data, by engine then newest version first."""
    return [load_engine_data(engine, version) for engine in ("vllm", "sglang")
            for version in available_versions(engine)]


@lru_cache(maxsize=None)
def load_router_data(package: str, version: str) -> RouterData:
    """The flags of router ``package`` at ``version`` (``data/routers/<package>-<version>.yaml``)."""
    path = _data_dir() / "routers" / f"{package}-{version}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no router data for {package}=={version} in layoutopt/engines/data/routers")
    return RouterData.model_validate(load_package_yaml(path.read_text(encoding="utf-8")))


def router_data(engine: str) -> RouterData:
    """The router release emit writes for ``engine`` ('vllm' or 'sglang')."""
    return load_router_data(*ROUTER_RELEASES[engine])
