"""Thousands of generated HTTP requests against every endpoint: no 500, no undocumented status, no NaN in JSON.

Starts the service on a free loopback port (real solver; short deadlines so slow valid requests
end as documented 504s) and sends ``--cases`` requests drawn from tests/service_fuzz_cases.py
(mutated valid bodies, raw junk, NaN/Infinity, huge integers, paths, deep nesting, job ids).
Prints the answers by status and every violation found (a 500, a status the OpenAPI document does
not list for the route, a non-standard JSON answer, an error without field, value and rule).

    python benchmarks/service_fuzz.py [--cases 3000] [--seed 0]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from service_fuzz_cases import check_answer, requests  # noqa: E402

from layoutopt.service import BackgroundServer, ServiceSettings, create_app  # noqa: E402

MAX_VIOLATIONS_SHOWN = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    limits = ServiceSettings(max_workers=args.workers, request_deadline_s=4.0, job_deadline_s=5.0,
                             max_sweep_cells=2, max_stored_jobs=4, max_pending=16)
    statuses: Counter[int] = Counter()
    by_path: Counter[str] = Counter()
    violations: list[str] = []
    start_s = time.perf_counter()
    with BackgroundServer(create_app(limits)) as server:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
        connection.request("GET", "/openapi.json")
        spec = json.loads(connection.getresponse().read())
        connection.close()

        @seed(args.seed)
        @settings(max_examples=args.cases, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(case=requests())
        def probe(case: tuple[str, str, bytes | None]) -> None:
            method, path, body = case
            connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
            try:
                connection.request(method, path, body=body, headers={"content-type": "application/json"})
                response = connection.getresponse()
                status, payload = response.status, response.read()
            finally:
                connection.close()
            statuses[status] += 1
            by_path[f"{method} {path.split('/v1/jobs/')[0] + ('/v1/jobs/{id}' if '/v1/jobs/' in path else '')}"] += 1
            problem = check_answer(spec, method, path, status, payload)
            if problem is not None:
                violations.append(problem)

        probe()
    wall_s = time.perf_counter() - start_s
    total = sum(statuses.values())
    print(f"{total} generated requests in {wall_s:.0f} s ({total / wall_s:.1f}/s)")
    print(f"answers by status: {dict(sorted(statuses.items()))}")
    print(f"requests by route: {dict(sorted(by_path.items()))}")
    print(f"violations (500, undocumented status, NaN in JSON, error without field/value/rule): {len(violations)}")
    for problem in violations[:MAX_VIOLATIONS_SHOWN]:
        print(f"  {problem}")


if __name__ == "__main__":
    main()
