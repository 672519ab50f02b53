"""Asynchronous jobs over HTTP: sweeps and emits run, report progress, cancel, fail with reasons."""

from __future__ import annotations

import base64
import json
import time
from functools import partial
from pathlib import Path

import pytest
import service_support as support
from service_support import call

from layoutopt.service import BackgroundServer, ServiceSettings, create_app

PLAN = json.loads((Path(__file__).parent / "fixtures" / "plan_colocated.json").read_text())
SLO = {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 30}}
SWEEP = {"name": "http", "models": ["qwen3-8b"], "gpus": ["H100", "A100"], "max_gpus_per_type": 8,
         "rates_rps": [2.0, 4.0], "workloads": ["chat"], "slos": [SLO], "objectives": ["min-cost"],
         "solver": {"time_limit_s": 5}}
POLL_S = 0.1


def poll(url: str, job_id: str, until: set[str], timeout_s: float = 120) -> dict:
    """The job once its status is in ``until`` (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, _, job = call(f"{url}/v1/jobs/{job_id}")
        assert status == 200
        if job["status"] in until:
            return job
        time.sleep(POLL_S)
    raise AssertionError(f"job {job_id} not {until} within {timeout_s} s: {job}")


@pytest.fixture(scope="module")
def server():
    with BackgroundServer(create_app(ServiceSettings(max_workers=2))) as running:
        yield running


def test_sweep_job_runs_to_its_result(server):
    status, headers, job = call(server.url + "/v1/sweeps", "POST", SWEEP)
    assert status == 202 and headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["kind"] == "sweep" and job["status"] in ("queued", "running") and job["progress"]["total"] == 4
    done = poll(server.url, job["id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded", done["error"]
    assert done["progress"] == {"done": 4, "total": 4, "fraction": 1.0}
    result = done["result"]
    assert result["num_cells"] == 4 and len(result["rows"]) == 4
    assert not any(key.endswith("_path") for key in result) and "out_dir" not in result  # no server paths
    assert {row["budget"] for row in result["rows"]} == {"8xH100", "8xA100"}
    assert call(server.url + "/v1/jobs")[2]["jobs"][0]["id"] == job["id"]


def test_emit_job_returns_the_files(server):
    status, _, job = call(server.url + "/v1/emit", "POST", {"plan": PLAN, "model_id": "Qwen/Qwen3-32B"})
    assert status == 202 and job["kind"] == "emit" and job["progress"]["total"] == 1
    done = poll(server.url, job["id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded", done["error"]
    files = done["result"]["files"]
    assert done["result"]["num_files"] == len(files) and "plan.json" in files and "report.md" in files
    launch = [path for path in files if path.startswith("launch/") and path.endswith(".sh")]
    assert launch and "Qwen/Qwen3-32B" in files[launch[0]]["content"]
    assert json.loads(files["plan.json"]["content"])["model"] == PLAN["model"]
    pngs = [path for path in files if path.endswith(".png")]
    assert pngs and files[pngs[0]]["encoding"] == "base64"
    assert base64.b64decode(files[pngs[0]]["content"]).startswith(b"\x89PNG")


@pytest.mark.parametrize(("path", "body", "loc"), [
    ("/v1/sweeps", {**SWEEP, "models": ["/etc/model/config.json"]}, ["body", "models", 0]),
    ("/v1/sweeps", {**SWEEP, "workloads": ["/etc/workload.yaml"]}, ["body", "workloads", 0]),
    ("/v1/sweeps", {**SWEEP, "workloads": [{"trace": "/etc/trace.csv"}]}, ["body", "workloads", 0, "trace"]),
    ("/v1/sweeps", {**SWEEP, "slos": ["/etc/slo.yaml"]}, ["body", "slos", 0]),
    ("/v1/sweeps", {**SWEEP, "solver": {"prices_path": "/etc/prices.yaml"}}, ["body", "solver", "prices_path"]),
    ("/v1/sweeps", {**SWEEP, "rates_rps": [float(r) for r in range(1, 200)], "gpus": ["H100", "A100", "L40S"]},
     ["body"]),
    ("/v1/emit", {"plan": {**PLAN, "model": "/etc/passwd"}}, ["body", "plan", "model"]),
    ("/v1/emit", {"plan": PLAN, "namespace": "a;rm -rf /"}, ["body", "namespace"]),
    ("/v1/emit", {"plan": {**PLAN, "status": "infeasible", "pools": [], "totals": None}}, ["body", "plan", "status"]),
])
def test_job_bodies_are_checked_before_anything_runs(server, path, body, loc):
    status, _, payload = call(server.url + path, "POST", body)
    assert status == 422 and payload["detail"][0]["loc"] == loc, payload


def test_unknown_job_is_404(server):
    for method in ("GET", "DELETE"):
        status, _, payload = call(server.url + "/v1/jobs/0123456789abcdef", method)
        assert status == 404 and payload["detail"][0]["type"] == "not_found"


def test_sweep_progress_then_cancel_stops_the_worker(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    sweep_fn = partial(support.slow_sweep, str(pid_dir), 0.4)
    spec = {**SWEEP, "rates_rps": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}  # 12 cells of at least 0.4 s each
    with BackgroundServer(create_app(ServiceSettings(max_workers=1), sweep_fn=sweep_fn)) as busy:
        _, _, job = call(busy.url + "/v1/sweeps", "POST", spec)
        seen: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not seen or seen[-1] < 2):
            seen.append(call(f"{busy.url}/v1/jobs/{job['id']}")[2]["progress"]["done"])
            time.sleep(POLL_S)
        assert seen[-1] >= 2 and seen == sorted(seen)  # progress advances cell by cell
        (pid,) = support.wait_for_pids(pid_dir)[:1]
        status, _, cancelled = call(f"{busy.url}/v1/jobs/{job['id']}", "DELETE")
        assert status == 200 and cancelled["status"] == "cancelled"
        assert 2 <= cancelled["progress"]["done"] < 12 and cancelled["result"] is None
        support.wait_until_gone(pid)
        assert poll(busy.url, job["id"], {"cancelled"})["finished_at"]
        status, _, again = call(f"{busy.url}/v1/jobs/{job['id']}", "DELETE")  # cancelling twice changes nothing
        assert status == 200 and again["status"] == "cancelled"


def test_job_past_its_deadline_fails_and_the_next_one_runs(tmp_path):
    settings = ServiceSettings(max_workers=1, job_deadline_s=1.0)
    with BackgroundServer(create_app(settings, emit_fn=partial(support.sleepy, None, 30.0))) as busy:
        _, _, first = call(busy.url + "/v1/emit", "POST", {"plan": PLAN})
        _, _, second = call(busy.url + "/v1/emit", "POST", {"plan": PLAN})
        assert second["status"] == "queued"  # one job runs at a time (max_running_jobs)
        failed = poll(busy.url, first["id"], {"failed", "succeeded"}, timeout_s=20)
        assert failed["status"] == "failed" and failed["error"][0]["type"] == "deadline_exceeded"
        assert 1.0 <= failed["elapsed_s"] < 3.0
        assert poll(busy.url, second["id"], {"running", "failed"}, timeout_s=20)["status"] in ("running", "failed")


def test_job_store_full_of_unfinished_jobs_answers_503():
    settings = ServiceSettings(max_workers=1, max_stored_jobs=2, retry_after_s=3)
    with BackgroundServer(create_app(settings, emit_fn=partial(support.sleepy, None, 30.0))) as busy:
        answers = [call(busy.url + "/v1/emit", "POST", {"plan": PLAN}) for _ in range(3)]
        assert [status for status, _, _ in answers] == [202, 202, 503]
        assert answers[2][1]["retry-after"] == "3"
        for _, _, job in answers[:2]:
            assert call(f"{busy.url}/v1/jobs/{job['id']}", "DELETE")[2]["status"] == "cancelled"
        assert call(busy.url + "/v1/emit", "POST", {"plan": PLAN})[0] == 202  # cancelled jobs make room
