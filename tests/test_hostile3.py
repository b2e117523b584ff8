"""Hostile input, round 3: label sets, caches and the daemon (docs/ROBUSTNESS.md lists the classes).

Each test is one class of problem: a kept example cache means what it meant when it was written
(string-label names included); label counts count examples once; XMC header numbers are claims;
the daemon bounds ``--top-k`` and answers clients side by side; options and importance weights
out of range are one-line errors naming what is wrong.
"""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from tests.test_hostile import one_error_line, run
from tests.test_hostile2 import run_limited

NAMES = ("apple", "banana", "cherry")


def _named_lines(n: int, names=NAMES, seed: int = 0) -> list[str]:
    """Separable string-label lines: class ``names[c]`` has features ``f<c>`` and noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        c = int(rng.integers(len(names)))
        out.append(f"{names[c]} | f{c} g{c} n{int(rng.integers(50))}")
    return out


def _predict(model, data, *extra) -> list[str]:
    p = run(["predict", "-i", str(model), str(data), "-p", "-", "--quiet", *extra])
    assert p.returncode == 0, p.stderr
    return p.stdout.split("\n")[:-1]


def _probe(model) -> list[str]:
    """The model's names for the three classes' features, on lines without labels (predict gives a
    label it does not know an id past the model's dictionary, in the order it meets them: a labelled
    file in the training order would hide a model that lost its names)."""
    probe = model.parent / "probe.vw"
    probe.write_text("".join(f"| f{c} g{c}\n" for c in range(3)))
    return _predict(model, probe)


def _accuracy(pred: list[str], data) -> float:
    truth = [ln.split(" ", 1)[0] for ln in open(data).read().splitlines()]
    return float(np.mean([a == b for a, b in zip(pred, truth)]))


# -- 1. a kept example cache: its ids mean the names they had -------------------------------------


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    d = tmp_path_factory.mktemp("named")
    (d / "a.vw").write_text("\n".join(_named_lines(300)) + "\n")
    # the same classes, first seen in another order: another dictionary
    (d / "b.vw").write_text("\n".join(["cherry | f2 g2", "banana | f1 g1"] + _named_lines(100, seed=1)) + "\n")
    return d


@pytest.mark.parametrize("red", ["oaa", "cpt"])
def test_a_reused_cache_keeps_the_label_names(named, tmp_path, red):
    cache = tmp_path / "c.cache"
    base = ["train", "-r", red, "--string-labels", str(named / "a.vw"), "-c", str(cache), "-b", "12"]
    if red == "oaa":
        base += ["-k", "3"]
    first = run(base + ["-f", str(tmp_path / "m1.lt")])
    assert first.returncode == 0, first.stderr
    second = run(base + ["-f", str(tmp_path / "m2.lt")])
    assert second.returncode == 0 and "reading examples from the cache" in second.stderr, second.stderr
    assert "reading examples from the cache" not in first.stderr
    assert _probe(tmp_path / "m1.lt") == _probe(tmp_path / "m2.lt") == list(NAMES)
    assert _accuracy(_predict(tmp_path / "m2.lt", named / "a.vw"), named / "a.vw") > 0.9


def test_a_cache_of_another_dictionary_is_not_used(named, tmp_path):
    """``-i`` a model whose names come in another order: the cached ids would swap the labels."""
    cache = tmp_path / "c.cache"
    m0 = tmp_path / "m0.lt"
    p = run(["train", "-r", "oaa", "-k", "3", "--string-labels", str(named / "b.vw"), "-f", str(m0), "--quiet"])
    assert p.returncode == 0, p.stderr
    p = run(["train", "-r", "oaa", "-k", "3", "--string-labels", str(named / "a.vw"), "-c", str(cache), "--quiet"])
    assert p.returncode == 0, p.stderr
    m1 = tmp_path / "m1.lt"
    p = run(["train", "-i", str(m0), str(named / "a.vw"), "-c", str(cache), "-f", str(m1), "--passes", "2",
             "--holdout-off"])
    assert p.returncode == 0, p.stderr
    assert "example cache" in p.stderr and "rebuilt" in p.stderr, p.stderr
    assert _probe(m1) == list(NAMES)
    assert _accuracy(_predict(m1, named / "a.vw"), named / "a.vw") > 0.9


def test_a_reused_cache_of_string_label_sets(tmp_path):
    rng = np.random.default_rng(2)
    lines = []
    for _ in range(300):
        c = sorted({int(x) for x in rng.integers(0, 4, size=2)})
        lines.append(",".join(f"t{x}" for x in c) + " | " + " ".join(f"f{x}" for x in c))
    data = tmp_path / "s.vw"
    data.write_text("\n".join(lines) + "\n")
    cache = tmp_path / "c.cache"
    for m in ("m1.lt", "m2.lt"):
        p = run(["train", "-r", "oaa", "-k", "4", "--multilabel", "--string-labels", str(data), "-c", str(cache),
                 "-f", str(tmp_path / m), "--quiet"])
        assert p.returncode == 0, p.stderr
    probe = tmp_path / "probe.vw"
    probe.write_text("".join(f"| f{c}\n" for c in range(4)))
    a, b = _predict(tmp_path / "m1.lt", probe), _predict(tmp_path / "m2.lt", probe)
    names = {x for ln in b for x in ln.split(",") if x}
    assert a == b and names and names <= {"t0", "t1", "t2", "t3"}, b


def test_the_cache_key_holds_the_dictionary(tmp_path):
    from lomtree_cli.cache import input_key
    from lomtree_cli.config import InputConfig
    from lomtree_cli.labels import LabelDict

    f = tmp_path / "d.vw"
    f.write_text("a | x\n")
    cfg = InputConfig(string_labels=True)
    keys = [input_key(cfg, [str(f)], d) for d in (LabelDict(["a", "b"]), LabelDict(["b", "a"]), LabelDict(["a"]),
                                                   LabelDict(["a", "b"]))]
    assert keys[0] != keys[1] and keys[0] != keys[2] and keys[0] == keys[3]


def test_a_cache_without_its_names_is_rebuilt(named, tmp_path):
    """A cache of string labels whose footer lost its names (an older writer, a crafted file)."""
    import json

    from lomtree_cli import cache as C
    from lomtree_cli.config import InputConfig
    from lomtree_cli.labels import LabelDict
    from lomtree_cli.parsing import iter_batches

    cfg = InputConfig(string_labels=True, bits=10)
    paths = [str(named / "a.vw")]
    path = str(tmp_path / "c.cache")
    d = LabelDict()
    c = C.ExampleCache.open(path, cfg, paths, label_dict=d)
    w = c.writer()
    for b in iter_batches(paths, cfg, label_dict=d):
        w.add(b)
    w.close()
    assert C.describe(path)["label_names"] == list(NAMES[:len(d)]) or sorted(C.describe(path)["label_names"]) == \
        sorted(NAMES)
    d2 = LabelDict()
    c2 = C.ExampleCache.open(path, cfg, paths, label_dict=d2)
    assert c2.ready and d2.names == d.names
    # the same file with its names taken out of the footer
    raw = open(path, "rb").read()
    foff, flen = C._TRAILER.unpack(raw[-C._TRAILER.size:])[1:3]
    footer = json.loads(raw[foff:foff + flen])
    del footer["label_names"]
    fb = json.dumps(footer, sort_keys=True).encode()
    import xxhash

    trailer = C._TRAILER.pack(C._TRAILER_MAGIC, foff, len(fb), xxhash.xxh3_64_intdigest(fb), footer["n_blocks"],
                              footer["n_examples"])
    open(path, "wb").write(raw[:foff] + fb + trailer)
    d3 = LabelDict()
    c3 = C.ExampleCache.open(path, cfg, paths, label_dict=d3)
    assert not c3.ready and d3.names == []


# -- 2. label counts: each training example once, however many passes -----------------------------


def _sets_file(path, n: int, k: int = 12, seed: int = 0, ns: str = ""):
    rng = np.random.default_rng(seed)
    lines, sets = [], []
    for _ in range(n):
        s = sorted({int(x) for x in rng.integers(1, k + 1, size=int(rng.integers(1, 4)))})
        sets.append(s)
        lines.append(",".join(map(str, s)) + f" |{ns} " + " ".join(f"f{x}" for x in s) + f" n{int(rng.integers(9))}")
    path.write_text("\n".join(lines) + "\n")
    return sets


@pytest.mark.parametrize("red", ["oaa", "plt"])
@pytest.mark.parametrize("holdout", [True, False])
def test_label_counts_are_the_training_sets_after_passes(tmp_path, red, holdout):
    from lomtree_cli import model_io

    data = tmp_path / "d.vw"
    sets = _sets_file(data, 400)
    m = tmp_path / "m.lt"
    args = ["train", "-r", red, "-k", "12", "--multilabel", str(data), "-f", str(m), "--passes", "4", "--quiet"]
    if not holdout:
        args.append("--holdout-off")
    p = run(args)
    assert p.returncode == 0, p.stderr
    want = np.zeros(13)
    trained = [s for i, s in enumerate(sets) if not (holdout and (i + 1) % 10 == 0)]  # every 10th held out
    for s in trained:
        want[s] += 1
    want[0] = len(trained)
    got = model_io.load_model(str(m)).reduction.label_counts
    assert np.array_equal(got, want)


# -- 5. XMC header numbers are claims -------------------------------------------------------------


def _xmc(path, header: str, body: str = "0,1 0:1 1:0.5\n1 2:1\n0 1:1\n"):
    path.write_text(header + "\n" + body)
    return path


@pytest.mark.parametrize("header,what", [
    ("3 9223372036854775808 2", "F (features) = 9223372036854775808 is too large"),
    ("3 50 99999999999999999999999", "L (labels) = 99999999999999999999999 is too large"),
    ("99999999999999999999 50 2", "N (examples) = 99999999999999999999 is too large"),
])
def test_huge_xmc_header_numbers_are_one_line_errors(tmp_path, header, what):
    f = _xmc(tmp_path / "d.xmc", header)
    for args in (["train", "--format", "xmc", "-r", "plt", str(f)], ["train", "--format", "xmc", "-r", "oaa",
                                                                      "-k", "3", str(f)]):
        line = one_error_line(run(args + ["--quiet"]), 1)
        assert line.startswith(f"error: {f}:1: ") and what in line, line
    good = _xmc(tmp_path / "g.xmc", "3 50 2")
    m = tmp_path / "m.lt"
    assert run(["train", "--format", "xmc", "-r", "plt", str(good), "-f", str(m), "--quiet"]).returncode == 0
    line = one_error_line(run(["predict", "-i", str(m), str(f), "--quiet"]), 1)
    assert line.startswith(f"error: {f}:1: ") and what in line, line


@pytest.mark.parametrize("red", ["plt", "oaa"])
def test_an_xmc_header_cannot_size_the_model_beyond_its_file(tmp_path, red):
    f = _xmc(tmp_path / "d.xmc", "3 50 100000000")
    p, peak = run_limited(["train", "--format", "xmc", "-r", red, str(f), "-f", str(tmp_path / "m.lt"), "--quiet"])
    line = one_error_line(p, 1)
    assert line.startswith(f"error: {f}:1: the header says 100000000 labels, more than the inputs can name"), line
    assert peak < 400 << 10, peak  # KB: a few hundred MB at most, not gigabytes
    assert not (tmp_path / "m.lt").exists()
    # with -k the size is the user's: the header then only bounds the labels read
    p = run(["train", "--format", "xmc", "-r", red, "-k", "3", str(f), "-f", str(tmp_path / "m.lt"), "--quiet"])
    assert p.returncode == 0, p.stderr


def test_xmc_messages_name_the_files_labels(tmp_path):
    f = _xmc(tmp_path / "d.xmc", "3 50 0")
    line = one_error_line(run(["train", "--format", "xmc", "-r", "plt", str(f), "--quiet"]), 1)
    assert line == f"error: {f}:1: the header says 0 labels (L of 'N F L'): give -k, or L >= 1", line
    f = _xmc(tmp_path / "e.xmc", "3 50 10", "0,1 0:1\n7 2:1\n0 1:1\n")
    line = one_error_line(run(["train", "--format", "xmc", "-r", "plt", "-k", "3", str(f), "--quiet"]), 1)
    assert line == f"error: {f}:3: label 7 is outside 0..2 (-k 3)", line  # (line 1: the header)
    v = tmp_path / "o.vw"
    v.write_text("0 | a\n1 | b\n5 | c\n")
    line = one_error_line(run(["train", "-r", "oaa", "-k", "3", "--label-offset", "1", str(v), "--quiet"]), 1)
    assert line == f"error: {v}:3: label 5 is outside 0..2 (-k 3)", line


def test_too_many_string_labels_name_the_first_that_did_not_fit(tmp_path):
    v = tmp_path / "s.vw"
    v.write_text("a | x\nb | y\nc | z\nd | w\ne | v\n")
    line = one_error_line(run(["train", "-r", "oaa", "-k", "3", "--string-labels", str(v), "--quiet"]), 1)
    assert line == f"error: {v}:4: label 'd' would be class 4, outside 1..3 (more distinct labels than -k)", line
    v.write_text("a,b | x\nc,e,d | y\n")
    line = one_error_line(run(["train", "-r", "oaa", "-k", "3", "--multilabel", "--string-labels", str(v),
                               "--quiet"]), 1)
    assert line == f"error: {v}:2: label 'e' would be class 4, outside 1..3 (more distinct labels than -k)", line


# -- 6, 7. the daemon: --top-k bounded, no client held up by another's lines ----------------------


@pytest.fixture(scope="module")
def ml(tmp_path_factory):
    d = tmp_path_factory.mktemp("ml")
    _sets_file(d / "d.vw", 300, k=20, ns="f")
    for red in ("plt", "oaa"):
        p = run(["train", "-r", red, "-k", "20", "--multilabel", "-q", "ff", str(d / "d.vw"), "-f",
                 str(d / f"{red}.lt"), "--quiet", "-b", "14"])
        assert p.returncode == 0, p.stderr
    return d


@pytest.mark.parametrize("red", ["plt", "oaa"])
def test_daemon_caps_top_k_at_the_labels(ml, red):
    from lomtree_cli.daemon import Predictor

    pr = Predictor(str(ml / f"{red}.lt"), top_k=10 ** 6)
    assert pr.sets.top_k == 20 and pr.sets.n_ranked == 20
    from lomtree_cli.output import PredictionWriter

    ans = pr.answer(b"|f f1 f2\n" * 3, 1, PredictionWriter(None, label_dict=pr.names)).decode().splitlines()
    assert len(ans) == 3 and all(1 <= len(a.split()) <= 20 for a in ans)


def test_top_k_and_threshold_are_refused_together_and_nan_threshold(ml, tmp_path):
    from lomtree_cli.daemon import Predictor
    from lomtree_cli.errors import ConfigError

    m = ml / "plt.lt"
    for extra in (["--top-k", "3", "--threshold", "0.9"], ["--threshold", "nan"]):
        line = one_error_line(run(["predict", "-i", str(m), str(ml / "d.vw"), "-p", "-", "--quiet"] + extra), 2)
        assert "threshold" in line, line
        line = one_error_line(run(["predict", "-i", str(m), "--daemon", "--port", "0"] + extra), 2)
        assert "threshold" in line, line
    with pytest.raises(ConfigError, match="0..1"):
        Predictor(str(m), threshold=float("nan"))


@pytest.mark.parametrize("red,opts", [("plt", []), ("oaa", []), ("plt", ["--top-k", "3"])])
def test_daemon_predicts_label_sets_without_a_global_lock(ml, red, opts):
    from lomtree_cli.daemon import Predictor

    top_k = int(opts[1]) if opts else 0
    assert Predictor(str(ml / f"{red}.lt"), top_k=top_k).lock is None


@pytest.mark.parametrize("red,top_k", [("plt", 0), ("oaa", 0), ("plt", 3)])
def test_a_heavy_client_does_not_hold_up_another(ml, monkeypatch, red, top_k):
    """A real daemon (in a thread) and two clients of a multi-label model: the first client's line
    is held inside the prediction kernel's call until the second client's line has been answered.
    With a lock around predictions the second answer could not come (it waited behind the first:
    with lines of millions of features, seconds)."""
    from lomtree_cli import daemon
    from lomtree_cli.reductions.classes import get_reduction_class

    cls = get_reduction_class(red)
    real = cls.predict_top
    inside, release = threading.Event(), threading.Event()

    def held(self, batch, n):
        if int(batch.indptr[-1]) > 100:  # the heavy line
            inside.set()
            release.wait(60)
        return real(self, batch, n)

    monkeypatch.setattr(cls, "predict_top", held)
    where = []
    started = threading.Event()

    def ready(address, stop):
        where.append((address, stop))
        started.set()

    srv = threading.Thread(target=daemon.serve, args=(str(ml / f"{red}.lt"),),
                           kwargs=dict(port=0, ready=ready, quiet=True, top_k=top_k), daemon=True)
    srv.start()
    assert started.wait(60)
    (host, port), stop = where[0][0][:2], where[0][1]
    try:
        heavy = socket.create_connection((host, port), timeout=60)
        heavy.sendall(("|f " + " ".join(f"f{i}" for i in range(300)) + "\n").encode())
        assert inside.wait(60)  # the heavy line is in the kernel's call
        light = socket.create_connection((host, port), timeout=20)
        light.sendall(b"|f f1 f2\n|f f3\n")
        light.shutdown(socket.SHUT_WR)
        try:
            answer = light.makefile("rb").read()
        except OSError:  # timed out: it waited behind the heavy line
            answer = b""
        release.set()
        heavy.shutdown(socket.SHUT_WR)
        heavy_answer = heavy.makefile("rb").read()
        light.close()
        heavy.close()
    finally:
        release.set()
        stop.set()
        srv.join(30)
    lines = answer.decode().split("\n")
    assert len(lines) == 3 and lines[2] == "" and not any(x.startswith("error") for x in lines), answer
    if top_k:
        assert all(1 <= len(x.split()) <= 3 for x in lines[:2]), lines
    assert heavy_answer.count(b"\n") == 1 and not heavy_answer.startswith(b"error")


# -- 10. importance weights: bounded at parse time, a finished run never lost ---------------------


def test_a_huge_importance_weight_is_a_malformed_line(tmp_path):
    lines = [f"{1 + i % 3} | c{1 + i % 3} n{i % 7}" for i in range(400)]
    lines[200] = "3 1e200 | c3"
    f = tmp_path / "d.vw"
    f.write_text("\n".join(lines) + "\n")
    m = tmp_path / "m.lt"
    line = one_error_line(run(["train", "-r", "oaa", "-k", "3", str(f), "-f", str(m), "--quiet"]), 1)
    assert line == f"error: {f}:201: bad importance weight '1e200' (must be at most 1e+06) (column 3)", line
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "-f", str(m), "--skip-invalid"])
    assert p.returncode == 0 and m.exists(), p.stderr
    assert "skipped lines = 1" in p.stderr
    lines[200] = "3 1e6 | c3"  # the largest weight is learned
    f.write_text("\n".join(lines) + "\n")
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "-f", str(m), "--quiet"])
    assert p.returncode == 0, p.stderr


def test_weight_bound_in_every_parse_path():
    from lomtree_cli.config import InputConfig
    from lomtree_cli.parsing import parse_bytes

    for cfg, line in ((InputConfig(), b"1 2e6 | a\n"), (InputConfig(multilabel=True), b"1,2 2e6 | a\n"),
                      (InputConfig(string_labels=True), b"x 2e6 | a\n"), (InputConfig(ngram="a2"), b"1 2e6 |a b c\n")):
        b = parse_bytes(line, replace_skip(cfg))
        assert len(b) == 0 and b.skipped[0].reason == "weight", cfg


def test_the_api_bounds_sample_weights_as_the_parser_bounds_importance_weights():
    """fit/partial_fit refuse a sample weight over the parser's bound before learning anything (a
    model that learned 1e200 once is lost); the bound itself is learned, as in a file."""
    from lomtree_cli import Classifier

    X = np.eye(4)[np.arange(40) % 4]
    y = np.arange(40) % 3 + 1
    w = np.ones(40)
    w[7] = 1e200
    clf = Classifier(reduction="oaa", classes=3)
    with pytest.raises(ValueError, match=r"sample_weight\[7\] = 1e\+200 is over 1e\+06"):
        clf.fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="over 1e"):
        Classifier(reduction="oaa", classes=3).partial_fit(X, y, sample_weight=w)
    w[7] = 1e6
    assert Classifier(reduction="oaa", classes=3).fit(X, y, sample_weight=w).predict(X).shape == (40,)


def replace_skip(cfg):
    from dataclasses import replace

    return replace(cfg, skip_invalid=True)


# -- 12. messages --------------------------------------------------------------------------------


def test_report_to_a_full_device_names_it(named, tmp_path):
    if not __import__("os").path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    m = tmp_path / "m.lt"
    p = run(["train", "-r", "oaa", "-k", "3", "--string-labels", str(named / "a.vw"), "-f", str(m), "--quiet",
             "--report", "/dev/full"])
    line = one_error_line(p, 1)
    assert line.startswith("error: cannot write the report to /dev/full: "), line
    assert m.exists()  # the model was written before the report


def test_crafted_label_counts_are_refused(ml, tmp_path):
    from fuzz.models import read, write

    header, arrays = read(str(ml / "oaa.lt"))
    for value in (1e308, 0.5):
        c = arrays["reduction/label_counts"].copy()
        c[1] = value
        arrays["reduction/label_counts"] = c
        out = tmp_path / "crafted.lt"
        write(str(out), header, arrays)
        p = run(["inspect", str(out)], env_extra={"PYTHONWARNINGS": "error"})
        line = one_error_line(p, 2)
        assert "label_counts invalid" in line and "Warning" not in p.stderr, p.stderr


def test_a_bad_label_ends_the_run_with_one_line_and_nothing_at_exit(tmp_path):
    """The parser thread is stopped when a bad line ends the pass: left to the interpreter's exit,
    its generator could not be closed and Python printed a traceback after the error line."""
    f = tmp_path / "d.vw"
    f.write_text("7 | a b\n" + "".join(f"{1 + i % 5} | f{i} g\n" for i in range(3000)))
    import subprocess
    import sys

    for _ in range(5):  # (the module's own entry point: ``launch`` leaves with os._exit)
        p = subprocess.run([sys.executable, "-m", "lomtree_cli.cli", "train", "-r", "oaa", "-k", "5", "-b", "10",
                            "--quiet", str(f)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 1 and p.stderr == f"error: {f}:1: label 7 is outside 1..5\n", p.stderr


@pytest.mark.parametrize("red", ["oaa", "plt"])
def test_an_overflowing_adaptive_sum_does_not_lose_the_run(tmp_path, red):
    """A feature value near 1e19 (a legal float32) squares past float32 in its adaptive sum: that
    weight has stopped learning, and the finished run is saved (the sum as the largest float32),
    predicts, and trains on."""
    from lomtree_cli import model_io

    lines = [f"{1 + i % 3} | c{1 + i % 3} n{i % 7}" for i in range(400)]
    lines[200] = "3 | c3 d:1e30"
    f = tmp_path / "d.vw"
    f.write_text("\n".join(lines) + "\n")
    m = tmp_path / "m.lt"
    p = run(["train", "-r", red, "-k", "3", str(f), "-f", str(m), "--quiet"])
    assert p.returncode == 0 and m.exists(), p.stderr
    g = model_io.load_model(str(m)).learner.arrays.table[:, 1]
    assert np.all(np.isfinite(g)) and g.max() == np.finfo(np.float32).max
    assert _accuracy(_predict(m, f), f) > 0.95
    p = run(["train", "-i", str(m), str(f), "-f", str(tmp_path / "m2.lt"), "--quiet"])
    assert p.returncode == 0, p.stderr
