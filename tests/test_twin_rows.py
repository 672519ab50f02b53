"""benchmarks/twin_rows.py: rows the model cannot tell apart, and the error floor their spread sets."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.fit import MeasuredCase
from layoutopt.plan import Layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from twin_rows import architecture_key, floor_errors, spread, summarize, twin_groups  # noqa: E402

_SPECS = {"org/r1": get_model("deepseek-r1"), "org/v3": get_model("deepseek-v3"), "org/llama": get_model("llama-3.1-70b")}


def _case(row_id: str, model_id: str, tpot_ms: float, ttft_ms: float = 100.0, concurrency: float = 4.0) -> MeasuredCase:
    return MeasuredCase(row_id=row_id, engine="trtllm", mode="agg", model_id=model_id, isl=1024, osl=1024,
                        concurrency=concurrency, layout=Layout(tp_size=8, ep_size=8, weight_precision="fp8"),
                        prefill_layout=None, prefill_instances=0, decode_layout=None, decode_instances=0,
                        decode_batch=None, ttft_ms=ttft_ms, tpot_ms=tpot_ms, gpu="B200")


def test_architecture_key_ignores_names_only():
    # DeepSeek-R1 and DeepSeek-V3 share every architecture field; Llama-3.1-70B does not.
    assert architecture_key(_SPECS["org/r1"]) == architecture_key(_SPECS["org/v3"])
    assert architecture_key(_SPECS["org/r1"]) != architecture_key(_SPECS["org/llama"])


def test_twin_groups_pair_same_architecture_and_drop_repeats():
    cases = [
        _case("a", "org/r1", 10.0),
        _case("a-again", "org/r1", 10.0),           # the same run published twice: one measurement
        _case("b", "org/v3", 20.0),                 # same architecture, layout, lengths, load: a twin
        _case("c", "org/v3", 30.0, concurrency=8),  # another concurrency: not a twin
        _case("d", "org/llama", 12.0),              # another architecture: not a twin
    ]
    groups = twin_groups(cases, _SPECS.__getitem__, "tpot")
    assert [[c.row_id for c in g] for g in groups] == [["a", "b"]]
    # Rows equal in TPOT but not in TTFT are twins of TTFT only.
    same_tpot = [_case("e", "org/r1", 10.0, ttft_ms=90.0), _case("f", "org/v3", 10.0, ttft_ms=180.0)]
    assert twin_groups(same_tpot, _SPECS.__getitem__, "tpot") == []
    assert len(twin_groups(same_tpot, _SPECS.__getitem__, "ttft")) == 1


def test_floor_is_the_geometric_mean_error():
    # 10 and 20 ms: the best single prediction is sqrt(200) = 14.14 ms, 41.4 % and 29.3 % off.
    errors = floor_errors([10.0, 20.0])
    assert errors == pytest.approx([(math.sqrt(200) / 10 - 1) * 100, (1 - math.sqrt(200) / 20) * 100])
    assert spread([10.0, 20.0]) == pytest.approx(1.0)
    groups = twin_groups([_case("a", "org/r1", 10.0), _case("b", "org/v3", 20.0)], _SPECS.__getitem__)
    s = summarize(groups)[("B200", "trtllm")]
    assert (s["groups"], s["rows"]) == (1, 2)
    assert s["median_spread_pct"] == pytest.approx(100.0)
    assert s["median_floor_ape_pct"] == pytest.approx(sum(errors) / 2)


def test_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="tpot"):
        twin_groups([_case("a", "org/r1", 10.0)], _SPECS.__getitem__, "itl")

