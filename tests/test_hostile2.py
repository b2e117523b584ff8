"""Hostile input, round 2: one test class per class of problem (docs/ROBUSTNESS.md lists them).

Memory bounds are checked in subprocesses under a resource limit and by their peak resident size,
with inputs that would need gigabytes without the bound; sockets are loopback only.
"""

from __future__ import annotations

import math
import os
import random
import resource
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lomtree_cli.config import InputConfig
from lomtree_cli.errors import ConfigError, InputError
from lomtree_cli.parsing import parse_bytes
from tests.reference import features_ref as R
from tests.test_features import OPTION_SETS, _gram, _random_line
from tests.test_hostile import HYP, LOMTREE, one_error_line, run

#: the address space a hostile run may take (a bounded run needs a few hundred MB)
AS_LIMIT = 3 << 30


def run_limited(args, timeout=120):
    """``run`` under ``AS_LIMIT`` of address space; returns (process, peak resident KB of the run)."""
    code = ("import resource, subprocess, sys; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT})); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(p.returncode)")
    p = subprocess.run([sys.executable, "-c", code] + LOMTREE + args, capture_output=True, text=True,
                       timeout=timeout)
    err = p.stderr.rstrip("\n").split("\n")
    peak = int(err[-1])
    p.stderr = "\n".join(err[:-1]) + "\n"
    return p, peak


# -- 1. feature expansion: counted exactly, capped per example, memory bounded ----------------


@given(g=st.integers(0, 1 << 40), r=st.integers(1, 16), limit=st.integers(1, 1 << 32))
@HYP
def test_multiset_count_saturates_never_wraps(g, r, limit):
    from lomtree_cli.kernels.interactions import _multisets, _sat_mul

    assert _multisets(g, r, limit) == min(math.comb(g + r - 1, r), limit + 1)
    a, b = g % (limit + 2), (g >> 3) % (limit + 2)
    assert _sat_mul(a, b, limit) == min(a * b, limit + 1)


def test_count_of_a_huge_cubic_does_not_wrap():
    from lomtree_cli.features import FeatureSpec

    n = 1 << 22  # C(2^22 + 2, 3) ~ 2^64.4: the product of 64-bit counts wrapped
    spec = FeatureSpec(InputConfig(interactions="aaa", max_example_features=1 << 32))
    indptr = np.array([0, n, n + 2], np.int64)
    nsid = np.full(n + 2, ord("a"), np.uint8)
    groups, sizes, bad = spec.plan(indptr, nsid)
    assert list(bad) == [0] and sizes[0] == (1 << 32) + 1
    assert sizes[1] == 2 + math.comb(4, 3)


@given(seed=st.integers(0, 10 ** 6), which=st.integers(0, len(OPTION_SETS) - 1), cap=st.integers(1, 60),
       skip=st.booleans())
@HYP
def test_cap_refuses_exactly_the_examples_over_it(seed, which, cap, skip):
    """An example is refused exactly when the reference makes (or holds, grams included) more
    than the cap; the others are the reference's features, in pieces or not."""
    kw = OPTION_SETS[which]
    rng = random.Random(seed)
    lines = [_random_line(rng) for _ in range(12)]
    terms = [t.encode() for t in kw.get("interactions", "").split(",") if t]
    common = dict(ngram=_gram(kw.get("ngram")), skips=_gram(kw.get("skips")), ignore=kw.get("ignore", "").encode(),
                  keep=kw.get("keep", "").encode())
    want, over = [], []
    for ln in lines:
        feats = R.parse_line(ln, 18)
        made = R.generate(feats, 18, terms=terms, ignore_linear=kw.get("ignore_linear", "").encode(), **common)
        held = R.generate(feats, 18, **common)
        want.append(sorted(made))
        over.append(max(len(made), len(held)) > cap)
    cfg = InputConfig(bits=18, noconstant=True, max_example_features=cap, skip_invalid=skip, **kw)
    data = ("\n".join(lines) + "\n").encode()
    if not skip and any(over):
        with pytest.raises(InputError) as e:
            parse_bytes(data, cfg)
        assert e.value.line == over.index(True) + 1 and "--max-example-features" in e.value.detail
        return
    batch = parse_bytes(data, cfg)
    assert [e.line for e in batch.skipped] == [i + 1 for i, o in enumerate(over) if o]
    assert batch.line_numbers.tolist() == [i + 1 for i, o in enumerate(over) if not o]
    for j, line in enumerate(batch.line_numbers.tolist()):
        a, b = batch.indptr[j], batch.indptr[j + 1]
        assert sorted(zip(batch.indices[a:b].tolist(), batch.values[a:b].tolist())) == want[line - 1]


