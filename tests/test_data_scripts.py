"""Tests of data_scripts/ on tiny made-up inputs (never on the real datasets)."""

from __future__ import annotations

import bz2
import json
import lzma
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from data_scripts import common, convert_libsvm, download_libsvm, kjv_tasks, prepare_all, synthetic

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------
# helpers

_VW_NAME = re.compile(r"[^ \t:|\r]+")


def assert_vw_line(line: str) -> tuple[int, list[tuple[str, list[str]]]]:
    """Check a line against the VW subset lomtree reads; return (label, [(namespace, features)])."""
    assert "\n" not in line and "\r" not in line
    label_section, bar, rest = line.partition("|")
    assert bar, line
    assert label_section.endswith(" "), f"label touches '|' (would be a tag): {line!r}"
    toks = label_section.split()
    assert len(toks) == 1 and re.fullmatch(r"[0-9]+", toks[0]) and int(toks[0]) >= 1, line
    namespaces = []
    for ns in rest.split("|"):
        if ns[:1] in ("", " "):
            name, feats = "", ns.split()
        else:
            name, *feats = ns.split()
            assert _VW_NAME.fullmatch(name), line
        for f in feats:
            fname, colon, val = f.partition(":")
            assert _VW_NAME.fullmatch(fname), (f, line)
            if colon:
                float(val)
        namespaces.append((name, feats))
    return int(toks[0]), namespaces


def read(path) -> list[str]:
    return Path(path).read_text().splitlines()


# --------------------------------------------------------------------------------------------
# common


def test_open_text_reads_all_compressions(tmp_path):
    text = "a b\nc\r\nd\n"
    (tmp_path / "p.txt").write_bytes(text.encode())
    with lzma.open(tmp_path / "p.xz", "wb") as fh:
        fh.write(text.encode())
    with bz2.open(tmp_path / "p.bz2", "wb") as fh:
        fh.write(text.encode())
    for name in ("p.txt", "p.xz", "p.bz2"):
        assert list(common.iter_lines(tmp_path / name)) == ["a b", "c", "d"]


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "sub" / "o.txt"
    with pytest.raises(RuntimeError):
        with common.atomic_write(out) as fh:
            fh.write("partial")
            raise RuntimeError("boom")
    assert not out.exists()
    assert list((tmp_path / "sub").iterdir()) == []
    with common.atomic_write(out) as fh:
        fh.write("ok\n")
    assert out.read_text() == "ok\n"
    assert out.stat().st_mode & 0o044  # readable by others like a normally created file


def test_is_up_to_date(tmp_path):
    src, dst = tmp_path / "in", tmp_path / "out"
    src.write_text("x")
    assert not common.is_up_to_date([dst], [src])
    dst.write_text("y")
    os.utime(src, (1000, 1000))
    assert common.is_up_to_date([dst], [src])
    os.utime(src, (time.time() + 100, time.time() + 100))
    assert not common.is_up_to_date([dst], [src])


# --------------------------------------------------------------------------------------------
# convert_libsvm

LIBSVM_TEXT = (
    "3 1:0.5 7:-2e-3 12:1 \n"      # trailing space (letter files have one)
    "\n"                          # blank line: skipped
    "1 2:1.25   5:3\r\n"          # CRLF and a run of spaces
    "2.0 4:.5 # a comment\n"      # integral float label, comment
    "# only a comment\n"
    "5\n"                         # no features
)
LIBSVM_VW = ["3 | 1:0.5 7:-2e-3 12:1", "1 | 2:1.25 5:3", "2 | 4:.5", "5 |"]


@pytest.mark.parametrize("suffix", ["", ".xz", ".bz2"])
def test_convert_exact_lines(tmp_path, suffix):
    src = tmp_path / f"in.libsvm{suffix}"
    data = LIBSVM_TEXT.encode()
    if suffix == ".xz":
        data = lzma.compress(data)
    elif suffix == ".bz2":
        data = bz2.compress(data)
    src.write_bytes(data)
    n = convert_libsvm.convert(src, tmp_path / "out.vw", libsvm_copy=tmp_path / "copy.libsvm")
    assert n == 4
    assert (tmp_path / "out.vw").read_text() == "\n".join(LIBSVM_VW) + "\n"
    assert read(tmp_path / "copy.libsvm") == ["3 1:0.5 7:-2e-3 12:1 ", "1 2:1.25   5:3", "2.0 4:.5 # a comment", "5"]
    for line in read(tmp_path / "out.vw"):
        assert_vw_line(line)
    # decompress() gives the same copy as the one-pass conversion
    assert convert_libsvm.decompress(src, tmp_path / "copy2.libsvm") == 4
    assert read(tmp_path / "copy2.libsvm") == read(tmp_path / "copy.libsvm")


