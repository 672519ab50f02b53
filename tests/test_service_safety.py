"""The service against hostile clients: paths as models, NaN bodies, slow, vanishing and flooding clients.

Every server listens on 127.0.0.1 at a free port; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
import service_support as support
from service_support import call

from layoutopt.service import BackgroundServer, ServiceSettings, create_app

FIXTURES = Path(__file__).parent / "fixtures"
PLAN = json.loads((FIXTURES / "plan_colocated.json").read_text())
SOLVE = {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 2, "objective": "min-cost", "time_limit_s": 5}


@pytest.fixture(scope="module")
def server():
    settings = ServiceSettings(max_workers=2, header_timeout_s=1.0, body_timeout_s=1.0)
    with BackgroundServer(create_app(settings, estimate_fn=support.infinite_estimate)) as running:
        yield running


@pytest.fixture
def pid_dir(tmp_path):
    """Stubs announce their worker's pid here."""
    folder = tmp_path / "pids"
    folder.mkdir()
    return folder


# --- plans name catalog entries only ----------------------------------------------------------

def test_simulate_rejects_a_path_as_model_without_opening_it(server, tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # opening it for reading would block the server's worker until a writer came
    config = tmp_path / "real" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096}))
    for model in (str(fifo), str(config), str(config.parent), "/etc/shadow", "/dev/zero"):
        start = time.perf_counter()
        status, _, payload = call(server.url + "/v1/simulate", "POST",
                                  {"plan": {**PLAN, "model": model}, "workload": "chat", "num_requests": 100},
                                  timeout_s=10)
        assert time.perf_counter() - start < 5
        detail = payload["detail"][0]
        assert status == 422 and detail["loc"] == ["body", "plan", "model"] and detail["input"] == model
        assert "reads no model files" in detail["allowed"]
    with pytest.raises(OSError):  # no reader has the FIFO open: nobody on the server opened it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize(("change", "loc"), [
    (lambda p: {**p, "pools": [{**p["pools"][0], "gpu": "/etc/gpus.yaml"}]}, ["body", "plan", "pools", 0, "gpu"]),
    (lambda p: {**p, "workload": {"workload": {"trace": "/etc/passwd"}}}, ["body", "plan", "workload", "workload",
                                                                          "trace"]),
    (lambda p: {**p, "schema_version": 99}, ["body", "plan", "schema_version"]),
    (lambda p: {**p, "pools": [{**p["pools"][0], "instances": 10**9}]}, ["body", "plan", "pools"]),
])
def test_simulate_rejects_plans_reaching_beyond_the_catalog(server, change, loc):
    status, _, payload = call(server.url + "/v1/simulate", "POST",
                              {"plan": change(PLAN), "workload": "chat", "num_requests": 100})
    assert status == 422 and payload["detail"][0]["loc"] == loc


def test_a_catalog_plan_simulates(server):
    status, _, result = call(server.url + "/v1/simulate", "POST",
                             {"plan": PLAN, "workload": "chat", "rate_rps": 1, "num_requests": 200})
    assert status == 200 and result["num_requests"] == 200


# --- bodies: NaN, Infinity, depth, duplicates, encodings ------------------------------------------

@pytest.mark.parametrize(("raw", "loc", "type_"), [
    (b'{"model": "qwen3-8b", "budget": "8xH100", "rate_rps": NaN}', ["body", "rate_rps"], "non_finite_number"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "rate_rps": Infinity}', ["body", "rate_rps"], "non_finite_number"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 1e400}', ["body", "rate_rps"], "non_finite_number"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "slo": {"ttft_ms": {"p90": -Infinity}, "tpot_ms": {"p90": 30}}}',
     ["body", "slo", "ttft_ms", "p90"], "non_finite_number"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "workload": {"preset": "chat", "arrival_rate_rps": NaN}}',
     ["body", "workload", "arrival_rate_rps"], "non_finite_number"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "budget": "8xH200"}', ["body", "budget"], "duplicate_key"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "isl": 9223372036854775808, "osl": 10}', ["body", "isl"],
     "integer_too_large"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "rate_rps": "2"}', ["body", "rate_rps"], "float_type"),
    (b'{"model": "qwen3-8b", "budget": "\xe9"}', ["body"], "json_invalid"),
    (b"", ["body"], "json_invalid"),
    (b"[1, 2]", ["body"], "model_type"),
    (b'{"model": "qwen3-8b", "budget": "8xH100", "workload": ' + b"[" * 5000 + b"]" * 5000 + b"}",
     None, "json_too_deep"),
])
def test_bad_bodies_get_422_naming_the_field(server, raw, loc, type_):
    status, _, payload = call(server.url + "/v1/solve", "POST", raw=raw)
    detail = payload["detail"][0]
    assert status == 422 and detail["type"] == type_, detail
    if loc is not None:
        assert detail["loc"] == loc
    assert detail["field"] and detail["allowed"] and detail["msg"]


