"""OAA against a pure-Python reference, and its behaviour on small problems."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.learner import LinearLearner
from lomtree_cli.parsing import parse_bytes
from lomtree_cli.reductions.oaa import OneAgainstAll
from tests.helpers import make_batch, separable_lines
from tests.reference.linear_ref import RefLinear


def oaa(k, bits=18, **kw):
    rc = ReductionConfig(name="oaa", k=k)
    lrn = LinearLearner(LearnerConfig(**kw), bits, k)
    return OneAgainstAll(rc, lrn)


def ref_oaa_run(rows, labels, weights, train, k, bits, loss):
    ref = RefLinear(bits=bits, n_models=k, loss=loss)
    preds = []
    for r, y, iw, t in zip(rows, labels, weights, train):
        idx = [h & ((1 << bits) - 1) for h, _ in r]
        val = [float(np.float32(v)) for _, v in r]
        yh = [ref.clip(ref.score(idx, val, c)) for c in range(k)]
        preds.append(int(np.argmax(yh)) + 1)  # argmax: first maximum = smallest label
        if t:
            for c in range(k):
                ref.learn(idx, val, c, 1.0 if c == y - 1 else -1.0, iw, yh[c])
            ref.end_example(iw)
    return np.array(preds), ref


rows_st = st.lists(st.tuples(st.integers(0, 30), st.sampled_from([1.0, 0.5, -2.0, 0.25])), max_size=5)


@settings(deadline=None, max_examples=60)
@given(data=st.lists(st.tuples(rows_st, st.integers(1, 4), st.sampled_from([1.0, 2.0, 0.5]), st.booleans()),
                     min_size=1, max_size=30),
       bits=st.sampled_from([3, 12]), loss=st.sampled_from(["squared", "logistic", "hinge"]))
def test_oaa_matches_reference(data, bits, loss):
    k = 4
    rows = [d[0] for d in data]
    labels = [d[1] for d in data]
    weights = [d[2] for d in data]
    train = np.array([d[3] for d in data])
    red = oaa(k, bits, loss=loss)
    b = make_batch(rows, labels, weights, bits)
    preds, losses = red.process(b, train)
    assert losses is None
    rpreds, ref = ref_oaa_run(rows, labels, weights, train, k, bits, loss)
    np.testing.assert_array_equal(preds, rpreds)
    np.testing.assert_allclose(red.learner.arrays.table[:, 0], ref.dense_w(), rtol=1e-5, atol=1e-6)


def test_oaa_learns_separable_problem_to_zero_error():
    k = 20
    lines = separable_lines(k, 400, seed=1, noise_feats=2)
    b = parse_bytes(("\n".join(lines) + "\n").encode(), InputConfig())
    red = oaa(k)
    for _ in range(3):
        red.process(b, np.ones(len(b), bool))
    assert np.all(red.predict(b) == b.labels)


def test_oaa_chunking_does_not_matter():
    k = 7
    lines = separable_lines(k, 120, seed=3, noise_feats=3)
    data = ("\n".join(lines) + "\n").encode()
    b = parse_bytes(data, InputConfig())
    one = oaa(k)
    p1, _ = one.process(b, np.ones(len(b), bool))
    two = oaa(k)
    p2 = []
    for i in range(len(b)):
        sub = b.subset(np.arange(len(b)) == i)
        p, _ = two.process(sub, np.ones(1, bool))
        p2.append(p[0])
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(one.learner.arrays.table, two.learner.arrays.table)


def test_oaa_k1_and_untrained_ties():
    red = oaa(1)
    b = make_batch([[(1, 1.0)], [(2, 1.0)]], [1, 0])
    p, _ = red.process(b, np.array([True, False]))
    assert list(p) == [1, 1]
    red = oaa(5)
    assert list(red.predict(make_batch([[(3, 1.0)]], [0]))) == [1]  # all scores 0: smallest label


def test_oaa_predict_top_probabilities_sum_to_one():
    k = 5
    red = oaa(k, loss="logistic")
    lines = separable_lines(k, 200, seed=2)
    b = parse_bytes(("\n".join(lines) + "\n").encode(), InputConfig())
    red.process(b, np.ones(len(b), bool))
    labs, probs, p_true = red.predict_top(b, k)
    assert labs.shape == (len(b), k)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-9)
    assert np.all(np.diff(probs, axis=1) <= 1e-12)
    assert np.mean(labs[:, 0] == b.labels) > 0.95
