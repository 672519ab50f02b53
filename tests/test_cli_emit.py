"""`layoutopt emit`: a table of arguments, exit status and what the output says."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded
from test_report_helpers import FIXTURES


def _run(args, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["layoutopt", *args])
    status = run_guarded(cli)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def files(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "invalid.json").write_text('{"status": "optimal"}')
    plan = json.loads((FIXTURES / "plan_colocated.json").read_text())
    (tmp_path / "trtllm.json").write_text(json.dumps({**plan, "engine": "trtllm"}))
    return tmp_path


CASES = [
    # (arguments, exit status, text expected in stdout or stderr)
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--model-id", "Qwen/Qwen3-32B"], 0, "report.md"),
    (["emit", str(FIXTURES / "plan_moe_ep_dp.json"), "{out}", "--engine", "sglang", "--model-id", "x/y",
      "--namespace", "llm"], 0, "launch/decode-h100-sxm-tp1-ep16-dp16-fp8-0.sh"),
    (["emit", "{tmp}/broken.json", "{out}"], 2, "line 1"),
    (["emit", "{tmp}/list.json", "{out}"], 2, "holds a JSON list, not an object"),
    (["emit", "{tmp}/invalid.json", "{out}"], 2, "Field required"),
    (["emit", "{tmp}/missing.json", "{out}"], 2, "missing.json"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--engine", "trtllm"], 2, "trtllm"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--engine", "vllm==0.13.0"], 0, "launch/"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--engine", "vllm==0.1"], 2, "vllm==0.13.0"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--model-id", "a;b"], 2, "--model-id"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--namespace", "Bad_NS"], 2, "--namespace"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{out}", "--rdma-resource", "x y"], 2, "--rdma-resource"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{tmp}"], 2, "--force"),
    (["emit", str(FIXTURES / "plan_colocated.json"), "{tmp}", "--force"], 0, "report.md"),
    (["emit", "{tmp}/trtllm.json", "{out}"], 2, "trtllm"),
]


@pytest.mark.parametrize(("args", "status", "expected"), CASES)
def test_emit_command(args, status, expected, files, monkeypatch, capsys):
    args = [a.format(tmp=files, out=files / "out") for a in args]
    got_status, out, err = _run(args, monkeypatch, capsys)
    assert got_status == status, err
    assert expected in (out if status == 0 else err)
    if status == 0:
        target = files if "--force" in args else files / "out"
        assert out.startswith("wrote ") and (target / "plan.json").is_file()
    else:
        assert "Traceback" not in err and not (files / "out").exists()
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_help_lists_options():
    result = CliRunner().invoke(cli, ["emit", "--help"])
    assert result.exit_code == 0
    for option in ("--engine", "--model-id", "--namespace", "--image", "--force", "--pin-nodes"):
        assert option in result.output


def test_emit_defaults_to_the_plans_engine(tmp_path, monkeypatch, capsys):
    plan = json.loads((FIXTURES / "plan_colocated.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps({**plan, "engine": "sglang==0.5.3"}))
    status, _, err = _run(["emit", str(tmp_path / "p.json"), str(tmp_path / "out")], monkeypatch, capsys)
    assert status == 0, err
    script = next((tmp_path / "out" / "launch").glob("*.sh")).read_text()
    assert "engine: sglang 0.5.3" in script
