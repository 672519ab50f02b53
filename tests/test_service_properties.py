"""Property tests over every HTTP endpoint: generated requests never get a 500 or an undocumented status.

A few hundred generated requests (``service_fuzz_cases``) against a real service (real solver,
short deadlines so a slow valid request ends as a documented 504); benchmarks/service_fuzz.py
runs thousands. Every answer is standard JSON (no NaN/Infinity), every error names the field,
the value and the rule.
"""

from __future__ import annotations

import http.client

import pytest
from hypothesis import HealthCheck, given, settings
from service_fuzz_cases import check_answer, requests
from service_support import call

from layoutopt.service import BackgroundServer, ServiceSettings, create_app

NUM_CASES = 200


@pytest.fixture(scope="module")
def server():
    limits = ServiceSettings(max_workers=2, request_deadline_s=4.0, job_deadline_s=5.0, max_sweep_cells=2,
                             max_stored_jobs=4, max_pending=16)
    with BackgroundServer(create_app(limits)) as running:
        running.spec = call(running.url + "/openapi.json")[2]
        yield running


def send(server, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@settings(max_examples=NUM_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(case=requests())
def test_every_answer_is_documented(server, case):
    method, path, body = case
    status, payload = send(server, method, path, body)
    problem = check_answer(server.spec, method, path, status, payload)
    assert problem is None, problem
