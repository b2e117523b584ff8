"""The Python API on label sets: lists of labels and indicator matrices give the CLI's model and
its prediction lines, predict/top_k/predict_proba agree, learn_one takes sets, files round-trip,
and a single-label Classifier refuses sets with a message naming ``multilabel``."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli import Classifier
from lomtree_cli.cli import main
from lomtree_cli.model_io import load_model, model_arrays

sp = pytest.importorskip("scipy.sparse")

K = 12


def make_sets(n=300, d=24, k=K, seed=0):
    """Sparse X; example i's labels: the classes whose random projection beats a cut (0 to 4
    labels, a few examples with none)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr", dtype=np.float64)
    X.data = np.round(X.data * 4 - 1, 3)
    S = np.asarray(X @ rng.normal(size=(d, k)))
    Y = [sorted((np.flatnonzero(r > 1.2)[:4] + 1).tolist()) for r in S]
    return X, Y


def libsvm_sets(X, Y) -> str:
    """LIBSVM lines with ``l1,l2`` label fields (an empty set: the line starts with a space)."""
    X = X.tocsr()
    out = []
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{j + 1}:{v!r}" for j, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist()))
        out.append(f"{','.join(map(str, Y[i]))} {feats}")
    return "\n".join(out) + "\n"


def indicator(Y, k=K):
    M = np.zeros((len(Y), k), dtype=np.int64)
    for i, s in enumerate(Y):
        M[i, np.asarray(s, dtype=np.int64) - 1] = 1
    return M


def cli(args) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ml")
    X, Y = make_sets()
    Xt, Yt = make_sets(n=80, seed=1)
    (d / "train.libsvm").write_text(libsvm_sets(X, Y))
    (d / "test.libsvm").write_text(libsvm_sets(Xt, Yt))
    assert any(not s for s in Y) and max(map(len, Y)) > 1
    return d, X, Y, Xt, Yt


@pytest.mark.parametrize("reduction", ("oaa", "plt"))
def test_lists_indicator_and_cli_give_one_model(data, reduction):
    """fit on lists == on a dense indicator == on MultiLabelBinarizer's sparse output == ``lomtree
    train --multilabel --format libsvm``; the API's file gives the CLI's lines, both ways."""
    d, X, Y, Xt, Yt = data
    from sklearn.preprocessing import MultiLabelBinarizer

    cli(["train", "-r", reduction, "-k", str(K), "--multilabel", "--format", "libsvm", str(d / "train.libsvm"),
         "-f", str(d / f"cli-{reduction}.lt"), "--quiet"])
    a = Classifier(reduction=reduction, multilabel=True, classes=K).fit(X, Y)
    b = Classifier(reduction=reduction, multilabel=True).fit(X, indicator(Y))
    mlb = MultiLabelBinarizer(classes=list(range(1, K + 1)), sparse_output=True)
    c = Classifier(reduction=reduction, multilabel=True).fit(X, mlb.fit_transform(Y))
    for clf, name in ((a, "lists"), (b, "dense"), (c, "sparse")):
        clf.save(str(d / f"{name}.lt"))
    cli_model = load_model(str(d / f"cli-{reduction}.lt"))
    want = model_arrays(cli_model.learner, cli_model.reduction)
    assert "reduction/label_counts" in want
    for name in ("lists", "dense", "sparse"):
        m = load_model(str(d / f"{name}.lt"))
        got = model_arrays(m.learner, m.reduction)
        assert set(got) == set(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name}: {key}")
        assert m.header["input"] == cli_model.header["input"] and m.input_config.multilabel
        assert m.header["reduction_config"] == cli_model.header["reduction_config"]
    np.testing.assert_array_equal(a.classes_, np.arange(1, K + 1))
    np.testing.assert_array_equal(b.classes_, a.classes_)

    # prediction lines: the API's file in the CLI, and the API's own answers
    lines = cli(["predict", "-i", str(d / "lists.lt"), str(d / "test.libsvm"), "-p", "-", "--quiet"]).split("\n")[:-1]
    sets = a.predict(Xt)
    assert lines == [",".join(map(str, s)) for s in sets]
    assert any(len(s) > 1 for s in sets)
    top = cli(["predict", "-i", str(d / "lists.lt"), str(d / "test.libsvm"), "-p", "-", "--quiet", "--top-k", "3"])
    labs, probs = a.predict_top(Xt, 3)
    np.testing.assert_array_equal(a.predict(Xt, top_k=3), labs)
    assert top.split("\n")[:-1] == [" ".join(f"{l}:{p:.6f}" for l, p in zip(r, q)) for r, q in zip(labs, probs)]
    low = cli(["predict", "-i", str(d / "lists.lt"), str(d / "test.libsvm"), "-p", "-", "--quiet", "--threshold",
               "0.2"]).split("\n")[:-1]
    assert low == [",".join(map(str, s)) for s in a.predict(Xt, threshold=0.2)]
    # the CLI's file in the API
    loaded = Classifier.load(str(d / f"cli-{reduction}.lt"))
    assert loaded.get_params()["multilabel"] is True
    assert loaded.predict(Xt) == sets
    np.testing.assert_array_equal(loaded.predict_proba(Xt), a.predict_proba(Xt))


