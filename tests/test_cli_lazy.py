"""The command line imports a command's module only when that command runs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from click.testing import CliRunner

from layoutopt.cli import COMMAND_MODULES, cli


def test_every_command_module_defines_the_command_it_is_listed_under():
    for name, module in COMMAND_MODULES.items():
        assert importlib.import_module(f"layoutopt.cli.{module}").command.name == name


def test_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMAND_MODULES:
        assert f"  {name} " in result.output


def test_an_unknown_command_is_one_usage_error():
    result = CliRunner().invoke(cli, ["solvee"])
    assert result.exit_code == 2
    assert "No such command 'solvee'" in result.output


def test_solve_does_not_import_the_simulator_sweep_or_networkx():
    # A fresh interpreter: this test process has imported everything already.
    code = ("import sys, json; from layoutopt.cli import cli\n"
            "try:\n    cli(['solve', '--model', 'qwen3-8b', '--budget', '8xH100', '--time-limit', '1'],"
            " standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    modules = set(json.loads(out.strip().splitlines()[-1]))
    assert "layoutopt.optimizer.solve" in modules
    for unneeded in ("layoutopt.simulator", "layoutopt.sweep", "layoutopt.cli.simulate", "networkx"):
        assert unneeded not in modules
