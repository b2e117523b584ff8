"""``lomtree serve``: a warm process that runs lomtree commands for ``launch.py`` clients.

A lomtree command spends about 0.5 s before it reads a line: importing numpy and numba, and
loading each compiled kernel from numba's cache. That is most of a run on files of a few thousand
lines (Sector's test file takes VW 0.2 s in all). The server pays it once: it imports everything,
runs one tiny train / predict / inspect per reduction and input format so that every kernel is
loaded, then listens on a Unix socket. For each connection it forks; the child (a copy of the warm
process) takes the client's descriptors 0-2, working directory, umask and environment, runs the
command exactly as ``lomtree`` would (same click entry point, same messages and exit statuses),
and reports the exit status. Models are not cached between commands: each command reads its files
afresh, so a server never answers from stale data.

Choices:

* Unix socket in a directory only the user can enter (default ``/tmp/lomtree-<uid>/server.sock``,
  mode 0700, socket 0600), and connections from another uid (``SO_PEERCRED``) are refused: the
  server runs commands with its owner's rights only for its owner.
* fork per command, no threads in the server (fork copies only the calling thread, so none may
  hold a lock): the warm-up's threads (parser, prediction pool) have ended before it listens.
* Environment variables read at import time (``NUMBA_*``, ``OPENBLAS_NUM_THREADS``,
  ``LOMTREE_NUMBA_FULL_REFRESH``) are the server's; those read while running (``LOMTREE_THREADS``)
  are the client's, since the child takes the client's environment.
* ``--idle-timeout S`` ends the server after S seconds without a command (0: never); SIGINT or
  SIGTERM end it at once; children still running finish their commands.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
import time

from .errors import ConfigError
from .launch import end_startup, exit_status, listening


def default_socket_path() -> str:
    return os.path.join(tempfile.gettempdir(), f"lomtree-{os.getuid()}", "server.sock")


# ---------------------------------------------------------------------------------------------
# warm-up

def _warm_commands(d: str) -> list[list[str]]:
    vw, svm = os.path.join(d, "w.vw"), os.path.join(d, "w.svm")
    lines = [f"{1 + i % 5} |a f{i % 7}:0.5 g{i % 3} |b {i % 11}:1.5" for i in range(40)]
    with open(vw, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(svm, "w") as f:
        f.write("".join(f"{1 + i % 5} {1 + i % 7}:0.5 {9 + i % 3}:1\n" for i in range(40)))
    from .reductions.base import REGISTRY

    cmds = []
    for r in REGISTRY:
        m = os.path.join(d, f"{r}.lt")
        preds = os.path.join(d, f"{r}.preds")
        cmds += [["train", "-r", r, "-k", "5", "-b", "18", vw, "-f", m, "-p", preds, "--quiet"],
                 ["train", "-r", r, "-k", "5", "-b", "18", "--format", "libsvm", svm, "--passes", "2",
                  "-c", os.path.join(d, f"{r}.cache"), "-f", m + "2", "--quiet"],
                 ["predict", "-i", m, vw, "-p", preds, "--quiet"],
                 ["inspect", m]]
    for r in ("cpt", "plt", "mtree"):  # their top-k kernels (probabilities and --top-k)
        cmds.append(["predict", "-i", os.path.join(d, f"{r}.lt"), vw, "-p", os.path.join(d, "p"),
                     "--probabilities", "--quiet"])
        cmds.append(["predict", "-i", os.path.join(d, f"{r}.lt"), vw, "-p", os.path.join(d, "p"), "--top-k", "3",
                     "--quiet"])
    return cmds


def warm() -> None:
    """Load every kernel a command uses: tiny runs of each reduction, output discarded."""
    from .cli import main as cli_main

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with tempfile.TemporaryDirectory(prefix="lomtree-warm-") as d:
            for cmd in _warm_commands(d):
                try:
                    cli_main(args=cmd, prog_name="lomtree", standalone_mode=True)
                except SystemExit:
                    pass
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# the child: one command

class _NoRequest(Exception):
    """The peer closed without sending a command (a probe for a live server)."""


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if not data:
        raise _NoRequest
    if len(data) < 4 or len(fds) != 3:
        raise ConfigError("malformed request")
    (n,) = struct.unpack("!I", data[:4])
    body = bytearray(data[4:])
    while len(body) < n:
        part = conn.recv(min(1 << 16, n - len(body)))
        if not part:
            raise ConfigError("truncated request")
        body += part
    return json.loads(body.decode()), fds


def _new_stdio() -> None:
    """Python-level stdio on the client's descriptors, buffered as a fresh interpreter's would be."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    out = io.FileIO(1, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(out), encoding="utf-8", line_buffering=out.isatty())
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)


