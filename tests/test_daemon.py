"""``lomtree predict --daemon``: one answer line per line, the same predictions as ``lomtree
predict``, errors answered and the connection kept, many clients at once, clean shutdown."""

from __future__ import annotations

import os
import random
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import separable_lines

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("daemon")
    data = d / "d.vw"
    lines = separable_lines(12, 600, seed=4, noise_feats=3)
    data.write_text("\n".join(lines) + "\n")
    m = d / "m.lt"
    p = subprocess.run(LOMTREE + ["train", "-r", "lomtree", "-k", "12", "-b", "16", str(data), "-f", str(m),
                                  "--quiet"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(LOMTREE + ["predict", "-i", str(m), str(data), "--quiet"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return m, lines, p.stdout.splitlines()


class Daemon:
    def __init__(self, args):
        self.proc = subprocess.Popen(LOMTREE + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = self.proc.stderr.readline()
        assert "listening on" in first, first + self.proc.stderr.read()
        self.where = first.rsplit(" ", 1)[1].strip()

    def connect(self):
        if self.where.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.where)
            return s
        host, port = self.where.rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=60)

    def ask(self, payload: bytes) -> list[str]:
        s = self.connect()
        try:
            out = []
            t = threading.Thread(target=lambda: out.append(s.makefile("rb").read()))
            t.start()
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            t.join(60)
            return out[0].decode().split("\n")[:-1]
        finally:
            s.close()

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


def test_answers_match_predict_and_errors_keep_the_connection(model):
    m, lines, want = model
    d = Daemon(["predict", "-i", str(m), "--daemon", "--port", "0"])
    try:
        assert d.where.startswith("127.0.0.1:")
        got = d.ask(("\n".join(lines) + "\n").encode())
        assert got == want
        got = d.ask(b"1 | a b\n\nbad | x\n" + lines[0].encode() + b"\nno bar here\n" + lines[1].encode())
        assert got[0].isdigit() and got[1] == "" and got[3] == want[0] and got[5] == want[1]
        assert got[2].startswith("error: line 3: bad label") and got[4].startswith("error: line 5: no '|'")
        assert len(got) == 6
    finally:
        code, err = d.stop()
    assert code == 0 and "stopped on signal 15" in err and "Traceback" not in err


def _garbage(rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    if kind == 5:
        return b"%d | a b" % rng.choice([13, 99, 2**31 - 1])  # labels above k: still predicted
    if kind == 6:
        return b"1 'tag\r | \xc3\x28 a"  # a CR in the tag, invalid UTF-8
    if kind == 0:
        return bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b" ")
    if kind == 1:
        return b"x" * rng.randrange(1, 50) + b" | a"
    if kind == 2:
        return b"1 | a:nan b:1e99999"
    if kind == 3:
        return b"\x00\x01 | \xff\xfe"
    return b"1 2 3 4 | a"


def test_twenty_concurrent_clients_with_garbage(model):
    m, lines, want = model
    d = Daemon(["predict", "-i", str(m), "--daemon", "--port", "0", "--max-line-bytes", "4096"])
    failures = []

    def client(seed):
        rng = random.Random(seed)
        sent, expect = [], []
        for _ in range(300):
            if rng.random() < 0.2:
                g = _garbage(rng)
                sent.append(g)
                expect.append(None)
            else:
                i = rng.randrange(len(lines))
                sent.append(lines[i].encode())
                expect.append(want[i])
        if seed % 5 == 0:  # a line over --max-line-bytes, then more good lines
            sent.append(b"1 | " + b"f " * 5000)
            expect.append("too long")
            sent.append(lines[0].encode())
            expect.append(want[0])
        try:
            s = d.connect()
            reader = s.makefile("rb")
            got = []
            t = threading.Thread(target=lambda: got.extend(reader.read().decode("utf-8", "replace").split("\n")[:-1]))
            t.start()
            for j in range(0, len(sent), 17):  # in pieces, cut anywhere
                s.sendall(b"\n".join(sent[j:j + 17]) + b"\n")
                time.sleep(rng.random() * 0.002)
            s.shutdown(socket.SHUT_WR)
            t.join(60)
            s.close()
            assert len(got) == len(sent), (len(got), len(sent))
            for n, (a, e) in enumerate(zip(got, expect), 1):
                if e is None:
                    # garbage: an error naming its line, or (bytes that happen to parse) a label
                    assert a.startswith(f"error: line {n}: ") or a.split()[0].isdigit() or a == "", a
                elif e == "too long":
                    assert a.startswith(f"error: line {n}: line longer than 4096 bytes"), a
                else:
                    assert a == e, (n, a, e)
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(f"client {seed}: {exc!r}")

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        # and clients that leave early: mid-line, and without reading their answers
        for _ in range(3):
            s = d.connect()
            s.sendall(b"1 | a b\n2 | c")
            s.close()
        for t in threads:
            t.join(120)
        assert not failures, failures
        assert d.ask(lines[2].encode() + b"\n") == [want[2]]  # still serving
    finally:
        code, err = d.stop()
    assert code == 0 and "Traceback" not in err, err


def test_unix_socket_mode_and_shutdown(model, tmp_path):
    m, lines, want = model
    path = tmp_path / "d.sock"
    d = Daemon(["predict", "-i", str(m), "--daemon", "--socket", str(path)])
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert d.ask(("\n".join(lines[:5]) + "\n").encode()) == want[:5]
        # a second daemon on the same socket is refused; the first keeps serving
        p = subprocess.run(LOMTREE + ["predict", "-i", str(m), "--daemon", "--socket", str(path)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and "another process is listening" in p.stderr
        assert d.ask(lines[0].encode()) == [want[0]]
    finally:
        code, err = d.stop(signal.SIGINT)
    assert code == 0 and not path.exists()


def test_daemon_refuses_a_file_and_conflicting_options(model, tmp_path):
    m, lines, _ = model
    keep = tmp_path / "keep.txt"
    keep.write_text("data")
    for args, msg in ((["--socket", str(keep)], "is not a socket"),
                      (["--port", "0", str(keep)], "INPUT cannot be used"),
                      (["--port", "0", "--socket", str(tmp_path / "s")], "cannot be used together"),
                      (["--port", "0", "-p", "x"], "-p cannot be used")):
        p = subprocess.run(LOMTREE + ["predict", "-i", str(m), "--daemon"] + args, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert keep.read_text() == "data"
    p = subprocess.run(LOMTREE + ["predict", "-i", str(m), "--port", "5"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "need --daemon" in p.stderr
    with socket.create_server(("127.0.0.1", 0)) as busy:  # a port in use
        port = busy.getsockname()[1]
        p = subprocess.run(LOMTREE + ["predict", "-i", str(m), "--daemon", "--port", str(port)], capture_output=True,
                           text=True, timeout=120)
    assert p.returncode == 2 and p.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_probabilities_through_the_daemon(tmp_path):
    data = tmp_path / "d.vw"
    lines = separable_lines(5, 300, seed=2)
    data.write_text("\n".join(lines) + "\n")
    m = tmp_path / "cpt.lt"
    assert subprocess.run(LOMTREE + ["train", "-r", "cpt", "-k", "5", str(data), "-f", str(m), "--quiet"],
                          capture_output=True, timeout=300).returncode == 0
    want = subprocess.run(LOMTREE + ["predict", "-i", str(m), str(data), "--top-k", "3", "--quiet"],
                          capture_output=True, text=True, timeout=300).stdout.splitlines()
    d = Daemon(["predict", "-i", str(m), "--daemon", "--port", "0", "--top-k", "3"])
    try:
        assert d.ask(("\n".join(lines) + "\n").encode()) == want
    finally:
        assert d.stop()[0] == 0


def _multilabel_lines(n: int, seed: int) -> list[str]:
    """VW lines with sets of string labels: label ``w<c>`` goes with the feature ``c<c>``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        labs = sorted(rng.sample(range(6), rng.randrange(1, 4)))
        tag = f" 't{i}" if i % 3 == 0 else ""
        feats = " ".join(f"c{c}" for c in labs) + f" n{rng.randrange(20)}"
        out.append(f"{','.join(f'w{c}' for c in labs)}{tag} | {feats}")
    return out


@pytest.fixture(scope="module")
def multilabel_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("ml-daemon")
    data = d / "d.vw"
    lines = _multilabel_lines(400, seed=5)
    data.write_text("\n".join(lines) + "\n")
    m = d / "plt.lt"
    from click.testing import CliRunner

    from lomtree_cli.cli import main

    r = CliRunner().invoke(main, ["train", "-r", "plt", "-k", "6", "--multilabel", "--string-labels", str(data),
                                  "-f", str(m), "--quiet", "--passes", "2"])
    assert r.exit_code == 0, r.output
    return m, data, lines


class InProcessDaemon(Daemon):
    """``daemon.serve`` in a thread of this process (its kernels are loaded already: no start-up)."""

    def __init__(self, model_path, **kw):
        from lomtree_cli.daemon import serve

        got = []
        ready = threading.Event()

        def on_ready(address, stop):
            got.append((address, stop))
            ready.set()

        self.thread = threading.Thread(target=serve, args=(str(model_path),),
                                       kwargs=dict(port=0, quiet=True, ready=on_ready, **kw), daemon=True)
        self.thread.start()
        assert ready.wait(120)
        (host, port), self.stop_event = got[0][0][:2], got[0][1]
        self.where = f"{host}:{port}"

    def stop(self, sig=None):
        self.stop_event.set()
        self.thread.join(30)
        return 0, ""


@pytest.mark.parametrize("opts", ([], ["--top-k", "3"], ["--threshold", "0.3"]))
def test_multilabel_daemon_answers_are_predict_lines(multilabel_model, opts):
    """A multi-label model answers with ``lomtree predict -p -``'s lines: the names over the
    threshold (0.5 unless given), or the --top-k names with P(name|x); tags kept. ``--threshold``
    goes through the command line (a process), the others through ``serve``."""
    from click.testing import CliRunner

    from lomtree_cli.cli import main

    m, data, lines = multilabel_model
    r = CliRunner().invoke(main, ["predict", "-i", str(m), str(data), "-p", "-", "--quiet"] + opts)
    assert r.exit_code == 0, r.output
    want = r.output.splitlines()
    assert len(want) == len(lines) and want[3].endswith(" t3")
    if opts[:1] == ["--top-k"]:
        assert all(len(w.split()) >= 3 and ":" in w for w in want)
    else:
        assert any("," in w for w in want) and ":" not in "".join(want)
    if opts[:1] == ["--threshold"]:
        d = Daemon(["predict", "-i", str(m), "--daemon", "--port", "0"] + opts)
    else:
        d = InProcessDaemon(m, top_k=int(opts[1]) if opts else 0)
    try:
        assert d.ask(("\n".join(lines) + "\n").encode()) == want
        got = d.ask(b"| c1 c2\n\nw1,,w2 | c1\n" + lines[0].encode() + b"\n")
        assert got[1] == "" and got[2].startswith("error: line 3: ") and got[3] == want[0] and len(got) == 4
    finally:
        code, err = d.stop()
    assert code == 0 and "Traceback" not in err


def test_threshold_needs_a_multilabel_model(model):
    from lomtree_cli.daemon import Predictor
    from lomtree_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="--threshold is for multi-label models"):
        Predictor(str(model[0]), threshold=0.5)


def test_xmc_model_answers_data_lines(tmp_path):
    """An XMC-format model answers the data lines of an XMC file (no header line: a client sends
    examples) with ``lomtree predict``'s lines on the whole file."""
    from click.testing import CliRunner

    from lomtree_cli.cli import main
    from lomtree_cli.daemon import Predictor
    from lomtree_cli.output import PredictionWriter

    rng = random.Random(3)
    rows = []
    for _ in range(200):
        labs = sorted(rng.sample(range(5), rng.randint(1, 2)))
        feats = " ".join(f"{2 * c}:1 {2 * c + 1}:{rng.random():.3f}" for c in labs) + f" {10 + rng.randrange(4)}:1"
        rows.append(f"{','.join(map(str, labs))} {feats}")
    data = tmp_path / "d.txt"
    data.write_text(f"200 14 5\n" + "\n".join(rows) + "\n")
    m = tmp_path / "m.lt"
    run = CliRunner().invoke
    r = run(main, ["train", "-r", "plt", "--format", "xmc", "-k", "5", str(data), "-f", str(m), "--quiet"])
    assert r.exit_code == 0, r.output
    for opts, top_k in (([], 0), (["--top-k", "2"], 2)):
        r = run(main, ["predict", "-i", str(m), str(data), "-p", "-", "--quiet"] + opts)
        assert r.exit_code == 0, r.output
        p = Predictor(str(m), top_k=top_k)
        got = p.answer(("\n".join(rows) + "\n").encode(), 1, PredictionWriter(None)).decode().splitlines()
        assert got == r.output.splitlines()


def test_unusable_socket_paths_are_usage_errors(tmp_path):
    """An empty --socket path, or one longer than a Unix socket address holds, is a one-line
    usage error naming the option (the empty path bound an unnamed socket and then failed as bad
    input with 'error: : No such file or directory'; the long one said 'cannot listen there: None')."""
    from lomtree_cli.daemon import _listen_unix
    from lomtree_cli.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^--socket: an empty path$"):
        _listen_unix("")
    long = str(tmp_path / ("s" * 200))
    with pytest.raises(ConfigError, match=r"^--socket .*: cannot listen there: .*too long"):
        _listen_unix(long)
    assert not os.path.exists(long)
