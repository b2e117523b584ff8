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
        except (OSError, ValueError):  # a closed pipe: the command already saw it
            pass
    os._exit(status)


#: ``predict``'s options for ``scan_predict``: option -> (takes a value, what it sets or None).
#: tests/test_launch.py checks this table against the click command.
PREDICT_OPTIONS = {
    "-i": (True, "model"), "--initial-model": (True, "model"), "--model": (True, "model"),
    "-p": (True, None), "--predictions": (True, None), "--top-k": (True, None),
    "--threads": (True, "threads"), "-P": (True, None), "--progress-interval": (True, None),
    "--report": (True, None), "--chunk-bytes": (True, "chunk_bytes"),
    "--probabilities": (False, None), "--flush": (False, "flush"), "--quiet": (False, None),
    "--progress": (False, None), "--skip-invalid": (False, "skip_invalid"),
    "--skip_invalid": (False, "skip_invalid"),
}


def scan_predict(args: list[str]) -> dict | None:
    """What a ``predict`` command line asks for, read without click: {model, inputs,
    skip_invalid, chunk_bytes, threads}, or None when anything is unusual (an unknown option,
    ``--``, stdin, ``--flush``, an input that is not a regular file, a value click would reject).
    None only means no early start; click reads the command line in any case."""
    found = {"model": None, "threads": 0, "chunk_bytes": 1 << 20, "flush": False, "skip_invalid": False}
    inputs = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-") or a == "-":
            inputs.append(a)
            continue
        name, eq, value = a.partition("=")
        if not eq and name not in PREDICT_OPTIONS and len(a) > 2 and a[:2] in PREDICT_OPTIONS:
            name, value, eq = a[:2], a[2:], "="  # -iMODEL
        spec = PREDICT_OPTIONS.get(name)
        if spec is None:
            return None
        takes_value, sets = spec
        if takes_value and not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        elif not takes_value and eq:
            return None
        if sets is None:
            continue
        if not takes_value:
            found[sets] = True
        elif sets == "model":
            found["model"] = value
        else:
            try:
                found[sets] = int(value)
            except ValueError:
                return None
    if (found["model"] is None or found["flush"] or not inputs or found["threads"] < 0
            or found["chunk_bytes"] < 64 or not all(os.path.isfile(p) for p in inputs)):
        return None
    return {"model": found["model"], "inputs": inputs, "skip_invalid": found["skip_invalid"],
            "chunk_bytes": found["chunk_bytes"], "threads": found["threads"]}


def _start_predict_early(args: list[str]) -> None:
    """``predict`` on files: the parser starts now (``driver.start_predict_early``), not after
    click and the model. ``LOMTREE_EARLY_PARSE=0`` turns it off; any failure here is left for
    the command itself to meet and report."""
    if os.environ.get("LOMTREE_EARLY_PARSE", "1") == "0":
        return
    try:
        scan = scan_predict(args)
        if scan is not None:
            from .driver import start_predict_early

            start_predict_early(scan["model"], scan["inputs"], scan["skip_invalid"], scan["chunk_bytes"],
                                scan["threads"])
    except Exception:  # noqa: BLE001 - the command reports real problems itself
        pass


def main() -> None:
    path = os.environ.get(SERVER_ENV)
    argv = sys.argv[1:]
    if path and argv and argv[0] not in ("serve", "-h", "--help", "--version"):
        code = run_via_server(path, argv)
        if code is not None:
            sys.exit(code)
    # start-up allocates many objects and no garbage: about 55 collections (10 ms) are spared
    import gc

    gc.disable()
    _GC_HELD[0] = True
    if argv and argv[0] == "predict":
        _start_predict_early(argv[1:])
    from .cli import main as cli_main

    try:
        cli_main(prog_name="lomtree")
        status = 0
    except SystemExit as e:
        status = exit_status(e.code)
    _finish(status)


if __name__ == "__main__":
    main()
