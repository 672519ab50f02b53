"""``layoutopt solve``: a table of (arguments, expected output, exit status), JSON, --output, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SLO = str(EXAMPLES / "slo.yaml")

CASES = [
    (["solve", "--budget", "32xH100", "--slo", SLO], ["default used: model: qwen3-32b", "Pools", "TTFT",
                                                       "requests per dollar", "solver: optimal", "binding:"], 0),
    (["solve", "--budget", "8xH100", "--slo", SLO, "--mode", "colocated"], ["mode: colocated"], 0),
    (["solve", "--budget", "16xH100", "--slo", SLO, "--mode", "disaggregated"],
     ["prefill:decode ratio check", "formula"], 0),
    (["solve", "--budget", "16xH100", "--slo", SLO, "--top-k", "2"], ["Alternatives"], 0),
    (["solve", "--budget", "8xH100", "--isl", "2000", "--osl", "200", "--rate", "5", "--objective", "min-cost"],
     ["min-cost", "$/h"], 0),
    (["solve", "--model", "qwen3.5-397b-a17b", "--budget", "2xH100"], ["why:", "GiB", "try:"], 1),
]


@pytest.mark.parametrize("args, expected, status", CASES, ids=[" ".join(c[0][1:5]) for c in CASES])
def test_solve_table(args, expected, status, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == status
    out = capsys.readouterr().out
    for text in expected:
        assert text in out


def test_json_and_output_file(tmp_path):
    target = tmp_path / "plans" / "plan.json"
    result = CliRunner().invoke(cli, ["solve", "--budget", "8xH100", "--slo", SLO, "--format", "json",
                                      "--output", str(target)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    written = json.loads(target.read_text())
    printed["solver"].pop("wall_time_s"), written["solver"].pop("wall_time_s")
    assert printed == written
    assert printed["schema_version"] == 2 and printed["ep_exchange"] == "allgather_reducescatter" and printed["status"] == "optimal"
    assert list(tmp_path.joinpath("plans").iterdir()) == [target]  # no temporary file left behind


def test_infeasible_json_exits_1_with_reasons_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", "solve", "--model", "qwen3.5-397b-a17b", "--budget", "2xH100",
                                      "--format", "json"])
    assert run_guarded(cli) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "infeasible"
    assert "infeasible:" in captured.err and "GiB" in captured.err


@pytest.mark.parametrize("args, message", [
    (["solve", "--budget", "32xH1000"], "budget"),
    (["solve", "--budget", "8xH100", "--isl", "100"], "--isl/--osl"),
    (["solve", "--budget", "8xH100", "--objective", "min-cost"], "--rate"),
    (["solve", "--budget", "8xH100", "--slo", "missing.yaml"], "missing.yaml"),
])
def test_bad_input_exits_2_with_one_line(args, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
