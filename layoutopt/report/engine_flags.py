"""Engine versions layoutopt writes launch files for, and the flags each version really has.

Each supported version has a flag list in ``data/<engine>_<version>_flags.txt``: one long flag a
line with the ``file:line`` of the engine's source (inside the release's wheel) that defines it,
``#`` comments carrying the version and the wheel it was read from. Every command the launch
writers produce is checked against the list of the version it names, so no flag is invented.

An engine is named ``vllm`` (its default version) or ``vllm==0.13.0`` (a pinned one).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError

Engine = Literal["vllm", "sglang"]
ENGINES: tuple[Engine, ...] = ("vllm", "sglang")
# The version each engine's files target by default: the current releases (vLLM 0.33.0,
# 2026-11; SGLang 0.5.23, 2026-10). Older ones stay selectable for pinned clusters.
ENGINE_VERSIONS: dict[str, str] = {"vllm": "0.33.0", "sglang": "0.5.23"}
SUPPORTED_VERSIONS: dict[str, tuple[str, ...]] = {"vllm": ("0.33.0", "0.13.0"), "sglang": ("0.5.23", "0.5.3")}
ENGINE_PROGRAMS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "serve"),
    "sglang": ("python3", "-m", "sglang.launch_server"),
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EngineRelease(_Frozen):
    """One engine at one version, e.g. vLLM 0.33.0."""

    engine: Engine
    version: str

    @property
    def spec(self) -> str:
        return f"{self.engine}=={self.version}"

    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split("."))

    def at_least(self, version: str) -> bool:
        return self.version_tuple() >= tuple(int(part) for part in version.split("."))


class EngineFlags(_Frozen):
    """The valid long flags of one engine version (flag -> defining ``file:line``) and the wheel read."""

    engine: Engine
    version: str
    flags: frozenset[str]
    defined_at: dict[str, str]
    sources: tuple[str, ...]

    @property
    def file_name(self) -> str:
        return flags_file_name(self.engine, self.version)


def flags_file_name(engine: str, version: str) -> str:
    return f"{engine}_{version}_flags.txt"


def parse_engine(text: str, field: str = "--engine") -> EngineRelease:
    """``vllm`` / ``sglang`` (default version) or ``vllm==0.13.0``; InputError naming what is allowed."""
    allowed = "; ".join(f"{e} (= {e}=={SUPPORTED_VERSIONS[e][0]}) or " +
                        " or ".join(f"{e}=={v}" for v in SUPPORTED_VERSIONS[e][1:]) for e in ENGINES)
    name, pinned, version = str(text).strip().partition("==")
    name = name.strip().lower()
    if name not in SUPPORTED_VERSIONS:
        raise InputError(field, text, f"one of: {allowed}")
    version = version.strip() if pinned else ENGINE_VERSIONS[name]
    if version not in SUPPORTED_VERSIONS[name]:
        raise InputError(field, text, f"a version layoutopt has flag data for: {allowed}")
    return EngineRelease(engine=name, version=version)


def as_release(engine: str | EngineRelease) -> EngineRelease:
    return engine if isinstance(engine, EngineRelease) else parse_engine(engine)


@lru_cache(maxsize=None)
def load_engine_flags(engine: str, version: str | None = None) -> EngineFlags:
    """Read the flag list of ``engine`` at ``version`` (default: the version layoutopt targets)."""
    if engine not in ENGINE_VERSIONS:
        raise InputError("--engine", engine, f"one of {', '.join(ENGINES)}")
    version = version or ENGINE_VERSIONS[engine]
    path = resources.files("layoutopt.report") / "data" / flags_file_name(engine, version)
    if not path.is_file():
        raise InputError("engine version", f"{engine} {version}", "no flag list for that version")
    defined_at: dict[str, str] = {}
    sources: list[str] = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith("# source:"):
            sources.append(text.removeprefix("# source:").strip())
        elif text and not text.startswith("#"):
            flag, _, where = text.partition("#")
            defined_at[flag.strip()] = where.strip()
    return EngineFlags(engine=engine, version=version, flags=frozenset(defined_at), defined_at=defined_at,
                       sources=tuple(sources))


def unknown_flags(argv: tuple[str, ...] | list[str], flags: EngineFlags) -> list[str]:
    """The ``--flag`` tokens of ``argv`` (``--flag=value`` included) that the engine lacks."""
    used = [token.split("=", 1)[0] for token in argv if token.startswith("--")]
    return [flag for flag in used if flag not in flags.flags]
