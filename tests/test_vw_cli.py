"""VW's command lines as typed (``vwopts``): the ambiguous spellings' rules, run control, VW's
output formats, the daemon under VW's spelling, and ``--invert_hash`` over crossed features and
plt's block layout."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

from lomtree_cli.reductions.registry import REGISTRY
from lomtree_cli.vwopts import _has_zero_label, vw_argv
from tests.helpers import cli


def test_argv_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert vw_argv(["-k", "5", "a.vw"], REGISTRY) == ["-k", "5", "a.vw"]
    assert vw_argv(["-k", "--oaa", "10"], REGISTRY) == ["--kill_cache", "--oaa", "10"]
    assert vw_argv(["-d", "a", "-k"], REGISTRY) == ["-d", "a", "--kill_cache"]
    assert vw_argv(["-k", "-c", "--kill_cache"], REGISTRY) == ["--kill_cache", "-c"]
    (tmp_path / "7").write_text("1 | a\n")
    assert vw_argv(["-k", "7"], REGISTRY) == ["--kill_cache", "7"]  # a file: VW's kill-cache and an input
    assert vw_argv(["--progress", "10"], REGISTRY) == ["-P", "10"]
    assert vw_argv(["--progress", "1.5", "x"], REGISTRY) == ["-P", "1.5", "x"]
    assert vw_argv(["--progress", "x.vw"], REGISTRY) == ["--progress", "x.vw"]
    assert vw_argv(["--progress", "7"], REGISTRY) == ["--progress", "7"]  # the file 7
    assert vw_argv(["-r", "oaa", "-k", "3"], REGISTRY) == ["-r", "oaa", "-k", "3"]
    assert vw_argv(["-r", "raw.txt"], REGISTRY) == ["--raw_predictions", "raw.txt"]
    assert vw_argv(["--named_labels", "a,b"], REGISTRY) == ["--vw-named-labels", "--named_labels", "a,b"]
    assert vw_argv(["--named-labels", "a,b"], REGISTRY) == ["--named-labels", "a,b"]
    assert vw_argv(["--", "-k"], REGISTRY) == ["--", "-k"]


def _multiclass(tmp_path, lines=None, name="mc.vw"):
    d = tmp_path / name
    d.write_text("".join(lines or [f"{1 + i % 3} | f{i % 3} g{i % 5}\n" for i in range(60)]))
    return d


def test_k_with_a_number_stays_the_class_count(tmp_path):
    d = _multiclass(tmp_path)
    a = cli("train", "-r", "oaa", "-k", "3", str(d), "-p", tmp_path / "a.p", "--quiet")
    b = cli("train", "-r", "oaa", "--classes", "3", str(d), "-p", tmp_path / "b.p", "--quiet")
    assert a[0] == b[0] == 0
    assert (tmp_path / "a.p").read_bytes() == (tmp_path / "b.p").read_bytes()


def test_kill_cache(tmp_path):
    d = _multiclass(tmp_path)
    cache = tmp_path / "c.cache"
    assert cli("train", "--oaa", "3", str(d), "--cache_file", cache, "--passes", "2", "--quiet")[0] == 0
    first = cache.read_bytes()
    os.link(cache, tmp_path / "old")  # the old file keeps its inode: a cache written again has another
    assert cli("train", "--oaa", "3", str(d), "--cache_file", cache, "--passes", "2", "--quiet")[0] == 0
    assert os.path.samefile(cache, tmp_path / "old")  # without -k the valid cache is reused
    assert cli("train", "-k", "--oaa", "3", str(d), "--cache_file", cache, "--passes", "2", "--quiet")[0] == 0
    assert not os.path.samefile(cache, tmp_path / "old") and cache.read_bytes() == first  # removed, written again
    other = tmp_path / "not_a_cache"
    other.write_text("keep me\n")
    code, _, err = cli("train", "-k", "--oaa", "3", str(d), "--cache_file", other, "--passes", "2")
    assert other.read_text() == "keep me\n" and code != 0


def test_holdout_after_holds_out_the_tail_even_with_one_pass(tmp_path):
    d = _multiclass(tmp_path)
    code, _, err = cli("train", "--oaa", "3", str(d), "--holdout_after", "40")
    assert code == 0
    assert re.search(r"^average loss = [0-9.]+ h$", err, re.M)
    code, _, err = cli("train", "--oaa", "3", str(d), "--holdout_after", "40", "--holdout_off")
    assert code == 0 and re.search(r"^average loss = [0-9.]+$", err, re.M)


def test_no_stdin_noop_and_test_without_model(tmp_path):
    code, _, err = cli("train", "--oaa", "3", "--no_stdin", "-f", tmp_path / "m.lt")
    assert code == 0 and "number of examples = 0" in err and (tmp_path / "m.lt").exists()
    d = _multiclass(tmp_path)
    for flag in ("--noop", "-t"):
        code, out, err = cli("train", "--oaa", "3", str(d), flag, "-p", "-")
        assert code == 0, err
        assert set(out.split()) == {"1"}  # zero weights: the first class, all along


def test_predict_takes_d(tmp_path):
    d = _multiclass(tmp_path)
    m = tmp_path / "m.lt"
    assert cli("train", "--oaa", "3", str(d), "-f", m, "--quiet")[0] == 0
    a = cli("predict", "-i", m, "-d", d, "--quiet")
    b = cli("predict", "-i", m, d, "--quiet")
    assert a[0] == 0 and a[1] == b[1] and len(a[1].split()) == 60


def test_indexing_and_zero_label_detection(tmp_path):
    zero = _multiclass(tmp_path, [f"{i % 3} | f{i % 3}\n" for i in range(30)], "zero.vw")
    code, out, err = cli("train", "--oaa", "3", str(zero), "-p", "-")
    assert code == 0 and "0-indexed" in err and set(out.split()) <= {"0", "1", "2"} and "0" in out.split()
    code, out2, _ = cli("train", "--oaa", "3", str(zero), "-p", "-", "--indexing", "0", "--quiet")
    assert code == 0 and out2 == out
    assert _has_zero_label([str(zero)]) and not _has_zero_label([str(_multiclass(tmp_path))])
    # lomtree's own spelling keeps refusing a label 0
    assert cli("train", "-r", "oaa", "-k", "3", str(zero), "--quiet")[0] == 1


def test_probabilities_are_progressive_and_in_vws_format(tmp_path):
    d = _multiclass(tmp_path)
    code, out, err = cli("train", "--oaa", "3", str(d), "--probabilities", "--loss_function", "logistic", "-p", "-",
                         "--quiet")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "1:0.333333 2:0.333333 3:0.333333"  # before any update
    for ln in lines:
        ps = [float(x.split(":")[1]) for x in ln.split()]
        assert [x.split(":")[0] for x in ln.split()] == ["1", "2", "3"] and abs(sum(ps) - 1) < 1e-5
    code, out, _ = cli("train", "--oaa", "3", str(d), "--scores", "-p", "-", "--quiet")
    assert code == 0 and out.splitlines()[0] == "1:0 2:0 3:0"
    # -r FILE (not a reduction name) is VW's raw predictions
    assert cli("train", "--oaa", "3", str(d), "-r", tmp_path / "raw.txt", "--quiet")[0] == 0
    assert (tmp_path / "raw.txt").read_text() == out


def test_label_sets_of_vw_are_0_based_and_kept_inside_k(tmp_path):
    d = tmp_path / "ml.vw"
    d.write_text("0,1 | a\n1,2 | b\n6,2 | c\n0 | a\n")
    code, out, err = cli("train", "--multilabel_oaa", "5", str(d), "-p", "-")
    assert code == 0, err
    assert out.split("\n")[0] == ""  # nothing predicted before the first update
    assert all(set(ln.split(",")) <= {"0", "1", "2", "3", "4"} for ln in out.split() if ln)


def test_unknown_named_label_is_read_as_unlabeled_under_vws_spelling(tmp_path):
    d = tmp_path / "n.vw"
    d.write_text("cat | a\nfish | b\ndog | b\n")
    code, out, err = cli("train", "--oaa", "2", "--named_labels", "cat,dog", str(d), "-p", "-")
    assert code == 0, err and len(out.split()) == 3
    assert cli("train", "-r", "oaa", "--named-labels", "cat,dog", str(d), "--quiet")[0] == 1


def test_invert_hash_names_crossed_features(tmp_path):
    d = tmp_path / "q.vw"
    d.write_text("".join(f"{1 + i % 2} |a x{i % 3} |b y{i % 2}\n" for i in range(40)))
    out = tmp_path / "ih.txt"
    assert cli("train", "--oaa", "2", "-q", "::", str(d), "--invert_hash", out, "--quiet")[0] == 0
    text = out.read_text()
    crossed = set(re.findall(r"^(\S+\*\S+):\d+:", text, re.M))
    # VW 9: a namespace crossed with itself once per unordered pair, the diagonal kept
    assert {"a^x0*b^y0", "a^x1*b^y1", "b^y0*b^y0"} <= crossed
    assert "a^x1*a^x0" not in crossed and "b^y1*a^x0" not in crossed


def test_invert_hash_of_plt_lists_existing_nodes_with_their_weights(tmp_path):
    from lomtree_cli.model_io import load_model

    d = tmp_path / "p.vw"
    d.write_text("".join(f"{i % 7},{(i + 2) % 7} | w{i % 7} v{i % 4}\n" for i in range(200)))
    m = tmp_path / "p.lt"
    out = tmp_path / "ih.txt"
    assert cli("train", "--plt", "7", str(d), "-f", m, "--invert_hash", out, "--quiet")[0] == 0
    model = load_model(str(m), predict_only=True)
    n = model.reduction.n_nodes
    nodes = [int(x) for x in re.findall(r"^regressor \d+ \(tree node (\d+)\):$", out.read_text(), re.M)]
    assert nodes and max(nodes) < n
    w = np.asarray(model.learner.arrays.table)
    w = w[:, 0] if w.ndim == 2 else w
    for slot, val in re.findall(r"^\S+:(\d+):(\S+)$", out.read_text(), re.M):
        assert w[int(slot)] == pytest.approx(float(val), rel=1e-6)


def test_a_complete_tree_model_loads_and_a_changed_tree_is_refused(tmp_path):
    """VW's --plt tree mixes leaves and internal children under one node, which a k-means tree
    never does: a saved complete-tree model loads and predicts as the run that wrote it, and a
    model claiming --complete-tree whose tree is another is refused, not used."""
    from lomtree_cli.errors import ModelFormatError
    from lomtree_cli.model_io import load_model, save_model

    d = tmp_path / "p.vw"
    d.write_text("".join(f"{i % 7},{(i + 2) % 7} | w{i % 7} v{i % 4}\n" for i in range(200)))
    m = tmp_path / "p.lt"
    assert cli("train", "--plt", "7", str(d), "-f", m, "-p", tmp_path / "train.p", "--quiet")[0] == 0
    assert cli("train", "-t", "-i", m, str(d), "-p", tmp_path / "a.p", "--quiet")[0] == 0
    assert cli("predict", "-i", m, str(d), "-p", tmp_path / "b.p", "--quiet")[0] == 0
    assert (tmp_path / "a.p").read_bytes() == (tmp_path / "b.p").read_bytes()
    model = load_model(str(m))
    red = model.reduction
    label = red.tree.label
    a, b = np.flatnonzero(label[:red.n_nodes] > 0)[:2]
    label[a], label[b] = label[b], label[a]  # two labels swapped: a valid tree, not VW's
    bad = tmp_path / "bad.lt"
    save_model(str(bad), model.input_config, model.learner, model.reduction, model.passes_done)
    with pytest.raises(ModelFormatError, match="complete tree"):
        load_model(str(bad))


def test_invert_hash_reads_libsvm_in_its_format(tmp_path):
    d = tmp_path / "s.libsvm"
    d.write_text("".join(f"{1 + i % 2} {3 + i % 2}:1 10:0.5\n" for i in range(20)))
    out = tmp_path / "ih.txt"
    assert cli("train", "-r", "oaa", "-k", "2", "--format", "libsvm", str(d), "--invert_hash", out, "--quiet")[0] == 0
    names = set(re.findall(r"^(\S+?):\d+:", out.read_text(), re.M))
    assert {"3", "4", "10"} <= names


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_daemon_under_vws_spelling(tmp_path):
    d = _multiclass(tmp_path)
    m = tmp_path / "m.lt"
    assert cli("train", "--oaa", "3", str(d), "-f", m, "--quiet", "--passes", "3")[0] == 0
    want = cli("predict", "-i", m, d, "--quiet")[1].split()
    port_file, pid_file = tmp_path / "port", tmp_path / "pid"
    lomtree = [sys.executable, "-m", "lomtree_cli.launch"]
    # detached (no --foreground): the command returns once the daemon listens
    r = subprocess.run(lomtree + ["train", "-t", "-i", str(m), "--daemon", "--port", "0", "--num_children", "2",
                                  "--port_file", str(port_file), "--pid_file", str(pid_file), "--quiet"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(pid_file.read_text())
    try:
        port = int(port_file.read_text())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"1 tagged| f1 g1\n" + d.read_bytes())
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        lines = got.decode().splitlines()
        assert lines[0].endswith(" tagged") and [ln.split()[0] for ln in lines[1:]] == want
    finally:
        os.kill(pid, 15)
    assert cli("train", "--oaa", "3", str(d), "--daemon")[0] == 2  # the daemon predicts: -t -i MODEL
    assert cli("train", "-t", "-i", m, "--port", "5")[0] == 2
