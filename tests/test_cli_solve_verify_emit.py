"""``layoutopt solve --verify`` replays the plan in the simulator; ``--emit DIR`` writes deployment files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

SLO = str(Path(__file__).resolve().parents[1] / "examples" / "slo.yaml")


def _run(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["layoutopt", "solve", *args])
    status = run_guarded(cli)
    return status, capsys.readouterr().out


def test_verify_prints_analytic_and_simulated_side_by_side(monkeypatch, capsys):
    status, out = _run(monkeypatch, capsys, "--budget", "8xH100", "--slo", SLO, "--verify",
                       "--verify-requests", "2000")
    assert status == 0
    assert "Simulator check at" in out
    assert "analytic" in out and "simulated" in out and "p90" in out


def test_verify_json_records_the_simulation(monkeypatch, capsys):
    status, out = _run(monkeypatch, capsys, "--budget", "8xH100", "--slo", SLO, "--verify",
                       "--verify-requests", "2000", "--format", "json")
    assert status == 0
    plan = json.loads(out)
    check = plan["verification"]
    assert check["num_requests"] == 2000
    assert abs(check["rate_rps"] - plan["totals"]["goodput_rps"]) < 1e-9
    assert 0.0 <= check["simulated_slo_attainment"] <= 1.0
    assert check["simulated_tpot_ms"]["p90"] > 0


def test_emit_writes_files_and_names_them(monkeypatch, capsys, tmp_path):
    out_dir = tmp_path / "deploy"
    status, out = _run(monkeypatch, capsys, "--budget", "8xH100", "--slo", SLO, "--emit", str(out_dir))
    assert status == 0
    assert f"files to {out_dir}" in out
    assert (out_dir / "plan.json").is_file() and (out_dir / "report.md").is_file()
    scripts = sorted((out_dir / "launch").glob("*.sh"))
    assert scripts and all("vllm serve" in s.read_text() for s in scripts)
    for script in scripts:
        assert str(script) in out


def test_emit_skipped_when_infeasible(monkeypatch, capsys, tmp_path):
    out_dir = tmp_path / "deploy"
    status, _ = _run(monkeypatch, capsys, "--model", "qwen3.5-397b-a17b", "--budget", "2xH100", "--emit", str(out_dir))
    assert status == 1
    assert not out_dir.exists()