def test_a_non_finite_result_is_422_never_infinity_in_json(server):
    status, _, payload = call(server.url + "/v1/estimate", "POST", {
        "model": "qwen3-8b", "gpu": "H100", "isl": 1000, "osl": 200, "layout": {"tp_size": 1}, "concurrency": 8})
    detail = payload["detail"][0]
    assert status == 422 and detail["type"] == "non_finite_result"
    assert detail["loc"] == ["response", "ttft_ms", "p90"] and detail["input"] == "inf"


# --- huge bodies do not stall the event loop --------------------------------------------------------

def _health_latencies_s(url: str, done: threading.Event, out: list[float]) -> None:
    while not done.is_set() and len(out) < 2000:
        start = time.perf_counter()
        status, _, _ = call(url + "/healthz", timeout_s=5)
        assert status == 200
        out.append(time.perf_counter() - start)
        time.sleep(0.01)


def test_huge_bodies_while_healthz_answers_within_100_ms(server):
    budget = "8xH100" + "+8xH100" * 140_000  # a 1 MB budget string, just under the body cap
    bodies = [json.dumps(body).encode() for body in (
        {**SOLVE, "budget": budget}, {**SOLVE, "workload": {"preset": "chat", "name": "x" * 1_000_000}},
        {**SOLVE, "workload": {"trace_pairs": [[100, 10]] * 80_000}},  # 240,000 values
        {**SOLVE, "workload": {"x": [[[{"a": 1.5, "b": "x"}]]] * 20_000}})]  # 100,000 values, 5 deep
    latencies: list[float] = []
    done = threading.Event()
    prober = threading.Thread(target=_health_latencies_s, args=(server.url, done, latencies))
    prober.start()
    try:
        for _ in range(3):
            for body in bodies:
                status, _, payload = call(server.url + "/v1/solve", "POST", raw=body)
                assert status in (413, 422), payload
    finally:
        done.set()
        prober.join(timeout=10)
    assert len(latencies) >= 5
    assert statistics.median(latencies) < 0.05 and max(latencies) < 0.1, sorted(latencies)[-5:]


# --- slow clients -------------------------------------------------------------------------------------

def _read_all(sock: socket.socket, timeout_s: float) -> bytes:
    sock.settimeout(timeout_s)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_slow_headers_are_cut_off(server):
    head = b"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 40
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        start = time.monotonic()
        closed_after_s = None
        for byte in head:  # one byte every 50 ms: the head would take 5 s
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed_after_s = time.monotonic() - start
                break
            time.sleep(0.05)
            if time.monotonic() - start > 3:
                break
        answer = _read_all(sock, 3)
    elapsed_s = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408") or closed_after_s is not None
    assert elapsed_s < 4  # header_timeout_s is 1 s: the connection is not held for the whole slow head


def test_idle_connection_without_a_request_is_closed(server):
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        start = time.monotonic()
        answer = _read_all(sock, 4)
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 3


