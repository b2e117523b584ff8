"""Multi-label learning (--multilabel): PLT on label sets and OAA binary relevance against slow
pure-Python references, single-label input through the set path, label sets in the three input
formats (VW, LIBSVM, XMC) and their errors, the example cache, and the command line end to end
(save/load, -i, passes with the cache, --top-k/--threshold lines, --report metrics)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions.oaa import OneAgainstAll
from lomtree_cli.reductions.plt import ProbabilisticLabelTree, _grow, kmeans_tree

from .helpers import cli, one_error
from .reference.linear_ref import RefLinear
from .reference.plt_ref import RefPLT, set_centroids

BITS = 12


# -- helpers ------------------------------------------------------------------------------------
def make_plt(k, bits=BITS, loss="squared", multilabel=True, roomy=True, **kw):
    """A PLT; ``roomy``: its tree and regressors pre-grown for every label, so that the kernel
    never stops for room (an example with several new labels otherwise never gets it: see
    ``test_several_new_labels_get_room``)."""
    lcfg = LearnerConfig(loss=loss)
    rcfg = ReductionConfig(name="plt", k=k, **kw)
    learner = LinearLearner(lcfg, bits, ProbabilisticLabelTree.n_models_for(rcfg), ProbabilisticLabelTree.slot_mode)
    red = ProbabilisticLabelTree(rcfg, learner)
    if multilabel:
        red.set_multilabel()
    if roomy:
        red.tree = _grow(red.tree, 4 * k + 16)
        learner.ensure_models(red.W * (2 * k + 8))
    return red


def make_oaa(k, bits=BITS, loss="squared", multilabel=True):
    rcfg = ReductionConfig(name="oaa", k=k)
    red = OneAgainstAll(rcfg, LinearLearner(LearnerConfig(loss=loss), bits, k))
    if multilabel:
        red.set_multilabel()
    return red


def set_batch(examples, bits=BITS):
    """ExampleBatch with label sets from (set or None, iw, idx, val): labels 1 with a set (even
    empty), 0 without; sets sorted and distinct (the parser's contract)."""
    mask = (1 << bits) - 1
    n = len(examples)
    indptr = np.zeros(n + 1, np.int64)
    lptr = np.zeros(n + 1, np.int64)
    idx, val, ids = [], [], []
    for i, (ys, _, ix, vs) in enumerate(examples):
        idx += [h & mask for h in ix]
        val += list(vs)
        indptr[i + 1] = len(idx)
        ids += sorted(set(ys or ()))
        lptr[i + 1] = len(ids)
    return ExampleBatch(labels=np.array([0 if e[0] is None else 1 for e in examples], np.int64),
                        weights=np.array([e[1] for e in examples], np.float64), indptr=indptr,
                        indices=np.array(idx, np.int64), values=np.array(val, np.float32),
                        line_numbers=np.arange(1, n + 1, dtype=np.int64), label_ptr=lptr,
                        label_ids=np.array(ids, np.int64))


def run_sets(red, examples, chunk=None):
    preds = []
    chunk = chunk or len(examples)
    for s in range(0, len(examples), chunk):
        b = set_batch(examples[s:s + chunk])
        p, _ = red.process(b, (b.labels > 0) & (b.weights > 0))
        preds.extend(p.tolist())
    red.end_pass()
    return preds


def set_stream(k, n, seed, empty=0.0, unlabeled=0.0, late=True, max_size=3, weights=False, vocab=40,
               new_alone=False):
    """(set, iw, idx, val) examples: each label has typical features; sets of 1..max_size
    labels (a few empty or unlabeled); with ``late`` the upper half of the labels only appears
    in the second half of the stream (labels inserted mid-stream, next to trained ones). With
    ``new_alone`` a label's first example has no other label (see ``test_new_label_next_to_known_ones``)."""
    rng = np.random.default_rng(seed)
    proto = {c: rng.integers(0, vocab, size=3) for c in range(1, k + 1)}
    out = []
    seen = set()
    for i in range(n):
        iw = float(rng.choice([0.5, 1.0, 2.0, 0.0])) if weights else 1.0
        hi = k if (not late or i >= n // 2) else max(1, k // 2)
        u = rng.random()
        if u < unlabeled:
            ys = None
        elif u < unlabeled + empty:
            ys = []
        else:
            size = int(rng.integers(1, max_size + 1))
            ys = sorted({int(y) for y in rng.integers(1, hi + 1, size)})
            new = [y for y in ys if y not in seen]
            if new_alone and new:
                ys = new[:1]
            if iw > 0:  # (a label is inserted by its first trained example)
                seen.update(ys)
        idx = []
        for y in ys or [int(rng.integers(1, k + 1))]:
            idx += [int(h) for h in proto[y][: rng.integers(1, 4)]]
        idx += [int(h) for h in rng.integers(0, vocab, 3)]
        val = [float(np.float32(v)) for v in rng.uniform(0.2, 1.5, len(idx))]
        out.append((ys, iw, idx + [4000], val + [1.0]))
    return out


def tree_of(red):
    t = red.tree
    return {v: (int(t.parent[v]), int(t.label[v]), [int(c) for c in t.child[v, :t.nchild[v]]])
            for v in range(red.n_nodes)}


def ref_tree(ref):
    return {v: (ref.parent[v], ref.label[v], list(ref.children[v])) for v in ref.parent}


def weights_of(red):
    return red.learner.arrays.table[:, 0]


def assert_same_weights(red, ref):
    np.testing.assert_allclose(weights_of(red), ref.lin.dense_w(), rtol=1e-5, atol=1e-6)


def assert_top_matches(red, ref, test, n):
    b = set_batch(test)
    labs, probs, _ = red.predict_top(b, n)
    for i, (_, _, idx, val) in enumerate(test):
        r = ref.ranked(idx, val, beam=max(ref.B, n))[:n]
        assert labs[i, :len(r)].tolist() == [ref.label[c] for c, _, _ in r]
        assert (labs[i, len(r):] == 0).all()
        np.testing.assert_allclose(probs[i, :len(r)], [np.exp(lp) for _, lp, _ in r], rtol=1e-9)


# -- 1. multi-label PLT against the reference ---------------------------------------------------
PLT_CASES = [  # arity, beam, gamma (None: chosen), negatives, loss
    (2, 1, 1.0, False, "squared"),
    (2, 2, 0.5, True, "logistic"),
    (3, 2, None, True, "squared"),
    (4, 3, 0.0, True, "squared"),
    (5, 2, 0.25, False, "logistic"),
    (3, 3, None, False, "logistic"),
    (16, 2, None, True, "squared"),  # more room than labels: no push-down, several new labels at once
]


@pytest.mark.parametrize("arity,beam,gamma,negatives,loss", PLT_CASES)
def test_plt_sets_online_tree_matches_reference(arity, beam, gamma, negatives, loss):
    """tree_buffer=0 (every label inserted online, push-down splits at arity 2-3, labels new in
    the middle of the stream; several new labels in one example where no push-down can move a
    label of the set, else a label's first example has no other label): progressive predictions, the
    tree, the chosen path weight, the weights and the top-k labels with their probabilities
    equal the reference's, in one chunk or chunks of 7. Unlabeled and zero-weight examples are
    predicted, not trained."""
    ex = set_stream(k=12, n=160, seed=arity * 10 + beam, unlabeled=0.05, weights=True, new_alone=arity < 12)
    ref = RefPLT(bits=BITS, loss=loss, arity=arity, beam=beam, gamma=gamma, negatives=negatives)
    want = ref.process_sets(ex)
    for chunk in (None, 7):
        red = make_plt(12, loss=loss, arity=arity, beam=beam, tree_buffer=0,
                       path_weight=-1.0 if gamma is None else gamma, leaf_negatives=negatives)
        assert run_sets(red, ex, chunk) == want
        assert tree_of(red) == ref_tree(ref)
        assert red.gstats.tolist() == ref.gstats
        assert red.meta()["path_weight"] == ref.gamma
        assert_same_weights(red, ref)
    test = set_stream(k=12, n=25, seed=99)
    assert_top_matches(red, ref, test, 4)
    assert red.label_counts[0] == sum(1 for e in ex if e[0] is not None and e[1] > 0)


def test_plt_sets_long_examples_match_reference():
    """Examples of 700 features: the blocks of a node and of the nodes trained before it share
    rows (2^12 slots), so training scores those nodes afresh instead of taking the beam's scores,
    and the set of rows an example's training claims (``plt_kernels.claim_rows``) fills up
    mid-example, after which every further node is scored afresh: the same progressive
    predictions, tree and weights as the sequential reference."""
    rng = np.random.default_rng(7)
    ex = []
    for ys, iw, idx, val in set_stream(k=10, n=30, seed=7):
        extra = [int(h) for h in rng.integers(0, 1 << 16, 700)]
        ex.append((ys, iw, idx + extra, val + [float(np.float32(v)) for v in rng.uniform(0.2, 1.5, 700)]))
    ref = RefPLT(bits=BITS, arity=3, beam=3, gamma=None, negatives=True)
    want = ref.process_sets(ex)
    red = make_plt(10, arity=3, beam=3, tree_buffer=0, path_weight=-1.0, leaf_negatives=True)
    assert run_sets(red, ex, None) == want
    assert tree_of(red) == ref_tree(ref)
    assert_same_weights(red, ref)


# -- 2. OAA binary relevance against the reference -----------------------------------------------
def ref_binary_relevance(examples, k, loss):
    """Sequential reference: predict argmax of the clipped scores (smallest label on ties); a
    trained example (a set, iw > 0) trains regressor c toward +1 if label c+1 is in its set, else
    -1, each from its own pre-update score."""
    ref = RefLinear(bits=BITS, n_models=k, loss=loss)
    preds = []
    for ys, iw, idx, val in examples:
        idx = [h & ((1 << BITS) - 1) for h in idx]
        yh = [ref.clip(ref.score(idx, val, c)) for c in range(k)]
        preds.append(int(np.argmax(yh)) + 1)
        if ys is not None and iw > 0:
            for c in range(k):
                ref.learn(idx, val, c, 1.0 if c + 1 in ys else -1.0, iw, yh[c])
            ref.end_example(iw)
    return preds, ref


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("chunk", [None, 5])
def test_oaa_binary_relevance_matches_reference(loss, chunk):
    """Sets of 0-4 labels, unlabeled and zero-weight examples: progressive predictions and the
    weights equal sequential per-regressor learning; predict_top gives each regressor's own
    probability (not normalised: they need not sum to 1) in decreasing order."""
    k = 6
    ex = set_stream(k=k, n=120, seed=3, empty=0.1, unlabeled=0.05, max_size=4, weights=True, late=False)
    want, ref = ref_binary_relevance(ex, k, loss)
    red = make_oaa(k, loss=loss)
    assert run_sets(red, ex, chunk) == want
    np.testing.assert_allclose(weights_of(red), ref.dense_w(), rtol=1e-5, atol=1e-6)
    test = set_stream(k=k, n=20, seed=4)
    labs, probs, _ = red.predict_top(set_batch(test), k)
    for i, (_, _, idx, val) in enumerate(test):
        idx = [h & ((1 << BITS) - 1) for h in idx]
        f = np.array([ref.clip(ref.score(idx, val, c)) for c in range(k)])
        p = 1.0 / (1.0 + np.exp(-f)) if loss == "logistic" else (f + 1.0) / 2.0
        order = np.argsort(-p, kind="stable")
        assert labs[i].tolist() == (order + 1).tolist()
        np.testing.assert_allclose(probs[i], p[order], rtol=1e-6, atol=1e-9)
    # label counts: examples trained, and each label over the trained sets
    trained = [e[0] for e in ex if e[0] is not None and e[1] > 0]
    assert red.label_counts.tolist() == [len(trained)] + [sum(y in s for s in trained) for y in range(1, k + 1)]


# -- 3. one label per example: the set path equals the single-label path ------------------------
def single_stream(k, n, seed):
    return [(ys[0] if ys else None, iw, idx, val) for ys, iw, idx, val in
            set_stream(k, n, seed, unlabeled=0.05, max_size=1, weights=True)]


def run_single(red, examples, chunk=None):
    preds = []
    chunk = chunk or len(examples)
    for s in range(0, len(examples), chunk):
        part = examples[s:s + chunk]
        n = len(part)
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum([len(e[2]) for e in part], out=indptr[1:])
        b = ExampleBatch(labels=np.array([e[0] or 0 for e in part], np.int64),
                         weights=np.array([e[1] for e in part], np.float64), indptr=indptr,
                         indices=np.array([h & ((1 << BITS) - 1) for e in part for h in e[2]], np.int64),
                         values=np.array([v for e in part for v in e[3]], np.float32),
                         line_numbers=np.arange(1, n + 1, dtype=np.int64))
        p, _ = red.process(b, (b.labels > 0) & (b.weights > 0))
        preds.extend(p.tolist())
    red.end_pass()
    return preds


def same_learner(a, b):
    for name in ("table", "S", "T"):
        assert np.array_equal(getattr(a.learner.arrays, name), getattr(b.learner.arrays, name)), name


@pytest.mark.parametrize("arity,beam,gamma,negatives,buf", [(2, 1, 1.0, False, 0), (3, 2, None, True, 0),
                                                            (4, 3, 0.5, True, 40)])
def test_plt_sets_of_one_equal_the_single_label_path(arity, beam, gamma, negatives, buf):
    """A stream of one label per example given as sets of size one trains bit for bit the same
    PLT (weights, per-regressor S and T, tree, gamma counts, predictions) as the single-label
    path: the two kernels agree on one label."""
    ex = single_stream(10, 200, seed=arity)
    kw = dict(arity=arity, beam=beam, tree_buffer=buf, path_weight=-1.0 if gamma is None else gamma,
              leaf_negatives=negatives)
    single = make_plt(10, multilabel=False, **kw)
    sets = make_plt(10, **kw)
    assert run_single(single, ex, 9) == run_sets(sets, [([y] if y else None, iw, i, v) for y, iw, i, v in ex], 9)
    assert tree_of(single) == tree_of(sets)
    assert single.gstats.tolist() == sets.gstats.tolist()
    same_learner(single, sets)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_oaa_sets_of_one_equal_the_single_label_path(loss):
    ex = single_stream(7, 150, seed=5)
    single = make_oaa(7, loss=loss, multilabel=False)
    sets = make_oaa(7, loss=loss)
    assert run_single(single, ex, 11) == run_sets(sets, [([y] if y else None, iw, i, v) for y, iw, i, v in ex], 11)
    same_learner(single, sets)


# -- room for the labels of a set ------------------------------------------------------------------
@pytest.mark.parametrize("labels", [[1, 2], [1, 2, 3, 4, 5, 6]])
def test_several_new_labels_get_room(labels, monkeypatch):
    """An example whose set holds several labels not yet in the tree is trained (the tree and
    regressors grow as far as needed), from an empty tree with the default capacity."""
    red = make_plt(20, arity=2, beam=1, tree_buffer=0, roomy=False)
    calls = [0]
    grow = red._make_room

    def make_room():
        calls[0] += 1
        if calls[0] > 100:
            raise RuntimeError("no progress: _make_room called 100 times for one batch")
        grow()

    monkeypatch.setattr(red, "_make_room", make_room)
    run_sets(red, [(labels, 1.0, [5], [1.0])])
    assert red.n_labels == len(labels)


# -- PLT: the cases the main comparison leaves out ---------------------------------------------------
def test_new_label_next_to_known_ones():
    """A set with a known label and a new one whose insertion pushes the known label's leaf down
    (arity 2): the known label's whole path is still positive, as in the reference."""
    def ex(ys, f):
        return (ys, 1.0, [f, 4000], [1.0, 1.0])

    # labels 1 and 2 under node A (feature 10), 3 and 5 under B (feature 20); then {1, 4} with
    # feature 10: 4 goes down to A (as many labels as B, more probable), which is full, as is the
    # root: A's leaves are pushed into a new node
    stream = [ex([1], 10), ex([2], 10), ex([3], 20), ex([5], 20)] * 2 + [ex([1, 4], 10)]
    red = make_plt(6, arity=2, beam=2, tree_buffer=0, path_weight=1.0, leaf_negatives=False)
    ref = RefPLT(bits=BITS, arity=2, beam=2, gamma=1.0, negatives=False)
    run_sets(red, stream)
    ref.process_sets(stream)
    assert tree_of(red) == ref_tree(ref)
    leaf1 = int(red.tree.leaf_of[1])
    up = int(red.tree.parent[leaf1])  # the node created by the push-down: fresh, then one update
    assert red.tree.parent[up] != 0 and red.n_nodes == len(ref_tree(ref))
    b = set_batch([ex([1, 4], 10)])
    from lomtree_cli.kernels import linear as K
    f = np.zeros(1)
    K.score_block(red.learner.arrays, b.indices, b.values, 0, 2, int(red.tree.reg[up]), 1, f)
    assert f[0] > 0, "the node above label 1 was trained toward -1 on an example that has label 1"
    assert_same_weights(red, ref)


@pytest.mark.parametrize("arity,beam,gamma,negatives", [(3, 2, None, True), (16, 2, 0.5, False)])
def test_plt_empty_sets_match_reference(arity, beam, gamma, negatives):
    """Examples with an empty label set train every child of the root toward -1 (and nothing
    else without leaf negatives)."""
    ex = set_stream(k=10, n=120, seed=arity, empty=0.2, new_alone=True)
    ref = RefPLT(bits=BITS, arity=arity, beam=beam, gamma=gamma, negatives=negatives)
    want = ref.process_sets(ex)
    red = make_plt(10, arity=arity, beam=beam, tree_buffer=0, path_weight=-1.0 if gamma is None else gamma,
                   leaf_negatives=negatives)
    assert run_sets(red, ex, 13) == want
    assert tree_of(red) == ref_tree(ref)
    assert_same_weights(red, ref)


def test_plt_empty_sets_with_leaf_negatives_train_root_leaves_once():
    ex = set_stream(k=6, n=80, seed=1, empty=0.25, new_alone=True)
    ref = RefPLT(bits=BITS, arity=8, beam=2, gamma=0.5, negatives=True)
    ref.process_sets(ex)
    red = make_plt(6, arity=8, beam=2, tree_buffer=0, path_weight=0.5, leaf_negatives=True)
    run_sets(red, ex)
    assert_same_weights(red, ref)


@pytest.mark.parametrize("chunk", [None, 9])
def test_plt_sets_buffered_tree_matches_reference(chunk):
    """With the k-means buffer: the tree is kmeans_tree of the label centroids (an example counts
    in the centroid of each of its labels; computed here independently of the sketch kernel),
    then the buffered examples and the rest of the stream train as in the reference."""
    k, nb = 14, 60
    ex = set_stream(k=k, n=200, seed=8, new_alone=True, late=True)
    red = make_plt(k, arity=3, beam=2, tree_buffer=nb, path_weight=0.5, leaf_negatives=True)
    got = run_sets(red, ex, chunk)
    labels = sorted({y for ys, iw, _, _ in ex[:nb] if ys and iw > 0 for y in ys})
    X = np.array(set_centroids([e for e in ex[:nb] if e[1] > 0], labels, d_bits=10))
    X -= X.mean(axis=0)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)
    parent, label = kmeans_tree(np.array(labels), X, 3, seed=0)
    ref = RefPLT(bits=BITS, arity=3, beam=2, gamma=0.5, negatives=True)
    ref.set_structure(parent, label)
    for ys, iw, idx, val in ex[:nb]:
        if ys is not None and iw > 0:
            ref.learn_set(idx, val, ys, iw, ref.candidates(idx, val))
    assert got[nb:] == ref.process_sets(ex[nb:])
    assert tree_of(red) == ref_tree(ref)
    assert_same_weights(red, ref)


def test_buffer_predictions_with_empty_sets():
    """While buffering, a prediction is the most frequent label so far (of the first labels of
    the sets, ties: smallest); an empty set counts no label."""
    ex = [([3], 1.0, [1], [1.0]), ([3], 1.0, [1], [1.0]), ([], 1.0, [1], [1.0]), ([], 1.0, [1], [1.0]),
          ([], 1.0, [1], [1.0]), ([2], 1.0, [1], [1.0])]
    red = make_plt(5, arity=2, beam=1, tree_buffer=100)
    assert run_sets(red, ex)[:6] == [0, 3, 3, 3, 3, 3]


# -- 4. parsing label sets -------------------------------------------------------------------------
def parse(text, **kw):
    from lomtree_cli.parsing import parse_bytes

    return parse_bytes(text.encode() if isinstance(text, str) else text, InputConfig(bits=BITS, multilabel=True, **kw))


def sets_of(b):
    return [b.label_set(i).tolist() for i in range(len(b))]


def examples_of(b):
    return [(int(b.labels[i]), b.label_set(i).tolist(), float(b.weights[i]),
             b.indices[b.indptr[i]:b.indptr[i + 1]].tolist(), b.values[b.indptr[i]:b.indptr[i + 1]].tolist())
            for i in range(len(b))]


def test_libsvm_and_xmc_give_the_same_batch():
    """XMC (0-based labels and features, header N F L) and LIBSVM with label sets (1-based) are
    one data set: same labels, sets, features and values; XMC line numbers count the header.
    Repeated labels collapse, sets come sorted; a line starting with whitespace has the empty set."""
    libsvm = "3,1,3 1:1 5:2\n2 3:0.5\n 2:1\n10,4 1:1 10:3\n"
    xmc = "4 10 10\n2,0,2 0:1 4:2\n1 2:0.5\n 1:1\n9,3 0:1 9:3\n"
    a = parse(libsvm, format="libsvm")
    b = parse(xmc, format="xmc")
    assert sets_of(a) == [[1, 3], [2], [], [4, 10]] == sets_of(b)
    assert a.labels.tolist() == [1, 1, 1, 1] == b.labels.tolist()
    assert examples_of(a) == examples_of(b)
    assert (b.line_numbers - 1).tolist() == a.line_numbers.tolist() == [1, 2, 3, 4]
    assert b.label_ids.dtype == np.int64 and b.label_ptr.tolist() == [0, 2, 3, 3, 5]


def test_vw_sets_and_single_labels_hash_alike():
    """VW label sets: sorted, distinct ids; the features are those of the single-label line; the
    weight and tag still parse; a line without a label is unlabeled (labels 0, empty set)."""
    a = parse("3,1,3 2.0 'tg| a b:2\n5 | c\n| d\n")
    from lomtree_cli.parsing import parse_bytes

    single = parse_bytes(b"3 2.0 'tg| a b:2\n5 | c\n| d\n", InputConfig(bits=BITS))
    assert sets_of(a) == [[1, 3], [5], []]
    assert a.labels.tolist() == [1, 1, 0]
    assert a.weights.tolist() == [2.0, 1.0, 1.0] and a.tags == ["tg", None, None]
    assert a.indices.tolist() == single.indices.tolist() and a.values.tolist() == single.values.tolist()


def test_label_offset_and_string_label_sets():
    assert sets_of(parse("0,2 | a\n", label_offset=1)) == [[1, 3]]
    assert sets_of(parse("2 2 2\n0,1 0:1\n1 1:1\n", format="xmc", label_offset=1)) == [[2, 3], [3]]
    b = parse("a,b | x\nb,c | y\nb,a,b | z\nc | w\n", string_labels=True)
    assert sets_of(b) == [[1, 2], [2, 3], [1, 2], [3]]


@pytest.mark.parametrize("chunk", [17, 64, 1 << 20])
def test_sets_do_not_depend_on_chunks(tmp_path, chunk):
    from lomtree_cli.parsing import iter_batches

    rng = np.random.default_rng(0)
    lines = []
    for i in range(120):
        ys = ",".join(str(int(y)) for y in rng.integers(0, 30, rng.integers(0, 5)))
        feats = " ".join(f"{int(j)}:{rng.uniform(0.5, 2):.3f}" for j in sorted(set(rng.integers(0, 50, 3).tolist())))
        lines.append(f"{ys} {feats}" if ys else f" {feats}")
    path = tmp_path / "d.xmc"
    path.write_text("120 50 30\n" + "\n".join(lines) + "\n")
    cfg = InputConfig(bits=BITS, format="xmc")
    whole = parse(path.read_bytes(), format="xmc")
    got = [e for b in iter_batches([str(path)], cfg, chunk_bytes=chunk) for e in examples_of(b)]
    lines_got = [int(x) for b in iter_batches([str(path)], cfg, chunk_bytes=chunk) for x in b.line_numbers]
    assert got == examples_of(whole)
    assert lines_got == whole.line_numbers.tolist() == list(range(2, 122))


BAD = [  # (file name, text, options, line, words the message must have)
    ("a.vw", "1 | a\n1,,2 | b\n", [], 2, ["'1,,2'", "1,5,7"]),
    ("b.vw", "1 | a\n2 | b\n1,x | c\n", [], 3, ["'1,x'"]),
    ("c.vw", "1, | a\n", [], 1, ["'1,'"]),
    ("d.vw", "1 | a\n1,0 | b\n", [], 2, ["'0'"]),
    ("e.vw", "1 | a\n2,9 | b\n", [], 2, ["9", "1..5"]),
    ("f.svm", "1 1:1\n1,,2 2:1\n", ["--format", "libsvm"], 2, ["'1,,2'"]),
    ("g.xmc", "3 4 5\n0 0:1\n1,5 1:1\n2 2:1\n", ["--format", "xmc"], 3, ["'5'", "5 labels"]),
    ("h.xmc", "2 4 5\n0 0:1\n1 4:1\n", ["--format", "xmc"], 3, ["'4'", "4 features"]),
    ("i.xmc", "3 4 5\n0 0:1\n1 1:1\n", ["--format", "xmc"], 1, ["3 examples", "has 2"]),
    ("j.xmc", "1 4 5\n0 0:1\n1 1:1\n", ["--format", "xmc"], 1, ["1 examples", "has 2"]),
    ("k.xmc", "a b c\n0 0:1\n", ["--format", "xmc"], 1, ["'a b c'", "N F L"]),
    ("l.xmc", "2 4\n0 0:1\n1 1:1\n", ["--format", "xmc"], 1, ["N F L"]),
]


@pytest.mark.parametrize("name,text,opts,line,words", BAD, ids=[b[0] for b in BAD])
def test_bad_label_sets_are_one_line_errors(tmp_path, name, text, opts, line, words):
    f = tmp_path / name
    f.write_text(text)
    code, _, err = cli("train", "-r", "oaa", "-k", "5", "--multilabel", "-b", "10", "--quiet", *opts, f)
    msg = one_error(code, err, 1)
    assert msg.startswith(f"error: {f}:{line}: "), msg
    for w in words:
        assert w in msg, msg


def test_xmc_header_gives_k(tmp_path):
    """Without -k, an XMC file's header gives the label count (as napkinXC and Omikuji read it),
    compressed or not; standard input cannot be read twice, so there -k stays required."""
    import gzip

    text = "3 4 7\n0,2 0:1\n1 1:1 3:0.5\n6 2:1\n"
    f = tmp_path / "d.xmc.gz"
    with gzip.open(f, "wt") as fh:
        fh.write(text)
    m = tmp_path / "m.lt"
    for r in ("plt", "oaa"):
        code, _, err = cli("train", "-r", r, "--format", "xmc", "-b", "10", "--quiet", f, "-f", m)
        assert code == 0, err
        code, out, err = cli("inspect", m, "--json")
        assert code == 0 and json.loads(out)["k"] == 7, out
    g = tmp_path / "bad.xmc"
    g.write_text("3 4\n0 0:1\n")
    msg = one_error(*cli("train", "-r", "plt", "--format", "xmc", "--quiet", g)[::2], 1)
    assert msg.startswith(f"error: {g}:1: ") and "N F L" in msg, msg
    msg = one_error(*cli("train", "-r", "plt", "--format", "xmc", "--quiet", "-")[::2], 2)
    assert "needs -k" in msg, msg
    # nor a file that is not a regular one (a pipe, a device): reading its header first would take it
    msg = one_error(*cli("train", "-r", "plt", "--format", "xmc", "--quiet", os.devnull)[::2], 2)
    assert "needs -k" in msg, msg


def test_predictions_name_labels_as_the_input_does(tmp_path):
    """XMC labels are 0-based, and LIBSVM's with --label-offset 1: the model's classes are the
    labels plus 1, but every prediction line names them as the input did (threshold sets,
    --top-k, --probabilities; single-label ones too)."""
    rows = ["0 0:1", "1 1:1", "2 2:1"] * 40
    f = tmp_path / "d.xmc"
    f.write_text(f"{len(rows)} 3 3\n" + "\n".join(rows) + "\n")
    m = tmp_path / "m.lt"
    assert cli("train", "-r", "plt", "--format", "xmc", f, "-b", "10", "-f", m, "--quiet")[0] == 0
    t = tmp_path / "t.xmc"
    t.write_text("3 3 3\n0 0:1\n1 1:1\n2 2:1\n")
    for opts, want in (([], ["0", "1", "2"]), (["--top-k", "1"], ["0:", "1:", "2:"]),
                       (["--threshold", "0.5", "--probabilities"], ["0:", "1:", "2:"])):
        code, out, err = cli("predict", "-i", m, t, "-p", "-", "--quiet", *opts)
        assert code == 0, err
        assert [ln[:len(w)] for ln, w in zip(out.splitlines(), want)] == want, (opts, out)
    g = tmp_path / "d.svm"
    g.write_text("".join(f"{y} {y + 1}:1\n" for y in (0, 1, 2)) * 40)
    for r in ("oaa", "plt"):
        assert cli("train", "-r", r, "-k", "3", "--format", "libsvm", "--label-offset", "1", g, "-b", "10",
                   "-f", m, "--quiet")[0] == 0
        code, out, err = cli("predict", "-i", m, g, "-p", "-", "--quiet")
        assert code == 0 and out.splitlines()[:3] == ["0", "1", "2"], (r, out[:40], err)
        code, out, err = cli("predict", "-i", m, g, "-p", "-", "--quiet", "--probabilities")
        assert code == 0 and out.splitlines()[0].startswith("0:") and " p(0)=" in out.splitlines()[0], (r, out[:80])


def test_set_given_to_a_single_label_model_names_multilabel(tmp_path):
    f = tmp_path / "s.vw"
    f.write_text("1 | a\n1,3 | b\n")
    msg = one_error(*cli("train", "-r", "oaa", "-k", "5", "-b", "10", "--quiet", f)[::2], 1)
    assert msg.startswith(f"error: {f}:2: ") and "--multilabel" in msg, msg
    f.write_text("1 1:1\n1,3 2:1\n")
    msg = one_error(*cli("train", "-r", "oaa", "-k", "5", "-b", "10", "--quiet", "--format", "libsvm", f)[::2], 1)
    assert msg.startswith(f"error: {f}:2: ") and "--multilabel" in msg, msg


# -- 5. command-line round trips -----------------------------------------------------------------
def vw_lines(k, n, seed, labelled=True):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ys = sorted({int(y) for y in rng.integers(1, k + 1, rng.integers(1, 4))})
        feats = " ".join(f"c{y}" for y in ys) + " " + " ".join(f"n{int(j)}" for j in rng.integers(0, 30, 2))
        out.append((",".join(map(str, ys)) if labelled else "") + f" | {feats}")
    return out


@pytest.fixture(scope="module")
def mldata(tmp_path_factory):
    d = tmp_path_factory.mktemp("ml")
    (d / "a.vw").write_text("\n".join(vw_lines(10, 150, 0)) + "\n")
    (d / "b.vw").write_text("\n".join(vw_lines(10, 100, 1)) + "\n")
    (d / "ab.vw").write_text((d / "a.vw").read_text() + (d / "b.vw").read_text())
    test = vw_lines(10, 40, 2)
    (d / "test.vw").write_text("\n".join(test) + "\n")
    (d / "test_unlab.vw").write_text("\n".join(ln[ln.index("|") - 1:] for ln in test) + "\n")
    return d


# (a tree buffer that sees every label: online insertion of 2+ new labels at once hangs, see
# test_several_new_labels_get_room)
PLT = ["-r", "plt", "-k", "10", "--multilabel", "-b", "14", "--tree-buffer", "40", "--arity", "3", "--quiet"]


def model_arrays(path):
    from lomtree_cli.model_io import load_model, model_arrays as arrays

    m = load_model(str(path))
    return m, arrays(m.learner, m.reduction)


def test_save_load_predicts_as_before_saving(mldata, tmp_path):
    """The progressive predictions of unlabeled lines after training (nothing learned from them)
    equal the saved model's top-1 in predict; the label counts are saved. (Progressive validation
    scores the online weights: --no-average, so that the model predicts with the same ones.)"""
    m = tmp_path / "m.lt"
    p = tmp_path / "p.txt"
    code, _, err = cli("train", *PLT, mldata / "a.vw", mldata / "test_unlab.vw", "-f", m, "-p", p, "--no-average")
    assert code == 0, err
    progressive = p.read_text().split()[150:]
    code, out, err = cli("predict", "-i", m, mldata / "test_unlab.vw", "-p", "-", "--top-k", "1", "--quiet")
    assert code == 0, err
    assert [ln.split(":")[0] for ln in out.splitlines()] == progressive
    loaded, _ = model_arrays(m)
    counts = loaded.reduction.label_counts
    sets = [ln.split(" |")[0].split(",") for ln in (mldata / "a.vw").read_text().splitlines()]
    assert counts[0] == 150 and counts[1:].tolist() == [sum(str(y) in s for s in sets) for y in range(1, 11)]


@pytest.mark.parametrize("red", [PLT, ["-r", "oaa", "-k", "10", "--multilabel", "-b", "14", "--quiet"]])
def test_initial_model_continues_exactly(mldata, tmp_path, red):
    m1, m2, m3 = tmp_path / "1.lt", tmp_path / "2.lt", tmp_path / "3.lt"
    assert cli("train", *red, mldata / "a.vw", "-f", m1)[0] == 0
    code, _, err = cli("train", "-i", m1, mldata / "b.vw", "-f", m2, "--quiet")
    assert code == 0, err
    assert cli("train", *red, mldata / "ab.vw", "-f", m3)[0] == 0
    _, a = model_arrays(m2)
    _, b = model_arrays(m3)
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("red", [["-r", "oaa"], ["-r", "plt", "--tree-buffer", "40"],
                                 ["-r", "plt", "--tree-buffer", "40", "--arity", "2"]])
def test_passes_through_the_cache(mldata, tmp_path, red):
    """--passes 3 -c (passes 2 and 3 read the label sets from the example cache) trains exactly
    the model of --passes 3 that parses the file again each pass."""
    models = []
    for cache in ([f"--cache={tmp_path / 'c.cache'}"], []):
        m = tmp_path / f"m{len(models)}.lt"
        code, _, err = cli("train", *red, "-k", "10", "--multilabel", "-b", "14", "--quiet", "--passes", "3",
                           "--holdout-off", *cache, mldata / "a.vw", "-f", m)
        assert code == 0, err
        models.append(model_arrays(m)[1])
    assert (tmp_path / "c.cache").exists()
    for key in models[0]:
        assert np.array_equal(models[0][key], models[1][key]), key


def test_cache_round_trips_label_sets(tmp_path):
    from lomtree_cli.cache import ExampleCache
    from lomtree_cli.parsing import iter_batches

    f = tmp_path / "d.vw"
    f.write_text("\n".join(vw_lines(10, 200, 5)) + "\n| unlabelled\n3,3,1 | x\n")
    cfg = InputConfig(bits=BITS, multilabel=True)
    cache = ExampleCache.open(str(tmp_path / "c.cache"), cfg, [str(f)])
    parsed = list(iter_batches([str(f)], cfg, chunk_bytes=500))
    w = cache.writer()
    for b in parsed:
        w.add(b)
    w.close()
    got = list(ExampleCache.open(str(tmp_path / "c.cache"), cfg, [str(f)]).read())
    assert len(got) == len(parsed) > 3
    for a, b in zip(parsed, got):
        assert examples_of(a) == examples_of(b)
        assert a.line_numbers.tolist() == b.line_numbers.tolist()
    assert sets_of(got[-1])[-2:] == [[], [1, 3]]
    # a cache of single-label batches is not read for a multi-label run (the key differs)
    assert not ExampleCache.open(str(tmp_path / "c.cache"), InputConfig(bits=BITS), [str(f)]).ready


def test_probabilities_print_the_thresholded_set_with_p(mldata, tmp_path):
    """--probabilities with a threshold: the labels of the thresholded line, in the same order,
    each as 'label:P' with the P that --top-k prints for it."""
    m = tmp_path / "m.lt"
    assert cli("train", *PLT, mldata / "ab.vw", "-f", m)[0] == 0
    base = ("predict", "-i", m, mldata / "test.vw", "-p", "-", "--quiet")
    code, sets, err = cli(*base, "--threshold", "0.3")
    assert code == 0, err
    code, probs, err = cli(*base, "--threshold", "0.3", "--probabilities")
    assert code == 0, err
    code, top, err = cli(*base, "--top-k", "32")
    assert code == 0, err
    lines = list(zip(sets.splitlines(), probs.splitlines(), top.splitlines()))
    assert len(lines) == len((mldata / "test.vw").read_text().splitlines()) and any(s for s, _, _ in lines)
    for ln_s, ln_p, ln_k in lines:
        pairs = [t.split(":") for t in ln_p.split()]
        assert [lab for lab, _ in pairs] == (ln_s.split(",") if ln_s else []), (ln_s, ln_p)
        shown = dict(t.split(":") for t in ln_k.split())
        assert all(shown[lab] == p and float(p) >= 0.3 for lab, p in pairs), (ln_p, ln_k)


def test_top_k_threshold_lines_and_report_metrics(mldata, tmp_path):
    """--top-k 5: up to 5 distinct 'label:P' (best ranked first); --threshold 0.3: comma-joined labels, each
    with P >= 0.3 in the top-k lines; the --report metrics equal mlmetrics on the printed top-5
    and the true sets, with the saved label counts' propensities."""
    from lomtree_cli.mlmetrics import MultilabelScores, propensities

    m = tmp_path / "m.lt"
    assert cli("train", *PLT, mldata / "ab.vw", "-f", m)[0] == 0
    rep = tmp_path / "r.json"
    code, out, err = cli("predict", "-i", m, mldata / "test.vw", "-p", "-", "--top-k", "5", "--report", rep,
                         "--quiet")
    assert code == 0, err
    top = []
    for ln in out.splitlines():
        pairs = [t.split(":") for t in ln.split()]
        assert all(re.fullmatch(r"\d+:[01]\.\d{6}", t) for t in ln.split()), ln
        assert 1 <= len(pairs) <= 5 and len({lab for lab, _ in pairs}) == len(pairs)
        top.append([int(lab) for lab, _ in pairs] + [0] * (5 - len(pairs)))
    truth = [sorted(int(y) for y in ln.split(" |")[0].split(",")) for ln in (mldata / "test.vw").read_text().splitlines()]
    code, out_t, err = cli("predict", "-i", m, mldata / "test.vw", "-p", "-", "--threshold", "0.3", "--quiet")
    assert code == 0, err
    for ln_t, ln_k in zip(out_t.splitlines(), out.splitlines()):
        over = [t.split(":")[0] for t in ln_k.split() if float(t.split(":")[1]) >= 0.3]
        got_t = ln_t.split(",") if ln_t else []
        shown = {t.split(":")[0]: float(t.split(":")[1]) for t in ln_k.split()}
        assert set(over) <= set(got_t) and all(shown.get(y, 1.0) >= 0.3 for y in got_t), (ln_t, ln_k)
        assert len(set(got_t)) == len(got_t)
    loaded, _ = model_arrays(m)
    counts = loaded.reduction.label_counts
    lptr = np.zeros(len(truth) + 1, np.int64)
    np.cumsum([len(t) for t in truth], out=lptr[1:])
    s = MultilabelScores((1, 3, 5), inv_propensity=1.0 / propensities(counts, int(counts[0])), k_labels=None)
    s.add(np.array(top, np.int64), lptr, np.array([y for t in truth for y in t], np.int64))
    want = s.result()
    got = json.load(open(rep))
    for key in ("p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5", "psp@1", "psp@3", "psp@5"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    code, _, err = cli("predict", "-i", m, mldata / "test.vw", "-p", tmp_path / "t.txt", "--report", rep, "--quiet")
    r = json.load(open(rep))
    assert code == 0 and "micro_f1" in r and "macro_f1" in r


def test_bits_default_by_reduction_and_k(tmp_path):
    """Without -b, plt with label sets from k = 4,096 hashes into 2^26 slots (its leaf negatives
    touch far more weights than VW's 2^18 hold); every other model keeps 18, and a given -b wins."""
    f = tmp_path / "d.vw"
    f.write_text("1,4000 | a b\n2 | b c\n4001,5 | c d\n")
    m = tmp_path / "m.lt"

    def bits(*args):
        code, _, err = cli("train", *args, "--quiet", f, "-f", m, "--predict_only_model")
        assert code == 0, err
        code, out, err = cli("inspect", m, "--json")
        assert code == 0, err
        return json.loads(out)["bits"]

    assert bits("-r", "plt", "--multilabel", "-k", "5000") == 26
    assert bits("-r", "plt", "--multilabel", "-k", "5000", "-b", "20") == 20
    assert bits("-r", "plt", "--multilabel", "-k", "4095") == 18
    assert bits("-r", "oaa", "--multilabel", "-k", "5000") == 18
    g = tmp_path / "s.vw"
    g.write_text("1 | a b\n4000 | b c\n")
    code, _, err = cli("train", "-r", "plt", "-k", "5000", "--quiet", g, "-f", m, "--predict_only_model")
    assert code == 0, err
    assert json.loads(cli("inspect", m, "--json")[1])["bits"] == 18
    # under --dask the client averages every worker's table: at most 2^24 slots unless -b says more
    from lomtree_cli.commands import default_bits

    p = {"reduction": "plt", "multilabel": True, "k": 5000, "passes": 1}
    assert default_bits(p) == 26 and default_bits({**p, "dask": "local:2"}) == 24
    assert default_bits({**p, "reduction": "oaa", "dask": "local:2"}) == 18