def test_pieces_join_to_the_whole():
    """A chunk whose expansion exceeds the cap comes in pieces that join to the uncapped batch."""
    from lomtree_cli.parsing import iter_bytes

    data = "".join(f"{i % 3 + 1} |a " + " ".join(f"f{j}" for j in range(i % 7 + 1)) + "\n" for i in range(40))
    whole = parse_bytes(data.encode(), InputConfig(interactions="aa"))
    pieces = list(iter_bytes(data.encode(), InputConfig(interactions="aa", max_example_features=40)))
    assert len(pieces) > 3 and all(len(p.indices) <= 40 or len(p) == 1 for p in pieces)
    assert np.concatenate([p.indices for p in pieces]).tolist() == whole.indices.tolist()
    assert np.concatenate([p.line_numbers for p in pieces]).tolist() == whole.line_numbers.tolist()


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """One line of 2^22 features in namespace ``a``, then a normal line."""
    d = tmp_path_factory.mktemp("wide")
    with open(d / "wide.vw", "wb") as f:
        f.write(b"1 |a " + b"x " * (1 << 22) + b"\n2 |a y z\n")
    return d


@pytest.mark.parametrize("opt", [["--cubic", "aaa"], ["-q", "aa"], ["--interactions", "aaaaaaaa"],
                                 ["--ngram", "8", "--skips", "3"]])
def test_hostile_expansions_are_bounded_errors(wide, opt):
    p, peak = run_limited(["train", "-r", "oaa", "-k", "2", str(wide / "wide.vw"), "--quiet"] + opt)
    assert "wide.vw:1: the feature options make more than 4194304 features" in one_error_line(p, 1)
    assert peak < 1 << 20, peak  # KB: under 1 GB
    p, _ = run_limited(["train", "-r", "oaa", "-k", "2", str(wide / "wide.vw"), "--skip-invalid",
                        "-f", str(wide / "m.lt")] + opt)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_wildcards_over_many_namespaces(tmp_path):
    names = [chr(c) for c in range(33, 127) if chr(c) not in "|:'"][:90]
    f = tmp_path / "ns.vw"
    f.write_text("1 " + " ".join(f"|{n} x" for n in names) + "\n2 |a x |b y\n")
    p, peak = run_limited(["train", "-r", "oaa", "-k", "2", str(f), "--quiet", "--interactions", "::::"])
    assert "ns.vw:1: the interaction wildcards over its 90 namespaces make more than" in one_error_line(p, 1)
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("args", [["--ngram", "1000"], ["--skips", "1000", "--ngram", "2"],
                                  ["--interactions", "abcdefghijklmnopq"], ["--max-example-features", "0"]])
def test_expansion_options_out_of_range_are_usage_errors(wide, args):
    p = run(["train", "-r", "oaa", "-k", "2", str(wide / "wide.vw"), "--quiet"] + args)
    assert p.returncode == 2 and "Traceback" not in p.stderr and args[0] in p.stderr, p.stderr


def test_sixteen_way_interactions_work():
    line = "1 " + " ".join(f"|{chr(97 + i)} x" for i in range(16)) + "\n"
    b = parse_bytes(line.encode(), InputConfig(interactions="abcdefghijklmnop", noconstant=True))
    assert len(b.indices) == 17
    with pytest.raises(ConfigError):
        InputConfig(interactions=":" * 17)


def test_daemon_answers_an_oversized_expansion_with_an_error(tmp_path):
    from tests.test_daemon import Daemon

    data = tmp_path / "d.vw"
    data.write_text("1 |a x y\n2 |a z w\n" * 20)
    m = tmp_path / "m.lt"
    p = run(["train", "-r", "oaa", "-k", "2", "-q", "aa", str(data), "-f", str(m), "--quiet"])
    assert p.returncode == 0, p.stderr
    d = Daemon(["predict", "-i", str(m), "--daemon", "--port", "0", "--max-example-features", "1000"])
    try:
        hostile = b"1 |a " + b" ".join(b"f%d" % i for i in range(100)) + b"\n"
        answers = d.ask(b"1 |a x y\n" + hostile + b"2 |a z w\n")
        assert answers[1] == ("error: line 2: the feature options make more than 1000 features of this example "
                              "(--max-example-features)")
        assert answers[0] in ("1", "2") and answers[2] in ("1", "2")
        assert d.ask(b"1 |a x y\n") == answers[:1]  # other connections as before
    finally:
        code, err = d.stop()
    assert code == 0 and "Traceback" not in err, err


