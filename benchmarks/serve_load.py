"""Service under load: 200 concurrent solves, health checks all the while, and the deadline honoured.

Starts the service in a process of its own on a free loopback port (so the clients here do not
share its interpreter) and:

1. sends ``--requests`` (200) POST /v1/solve at once, a mix of models, budgets, rates and
   objectives. Requests beyond ``max_pending`` are answered 503 with ``Retry-After``, as
   documented, also when the queue ahead would keep a request past its deadline; each client then
   waits the ``Retry-After`` it got and tries again (at most ``--max-attempts`` times and
   ``--client-budget-s`` seconds). GET /healthz is probed every 20 ms throughout.
2. starts a second service whose ``request_deadline_s`` is ``--deadline-s`` (2 s) and sends solves
   that need longer (a stand-in solve that sleeps 30 s, and a real solve of a large catalog budget
   with a 60 s time limit): each must be answered 504 within the deadline plus ``DEADLINE_SLACK_S``,
   with its worker stopped (a following estimate is answered 200 by the replacement).

Prints solve latencies, answers by status, health latency percentiles, deadline answer times, and
whether the targets are met: no answers other than 200 and documented 503s; health p99 < 100 ms;
every deadline honoured.

    python benchmarks/serve_load.py [--requests 200] [--workers N] [--max-pending 64]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from layoutopt.service.settings import ServiceSettings, default_max_workers

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 120.0
# The service process: the settings as JSON in argv[1], the port in argv[2], "sleepy" in argv[3] for
# the stand-in solve that sleeps 30 s (tests/service_support.py).
SERVER_CODE = """
import functools, sys
sys.path.insert(0, {tests!r})
import uvicorn
from layoutopt.service import ServiceSettings, create_app
from layoutopt.service.server import uvicorn_options
settings = ServiceSettings.model_validate_json(sys.argv[1])
solve_fn = None
if sys.argv[3] == "sleepy":
    import service_support
    solve_fn = functools.partial(service_support.sleepy, None, 30.0)
