"""``lomtree predict -i MODEL --daemon``: a prediction daemon in the manner of ``vw --daemon``.

The model is loaded once; clients connect (TCP on ``--host``/``--port``, loopback and VW's port
26542 by default, or a Unix socket ``--socket PATH``), send example lines in the model's input
format, and read one answer line per line they sent, in order: the prediction as ``lomtree
predict`` writes it (``label``, ``label tag``, with ``--probabilities``/``--top-k`` their fields;
for a multi-label model the labels over ``--threshold`` or the ``--top-k`` labels with their
probabilities, ``multilabel.SetPredictor``'s lines), an empty line for an empty line, and for a
malformed line ``error: line N: what is wrong`` (N counts the connection's lines); the
connection stays open after an error. Lines are answered as soon as they are complete, so a
client may send one line and wait, or stream a file and read the answers as they come (a
pipelining client must read while it writes). Labels in the input are ignored (predictions only;
the model never changes; a multi-label model counts no metrics).

Concurrency: the standard library's threading ``socketserver`` (one thread per connection; it
was measured against a hand-rolled accept loop in ``bench/notes/daemon.md``), up to
``MAX_CONNECTIONS`` connections at once; a client beyond that closes the connection idle the
longest (one answering is never closed: then the new client is told so and refused), so idle
clients cannot starve new ones. A connection that sends nothing, or reads no answer, for
``--idle-timeout`` seconds (default 60) is closed. Parsing and prediction kernels release the
GIL, so connections are answered in parallel; only a reduction whose prediction is not
read-only takes a lock (``Reduction.parallel_predict`` False; for ``--probabilities``,
``--top-k`` and label sets ``Reduction.parallel_top`` False), so with oaa and plt one client's
heavy lines never hold up another's.

Memory: a connection holds at most its unfinished line (``--max-line-bytes`` plus one 256 KiB
read; a longer line is answered with an error and dropped without being held whole); at most one
connection per CPU parses at a time, each holding about 8 bytes per byte of the lines it parses
(13 bytes per parsed feature of at least 2 bytes) plus what feature generation makes (at most
about 24 bytes x ``--max-example-features``). With the defaults: 256 x 32 MiB of unfinished lines
at worst, plus about 360 MB per CPU.

Security: nothing but example lines is read from a client, and nothing but answers is sent; TCP
listens on 127.0.0.1 unless ``--host`` says otherwise; a Unix socket is created with mode 0600
(only its owner can connect), an existing file that is not a socket is never replaced, and a
socket another daemon still listens on is refused.

SIGTERM, SIGINT or SIGHUP stop the daemon cleanly within about a second whatever the clients
do: it stops accepting, answers the lines each connection has sent (for half a second), closes
the connections, removes its Unix socket, and exits 0. Listening beyond loopback (``--host``)
prints a warning: there is no authentication.
"""

from __future__ import annotations

import os
import signal
import socket
import socketserver
import stat
import threading
import time
from dataclasses import replace

import numpy as np

from .errors import ConfigError
from .runtime import say

#: VW's default daemon port
DEFAULT_PORT = 26542
#: connections served at once (one thread each)
MAX_CONNECTIONS = 256
_RECV = 1 << 18