def test_convert_label_offset(tmp_path):
    src = tmp_path / "zero.libsvm"
    src.write_text("0 1:1\n9 3:2\n")
    convert_libsvm.convert(src, tmp_path / "o.vw", label_offset=1)
    assert read(tmp_path / "o.vw") == ["1 | 1:1", "10 | 3:2"]


@pytest.mark.parametrize("bad, why", [
    ("0 1:1", "< 1"),
    ("1,2 1:1", "multi-label"),
    ("1.5 1:1", "not an integer"),
    ("x 1:1", "could not convert"),
    ("1 a:1", "bad feature"),
    ("1 3", "bad feature"),
    ("1 3:nan", "bad value"),
    ("1 3:1:2", "bad value"),
])
def test_convert_rejects_bad_lines_with_line_number(tmp_path, bad, why):
    src = tmp_path / "bad.libsvm"
    src.write_text(f"1 1:1\n{bad}\n")
    dst = tmp_path / "o.vw"
    with pytest.raises(convert_libsvm.LibsvmFormatError, match=rf"bad.libsvm:2: .*{re.escape(why)}"):
        convert_libsvm.convert(src, dst)
    assert not dst.exists()  # atomic: nothing half-written


def test_convert_cli(tmp_path):
    src = tmp_path / "a.libsvm"
    src.write_text("2 1:1\n")
    assert convert_libsvm.main([str(src), str(tmp_path / "a.vw")]) == 0
    assert read(tmp_path / "a.vw") == ["2 | 1:1"]


# --------------------------------------------------------------------------------------------
# kjv_tasks

TOY_KJV = """\
Ge1:1 In the beginning God created the heaven and the earth.
Ge1:2 And the earth was without form, and void.
Ge1:3 And God said, Let there be light: and there was light.
Exo1:1 Now these are the names of the children of Israel.
Exo1:2 Reuben, Simeon, Levi, and Judah,
1Sm1:1 Now there was a certain man of Ramathaimzophim.
1Sm1:2 And he had two wives; the LORD'S 'house'.
1Sm1:3 And this man went up out of his city yearly.
1Sm2:1 And Hannah prayed, and said, My heart rejoiceth in the LORD.
1Sm2:2 There is none holy as the LORD: for there is none beside thee.
1Sm2:3 Talk no more so exceeding proudly.
"""


@pytest.fixture
def toy_kjv(tmp_path):
    path = tmp_path / "kjv.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as fh:
        fh.write(TOY_KJV)
    return path


def test_tokenize():
    assert kjv_tasks.tokenize("the LORD'S 'house'. fathers' -- 12 o'clock") == [
        "the", "lord's", "house", "fathers", "o'clock"]
    assert kjv_tasks.tokenize("''' 3:4") == []


def test_parse_verse_book_with_digit():
    v = kjv_tasks.parse_verse("1Sm2:10 The adversaries")
    assert (v.ref, v.book, v.chapter, v.number, v.words) == ("1Sm2:10", "1Sm", 2, 10, ["the", "adversaries"])
    with pytest.raises(ValueError):
        kjv_tasks.parse_verse("Genesis 1:1 In the beginning")


