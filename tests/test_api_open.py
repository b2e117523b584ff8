"""The Python API's open label sets, scikit-learn's conventions (shuffled passes, probabilities
inside (0, 1), multi-label output as fitted) and the hostile-input findings on the API: huge
labels, predictions that would change the model, nested labels; integer dict keys."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest

from lomtree_cli import Classifier
from lomtree_cli.api import PROBA_FLOOR, dicts_batch, _parsed_dicts
from lomtree_cli.config import InputConfig

sp = pytest.importorskip("scipy.sparse")


def digits(n=900):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X[:n], y[:n]


def as_dicts(X):
    return [{f"f{j}": float(v) for j, v in enumerate(row) if v} for row in X]


def raw_scores(model, X, W):
    """Every regressor's score f_m(x) = sum_j w[(h_j W + m) & mask] v_j, from the table by the
    slot formula of ALGORITHMS.md §2.5 (a reference independent of the kernels)."""
    from lomtree_cli.api import matrix_batch

    b = matrix_batch(X, model.input_config)
    w = model.base.arrays.table[:, 0].astype(np.float64)
    mask = (1 << model.input_config.bits) - 1
    out = np.zeros((len(b), W))
    for i in range(len(b)):
        lo, hi = b.indptr[i], b.indptr[i + 1]
        for h, v in zip(b.indices[lo:hi], b.values[lo:hi]):
            out[i] += w[(int(h) * W + np.arange(W)) & mask] * float(v)
    return out


# -- open label sets -------------------------------------------------------------------------

def test_a_new_oaa_class_keeps_every_regressor():
    """Growing OAA from 4 to 5 classes lays the table out for 5 regressors: the 4 old regressors
    score every example as before (bits 22, few features: no slot shared), the new one 0."""
    X, y = digits(200)
    X, y = X[y < 4], y[y < 4]
    c = Classifier(reduction="oaa", bits=22).partial_fit(X, y)
    before = raw_scores(c._model, X[:20], 4)
    c.partial_fit(X[:1], [9])  # a new class, learned at once: compare on a copy made first
    assert c.classes_.tolist() == [0, 1, 2, 3, 9]
    d = Classifier(reduction="oaa", bits=22).partial_fit(X, y)
    d._take_labels([9])
    after = raw_scores(d._model, X[:20], 5)
    np.testing.assert_allclose(after[:, :4], before, rtol=0, atol=1e-12)
    assert (after[:, 4] == 0).all()


@pytest.mark.parametrize("reduction", ("lomtree", "plt", "cpt"))
def test_a_new_class_changes_no_prediction_of_the_trees(reduction):
    """A tree's new class is room for a new leaf: before any example of it, every prediction
    (and every class probability) is what it was."""
    X, y = digits(400)
    c = Classifier(reduction=reduction, bits=22, tree_buffer=0 if reduction == "plt" else None).partial_fit(X, y)
    want = c.predict(X)
    for label in range(100, 120):  # past the room the first classes left: the structure grows
        c._take_labels([label])
    assert c._model.reduction.k >= 30
    np.testing.assert_array_equal(c.predict(X), want)


@pytest.mark.parametrize("reduction", ("oaa", "lomtree", "plt", "cpt"))
def test_open_streams_learn_classes_as_they_come(reduction):
    """learn_one without classes: the digits' ten classes join as they appear, and the stream
    learns about as well as with the classes given up front."""
    X, y = digits(900)
    xs = as_dicts(X)
    accs = []
    for classes in (None, list(range(10))):
        c = Classifier(reduction=reduction, classes=classes, tree_buffer=0 if reduction == "plt" else None)
        for x, label in zip(xs[:700], y[:700]):
            c.learn_one(x, int(label))
        accs.append(np.mean([c.predict_one(x) == label for x, label in zip(xs[700:], y[700:])]))
        assert sorted(c.classes_.tolist()) == list(range(10))
    assert accs[0] > 0.6 and accs[0] > accs[1] - 0.1, accs
    # pickled mid-stream, the copy goes on growing as the original does
    c = Classifier(reduction=reduction, tree_buffer=0 if reduction == "plt" else None)
    for x, label in zip(xs[:50], y[:50]):
        c.learn_one(x, int(label) % 5)
    d = pickle.loads(pickle.dumps(c))
    for m in (c, d):
        m.learn_one(xs[60], 42)
    assert d.classes_.tolist() == c.classes_.tolist() and 42 in c.classes_.tolist()
    assert c.to_bytes() == d.to_bytes()


def test_partial_fit_grows_or_refuses_at_the_first_call():
    X, y = digits(300)
    c = Classifier(reduction="oaa").partial_fit(X[y < 5], y[y < 5])
    c.partial_fit(X[y >= 5], y[y >= 5])
    assert c.classes_.tolist() == list(range(10))
    for r in ("filter", "rtree"):
        with pytest.raises(ValueError, match="fixed number of classes"):
            Classifier(reduction=r).partial_fit(X, y)
        Classifier(reduction=r).partial_fit(X, y, classes=np.arange(10))
    fixed = Classifier(reduction="oaa").partial_fit(X[y < 5], y[y < 5], classes=np.arange(5))
    with pytest.raises(ValueError, match="not one of the classes"):
        fixed.partial_fit(X[y >= 5], y[y >= 5])


# -- scikit-learn's conventions --------------------------------------------------------------

@pytest.mark.parametrize("reduction, loss", (("oaa", None), ("oaa", "logistic"), ("cpt", None), ("plt", None)))
def test_probabilities_are_inside_0_1_and_sum_to_1(reduction, loss):
    X, y = digits(600)
    c = Classifier(reduction=reduction, loss_function=loss, passes=2).fit(X[:500], y[:500])
    P = c.predict_proba(X[500:])
    assert (P > 0).all() and (P < 1).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert P.min() >= PROBA_FLOOR / (1 + 10 * PROBA_FLOOR) - 1e-15


def test_shuffle_helps_sorted_data_and_is_repeatable():
    """On digits sorted by label one pass without shuffling ends on the last classes; shuffled
    passes (a new order each pass, from random_state) learn them all; the same random_state
    gives the same model, shuffle=False the model of the data's order."""
    X, y = digits(900)
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    plain = Classifier(reduction="oaa", passes=2, holdout_off=True).fit(Xs, ys)
    shuf = Classifier(reduction="oaa", passes=2, holdout_off=True, shuffle=True, random_state=3).fit(Xs, ys)
    assert shuf.score(X, y) > plain.score(X, y) + 0.2, (shuf.score(X, y), plain.score(X, y))
    again = Classifier(reduction="oaa", passes=2, holdout_off=True, shuffle=True, random_state=3).fit(Xs, ys)
    assert again.to_bytes() == shuf.to_bytes()
    other = Classifier(reduction="oaa", passes=2, holdout_off=True, shuffle=True, random_state=4).fit(Xs, ys)
    assert other.to_bytes() != shuf.to_bytes()
    # shuffle=True with the identity order is the plain fit: the permutation is all it changes
    from lomtree_cli import api

    ident = Classifier(reduction="oaa", passes=2, holdout_off=True, shuffle=True)
    ident._pass_order = lambda n: (lambda p: np.arange(n))
    assert ident.fit(Xs, ys).to_bytes() == plain.to_bytes()
    b = api.matrix_batch(sp.csr_matrix(Xs[:50]), InputConfig(format="libsvm"))
    rev = api.permuted(b, np.arange(49, -1, -1))
    for i in range(50):
        j = 49 - i
        np.testing.assert_array_equal(rev.indices[rev.indptr[i]:rev.indptr[i + 1]], b.indices[b.indptr[j]:b.indptr[j + 1]])