class Predictor:
    """The loaded model (``model_path``: a model file or a list of them, as ``predict -i``: an
    ensemble) and the answer lines of a chunk of complete lines; shared by the connection threads."""

    def __init__(self, model_path: str, probabilities: bool = False, top_k: int = 0,
                 max_line_bytes: int | None = None, threshold: float | None = None,
                 max_example_features: int | None = None):
        from .ensemble import load_predictor
        from .labels import output_names
        from .multilabel import set_predictor
        from .output import PredictionWriter

        loaded = load_predictor([model_path] if isinstance(model_path, str) else model_path)
        self.reduction = loaded.reduction
        self.label_dict = loaded.label_dict  # string labels: read and written as names
        if self.label_dict is not None:
            self.label_dict.grow = False
        extra = {name: int(v) for name, v in (("max_line_bytes", max_line_bytes),
                                              ("max_example_features", max_example_features)) if v is not None}
        self.cfg = replace(loaded.input_config, skip_invalid=True, low_labels_unlabeled=True, **extra)
        self.probabilities = probabilities
        self.top_k = min(int(top_k), self.reduction.top_k_bound()) if top_k else 0
        # a multi-label model answers as ``lomtree predict`` does (its metrics are never read:
        # labels are ignored, so none are counted)
        self.names = output_names(self.label_dict, self.cfg)  # how answers write class ids
        self.sets = set_predictor(self.reduction, self.top_k, threshold, self.names, probabilities)
        self.fields = self.sets is None and (probabilities or top_k > 0)
        ranked = self.fields or self.sets is not None  # answers from ``predict_top``
        read_only = getattr(self.reduction, "parallel_top" if ranked else "parallel_predict", False)
        self.lock = None if read_only else threading.Lock()
        if self.fields:
            from .batch import ExampleBatch

            self.reduction.predict_top(ExampleBatch.empty(), max(1, top_k))  # ConfigError if unsupported
        self.answer(b"| warm\n", 1, PredictionWriter(None, label_dict=self.names))  # load the kernels before the first client

    def _predict(self, batch):
        """(predictions, fields after the label) or, for a multi-label model, (None, lines)."""
        if self.sets is not None:
            batch.labels = np.zeros(len(batch), np.int64)
            return None, self.sets.batch(batch, True)[1]
        if self.fields:
            from .output import probability_fields

            return probability_fields(self.reduction, batch, self.top_k, self.probabilities, self.names)
        return self.reduction.process(batch, np.zeros(len(batch), dtype=bool))[0], None

    def answer(self, data: bytes, first_line: int, writer) -> bytes:
        """The answers to ``data`` (complete lines, the first being the connection's line
        ``first_line``): one line each, ending in a newline. ``writer``: the connection's own
        ``PredictionWriter(None)`` (its label strings are a cache that grows)."""
        from .parsing import iter_bytes

        n_lines = data.count(b"\n") + (not data.endswith(b"\n"))
        out = [""] * n_lines  # empty lines are answered with an empty line
        # one piece at a time: what feature generation makes of the lines is held piece by piece
        for batch in iter_bytes(data, self.cfg, source="<connection>", label_dict=self.label_dict,
                                xmc_header=False):
            if len(batch):
                batch.labels = np.maximum(batch.labels, 0)  # labels below 1: unlabeled (read as -1)
                if self.lock is None:
                    preds, extra = self._predict(batch)
                else:
                    with self.lock:
                        preds, extra = self._predict(batch)
                lines = writer.tagged(extra, batch.tags) if preds is None else writer.lines(preds, batch.tags, extra)
                if len(lines) == n_lines:  # every line an example: answers in order
                    return ("\n".join(lines) + "\n").encode()
                for i, text in zip(batch.line_numbers.tolist(), lines):
                    out[i - 1] = text
            for e in batch.skipped:
                col = f" (column {e.column})" if e.column else ""
                out[e.line - 1] = f"error: line {first_line + e.line - 1}: {e.detail}{col}"
        return ("\n".join(out) + "\n").encode()


class _Conn:
    """A connection's socket and what the server needs to choose one to close: whether it is
    answering (busy) and when it last finished something."""

    __slots__ = ("sock", "busy", "last", "evicted")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.busy = False
        self.last = time.monotonic()
        self.evicted = False


class _Handler(socketserver.StreamRequestHandler):
    """One connection, in its own thread: answers its complete lines as they come, until the
    client closes its side (or is idle past ``--idle-timeout``, or is closed for a newer client)."""

    def setup(self):
        self.timeout = self.server.idle_timeout  # recv and sendall: an idle or non-reading client ends
        super().setup()

    def handle(self):
        srv = self.server
        n = _answer_lines(self.rfile, self.wfile, srv.predictor, srv.max_line, srv.conns.get(self.request),
                          srv.parsing)
        with srv.lock:
            srv.served[1] += n


