"""Helpers of the service tests: stand-ins for API functions (module-level, so worker processes can
import them) and a loopback HTTP client.

A stub that is to be watched writes its process id into ``pid_dir`` first, so a test can tell
whether the worker running it was terminated; tests bind ``pid_dir`` and ``sleep_s`` with
``functools.partial`` (workers start from a fork server, so environment variables set by a test
would not reach them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

MAX_SLEEP_S = 60.0


def _announce(pid_dir: str | None) -> None:
    if pid_dir:
        Path(pid_dir, str(os.getpid())).write_text("running")


def sleepy(pid_dir: str | None = None, sleep_s: float = 30.0, **kwargs: Any) -> dict[str, Any]:
    """Sleeps ``sleep_s`` (at most 60 s), then answers."""
    _announce(pid_dir)
    time.sleep(min(sleep_s, MAX_SLEEP_S))
    return {"slept": True}


class _Infinite(BaseModel):
    ttft_ms: dict[str, float]


def infinite_estimate(**kwargs: Any) -> BaseModel:
    """An estimate whose TTFT is infinite, as an overloaded deployment's would be."""
    return _Infinite(ttft_ms={"p50": 10.0, "p90": float("inf")})


def slow_solve(pid_dir: str | None = None, sleep_s: float = 0.5, **kwargs: Any):
    """The real solve, after a pause: makes a sweep's progress observable cell by cell."""
    from layoutopt.optimizer.solve import solve

    _announce(pid_dir)
    time.sleep(min(sleep_s, MAX_SLEEP_S))
    return solve(**kwargs)


def slow_sweep(pid_dir: str | None = None, sleep_s: float = 0.5, *, spec: dict[str, Any],
               out_dir: str) -> dict[str, Any]:
    """The real sweep (serial, no plots) whose cells solve with ``slow_solve``."""
    import functools

    from layoutopt.sweep.run import sweep
    from layoutopt.sweep.spec import sweep_spec_from_dict

    result = sweep(sweep_spec_from_dict(spec), out_dir, executor="local", workers=1, plots=False,
                   base_dir=out_dir, solve_fn=functools.partial(slow_solve, pid_dir, sleep_s))
    return {"num_cells": result.num_cells, "num_errors": result.num_errors}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_pids(folder: Path, count: int = 1, timeout_s: float = 20.0) -> list[int]:
    """The first ``count`` pids announced in ``folder`` (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = sorted(int(p.name) for p in folder.iterdir())
        if len(pids) >= count:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"no worker announced itself in {folder} within {timeout_s} s")


def wait_until_gone(pid: int, timeout_s: float = 10.0) -> float:
    """Seconds until process ``pid`` ended; AssertionError if it outlives ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if not alive(pid):
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"worker {pid} still running {timeout_s} s after its work was stopped")


def call(url: str, method: str = "GET", body: object = None, raw: bytes | None = None, timeout_s: float = 60.0,
         chunked: bool = False) -> tuple[int, dict[str, str], object]:
    """(status, headers, parsed JSON body) of one HTTP request to a loopback ``url``."""
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1", "service tests talk to loopback only"
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"content-type": "application/json"}
        if chunked and data is not None:
            pieces = [data[i:i + 65536] for i in range(0, len(data), 65536)]
            connection.request(method, parts.path, body=iter(pieces), headers=headers, encode_chunked=True)
        else:
            connection.request(method, parts.path, body=data, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, \
            (json.loads(payload) if payload else None)
    finally:
        connection.close()


def evaluates_in_process() -> bool:
    """In a service worker: whether candidate evaluation stays in the worker (no processes of its own)."""
    from layoutopt.optimizer import workers

    return not workers._worker_processes_allowed


def deaf_sleep(sleep_s: float = 30.0) -> str:
    """Sleep with SIGTERM blocked, as a worker inside CP-SAT or numpy is: only SIGKILL stops it."""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    time.sleep(sleep_s)
    return "slept"


def quick() -> str:
    return "done"