# -- 2. sizes refused up front, outputs probed before training, model inputs regular files ----


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    (d / "d.vw").write_text("1 |a x y\n2 |a z\n3 |a w x\n" * 5)
    for r in ("oaa", "cpt"):
        p = run(["train", "-r", r, "-k", "3", str(d / "d.vw"), "-f", str(d / f"{r}.lt"), "--quiet"])
        assert p.returncode == 0, p.stderr
    return d


@pytest.mark.parametrize("red", ["plt", "mtree"])
def test_huge_k_is_refused_before_any_allocation(small, red):
    p, peak = run_limited(["train", "-r", red, "-k", "2147483647", str(small / "d.vw"), "--quiet"])
    assert "the model would need" in one_error_line(p, 2)
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("red", ["oaa", "cpt"])
def test_top_k_is_capped_at_the_labels(small, red):
    p, _ = run_limited(["predict", "-i", str(small / f"{red}.lt"), str(small / "d.vw"), "--top-k", "2000000000",
                        "-p", "-", "--quiet"], timeout=60)
    assert p.returncode == 0, p.stderr
    assert {len(ln.split()) for ln in p.stdout.splitlines()} <= {2, 3}


@pytest.mark.parametrize("flag", ["-f", "--report", "-c", "-p"])
def test_unwritable_output_names_fail_before_training(small, tmp_path, flag):
    """A name the file system refuses (too long once the temporary suffix is added, or at all):
    exit 2 naming the option, and nothing read."""
    if flag != "-p":  # -p is written in place: no temporary name
        long = str(tmp_path / ("m" * 250))  # the name fits; its temporary name does not
        p = run(["train", "-r", "oaa", "-k", "3", "/dev/zero", flag, long, "--quiet"], timeout=60)
        assert one_error_line(p, 2).startswith(f"error: {flag} "), p.stderr
    p = run(["train", "-r", "oaa", "-k", "3", "/dev/zero", flag, str(tmp_path / ("x" * 300)), "--quiet"], timeout=60)
    assert one_error_line(p, 2).startswith(f"error: {flag} "), p.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("cmd", [["inspect"], ["predict", "-i"], ["train", "-i"], ["predict", "--daemon", "--port", "0",
                                                                                     "-i"]])
def test_a_fifo_model_is_refused_at_once(small, tmp_path, cmd):
    fifo = tmp_path / "m.lt"
    os.mkfifo(fifo)
    extra = [str(small / "d.vw")] if cmd[0] != "inspect" and "--daemon" not in cmd else []
    p = run(cmd + [str(fifo)] + extra, timeout=30)
    assert one_error_line(p, 2) == f"error: {fifo}: is a FIFO, not a model file (models are read from regular files)"


# -- 3. model files: every float finite, every header field of its type; writes finite ---------


def _crafted(small, tmp_path, change):
    from fuzz.models import read, write

    header, arrays = read(str(small / "oaa.lt"))
    change(header, arrays)
    out = tmp_path / "crafted.lt"
    write(str(out), header, arrays)
    return out


def _set(name, value, where=slice(0, 1)):
    def change(header, arrays):
        a = arrays[name].copy()
        a[where] = value
        arrays[name] = a
    return change


def _field(section, key, value):
    def change(header, arrays):
        header[section][key] = value
    return change


@pytest.mark.parametrize("change,what", [
    (_set("learner/G", -np.inf), "learner/G holds NaN or infinite numbers"),
    (_set("learner/w", np.nan, slice(None)), "learner/w holds NaN or infinite numbers"),
    (_set("learner/model_S", np.inf), "learner/model_S holds NaN or infinite numbers"),
    (_field("input", "interactions", 5), "header field input.interactions must be str, got int 5"),
    (_field("input", "bits", "18"), "header field input.bits must be int, got str '18'"),
    (_field("learner", "sgd", 1), "header field learner.sgd must be bool, got int 1"),
    (_field("reduction_config", "k", 3.0), "header field reduction_config.k must be int, got float 3.0"),
])
def test_crafted_models_are_one_line_errors(small, tmp_path, change, what):
    m = _crafted(small, tmp_path, change)
    for cmd in (["inspect", str(m)], ["predict", "-i", str(m), str(small / "d.vw")],
                ["train", "-i", str(m), str(small / "d.vw"), "-f", str(tmp_path / "out.lt")]):
        if cmd[0] == "predict" and "learner/G" in what:  # predict never reads the optimiser state
            assert run(cmd).returncode == 0
            continue
        line = one_error_line(run(cmd), 2)
        assert line == f"error: {m}: corrupt model file ({what})", line
    assert not (tmp_path / "out.lt").exists()


