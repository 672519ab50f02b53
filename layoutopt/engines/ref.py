"""Engine references: ``vllm``, ``vllm==0.13.0``, ``sglang==0.5.23``, ``trtllm``.

The engine name selects the performance-model profile (one per engine); the version selects
the generated flag and rule data. A name without a version means the default version below.
TensorRT-LLM has a performance-model profile only: no wheel data is generated for it, so no
engine rule is checked and no flags are known.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError, unknown_name_error

# The releases layoutopt targets by default (vLLM 0.33.0 of 2026-11, SGLang 0.5.23 of 2026-10).
DEFAULT_VERSIONS: dict[str, str] = {"vllm": "0.33.0", "sglang": "0.5.23"}
# Engines with a performance-model profile but no generated rule data.
PROFILE_ONLY_ENGINES: tuple[str, ...] = ("trtllm",)
ENGINE_NAMES: tuple[str, ...] = ("vllm", "sglang", "trtllm")


class EngineRef(BaseModel):
    """An engine and, for engines with generated data, the version whose rules apply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str | None = None

    @property
    def has_data(self) -> bool:
        return self.name not in PROFILE_ONLY_ENGINES

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}=={self.version}"


def parse_engine_ref(text: "str | EngineRef", field: str = "--engine") -> EngineRef:
    """``'vllm'`` -> vllm==0.33.0; ``'vllm==0.13.0'`` as given; ``'trtllm'`` (profile only).

    Raises InputError for an unknown engine, a version without generated data, or a version
    given for TensorRT-LLM.
    """
    if isinstance(text, EngineRef):
        return text
    raw = str(text).strip()
    name, sep, version = raw.partition("==")
    name, version = name.strip().lower(), version.strip()
    if name not in ENGINE_NAMES:
        raise unknown_name_error(field, name, ENGINE_NAMES)
    if sep and not version:
        raise InputError(field, raw, "write engine==version, e.g. vllm==0.13.0")
    if name in PROFILE_ONLY_ENGINES:
        if version:
            raise InputError(field, raw, f"{name} has a performance-model profile only, without versioned "
                                         f"engine data; write --engine {name}")
        return EngineRef(name=name)
    from layoutopt.engines.loader import available_versions

    versions = available_versions(name)
    version = version or DEFAULT_VERSIONS[name]
    if version not in versions:
        raise InputError(field, raw, f"{name} versions with engine data: {', '.join(versions)}",
                         "scripts/refresh_engine_data.py generates data for another release")
    return EngineRef(name=name, version=version)


def engine_ref_of(engine: object) -> EngineRef | None:
    """The rules reference of what the perf model takes as an engine: a name is parsed strictly
    (InputError for an unknown one); a profile object (a fitted or trial profile, e.g. named
    'vllm~fit') uses its engine's default version, or None when its name is no known engine."""
    if isinstance(engine, (str, EngineRef)):
        return parse_engine_ref(engine)
    name = str(getattr(engine, "name", "")).split("~")[0]
    try:
        return parse_engine_ref(name)
    except InputError:
        return None
