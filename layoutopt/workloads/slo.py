"""SLO: percentile targets for TTFT and TPOT plus the fraction of requests that must meet both.

Targets map a percentile key (``p50``, ``p90``, ``p99``, ``p99.9``: strictly between p0 and
p100) to a latency in milliseconds, e.g. ``ttft_ms: {p90: 1000}``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from layoutopt.bounds import NotBool

_KEY_FORMAT = "percentile keys look like p50, p90, p99 or p99.9"


def percentile_of_key(key: str) -> float:
    """'p90' -> 90.0; 'p99.9' -> 99.9. Raises ValueError for anything else."""
    if not isinstance(key, str) or key[:1] not in ("p", "P"):
        raise ValueError(_KEY_FORMAT)
    try:
        pct = float(key[1:])
    except ValueError:
        raise ValueError(_KEY_FORMAT) from None
    if not 0 < pct < 100:
        raise ValueError(f"percentile must be strictly between p0 and p100 ({_KEY_FORMAT})")
    return pct


def _percentile_key(key: Any) -> str:
    percentile_of_key(key)
    return key.lower()


PercentileKey = Annotated[str, BeforeValidator(_percentile_key)]
LatencyTargetMs = Annotated[float, NotBool, Field(gt=0, allow_inf_nan=False)]


def _one_key_per_percentile(targets: Any) -> Any:
    """Refuse ``{p90: .., P90: ..}`` (or ``p90`` and ``p90.0``): both name one percentile."""
    if isinstance(targets, dict):
        seen: dict[float, Any] = {}
        for key in targets:
            try:
                pct = percentile_of_key(key)
            except ValueError:
                continue  # the key validator reports it
            if pct in seen:
                raise ValueError(f"{seen[pct]!r} and {key!r} name the same percentile; give it once")
            seen[pct] = key
    return targets


Targets = Annotated[dict[PercentileKey, LatencyTargetMs], BeforeValidator(_one_key_per_percentile)]


class SLO(BaseModel):
    """Latency targets, e.g. ``ttft_ms: {p90: 1000}``, ``tpot_ms: {p90: 30}``, ``attainment: 0.9``."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    ttft_ms: Targets = Field(
        description="percentile -> time to first token target in ms"
    )
    tpot_ms: Targets = Field(
        description="percentile -> time per output token target in ms"
    )
    attainment: Annotated[float, NotBool] = Field(default=0.9, gt=0, le=1, description="fraction of requests that must meet both")

    @field_validator("ttft_ms", "tpot_ms")
    @classmethod
    def _sorted_targets(cls, targets: dict[str, float]) -> dict[str, float]:
        if not targets:
            raise ValueError("give at least one percentile target, e.g. {p90: 1000}")
        return dict(sorted(targets.items(), key=lambda kv: percentile_of_key(kv[0])))

    @staticmethod
    def percentile_fraction(key: str) -> float:
        """'p90' -> 0.90."""
        return percentile_of_key(key) / 100.0

    @property
    def strictest_ttft(self) -> tuple[float, float]:
        """(quantile in (0,1), target in ms) of the TTFT target with the highest percentile."""
        key = max(self.ttft_ms, key=percentile_of_key)
        return self.percentile_fraction(key), self.ttft_ms[key]

    @property
    def strictest_tpot(self) -> tuple[float, float]:
        """(quantile in (0,1), target in ms) of the TPOT target with the highest percentile."""
        key = max(self.tpot_ms, key=percentile_of_key)
        return self.percentile_fraction(key), self.tpot_ms[key]
