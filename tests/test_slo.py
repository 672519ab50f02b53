"""SLO model and slo.yaml loading: round trips and one clear error per bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from layoutopt.errors import InputError
from layoutopt.workloads.loaders import load_slo, slo_from_dict
from layoutopt.workloads.slo import SLO

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_example_slo_file():
    slo = load_slo(EXAMPLES / "slo.yaml")
    assert slo == SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}, attainment=0.9)
    assert slo.strictest_ttft == (0.9, 1000.0)
    assert slo.strictest_tpot == (0.9, 30.0)


def test_strict_example_uses_highest_percentile():
    slo = load_slo(EXAMPLES / "slo-strict.yaml")
    assert slo.attainment == 0.99
    assert slo.strictest_ttft == (0.99, 600.0)
    assert slo.strictest_tpot == (0.99, 25.0)


def test_targets_sorted_and_keys_normalized():
    slo = SLO(ttft_ms={"p99.9": 3000, "P50": 200}, tpot_ms={"p90": 30})
    assert list(slo.ttft_ms) == ["p50", "p99.9"]
    assert slo.strictest_ttft == pytest.approx((0.999, 3000.0))


def test_round_trip_through_dict():
    slo = SLO(ttft_ms={"p90": 800, "p99": 2000}, tpot_ms={"p50": 20}, attainment=0.95)
    assert slo_from_dict(slo.model_dump()) == slo
    assert slo_from_dict({"slo": slo.model_dump()}) == slo


def test_default_attainment():
    assert slo_from_dict({"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}).attainment == 0.9


GOOD = {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}, "attainment": 0.9}


@pytest.mark.parametrize(
    ("change", "field", "value_text", "allowed_text"),
    [
        ({"ttft_ms": {"p150": 1000}}, "slo.ttft_ms.p150", "'p150'", "between p0 and p100"),
        ({"ttft_ms": {"p0": 1000}}, "slo.ttft_ms.p0", "'p0'", "between p0 and p100"),
        ({"tpot_ms": {"p100": 30}}, "slo.tpot_ms.p100", "'p100'", "between p0 and p100"),
        ({"ttft_ms": {"90": 1000}}, "slo.ttft_ms.90", "'90'", "p50, p90"),
        ({"ttft_ms": {"p90": -5}}, "slo.ttft_ms.p90", "-5", "greater than 0"),
        ({"tpot_ms": {"p90": 0}}, "slo.tpot_ms.p90", "0", "greater than 0"),
        ({"tpot_ms": {"p90": "30ms"}}, "slo.tpot_ms.p90", "'30ms'", "valid number"),
        ({"ttft_ms": {}}, "slo.ttft_ms", "{}", "at least one percentile"),
        ({"ttft_ms": 1000}, "slo.ttft_ms", "1000", "{p90: 1000}"),
        ({"attainment": 90}, "slo.attainment", "90", "less than or equal to 1"),
        ({"attainment": 0}, "slo.attainment", "0", "greater than 0"),
        ({"ttft_msec": {"p90": 1}}, "slo.ttft_msec", "'ttft_msec'", "unknown key"),
    ],
)
def test_bad_slo_names_field_value_and_rule(change, field, value_text, allowed_text):
    with pytest.raises(InputError) as caught:
        slo_from_dict({**GOOD, **change})
    message = str(caught.value)
    assert caught.value.field == field
    assert message.startswith(f"{field}: got {value_text};")
    assert allowed_text in message


def test_unknown_key_suggests_closest():
    with pytest.raises(InputError, match="did you mean ttft_ms"):
        slo_from_dict({**GOOD, "ttft_mss": {"p90": 1}})


def test_missing_target():
    with pytest.raises(InputError, match=r"^slo\.tpot_ms: got nothing; required"):
        slo_from_dict({"ttft_ms": {"p90": 1000}})


def test_not_a_mapping():
    with pytest.raises(InputError, match=r"^slo: got \[1, 2\]; a mapping"):
        slo_from_dict([1, 2])


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file") as caught:
        load_slo(tmp_path / "nope.yaml")
    assert caught.value.field == "slo"


def test_directory(tmp_path):
    with pytest.raises(InputError, match="not a directory"):
        load_slo(tmp_path)


def test_malformed_yaml_reports_line(tmp_path):
    path = tmp_path / "slo.yaml"
    path.write_text("ttft_ms: {p90: 1000}\ntpot_ms: {p90: 30\nattainment: 0.9\n")
    with pytest.raises(InputError, match=r"valid YAML \(line \d+, column \d+") as caught:
        load_slo(path)
    assert caught.value.value == str(path)


def test_duplicate_key_reports_line(tmp_path):
    path = tmp_path / "slo.yaml"
    path.write_text("ttft_ms: {p90: 1000}\ntpot_ms: {p90: 30}\nttft_ms: {p90: 500}\n")
    with pytest.raises(InputError, match=r"line 3, column 1: key 'ttft_ms' appears twice"):
        load_slo(path)


def test_empty_file(tmp_path):
    path = tmp_path / "slo.yaml"
    path.write_text("# nothing here\n")
    with pytest.raises(InputError, match="the file is empty"):
        load_slo(path)
