"""``layoutopt estimate``: a table of (arguments, expected output, exit status)."""

from __future__ import annotations

import json
import sys

import pytest

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

BASE = ["estimate", "--model", "llama-3.1-70b", "--gpu", "H100", "--isl", "1024", "--osl", "1024"]

CASES = [
    (BASE + ["--tp", "4", "--precision", "fp8", "--concurrency", "32"], "TTFT", 0),
    (BASE + ["--tp", "4", "--precision", "fp8", "--concurrency", "32"], "closed loop, 32 in flight", 0),
    (BASE + ["--tp", "8", "--rate", "1.5"], "open loop, 1.5 req/s Poisson", 0),
    (BASE + ["--tp", "8"], "one request alone", 0),
    (BASE + ["--prefill-tp", "4", "--decode-tp", "4", "--decode-instances", "2", "--rate", "1"],
     "1 x prefill tp4-bf16, 2 x decode tp4-bf16", 0),
    (BASE + ["--tp", "1", "--concurrency", "8"], "misses by", 2),
    (BASE + ["--tp", "3", "--concurrency", "8"], "divisible by tp_size 3", 2),
    (BASE + ["--tp", "4", "--dcp", "3"], "not divisible by dcp_size 3", 2),
    (BASE + ["--tp", "4", "--concurrency", "8", "--rate", "1"], "give one of concurrency", 2),
    (["estimate", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "4"], "give both isl and osl", 2),
    (["estimate", "--model", "llama-9000", "--gpu", "H100", "--isl", "8", "--osl", "8"], "llama-3.1", 2),
]


def _run(args, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    code = run_guarded(cli)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("args,expected,status", CASES)
def test_estimate_cli(args, expected, status, monkeypatch, capsys):
    code, output = _run(args, monkeypatch, capsys)
    assert code == status, output
    assert expected in output


def test_estimate_json_is_the_pydantic_model(monkeypatch, capsys):
    code, output = _run(BASE + ["--tp", "4", "--precision", "fp8", "--concurrency", "16", "--format", "json"],
                        monkeypatch, capsys)
    assert code == 0
    data = json.loads(output)
    assert data["mode"] == "colocated" and data["num_gpus"] == 4
    assert set(data["ttft_ms"]) == {"mean", "p50", "p90", "p99"}
    assert data["memory"][0]["max_batch_size"] > 16


def test_estimate_reads_a_workload_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "w.yaml"
    path.write_text("input_tokens: {lognormal: {mean: 2000, p90: 4000}}\noutput_tokens: {fixed: 300}\n")
    code, output = _run(["estimate", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "4", "--precision", "fp8",
                         "--workload", str(path), "--rate", "1"], monkeypatch, capsys)
    assert code == 0, output
    assert "isl 2000, osl 300; open loop, 1 req/s Poisson" in output
