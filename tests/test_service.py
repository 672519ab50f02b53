"""The HTTP service over real HTTP on loopback: a uvicorn server per module, stopped after."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from layoutopt.service import BackgroundServer, ServiceSettings, create_app
from service_support import call

SOLVE = {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 2, "objective": "min-cost", "time_limit_s": 5}
BUSY_S = 0.6


def busy_solve(**kwargs):
    """A CPU-bound stand-in for a long solve: spins for BUSY_S, then returns a real small plan."""
    from layoutopt.optimizer.solve import solve

    end = time.perf_counter() + BUSY_S
    while time.perf_counter() < end:
        pass
    return solve(**kwargs)


def request(url: str, method: str = "GET", body: object = None, raw: bytes | None = None,
            timeout_s: float = 60.0, chunked: bool = False) -> tuple[int, object]:
    """(status, parsed JSON body) of one HTTP request: service_support.call without the headers."""
    status, _, payload = call(url, method, body, raw=raw, timeout_s=timeout_s, chunked=chunked)
    return status, payload


@pytest.fixture(scope="module")
def server():
    with BackgroundServer(create_app(ServiceSettings(max_workers=2))) as running:
        yield running


def test_healthz_and_openapi(server):
    status, health = request(server.url + "/healthz")
    assert status == 200 and health["status"] == "ok" and health["workers"] == 2
    status, spec = request(server.url + "/openapi.json")
    assert status == 200
    assert {"/v1/solve", "/v1/estimate", "/v1/simulate", "/v1/fleets", "/v1/length-routing", "/v1/catalog/gpus", "/v1/catalog/models",
            "/v1/catalog/nodes", "/healthz"} <= set(spec["paths"])
    assert spec["paths"]["/v1/solve"]["post"]["responses"]["200"]["content"]["application/json"]["schema"] == \
        {"$ref": "#/components/schemas/Plan"}


@pytest.mark.parametrize(("path", "name"), [
    ("/v1/catalog/gpus", "H100-SXM"), ("/v1/catalog/models", "qwen3-8b"), ("/v1/catalog/nodes", "hgx-h100-8")])
def test_catalog(server, path, name):
    status, rows = request(server.url + path)
    assert status == 200 and name in [row["name"] for row in rows]


# (body, raw bytes, location of the first error, text in its message)
INVALID = [
    (None, b"{not json", ["body", 1], "JSON decode error"),
    ({**SOLVE, "rate_rps": "fast"}, None, ["body", "rate_rps"], "valid number"),
    ({**SOLVE, "budget": 32}, None, ["body", "budget"], "valid string"),
    ({**SOLVE, "time_limit_s": 600}, None, ["body", "time_limit_s"], "less than or equal to 60"),
    ({**SOLVE, "colour": "red"}, None, ["body", "colour"], "Extra inputs"),
    ({"budget": "8xH100"}, None, ["body", "model"], "Field required"),
    ({**SOLVE, "model": "qwen3-8bb"}, None, ["body", "model"], "did you mean qwen3-8b"),
    ({**SOLVE, "model": "/etc/passwd.json"}, None, ["body", "model"], "unknown model"),
    ({**SOLVE, "budget": "8xH1000"}, None, ["body", "budget"], "unknown GPU 'H1000'"),
    ({**SOLVE, "workload": "chatty"}, None, ["body", "workload", "preset"], "did you mean chat"),
    ({**SOLVE, "workload": {"trace": "/etc/trace.csv"}}, None, ["body", "workload", "trace"], "reads no files"),
    ({**SOLVE, "workload": {"input_tokens": {"lognormal": {"mean": 10, "p90": 5}}, "output_tokens": 5}}, None,
     ["body", "workload", "input_tokens", "lognormal", "p90"], "p90 must exceed the mean"),
    ({**SOLVE, "slo": {"ttft_ms": {"p90": -1}, "tpot_ms": {"p90": 30}}}, None, ["body", "slo", "ttft_ms", "p90"],
     "greater than 0"),
]


@pytest.mark.parametrize(("body", "raw", "loc", "text"), INVALID)
def test_invalid_requests_get_422_naming_the_field(server, body, raw, loc, text):
    status, payload = request(server.url + "/v1/solve", "POST", body, raw=raw)
    assert status == 422
    first = payload["detail"][0]
    assert first["loc"] == loc and text in first["msg"]


def test_input_error_carries_field_value_and_allowed(server):
    status, payload = request(server.url + "/v1/solve", "POST", {**SOLVE, "budget": "8xH1000"})
    detail = payload["detail"][0]
    assert (status, detail["type"], detail["field"], detail["input"]) == (422, "input_error", "budget", "8xH1000")
    assert "H100-SXM" in detail["allowed"] and detail["hint"].startswith("did you mean")


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_body_gets_413(server, chunked):
    body = {**SOLVE, "workload": {"preset": "chat", "name": "x" * (2 << 20)}}
    status, payload = request(server.url + "/v1/solve", "POST", body, chunked=chunked)
    detail = payload["detail"][0]
    assert status == 413 and detail["type"] == "body_too_large" and "at most 1048576 bytes" in detail["allowed"]
    assert request(server.url + "/healthz")[0] == 200


def test_solve_estimate_simulate(server):
    status, plan = request(server.url + "/v1/solve", "POST", {**SOLVE, "workload": "chat"})
    assert status == 200 and plan["status"] == "optimal" and plan["solver"]["gap"] == 0
    assert plan["totals"]["goodput_rps"] >= 2 and plan["totals"]["cost_usd_per_hour"] > 0
    status, estimate = request(server.url + "/v1/estimate", "POST", {
        "model": "qwen3-8b", "gpu": "H100", "isl": 1000, "osl": 200, "layout": {"tp_size": 1}, "concurrency": 8})
    assert status == 200 and estimate["num_gpus"] == 1 and estimate["ttft_ms"]["p90"] > 0
    status, result = request(server.url + "/v1/simulate", "POST", {"plan": plan, "num_requests": 2000})
    assert status == 200 and result["num_requests"] == 2000 and result["rate_rps"] == pytest.approx(2.0)


FLEET_SLO = {"ttft_ms": {"p90": 1000}, "tpot_ms": {"p90": 40}, "attainment": 0.9}
FLEET = {"budget": "8xH100", "objective": "min-cost", "time_limit_s": 5, "models": [
    {"model": "qwen3-8b", "workload": "chat", "rate_rps": 2, "slo": FLEET_SLO},
    {"model": "qwen3-32b", "workload": {"preset": "rag"}, "rate_rps": 1,
     "slo": {**FLEET_SLO, "ttft_ms": {"p90": 2000}, "tpot_ms": {"p90": 50}}}]}


def test_fleet_is_the_cli_fleet_over_http(server):
    from layoutopt.optimizer.fleet import solve_fleet
    from layoutopt.service.arguments import fleet_kwargs
    from layoutopt.service.schemas import FleetRequest

    status, fleet = request(server.url + "/v1/fleets", "POST", FLEET)
    assert status == 200 and fleet["kind"] == "fleet" and fleet["status"] == "optimal"
    assert [p["model"] for p in fleet["plans"]] == ["qwen3-8b", "qwen3-32b"]
    assert all(p["totals"]["goodput_rps"] >= rate for p, rate in zip(fleet["plans"], (2, 1)))
    assert fleet["totals"]["gpus"] <= 8 and len(fleet["split"]) == 2
    # The same document the Python API gives for the same fleet (deterministic solver; wall times aside).
    direct = solve_fleet(**fleet_kwargs(FleetRequest.model_validate(FLEET))).model_dump(mode="json")
    assert fleet["totals"] == direct["totals"] and fleet["solver"]["proof"] == direct["solver"]["proof"]


FLEET_INVALID = [
    ({**FLEET, "models": []}, ["body", "models"], "at least 1 item"),
    ({**FLEET, "budget": "8xH1000"}, ["body", "budget"], "unknown GPU 'H1000'"),
    ({**FLEET, "models": [{**FLEET["models"][0], "rate_rps": None}]}, ["body", "models", 0, "rate_rps"],
     "min-cost needs one per model"),
    ({**FLEET, "models": [{**FLEET["models"][0], "model": "/etc/passwd"}]}, ["body", "models", 0, "model"],
     "unknown model"),
    ({**FLEET, "models": [{**FLEET["models"][0], "workload": {"trace": "/etc/trace.csv"}}]},
     ["body", "models", 0, "workload", "trace"], "reads no files"),
    ({**FLEET, "models": [{**FLEET["models"][0], "workload": {"input_tokens": 100_000, "output_tokens": 10}}]},
     ["body", "models", 0, "workload"], "within the context of qwen3-8b"),
    ({**FLEET, "models": [FLEET["models"][0]] * 17}, ["body", "models"], "at most 16 items"),
    ({**FLEET, "time_limit_s": 61}, ["body", "time_limit_s"], "less than or equal to 60"),
]


@pytest.mark.parametrize(("body", "loc", "text"), FLEET_INVALID)
def test_invalid_fleets_get_422_naming_the_field(server, body, loc, text):
    status, payload = request(server.url + "/v1/fleets", "POST", body)
    assert status == 422, payload
    first = payload["detail"][0]
    assert first["loc"] == loc and text in first["msg"], first


def test_infeasible_fleet_is_a_documented_200(server):
    body = {**FLEET, "budget": "1xH100", "models": [{**FLEET["models"][0], "rate_rps": 5000}]}
    status, fleet = request(server.url + "/v1/fleets", "POST", body)
    assert status == 200 and fleet["status"] == "infeasible" and fleet["plans"] == [] and fleet["totals"] is None


LENGTH_ROUTING = {"model": "qwen3-8b", "budget": "8xH100+8xL40S", "workload": "chat", "rate_rps": 20,
                  "slo": FLEET_SLO, "time_limit_s": 5}


def test_length_routing_is_solve_route_by_length_over_http(server):
    status, routed = request(server.url + "/v1/length-routing", "POST", LENGTH_ROUTING)
    assert status == 200 and routed["kind"] == "length-routed" and routed["status"] == "optimal"
    assert routed["threshold_tokens"] is None and routed["classes"][0]["plan"]["pools"]  # one H100 serves it all
    assert [o["threshold_tokens"] for o in routed["options"]][0] is None and len(routed["options"]) == 7
    assert "over the thresholds tried" in routed["solver"]["proof"]


@pytest.mark.parametrize(("body", "loc", "text"), [
    ({**LENGTH_ROUTING, "rate_rps": None}, ["body", "rate_rps"], "the rate to serve"),
    ({**LENGTH_ROUTING, "model": "/etc/passwd"}, ["body", "model"], "unknown model"),
    ({**LENGTH_ROUTING, "workload": {"trace": "/etc/trace.csv"}}, ["body", "workload", "trace"], "reads no files"),
    ({**LENGTH_ROUTING, "workload": {"input_tokens": 100_000, "output_tokens": 10}}, ["body", "workload"],
     "within the context of qwen3-8b"),
    ({**LENGTH_ROUTING, "budget": "8xH1000"}, ["body", "budget"], "unknown GPU"),
])
def test_invalid_length_routing_gets_422(server, body, loc, text):
    status, payload = request(server.url + "/v1/length-routing", "POST", body)
    assert status == 422, payload
    first = payload["detail"][0]
    assert first["loc"] == loc and text in first["msg"], first


def test_solve_past_its_time_limit_returns_its_best_plan(server):
    body = {"model": "qwen3-32b", "budget": "512xH100+512xH200+512xB200", "time_limit_s": 0.05}
    status, plan = request(server.url + "/v1/solve", "POST", body)
    assert status == 200 and plan["status"] in ("timeout", "optimal", "feasible")
    assert plan["pools"] and plan["totals"]["gpus"] > 0 and "gap" in plan["solver"]


def test_estimate_layout_error_is_422(server):
    status, payload = request(server.url + "/v1/estimate", "POST", {
        "model": "qwen3-8b", "gpu": "H100", "isl": 1000, "osl": 200, "layout": {"tp_size": 4, "dcp_size": 3}})
    assert status == 422 and payload["detail"][0]["loc"][:2] == ["body", "layout"]


def test_concurrent_solves_while_health_stays_fast():
    settings = ServiceSettings(max_workers=3, max_pending=64)
    with BackgroundServer(create_app(settings, solve_fn=busy_solve)) as busy:
        request(busy.url + "/v1/solve", "POST", SOLVE)  # first job: workers import the solver
        health_latencies_s: list[float] = []
        done = threading.Event()

        def probe() -> None:
            while not done.is_set():
                start = time.perf_counter()
                assert request(busy.url + "/healthz", timeout_s=5)[0] == 200
                health_latencies_s.append(time.perf_counter() - start)
                time.sleep(0.02)

        prober = threading.Thread(target=probe)
        prober.start()
        start = time.perf_counter()
        try:
            with ThreadPoolExecutor(max_workers=6) as clients:
                results = list(clients.map(lambda _: request(busy.url + "/v1/solve", "POST", SOLVE), range(6)))
        finally:
            done.set()
            prober.join()
        elapsed_s = time.perf_counter() - start
    assert [status for status, _ in results] == [200] * 6
    assert all(plan["status"] in ("optimal", "timeout") and plan["pools"] for _, plan in results)  # timeout: a loaded CI
    assert elapsed_s >= 2 * BUSY_S  # six jobs on three workers: at least two rounds
    assert len(health_latencies_s) >= 5 and max(health_latencies_s) < 0.5


def test_serve_command_in_a_subprocess():
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = "import sys; from layoutopt.cli import main; sys.argv = ['layoutopt'] + sys.argv[1:]; main()"
    process = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", str(port), "--workers", "1",
                                "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, health = request(f"http://127.0.0.1:{port}/healthz", timeout_s=2)
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "layoutopt serve did not start within 60 s"
                time.sleep(0.2)
        assert status == 200 and health["workers"] == 1
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode is not None


def test_infeasible_solve_is_a_documented_200_plan(server):
    status, plan = request(server.url + "/v1/solve", "POST",
                           {"model": "qwen3-8b", "budget": "1xH100", "rate_rps": 5000, "objective": "min-cost",
                            "time_limit_s": 5})
    assert status == 200 and plan["status"] == "infeasible"
    assert plan["pools"] == [] and plan["totals"] is None and plan["latency"] is None
    assert any("5000 req/s" in reason for reason in plan["explanation"]["reasons"])


@pytest.mark.parametrize(("engine", "status"), [("vllm==0.13.0", 200), ("sglang==0.5.23", 200),
                                                ("vllm==9.9.9", 422), ("vllm; rm -rf /", 422)])
def test_estimate_takes_an_engine_release_as_the_cli_does(server, engine, status):
    answer, payload = request(server.url + "/v1/estimate", "POST", {
        "model": "qwen3-8b", "gpu": "H100", "engine": engine, "isl": 1000, "osl": 200, "layout": {"tp_size": 1},
        "concurrency": 8})
    assert answer == status, payload
    if status == 422:
        assert payload["detail"][0]["loc"][-1] == "engine"
