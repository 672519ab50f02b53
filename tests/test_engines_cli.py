"""--engine with a version on estimate, solve and sweep: rules reported, checked, recorded."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from layoutopt import api
from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded
from layoutopt.plan import Layout
from layoutopt.sweep.spec import SolverSettings

ESTIMATE = ["estimate", "--model", "qwen3-32b", "--gpu", "H100", "--isl", "1000", "--osl", "200", "--rate", "2"]


def test_estimate_evaluates_a_rule_breaking_layout_and_names_the_rule():
    result = CliRunner().invoke(cli, ESTIMATE + ["--prefill-tp", "2", "--decode-tp", "1", "--engine", "vllm==0.13.0",
                                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["engine"] == "vllm==0.13.0" and out["ttft_ms"]["p90"] > 0
    [violation] = out["rule_violations"]
    assert violation["rule"] == "pd_tp_divisibility"
    assert violation["source"] == {"file": "vllm/distributed/kv_transfer/kv_connector/utils.py", "line": 261}


def test_the_same_layout_is_fine_on_0_33():
    result = api.estimate("qwen3-32b", "H100", engine="vllm", isl=1000, osl=200, rate=2.0,
                          prefill_layout=Layout(tp_size=2), decode_layout=Layout(tp_size=1))
    assert result.engine == "vllm==0.33.0" and result.rule_violations == []


def test_estimate_table_prints_the_broken_rule():
    result = CliRunner().invoke(cli, ESTIMATE + ["--tp", "2", "--pcp", "2"])
    assert result.exit_code == 0, result.output
    assert "engine rule broken" in result.output and "pcp_unsupported" in result.output


def test_estimate_on_trtllm_says_nothing_is_checked():
    result = api.estimate("qwen3-32b", "H100", engine="trtllm", isl=1000, osl=200, layout=Layout(tp_size=2, pcp_size=2))
    assert result.rule_violations == [] and any("profile only" in n for n in result.notes)


def test_solve_cli_with_a_pinned_version():
    result = CliRunner().invoke(cli, ["solve", "--model", "llama-3.1-8b", "--budget", "8xH100", "--isl", "1000",
                                      "--osl", "200", "--engine", "vllm==0.13.0", "--time-limit", "5",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["engine"] == "vllm==0.13.0"


@pytest.mark.parametrize("args", [ESTIMATE + ["--engine", "vllm==0.2.0"],
                                  ["solve", "--budget", "8xH100", "--engine", "sglang==9"]])
def test_unknown_versions_are_one_line_errors(monkeypatch, capsys, args):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == 2
    err = capsys.readouterr().err
    assert "versions with engine data" in err and err.strip().count("\n") == 0


def test_sweep_settings_take_a_versioned_engine():
    assert SolverSettings(engine="sglang==0.5.3").engine == "sglang==0.5.3"
    with pytest.raises(ValidationError, match="solver.engine: got 'vllm==0.1'"):
        SolverSettings(engine="vllm==0.1")