uvicorn.run(create_app(settings, solve_fn=solve_fn), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            **uvicorn_options(settings))
""".format(tests=str(REPO / "tests"))


class ServerProcess:
    """The service in a child process on a free loopback port; stopped on exit."""

    def __init__(self, settings: ServiceSettings, solve: str = "real"):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.host = "127.0.0.1"
        self._args = [sys.executable, "-c", SERVER_CODE, settings.model_dump_json(), str(self.port), solve]

    def __enter__(self) -> "ServerProcess":
        self._process = subprocess.Popen(self._args, cwd=REPO)
        deadline_s = time.monotonic() + STARTUP_TIMEOUT_S
        while call(self.host, self.port, "GET", "/healthz")[0] != 200:
            if self._process.poll() is not None or time.monotonic() > deadline_s:
                self.__exit__()
                raise RuntimeError("the service did not start")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)

HEALTH_TARGET_P99_MS = 100.0
DEADLINE_SLACK_S = 1.0
REQUEST_TIMEOUT_S = 600.0
ESTIMATE = {"model": "qwen3-8b", "gpu": "H100", "isl": 1000, "osl": 200, "layout": {"tp_size": 1}, "concurrency": 8}
REQUEST_MIX = [
    {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 5, "objective": "min-cost"},
    {"model": "qwen3-32b", "budget": "16xH100", "rate_rps": 10, "objective": "min-cost"},
    {"model": "llama-3.1-70b", "budget": "16xH100+16xH200", "objective": "goodput-per-dollar"},
    {"model": "qwen3-8b", "budget": "8xA100+8xL40S", "workload": "code", "objective": "max-goodput"},
    {"model": "qwen3-32b", "budget": "$100/h", "rate_rps": 4, "objective": "min-cost", "workload": "rag"},
]


def call(host: str, port: int, method: str, path: str, body: dict | None = None
         ) -> tuple[int, float, dict[str, str], dict | None]:
    """(status, latency in s, headers, JSON body) of one request on a fresh loopback connection."""
    start_s = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"content-type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return response.status, time.perf_counter() - start_s, headers, json.loads(payload) if payload else None
    except OSError as error:
        return -1, time.perf_counter() - start_s, {}, {"error": str(error)}
    finally:
        connection.close()


def percentiles_ms(values_s: list[float]) -> str:
    if not values_s:
        return "no samples"
    values = np.asarray(values_s) * 1000
    return (f"p50 {np.percentile(values, 50):8.1f}  p90 {np.percentile(values, 90):8.1f}  "
            f"p99 {np.percentile(values, 99):8.1f}  max {values.max():8.1f} ms")


def solve_with_retries(host: str, port: int, body: dict, max_attempts: int, budget_s: float) -> dict:
    """One client: POST /v1/solve, honouring Retry-After on 503 (bounded attempts and time)."""
    start_s = time.perf_counter()
    answers: list[int] = []
    for _ in range(max_attempts):
        status, _, headers, payload = call(host, port, "POST", "/v1/solve", body)
        answers.append(status)
        wait_s = float(headers.get("retry-after", "1"))
        if status != 503 or time.perf_counter() - start_s + wait_s > budget_s:
            break
        time.sleep(wait_s)
    return {"answers": answers, "latency_s": time.perf_counter() - start_s, "last": payload}


def load_phase(args: argparse.Namespace) -> bool:
    bodies = [{**REQUEST_MIX[i % len(REQUEST_MIX)], "time_limit_s": args.time_limit_s} for i in range(args.requests)]
    settings = ServiceSettings(max_workers=args.workers, max_pending=args.max_pending, retry_after_s=args.retry_after_s)
    with ServerProcess(settings) as server:
        host, port = server.host, server.port
        for body in REQUEST_MIX:  # warm the workers' catalog caches
            call(host, port, "POST", "/v1/solve", {**body, "time_limit_s": args.time_limit_s})
        health_s: list[float] = []
        health_errors = 0
        done = threading.Event()

        def probe() -> None:
            nonlocal health_errors
            deadline_s = time.monotonic() + REQUEST_TIMEOUT_S
            while not done.is_set() and time.monotonic() < deadline_s:
                status, latency_s, _, _ = call(host, port, "GET", "/healthz")
                health_s.append(latency_s)
                health_errors += status != 200
                time.sleep(0.02)

        prober = threading.Thread(target=probe)
        prober.start()
        start_s = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.requests) as clients:
            results = list(clients.map(partial(solve_with_retries, host, port, max_attempts=args.max_attempts,
                                               budget_s=args.client_budget_s), bodies))
        wall_s = time.perf_counter() - start_s
        done.set()
        prober.join()
    answers = Counter(status for r in results for status in r["answers"])
    final = Counter(r["answers"][-1] for r in results)
    errors = [r for r in results if any(status not in (200, 503) for status in r["answers"])]
    unserved = [r for r in results if r["answers"][-1] != 200]
    plan_statuses = Counter(r["last"]["status"] for r in results if r["answers"][-1] == 200)
    print(f"phase 1: {args.requests} concurrent solves on {args.workers} worker processes, max_pending "
          f"{settings.pending_limit}: {wall_s:.1f} s wall, {args.requests / wall_s:.2f} solves/s")
    print(f"  answers by status (every attempt) {dict(sorted(answers.items()))}; final {dict(sorted(final.items()))}")
    print(f"  plan statuses {dict(plan_statuses)}")
    print(f"  solve latency (incl. waits after 503)  {percentiles_ms([r['latency_s'] for r in results])}")
    print(f"  errors (answers other than 200 and 503): {len(errors)}"
          + (f": {[r['answers'] for r in errors[:3]]} {[r['last'] for r in errors[:1]]}" if errors else ""))
    print(f"  unserved after {args.max_attempts} attempts or {args.client_budget_s:g} s: {len(unserved)}")
    print(f"  health latency  {percentiles_ms(health_s)}  ({len(health_s)} probes, {health_errors} errors)")
    p99_ms = float(np.percentile(np.asarray(health_s) * 1000, 99)) if health_s else float("inf")
    ok_errors = not errors and not unserved
    ok_health = p99_ms < HEALTH_TARGET_P99_MS and health_errors == 0
    print(f"  targets: 0 errors other than documented 503s {'met' if ok_errors else 'MISSED'}; health p99 < "
          f"{HEALTH_TARGET_P99_MS:.0f} ms {'met' if ok_health else 'MISSED'} ({p99_ms:.1f} ms)")
    return ok_errors and ok_health


def deadline_phase(args: argparse.Namespace) -> bool:
    settings = ServiceSettings(max_workers=1, request_deadline_s=args.deadline_s)
    slow = {"model": "qwen3-32b", "budget": "512xH100+512xH200+512xB200+512xA100", "time_limit_s": 60}
    quick = {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 2, "objective": "min-cost", "time_limit_s": 5}
    rows: list[tuple[str, int, float]] = []
    with ServerProcess(settings, solve="sleepy") as server:
        for _ in range(3):
            status, latency_s, _, _ = call(server.host, server.port, "POST", "/v1/solve", quick)
            rows.append(("stand-in solve sleeping 30 s", status, latency_s))
    with ServerProcess(settings) as server:
        status, latency_s, _, _ = call(server.host, server.port, "POST", "/v1/solve", slow)
        rows.append(("real solve, 2048 GPUs of 4 types, time_limit_s 60", status, latency_s))
        # An estimate (milliseconds of work) shows the stopped worker was replaced.
        status, latency_s, _, payload = call(server.host, server.port, "POST", "/v1/estimate", ESTIMATE)
        after = (status, latency_s, payload.get("ttft_ms", {}).get("p90") if isinstance(payload, dict) else None)
    print(f"phase 2: request_deadline_s {args.deadline_s:g}")
    honoured = True
    for name, status, latency_s in rows:
        # A real solve may legitimately finish in time (200); anything slower must be a 504 at the deadline.
        ok = (status == 504 and latency_s <= args.deadline_s + DEADLINE_SLACK_S) or \
             (status == 200 and latency_s <= args.deadline_s + DEADLINE_SLACK_S)
        honoured &= ok and not (name.startswith("stand-in") and status != 504)
        print(f"  {name}: {status} after {latency_s:.2f} s {'ok' if ok else 'MISSED'}")
    print(f"  next request (an estimate) on the replaced worker: {after[0]} after {after[1]:.2f} s, "
          f"TTFT p90 {after[2]} ms")
    honoured &= after[0] == 200
    print(f"  target: deadline honoured (504 within {args.deadline_s:g} + {DEADLINE_SLACK_S:g} s, worker "
          f"replaced) {'met' if honoured else 'MISSED'}")
    return honoured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=max(2, default_max_workers()), help="solver worker processes")
    parser.add_argument("--max-pending", type=int, default=None, help="default: the service's (5 per worker)")
    parser.add_argument("--retry-after-s", type=int, default=2)
    parser.add_argument("--max-attempts", type=int, default=200)
    parser.add_argument("--client-budget-s", type=float, default=1200.0, help="a client gives up after this")
    parser.add_argument("--time-limit-s", type=float, default=5.0)
    parser.add_argument("--deadline-s", type=float, default=2.0)
    parser.add_argument("--skip-load", action="store_true", help="only the deadline phase")
    args = parser.parse_args()
    met = ([] if args.skip_load else [load_phase(args)]) + [deadline_phase(args)]
    print("all targets met" if all(met) else "some targets MISSED")


if __name__ == "__main__":
    main()