def test_next_word_exact_lines_padding_other_and_split(toy_kjv, tmp_path):
    out = tmp_path / "out"
    info = kjv_tasks.build_next_word(toy_kjv, out, vocab=4)
    # training counts (verse 9 held out): and 10, the 8, of 4, there 3, was 3 -> 'there' wins the tie
    vocab = read(info["vocab"])
    assert vocab[0] == "rank\tword\tcount"
    assert vocab[1:5] == ["1\tand\t10", "2\tthe\t8", "3\tof\t4", "4\tthere\t3"]
    assert vocab[5].startswith("5\t<other>\t")
    assert info["n_classes"] == 5 and info["n_vocab"] == 4
    train = read(info["train"])
    test = read(info["test"])
    assert train[:10] == [
        "5 |p1 <s> |p2 <s> |pair <s>_<s>",                    # in
        "2 |p1 in |p2 <s> |pair <s>_in",                      # the
        "5 |p1 the |p2 in |pair in_the",                      # beginning
        "5 |p1 beginning |p2 the |pair the_beginning",        # god
        "5 |p1 god |p2 beginning |pair beginning_god",        # created
        "2 |p1 created |p2 god |pair god_created",            # the
        "5 |p1 the |p2 created |pair created_the",            # heaven
        "1 |p1 heaven |p2 the |pair the_heaven",              # and
        "2 |p1 and |p2 heaven |pair heaven_and",              # the
        "5 |p1 the |p2 and |pair and_the",                    # earth
    ]
    assert train[10] == "1 |p1 <s> |p2 <s> |pair <s>_<s>"  # verse 2 starts afresh
    # 1 verse in 10 held out: verse index 9 ("There is none holy as the LORD: for there is none beside thee")
    assert len(test) == 13 and info["n_test"] == 13 and info["n_test_verses"] == 1
    assert test[0] == "4 |p1 <s> |p2 <s> |pair <s>_<s>"
    assert test[6] == "5 |p1 the |p2 as |pair as_the"  # 'lord' is out of vocabulary
    n_words = sum(len(kjv_tasks.tokenize(l.split(" ", 1)[1])) for l in TOY_KJV.splitlines())
    assert info["n_train"] == len(train) == n_words - 13
    assert info["n_train_verses"] == 10
    for line in train + test:
        label, namespaces = assert_vw_line(line)
        assert 1 <= label <= 5
        assert [name for name, _ in namespaces] == ["p1", "p2", "pair"]
        assert all(len(feats) == 1 for _, feats in namespaces)  # 3 features (+ constant = 4)
    assert "9 |p1 wives |p2 two |pair two_wives" not in train
    assert "5 |p1 the |p2 wives |pair wives_the" in train   # lord's -> other
    assert "5 |p1 lord's |p2 the |pair the_lord's" in train  # house


def test_next_word_split_rule():
    assert [i for i in range(30) if kjv_tasks.is_next_word_test(i)] == [9, 19, 29]


def test_book_task_labels_and_split(toy_kjv, tmp_path):
    info = kjv_tasks.build_book(toy_kjv, tmp_path / "b", seed=0)
    assert info["n_classes"] == 3
    assert (info["n_train"], info["n_test"]) == (9, 2)  # 11 verses, positions 4 and 9 held out
    train, test = read(info["train"]), read(info["test"])
    expected = []
    for line in TOY_KJV.splitlines():
        ref, text = line.split(" ", 1)
        book = re.match(r"\d?[A-Za-z]+", ref).group(0)
        expected.append(f"{ {'Ge': 1, 'Exo': 2, '1Sm': 3}[book]} |w " + " ".join(kjv_tasks.tokenize(text)))
    assert sorted(train + test) == sorted(expected)
    assert "1 |w in the beginning god created the heaven and the earth" in expected
    assert "3 |w and he had two wives the lord's house" in expected
    for line in train + test:
        label, namespaces = assert_vw_line(line)
        assert namespaces[0][0] == "w"
    order = np.random.default_rng(0).permutation(11)
    assert test == [expected[order[4]], expected[order[9]]]
    assert read(info["books"]) == ["label\tbook\tverses", "1\tGe\t3", "2\tExo\t2", "3\t1Sm\t6"]
    # same seed -> same files; another seed -> another order
    again = kjv_tasks.build_book(toy_kjv, tmp_path / "b2", seed=0)
    assert read(again["train"]) == train
    other = kjv_tasks.build_book(toy_kjv, tmp_path / "b3", seed=1)
    assert read(other["train"]) + read(other["test"]) != train + test


def test_book_line_keeps_repeats_and_handles_empty():
    assert kjv_tasks.book_line(7, ["holy", "holy", "holy"]) == "7 |w holy holy holy"
    assert kjv_tasks.book_line(7, []) == "7 |w"
    assert_vw_line(kjv_tasks.book_line(7, []))


