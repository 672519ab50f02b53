"""emit(): the files it owns, refusing foreign folders, writing into '.', and rejecting bad plans."""

from __future__ import annotations

import json
import os
import stat

import pytest

from layoutopt.errors import InputError
from layoutopt.plan import Plan
from layoutopt.report import emit as emit_module
from layoutopt.report.emit import MANIFEST_NAME, emit, render
from layoutopt.report.launch import expand_instances
from test_report_helpers import MODEL_IDS, fixture_plan


def _emit(name, out_dir, **kwargs):
    plan = fixture_plan(name)
    return emit(plan, out_dir, model_id=MODEL_IDS[plan.model], plots=False, **kwargs)


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_returns_every_file_written_and_lists_them(tmp_path):
    out = tmp_path / "deploy"
    written = _emit("disaggregated", out)
    assert written == _files(out)
    assert {p.relative_to(out).parts[0] for p in written} >= {"plan.json", "report.md", "launch", "k8s", MANIFEST_NAME}
    listed = json.loads((out / MANIFEST_NAME).read_text())["files"]
    assert sorted(out / p for p in listed) == [p for p in written if p.name != MANIFEST_NAME]
    assert Plan.model_validate(json.loads((out / "plan.json").read_text())) == fixture_plan("disaggregated")
    assert all((p.stat().st_mode & stat.S_IXUSR) for p in written if p.suffix == ".sh")


def test_refuses_a_folder_holding_other_files_without_force(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="--force"):
        _emit("colocated", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_force_writes_beside_user_files_and_a_rerun_touches_only_its_own(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "my-own.sh").write_text("echo mine\n")
    first = _emit("disaggregated", tmp_path, force=True)
    second = _emit("colocated", tmp_path)  # the folder is now emit's: no --force needed
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert (tmp_path / "launch" / "my-own.sh").read_text() == "echo mine\n"
    stale = set(first) - set(second)
    assert stale and not any(p.exists() for p in stale)
    assert set(_files(tmp_path)) == set(second) | {tmp_path / "notes.txt", tmp_path / "launch" / "my-own.sh"}


def test_emit_into_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = _emit("colocated", ".")
    assert (tmp_path / "plan.json").is_file() and (tmp_path / MANIFEST_NAME).is_file()
    assert sorted(p.resolve() for p in written) == _files(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != MANIFEST_NAME]


def test_a_bad_plan_writes_nothing(tmp_path):
    plan = fixture_plan("colocated").model_copy(update={"schema_version": 99})
    with pytest.raises(InputError, match="schema_version"):
        emit(plan, tmp_path / "deploy", plots=False)
    assert list(tmp_path.iterdir()) == []


def test_failure_while_writing_leaves_a_folder_emit_recognises(tmp_path, monkeypatch):
    out = tmp_path / "deploy"
    real = emit_module._write_file

    def flaky(path, content):
        if path.name == "report.md":
            raise OSError(28, "No space left on device")
        real(path, content)

    monkeypatch.setattr(emit_module, "_write_file", flaky)
    with pytest.raises(OSError):
        _emit("colocated", out)
    monkeypatch.setattr(emit_module, "_write_file", real)
    assert _emit("colocated", out) == _files(out)
    assert not [p for p in out.rglob("*.tmp")]


def test_a_listed_path_outside_the_folder_is_never_removed(tmp_path):
    out = tmp_path / "deploy"
    _emit("colocated", out)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (out / MANIFEST_NAME).write_text(json.dumps({"files": ["../victim.txt", str(victim)]}))
    _emit("colocated", out)
    assert victim.read_text() == "keep"


def test_a_symlink_in_place_of_an_output_file_is_refused(tmp_path):
    out = tmp_path / "deploy"
    _emit("colocated", out)
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    os.remove(out / "report.md")
    os.symlink(target, out / "report.md")
    with pytest.raises(InputError, match="link"):
        _emit("colocated", out)
    assert target.read_text() == "keep"


def test_plan_without_pools_is_an_input_error():
    plan = fixture_plan("colocated").model_copy(update={"pools": [], "totals": None, "status": "infeasible"})
    with pytest.raises(InputError, match="infeasible"):
        render(plan, model_id="m/m")


def test_sequential_packing_without_placement():
    # moe fixture: an 8-GPU prefill instance fills node-0; the 16-GPU decode instance spans node-1 and node-2.
    specs = expand_instances(fixture_plan("moe_ep_dp"))
    assert [(s.nodes, s.gpus, s.port) for s in specs] == [
        (["node-0"], list(range(8)), 8000), (["node-1", "node-2"], list(range(8)), 8001)]
    colocated = expand_instances(fixture_plan("colocated"), gpus_per_node=4)
    assert [(s.nodes, s.cuda_visible_devices) for s in colocated] == [
        (["node-0"], "0,1"), (["node-0"], "2,3"), (["node-1"], "0,1")]


def test_side_channel_ranges_and_bootstrap_ports_never_collide():
    specs = expand_instances(fixture_plan("moe_ep_dp"))
    plan = fixture_plan("moe_ep_dp")
    ranges = [set(range(s.side_channel_port, s.side_channel_port + plan.pools[s.pool_index].dp_size)) for s in specs]
    assert not ranges[0] & ranges[1]
    disaggregated = expand_instances(fixture_plan("disaggregated"))
    prefill = [s.bootstrap_port for s in disaggregated if s.pool_name.startswith("prefill")]
    assert len(set(prefill)) == len(prefill) == 2


def test_placement_short_of_the_pools_is_an_input_error():
    plan = fixture_plan("disaggregated")
    plan = plan.model_copy(update={"placement": plan.placement[:1]})
    with pytest.raises(InputError, match="placement"):
        render(plan, model_id=MODEL_IDS[plan.model], plots=False)


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


@pytest.mark.parametrize("engine, version", [("vllm==0.13.0", "0.13.0"), ("vllm", "0.33.0")])
def test_report_names_the_engine_release_the_files_were_written_for(engine, version):
    plan = fixture_plan("colocated")
    report = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], plots=False)["report.md"]
    assert f"Engine: vllm {version};" in report


def test_plan_json_with_an_infinite_prediction_reads_back(tmp_path):
    from layoutopt.plan import load_plan

    plan = fixture_plan("colocated")
    latency = plan.latency.model_copy(update={"ttft_ms": plan.latency.ttft_ms.model_copy(update={"p99": float("inf")})})
    text = render(plan.model_copy(update={"latency": latency}), model_id=MODEL_IDS[plan.model], plots=False)["plan.json"]
    assert "Infinity" not in text and json.loads(text)["non_finite_values"]
    (tmp_path / "plan.json").write_text(text)
    assert load_plan(tmp_path / "plan.json").latency.ttft_ms.p99 == float("inf")