@pytest.mark.parametrize("reduction", ("oaa", "plt"))
def test_multilabel_predict_answers_as_it_was_fitted(reduction):
    from sklearn.datasets import make_multilabel_classification

    X, Y = make_multilabel_classification(n_samples=200, n_features=10, n_classes=4, random_state=0)
    lists = [list(np.flatnonzero(r)) for r in Y]
    dense = Classifier(reduction=reduction, multilabel=True).fit(X, Y).predict(X)
    assert isinstance(dense, np.ndarray) and dense.shape == Y.shape and dense.dtype == Y.dtype
    rows = Classifier(reduction=reduction, multilabel=True).fit(X, Y.tolist()).predict(X)  # scikit-learn's reading
    np.testing.assert_array_equal(rows, dense)
    sparse = Classifier(reduction=reduction, multilabel=True).fit(X, sp.csr_matrix(Y)).predict(X)
    assert sp.issparse(sparse)
    np.testing.assert_array_equal(sparse.toarray(), dense)
    got = Classifier(reduction=reduction, multilabel=True).fit(X, lists).predict(X)
    assert isinstance(got, list)
    assert [sorted(g) for g in got] == [sorted(np.flatnonzero(r).tolist()) for r in dense]


# -- hostile input ---------------------------------------------------------------------------

