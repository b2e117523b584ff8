"""``lomtree train --trees N``: N models with seeds S, S+1, ... in one file (``model_io.save_trees``)
that ``predict`` ranks as an ensemble. Checked against the same models trained apart and given
as ``-i A -i B -i C``, the file format's checks, and the refusals."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from lomtree_cli import model_io
from lomtree_cli.errors import ConfigError, ModelFormatError
from lomtree_cli.paths import is_writing_leftover
from tests.helpers import cli, label_set_lines, one_error, separable_lines


def _label_set_lines(n, seed):
    """Lines of one to three labels of 1..40, a word per label and one shared by neighbouring
    labels, and noise: enough labels that plt's k-means trees differ by seed."""
    return label_set_lines(n, seed, k=40, noise=1, vocab=30, group=3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("trees")
    (d / "train.vw").write_text("\n".join(_label_set_lines(1500, 0)) + "\n")
    (d / "test.vw").write_text("\n".join(_label_set_lines(300, 1)) + "\n")
    return d


def _train(d, name, *opts):
    code, _, err = cli("train", "-r", "plt", "--multilabel", "-k", 40, "-b", 18, d / "train.vw", "-f", d / name,
                       "--quiet", *opts)
    assert code == 0, err
    return d / name


def _predict(d, *models, opts=("--top-k", 5)):
    args = [a for m in models for a in ("-i", m)]
    code, out, err = cli("predict", *args, d / "test.vw", "--quiet", *opts)
    assert code == 0, err
    return out


def test_a_file_of_trees_predicts_as_its_trees_trained_apart(data):
    """``--trees 3 --seed 5`` answers exactly what the models of ``--seed 5``, ``6`` and ``7``
    trained one by one answer as ``-i A -i B -i C``; the seeds give different trees (so a file of
    three copies of one tree would not pass)."""
    trees = _train(data, "t.lt", "--trees", 3, "--seed", 5)
    apart = [_train(data, f"s{s}.lt", "--seed", s) for s in (5, 6, 7)]
    assert _predict(data, trees) == _predict(data, *apart)
    assert _predict(data, trees, opts=("--threshold", 0.3)) == _predict(data, *apart, opts=("--threshold", 0.3))
    singles = {_predict(data, m) for m in apart}
    assert len(singles) == 3
    assert _predict(data, trees) not in singles
    # a file of trees is one -i among others: its trees and the other models average together
    import shutil

    other = shutil.copyfile(apart[0], data / "copy.lt")
    assert _predict(data, trees, other) == _predict(data, *apart, other)


def test_trees_read_the_cache_of_the_first_and_stdin(data, tmp_path):
    """The trees after the first read the first's example cache (-c's, else the run's own): the
    same file of trees as reading the text again, on stdin too."""
    plain = _train(data, "plain.lt", "--trees", 2)
    assert not [p.name for p in data.iterdir() if p.name.startswith(".")]  # its own cache is gone
    cached = _train(data, "cached.lt", "--trees", 2, "-c", tmp_path / "c.cache")
    assert _predict(data, cached) == _predict(data, plain)
    import subprocess
    import sys

    stdin_model = tmp_path / "stdin.lt"
    r = subprocess.run([sys.executable, "-m", "lomtree_cli.launch", "train", "-r", "plt", "--multilabel", "-k", "40",
                        "-b", "18", "-f", str(stdin_model), "--trees", "2", "-c", str(tmp_path / "s.cache"),
                        "--quiet"], stdin=open(data / "train.vw"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _predict(data, stdin_model) == _predict(data, plain)
    # without -c, stdin too: the run keeps a cache of its own beside -f and removes it at the end
    d = tmp_path / "no_c"
    d.mkdir()
    r = subprocess.run([sys.executable, "-m", "lomtree_cli.launch", "train", "-r", "plt", "--multilabel", "-k", "40",
                        "-b", "18", "-f", str(d / "x.lt"), "--trees", "2", "--quiet"], stdin=open(data / "train.vw"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in d.iterdir()) == ["x.lt"]
    assert _predict(data, d / "x.lt") == _predict(data, plain)
    # -c without a path: MODEL.cache beside -f, which every tree reads; nothing else is left
    d = tmp_path / "plain_c"
    d.mkdir()
    r = subprocess.run([sys.executable, "-m", "lomtree_cli.launch", "train", "-r", "plt", "--multilabel", "-k", "40",
                        "-b", "18", "-f", str(d / "m.lt"), "--trees", "2", "--quiet", "-c"],
                       stdin=open(data / "train.vw"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in d.iterdir()) == ["m.lt", "m.lt.cache"]
    assert _predict(data, d / "m.lt") == _predict(data, plain)


def test_report_and_inspect_of_a_file_of_trees(data, tmp_path):
    # (a file of trees is predict-only: --weight-threshold needs no --predict_only_model)
    code, _, err = cli("train", "-r", "plt", "--multilabel", "-k", 40, "-b", 18, data / "train.vw", "-f",
                       tmp_path / "t.lt", "--trees", 2, "--quiet", "--report", tmp_path / "r.json",
                       "--weight-threshold", 0.01)
    assert code == 0, err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["trees"] == 2 and len(r["tree_reports"]) == 2 and r["examples"] == 1500
    # each tree's seconds are its own, the report's the whole run's (not a sum of times since the start)
    assert 0 < sum(t["seconds"] for t in r["tree_reports"]) <= r["seconds"]
    code, out, err = cli("inspect", tmp_path / "t.lt", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["format_version"] == model_io.ENSEMBLE_VERSION and len(info["trees"]) == 2
    assert all(t["predict_only"] and t["weight_threshold"] == 0.01 and t["k"] == 40 for t in info["trees"])
    # a tree of the file is the model its own train would write: its weights are those of --seed 1
    one = _train(data, "one.lt", "--seed", 1, "--predict_only_model", "--weight-threshold", 0.01)
    w_file = model_io.load_models(str(tmp_path / "t.lt"), predict_only=True)[1].learner.arrays.table[:, 0]
    np.testing.assert_array_equal(w_file, model_io.load_model(str(one), predict_only=True).learner.arrays.table[:, 0])


@pytest.mark.parametrize("opts, words", [
    (("--trees", 0), "1..64"),
    (("--trees", 65), "1..64"),
    (("--trees", 2, "-p", "PRED"), "-p"),
    (("--trees", 2, "--readable_model", "R"), "--readable_model"),
    (("--trees", 2, "--dask", "local:2"), "--dask"),
])
def test_trees_refuse_what_they_cannot_do(data, tmp_path, opts, words):
    opts = [str(tmp_path / o) if o in ("PRED", "R") else o for o in opts]
    line = one_error(*cli("train", "-r", "plt", "-k", 40, "--multilabel", data / "train.vw", "-f", tmp_path / "m.lt",
                          *opts)[::2], 2)
    assert words in line
    assert not (tmp_path / "m.lt").exists()


def test_trees_of_a_reduction_without_probabilities_are_refused(tmp_path):
    train = tmp_path / "train.vw"
    train.write_text("\n".join(separable_lines(8, 200, seed=1)) + "\n")
    line = one_error(*cli("train", "-r", "filter", "-k", 8, train, "-f", tmp_path / "m.lt", "--trees", 2)[::2], 2)
    assert "-r filter gives no probabilities" in line and not (tmp_path / "m.lt").exists()


def test_string_label_trees_name_their_labels_as_one_model(tmp_path):
    """String labels: every tree numbers the names alike (the later ones from the stdin cache
    too), so the file of trees prints the names its trees trained apart print."""
    import subprocess
    import sys

    lines = [line.replace(line.split()[0], f"cls_{line.split()[0]}", 1)
             for line in separable_lines(12, 800, seed=2, noise_feats=3, vocab=30)]
    train = tmp_path / "train.vw"
    train.write_text("\n".join(lines) + "\n")
    common = ["-r", "plt", "--string-labels", "-k", "12", "-b", "18", "--quiet"]
    r = subprocess.run([sys.executable, "-m", "lomtree_cli.launch", "train", *common, "--trees", "2", "-c",
                        str(tmp_path / "c.cache"), "-f", str(tmp_path / "t.lt")], stdin=open(train),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for s in (0, 1):
        code, _, err = cli("train", *common, train, "--seed", s, "-f", tmp_path / f"{s}.lt")
        assert code == 0, err
    code, got, err = cli("predict", "-i", tmp_path / "t.lt", train, "--top-k", 2, "--quiet")
    assert code == 0, err
    code, want, err = cli("predict", "-i", tmp_path / "0.lt", "-i", tmp_path / "1.lt", train, "--top-k", 2, "--quiet")
    assert code == 0, err
    assert got == want and "cls_" in got


def test_one_model_readers_refuse_a_file_of_trees(data, tmp_path):
    trees = _train(data, "t2.lt", "--trees", 2)
    line = one_error(*cli("train", "-i", trees, data / "train.vw", "-f", tmp_path / "m.lt")[::2], 2)
    assert "t2.lt" in line and "holds 2 trees" in line
    line = one_error(*cli("train", "-r", "plt", "-k", 40, "--multilabel", data / "train.vw", "--trees", 2)[::2], 2)
    assert "no -f" in line
    with pytest.raises(ConfigError, match="holds 2 trees"):
        model_io.load_model(str(trees))
    from lomtree_cli import Classifier

    with pytest.raises(Exception, match="holds 2 trees"):
        Classifier.load(str(trees))


def _rezip(src, out, edit):
    """Copy the zip ``src`` to ``out`` with ``edit(name, bytes) -> (name, bytes) or None`` applied
    to every entry (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            got = edit(info.filename, zin.read(info))
            if got is not None:
                zout.writestr(got[0], got[1])
    return out


def test_damaged_files_of_trees_are_refused_naming_the_tree(data, tmp_path):
    trees = _train(data, "t3.lt", "--trees", 3)
    assert len(model_io.load_models(str(trees), predict_only=True)) == 3

    def flip_tree2_weights(name, b):
        if name == "tree2/learner/w.npy":
            b = bytearray(b)
            b[-1] ^= 1
        return name, bytes(b)

    bad = _rezip(trees, tmp_path / "w.lt", flip_tree2_weights)
    with pytest.raises(ModelFormatError, match=r"\(tree 2\): corrupt model file \(checksum mismatch in learner/w\)"):
        model_io.load_models(str(bad), predict_only=True)
    # a tree's header changed with its own checksums intact: the file's header catches it
    def header_of_tree3(name, b):
        if name != "tree3/header.npy":
            return name, b
        with zipfile.ZipFile(trees) as z, z.open(name) as f:
            h = json.loads(np.lib.format.read_array(f).tobytes())
        h["passes_done"] = 7
        import io

        buf = io.BytesIO()
        np.save(buf, np.frombuffer(json.dumps(h).encode(), np.uint8))
        return name, buf.getvalue()

    bad = _rezip(trees, tmp_path / "h.lt", header_of_tree3)
    with pytest.raises(ModelFormatError, match=r"checksum mismatch in tree3/header"):
        model_io.load_models(str(bad), predict_only=True)
    bad = _rezip(trees, tmp_path / "d.lt", lambda n, b: None if n.startswith("tree2/") else (n, b))
    with pytest.raises(ModelFormatError, match="tree2/header is missing"):
        model_io.load_models(str(bad), predict_only=True)
    bad = _rezip(trees, tmp_path / "x.lt", lambda n, b: (n, b) if n != "tree1/header.npy" else ("tree9/x.npy", b))
    with pytest.raises(ModelFormatError):
        model_io.load_models(str(bad), predict_only=True)
    for claim in (0, 65, True, "3"):
        def header(name, b, claim=claim):
            if name != "header.npy":
                return name, b
            with zipfile.ZipFile(trees) as z, z.open(name) as f:
                h = json.loads(np.lib.format.read_array(f).tobytes())
            h["trees"] = claim
            import io

            buf = io.BytesIO()
            np.save(buf, np.frombuffer(json.dumps(h).encode(), np.uint8))
            return name, buf.getvalue()

        bad = _rezip(trees, tmp_path / "c.lt", header)
        with pytest.raises(ModelFormatError, match="trees"):
            model_io.load_models(str(bad), predict_only=True)
    line = one_error(*cli("predict", "-i", bad, data / "test.vw", "--quiet")[::2], 2)
    assert "c.lt" in line


def test_flipped_bytes_of_a_file_of_trees_never_load_wrong(data, tmp_path):
    """A flipped byte anywhere is refused or changes nothing the trees predict with."""
    trees = _train(data, "t4.lt", "--trees", 2, "--predict_only_model")
    original = trees.read_bytes()
    want = [m.learner.arrays.table[:, 0].copy() for m in model_io.load_models(str(trees), predict_only=True)]
    rng = np.random.default_rng(0)
    p = tmp_path / "v.lt"
    refused = 0
    for pos in rng.integers(0, len(original), 120):
        b = bytearray(original)
        b[pos] ^= 1 << int(rng.integers(8))
        p.write_bytes(bytes(b))
        try:
            got = model_io.load_models(str(p), predict_only=True)
        except (ModelFormatError, ConfigError) as e:
            assert str(p) in str(e)
            refused += 1
            continue
        assert len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.learner.arrays.table[:, 0], w)
    assert refused > 0.5 * 120


def test_temporary_tree_files_are_known_leftovers():
    assert is_writing_leftover(".m.lt.123.writing", "m.lt") == 123
    assert is_writing_leftover(".m.lt.123.tree2.writing", "m.lt") == 123
    assert is_writing_leftover(".m.lt.123.treex.writing", "m.lt") is None
    assert is_writing_leftover(".m.lt.123.other.writing", "m.lt") is None


def test_single_label_trees_match_their_ensemble(tmp_path):
    """Single-label plt: the file of trees answers as its trees given one by one."""
    train = tmp_path / "train.vw"
    train.write_text("\n".join(separable_lines(30, 1500, seed=3, noise_feats=4, vocab=60)) + "\n")
    code, _, err = cli("train", "-r", "plt", "-k", 30, train, "-f", tmp_path / "t.lt", "--trees", 2, "--quiet")
    assert code == 0, err
    for s in (0, 1):
        code, _, err = cli("train", "-r", "plt", "-k", 30, train, "-f", tmp_path / f"{s}.lt", "--seed", s, "--quiet")
        assert code == 0, err
    outs = []
    for models in (["t.lt"], ["0.lt", "1.lt"]):
        args = [a for m in models for a in ("-i", tmp_path / m)]
        code, out, err = cli("predict", *args, train, "--top-k", 3, "--quiet")
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1]


def test_the_daemon_answers_as_predict_for_a_file_of_trees_and_several_models(data):
    """``predict --daemon`` with a file of trees (and another -i beside it) answers each line as
    ``lomtree predict`` with the same models prints it."""
    from tests.test_daemon import Daemon

    trees = _train(data, "td.lt", "--trees", 2)
    other = _train(data, "od.lt", "--seed", 9)
    lines = (data / "test.vw").read_text().splitlines()[:60]
    for models in ([trees], [trees, other]):
        args = [a for m in models for a in ("-i", str(m))]
        want = _predict(data, *models, opts=("--top-k", 3)).splitlines()[:60]
        d = Daemon(["predict", *args, "--daemon", "--port", "0", "--top-k", "3"])
        try:
            assert d.ask(("\n".join(lines) + "\n").encode()) == want
        finally:
            code, err = d.stop()
        assert code == 0 and "Traceback" not in err


def test_api_ensemble_load_predicts_as_the_cli(data):
    """``Ensemble.load(file of trees)`` answers what ``lomtree predict -i FILE`` prints."""
    from lomtree_cli import Ensemble

    trees = _train(data, "ta.lt", "--trees", 2)
    ens = Ensemble.load(str(trees))
    assert len(ens.members) == 2
    lines = (data / "test.vw").read_text().splitlines()
    want = [sorted(int(t) for t in line.replace(",", " ").split())
            for line in _predict(data, trees, opts=("--threshold", 0.3)).splitlines()]
    got = ens.predict(lines, threshold=0.3)
    assert [sorted(int(v) for v in s) for s in got] == want
    with pytest.raises(ValueError, match="not found"):
        Ensemble.load(str(data / "missing.lt"))


def test_an_interrupted_run_keeps_the_trees_so_far(data, tmp_path, monkeypatch):
    """A signal during tree 2 of 3 (``train`` saves the tree as far as it got, then raises
    ``Interrupted``): the file holds trees 1 and 2, the exit code is the signal's, and no
    temporary tree file is left."""
    from lomtree_cli import driver
    from lomtree_cli.errors import Interrupted

    real, calls = driver.train, []

    def train(*args, **kw):
        calls.append(kw["final_model"])
        report = real(*args, **kw)
        if len(calls) == 2:
            raise Interrupted(2, report)
        return report

    monkeypatch.setattr(driver, "train", train)
    code, _, err = cli("train", "-r", "plt", "--multilabel", "-k", 40, "-b", 18, data / "train.vw", "-f",
                       tmp_path / "i.lt", "--trees", 3, "--quiet")
    assert code == 130 and "interrupted" in err, err
    assert len(model_io.load_models(str(tmp_path / "i.lt"), predict_only=True)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.lt"]
