"""The Python API's one-example path (``Reduction.one_step``: OAA's ``learn_one`` /
``predict_one`` in one compiled call) against the batch path it stands for: a stream learned with
``learn_one`` and one with ``partial_fit`` of one-example lists (``dicts_batch`` and the chunk
kernel) give the same predictions at every step and byte-identical model files; the open label
set's feature record too. Also the identity memo of the kernels' argument fingerprints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import Classifier

keys = st.one_of(st.sampled_from(["a", "b", "c", "f1", "f2", "long_feature_name"]), st.integers(0, 40))
values = st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from([0.0, 1.0, -2.5, 1e-300]),
                   st.integers(-5, 5))
dicts = st.dictionaries(keys, values, max_size=12)


def _batch_prediction(model, x):
    return None if getattr(model, "_model", None) is None else model.predict([x])[0].item()


def _run(stream, **params):
    """(fast model, batch model, predictions of each before every example)."""
    fast, batch = Classifier(reduction="oaa", **params), Classifier(reduction="oaa", **params)
    pf, pb = [], []
    for x, y in stream:
        pf.append(fast.predict_one(x))
        pb.append(_batch_prediction(batch, x))
        fast.learn_one(x, y)
        batch.partial_fit([x], [y])
    return fast, batch, pf, pb


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(dicts, st.sampled_from(["x", "y", "z", "w"])), min_size=1, max_size=40),
       st.booleans(), st.sampled_from([None, {"loss_function": "logistic"}, {"bits": 4}]))
def test_one_step_equals_batch_path(stream, given_classes, options):
    params = dict(options or {})
    if given_classes:
        params["classes"] = ["w", "x", "y", "z"]
    fast, batch, pf, pb = _run(stream, **params)
    x = stream[-1][0]
    assert fast.predict_one(x) == _batch_prediction(batch, x)
    assert fast._step[2] is not None  # the one-example path ran (a failure here: it never did)
    assert pf == pb
    assert fast.to_bytes() == batch.to_bytes()
    if given_classes:
        assert fast._features is None and batch._features is None
    else:
        assert np.array_equal(fast._features, batch._features)


def test_one_step_integer_labels_and_growth():
    """Integer labels 1..K appearing over time (the model grows twice), long examples (more
    features than the step's first arrays hold): the same as the batch path."""
    rng = np.random.default_rng(3)
    stream = []
    for i in range(300):
        n = int(rng.integers(1, 80))
        x = {f"f{j}": float(v) for j, v in zip(rng.integers(0, 500, n), rng.normal(size=n))}
        stream.append((x, int(rng.integers(1, 3 if i < 100 else 6))))
    fast, batch, pf, pb = _run(stream)
    assert fast._step[1].k == 5 and fast._step[2].k == 5
    assert pf == pb
    assert fast.to_bytes() == batch.to_bytes()


def test_fingerprint_memo_follows_the_tuple():
    """The remembered fingerprint belongs to the tuple object it was made for: alternating
    tuples of other array types get their own, equal to a fresh computation."""
    from lomtree_cli.kernels import _ARRAY_FP, fingerprint

    t1 = (np.zeros(3), np.zeros(2, np.int64))
    t2 = (np.zeros(3, np.float32), np.zeros((2, 2)))
    fresh = {id(t): (tuple, *[_ARRAY_FP(a) for a in t]) for t in (t1, t2)}
    for t in (t1, t2, t2, t1, t2):
        assert fingerprint(t) == fresh[id(t)]
    assert fingerprint(t1) != fingerprint(t2)


def test_direct_gives_the_compiled_function_only_for_its_signature():
    """``kernels.direct``: the AOT module's function for the compiled argument types (the
    one-example call's own arrays), the kernel itself (which checks every call) for others."""
    from lomtree_cli import kernels as KN
    from lomtree_cli.kernels import oaa_kernels

    k = oaa_kernels.oaa_one
    if type(k) is not KN._Kernel or k.aot is None or k.dispatcher is not None:
        pytest.skip("the ahead-of-time module does not serve oaa_one in this process")
    clf = Classifier(reduction="oaa")
    clf.learn_one({"a": 1.0}, "x")
    s = clf._one_step(False)
    args = (s.learner.arrays, np.zeros(2), 1, 0, 1.0, False, 1, s.unmarked, False, s.idx, s.val, s.scratch, s.work,
            s.act, s.ms, s.tmp, s.ys)
    assert KN.direct(k, args) is k.aot[0]
    assert KN.direct(k, args[:1] + (np.zeros(2, np.float32),) + args[2:]) is k
    assert KN.direct(k, args[:2] + (1.0,) + args[3:]) is k


@pytest.mark.parametrize("params", [{"average": True}, {"solver": "dual", "classes": 3}, {"multilabel": True}])
def test_one_step_not_taken(params):
    """Where the batch path must run (averaged weights, the dual solver, label sets) there is no
    one-example call, and learn_one still works. (Last in this file: the averaged and label-set
    calls switch the process to the JIT, and ``direct``'s test needs the AOT module.)"""
    clf = Classifier(reduction="oaa", **params)
    y = {1} if params.get("multilabel") else 1
    for _ in range(3):
        clf.learn_one({"a": 1.0}, y)
    assert clf.predict_one({"a": 1.0}) == y
    step = clf.__dict__.get("_step")
    assert step is None or step[2] is None
