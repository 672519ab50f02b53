"""The service's worker processes: they evaluate in-process, and one stopped at its deadline frees
its slot at once even when it cannot take SIGTERM (pebble kills it after ``workers.STOP_GRACE_S``)."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from layoutopt.service.workers import DeadlineExceeded, WorkerPool

import service_support

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork server and POSIX signals")


@pytest.fixture(scope="module")
def pool():
    workers = WorkerPool(max_workers=1, max_pending=10)
    workers.start()
    yield workers
    workers.stop()


def test_service_workers_evaluate_in_their_own_process(pool):
    assert asyncio.run(pool.run(service_support.evaluates_in_process, (), deadline_s=30.0)) is True


def test_a_worker_deaf_to_sigterm_is_replaced_right_after_its_deadline(pool):
    with pytest.raises(DeadlineExceeded):
        asyncio.run(pool.run(service_support.deaf_sleep, (30.0,), deadline_s=0.5))
    started = time.perf_counter()
    assert asyncio.run(pool.run(service_support.quick, (), deadline_s=30.0)) == "done"
    # The one worker was killed and replaced well within pebble's default 3 s SIGTERM grace.
    assert time.perf_counter() - started < 2.0
