"""A minimal thread pool for the parse workers and the parallel prediction parts.

``concurrent.futures`` would do, but importing it (with ``logging``, which it pulls in) costs about
6 ms of every command's start-up, a tenth of a short ``lomtree predict``; this is the part of it
lomtree uses: ``submit(fn, *args)`` returns a job whose ``result()`` waits for the return value or
re-raises the exception, ``cancel()`` drops a job that has not started, ``shutdown()`` lets the
threads finish the jobs already taken and joins them.
"""

from __future__ import annotations

import queue
import threading

_STOP = object()


class Job:
    """One submitted call; ``result()`` blocks until it ran."""

    __slots__ = ("fn", "args", "_done", "_value", "_error", "_cancelled")

    def __init__(self, fn, args):
        self.fn = fn
        self.args = args
        self._done = threading.Event()
        self._value = None
        self._error = None
        self._cancelled = False

    def run(self) -> None:
        if not self._cancelled:
            try:
                self._value = self.fn(*self.args)
            except BaseException as e:  # noqa: BLE001 - handed to result()
                self._error = e
        self.fn = self.args = None
        self._done.set()

    def cancel(self) -> None:
        """Skip the call if it has not started (``result()`` then returns None)."""
        self._cancelled = True

    def result(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class Pool:
    """``n`` daemon threads named ``name-i`` running submitted jobs in submission order."""

    def __init__(self, n: int, name: str):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(max(1, int(n)))]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self._q.get()
            if job is _STOP:
                return
            job.run()

    def submit(self, fn, *args) -> Job:
        job = Job(fn, args)
        self._q.put(job)
        return job

    def shutdown(self) -> None:
        """Stop the threads once the jobs queued before this call are done; wait for them."""
        for _ in self._threads:
            self._q.put(_STOP)
        for t in self._threads:
            t.join()
        self._threads = []
