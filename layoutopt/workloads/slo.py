"""SLO: percentile targets for TTFT and TPOT plus the fraction of requests that must meet both."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _check_targets(targets: dict[str, float]) -> dict[str, float]:
    if not targets:
        raise ValueError("give at least one percentile target, e.g. {p90: 1000}")
    for key, value in targets.items():
        if not key.startswith("p"):
            raise ValueError(f"percentile key {key!r} must look like p50, p90, p99 or p99.9")
        try:
            pct = float(key[1:])
        except ValueError:
            raise ValueError(f"percentile key {key!r} must look like p50, p90, p99 or p99.9") from None
        if not 0 < pct < 100:
            raise ValueError(f"percentile {key!r} must be strictly between p0 and p100")
        if not value > 0:
            raise ValueError(f"target for {key} must be > 0 ms, got {value}")
    return dict(sorted(targets.items(), key=lambda kv: float(kv[0][1:])))


class SLO(BaseModel):
    """Latency targets, e.g. ``ttft_ms: {p90: 1000}``, ``tpot_ms: {p90: 30}``, ``attainment: 0.9``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_ms: dict[str, float] = Field(description="percentile -> time to first token target in ms")
    tpot_ms: dict[str, float] = Field(description="percentile -> time per output token target in ms")
    attainment: float = Field(default=0.9, gt=0, le=1, description="fraction of requests that must meet both")

    _check_ttft = field_validator("ttft_ms")(_check_targets)
    _check_tpot = field_validator("tpot_ms")(_check_targets)

    @staticmethod
    def percentile_fraction(key: str) -> float:
        """'p90' -> 0.90."""
        return float(key[1:]) / 100.0

    @property
    def strictest_ttft(self) -> tuple[float, float]:
        """(quantile in (0,1), target in ms) of the TTFT target with the highest percentile."""
        key = max(self.ttft_ms, key=lambda k: float(k[1:]))
        return self.percentile_fraction(key), self.ttft_ms[key]

    @property
    def strictest_tpot(self) -> tuple[float, float]:
        key = max(self.tpot_ms, key=lambda k: float(k[1:]))
        return self.percentile_fraction(key), self.tpot_ms[key]
