"""Engine versions layoutopt writes launch files for, and the flags each version really has.

The flags (with choices and the ``file:line`` defining them) come from the generated engine data
of :mod:`layoutopt.engines` (``layoutopt/engines/data/<engine>-<version>.yaml``, read from the
release's wheel by ``scripts/refresh_engine_data.py``). Every command the launch writers produce
is checked against the data of the version it names: no flag is invented, and a flag with
choices gets one of them.

An engine is named ``vllm`` (its default version) or ``vllm==0.13.0`` (a pinned one).
"""

from __future__ import annotations

from functools import lru_cache
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
    choices: dict[str, tuple[str, ...]] = {}
    sources: tuple[str, ...]

    @property
    def file_name(self) -> str:
        return flags_file_name(self.engine, self.version)


def flags_file_name(engine: str, version: str) -> str:
    """The generated engine data file, relative to the package."""
    return f"layoutopt/engines/data/{engine}-{version}.yaml"


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
    """The flags of ``engine`` at ``version`` (default: the version layoutopt targets)."""
    from layoutopt.engines import load_engine_data

    if engine not in ENGINE_VERSIONS:
        raise InputError("--engine", engine, f"one of {', '.join(ENGINES)}")
    version = version or ENGINE_VERSIONS[engine]
    if version not in SUPPORTED_VERSIONS[engine]:
        raise InputError("engine version", f"{engine} {version}", "no flag data for that version")
    data = load_engine_data(engine, version)
    source = f"https://pypi.org/project/{engine}/{version}/ ({data.wheel}, sha256 {data.wheel_sha256})"
    return _flag_table(engine, version, data.flags, source)


def _flag_table(engine: str, version: str, flags, source: str) -> EngineFlags:
    defined_at = {spelling: str(flag.source) for flag in flags for spelling in flag.spellings}
    choices = {spelling: tuple(str(c) for c in flag.choices) for flag in flags if flag.choices
               for spelling in flag.spellings}
    return EngineFlags(engine=engine, version=version, flags=frozenset(defined_at), defined_at=defined_at,
                       choices=choices, sources=(source,))


@lru_cache(maxsize=None)
def load_bench_flags(engine: str, version: str) -> tuple[tuple[str, ...], EngineFlags]:
    """(program argv, flags) of the serving benchmark shipped in ``engine`` ``version``'s wheel."""
    from layoutopt.engines import load_engine_data

    data = load_engine_data(engine, version)
    if data.bench is None:
        raise FileNotFoundError(f"no benchmark flags in the data of {engine}=={version}; rerun "
                                "scripts/refresh_engine_data.py")
    source = f"https://pypi.org/project/{engine}/{version}/ ({data.wheel}, sha256 {data.wheel_sha256})"
    return data.bench.program, _flag_table(engine, version, data.bench.flags, source)


@lru_cache(maxsize=None)
def load_router_flags(engine: str) -> tuple[str, str, tuple[str, ...], EngineFlags]:
    """(package, version, program argv, flags) of the router release emit writes for ``engine``."""
    from layoutopt.engines.loader import router_data

    data = router_data(engine)
    source = f"https://pypi.org/project/{data.package}/{data.version}/ ({data.wheel}, sha256 {data.wheel_sha256})"
    return data.package, data.version, data.launcher.program, _flag_table(
        engine, data.version, data.launcher.flags, source)


def bad_choices(argv: tuple[str, ...] | list[str], flags: EngineFlags) -> list[str]:
    """``--flag value`` pairs of ``argv`` whose value is not one of the flag's choices."""
    bad = []
    for i, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        name, eq, value = token.partition("=")
        if name not in flags.choices:
            continue
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if value not in flags.choices[name]:
            bad.append(f"{name} {value}")
    return bad


def unknown_flags(argv: tuple[str, ...] | list[str], flags: EngineFlags) -> list[str]:
    """The ``--flag`` tokens of ``argv`` (``--flag=value`` included) that the engine lacks."""
    used = [token.split("=", 1)[0] for token in argv if token.startswith("--")]
    return [flag for flag in used if flag not in flags.flags]
