"""``layoutopt solve --fleet``: two models planned together on one budget, from the CLI."""

from __future__ import annotations

import json

from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

FLEET = """
budget: 8xH100
objective: min-cost
models:
  - {model: qwen3-8b, workload: {preset: chat}, rate_rps: 2,
     slo: {ttft_ms: {p90: 1000}, tpot_ms: {p90: 40}, attainment: 0.9}}
  - {model: qwen3-32b, workload: {preset: rag}, rate_rps: 1,
     slo: {ttft_ms: {p90: 2000}, tpot_ms: {p90: 50}, attainment: 0.9}}
"""


def test_fleet_json_has_a_plan_per_model_and_the_naive_split(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    result = CliRunner().invoke(cli, ["solve", "--fleet", str(path), "--format", "json", "--time-limit", "5"])
    assert result.exit_code == 0, result.output
    fleet = json.loads(result.output)
    assert fleet["kind"] == "fleet" and fleet["status"] == "optimal"
    assert [p["model"] for p in fleet["plans"]] == ["qwen3-8b", "qwen3-32b"]
    for plan, rate in zip(fleet["plans"], (2, 1)):
        assert plan["totals"]["goodput_rps"] >= rate
    assert fleet["totals"]["gpus"] <= 8
    total = sum(p["totals"]["cost_usd_per_hour"] for p in fleet["plans"])
    assert abs(fleet["totals"]["cost_usd_per_hour"] - total) < 1e-6
    assert len(fleet["split"]) == 2
    if fleet["split_cost_usd_per_hour"] is not None:
        # The naive split is one feasible fleet plan, so the joint optimum can never cost more.
        assert fleet["saving_usd_per_hour"] >= 0


def test_fleet_bad_file_is_one_clear_error(tmp_path, capsys):
    path = tmp_path / "fleet.yaml"
    path.write_text("models:\n  - {model: qwen3-8b, slo: {ttft_ms: {p90: 1000}, tpot_ms: {p90: 40}}}\n")
    assert run_guarded(cli, ["solve", "--fleet", str(path), "--budget", "8xH100"]) == 2
    captured = capsys.readouterr()
    assert "fleet.models[0].rate_rps" in captured.err and "Traceback" not in captured.err
