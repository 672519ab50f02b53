"""Which checkpoint a pool serves, and whether the engine must quantize it at load time.

A pool whose weight precision is the published checkpoint's serves the catalog id as is. Otherwise
a pre-quantized checkpoint from ``data/checkpoints.yaml`` is served (the engine reads its
quantization config); failing that, FP8 is quantized online (``--quantization fp8``) and FP4,
which no engine quantizes at load time, needs the user's ``--model-id``.
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.schemas import Precision


class Checkpoint(BaseModel):
    """One pre-quantized checkpoint of a catalog model, with where it was seen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    precision: Precision
    hf_id: str
    source: str
    recorded: datetime.date
    instruct: bool = False


class Served(BaseModel):
    """What one pool serves: the checkpoint id and the engine's online quantization (or None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_id: str
    online_quantization: Precision | None = None
    note: str | None = None


@lru_cache(maxsize=1)
def checkpoints() -> tuple[Checkpoint, ...]:
    text = (resources.files("layoutopt.report") / "data" / "checkpoints.yaml").read_text()
    return tuple(Checkpoint.model_validate(row) for row in yaml.safe_load(text)["checkpoints"])


def served_checkpoint(model_name: str, base_hf_id: str, checkpoint_precision: Precision, precision: Precision,
                      user_model_id: str | None) -> Served:
    """The checkpoint of ``model_name`` a pool at ``precision`` serves.

    ``user_model_id`` (``--model-id``) other than the catalog's own id wins: the user names the
    checkpoint, and the engine reads whatever quantization it carries.
    """
    if user_model_id and user_model_id.lower() != base_hf_id.lower():
        return Served(hf_id=user_model_id, note=f"--model-id {user_model_id}: layoutopt assumes it stores "
                      f"{precision} weights, as the plan does")
    if precision == checkpoint_precision:
        return Served(hf_id=base_hf_id)
    for row in checkpoints():
        if row.model == model_name and row.precision == precision:
            note = (f"{row.hf_id} quantizes the instruct-tuned release of {model_name}" if row.instruct else None)
            return Served(hf_id=row.hf_id, note=note)
    if precision == "fp8":
        return Served(hf_id=base_hf_id, online_quantization="fp8")
    if precision == "bf16":
        raise InputError("pools[].precision", precision, f"{checkpoint_precision}: {model_name} publishes "
                         f"{checkpoint_precision} weights, and engines do not dequantize a checkpoint to bf16",
                         "pass --model-id with the id of a bf16 checkpoint")
    raise InputError("pools[].precision", precision,
                     f"a precision with a checkpoint: {model_name} publishes {checkpoint_precision} weights and "
                     f"layoutopt knows no {precision} checkpoint of it (engines do not quantize to {precision} at "
                     "load time)", f"pass --model-id with the id of a {precision} checkpoint of {model_name}")
