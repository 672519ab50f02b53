"""Budget strings: which GPUs, how many, and at most how many dollars per hour.

Grammar (case-insensitive, spaces allowed around tokens)::

    budget := term (('+' | ',') term)*
    term   := COUNT 'x' GPU        32xH100, 32 x h100, 8*B200, 8×MI300X
            | GPU                  one default node of that GPU (H100 -> 8, GB200 -> one 4-GPU tray)
            | '$' AMOUNT '/' UNIT  $400/h, $400/hr, $400 / hour
            | AMOUNT 'usd' '/' UNIT   400usd/h, 400 USD/hr
    UNIT   := h | hr | hrs | hour | hours

Amounts are plain numbers without thousands separators (',' separates terms). A type may have
at most ``MAX_GPUS`` (1,000,000) GPUs and a dollar cap at most ``MAX_BUDGET_USD_PER_HOUR``
($1,000,000,000/h): far above any cluster, and within the solver's integer range.

``+`` and ``,`` mean the same: GPUs of each listed type are available up to that count and
the solver picks how many to use. A type listed twice adds up. At most one dollar cap.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from layoutopt.bounds import MAX_GPUS
from layoutopt.errors import InputError
from layoutopt.hardware_catalog.catalog import HardwareCatalog, load_catalog

EXPECTED_FORMS = (
    "expected terms joined by '+' or ',': COUNTxGPU (32xH100), GPU (H100 = one default node), "
    "$AMOUNT/h ($400/h, 400usd/hr); e.g. '16xH100+16xH200', '64xH100+$300/h'"
)

MAX_BUDGET_USD_PER_HOUR = 1e9

_AMOUNT = r"\d+(?:\.\d+)?|\.\d+"
_PER_HOUR = r"\s*/\s*(?:h|hr|hrs|hour|hours)"
_DOLLAR_RE = re.compile(
    rf"^(?:\$\s*(?P<prefixed>{_AMOUNT})\s*(?:usd)?|(?P<suffixed>{_AMOUNT})\s*(?:usd|\$)){_PER_HOUR}$", re.I
)
_DOLLAR_NO_RATE_RE = re.compile(r"^(?:\$\s*[\d.]+\s*(?:usd)?|[\d.]+\s*(?:usd|\$))$", re.I)
_COUNT_RE = re.compile(r"^(?P<count>[-+]?\d*\.?\d+)\s*[x×*]\s*(?P<gpu>\S.*)$", re.I)


class Budget(BaseModel):
    """What a plan may use: GPUs available per type and an optional dollar cap per hour.

    ``gpu_counts`` maps canonical GPU names to the number of GPUs available (each >= 1), in the
    order the text names them; it is empty when only a dollar cap is given, in which case any
    catalog GPU may be used. ``max_usd_per_hour`` caps the plan's cost in US dollars per hour
    (None: no cap). ``text`` is the string the budget was parsed from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    gpu_counts: dict[str, int] = Field(default_factory=dict)
    max_usd_per_hour: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD_PER_HOUR)
    text: str = ""

    @model_validator(mode="after")
    def _check(self) -> "Budget":
        bad = {name: count for name, count in self.gpu_counts.items()
               if isinstance(count, bool) or not 1 <= count <= MAX_GPUS}
        if bad:
            raise ValueError(f"GPU counts must be whole numbers in 1..{MAX_GPUS:,}; got {bad}")
        if not self.gpu_counts and self.max_usd_per_hour is None:
            raise ValueError("a budget needs GPU counts, a dollar cap, or both")
        return self

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """Canonical names of the GPU types the budget names (empty for a dollar cap alone)."""
        return tuple(self.gpu_counts)

    @property
    def num_gpus(self) -> int:
        """Total GPUs available over all named types."""
        return sum(self.gpu_counts.values())

    def describe(self) -> str:
        """Short human text, e.g. '32 x H100-SXM + 16 x H200-SXM, at most $300.00/h'."""
        parts = []
        if self.gpu_counts:
            parts.append(" + ".join(f"{count} x {name}" for name, count in self.gpu_counts.items()))
        else:
            parts.append("any catalog GPUs")
        if self.max_usd_per_hour is not None:
            parts.append(f"at most ${self.max_usd_per_hour:,.2f}/h")
        return ", ".join(parts)


