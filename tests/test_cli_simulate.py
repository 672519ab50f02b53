"""``layoutopt simulate``: tables of (arguments, expected output, exit status)."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded
from test_simulator_plan import make_plan, make_pool


@pytest.fixture()
def files(tmp_path, monkeypatch):
    """A plan, a workload, an SLO and two broken plans in the working directory."""
    monkeypatch.chdir(tmp_path)
    plan = make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=4.0)
    (tmp_path / "plan.json").write_text(json.dumps(plan.model_dump(mode="json"), indent=2))
    (tmp_path / "short.yaml").write_text("input_tokens: {fixed: 200}\noutput_tokens: {fixed: 20}\n")
    (tmp_path / "strict.yaml").write_text("ttft_ms: {p90: 1}\ntpot_ms: {p90: 1}\n")
    (tmp_path / "broken.json").write_text('{"schema_version": 1, "pools": [')
    (tmp_path / "wrong.json").write_text('{"schema_version": 1}')
    return tmp_path


# (arguments, text the output must contain, exit status)
CASES = [
    (["simulate", "--help"], "--duration-s", 0),
    (["simulate", "plan.json", "--requests", "500"], "meets the SLO", 0),
    (["simulate", "plan.json", "--requests", "500"], "TTFT", 0),
    (["simulate", "plan.json", "--requests", "500"], "prefill H100-SXM tp2-bf16", 0),
    (["simulate", "plan.json", "--requests", "500", "--rate", "60"], "misses the SLO", 0),
    (["simulate", "plan.json", "--duration-s", "50", "--rate", "2"], "of 100 requests", 0),
    (["simulate", "plan.json", "--requests", "300", "--workload", "short.yaml"], "meets the SLO", 0),
    (["simulate", "plan.json", "--requests", "300", "--slo", "strict.yaml"], "attainment", 0),
    (["simulate", "plan.json", "--requests", "300", "--seed", "5", "--format", "json"], '"seed": 5', 0),
    (["simulate", "plan.json", "--requests", "300", "--histogram", "h.png"], "histogram written to h.png", 0),
    (["simulate"], "Missing argument 'PLAN'", 2),
    (["simulate", "plan.json", "--rate", "-1"], "Invalid value for '--rate'", 2),
    (["simulate", "plan.json", "--format", "yaml"], "Invalid value for '--format'", 2),
]


@pytest.mark.parametrize("args,expected,status", CASES, ids=[" ".join(c[0]) + f"~{c[1]}" for c in CASES])
def test_simulate_command(files, args, expected, status):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status, result.output
    assert expected in result.output


def test_json_output_is_the_result_schema(files):
    result = CliRunner().invoke(cli, ["simulate", "plan.json", "--requests", "400", "--format", "json"])
    data = json.loads(result.output)
    assert data["num_requests"] == 400 and data["rate_rps"] == 4.0
    assert set(data["ttft_ms"]) == {"p50", "p90", "p99"}
    assert [p["role"] for p in data["pools"]] == ["prefill", "decode"]
    assert 0.0 <= data["slo_attainment"] <= 1.0


def test_histogram_file_is_written(files):
    CliRunner().invoke(cli, ["simulate", "plan.json", "--requests", "300", "--histogram", "out/h.png"])
    assert (files / "out" / "h.png").read_bytes()[:4] == b"\x89PNG"


# (arguments, text on stderr, exit status) through the console entry point's error handling.
GUARDED_ERRORS = [
    (["simulate", "missing.json"], "missing.json", 2),
    (["simulate", "broken.json"], "error: plan: got 'broken.json'", 2),
    (["simulate", "wrong.json"], "error: plan.", 2),
    (["simulate", "plan.json", "--requests", "10", "--duration-s", "5"], "not both", 2),
    (["simulate", "plan.json", "--requests", "5"], "at least 20 requests", 2),
    (["simulate", "plan.json", "--workload", "nope.yaml"], "nope.yaml", 2),
    (["simulate", "plan.json", "--histogram", "h.txt"], "--histogram: got 'h.txt'", 2),
    # A denormal rate's mean gap 1 / rate is inf: refused at the option, not an internal error.
    (["simulate", "plan.json", "--requests", "200", "--rate", "5e-324"], "--rate", 2),
]


@pytest.mark.parametrize("args,expected,status", GUARDED_ERRORS)
def test_bad_inputs_are_one_line_with_status_2(files, monkeypatch, capsys, args, expected, status):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == status
    captured = capsys.readouterr()
    assert expected in captured.err
    assert captured.err.strip().count("\n") == 0 and "Traceback" not in captured.err


def test_rate_bounds_are_stated_and_inclusive():
    from layoutopt.bounds import MAX_RATE_RPS, MIN_RATE_RPS, check_rate_rps
    from layoutopt.errors import InputError

    assert check_rate_rps("--rate", MIN_RATE_RPS) == MIN_RATE_RPS
    assert check_rate_rps("--rate", MAX_RATE_RPS) == MAX_RATE_RPS
    for bad in (5e-324, MIN_RATE_RPS / 2, 0.0, MAX_RATE_RPS * 2):
        with pytest.raises(InputError, match="from 1e-06 to 1e"):
            check_rate_rps("--rate", bad)