def test_predict_shapes_and_agreement(data):
    """OAA: top_k is the stable argsort of predict_proba's rows, the threshold sets are the labels
    of probability >= T best first; PLT: the same probabilities in top_k and predict_proba."""
    _, X, Y, Xt, Yt = data
    names = [f"l{i}" for i in range(1, K + 1)]
    named = [[names[v - 1] for v in s] for s in Y]
    clf = Classifier(reduction="oaa", multilabel=True, classes=names, loss_function="logistic").fit(X, named)
    P = clf.predict_proba(Xt)
    assert P.shape == (Xt.shape[0], K) and ((P >= 0) & (P <= 1)).all()
    assert not np.allclose(P.sum(axis=1), 1.0)  # marginals, not a distribution
    order = np.argsort(-P, axis=1, kind="stable")
    top = clf.predict(Xt, top_k=5)
    assert top.shape == (Xt.shape[0], 5)
    np.testing.assert_array_equal(top, np.asarray(names)[order[:, :5]])
    for t in (0.5, 0.3):
        sets = clf.predict(Xt, threshold=t)
        assert isinstance(sets, list) and len(sets) == Xt.shape[0]
        for row, s in zip(P, sets):
            want = [names[j] for j in np.argsort(-row, kind="stable") if row[j] >= t]
            assert s == want

    plt = Classifier(reduction="plt", multilabel=True, classes=K, arity=2).fit(X, Y)
    P = plt.predict_proba(Xt)
    labs, probs = plt.predict_top(Xt, 4)
    from lomtree_cli.api import PROBA_FLOOR

    np.testing.assert_allclose(np.take_along_axis(P, labs - 1, axis=1), np.clip(probs, PROBA_FLOOR, 1 - PROBA_FLOOR))
    assert P.shape == (Xt.shape[0], K)
    for row, s in zip(P, plt.predict(Xt)):
        assert all(row[v - 1] >= 0.5 for v in s)
    # score is P@1 (an empty set scores 0)
    p1 = plt.score(Xt, Yt)
    first = plt.predict(Xt, top_k=1)[:, 0]
    assert 0 < p1 == np.mean([f in s for f, s in zip(first, Yt)])


def test_learn_one_sets_equals_lines():
    """learn_one(x, {labels}) is the VW line ``l1,l2 | x``; predict_one gives a set, or with top_k
    a ranked list."""
    rng = np.random.default_rng(3)
    xs, ys = [], []
    for _ in range(60):
        s = sorted({int(v) for v in rng.integers(1, 5, size=int(rng.integers(1, 3)))})  # VW: no label = unlabeled
        xs.append({f"f{v}": 1.0 for v in s} | {"n": float(rng.integers(0, 3))})
        ys.append(set(s))
    river = Classifier(reduction="oaa", multilabel=True, classes=4)
    assert river.predict_one(xs[0]) == set()
    for x, y in zip(xs, ys):
        river.learn_one(x, y)
    lines = [f"{','.join(map(str, sorted(y)))} {dict_line_of(x)}" for x, y in zip(xs, ys)]
    batch = Classifier(reduction="oaa", multilabel=True, classes=4, format="vw").fit(lines)
    np.testing.assert_array_equal(river._model.base.arrays.table, batch._model.base.arrays.table)
    got = river.predict_one({"f1": 1.0, "f3": 1.0})
    assert isinstance(got, set) and got <= {1, 2, 3, 4}
    ranked = river.predict_one({"f1": 1.0}, top_k=2)
    assert isinstance(ranked, list) and len(ranked) == 2 and ranked[0] == 1
    assert river.predict_proba_one({"f1": 1.0})[1] > 0.5


def dict_line_of(x):
    from lomtree_cli.api import dict_line

    return dict_line(x)


