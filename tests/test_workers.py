"""The minimal thread pool (lomtree_cli.workers) that replaced concurrent.futures."""

import threading

import pytest

from lomtree_cli.workers import Pool


def test_results_come_back_per_job_and_errors_are_reraised():
    pool = Pool(2, "t")
    try:
        jobs = [pool.submit(lambda x: x * x, i) for i in range(50)]
        bad = pool.submit(lambda: 1 / 0)
        assert [j.result() for j in jobs] == [i * i for i in range(50)]
        with pytest.raises(ZeroDivisionError):
            bad.result()
    finally:
        pool.shutdown()


def test_jobs_run_on_the_pool_threads_in_parallel():
    pool = Pool(2, "lomtree-test")
    barrier = threading.Barrier(2, timeout=10)  # both jobs must be running at once to pass
    try:
        jobs = [pool.submit(lambda: (barrier.wait(), threading.current_thread().name)[1]) for _ in range(2)]
        names = sorted(j.result() for j in jobs)
        assert names == ["lomtree-test-0", "lomtree-test-1"]
    finally:
        pool.shutdown()


def test_cancel_skips_a_job_not_started_and_shutdown_joins():
    pool = Pool(1, "t")
    gate = threading.Event()
    ran = []
    first = pool.submit(gate.wait)
    second = pool.submit(ran.append, 1)
    second.cancel()
    gate.set()
    assert first.result() is True
    assert second.result() is None and ran == []
    pool.shutdown()
    assert all(not t.is_alive() for t in threading.enumerate() if t.name.startswith("t-"))
