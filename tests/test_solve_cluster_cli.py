"""``layoutopt solve --cluster``: a table of (arguments, expected output, exit status), and the JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from layoutopt.cli import cli
from layoutopt.cli.common import run_guarded

CLUSTERS = Path(__file__).resolve().parents[1] / "examples" / "clusters"
HGX = str(CLUSTERS / "hgx-h100-rack.yaml")
TWO_RACKS = str(CLUSTERS / "two-rack-h100-oversubscribed.yaml")
FRAGMENTED = str(CLUSTERS / "fragmented-h100.yaml")

CASES = [
    (["solve", "--cluster", HGX], ["on cluster hgx-h100-rack", "Placement", "CUDA_VISIBLE_DEVICES", "rack-a-n0",
                                   "note: placed "], 0),
    (["solve", "--budget", "8xH100"], ["Placement", "hgx-h100-8-n0", "prefill-0-0"], 0),
    (["solve", "--cluster", FRAGMENTED, "--model", "llama-3.1-70b", "--isl", "2000", "--osl", "200"],
     ["fragmented-h100", "Placement", "prefill-0-0", "decode-"], 0),
    (["solve", "--cluster", TWO_RACKS, "--spread-racks"], ["spread over racks", "more"], 0),
    (["solve", "--cluster", TWO_RACKS, "--budget", "16xH100"], ["at most 16xH100", "Placement"], 0),
    (["solve", "--cluster", FRAGMENTED, "--model", "deepseek-v3"], ["why:", "16 H100-SXM GPUs"], 1),
]


@pytest.mark.parametrize("args, expected, status", CASES)
def test_table(args, expected, status, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == status
    out = capsys.readouterr().out
    for text in expected:
        assert text in out, out


@pytest.mark.parametrize("args, message", [
    (["solve"], "--budget"),
    (["solve", "--cluster", "missing-cluster.yaml"], "missing-cluster.yaml"),
    (["solve", "--cluster", HGX, "--budget", "8xH200"], "H200"),
])
def test_bad_input_exits_2_with_one_line(args, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", *args])
    assert run_guarded(cli) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_json_has_placement_rows(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["layoutopt", "solve", "--cluster", FRAGMENTED, "--model", "llama-3.1-70b",
                                      "--isl", "2000", "--osl", "200", "--format", "json"])
    assert run_guarded(cli) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["placement"]
    for row in data["placement"]:
        assert {"instance_id", "role", "node", "gpus", "nodes", "cuda_visible_devices", "pool_index",
                "gpus_by_node"} <= set(row)
        assert data["pools"][row["pool_index"]]["role"] == row["role"]
    assert sum(p["instances"] for p in data["pools"]) == len(data["placement"])


def test_plan_names_the_cluster_its_placement_uses(monkeypatch, capsys):
    # A --cluster plan names real nodes (deployment files may pin pods to them); a plain budget's
    # standard nodes are idealised, so its plan names no cluster.
    for args, expected in ((["--cluster", FRAGMENTED, "--model", "llama-3.1-70b"], "fragmented"),
                           (["--budget", "8xH100", "--model", "qwen3-8b"], None)):
        monkeypatch.setattr(sys, "argv", ["layoutopt", "solve", *args, "--isl", "2000", "--osl", "200",
                                          "--format", "json"])
        assert run_guarded(cli) == 0
        cluster = json.loads(capsys.readouterr().out)["cluster"]
        assert (cluster is None) if expected is None else (expected in cluster), cluster
