"""Bounded, finite CLI inputs and the exit statuses: 0 plan, 1 infeasible, 2 bad input, 3 internal error.

Tables of (arguments, text on stderr, exit status) through the console entry point's error
handling, as a user sees them: one line, never a traceback.
"""

from __future__ import annotations

import json
import math

import pytest

from layoutopt.cli import cli
from layoutopt.cli.common import EXIT_INTERNAL_ERROR, run_guarded
from layoutopt.errors import InputError
from layoutopt.io_safe import dumps_json
from layoutopt.plan import load_plan
from test_simulator_plan import make_plan, make_pool

EST = ["estimate", "--model", "qwen3-32b", "--gpu", "H100"]
SOLVE = ["solve", "--budget", "8xH100", "--time-limit", "2"]


@pytest.fixture()
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = make_plan([make_pool("prefill", 1), make_pool("decode", 1)], rate_rps=4.0)
    (tmp_path / "plan.json").write_text(json.dumps(plan.model_dump(mode="json"), indent=2))
    huge = plan.model_dump(mode="json")
    huge["pools"][0]["instances"] = 10**9
    (tmp_path / "huge.json").write_text(json.dumps(huge))
    (tmp_path / "long.yaml").write_text("input_tokens: {fixed: 100000}\noutput_tokens: {fixed: 100}\n")
    return tmp_path


def run(args, capsys) -> tuple[int, str]:
    status = run_guarded(cli, args)
    return status, capsys.readouterr().err


# (arguments, text stderr must contain, exit status)
BAD_INPUT = [
    (SOLVE + ["--rate", "inf"], "'inf' is not a finite number", 2),
    (SOLVE + ["--rate", "nan"], "'nan' is not a finite number", 2),
    (SOLVE + ["--rate", "1e30"], "--rate", 2),
    (SOLVE + ["--headroom", "nan"], "'nan' is not a finite number", 2),
    (SOLVE + ["--isl", "2000000", "--osl", "100"], "at most 40,960 (its config.json max_position_embeddings)", 2),
    (SOLVE + ["--isl", str(2**63), "--osl", "100"], "1<=x<=2147483647", 2),
    (SOLVE + ["--workload", "long.yaml"], "--workload: got 100000; input + output tokens within the context", 2),
    (SOLVE + ["--verify", "--verify-requests", "100000000"], "100<=x<=2000000", 2),
    (SOLVE + ["--top-k", "1000000000"], "0<=x<=100", 2),
    (["solve", "--budget", f"{10**23}xH100"], "at most 1,000,000 GPUs of one type", 2),
    (["solve", "--budget", "600000xH100+600000xH100"], "adds up to 1,200,000 GPUs", 2),
    (["solve", "--budget", "$1e30/h"], "dollar cap", 2),
    (["solve", "--budget", "8xH100", "--slo", "missing.yaml"], "slo: got 'missing.yaml'; an existing YAML file", 2),
    (EST + ["--isl", "2000000", "--osl", "10"], "at most 40,960", 2),
    (EST + ["--isl", "1000", "--osl", "100", "--rate", "inf"], "'inf' is not a finite number", 2),
    (EST + ["--isl", "1000", "--osl", "100", "--concurrency", "-inf"], "not a finite number", 2),
    (EST + ["--isl", "1000", "--osl", "100", "--tp", str(10**12)], "--tp", 2),
    (EST + ["--isl", "1000", "--osl", "100", "--instances", str(10**9)], "1<=x<=1000000", 2),
    (["simulate", "plan.json", "--requests", "100000000"], "1<=x<=2000000", 2),
    (["simulate", "plan.json", "--requests", "1e8"], "is not a valid integer", 2),
    (["simulate", "plan.json", "--seed", "-1"], "0<=x<=18446744073709551615", 2),
    (["simulate", "plan.json", "--rate", "inf"], "'inf' is not a finite number", 2),
    (["simulate", "plan.json", "--duration-s", "inf"], "'inf' is not a finite number", 2),
    (["simulate", "plan.json", "--rate", "1000", "--duration-s", "1e6"], "at most 2,000,000 requests", 2),
    (["simulate", "huge.json"], "a plan of at most 1,000,000 instances", 2),
    (["simulate", "absent.json"], "plan: got 'absent.json'; an existing JSON file", 2),
    (["nosuchcommand"], "No such command", 2),
]