def test_a_diverged_model_is_not_written(tmp_path):
    from lomtree_cli import model_io
    from lomtree_cli.errors import LomtreeError

    from tests.robustness_helpers import train_api, write_lines

    data = write_lines(tmp_path / "d.vw", 4, 40)
    train_api("oaa", [data], str(tmp_path / "m.lt"), k=4)
    loaded = model_io.load_model(str(tmp_path / "m.lt"))
    loaded.learner.arrays.table[3, 0] = np.nan
    with pytest.raises(LomtreeError, match=r"NaN or infinite numbers \(learner/w\): not written"):
        model_io.save_model(str(tmp_path / "m2.lt"), loaded.input_config, loaded.learner, loaded.reduction)
    assert sorted(os.listdir(tmp_path)) == ["d.vw", "m.lt"]


def test_api_checks_its_inputs_as_the_cli_does(tmp_path):
    sp = pytest.importorskip("scipy.sparse")
    from lomtree_cli.api import Classifier

    X = sp.csr_matrix(np.eye(3))
    X.indices[0] = -5  # scipy does not check raw arrays
    with pytest.raises(ValueError, match=r"column index outside 0\.\.2"):
        Classifier(reduction="oaa").fit(X, [1, 2, 3])
    with pytest.raises(ValueError, match=r"reduction must be one of oaa, .*got 'nope'"):
        Classifier(reduction="nope").fit(np.eye(3), [1, 2, 3])
    clf = Classifier(reduction="oaa").fit(np.eye(3), [1, 2, 3])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="it exists and is a FIFO"):
        clf.save(str(fifo))
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    clf.save(str(tmp_path / "m.lt"))
    assert sorted(os.listdir(tmp_path)) == ["fifo", "m.lt"]


# -- 4. the daemon: idle clients yield, idle timeout, SIGTERM within a second -------------------


def _closed(sock) -> bool:
    import socket

    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False


def test_idle_connections_yield_to_new_clients(small, monkeypatch):
    import threading

    from lomtree_cli import daemon
    from tests.test_daemon import InProcessDaemon

    monkeypatch.setattr(daemon, "MAX_CONNECTIONS", 4)
    accepted = threading.Semaphore(0)  # one release per connection the server has taken in
    take_in = daemon._Server.verify_request

    def counted(self, request, address):
        try:
            return take_in(self, request, address)
        finally:
            accepted.release()

    monkeypatch.setattr(daemon._Server, "verify_request", counted)
    d = InProcessDaemon(small / "oaa.lt", idle_timeout=30.0)
    try:
        idle = []
        for _ in range(3):  # every slot taken by clients that send nothing, then a new client
            idle += [d.connect() for _ in range(4)]
            for _ in range(4):  # taken in before the new client, so they are the older ones
                assert accepted.acquire(timeout=30)
            assert d.ask(b"1 |a x y\n2 |a z\n")[0] in ("1", "2")  # answered: an idle one was closed
            assert accepted.acquire(timeout=30)  # (the asking client's)
        for s in idle:
            s.settimeout(0.5)
        closed = [i for i, s in enumerate(idle) if _closed(s)]
        # 12 idle clients and 3 asking ones for 4 slots: the oldest 9 were closed, the newest 3 live
        assert closed == list(range(9)), closed
    finally:
        d.stop()


def test_idle_timeout_closes_a_silent_connection(small):
    from tests.test_daemon import InProcessDaemon

    d = InProcessDaemon(small / "oaa.lt", idle_timeout=0.3)
    try:
        s = d.connect()
        s.settimeout(20)
        s.sendall(b"1 |a x")  # half a line, then nothing
        assert s.recv(100) == b""
        assert d.ask(b"1 |a x y\n")[0] in ("1", "2")  # the daemon still answers others
    finally:
        d.stop()