def test_slow_body_gets_408(server):
    body = json.dumps(SOLVE).encode()
    head = (f"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        start = time.monotonic()
        sock.sendall(head + body[:10])  # the rest never comes
        answer = _read_all(sock, 4)
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 3
    assert b"request_timeout" in answer


# --- deadlines, disconnects, the concurrency limit -------------------------------------------------------

def test_deadline_stops_the_work_and_answers_504(pid_dir):
    settings = ServiceSettings(max_workers=1, request_deadline_s=1.0)
    with BackgroundServer(create_app(settings, solve_fn=partial(support.sleepy, str(pid_dir)))) as busy:
        start = time.monotonic()
        status, _, payload = call(busy.url + "/v1/solve", "POST", SOLVE, timeout_s=20)
        elapsed_s = time.monotonic() - start
        assert status == 504 and payload["detail"][0]["type"] == "deadline_exceeded"
        assert 1.0 <= elapsed_s < 3.0
        (pid,) = support.wait_for_pids(pid_dir)
        support.wait_until_gone(pid)
        status, _, _ = call(busy.url + "/healthz", timeout_s=5)
        assert status == 200
    with BackgroundServer(create_app(settings, solve_fn=partial(support.sleepy, None, 0.0))) as quick:
        assert call(quick.url + "/v1/solve", "POST", SOLVE, timeout_s=20)[0] == 200


def test_disconnected_client_stops_its_work(pid_dir):
    with BackgroundServer(create_app(ServiceSettings(max_workers=1),
                                     solve_fn=partial(support.sleepy, str(pid_dir)))) as busy:
        body = json.dumps(SOLVE).encode()
        sock = socket.create_connection((busy.host, busy.port), timeout=5)
        sock.sendall((f"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        (pid,) = support.wait_for_pids(pid_dir)
        sock.close()
        assert support.wait_until_gone(pid) < 5
        deadline = time.monotonic() + 5
        while call(busy.url + "/healthz")[2]["jobs_running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert call(busy.url + "/healthz")[2]["jobs_running"] == 0


def test_503_with_retry_after_beyond_the_limit():
    settings = ServiceSettings(max_workers=1, max_pending=2, retry_after_s=7)
    with BackgroundServer(create_app(settings, solve_fn=partial(support.sleepy, None, 1.5))) as busy:
        with ThreadPoolExecutor(max_workers=5) as clients:
            answers = list(clients.map(lambda _: call(busy.url + "/v1/solve", "POST", SOLVE, timeout_s=20), range(5)))
        statuses = sorted(status for status, _, _ in answers)
        assert statuses == [200, 200, 503, 503, 503]
        for status, headers, payload in answers:
            if status == 503:
                assert headers["retry-after"] == "7" and payload["detail"][0]["type"] == "busy"
        assert call(busy.url + "/healthz")[0] == 200


# --- the OpenAPI document --------------------------------------------------------------------------------

EXPECTED_STATUSES = {
    ("/v1/solve", "post"): {"200", "408", "409", "413", "422", "500", "503", "504"},
    ("/v1/estimate", "post"): {"200", "408", "409", "413", "422", "500", "503", "504"},
    ("/v1/simulate", "post"): {"200", "408", "409", "413", "422", "500", "503", "504"},
    ("/v1/fleets", "post"): {"200", "408", "409", "413", "422", "500", "503", "504"},
    ("/v1/length-routing", "post"): {"200", "408", "409", "413", "422", "500", "503", "504"},
    ("/v1/sweeps", "post"): {"202", "408", "413", "422", "500", "503"},
    ("/v1/emit", "post"): {"202", "408", "413", "422", "500", "503"},
    ("/v1/jobs/{job_id}", "get"): {"200", "404", "500"},
    ("/v1/jobs/{job_id}", "delete"): {"200", "404", "500"},
}


def test_openapi_lists_every_status(server):
    status, _, spec = call(server.url + "/openapi.json")
    assert status == 200
    for (path, method), expected in EXPECTED_STATUSES.items():
        responses = spec["paths"][path][method]["responses"]
        assert set(responses) == expected, (path, method)
        if "503" in responses:
            assert "Retry-After" in responses["503"]["headers"]
        for code in expected - {"200", "202", "409"}:
            assert responses[code]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    for path in ("/v1/solve", "/v1/estimate", "/v1/simulate", "/v1/fleets", "/v1/length-routing", "/v1/sweeps",
                 "/v1/emit"):
        ref = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.removeprefix("#/components/schemas/") in spec["components"]["schemas"]


def test_unknown_paths_and_methods_use_the_error_shape(server):
    status, _, payload = call(server.url + "/v2/nothing")
    assert status == 404 and payload["detail"][0]["loc"] == ["request", "path"]
    status, _, payload = call(server.url + "/v1/solve")
    assert status == 405 and payload["detail"][0]["type"] == "http_error"


def test_admission_refuses_requests_that_would_wait_past_the_deadline():
    from layoutopt.service.workers import Busy, WorkerPool

    pool = WorkerPool(max_workers=2, max_pending=100, deadline_s=10.0)
    for _ in range(20):  # nothing measured yet: only max_pending bounds
        pool.reserve()
    for _ in range(20):
        pool.release()
    pool.mean_run_s = 3.0  # (queued ahead / 2) x 3 s + 3 s must stay within 0.8 x 10 s
    for _ in range(5):
        pool.reserve()
    with pytest.raises(Busy, match="deadline") as refused:
        pool.reserve()
    assert refused.value.wait_s == pytest.approx(6.0)  # four ahead on two workers
    pool.release()
    pool.reserve()  # one finished: room again
    for _ in range(5):
        pool.release()
    assert pool.in_flight == 0
    pool.mean_run_s = 50.0  # slower than the deadline: a free worker still takes a request
    pool.reserve()
    pool.reserve()
    with pytest.raises(Busy):
        pool.reserve()


def test_the_documented_error_example_is_what_the_service_answers(server):
    text = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    section = text[text.index("**Errors.** Every error answer has one shape"):]
    body = section[section.index("`{") + 1:section.index("}`") + 1]
    documented = json.loads(section[section.index("```json\n") + 8:section.index("\n```", section.index("```json"))])
    status, _, payload = call(server.url + "/v1/solve", "POST", raw=body.encode())
    assert status == 422 and payload == documented