def _answer_lines(rfile, wfile, predictor: Predictor, max_line: int, state: _Conn | None = None,
                  parsing=None) -> int:
    """Answer one client's lines; returns the number answered. ``parsing``: a semaphore bounding
    the connections that parse at once (their memory is the daemon's peak)."""
    import contextlib

    from .output import PredictionWriter

    writer = PredictionWriter(None, label_dict=predictor.names)
    guard = parsing if parsing is not None else contextlib.nullcontext()
    line_no = 1
    pending = bytearray()
    dropping = False  # inside a line longer than max_line (already answered with an error)
    try:
        while True:
            data = rfile.read1(_RECV)  # what one recv returns: a line is answered without waiting for more
            if not data:
                break
            if state is not None:
                state.busy = True
            if dropping:
                nl = data.find(b"\n")
                if nl < 0:
                    data = b""
                else:
                    data = data[nl + 1:]
                    dropping = False
            pending += data
            end = pending.rfind(b"\n")
            if end >= 0:
                chunk = bytes(pending[:end + 1])
                del pending[:end + 1]
                with guard:
                    answer = predictor.answer(chunk, line_no, writer)
                del chunk
                wfile.write(answer)
                line_no += answer.count(b"\n")
            if len(pending) > max_line:
                wfile.write(f"error: line {line_no}: line longer than {max_line} bytes "
                            f"(--max-line-bytes)\n".encode())
                line_no += 1
                pending.clear()
                dropping = True
            if state is not None:
                state.busy = False
                state.last = time.monotonic()
        if pending and not dropping:  # a last line without its newline
            with guard:
                answer = predictor.answer(bytes(pending), line_no, writer)
            wfile.write(answer)
            line_no += 1
    except OSError:  # the client went away, or was idle too long
        pass
    except Exception as e:  # noqa: BLE001 - a bug must not end the daemon: this connection ends, said so
        say(f"lomtree daemon: connection closed after an internal error ({type(e).__name__}: {e})")
        try:
            wfile.write(f"error: line {line_no}: internal error ({type(e).__name__}); connection closed\n".encode())
        except OSError:
            pass
    return line_no - 1


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """The standard library's threading server on a socket made by ``_listen_tcp`` or
    ``_listen_unix`` (TCPServer's own set-up would only create and bind one, without their checks
    and error messages; its accept, shutdown and close serve a Unix socket as well). What it adds:
    the connections it serves, for ``MAX_CONNECTIONS``, eviction and the bounded stop."""

    daemon_threads = True  # stopping is bounded by ``_finish``, not by joining every thread
    block_on_close = False
    timeout = 0.2  # ``handle_request`` returns this often, so the loop looks at ``stop``

    def __init__(self, listener: socket.socket, predictor: Predictor, max_line: int, idle_timeout: float):
        socketserver.BaseServer.__init__(self, listener.getsockname(), _Handler)
        self.socket = listener
        self.predictor = predictor
        self.max_line = max_line
        self.idle_timeout = float(idle_timeout)
        self.conns: dict = {}  # socket -> _Conn of the connections being served
        self.lock = threading.Lock()
        self.parsing = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))
        self.served = [0, 0]  # connections, lines

    def get_request(self):
        try:
            return super().get_request()
        except OSError:  # out of descriptors, a reset before accept: keep serving, without spinning
            time.sleep(0.05)
            raise

    def verify_request(self, request, client_address) -> bool:
        with self.lock:
            if len(self.conns) >= MAX_CONNECTIONS and not _make_room(self.conns, request):
                return False  # the server closes it
            self.conns[request] = _Conn(request)
            self.served[0] += 1
        return True

    def shutdown_request(self, request):
        super().shutdown_request(request)
        with self.lock:
            self.conns.pop(request, None)

    def handle_error(self, request, client_address):  # e.g. no thread could be started: it is closed
        import sys

        say(f"lomtree daemon: connection refused after an internal error ({sys.exc_info()[1]!r})")


def _close(sock: socket.socket, how=socket.SHUT_RDWR) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass


def _make_room(conns: dict, new: socket.socket) -> bool:
    """At ``MAX_CONNECTIONS``: close the connection idle the longest (its thread ends and frees
    its slot), so new clients are never starved by idle ones; when every one is answering,
    tell the new client (False: it is refused)."""
    idle = [c for c in conns.values() if not c.busy and not c.evicted]
    if not idle:
        try:
            new.settimeout(1.0)
            new.sendall(f"error: the daemon is answering {len(conns)} connections; try again\n".encode())
        except OSError:
            pass
        return False
    oldest = min(idle, key=lambda c: c.last)
    oldest.evicted = True
    _close(oldest.sock)
    return True


