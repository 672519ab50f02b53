"""``layoutopt sweep`` and ``layoutopt serve``: tables of (arguments, expected output, exit status)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

SWEEP_YAML = """\
name: cli
models: [qwen3-8b]
budgets: [8xH100, 8xA100]
rates_rps: [1, 10]
workloads: [chat]
slos: [{ttft_ms: {p90: 1000}, tpot_ms: {p90: 30}}]
objectives: [min-cost]
solver: {time_limit_s: 5}
"""


@pytest.fixture()
def spec_path(tmp_path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP_YAML)
    return path


def test_sweep_table_then_resume(tmp_path, spec_path):
    out = tmp_path / "out"
    args = ["sweep", str(spec_path), "--out", str(out), "--workers", "1", "--no-progress", "--no-plots"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "Sweep cli: 4 cells (4 optimal); 4 solved now, 0 already done" in first.output
    assert "Cheapest fleet per rate" in first.output and "results.csv" in first.output
    second = CliRunner().invoke(cli, args)
    assert "0 solved now, 4 already done" in second.output
    assert {p.name for p in out.iterdir()} >= {"results.csv", "results.parquet", "summary.md", "summary.json",
                                               "cells.jsonl", "plans", "sweep.json"}


def test_sweep_json(tmp_path, spec_path):
    args = ["sweep", str(spec_path), "--out", str(tmp_path / "out"), "--workers", "1", "--format", "json",
            "--no-progress", "--no-plots"]
    result = CliRunner().invoke(cli, args)
    summary = json.loads(result.output)
    assert summary["num_cells"] == 4 and len(summary["cheapest_fleets"]) == 2


def test_example_sweep_file_is_valid():
    from layoutopt.sweep import expand_cells, load_sweep_spec

    example = Path(__file__).parents[1] / "examples" / "sweep.yaml"
    cells = expand_cells(load_sweep_spec(example), example.parent)
    assert len(cells) == 2 * 3 * 6


# (arguments, text on stderr, exit status) through the console entry point's error handling.
GUARDED_ERRORS = [
    (["sweep", "{dir}/missing.yaml", "--out", "{dir}/o"], "sweep: got", 2),
    (["sweep", "{dir}/bad.yaml", "--out", "{dir}/o"], "error: sweep.max_gpus_per_type", 2),
    (["sweep", "{dir}/sweep.yaml", "--out", "{dir}/o", "--address", "auto"], "only with --executor ray", 2),
    (["sweep", "{dir}/sweep.yaml", "--out", "{dir}/o", "--ray-address", "auto"],
     "error: --ray-address: got 'auto'; only with --executor ray", 2),
]


@pytest.mark.parametrize("args,expected,status", GUARDED_ERRORS)
def test_sweep_errors_are_one_line(monkeypatch, capsys, tmp_path, spec_path, args, expected, status):
    bad = "models: [qwen3-8b]\ngpus: [H100]\nslos: [{ttft_ms: {p90: 1}, tpot_ms: {p90: 1}}]\n"
    (tmp_path / "bad.yaml").write_text(bad)
    monkeypatch.setattr(sys, "argv", ["layoutopt", *(a.format(dir=tmp_path) for a in args)])
    assert run_guarded(cli) == status
    captured = capsys.readouterr()
    assert expected in captured.err and "Traceback" not in captured.err


# (arguments, text in the output, exit status)
CASES = [
    (["sweep", "--help"], "--executor [local|ray]", 0),
    (["sweep", "--help"], "--ray-address", 0),
    (["sweep", "x.yaml"], "Missing option '--out'", 2),
    (["sweep", "x.yaml", "--out", "o", "--executor", "slurm"], "Invalid value for '--executor'", 2),
    (["sweep", "x.yaml", "--out", "o", "--workers", "0"], "Invalid value for '--workers'", 2),
    (["serve", "--help"], "--port", 0),
    (["serve", "--help"], "/openapi.json", 0),
    (["serve", "--port", "99999"], "Invalid value for '--port'", 2),
]


@pytest.mark.parametrize("args,expected,status", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_commands(args, expected, status):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status, result.output
    assert expected in result.output
