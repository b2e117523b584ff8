"""The process around a command: messages, exit statuses, start time, start-up garbage collection.

A leaf module (standard library and ``errors`` only), imported by ``launch``, ``cli``,
``commands``, ``daemon`` and ``driver``; ``commands`` passes ``end_startup`` to a run as the hook
``RunOptions.on_started``. ``guarded`` is the one place where a command's exceptions, Ctrl-C
included, become a message and an exit status.
"""

from __future__ import annotations

import os
import sys

from .errors import Interrupted, LomtreeError


def say(msg: str) -> None:
    """One line on stderr, flushed (a closed or missing stderr loses the line, nothing else)."""
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no stderr at all (None)
        pass


def exit_status(code) -> int:
    """The process exit status for ``SystemExit(code)``, as the interpreter computes it (a
    message is written to stderr with status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    say(str(code))
    return 1


def process_start_time() -> float:
    """This process's start (wall clock), so a report's elapsed time counts the start-up."""
    import time

    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - not Linux
        return time.time()


_GC_HELD = [False]


def hold_gc() -> None:
    """Start-up allocates many objects and no garbage: the cyclic collector is off until the
    command calls ``end_startup`` (about 55 collections, 10 ms, spared)."""
    import gc

    gc.disable()
    _GC_HELD[0] = True


def end_startup() -> None:
    """Called once a command has loaded what it needs (before its first example): the collector
    held by ``hold_gc`` runs again, and every object alive now moves to its permanent generation
    (``gc.freeze``), so later collections do not walk the modules and the model. Does nothing
    when the collector was not held (tests, library use)."""
    if _GC_HELD[0]:
        import gc

        _GC_HELD[0] = False
        gc.freeze()
        gc.enable()


def quiet_stdout() -> None:
    """Point fd 1 at /dev/null (a reader went away: the final flush must not fail again)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def fail(msg: str, code: int):
    say(f"error: {msg}")
    sys.exit(code)


def guarded(fn):
    """Run ``fn()``; its exceptions become one line on stderr and ``SystemExit``: a
    ``LomtreeError`` its exit code (1 bad data, 2 bad usage or model), a clean stop on a signal
    (``Interrupted``) 130/143, Ctrl-C elsewhere 130, a closed stdout 0 (quietly), ``OSError`` and
    ``MemoryError`` 1."""
    try:
        return fn()
    except Interrupted as e:
        say(f"interrupted by signal {e.signum}; stopped at an example boundary")
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
    except LomtreeError as e:
        fail(str(e), e.exit_code)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
    except MemoryError:
        # sizes are checked up front and expansions capped, so this is the machine's memory itself
        fail("out of memory: this machine could not allocate what the run needed (--bits, -k, "
             "--max-example-features and --threads set how much)", 1)
    except OSError as e:
        name = getattr(e, "filename", None)
        fail(f"{name}: {e.strerror or e}" if name else f"{e.strerror or e}", 1)


class StopFlag:
    """SIGINT/SIGTERM while installed set ``signum`` (the run stops at the next example boundary)."""

    def __init__(self):
        self.signum = 0
        self._old = {}

    def install(self):
        import signal

        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread
                pass

    def _handler(self, signum, frame):
        self.signum = signum

    def restore(self):
        import signal

        for s, h in self._old.items():
            signal.signal(s, h)