def _child(conn: socket.socket) -> None:
    """Run one client's command; never returns."""
    status = 1
    try:
        req, fds = _recv_request(conn)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _new_stdio()
        os.chdir(req["cwd"])
        os.umask(int(req["umask"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in req["env"].items()})
        from . import driver
        from .cli import main as cli_main

        driver.START_TIME_OVERRIDE = float(req["start"])
        conn.sendall(struct.pack("!i", os.getpid()))
        try:
            cli_main(args=[str(a) for a in req["argv"]], prog_name="lomtree", standalone_mode=True)
            status = 0
        except SystemExit as e:
            status = exit_status(e.code)
    except _NoRequest:
        status = 0
    except BaseException as e:  # noqa: BLE001 - reported to the client, never a traceback
        try:
            os.write(2, f"error: lomtree server: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            conn.sendall(struct.pack("!i", status))
        except OSError:
            pass
        os._exit(status)


# ---------------------------------------------------------------------------------------------
# the server

def _listen(path: str) -> socket.socket:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    if os.path.lexists(path):
        if listening(path):
            raise ConfigError(f"{path}: a lomtree server already listens there")
        if not stat.S_ISSOCK(os.lstat(path).st_mode):  # never delete a model or any other file
            raise ConfigError(f"--socket {path}: exists and is not a socket; refusing to replace it")
        os.unlink(path)  # stale: no server behind it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise ConfigError(f"{path}: cannot listen ({e.strerror or e})") from None
    finally:
        os.umask(old)
    sock.listen(64)
    return sock


def _peer_uid(conn: socket.socket) -> int | None:
    try:
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
        return uid
    except (OSError, AttributeError):
        return None


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(path: str, idle_timeout: float = 0.0, announce=None) -> int:
    """Listen, warm up (unless ``LOMTREE_SERVE_WARM=0``: tests), then serve until a signal or
    ``idle_timeout`` seconds without a command. Clients that connect during the warm-up wait."""
    sock = _listen(path)
    ino = os.stat(path).st_ino
    if os.environ.get("LOMTREE_SERVE_WARM", "1") != "0":
        try:
            warm()
        except BaseException:
            sock.close()
            os.unlink(path)
            raise
    end_startup()
    stop = []

    def on_signal(signum, _frame):
        stop.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    if announce is not None:
        announce(f"lomtree server: listening on {path} (pid {os.getpid()}); "
                 f"commands run here when LOMTREE_SERVER={path}")
    last = time.monotonic()
    try:
        while not stop:
            _reap()
            try:
                ready, _, _ = select.select([sock], [], [], 0.5)
            except InterruptedError:
                continue
            if not ready:
                if idle_timeout > 0 and time.monotonic() - last > idle_timeout:
                    break
                continue
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            last = time.monotonic()
            if _peer_uid(conn) not in (None, os.getuid()):
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                sock.close()
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _child(conn)
            conn.close()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sock.close()
        try:
            if os.stat(path).st_ino == ino:
                os.unlink(path)
        except OSError:
            pass
        _reap()
    return 0
