"""``layoutopt solve --scenarios``: one plan that serves every traffic scenario, from the CLI."""

from __future__ import annotations

import json

from click.testing import CliRunner

from layoutopt.cli import cli

SCENARIOS = """
- {name: day, weight: 0.7, rate_rps: 4, workload: {preset: chat}}
- {name: night, weight: 0.3, rate_rps: 1, workload: {preset: summarization}}
"""


def test_robust_all_serves_every_scenario_and_names_the_binding_one(tmp_path):
    path = tmp_path / "scenarios.yaml"
    path.write_text(SCENARIOS)
    result = CliRunner().invoke(cli, ["solve", "--model", "qwen3-8b", "--budget", "8xH100", "--scenarios", str(path),
                                      "--robust", "all", "--format", "json", "--time-limit", "5"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["kind"] == "robust" and plan["status"] == "optimal" and plan["pools"]
    for scenario in plan["scenarios"]:
        assert scenario["served_rps"] >= scenario["rate_rps"] * (1 - 1e-9)
        # One plan for all costs at least as much as the scenario alone.
        assert plan["cost_usd_per_hour"] >= scenario["alone_cost_usd_per_hour"] - 1e-6
    assert plan["binding_scenarios"]
    assert sum(p["gpus_per_instance"] * p["instances"] for p in plan["pools"]) <= 8