def test_sigterm_ends_within_a_second_whatever_clients_do(small):
    import socket
    import threading
    import time

    from tests.test_daemon import Daemon

    d = Daemon(["predict", "-i", str(small / "oaa.lt"), "--daemon", "--port", "0"])
    clients = []
    try:
        # they send 48 MB each and never read: the daemon blocks sending their answers (each holds
        # its line's 1000-byte tag); with 5 s per such client it took 20 s. 48 MB is more than the
        # daemon reads before it blocks plus what the kernel buffers for it (net.ipv4.tcp_rmem
        # grows a socket's buffer to 32 MB here), so each sender ends up blocked too
        for _ in range(4):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            host, port = d.where.rsplit(":", 1)
            s.connect((host, int(port)))
            clients.append(s)
        blocked = [None] * len(clients)
        data = (b"1 '" + b"t" * 1000 + b" |a x\n") * 48000
        senders = [threading.Thread(target=_send_until_unread, args=(s, data, blocked, i), daemon=True)
                   for i, s in enumerate(clients)]
        for th in senders:
            th.start()
        clients.append(d.connect())  # and one that sends nothing
        for th in senders:
            th.join(120)
        assert blocked == [True] * 4, blocked  # the daemon is stuck sending to each of them
        t = time.monotonic()
        code, err = d.stop()
        assert time.monotonic() - t < 2.0, err
        assert code == 0 and "Traceback" not in err, err
    finally:
        for s in clients:
            s.close()


def _send_until_unread(sock, data, out, i, quiet=2.0):
    """Send ``data`` until the daemon stops reading this socket (not writable for ``quiet``
    seconds: it is blocked sending answers the client never reads): ``out[i]`` True; False if
    it read everything."""
    import select

    sock.setblocking(False)
    view, sent = memoryview(data), 0
    try:
        while sent < len(data):
            if not select.select([], [sock], [], quiet)[1]:
                out[i] = True
                return
            try:
                sent += sock.send(view[sent:])
            except BlockingIOError:
                pass
    except OSError:
        pass
    out[i] = False


def test_loopback_test_of_the_warning():
    from lomtree_cli.daemon import _is_loopback

    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("127.3.2.1")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("::") and not _is_loopback("192.168.1.5")


def test_wildcard_tables_keep_no_state_between_chunks():
    """A chunk with many namespaces leaves no larger term table for later chunks (the daemon was
    30-90x slower for every request after one such line)."""
    from lomtree_cli.features import FeatureSpec

    spec = FeatureSpec(InputConfig(interactions="::"))
    wide = np.array([ord("A") + i for i in range(40)], np.uint8)
    assert spec.plan(np.array([0, 40], np.int64), wide)[0][0][2][0].shape[0] == 40 * 41 // 2
    groups = spec.plan(np.array([0, 2], np.int64), np.array([ord("a"), ord("b")], np.uint8))[0]
    assert groups[0][2][0].shape[0] == 3  # aa, ab, bb


# -- 5. a Dask address that is no scheduler fails fast, naming it ------------------------------


def test_dask_address_of_an_http_server_fails_within_seconds():
    import http.server
    import threading
    import time

    from lomtree_cli.distributed import _probe_scheduler

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        address = f"tcp://127.0.0.1:{srv.server_address[1]}"
        t = time.monotonic()
        with pytest.raises(ConfigError, match=f"--dask {address}: no dask scheduler answers there"):
            _probe_scheduler(address, wait=1.0)
        assert time.monotonic() - t < 5
    finally:
        srv.shutdown()
        srv.server_close()


def test_dask_probe_accepts_a_real_scheduler():
    distributed = pytest.importorskip("distributed")
    from lomtree_cli.distributed import _probe_scheduler

    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None) as c:
        _probe_scheduler(c.scheduler_address, wait=5.0)


# -- 6. the crafted-model campaign's tools ------------------------------------------------------


def test_crafted_model_tools(small, tmp_path):
    from fuzz.models import mutation, read, verdict, write
    from lomtree_cli import model_io

    header, arrays = read(str(small / "oaa.lt"))
    write(str(tmp_path / "same.lt"), header, arrays)  # rewritten unchanged: fresh checksums load
    model_io.load_model(str(tmp_path / "same.lt"))
    rng = random.Random(5)
    for i in range(20):
        what, h, a = mutation(header, arrays, rng)
        write(str(tmp_path / f"c{i}.lt"), h, a)
        try:  # reaches the loader's checks: loads, or one ModelFormatError
            model_io.load_model(str(tmp_path / f"c{i}.lt"))
        except model_io.ModelFormatError:
            pass
    assert verdict(0, "") == "clean" and verdict(2, "x\nerror: y\n") == "error"
    assert verdict(-11, "") == "signal 11" and verdict(1, "Traceback (most\n") == "traceback"
    assert verdict(1, "error: a\nerror: b\n") == "lines"
