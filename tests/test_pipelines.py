"""Pipelines: ``lomtree predict --flush`` as a co-process on an endless stdin (write one
line, read its prediction, repeat, with timeouts), and a closed stdout (SIGPIPE) ends quietly."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import driver
from tests.robustness_helpers import ALL_REDUCTIONS, LOMTREE, ROOT, available, run_cli, train_api, write_lines


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipe")
    train = write_lines(d / "train.vw", 8, 400, seed=0)
    return d, train


def model_for(name, trained):
    d, train = trained
    m = d / f"{name}.lt"
    if not m.exists():
        train_api(name, [train], str(m), k=8)
    return m


def expected_predictions(model, path, tmp_path) -> list[bytes]:
    out = tmp_path / "expected.txt"
    driver.predict(str(model), driver.RunOptions(inputs=[str(path)], predictions=str(out), quiet=True))
    return out.read_bytes().splitlines()


def read_line(stream, timeout: float) -> bytes:
    """One line from a pipe within ``timeout`` seconds (fails on a timeout, not hangs)."""
    fd = stream.fileno()
    buf = b""
    end = time.time() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.time()
        assert left > 0, f"no prediction within {timeout} s (got {buf!r})"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 1)
            assert chunk, f"stdout closed early (got {buf!r})"
            buf += chunk
    return buf


COPROCESS = ["oaa", "lomtree"]  # the co-process path is the driver's, the same for every reduction


@pytest.mark.parametrize("name", [n for n in ALL_REDUCTIONS if n in COPROCESS], ids=lambda n: f"{n}:coprocess")
def test_predict_flush_is_a_coprocess(name, trained, tmp_path):
    model = model_for(name, trained)
    d, _ = trained
    expected = expected_predictions(model, d / "train.vw", tmp_path)
    queries = (d / "train.vw").read_bytes().splitlines()[:12]
    p = subprocess.Popen(LOMTREE + ["predict", "-i", str(model), "--flush", "-p", "-", "--quiet"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        for i, q in enumerate(queries):
            p.stdin.write((q.replace(b" |", b" 'q%d |" % i, 1) if i % 3 == 0 else q) + b"\n")  # some tagged
            p.stdin.flush()
            got = read_line(p.stdout, timeout=120 if i == 0 else 20).rstrip(b"\n")
            want = expected[i] + (b" q%d" % i if i % 3 == 0 else b"")
            assert got == want, (i, got, want)
        p.stdin.write(b"\n\n1 | c1\n")  # blank lines give no prediction; the next line does
        p.stdin.flush()
        assert read_line(p.stdout, timeout=20).strip().split()[0].isdigit()
        p.stdin.close()
        assert p.wait(60) == 0
        assert p.stderr.read() == b""
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_coprocess_bad_line_gives_error_after_good_predictions(trained):
    model = model_for("oaa", trained)
    p = subprocess.Popen(LOMTREE + ["predict", "-i", str(model), "--flush", "-p", "-", "--quiet"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        p.stdin.write(b"1 | c1\n")
        p.stdin.flush()
        assert read_line(p.stdout, 120).strip() == b"1"
        p.stdin.write(b"x | c1\n")
        p.stdin.flush()
        assert p.wait(60) == 1
        err = p.stderr.read().decode()
        assert err.startswith("error: <stdin>:2: ") and err.count("\n") == 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_endless_stdin_closed_stdout_is_quiet(trained):
    """``yes LINE | lomtree predict ... | head -2``: two lines, no traceback, predict ends."""
    model = model_for("oaa", trained)
    cmd = (f"yes '3 | c3 n1' | {' '.join(LOMTREE)} predict -i {model} -p - --flush 2>{model}.err | head -2; "
           f"echo status=${{PIPESTATUS[1]}}")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=180, cwd=ROOT)
    out = r.stdout.splitlines()
    assert out[:2] == ["3", "3"] and out[2] in ("status=0", "status=141"), r.stdout
    err = open(f"{model}.err").read()
    assert "Traceback" not in err and "Error" not in err, err


def test_train_with_closed_prediction_pipe_still_writes_the_model(trained, tmp_path):
    """Progressive predictions to a reader that goes away: training goes on, the model is written."""
    _, train = trained
    available("oaa")
    big = tmp_path / "big.vw"
    big.write_bytes(open(train, "rb").read() * 50)
    m = tmp_path / "m.lt"
    cmd = f"{' '.join(LOMTREE)} train -r oaa -k 8 {big} -f {m} -p - --quiet 2>{m}.err | head -1"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.stdout.strip().isdigit()
    assert "Traceback" not in open(f"{m}.err").read()
    assert run_cli(["inspect", str(m)]).returncode == 0


def test_sigpipe_default_disposition_is_quiet(trained):
    """Even when the parent set SIGPIPE to its default (as some shells and xargs do)."""
    model = model_for("oaa", trained)
    d, train = trained
    p = subprocess.Popen(LOMTREE + ["predict", "-i", str(model), train, "-p", "-"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT,
                         preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_DFL))
    p.stdout.readline()
    p.stdout.close()
    rc = p.wait(120)
    err = p.stderr.read().decode()
    assert rc in (0, -signal.SIGPIPE) and "Traceback" not in err, (rc, err)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 70000), max_size=30), max_size=6))
def test_prediction_labels_written_as_str_writes_them(batches):
    """The writer's cached label strings give exactly ``str`` of each prediction, batch after batch
    (labels growing, negative ones and ones beyond the cache included)."""
    import numpy as np

    from lomtree_cli.output import PredictionWriter

    w = PredictionWriter(None)
    for b in batches:
        a = np.array(b, dtype=np.int64)
        if a.size:
            assert w.label_strings(a) == [str(v) for v in b]
