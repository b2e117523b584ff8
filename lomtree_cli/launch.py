"""The ``lomtree`` console entry point.

Fills closed descriptors 0-2, holds the garbage collector during start-up (``runtime.hold_gc``),
runs the click command group (``cli.main``; click and the command modules are imported here,
inside ``runtime.guarded``, so that a Ctrl-C while they load exits 130 like one during a run),
and ends the process without the interpreter's teardown (``_finish``).

Only the standard library and the leaf module ``runtime`` are imported at module level.
"""

from __future__ import annotations

import os
import sys

from .runtime import exit_status, guarded, hold_gc


def _finish(status: int) -> None:
    """End the process at once: the ``atexit`` handlers run and stdio is flushed, but not the
    interpreter's teardown of every module and object (20-30 ms per command, more than the
    predictions of a small file). Every file lomtree writes is closed (and a model fsync'ed)
    before the command returns, and its threads have ended or are idle daemons."""
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is not None:
        run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe (the command already saw it), None
            pass
    os._exit(status)


def closed_std_fds() -> list[int]:
    """Which of the descriptors 0, 1, 2 are closed (``<&-``, ``>&-``, ``2>&-``)."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    return closed


def fill_std_fds(closed: list[int]) -> None:
    """Put ``/dev/null`` on the closed descriptors 0-2, so that no file lomtree opens (a model,
    the predictions) gets number 1 or 2 and receives the messages meant for the terminal. A
    closed stdin or stdout stays ``None`` in ``sys`` (reading ``-`` or writing ``-p -`` is then
    an error naming it); a closed stderr becomes a sink: the run and its model are unaffected."""
    for fd in closed:
        try:
            got = os.open(os.devnull, os.O_RDWR)
        except OSError:
            return
        if got != fd:
            os.dup2(got, fd)
            os.close(got)
    if 2 in closed:
        try:
            sys.stderr = open(2, "w", closefd=False)
        except OSError:
            pass


def _run_click() -> None:
    from .cli import main as cli_main
    from .version import PROG

    cli_main(prog_name=PROG)


#: lomtree makes no BLAS calls worth a thread, and OpenBLAS's worker threads (started when numpy is
#: imported) spin for a while after start: on a 2-core machine that took CPU from the parser
#: thread. One BLAS thread for a command unless the user asked for more (set here, before numpy
#: is imported, and not by the package: a program that imports lomtree keeps its own).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def main() -> None:
    for var in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(var, "1")
    fill_std_fds(closed_std_fds())
    hold_gc()
    try:
        guarded(_run_click)
        status = 0
    except SystemExit as e:
        status = exit_status(e.code)
    _finish(status)


if __name__ == "__main__":
    main()
