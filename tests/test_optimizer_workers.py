"""optimizer.workers: parallel_map's results and order, one pool per worker_pool block."""

from __future__ import annotations

import gc
import os

import pytest

from layoutopt.optimizer import workers
from layoutopt.optimizer.evaluation import GPU_TASKS_PER_WORKER, _bundles
from layoutopt.optimizer.workers import parallel_map, worker_pool


def _pid_and_square(shared: int, task: int) -> tuple[int, int]:
    return os.getpid(), shared * task * task


def _fail_on_three(shared: int, task: int) -> int:
    if task == 3:
        raise ValueError("three")
    return task


def _pids(results) -> set[int]:
    return {pid for pid, _ in results}


def _run(tasks):
    return parallel_map(_pid_and_square, 2, tasks, tasks, parallel=True, workers=2)


def test_results_in_task_order_in_worker_processes():
    tasks = [3, 1, 4, 1, 5, 9, 2, 6]
    results = _run(tasks)
    assert [value for _, value in results] == [2 * t * t for t in tasks]
    assert os.getpid() not in _pids(results)


def test_one_pool_per_block_and_a_fresh_one_after():
    # The pool's own processes, not the pids that happened to run a task: an executor starts its
    # workers on demand, so under load one run's tasks may all land on a subset of them.
    with worker_pool():
        first = _pids(_run(list(range(8))))
        pool = workers._shared.pool
        processes = list(pool._processes.values())
        with worker_pool():  # a nested block shares the outer block's pool
            second = _pids(_run(list(range(8))))
            assert workers._shared.pool is pool
        third = _pids(_run(list(range(8))))
        assert workers._shared.pool is pool
        members = {p.pid for p in pool._processes.values()}
        assert first | second | third <= members
    assert not any(p.is_alive() for p in processes)  # the block's workers stopped with it
    assert workers._shared.pool is None and workers._shared.depth == 0
    after = _pids(_run(list(range(8))))
    assert os.getpid() not in after


def _threshold(shared: int, task: int) -> tuple[int, ...]:
    return gc.get_threshold()


def test_a_block_relaxes_the_collector_in_this_process_and_its_workers():
    before = gc.get_threshold()
    with worker_pool():
        assert gc.get_threshold() == workers.BLOCK_GC_THRESHOLD
        with worker_pool():
            pass
        assert gc.get_threshold() == workers.BLOCK_GC_THRESHOLD
        assert parallel_map(_threshold, 0, [1, 2], [1, 2], parallel=True, workers=2) == [
            workers.BLOCK_GC_THRESHOLD] * 2
    assert gc.get_threshold() == before
    assert parallel_map(_threshold, 0, [1, 2], [1, 2], parallel=True, workers=2) == [before] * 2


def test_calls_outside_a_block_start_their_own_workers():
    assert not _pids(_run(list(range(8)))) & _pids(_run(list(range(8))))


def test_a_failing_task_raises_and_the_block_pool_keeps_working():
    with worker_pool():
        with pytest.raises(ValueError, match="three"):
            parallel_map(_fail_on_three, None, [1, 2, 3, 4], [1, 2, 3, 4], parallel=True, workers=2)
        assert [v for _, v in _run([1, 2])] == [2, 8]
    assert workers._shared.pool is None


def test_in_process_when_not_parallel_or_single_worker():
    for parallel, count in ((False, 2), (True, 1)):
        results = parallel_map(_pid_and_square, 1, [1, 2, 3], [1, 2, 3], parallel=parallel, workers=count)
        assert results == [(os.getpid(), 1), (os.getpid(), 4), (os.getpid(), 9)]


class _Gpu:
    def __init__(self, name: str):
        self.name = name


def _jobs_and_groups(num_gpus: int):
    gpus = [_Gpu(f"gpu{k}") for k in range(num_gpus)]
    jobs = [(gpu, None, role, None) for gpu in gpus for role in ("prefill", "decode", "colocated")]
    return jobs, [[i] for i in range(len(jobs))]


def test_bundles_keep_a_gpu_types_groups_together_when_there_are_enough_types():
    jobs, groups = _jobs_and_groups(GPU_TASKS_PER_WORKER * 2)
    bundles = _bundles(groups, jobs, workers=2)
    assert len(bundles) == GPU_TASKS_PER_WORKER * 2
    assert all(len({jobs[groups[g][0]][0].name for g in bundle}) == 1 for bundle in bundles)
    assert sorted(g for bundle in bundles for g in bundle) == list(range(len(groups)))
    # Fewer GPU types than workers can share out: one group per task.
    assert _bundles(groups, jobs, workers=4) == [[g] for g in range(len(groups))]


def _table(model: str, gpu_names: tuple[str, ...]):
    from layoutopt.hardware_catalog.catalog import get_gpu
    from layoutopt.model_catalog.catalog import get_model
    from layoutopt.optimizer.enumeration import build_candidate_table
    from layoutopt.workloads.presets import preset_workload
    from layoutopt.workloads.slo import SLO

    gpus = [get_gpu(g) for g in gpu_names]
    return build_candidate_table(get_model(model), gpus, preset_workload("chat"),
                                 SLO(ttft_ms={"p90": 1000}, tpot_ms={"p90": 30}),
                                 gpu_limits={g.name: 16 for g in gpus}, max_usd_per_hour=None, min_rate_rps=None)


def test_a_table_from_worker_processes_equals_one_process(monkeypatch):
    from layoutopt.optimizer import evaluation

    gpus = ("H100", "B200", "L40S")
    monkeypatch.setattr(workers, "available_workers", lambda: 1)
    evaluation._cache.clear()
    serial = _table("qwen3-8b", gpus)
    monkeypatch.setattr(workers, "available_workers", lambda: 2)
    monkeypatch.setattr(evaluation, "MIN_PARALLEL_PROPOSALS", 0)
    monkeypatch.setattr(evaluation, "GPU_TASKS_PER_WORKER", 1)  # one task per GPU type
    for _ in range(2):
        evaluation._cache.clear()
        assert _table("qwen3-8b", gpus) == serial
        monkeypatch.setattr(evaluation, "GPU_TASKS_PER_WORKER", 100)  # then one task per group