@pytest.mark.parametrize("args,expected,status", BAD_INPUT, ids=[" ".join(c[0])[:60] for c in BAD_INPUT])
def test_bad_input_is_one_line_and_status_2(files, capsys, args, expected, status):
    got, err = run(args, capsys)
    assert got == status, err
    assert expected in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err


def test_very_low_rate_disaggregated_estimate_is_finite(capsys):
    # 1 - (1 - p1)(1 - p2) rounded to 0 at this rate and divided by it (ZeroDivisionError)
    # (once reachable at --rate 1e-300); rates below bounds.MIN_RATE_RPS are now refused at the option.
    args = ["--isl", "1000", "--osl", "100", "--prefill-instances", "1", "--decode-instances", "1", "--format", "json"]
    status, _ = run(EST + args + ["--rate", "1e-6"], capsys)
    assert status == 0
    status, err = run(EST + args + ["--rate", "1e-300"], capsys)
    assert status == 2 and "--rate" in err


def test_seed_zero_and_largest_are_accepted(files, capsys):
    for seed in ("0", str(2**64 - 1)):
        status, err = run(["simulate", "plan.json", "--requests", "200", "--seed", seed], capsys)
        assert status == 0, err


def test_overloaded_estimate_writes_standard_json_with_null_and_reason(capsys):
    status = run_guarded(cli, EST + ["--isl", "4000", "--osl", "1000", "--rate", "1000", "--format", "json"])
    out = capsys.readouterr().out
    assert status == 0
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON output"))
    assert data["ttft_ms"]["p90"] is None
    assert data["non_finite_values"]["/ttft_ms/p90"] == "inf"
    assert any("queues grow without bound" in note for note in data["notes"])


def test_plan_with_infinite_prediction_round_trips_through_standard_json(files):
    plan = load_plan(files / "plan.json")
    data = plan.model_dump(mode="json")
    data["pools"][0]["capacity_rps"] = math.inf
    text = dumps_json(data)
    assert "Infinity" not in text and '"/pools/0/capacity_rps": "inf"' in text
    (files / "inf.json").write_text(text)
    assert load_plan(files / "inf.json").pools[0].capacity_rps == math.inf
    (files / "bad.json").write_text(text.replace('"/pools/0/capacity_rps": "inf"', '"/pools/9/x": "inf"'))
    with pytest.raises(InputError, match="non_finite_values"):
        load_plan(files / "bad.json")


def test_unexpected_exception_is_one_line_internal_error_with_status_3(monkeypatch, capsys):
    from layoutopt.perf_model import estimate as estimate_module

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(estimate_module, "estimate", broken)
    monkeypatch.delenv("LAYOUTOPT_DEBUG", raising=False)
    status, err = run(EST + ["--isl", "10", "--osl", "10"], capsys)
    assert status == EXIT_INTERNAL_ERROR == 3
    assert err.startswith("internal error: ZeroDivisionError: float division by zero (please report it")
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    monkeypatch.setenv("LAYOUTOPT_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_guarded(cli, EST + ["--isl", "10", "--osl", "10"])


def test_unwritable_output_names_the_users_file_not_a_temporary_one(tmp_path):
    from layoutopt.cli.common import write_atomically

    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "plan.json"  # its folder is a file
    with pytest.raises(InputError) as caught:
        write_atomically(target, "{}")
    assert str(target) in str(caught.value) and ".tmp" not in str(caught.value)
