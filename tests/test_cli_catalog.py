"""``layoutopt catalog``: tables of (arguments, expected output, exit status)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

# (arguments, text the output must contain, exit status) through click's runner.
CASES = [
    (["catalog", "--help"], "gpus", 0),
    (["catalog", "gpus"], "H100-SXM", 0),
    (["catalog", "gpus"], "1,979", 0),  # H100 dense FP8 TFLOPS
    (["catalog", "nodes"], "hgx-h100-8", 0),
    (["catalog", "nodes"], "gb200-nvl72-tray", 0),
    (["catalog", "models"], "qwen3.5-397b-a17b", 0),
    (["catalog", "models"], "320.0", 0),  # Llama-3.1-70B KV KiB per token
    (["catalog", "models"], "45 lin + 15 full", 0),
    (["catalog", "models"], "18 win128 + 18 full", 0),
    (["catalog", "show", "llama-3.1-70b"], "70.55B", 0),
    (["catalog", "show", "llama-3.1-70b"], "bf16 320.0 KiB, fp8 160.0 KiB", 0),
    (["catalog", "show", "Qwen/Qwen3-32B"], "Model qwen3-32b", 0),
    (["catalog", "show", "deepseek-v3"], "kv_lora_rank 512", 0),
    (["catalog", "show", "deepseek-v3"], "256 experts, top-8", 0),
    (["catalog", "show", "qwen3.5-27b"], "146.8 MiB", 0),
    (["catalog", "show", "gpt-oss-120b"], "bf16 <= 4.5 MiB", 0),
    (["catalog", "show", "gpt-oss-120b"], "fixed at mxfp4", 0),
    (["catalog", "show", "h100"], "GPU H100-SXM", 0),
    (["catalog", "show", "h100"], "/GPU-hour", 0),
    (["catalog", "show", "hgx-h100-8"], "Node type hgx-h100-8", 0),
    (["catalog", "show"], "Missing argument 'NAME'", 2),
    (["catalog", "gpus", "--format", "yaml"], "Invalid value for '--format'", 2),
    (["catalog", "bogus"], "No such command 'bogus'", 2),
]


@pytest.mark.parametrize("args,expected,status", CASES, ids=[" ".join(c[0]) + f"~{c[1]}" for c in CASES])
def test_catalog_command(args, expected, status):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status, result.output
    assert expected in result.output


# (arguments, text on stderr, exit status) through the console entry point's error handling.
GUARDED_ERRORS = [
    (["catalog", "show", "qwen3-33b"], "did you mean qwen3-32b", 2),
    (["catalog", "show", "h10"], "did you mean H100-SXM", 2),
    (["catalog", "show", "missing.json"], "an existing config.json file (no such file)", 2),
    (["catalog", "show", "zzzzzz"], "error: NAME: got 'zzzzzz'", 2),
]


@pytest.mark.parametrize("args,expected,status", GUARDED_ERRORS)
def test_errors_are_one_line_with_status_2(monkeypatch, capsys, args, expected, status):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == status
    captured = capsys.readouterr()
    assert expected in captured.err
    assert captured.err.strip().count("\n") == 0 and "Traceback" not in captured.err


def test_show_a_config_file(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }))
    result = CliRunner().invoke(cli, ["catalog", "show", str(folder / "config.json")])
    assert result.exit_code == 0, result.output
    assert "Model tiny" in result.output
    assert "bf16 1.0 KiB" in result.output  # 2 layers x 2 KV heads x 64 x (K, V) x 2 bytes


def test_json_formats():
    runner = CliRunner()
    gpus = json.loads(runner.invoke(cli, ["catalog", "gpus", "--format", "json"]).output)
    assert any(g["name"] == "H100-SXM" and g["memory_gib"] > 79 for g in gpus)
    nodes = json.loads(runner.invoke(cli, ["catalog", "nodes", "--format", "json"]).output)
    assert any(n["name"] == "hgx-h100-8" and n["gpus_per_node"] == 8 for n in nodes)
    models = json.loads(runner.invoke(cli, ["catalog", "models", "--format", "json"]).output)
    by_name = {m["name"]: m for m in models}
    assert by_name["llama-3.1-8b"]["kv_cache_bytes_per_token"]["bf16"] == 131072
    assert by_name["deepseek-v3"]["moe"]["num_experts"] == 256
    shown = json.loads(runner.invoke(cli, ["catalog", "show", "qwen3.5-27b", "--format", "json"]).output)
    assert shown["kind"] == "model" and shown["layer_kinds"] == {"full_attention": 16, "linear_attention": 48}
    gpu = json.loads(runner.invoke(cli, ["catalog", "show", "H200", "--format", "json"]).output)
    assert gpu["kind"] == "gpu" and gpu["gpu"]["name"] == "H200-SXM"
    assert [n["name"] for n in gpu["node_types"]] == ["hgx-h200-8"]


def test_console_script_exit_status():
    code = "import sys; from layoutopt.cli import main; sys.argv = ['layoutopt'] + sys.argv[1:]; main()"
    done = subprocess.run([sys.executable, "-c", code, "catalog", "show", "llama-3.1-7b"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("error: NAME: got 'llama-3.1-7b'") and "llama-3.1-70b" in done.stderr
    assert done.stdout == ""
