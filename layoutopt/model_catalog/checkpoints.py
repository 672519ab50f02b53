"""Which checkpoints of a model exist, per weight precision (the data the search and emit share).

A weight precision is available as a checkpoint when one of these holds it, searched in this order:

1. the user's own ids (``ModelSpec.user_checkpoints``, ``solve --checkpoint fp4=ORG/NAME``);
2. the model's own release (``hf_id`` at ``checkpoint_precision``);
3. the catalog entry's release and variants (``data/models.yaml``: e.g. Qwen/Qwen3-32B-FP8);
4. the pre-quantized checkpoints of ``data/checkpoints.yaml``, each with where it was seen.

Whether the engine can instead quantize 16-bit weights at load time is a fact of the engine
version (``layoutopt.engines.quantization``), not of the model.
"""

from __future__ import annotations

import datetime
import re
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.schemas import Precision
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.io_safe import load_package_yaml

CHECKPOINT_PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "fp4", "int4", "mxfp4")
DATA_FILE = "layoutopt/model_catalog/data/checkpoints.yaml"
# The same pattern as report/names.py checks every id that reaches a launch file against.
_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
Origin = Literal["user", "release", "catalog", "prequantized"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PrequantizedCheckpoint(_Frozen):
    """One row of ``data/checkpoints.yaml``: a pre-quantized checkpoint of a catalog model."""

    model: str
    precision: Precision
    hf_id: str
    source: str
    recorded: datetime.date
    instruct: bool = False


class Checkpoint(_Frozen):
    """A checkpoint a pool can serve: its precision, id, where layoutopt knows it from."""

    precision: Precision
    hf_id: str | None = None
    origin: Origin
    source: str
    instruct: bool = False


class _File(_Frozen):
    checkpoints: tuple[PrequantizedCheckpoint, ...]


@lru_cache(maxsize=1)
def prequantized_checkpoints() -> tuple[PrequantizedCheckpoint, ...]:
    """The rows of ``data/checkpoints.yaml``, in file order."""
    text = resources.files("layoutopt.model_catalog").joinpath("data", "checkpoints.yaml").read_text(encoding="utf-8")
    return _File.model_validate(load_package_yaml(text)).checkpoints


def _catalog_releases(model_name: str) -> tuple[Checkpoint, ...]:
    """The catalog entry's own release and its variants, at the precision of each one's config.json."""
    from layoutopt.model_catalog.catalog import _built_in, catalog_entries

    entry = next((e for e in catalog_entries() if e.name == model_name), None)
    if entry is None:
        return ()
    found = []
    for hf_id, source in [(entry.hf_id, entry.source), *((v.hf_id, v.source) for v in entry.variants)]:
        found.append(Checkpoint(precision=_built_in(entry.name, hf_id).checkpoint_precision, hf_id=hf_id,
                                origin="catalog", source=f"layoutopt/model_catalog/data/models.yaml ({source})"))
    return tuple(found)


@lru_cache(maxsize=256)
def available_checkpoints(model: ModelSpec) -> tuple[Checkpoint, ...]:
    """Every checkpoint of ``model`` layoutopt knows, the user's first (see the module docstring)."""
    rows = [Checkpoint(precision=p, hf_id=hf_id, origin="user", source=f"--checkpoint {p}={hf_id}")
            for p, hf_id in model.user_checkpoints]
    rows.append(Checkpoint(precision=model.checkpoint_precision, hf_id=model.hf_id, origin="release",
                           source=model.source))
    rows += _catalog_releases(model.name)
    rows += [Checkpoint(precision=r.precision, hf_id=r.hf_id, origin="prequantized", instruct=r.instruct,
                        source=f"{DATA_FILE} ({r.source})")
             for r in prequantized_checkpoints() if r.model == model.name]
    return tuple(_first_of_each(rows))


def _first_of_each(rows: list[Checkpoint]) -> list[Checkpoint]:
    """``rows`` without later repeats of the same (precision, id)."""
    seen: set[tuple[str, str | None]] = set()
    kept = []
    for row in rows:
        if (row.precision, row.hf_id) not in seen:
            seen.add((row.precision, row.hf_id))
            kept.append(row)
    return kept


def checkpoint_for(model: ModelSpec, precision: str) -> Checkpoint | None:
    """The first known checkpoint of ``model`` storing ``precision`` weights, or None."""
    return next((c for c in available_checkpoints(model) if c.precision == precision), None)


def parse_checkpoint_option(text: str, field: str = "--checkpoint") -> tuple[Precision, str]:
    """``'fp4=nvidia/Qwen3-32B-FP4'`` -> ("fp4", "nvidia/Qwen3-32B-FP4"); InputError otherwise."""
    precision, sep, hf_id = str(text).partition("=")
    precision, hf_id = precision.strip().lower(), hf_id.strip()
    if not sep or precision not in CHECKPOINT_PRECISIONS:
        raise InputError(field, text, f"PRECISION=ORG/NAME with PRECISION one of {', '.join(CHECKPOINT_PRECISIONS)}",
                         "e.g. --checkpoint fp4=nvidia/Llama-3.1-70B-Instruct-FP4")
    if not _HF_ID.fullmatch(hf_id):
        raise InputError(field, text, "a HuggingFace id after '=' (letters, digits, . _ - and one /)",
                         "e.g. --checkpoint fp4=nvidia/Llama-3.1-70B-Instruct-FP4")
    return precision, hf_id  # type: ignore[return-value]


def with_user_checkpoints(model: ModelSpec, checkpoints: "list[str] | tuple[str, ...]",
                          field: str = "--checkpoint") -> ModelSpec:
    """``model`` with the user's ``PRECISION=ID`` checkpoints added (one per precision, the last wins)."""
    if not checkpoints:
        return model
    pairs = dict(model.user_checkpoints)
    for text in checkpoints:
        precision, hf_id = parse_checkpoint_option(text, field)
        pairs[precision] = hf_id
    return model.model_copy(update={"user_checkpoints": tuple(pairs.items())})