def test_save_load_and_pickle_round_trip(data, tmp_path):
    import pickle

    _, X, Y, Xt, _ = data
    names = [f"l{i}" for i in range(1, K + 1)]
    clf = Classifier(reduction="plt", multilabel=True, classes=names).fit(X, [[names[v - 1] for v in s] for s in Y])
    clf.save(str(tmp_path / "m.lt"))
    for other in (Classifier.load(str(tmp_path / "m.lt")), pickle.loads(pickle.dumps(clf))):
        assert other.multilabel and other.classes_.tolist() == names
        assert other.predict(Xt) == clf.predict(Xt)
        np.testing.assert_array_equal(other.predict(Xt, top_k=3), clf.predict(Xt, top_k=3))
        np.testing.assert_array_equal(other.predict_proba(Xt), clf.predict_proba(Xt))
    # continuing a loaded model keeps label sets
    again = Classifier.load(str(tmp_path / "m.lt")).partial_fit(Xt, [["l1"]] * Xt.shape[0])
    assert again._model.reduction.label_counts[1] == clf._model.reduction.label_counts[1] + Xt.shape[0]


def test_label_sets_refused_and_bad_sets():
    X, Y = make_sets(n=40)
    M = indicator(Y)
    single = Classifier(reduction="oaa", classes=K)
    for y in (Y, [set(s) for s in Y], [[1, 2]] * 40, M, sp.csr_matrix(M)):
        with pytest.raises(ValueError, match="multilabel"):
            single.fit(X, y)
    with pytest.raises(ValueError, match="multilabel"):
        Classifier(reduction="oaa", classes=K).learn_one({"a": 1}, {1, 2})
    fitted = Classifier(reduction="oaa", classes=K).fit(X, [s[0] if s else 1 for s in Y])
    with pytest.raises(ValueError, match="multilabel"):
        fitted.predict(X, threshold=0.5)
    with pytest.raises(ValueError, match="-r oaa or -r plt|does not learn label sets"):
        Classifier(reduction="lomtree", multilabel=True, classes=K).fit(X, Y)
    ml = Classifier(reduction="oaa", multilabel=True, classes=K)
    bad = [
        (list(range(40)), "collection"),  # one label per example
        ([[1, 99]] * 40, "not one of the classes"),
        (M[:, :5], "5 columns but there are 12 classes"),
        (M * 2, "only 0 and 1"),
        (Y[:10], "40 examples but Y has 10"),
    ]
    for y, msg in bad:
        with pytest.raises(ValueError, match=msg):
            ml.fit(X, y)
    ml.fit(X, Y)
    for kw, msg in (({"top_k": 0}, "top_k must be in 1..12"), ({"top_k": 13}, "top_k"),
                    ({"threshold": 1.5}, "threshold must be"), ({"top_k": 2, "threshold": 0.1}, "not both")):
        with pytest.raises(ValueError, match=msg):
            ml.predict(X, **kw)


def test_xmc_model_predicts_data_lines(data, tmp_path):
    """A CLI model of ``--format xmc`` predicts the data lines of an XMC file (the lines of a
    list have no header) as ``lomtree predict`` predicts the file, and its arrays alike."""
    d, X, Y, Xt, Yt = data

    def xmc(X, Y):
        X = X.tocsr()
        out = [f"{X.shape[0]} {X.shape[1]} {K}"]
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            feats = " ".join(f"{j}:{v!r}" for j, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist()))
            out.append(f"{','.join(str(v - 1) for v in Y[i])} {feats}")
        return "\n".join(out) + "\n"

    (tmp_path / "train.txt").write_text(xmc(X, Y))
    (tmp_path / "test.txt").write_text(xmc(Xt, Yt))
    cli(["train", "-r", "plt", "--format", "xmc", "-k", str(K), str(tmp_path / "train.txt"),
         "-f", str(tmp_path / "m.lt"), "--quiet"])
    want = cli(["predict", "-i", str(tmp_path / "m.lt"), str(tmp_path / "test.txt"), "-p", "-", "--quiet"])
    clf = Classifier.load(str(tmp_path / "m.lt"))
    lines = (tmp_path / "test.txt").read_text().splitlines()[1:]
    assert clf.classes_.tolist() == list(range(K))  # the file's labels, 0-based, as predict prints them
    assert [",".join(map(str, s)) for s in clf.predict(lines)] == want.splitlines()
    assert clf.predict(lines) == clf.predict(Xt)
