"""What an engine rule check returns (``RuleViolation``) and the collector the rule functions of
``rules`` and ``pair_rules`` write into (``RuleChecker``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from layoutopt.engines.ref import EngineRef
from layoutopt.engines.schema import EngineData, SourceRef


class RuleViolation(BaseModel):
    """A layout breaks one engine rule: which, with what values, and where the rule is written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    engine: str
    message: str
    values: dict[str, Any]
    source: SourceRef | None = None

    def __str__(self) -> str:
        where = f" ({self.engine} {self.source})" if self.source else f" ({self.engine})"
        return f"{self.rule}: {self.message}{where}"


class RuleChecker:
    """Collects the violations of one engine version's rules (``rules`` and ``pair_rules``)."""

    def __init__(self, ref: EngineRef, data: EngineData) -> None:
        self.ref, self.data = ref, data
        self.found: list[RuleViolation] = []

    def fact(self, name: str):
        return self.data.fact(name)

    def add(self, rule: str, message: str, source: SourceRef | None, **values: Any) -> None:
        self.found.append(RuleViolation(rule=rule, engine=str(self.ref), message=message, values=values,
                                        source=source))
