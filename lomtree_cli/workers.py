"""Threads: a minimal pool for the parse workers and the parallel prediction parts, and ``prefetch``,
the parser thread that runs ahead of learning.

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


_END = object()


class Prefetch:
    """The iterator ``prefetch`` returns: iterate it once; ``close()`` stops the thread even when
    the iteration never began (e.g. the model failed to load while the parser ran ahead).
    ``should_stop`` may be replaced until the iteration begins."""

    def __init__(self, gen, halt, should_stop=None):
        self._gen = gen
        self._halt = halt
        self.should_stop = should_stop

    def __iter__(self):
        return self._gen

    def close(self):
        if self._halt is not None:
            self._halt.set()
        close = getattr(self._gen, "close", None)  # a plain iterator with LOMTREE_THREADS=0
        if close is not None:
            close()


def prefetch(iterable, depth: int = 2, should_stop=None, eager: bool = False, name: str = "lomtree-parser"):
    """Iterate ``iterable`` in a background thread, up to ``depth`` items ahead (VW's parser thread).

    The parse kernels and the reductions' chunk kernels are compiled with ``nogil=True``, and
    gzip/bz2/lzma release the GIL while decompressing, so parsing chunk i+1 overlaps learning on
    chunk i on a second core. Items arrive in order; an exception in the producer (e.g. an
    ``InputError``) is raised here, after the items before it. ``should_stop()`` is polled while
    waiting so a signal ends the wait. ``eager``: the thread starts now, not at the first item
    asked for (``predict`` parses while the model loads). ``LOMTREE_THREADS=0`` turns the thread
    off (debugging).
    """
    import os

    if os.environ.get("LOMTREE_THREADS", "1") == "0":
        return Prefetch(iter(iterable), None, should_stop)
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    halt = threading.Event()

    def put(item):
        while not halt.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in iterable:
                if not put((item, None)):
                    return
            put((_END, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put((_END, e))

    t = threading.Thread(target=work, name=name, daemon=True)

    def drain():
        if not t.is_alive() and t.ident is None:
            t.start()
        try:
            while True:
                try:
                    item, err = q.get(timeout=0.2)
                except queue.Empty:
                    if handle.should_stop is not None and handle.should_stop():
                        return
                    continue
                if item is _END:
                    if err is not None:
                        raise err
                    return
                yield item
        finally:
            halt.set()
            t.join(timeout=2.0)
            # (at interpreter exit a daemon thread ends where it stands: its generator stays
            # "running" and cannot be closed)
            if not t.is_alive() and hasattr(iterable, "close") and not getattr(iterable, "gi_running", False):
                iterable.close()

    handle = Prefetch(drain(), halt, should_stop)
    if eager:
        t.start()
    return handle
