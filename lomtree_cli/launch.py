"""The ``lomtree`` console entry point: through a warm ``lomtree serve`` server, or in-process.

With ``LOMTREE_SERVER`` naming the socket of a running ``lomtree serve``, a command is handed to
the server instead of starting numpy and numba here (about 0.5 s): this module sends the argument
list, working directory, umask, environment and its own file descriptors 0, 1 and 2 over the Unix
socket (``SCM_RIGHTS``); the server forks a child that has every kernel loaded already, the child
runs the command on those descriptors (so pipes, files and terminals behave as in-process), and
the exit status comes back here. SIGINT, SIGTERM and SIGHUP received here are passed on to the
child, which stops at an example boundary as usual. Without a server (variable unset, no socket,
connection refused) the command runs in this process, unchanged. ``lomtree serve`` itself and
``lomtree --help`` never go through a server.

In-process, a ``train``/``predict`` command line that ``argv.parse`` can read runs without click
(``run_parsed``: 25-35 ms less start-up); anything else, and every command with
``LOMTREE_CLICK=1``, goes through click (``cli.main``) as before.

Only the standard library is imported here, so the hand-off costs what starting Python costs.
The wire format (both directions, in ``server.py``): client -> server one message of a 4-byte
big-endian length and that many bytes of JSON (``argv``, ``cwd``, ``umask``, ``env``, ``start``)
with the three descriptors attached; server -> client the child's pid, then its exit status, each
a 4-byte big-endian signed int.
"""

from __future__ import annotations

import os
import sys

#: environment variable naming the server's socket
SERVER_ENV = "LOMTREE_SERVER"


def listening(path: str) -> bool:
    """True when a server accepts connections at ``path`` (the probe connects and closes; the
    server's child sees no request and ends quietly)."""
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _recv_int(sock) -> int | None:
    import struct

    buf = b""
    while len(buf) < 4:
        try:
            part = sock.recv(4 - len(buf))
        except InterruptedError:
            continue
        if not part:
            return None
        buf += part
    return struct.unpack("!i", buf)[0]


def process_start_time() -> float:
    """This process's start (wall clock), so a report's elapsed time counts the client's start-up."""
    import time

    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - not Linux
        return time.time()


def run_via_server(path: str, argv: list[str]) -> int | None:
    """Run ``lomtree argv`` in the server at ``path``; its exit status, or None if no server."""
    import json
    import signal
    import socket
    import struct

    pid = None
    pending: list[int] = []

    def forward(signum, _frame):
        if pid is None:  # not handed over yet: passed on once the child is known
            pending.append(signum)
            return
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, forward) for s in signals}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        umask = os.umask(0o022)
        os.umask(umask)
        msg = json.dumps({"argv": argv, "cwd": os.getcwd(), "umask": umask, "env": dict(os.environ),
                          "start": process_start_time()}).encode()
        socket.send_fds(sock, [struct.pack("!I", len(msg)) + msg], [0, 1, 2])
        pid = _recv_int(sock)
    except OSError:  # no server, a stale socket, or a closed descriptor 0-2: run in-process
        pid = None
    if pid is None:
        sock.close()
        for s, h in old.items():
            signal.signal(s, h)
        if pending:  # interrupted before anything ran
            sys.stderr.write("interrupted\n")
            return 128 + pending[0]
        return None
    for signum in pending:
        forward(signum, None)
    code = _recv_int(sock)
    sock.close()
    if code is None:
        sys.stderr.write("error: the lomtree server's child ended without an exit status\n")
        return 1
    return code


def exit_status(code) -> int:
    """The process exit status for ``SystemExit(code)``, as the interpreter computes it (a
    message is written to stderr with status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except (OSError, ValueError):
        pass
    return 1


_GC_HELD = [False]


def end_startup() -> None:
    """Called by a command once it has imported and loaded what it needs (before its first
    example): the cyclic garbage collector, held off by ``main`` during start-up, runs again, and
    every object alive now moves to its permanent generation (``gc.freeze``), so later
    collections do not walk the modules and the model. Does nothing when ``main`` did not hold it
    (tests, the server)."""
    if _GC_HELD[0]:
        import gc

        _GC_HELD[0] = False
        gc.freeze()
        gc.enable()


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


def _start_predict_early(params: dict) -> None:
    """``predict`` on regular files (its command line read by ``argv.parse``): the parser starts
    now (``driver.start_predict_early``), before the model loads. Not for stdin or ``--flush``;
    ``LOMTREE_EARLY_PARSE=0`` turns it off; any failure here is left for the command itself to
    meet and report."""
    if os.environ.get("LOMTREE_EARLY_PARSE", "1") == "0":
        return
    inputs = list(params["inputs"])
    if params["flush"] or not inputs or not all(p != "-" and os.path.isfile(p) for p in inputs):
        return
    try:
        from .driver import start_predict_early

        start_predict_early(params["model"], inputs, params["skip_invalid"], params["chunk_bytes"],
                            params["threads"], params["max_line_bytes"])
    except Exception:  # noqa: BLE001 - the command reports real problems itself
        pass


def run_parsed(command: str, params: dict, given: set) -> None:
    """Run ``train``/``predict`` from ``argv.parse``'s reading of its command line (no click).
    Like a click command it returns on success and raises ``SystemExit`` otherwise."""
    from . import commands
    from .driver import process_start_time

    start = process_start_time()
    params = dict(params, progress_interval=commands.progress_interval(params["progress_interval"]))
    if command == "predict":
        _start_predict_early(params)
        commands.run_predict(params, start)
    else:
        commands.run_train(params, given, start, warn=say)


def say(msg: str) -> None:
    """One line on stderr, flushed (what ``click.echo(msg, err=True)`` does with plain text)."""
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no stderr at all (None)
        pass


def _parse_argv(argv: list[str]):
    """``argv.parse``'s reading of a ``train``/``predict`` command line, or None (click reads it).
    ``LOMTREE_CLICK=1`` always leaves it to click."""
    if not argv or argv[0] not in ("train", "predict") or os.environ.get("LOMTREE_CLICK", "0") == "1":
        return None
    try:
        from .argv import parse

        return parse(argv[0], argv[1:])
    except Exception:  # noqa: BLE001 - click reads it and reports any problem
        return None


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


def main() -> None:
    path = os.environ.get(SERVER_ENV)
    argv = sys.argv[1:]
    closed = closed_std_fds()
    fill_std_fds(closed)
    if path and not closed and argv and argv[0] not in ("serve", "-h", "--help", "--version"):
        code = run_via_server(path, argv)
        if code is not None:
            sys.exit(code)
    # start-up allocates many objects and no garbage: about 55 collections (10 ms) are spared
    import gc

    gc.disable()
    _GC_HELD[0] = True
    try:
        parsed = _parse_argv(argv)
        if parsed is not None:
            run_parsed(argv[0], *parsed)
        else:
            from .cli import main as cli_main

            cli_main(prog_name="lomtree")
        status = 0
    except SystemExit as e:
        status = exit_status(e.code)
    except KeyboardInterrupt:  # Ctrl-C while the modules load, before a command guards itself
        say("interrupted")
        status = 130
    _finish(status)


if __name__ == "__main__":
    main()