# --------------------------------------------------------------------------------------------
# synthetic


def gen(**kw) -> bytes:
    return b"".join(synthetic.generate(**kw))


def parse_synth(data: bytes) -> list[tuple[int, list[int]]]:
    out = []
    for line in data.decode().splitlines():
        label, namespaces = assert_vw_line(line)
        assert len(namespaces) == 1 and namespaces[0][0] == ""
        feats = namespaces[0][1]
        assert all(re.fullmatch(r"f(0|[1-9][0-9]*)", f) for f in feats), line
        out.append((label, [int(f[1:]) for f in feats]))
    return out


def test_synthetic_deterministic_and_chunk_invariant():
    a = gen(k=100, n=3000, seed=5)
    assert a == gen(k=100, n=3000, seed=5)
    assert a == gen(k=100, n=3000, seed=5, chunk_size=7)
    assert a != gen(k=100, n=3000, seed=6)
    test = gen(k=100, n=3000, seed=5, stream=synthetic.TEST_STREAM)
    assert test != a
    # a longer stream starts with the shorter one
    assert gen(k=100, n=5000, seed=5).startswith(a)


def test_synthetic_labels_and_feature_counts():
    k, p, q = 7, 5, 3
    rows = parse_synth(gen(k=k, n=4000, seed=1, noise=0.0, proto_features=p, noise_features=q, vocab=1000))
    assert len(rows) == 4000
    assert {lab for lab, _ in rows} == set(range(1, k + 1))
    protos = synthetic.prototypes(np.arange(k + 1), seed=1, proto_features=p, vocab=1000)
    for lab, feats in rows:
        assert len(feats) == p + q
        assert feats[:p] == protos[lab].tolist()  # the class prototype, in order
        assert all(0 <= f < 1000 for f in feats)
    # noise = 1 drops every prototype feature
    rows = parse_synth(gen(k=k, n=200, seed=1, noise=1.0, proto_features=p, noise_features=q))
    assert all(len(feats) == q for _, feats in rows)
    # noise = 0.25 keeps ~75 % of the prototype features; test stream shares prototypes
    rows = parse_synth(gen(k=k, n=4000, seed=1, noise=0.25, proto_features=p, noise_features=0,
                           vocab=1000, stream=synthetic.TEST_STREAM))
    kept = np.mean([len(f) for _, f in rows]) / p
    assert abs(kept - 0.75) < 0.02
    assert all(set(f) <= set(protos[lab].tolist()) for lab, f in rows)


def test_synthetic_prototypes_are_class_specific():
    protos = synthetic.prototypes(np.arange(1, 1001), seed=0)  # defaults: 8 ids out of 10^6
    counts = Counter(protos.ravel().tolist())
    shared = sum(c for c in counts.values() if c > 1) / protos.size
    assert shared < 0.03
    # every class has (almost always) ids no other class uses
    assert all(sum(counts[f] == 1 for f in row) >= 6 for row in protos.tolist())


def labels_of(data: bytes) -> list[int]:
    return [int(line.split(b" ", 1)[0]) for line in data.splitlines()]


def test_synthetic_uniform_vs_zipf_frequencies():
    n, k = 10000, 10
    uni = Counter(labels_of(gen(k=k, n=n, seed=2, vocab=100)))
    freqs = np.array([uni[c] for c in range(1, k + 1)]) / n
    assert np.all(np.abs(freqs - 0.1) < 0.015)
    zipf = Counter(labels_of(gen(k=k, n=n, seed=2, zipf=1.0, vocab=100)))
    zf = np.array([zipf[c] for c in range(1, k + 1)]) / n
    expected = (1.0 / np.arange(1, k + 1)) / np.sum(1.0 / np.arange(1, k + 1))
    assert np.all(np.abs(zf - expected) < 0.015)
    assert zf[0] > 3 * zf[9]


