"""emit(): the files it returns, all-or-nothing writing, and the report's arithmetic."""

from __future__ import annotations

import json
import stat

import pytest

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.report import emit as emit_module
from layoutopt.report.emit import emit, render
from layoutopt.report.launch import expand_instances
from test_report_helpers import MODEL_IDS, fixture_plan


def _emit(name, out_dir, **kwargs):
    plan = fixture_plan(name)
    return emit(plan, out_dir, model_id=MODEL_IDS[plan.model], plots=False, **kwargs)


def test_returns_every_file_written(tmp_path):
    out = tmp_path / "deploy"
    written = _emit("disaggregated", out)
    on_disk = sorted(p for p in out.rglob("*") if p.is_file())
    assert sorted(written) == on_disk
    assert {p.relative_to(out).parts[0] for p in written} == {"plan.json", "report.md", "launch", "k8s"}
    assert Plan.model_validate(json.loads((out / "plan.json").read_text())) == fixture_plan("disaggregated")
    assert all((p.stat().st_mode & stat.S_IXUSR) for p in written if p.suffix == ".sh")


def test_failure_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(root, files):
        (root / "plan.json").write_text("{}")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(emit_module, "_write_tree", broken)
    with pytest.raises(OSError):
        _emit("colocated", tmp_path / "deploy")
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_the_previous_output(tmp_path, monkeypatch):
    out = tmp_path / "deploy"
    _emit("colocated", out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setattr(emit_module, "_install", lambda staging, out_dir: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError):
        _emit("disaggregated", out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]


def test_rerun_replaces_an_earlier_output_as_a_whole(tmp_path):
    out = tmp_path / "deploy"
    _emit("colocated", out)
    written = _emit("disaggregated", out)
    assert sorted(p for p in out.rglob("*") if p.is_file()) == sorted(written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]


def test_refuses_a_directory_holding_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="other files"):
        _emit("colocated", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_plan_without_pools_is_an_input_error():
    plan = fixture_plan("colocated").model_copy(update={"pools": [], "totals": None, "status": "infeasible"})
    with pytest.raises(InputError, match="infeasible"):
        render(plan, model_id="m")


def test_sequential_packing_without_placement():
    # moe fixture: an 8-GPU prefill instance fills node-0; the 16-GPU decode instance spans node-1 and node-2.
    specs = expand_instances(fixture_plan("moe_ep_dp"))
    assert [(s.nodes, s.gpus, s.port) for s in specs] == [
        (["node-0"], list(range(8)), 8000), (["node-1", "node-2"], list(range(8)), 8001)]
    colocated = expand_instances(fixture_plan("colocated"), gpus_per_node=4)
    assert [(s.nodes, s.cuda_visible_devices) for s in colocated] == [
        (["node-0"], "0,1"), (["node-0"], "2,3"), (["node-1"], "0,1")]


def test_placement_short_of_the_pools_is_an_input_error():
    plan = fixture_plan("disaggregated")
    plan = plan.model_copy(update={"placement": plan.placement[:1]})
    with pytest.raises(InputError, match="prefill"):
        expand_instances(plan)


def test_report_sections_and_rate_rise_numbers():
    plan = fixture_plan("disaggregated")
    report = render(plan, model_id=MODEL_IDS[plan.model], plots=False)["report.md"]
    for heading in ("## What to run", "## Why this layout", "### Prefill:decode ratio",
                    "## What the next-best plans give up", "## If the request rate rose by 20 %", "## Files"):
        assert heading in report
    assert "N_p : N_d = (T_in / P) : (T_out / D)" in report
    # arrival rate 6.0 -> 7.2 req/s: prefill 2 x 4.0 and decode 1 x 8.5 req/s already cover it.
    assert "From 6.000 to 7.200 req/s" in report
    assert "already covers the higher rate" in report
    assert "TTFT p90 <= 1000 ms" in report
