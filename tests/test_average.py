"""``--average``: the averaged weights are the weight-averaged iterates of the online learner (an
independent reference: every iterate kept and averaged in numpy), for every reduction on the
linear learner and both update rules; the model file keeps the online weights, so a continued
model is the uninterrupted one; a prediction-only load predicts as the in-memory model; what
cannot average is refused."""

import numpy as np
import pytest

from lomtree_cli import Classifier, model_io
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.core import Learner
from lomtree_cli.reductions.registry import REGISTRY
from tests.helpers import cli, make_batch, one_error, separable_lines

BITS = 12
K_CLASSES = 6
#: reductions whose predictions are the linear learner's weights (mtree and the label table refuse --average)
LINEAR = [r for r, spec in REGISTRY.items() if not spec.no_regularization and r != "mtree"]


def _examples(n, seed):
    """(label, weight, indices, values): class c has feature c, plus 3 noise features; weights 0.5-2."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        y = int(rng.integers(1, K_CLASSES + 1))
        idx = [y * 7] + [int(h) for h in rng.integers(100, 400, size=3)]
        out.append((y, float(rng.choice([0.5, 1.0, 2.0])), idx, [1.0, 0.3, 0.3, 0.3]))
    return out


def _batch(exs):
    return make_batch([list(zip(i, v)) for _, _, i, v in exs], [y for y, _, _, _ in exs],
                      [w for _, w, _, _ in exs], bits=BITS)


def _model(reduction, **lcfg):
    extra = {"tree_buffer": 1} if reduction == "plt" else {}  # plt learns each example as it comes
    return Learner.new(InputConfig(bits=BITS), LearnerConfig(average=True, **lcfg),
                       ReductionConfig(name=reduction, k=K_CLASSES, **extra))


@pytest.mark.parametrize("sgd", [False, True])
@pytest.mark.parametrize("reduction", LINEAR)
def test_averaged_weights_are_the_weighted_mean_of_the_iterates(reduction, sgd):
    model = _model(reduction, sgd=sgd)
    exs = _examples(60, seed=1)
    total = np.zeros(1 << BITS)
    weight = 0.0
    for ex in exs:
        model.learn(_batch([ex]))
        w = model.base.arrays.table[:, 0].astype(np.float64)  # the online weights after this example
        total += ex[1] * w
        weight += ex[1]
    online = model.base.arrays.table[:, 0].copy()
    assert np.count_nonzero(online) > 10
    model.predict(_batch(exs[:1]))  # puts the averaged weights in the table
    avg = model.base.arrays.table[:, 0]
    assert not np.array_equal(avg, online)
    np.testing.assert_allclose(avg, (total / weight).astype(np.float32), rtol=2e-5, atol=1e-6)
    model.learn(_batch(exs[:1]))  # learning goes on from the online weights
    assert model.base._online is None


def test_without_average_the_table_is_what_was_learned():
    model = Learner.new(InputConfig(bits=BITS), LearnerConfig(), ReductionConfig(name="oaa", k=K_CLASSES))
    model.learn(_batch(_examples(30, seed=2)))
    before = model.base.arrays.table.copy()
    model.predict(_batch(_examples(3, seed=3)))
    assert np.array_equal(model.base.arrays.table, before) and model.base.arrays.avg.shape == (1,)


@pytest.mark.parametrize("reduction", ["oaa", "plt", "lomtree"])
def test_save_load_continue_equals_uninterrupted(tmp_path, reduction):
    a, b = _batch(_examples(80, seed=4)), _batch(_examples(80, seed=5))
    full = _model(reduction)
    full.learn(a)
    full.predict(b)  # a prediction in between must not change what is learned next
    p_full = full.learn(b)
    part = _model(reduction)
    part.learn(a)
    path = str(tmp_path / "m.lt")
    part.save(path)
    cont = Learner.load(path)
    p_cont = cont.learn(b)
    assert p_cont.tolist() == p_full.tolist()
    assert np.array_equal(cont.base.arrays.table, full.base.arrays.table)
    assert np.array_equal(cont.base.arrays.avg, full.base.arrays.avg)
    # a prediction-only load holds the averaged weights: the same predictions as in memory
    full.save(path)
    test = _batch(_examples(40, seed=6))
    assert Learner.load(path, predict_only=True, skip_unused=True).predict(test).tolist() == \
        full.predict(test).tolist()


def test_cli_train_predict_and_refusals(tmp_path):
    train = tmp_path / "t.vw"
    train.write_text("\n".join(separable_lines(K_CLASSES, 300, seed=7, noise_feats=3, vocab=200)) + "\n")
    m = tmp_path / "m.lt"
    code, _, err = cli("train", "-r", "oaa", "-k", K_CLASSES, "-b", BITS, train, "-f", m, "--average", "--quiet")
    assert code == 0, err
    assert model_io.load_model(str(m)).learner.config.average
    code, out, err = cli("predict", "-i", m, train, "-p", "-", "--quiet")
    assert code == 0 and len(out.splitlines()) == 300, err
    code, _, err = cli("train", "-i", m, train, "--no-average", "--quiet")
    assert "conflicts with the initial model" in one_error(code, err, 2)
    code, _, err = cli("train", "-r", "mtree", "-k", K_CLASSES, train, "--average", "--quiet")
    assert "--average does not apply to --reduction mtree" in one_error(code, err, 2)
    code, _, err = cli("train", "-r", "table", train, "--average", "--quiet")
    assert "--average does not apply to --reduction table" in one_error(code, err, 2)
    code, _, err = cli("train", "-r", "oaa", "-k", K_CLASSES, train, "--average", "--dask", "local:1", "--quiet")
    assert "--average cannot be used with --dask" in one_error(code, err, 2)
    code, _, err = cli("train", "-i", m, train, "--dask", "local:1", "--quiet")  # an averaged model
    assert "--average cannot be used with --dask" in one_error(code, err, 2)


def test_api_average_predicts_with_the_averaged_weights():
    rng = np.random.default_rng(8)
    X = rng.random((200, 5))
    y = (X.argmax(axis=1) + 1).tolist()
    clf = Classifier(reduction="oaa", classes=5, average=True).fit(X, y)
    assert clf.get_params()["average"] is True
    again = Classifier.from_bytes(clf.to_bytes())
    assert again.average and again.predict(X).tolist() == clf.predict(X).tolist()
    # averaging changes what is predicted, not what is learned
    plain = Classifier(reduction="oaa", classes=5).fit(X, y)
    assert np.array_equal(plain._model.base.arrays.table[:, 0], clf._model.base._online)
    assert not np.array_equal(plain._model.base.arrays.table[:, 0], clf._model.base.arrays.table[:, 0])