def test_synthetic_million_classes_small_memory():
    k = 10**6
    tracemalloc.start()
    try:
        data = gen(k=k, n=3000, seed=0, zipf=1.1, chunk_size=1000)
        uni = gen(k=k, n=3000, seed=0, chunk_size=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20  # the Zipf cdf (8 MB) plus one chunk; nothing k x features
    labels = [lab for lab, _ in parse_synth(uni)]
    assert 1 <= min(labels) and max(labels) <= k
    assert len(set(labels)) > 2900  # uniform over 10^6 classes: almost no repeats
    zl = [lab for lab, _ in parse_synth(data)]
    assert max(zl) <= k and Counter(zl)[1] > 100  # zipf 1.1: class 1 has ~7 %


def test_synthetic_rejects_bad_args():
    with pytest.raises(ValueError):
        gen(k=0, n=1)
    with pytest.raises(ValueError):
        gen(k=10, n=1, noise=1.5)


def test_synthetic_cli_train_and_test(tmp_path):
    out, test = tmp_path / "tr.vw", tmp_path / "te.vw"
    assert synthetic.main(["-k", "50", "-n", "300", "--seed", "3", "--out", str(out),
                           "--test-out", str(test), "--test-n", "40", "--zipf", "1.2"]) == 0
    assert out.read_bytes() == gen(k=50, n=300, seed=3, zipf=1.2)
    assert test.read_bytes() == gen(k=50, n=40, seed=3, zipf=1.2, stream=synthetic.TEST_STREAM)
    r = subprocess.run([sys.executable, "-m", "data_scripts.synthetic", "-k", "20", "-n", "5"],
                       cwd=REPO, capture_output=True, check=True)
    assert r.stdout == gen(k=20, n=5)


# --------------------------------------------------------------------------------------------
# download_libsvm (never touches the network)


def test_download_urls():
    urls = download_libsvm.urls(["aloi", "sector", "letter"])
    base = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/"
    assert (base + "aloi.scale.bz2", "aloi.scale.bz2") in urls
    assert (base + "sector/sector.t.scale.bz2", "sector.t.scale.bz2") in urls
    assert (base + "letter.scale", "letter.scale") in urls
    assert all(u.startswith(base) for u, _ in download_libsvm.urls(download_libsvm.FILES))
    with pytest.raises(KeyError):
        download_libsvm.urls(["nope"])


def test_download_list_cli(tmp_path, capsys):
    assert download_libsvm.main(["--list", "--dest", str(tmp_path), "pendigits"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{download_libsvm.BASE_URL}pendigits\t{tmp_path / 'pendigits'}",
                     f"{download_libsvm.BASE_URL}pendigits.t\t{tmp_path / 'pendigits.t'}"]


# --------------------------------------------------------------------------------------------
# prepare_all on a fake data dir


@pytest.fixture
def fake_data_dir(tmp_path):
    d = tmp_path / "datasets"
    files = {
        "sector/sector.scale.bz2": "1 3:0.5 9:0.25\n2 4:1\n",
        "sector/sector.t.scale.bz2": "2 3:0.125\n",
        "letter/letter.scale.xz": "1 1:-0.5 2:0.5 \n26 1:1 \n3 2:1 \n",
        "letter/letter.scale.t.xz": "3 1:0.1 \n",
        "pendigits/pendigits.xz": "9 1:47 2:100\n",
        "pendigits/pendigits.t.xz": "3 2:89\n10 1:1\n",
        "kjv/kjv.txt.xz": TOY_KJV,
    }
    for rel, text in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        opener = bz2.open if rel.endswith(".bz2") else lzma.open
        with opener(p, "wt", encoding="utf-8") as fh:
            fh.write(text)
    return d


def test_prepare_all_builds_skips_and_rebuilds(fake_data_dir, tmp_path):
    out = tmp_path / "bench"
    kw = dict(synthetic_k=[10], synthetic_n=50, vocab=4)
    log1 = []
    manifest = prepare_all.prepare_all(fake_data_dir, out, out=_Lines(log1), **kw)
    expected = {
        "sector.train.vw": (2, 2), "sector.test.vw": (1, 1), "sector.train.libsvm": (2, 2),
        "letter.train.vw": (3, 3), "pendigits.test.vw": (2, 2),
        "kjv_nextword.test.vw": (13, None), "kjv_book.train.vw": (9, None), "kjv_book.test.vw": (2, None),
        "synth_k10.train.vw": (50, None), "synth_k10.test.vw": (5, None),
    }
    for name, (lines, classes) in expected.items():
        assert manifest[name]["lines"] == lines, name
        if classes is not None:
            assert manifest[name]["classes"] == classes, name
        assert (out / name).exists()
    assert read(out / "sector.train.vw") == ["1 | 3:0.5 9:0.25", "2 | 4:1"]
    assert read(out / "letter.test.libsvm") == ["3 1:0.1 "]
    assert json.loads((out / "manifest.json").read_text())["kjv_book.test.vw"]["lines"] == 2
    assert sum("built" in line for line in log1[:-1]) == 18 and "6 of 6 tasks" in log1[-1]

    mtimes = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    log2 = []
    prepare_all.prepare_all(fake_data_dir, out, out=_Lines(log2), **kw)
    assert "0 of 6 tasks" in log2[-1]
    assert sum("up to date" in line for line in log2[:-1]) == 18
    assert all(mtimes[p.name] == p.stat().st_mtime_ns for p in out.iterdir() if p.name != "manifest.json")

    # a newer input rebuilds only its task; changed parameters rebuild only theirs
    past = time.time() - 100
    for name in ("train.vw", "test.vw", "train.libsvm", "test.libsvm"):
        os.utime(out / f"pendigits.{name}", (past, past))
    log3 = []
    prepare_all.prepare_all(fake_data_dir, out, out=_Lines(log3), **kw)
    assert "1 of 6 tasks" in log3[-1]
    assert all(("built" in line) == line.startswith("pendigits") for line in log3[:-1])
    log4 = []
    prepare_all.prepare_all(fake_data_dir, out, out=_Lines(log4), synthetic_k=[10], synthetic_n=60, vocab=4)
    assert "1 of 6 tasks" in log4[-1]
    assert len(read(out / "synth_k10.train.vw")) == 60
    log5 = []
    prepare_all.prepare_all(fake_data_dir, out, out=_Lines(log5), force=True, only=["kjv_book"], **kw)
    assert "1 of 1 tasks" in log5[-1]


def test_prepare_all_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError):
        prepare_all.prepare_all(tmp_path / "nothing", tmp_path / "o", out=_Lines([]))


class _Lines:
    """A file-like object collecting printed lines."""

    def __init__(self, sink: list):
        self.sink = sink
        self._buf = ""

    def write(self, s: str) -> int:
        self._buf += s
        *lines, self._buf = self._buf.split("\n")
        self.sink.extend(lines)
        return len(s)

    def flush(self):
        pass


# --------------------------------------------------------------------------------------------
# every script runs with --help


@pytest.mark.parametrize("module", ["convert_libsvm", "kjv_tasks", "synthetic", "download_libsvm", "prepare_all"])
def test_help(module):
    r = subprocess.run([sys.executable, "-m", f"data_scripts.{module}", "--help"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout


@pytest.mark.parametrize("module", [common, convert_libsvm, kjv_tasks, synthetic, download_libsvm])
def test_doctests(module):
    import doctest

    assert doctest.testmod(module).failed == 0


def test_tune_lomtree_folds_hold_out_every_line_once():
    """--cv K: over the K rotated fold files, with every K-th position held out, each line of the
    training file is held out exactly once (file length a multiple of K)."""
    from data_scripts.tune_lomtree import fold_rotations

    k = 5
    lines = [f"{i}\n" for i in range(40)]
    held = []
    for fold in fold_rotations(lines, k):
        assert sorted(fold) == sorted(lines)
        held += [fold[pos - 1] for pos in range(k, len(fold) + 1, k)]
    assert sorted(held) == sorted(lines)


# --------------------------------------------------------------------------- PyPI next-word task

TOY_PYPI = "".join(f"pkg{i}\t{s}\n" for i, s in enumerate([
    "A lib for creating tensorflow tfrecords", "My short description for my project.", "POC showing package takeover",
    "Zero-OS 0-core client", "A python client for the API", "Tools for data", "The client's tools",
    "A lib for data", "Python tools", "held out: a client for tools", "A python lib", "never read"]))


def test_pypi_task_sizes_vocab_split_and_lines(tmp_path):
    from data_scripts import bench_pypi, pypi_tasks

    src = tmp_path / "summaries.txt.xz"
    src.write_bytes(lzma.compress(TOY_PYPI.encode()))
    docs = pypi_tasks.read_summaries(src, 11)  # the first 11 summaries: the last line is never read
    assert len(docs) == 11 and docs[6] == ["the", "client's", "tools"] and docs[3] == ["zero", "os", "core", "client"]
    info = pypi_tasks.build(src, tmp_path, 11, 3, docs)
    assert Path(info["train"]).name == "pypi_11_v3.train.vw" and info["n_classes"] == 4
    # vocabulary over the training summaries (summary 9 held out): for 5, a 4, then lib / python / tools 3
    # (ties alphabetical: lib); client's is a word of its own
    assert read(info["vocab"])[1:4] == ["1\tfor\t5", "2\ta\t4", "3\tlib\t3"]
    test = read(info["test"])
    assert test == ["4 |p1 <s> |p2 <s> |pair <s>_<s>", "4 |p1 held |p2 <s> |pair <s>_held",
                    "2 |p1 out |p2 held |pair held_out", "4 |p1 a |p2 out |pair out_a",
                    "1 |p1 client |p2 a |pair a_client", "4 |p1 for |p2 client |pair client_for"]
    assert info["n_train"] == sum(len(d) for i, d in enumerate(docs) if i != 9) == len(read(info["train"]))
    assert pypi_tasks.task_name(0, 20000) == "pypi_all_v20000" and pypi_tasks.size_name(300000) == "300k"
    bad = tmp_path / "bad.txt"
    bad.write_text("pkg\tok\nno tab here\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected name<TAB>summary"):
        pypi_tasks.read_summaries(bad)
    # the benchmark leaves out the slow systems where their time or memory is beyond the budget
    assert bench_pypi.skip_reason("napkinxc_plt", 300_000, 40_000, 2_400_000, 20_001, 1200) is not None
    assert bench_pypi.skip_reason("napkinxc_plt", 40_000, 40_000, 330_000, 20_001, 1200) is None
    assert bench_pypi.skip_reason("oaa", 0, 40_000, 6_500_000, 100_001, 1200).startswith("projected")
    assert bench_pypi.skip_reason("oaa", 40_000, 40_000, 330_000, 20_001, 1200) is None


def test_pypi_report_keeps_every_runs_command():
    from data_scripts import bench_pypi

    assert bench_pypi.runs_of({"command": "python -m data_scripts.bench_pypi --sizes 0"}) == [
        "python -m data_scripts.bench_pypi --sizes 0"]
    meta = {"commands": ["run a", "run b"], "machine": "2 CPUs"}
    assert bench_pypi.runs_of(meta) == ["run a", "run b"] and bench_pypi.runs_of({}) == []
    text = bench_pypi.render({}, meta)
    assert "- `run a`\n- `run b`\n" in text and "Machine: 2 CPUs." in text


def test_paired_comparison_counts_discordant_pairs(tmp_path):
    """Hand-worked: four examples; A is right on 1 and 2, B on 1 and 3. Same error (50 %), one
    discordant pair each way, so the difference is 0 and the interval holds it."""
    from data_scripts import paired

    (tmp_path / "t.vw").write_text("1 |a x\n2 |a y\n3 |a z\n4 | w\n")
    (tmp_path / "a.pred").write_text("1\n2\n9\n9\n")
    (tmp_path / "b.pred").write_text("1 tag\n9\n3\n9\n")
    r = paired.compare(paired.first_tokens(tmp_path / "t.vw"), paired.first_tokens(tmp_path / "a.pred"),
                       paired.first_tokens(tmp_path / "b.pred"), draws=200)
    assert (r["error_a"], r["error_b"], r["b_minus_a"]) == (50.0, 50.0, 0.0)
    assert (r["only_a_right"], r["only_b_right"]) == (1, 1)
    assert r["ci95"][0] <= 0.0 <= r["ci95"][1]
    (tmp_path / "c.pred").write_text("1\n2\n3\n4\n")  # always right: B - A = -50, no draw above 0
    r = paired.compare(paired.first_tokens(tmp_path / "t.vw"), paired.first_tokens(tmp_path / "a.pred"),
                       paired.first_tokens(tmp_path / "c.pred"), draws=200)
    assert r["b_minus_a"] == -50.0 and r["ci95"][0] < 0 and r["ci95"][1] <= 0
    assert paired.main([str(tmp_path / "t.vw"), str(tmp_path / "a.pred"), str(tmp_path / "t.vw")[:-3] + "x"]) == 1


# --------------------------------------------------------------------------- PyPI-names tagging task


def test_pypi_names_task_by_hand(tmp_path):
    from data_scripts import pypi_names

    # tokens: 'py' in 4 names (kept at 2), 'web' in 2 (kept), 'x' in 1 (dropped); 'lone' has no kept
    # label and 'empty' no word, so both are dropped; of the 10 kept, the 10th is the test example
    lines = ["py-web\tA Web tool's core", "py.x\tparse 2 YAML", "web_py\tweb web", "lone\tnothing kept",
             "empty-py\t123 --", "PY\tone", "py\ttwo", "py\tthree", "py\tfour", "py\tfive", "py\tsix",
             "py\tseven"]
    lines[5:] = [l.replace("PY", "py") for l in lines[5:]]
    pk = pypi_names.read_packages(lines)
    assert pk[0] == (["py", "web"], ["a", "web", "tool's", "core"])
    assert pk[2] == (["web", "py"], ["web"])
    labels, vocab, train, test = pypi_names.build_task(pk, 2)
    assert labels == ["py", "web"]
    assert len(train) == 9 and len(test) == 1
    assert [ids for ids, _ in train[:3]] == [[1, 2], [1], [1, 2]]
    assert test[0] == ([1], [vocab.index("seven")])
    assert "nothing" not in vocab and "kept" not in vocab  # the dropped package's words
    assert vocab == sorted(vocab)
    pypi_names.write_task(tmp_path, "t", labels, vocab, train, test, vw=True)
    xmc = (tmp_path / "t.train.txt").read_text().splitlines()
    assert xmc[0] == f"9 {len(vocab)} 2"
    ids = sorted(vocab.index(w) for w in ["a", "web", "tool's", "core"])
    assert xmc[1] == "0,1 " + " ".join(f"{i}:0.5" for i in ids)
    assert (tmp_path / "t.train.vw").read_text().splitlines()[0] == "1,2 | a web tool's core"
    assert (tmp_path / "t.labels.tsv").read_text() == "1\tpy\n2\tweb\n"
    with pytest.raises(ValueError, match=r"<input>:2: expected name<TAB>summary"):
        pypi_names.read_packages(["a\tb", "no tab"])


# --------------------------------------------------------------------------------------------
# shared helpers of data_scripts/common.py, and modules that only run under __main__


def test_log_writes_a_flushed_line_to_stderr_only(capsys):
    common.log("step 1 of 3")
    out, err = capsys.readouterr()
    assert (out, err) == ("", "step 1 of 3\n")


def test_children_cpu_seconds_counts_a_finished_child():
    """The difference around a child that burns CPU is at least the CPU the child itself saw
    (its own ``os.times()`` just before exiting)."""
    code = ("import os\nt = os.times()\nwhile os.times().user - t.user < 0.2:\n    pass\n"
            "t = os.times()\nprint(t.user + t.system)\n")
    before = common.children_cpu_seconds()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    spent = common.children_cpu_seconds() - before
    assert spent >= float(r.stdout) * 0.99 and float(r.stdout) >= 0.2


def test_data_dir_argument():
    import argparse

    ap = argparse.ArgumentParser()
    common.add_data_dir_argument(ap)
    assert ap.parse_args([]).data_dir == str(common.DEFAULT_DATA_DIR)
    assert ap.parse_args(["--data-dir", "elsewhere"]).data_dir == "elsewhere"


@pytest.mark.parametrize("module", ["features_alternate", "features_cmp_vw", "features_figures",
                                    "features_regularization", "features_table"])
def test_importing_a_features_script_runs_nothing(module):
    """The feature-option scripts run only as ``python -m data_scripts.features_...``: importing one
    prints nothing, writes nothing, reads no argument."""
    r = subprocess.run([sys.executable, "-c", f"import data_scripts.{module}"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
