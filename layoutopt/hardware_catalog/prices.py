"""User price files: override the built-in $/GPU-hour of any GPU.

File shape (YAML; every price in US dollars per GPU-hour)::

    as_of: "2026-06"              # optional default for the rows below; otherwise "undated"
    source: "ACME contract 2026"  # optional default; otherwise the file path
    prices:
      H100: 2.10                  # shorthand: typical = low = high = 2.10
      h200-sxm:                   # full form; names and aliases match case-insensitively
        typical_usd_per_hour: 3.00
        low_usd_per_hour: 2.50    # optional, defaults to typical
        high_usd_per_hour: 3.60   # optional, defaults to typical
        as_of: "2026-06-15"       # optional, defaults to the file's as_of
        source: "quote #1234"     # optional, defaults to the file's source

``load_prices`` returns ``{canonical GPU name: GpuPrice}``; ``with_prices`` applies such a
mapping to GPU rows. Bad entries raise ``InputError`` naming the file, the GPU and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from layoutopt.errors import InputError
from layoutopt.hardware_catalog.loaders import builtin_gpus, dates_to_text, read_yaml, resolve_gpu, row_error
from layoutopt.hardware_catalog.schemas import GpuPrice, GpuSpec

_TOP_KEYS = {"as_of", "source", "prices"}


def load_prices(path: str | Path, gpus: Sequence[GpuSpec] | None = None) -> dict[str, GpuPrice]:
    """Read a prices file; keys are resolved against ``gpus`` (default: the built-in catalog)."""
    path = Path(path)
    gpus = list(builtin_gpus()) if gpus is None else gpus
    data = dates_to_text(read_yaml(path, "prices file"))
    if not isinstance(data, dict) or "prices" not in data or set(data) - _TOP_KEYS:
        raise InputError(
            str(path), type(data).__name__ if not isinstance(data, dict) else sorted(data),
            "a mapping with 'prices:' (GPU name -> $/GPU-hour or a price mapping) and optional 'as_of:', 'source:'",
        )
    entries = data["prices"]
    if not isinstance(entries, dict) or not entries:
        raise InputError(f"{path}: prices", entries, "a non-empty mapping of GPU name -> price")
    defaults = {"as_of": str(data.get("as_of", "undated")), "source": str(data.get("source", path))}
    prices: dict[str, GpuPrice] = {}
    for name, entry in entries.items():
        where = f"prices.{name}"
        gpu = resolve_gpu(str(name), gpus, field=f"{path}: {where}")
        if gpu.name in prices:
            raise InputError(f"{path}: {where}", name, f"one entry per GPU; {gpu.name} is already priced")
        prices[gpu.name] = _price_from_entry(path, where, entry, defaults, name)
    return prices


def _price_from_entry(path: Path, where: str, entry: object, defaults: dict[str, str], name: object) -> GpuPrice:
    if isinstance(entry, bool) or not isinstance(entry, (int, float, dict)):
        raise InputError(f"{path}: {where}", entry, "a number ($/GPU-hour) or a mapping with typical_usd_per_hour")
    if not isinstance(entry, dict):
        entry = {"typical_usd_per_hour": entry}
    typical = entry.get("typical_usd_per_hour")
    row = {
        **defaults,
        "low_usd_per_hour": typical,
        "high_usd_per_hour": typical,
        **{key: str(value) if key in ("as_of", "source") else value for key, value in entry.items()},
    }
    try:
        return GpuPrice.model_validate(row)
    except ValidationError as error:
        raise row_error(path, where, error, name) from None


def with_prices(gpus: Sequence[GpuSpec], prices: Mapping[str, GpuPrice]) -> list[GpuSpec]:
    """Copies of ``gpus`` with the prices of ``prices`` in place; keys are GPU names or aliases."""
    resolved: dict[str, GpuPrice] = {}
    for name, price in prices.items():
        canonical = resolve_gpu(name, gpus, field="prices").name
        if canonical in resolved:
            raise InputError("prices", name, f"one price per GPU; {canonical} is already priced")
        resolved[canonical] = price
    return [g.model_copy(update={"price": resolved[g.name]}) if g.name in resolved else g for g in gpus]