def parse_budget(text: str, catalog: HardwareCatalog | None = None) -> Budget:
    """Parse a budget string (grammar in the module docstring) against ``catalog``.

    ``catalog`` defaults to the built-in one. Raises ``InputError(field='budget')`` naming the bad
    term, with the expected forms and, for a misspelled GPU, the closest known names.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("budget", text, EXPECTED_FORMS)
    catalog = load_catalog() if catalog is None else catalog
    counts: dict[str, int] = {}
    cap_usd_per_hour: float | None = None
    for raw in re.split(r"[+,]", text):
        term = raw.strip()
        if not term:
            _fail(text, "empty term (two separators in a row, or one at an end)")
        dollars = _parse_dollars(text, term)
        if dollars is not None:
            if cap_usd_per_hour is not None:
                _fail(text, f"term {term!r}: a second dollar cap; give at most one")
            cap_usd_per_hour = dollars
            continue
        name, count = _parse_gpu_term(text, term, catalog)
        counts[name] = counts.get(name, 0) + count
        if counts[name] > MAX_GPUS:
            _fail(text, f"{name} adds up to {counts[name]:,} GPUs; at most {MAX_GPUS:,} GPUs of one type")
    return Budget(gpu_counts=counts, max_usd_per_hour=cap_usd_per_hour, text=text)


def _parse_dollars(text: str, term: str) -> float | None:
    """The cap in $/h if ``term`` is a dollar term, None if it is not one."""
    match = _DOLLAR_RE.match(term)
    if match is None:
        if _DOLLAR_NO_RATE_RE.match(term) or "$" in term or "usd" in term.lower():
            _fail(text, f"term {term!r}: a dollar cap needs a positive amount per hour, e.g. $400/h")
        return None
    amount = float(match.group("prefixed") or match.group("suffixed"))
    if amount <= 0:
        _fail(text, f"term {term!r}: the dollar cap must be positive")
    if amount > MAX_BUDGET_USD_PER_HOUR:
        _fail(text, f"term {term!r}: the dollar cap may be at most ${MAX_BUDGET_USD_PER_HOUR:,.0f}/h")
    return amount


def _parse_gpu_term(text: str, term: str, catalog: HardwareCatalog) -> tuple[str, int]:
    """(canonical GPU name, count) of a 'COUNTxGPU' or bare 'GPU' term."""
    match = _COUNT_RE.match(term)
    if match is None:
        if term[0].isdigit() or term[0] in "+-.":
            _fail(text, f"term {term!r}: write COUNTxGPU, e.g. 32xH100")
        gpu_text, count = term, None
    else:
        gpu_text, count_text = match.group("gpu").strip(), match.group("count")
        if not re.fullmatch(r"\+?\d+", count_text) or int(count_text) < 1:
            _fail(text, f"term {term!r}: the GPU count must be a positive integer, got {count_text}")
        count = int(count_text)
        if count > MAX_GPUS:
            _fail(text, f"term {term!r}: at most {MAX_GPUS:,} GPUs of one type, got {count_text}")
    try:
        gpu = catalog.gpu(gpu_text)
    except InputError as error:
        allowed = f"term {term!r}: unknown GPU {gpu_text!r}; {error.allowed}"
        raise InputError("budget", text, allowed, error.hint) from None
    if count is None:
        count = catalog.default_node_type(gpu.name).gpus_per_node
    return gpu.name, count


def _fail(text: str, problem: str) -> None:
    raise InputError("budget", text, f"{problem}; {EXPECTED_FORMS}")