def _is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _listen_unix(path: str) -> socket.socket:
    """A Unix socket at ``path`` (mode 0600); a stale socket there is replaced, anything else
    refused (ConfigError)."""
    if not path:  # Linux would bind an unnamed socket, which no client can find
        raise ConfigError("--socket: an empty path")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ConfigError(f"--socket {path}: {e.strerror}") from None
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode):
            raise ConfigError(f"--socket {path}: exists and is not a socket (it is left alone)")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            raise ConfigError(f"--socket {path}: another process is listening there")
        except OSError:
            os.unlink(path)  # a stale socket of a daemon that did not stop cleanly
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise ConfigError(f"--socket {path}: cannot listen there: {e.strerror or e}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def _listen_tcp(host: str, port: int) -> socket.socket:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host, port), family=family, backlog=128)
    except socket.gaierror as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {os.strerror(e.errno) if e.errno else e}") from None


def _finish(conns: dict, lock, grace: float = 0.5) -> None:
    """Stop every connection within about ``grace`` + 0.2 seconds whatever its client does: no
    more input (the lines already sent are answered), then after ``grace`` the sockets are shut
    both ways, which ends a thread blocked sending to a client that does not read."""
    with lock:
        socks = list(conns)
    for sock in socks:
        _close(sock, socket.SHUT_RD)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with lock:
            if not conns:
                return
        time.sleep(0.01)
    with lock:
        socks = list(conns)
    for sock in socks:
        _close(sock)
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        with lock:
            if not conns:
                return
        time.sleep(0.01)


def serve(model_path: str, port: int | None = None, socket_path: str | None = None, host: str = "127.0.0.1",
          probabilities: bool = False, top_k: int = 0, max_line_bytes: int | None = None, quiet: bool = False,
          max_example_features: int | None = None, idle_timeout: float = 60.0,
          on_started=None, ready=None, threshold: float | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT/SIGHUP (or ``ready``'s event, see below); returns the
    number of connections served. ``ready(address, stop_event)`` is called once it listens (tests:
    setting ``stop_event`` stops it as a signal would); the CLI prints the address instead."""
    from .config import MAX_LINE_BYTES

    predictor = Predictor(model_path, probabilities, top_k, max_line_bytes, threshold, max_example_features)
    max_line = MAX_LINE_BYTES if max_line_bytes is None else int(max_line_bytes)
    if socket_path is not None:
        listener = _listen_unix(socket_path)
        where = socket_path
    else:
        listener = _listen_tcp(host, DEFAULT_PORT if port is None else port)
        where = "%s:%d" % listener.getsockname()[:2]
    server = _Server(listener, predictor, max_line, idle_timeout)
    stop = threading.Event()
    got = []

    def on_signal(signum, _frame):
        got.append(signum)
        stop.set()

    old = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            old[s] = signal.signal(s, on_signal)
    if on_started is not None:
        on_started()
    say(f"lomtree daemon: listening on {where}")
    if socket_path is None and not _is_loopback(listener.getsockname()[0]):
        say(f"lomtree daemon: warning: {where} is reachable beyond this machine; anyone who can connect can "
            "send lines and read predictions (there is no authentication)")
    if ready is not None:
        ready(listener.getsockname(), stop)
    try:
        # not serve_forever: its shutdown() must come from another thread, and a signal handler
        # runs in this one
        while not stop.is_set():
            server.handle_request()
    finally:
        server.server_close()
        if socket_path is not None:
            try:
                os.unlink(socket_path)
            except OSError:
                pass
        _finish(server.conns, server.lock)
        for s, h in old.items():
            signal.signal(s, h)
    if not quiet:
        why = f" on signal {got[0]}" if got else ""
        say(f"lomtree daemon: stopped{why}; {server.served[0]} connections, {server.served[1]} lines answered")
    return server.served[0]