@pytest.mark.parametrize("line", ("2147483647 | a", "300000000 | a"))
def test_a_huge_label_is_refused_before_any_allocation(line):
    """classes_ from the lines' largest label: a label of 2^31 - 1 or 3 x 10^8 is a ValueError
    naming the way out, with nothing large allocated first."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="classes=K"):
            Classifier(reduction="oaa").fit([line])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    with pytest.raises(ValueError, match="GiB"):
        Classifier(reduction="oaa", classes=2**31 - 1).fit([line])


@pytest.mark.parametrize("multilabel", (False, True))
def test_a_prediction_mid_stream_changes_nothing_learned(multilabel):
    """plt buffers a stream's first examples for its tree: predicting meanwhile (by label
    frequency) leaves the tree to be built from the whole buffer, so the model after the
    stream is the one without the prediction."""
    X, y = digits(300)
    xs = as_dicts(X)
    Y = [{int(v)} if multilabel else int(v) for v in y]
    # (arity 2: the k-means tree of 10 labels depends on the examples it is built from)
    a = Classifier(reduction="plt", classes=list(range(10)), multilabel=multilabel, tree_buffer=200, arity=2)
    b = Classifier(reduction="plt", classes=list(range(10)), multilabel=multilabel, tree_buffer=200, arity=2)
    for i, (x, label) in enumerate(zip(xs, Y)):
        a.learn_one(x, label)
        b.learn_one(x, label)
        if i == 50:
            p = b.predict_one(xs[0])
            P = b.predict_proba([xs[0]])
            assert P.shape == (1, 10)
            if not multilabel:
                counts = np.bincount(y[:51], minlength=10)
                assert p == int(np.argmax(counts))
    assert a.to_bytes() == b.to_bytes()


def test_nested_labels_are_refused():
    X = np.eye(2)
    with pytest.raises(ValueError, match="a label is a list"):
        Classifier(reduction="oaa", classes=[["a"], "b"]).fit(X, ["b", "b"])
    with pytest.raises(ValueError, match="a label is a list"):
        Classifier(reduction="oaa", multilabel=True, classes=["a", "b"]).fit(X, [[["a"]], ["b"]])
    with pytest.raises(ValueError, match="a label is a list"):
        Classifier(reduction="oaa").learn_one({"a": 1.0}, ["a"])
    c = Classifier(reduction="oaa", classes=["a", "b"])
    for bad in (["a"], ("a",)):
        with pytest.raises(ValueError, match="a label is a"):
            c.learn_one({"a": 1.0}, bad)


# -- integer dict keys -----------------------------------------------------------------------

def test_integer_keys_are_their_vw_names():
    """{3: v} is the VW feature ``3:v`` (the parser's own batch of the dict's line), memoised
    like a string key; True is the name ``True``, not the key 1."""
    cfg = InputConfig(format="vw", bits=18)
    xs = [{3: 1.5, "a": 2.0, 17: -1.0}, {True: 1.0, 1: 2.0}, {3: 0.5, -4: 1.0}, {}]
    for x in xs:
        got, want = dicts_batch([x], cfg), _parsed_dicts([x], cfg)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.values, want.values)
