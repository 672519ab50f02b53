"""Schemas of the generated engine data (``data/<engine>-<version>.yaml``).

The files are written by ``scripts/refresh_engine_data.py`` from the engines' wheels; these
frozen models only validate and query them. Every fact and flag carries the file and line inside
the wheel it was read from (``SourceRef``), so a rule can say where it comes from.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceRef(_Frozen):
    """A line of an engine release: path inside the wheel and 1-based line number."""

    file: str
    line: int = Field(ge=1)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class EngineFact(_Frozen):
    """One fact the planner depends on, as read from the engine's source."""

    value: Any
    source: SourceRef
    quote: str = Field(description="the source line's text")
    note: str = Field(description="what the statement means for a deployment")


class EngineFlag(_Frozen):
    """One command-line flag: its long name, aliases, type, default and choices."""

    name: str
    aliases: tuple[str, ...] = ()
    type: str | None = None
    default: Any = None
    choices: tuple[Any, ...] | None = None
    action: str | None = None
    boolean_optional: bool = Field(default=False, description="argparse BooleanOptionalAction: --x and --no-x")
    source: SourceRef

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every spelling the parser accepts (``--no-x`` for boolean-optional flags)."""
        names = (self.name, *self.aliases)
        if self.boolean_optional:
            names += tuple("--no-" + n[2:] for n in names if n.startswith("--"))
        return names


class QuantizationMethod(_Frozen):
    """A ``--quantization`` choice and the lowest compute capability (x10) its config accepts."""

    method: str
    min_capability: int | None = Field(default=None, description="e.g. 89 for 8.9; None where no config states one")
    source: SourceRef


class _FlagLookup:
    """Flag queries of a model with a ``flags`` tuple (a release, a router or benchmark program)."""

    flags: tuple[EngineFlag, ...]

    @cached_property
    def _by_spelling(self) -> dict[str, EngineFlag]:
        # Built once: the search checks tens of thousands of layouts against one release.
        index: dict[str, EngineFlag] = {}
        for flag in self.flags:
            for spelling in flag.spellings:
                index.setdefault(spelling, flag)
        return index

    def flag(self, name: str) -> EngineFlag | None:
        """The flag spelled ``name`` (long name or alias), or None when this version lacks it."""
        return self._by_spelling.get(name)

    def has_flag(self, name: str) -> bool:
        return self.flag(name) is not None

    @property
    def flag_names(self) -> frozenset[str]:
        """Every accepted spelling of every flag."""
        return frozenset(self._by_spelling)


class ProgramFlags(_FlagLookup, _Frozen):
    """A program emit writes a command for (a router, a benchmark): how it starts and the flags it accepts."""

    program: tuple[str, ...] = Field(description="argv prefix, e.g. ('vllm', 'bench', 'serve')")
    flags: tuple[EngineFlag, ...]


class RouterData(_Frozen):
    """Flags of one router release (vllm-router, sglang-router), read from its wheel."""

    package: str
    version: str
    generated: str
    wheel: str
    wheel_sha256: str
    launcher: ProgramFlags


class EngineData(_FlagLookup, _Frozen):
    """Flags, facts and quantization methods of one engine version."""

    engine: str
    version: str
    generated: str = Field(description="date the file was generated (YYYY-MM-DD)")
    wheel: str = Field(description="file name of the wheel it was read from")
    wheel_sha256: str
    facts: dict[str, EngineFact]
    quantization_methods: tuple[QuantizationMethod, ...]
    flags: tuple[EngineFlag, ...]
    bench: ProgramFlags | None = Field(default=None, description="the engine's serving benchmark (vllm bench "
                                       "serve, SGLang's benchmark.serving) and its flags")

    def fact(self, name: str) -> EngineFact | None:
        return self.facts.get(name)

    def quantization(self, method: str) -> QuantizationMethod | None:
        return next((q for q in self.quantization_methods if q.method == method), None)
