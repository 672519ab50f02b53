"""Service under load: 50 concurrent solve requests, with health checks probed all the while.

Starts the service on a free loopback port (uvicorn in a thread, solves in worker processes),
sends 50 POST /v1/solve requests at once (a mix of models, budgets, rates and objectives), and
probes GET /healthz every 20 ms until they are all answered. Prints solve latency percentiles,
errors, throughput, and health-check latency percentiles.

    python benchmarks/serve_load.py [--requests 50] [--workers N]

Targets (issue 8): no errors; health checks answered within 100 ms while loaded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from layoutopt.service import BackgroundServer, ServiceSettings, create_app
from layoutopt.service.app import default_max_workers

HEALTH_TARGET_MS = 100.0
REQUEST_MIX = [
    {"model": "qwen3-8b", "budget": "8xH100", "rate_rps": 5, "objective": "min-cost"},
    {"model": "qwen3-32b", "budget": "16xH100", "rate_rps": 10, "objective": "min-cost"},
    {"model": "llama-3.1-70b", "budget": "16xH100+16xH200", "objective": "goodput-per-dollar"},
    {"model": "qwen3-8b", "budget": "8xA100+8xL40S", "workload": "code", "objective": "max-goodput"},
    {"model": "qwen3-32b", "budget": "$100/h", "rate_rps": 4, "objective": "min-cost", "workload": "rag"},
]


def call(host: str, port: int, method: str, path: str, body: dict | None = None) -> tuple[int, float, dict | None]:
    """(status, latency in s, JSON body) of one request on a fresh connection."""
    start_s = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=120)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"content-type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        return response.status, time.perf_counter() - start_s, json.loads(payload) if payload else None
    except OSError as error:
        return -1, time.perf_counter() - start_s, {"error": str(error)}
    finally:
        connection.close()


def percentiles_ms(values_s: list[float]) -> str:
    values = np.asarray(values_s) * 1000
    return (f"p50 {np.percentile(values, 50):8.1f}  p90 {np.percentile(values, 90):8.1f}  "
            f"p99 {np.percentile(values, 99):8.1f}  max {values.max():8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--workers", type=int, default=default_max_workers(), help="solver worker processes")
    parser.add_argument("--time-limit-s", type=float, default=10.0)
    args = parser.parse_args()
    bodies = [{**REQUEST_MIX[i % len(REQUEST_MIX)], "time_limit_s": args.time_limit_s} for i in range(args.requests)]
    settings = ServiceSettings(max_workers=args.workers)
    with BackgroundServer(create_app(settings)) as server:
        host, port = server.host, server.port
        for body in REQUEST_MIX:  # warm the workers: imports and catalog caches
            call(host, port, "POST", "/v1/solve", {**body, "time_limit_s": args.time_limit_s})
        health_s: list[float] = []
        health_errors = 0
        done = threading.Event()

        def probe() -> None:
            nonlocal health_errors
            while not done.is_set():
                status, latency_s, _ = call(host, port, "GET", "/healthz")
                health_s.append(latency_s)
                health_errors += status != 200
                time.sleep(0.02)

        prober = threading.Thread(target=probe)
        prober.start()
        start_s = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.requests) as clients:
            results = list(clients.map(lambda body: call(host, port, "POST", "/v1/solve", body), bodies))
        wall_s = time.perf_counter() - start_s
        done.set()
        prober.join()
    errors = [(status, payload) for status, _, payload in results if status != 200]
    statuses: dict[str, int] = {}
    for status, _, payload in results:
        if status == 200:
            statuses[payload["status"]] = statuses.get(payload["status"], 0) + 1
    print(f"{args.requests} concurrent solves on {args.workers} worker processes: {wall_s:.1f} s wall, "
          f"{args.requests / wall_s:.2f} solves/s; plan statuses {statuses}")
    print(f"solve latency   {percentiles_ms([latency for _, latency, _ in results])}")
    print(f"errors          {len(errors)}" + (f": {errors[:3]}" if errors else ""))
    print(f"health latency  {percentiles_ms(health_s)}  ({len(health_s)} probes, {health_errors} errors)")
    healthy = max(health_s) * 1000 <= HEALTH_TARGET_MS and health_errors == 0
    print(f"targets: no errors {'met' if not errors else 'MISSED'}; health within {HEALTH_TARGET_MS:.0f} ms "
          f"{'met' if healthy else 'MISSED'}")


if __name__ == "__main__":
    main()
