"""ErrorBand: how far measured latencies typically fall from predicted ones.

Taken from calibration residuals of the same engine, GPU generation and mode (colocated or
disaggregated): the built-in profiles' bands come from the reference measurements, a profile
written by ``layoutopt calibrate`` carries its own. Ratios are measured / predicted, so a
prediction of 20 ms with ``ratio_p10`` 0.9 and ``ratio_p90`` 1.3 says "measured runs of this kind
land between 18 and 26 ms in 8 of 10 cases".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BandMode = Literal["colocated", "disaggregated"]


class LatencyBand(BaseModel):
    """Spread of measured / predicted of one latency metric over calibration rows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ratio_p10: float = Field(gt=0, description="10th percentile of measured / predicted")
    ratio_p50: float = Field(gt=0, description="median of measured / predicted (1 = unbiased)")
    ratio_p90: float = Field(gt=0, description="90th percentile of measured / predicted")
    mdape_pct: float = Field(ge=0, description="median absolute % error of the prediction")
    within_20_pct: float = Field(ge=0, le=100, description="share of rows predicted within 20 %")

    def shown(self) -> str:
        """e.g. 'x0.85-1.30 (MdAPE 12 %)': the p10-p90 range of measured / predicted."""
        return f"x{self.ratio_p10:.2f}-{self.ratio_p90:.2f} (MdAPE {self.mdape_pct:.0f} %)"


class ErrorBand(BaseModel):
    """Expected error of predicted TTFT and TPOT for one engine, GPU generation and mode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str
    gpu_generation: str
    mode: BandMode
    num_rows: int = Field(ge=0, description="calibration rows the band is taken from")
    ttft: LatencyBand | None = Field(default=None, description="None when too few rows exist: error unknown")
    tpot: LatencyBand | None = None
    basis: str = Field(description="which rows and residuals: profile, file, in-sample or k-fold held-out")

    def shown(self) -> str:
        """One line for the terminal."""
        head = f"{self.engine} {self.gpu_generation} {self.mode}"
        if self.ttft is None or self.tpot is None:
            return f"{head}: error unknown, {self.num_rows} calibration rows ({self.basis})"
        return (f"{head}: measured/predicted p10-p90 TTFT {self.ttft.shown()}, TPOT {self.tpot.shown()}; "
                f"{self.num_rows} rows, {self.basis}")
