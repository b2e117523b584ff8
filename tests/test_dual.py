"""``--solver dual``: the kernel against a plain dual coordinate descent (``reference/dual_ref.py``),
the dual objective rising and the primal-dual gap closing pass after pass, a saved model predicting
as the trained one, and the refusals."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.core import Learner
from tests.helpers import cli, make_batch, one_error, separable_lines
from tests.reference.dual_ref import RefDual

K = 4


def _model(bits, loss, cost, multilabel=False, seed=0):
    icfg = InputConfig(bits=bits, multilabel=multilabel)
    return Learner.new(icfg, LearnerConfig(solver="dual", loss=loss, cost=cost),
                       ReductionConfig(name="oaa", k=K, seed=seed))


def _batch(examples, bits, multilabel=False):
    b = make_batch([list(zip(i, v)) for i, v, _, _ in examples], [min(s) if s else 0 for _, _, s, _ in examples],
                   [w for _, _, _, w in examples], bits)
    if multilabel:
        sizes = [len(s) for _, _, s, _ in examples]
        b.label_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        b.label_ids = np.array([y for _, _, s, _ in examples for y in sorted(s)], dtype=np.int64)
    return b


def _train(model, batch, train, passes, ref=None):
    """``passes`` passes over ``batch`` (one chunk); the reference, if given, visits in the same order."""
    red = model.reduction
    red.plan(passes, [], None)
    for _ in range(passes):
        if ref is not None:
            ref.run_pass(red.dual.order(0, len(batch)), train)
        model.process(batch, train)
        model.end_pass()


example_st = st.tuples(st.lists(st.integers(0, 40), min_size=0, max_size=5),
                       st.sampled_from([1.0, 0.5, -2.0, 0.25]),
                       st.sets(st.integers(1, K), min_size=1, max_size=2),
                       st.sampled_from([1.0, 2.0, 0.5]), st.booleans())


@settings(deadline=None, max_examples=40)
@given(data=st.lists(example_st, min_size=1, max_size=25), bits=st.sampled_from([3, 12]),
       loss=st.sampled_from(["squared-hinge", "hinge"]), cost=st.sampled_from([0.5, 2.0]),
       passes=st.integers(1, 3), multilabel=st.booleans())
def test_kernel_matches_reference(data, bits, loss, cost, passes, multilabel):
    """Same weights and dual variables as the plain coordinate descent; bits 3 makes features
    collide in an example (summed) and regressors share slots (each rescored before its step)."""
    examples = []
    for idx, v, labels, iw, _ in data:
        labels = labels if multilabel else {min(labels)}
        examples.append(([h & ((1 << bits) - 1) for h in idx], [v * (1 + j % 3) for j in range(len(idx))], labels, iw))
    train = np.array([d[4] for d in data])
    model = _model(bits, loss, cost, multilabel)
    ref = RefDual(examples, K, bits, cost, loss)
    _train(model, _batch(examples, bits, multilabel), train, passes, ref)
    np.testing.assert_allclose(model.base.arrays.table[:, 0], ref.dense_w(), rtol=1e-4, atol=1e-5)
    if passes > 1:  # one pass keeps no dual variables
        np.testing.assert_allclose(model.reduction.dual.alpha[:len(examples)], np.array(ref.alpha), rtol=1e-4,
                                   atol=1e-5)


def _problem(separable: bool, n=60, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        y = int(rng.integers(1, K + 1))
        idx = [y] + [int(h) for h in rng.integers(10, 30, size=3)]
        # non-separable: one example in five carries another class's feature
        if not separable and rng.random() < 0.2:
            idx[0] = int(rng.integers(1, K + 1))
        out.append((idx, [1.0, 0.5, 0.5, 0.5], {y}, float(rng.choice([0.5, 1.0, 2.0]))))
    return out


@pytest.mark.parametrize("loss", ["squared-hinge", "hinge"])
@pytest.mark.parametrize("separable", [True, False])
def test_dual_rises_and_gap_closes(loss, separable):
    bits = 10
    examples = _problem(separable)
    train = np.array([i % 7 != 3 for i in range(len(examples))])  # some never trained (a holdout)
    model = _model(bits, loss, 1.0)
    ref = RefDual(examples, K, bits, 1.0, loss)
    batch = _batch(examples, bits)
    red = model.reduction
    red.plan(30, [], None)
    duals, gaps = [], []
    for _ in range(30):
        model.process(batch, train)
        model.end_pass()
        alpha = red.dual.alpha[:len(examples)].astype(np.float64).tolist()
        w = ref.w_of_alpha(alpha)
        table = model.base.arrays.table[:, 0]
        # the table is w(alpha) (float32 sums of the same steps)
        np.testing.assert_allclose(table, [w.get(s, 0.0) for s in range(1 << bits)], atol=1e-4)
        d = ref.dual(alpha, train)
        duals.append(d)
        gaps.append(ref.primal(w, train) - d)
    assert all(b >= a - 1e-6 * abs(a) for a, b in zip(duals, duals[1:])), duals
    assert min(gaps) >= -1e-6 * abs(duals[-1]), gaps  # weak duality
    assert gaps[-1] < 0.05 * gaps[0] and gaps[-1] < min(gaps[:10]), gaps


def test_saved_model_predicts_the_same_and_runs_repeat(tmp_path):
    lines = separable_lines(K, 200, seed=2, noise_feats=4)
    icfg = InputConfig(bits=14)
    from lomtree_cli.parsing import parse_bytes

    batch = parse_bytes(("\n".join(lines) + "\n").encode(), icfg)
    models = []
    for _ in range(2):
        model = Learner.new(icfg, LearnerConfig(solver="dual", loss="squared-hinge"), ReductionConfig(name="oaa", k=K))
        _train(model, batch, np.ones(len(batch), bool), 3)
        models.append(model)
    np.testing.assert_array_equal(models[0].base.arrays.table, models[1].base.arrays.table)
    path = str(tmp_path / "m.lt")
    models[0].save(path)
    loaded = Learner.load(path, predict_only=True)
    np.testing.assert_array_equal(loaded.predict(batch), models[0].predict(batch))
    assert (models[0].predict(batch) == batch.labels).all()
    top = [m.predict_top(batch, 2) for m in (models[0], loaded)]
    np.testing.assert_array_equal(top[0][0], top[1][0])
    np.testing.assert_allclose(top[0][1], top[1][1])
    from lomtree_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot be trained on"):  # its table has no room for the online update
        Learner.load(path).learn(batch)


def test_cli_trains_predicts_and_refuses(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(K, 300, seed=4, noise_feats=3)) + "\n")
    m = tmp_path / "m.lt"
    code, _, err = cli("train", "-r", "oaa", "-k", K, data, "--solver", "dual", "--passes", 3, "--cost", 0.5,
                       "-f", m, "--quiet")
    assert code == 0, err
    code, out, err = cli("predict", "-i", m, data, "-p", "-", "--quiet")
    assert code == 0, err
    want = [int(line.split()[0]) for line in data.read_text().splitlines()]
    assert [int(x) for x in out.split()] == want

    base = ("train", "-k", K, data, "--passes", 2, "--quiet")
    refusals = [
        (("-r", "lomtree", "--solver", "dual"), "--solver dual trains -r oaa only"),
        (("-r", "oaa", "--solver", "dual", "--loss-function", "squared"), "--solver dual minimises"),
        (("-r", "oaa", "--loss-function", "squared-hinge"), "squared-hinge needs --solver dual"),
        (("-r", "oaa", "--solver", "dual", "--average"), "--average does not apply to --solver dual"),
        (("-r", "oaa", "--solver", "dual", "--l2", 0.1), "--l2 does not apply to --solver dual"),
        (("-r", "oaa", "--solver", "dual", "-l", 0.1), "-l does not apply to --solver dual"),
        (("-r", "oaa", "--cost", 2), "--cost needs --solver dual"),
        (("-r", "oaa", "--solver", "dual", "--cost", 0), "--cost must be a positive number"),
        (("-r", "oaa", "--solver", "dual", "--dask", "local:1"), "cannot be used with --dask"),
        (("-r", "oaa", "-i", m), "cannot be trained on"),
        (("-r", "oaa", "--solver", "dual", "--dual-memory", 0.001), "300 examples need 0.0046 MB, more than --dual-memory 0.001 MB"),
    ]
    for extra, text in refusals:
        code, _, err = cli(*base, *extra)
        assert text in one_error(code, err, 2), (extra, err)


def test_memory_budget_refused_up_front_and_while_reading(tmp_path):
    """From the input files' lines before training; from standard input when the first pass's
    examples pass the budget."""
    import subprocess
    import sys

    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(K, 3000, seed=5)) + "\n")
    code, _, err = cli("train", "-r", "oaa", "-k", K, data, "--solver", "dual", "--passes", 2, "--dual-memory", 0.01)
    line = one_error(code, err, 2)
    assert "input's 3,000 examples need 0.046 MB" in line and "--dual-memory 0.01 MB" in line, line
    assert "average loss" not in err  # nothing trained
    proc = subprocess.run([sys.executable, "-m", "lomtree_cli.launch", "train", "-r", "oaa", "-k", str(K), "--solver",
                           "dual", "--passes", "2", "--dual-memory", "0.01", "--quiet"], input=data.read_bytes(),
                          capture_output=True)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"more than --dual-memory 0.01 MB" in proc.stderr, proc.stderr


def test_defaults_of_single_labels_and_label_sets(tmp_path):
    single, sets = tmp_path / "s.vw", tmp_path / "m.vw"
    single.write_text("1 | a\n2 | b\n")
    sets.write_text("1,2 | a\n2 | b\n")
    for data, extra, want in ((single, (), ("hinge", 2.0)), (sets, ("--multilabel",), ("squared-hinge", 0.01))):
        m = tmp_path / "x.lt"
        code, _, err = cli("train", "-r", "oaa", "-k", 2, data, *extra, "--solver", "dual", "--passes", 2, "-f", m,
                           "--quiet")
        assert code == 0, err
        cfg = Learner.load(str(m)).base.config
        assert (cfg.loss, cfg.cost, cfg.average) == (*want, False)


def test_api_fits_the_cli_model_and_round_trips_its_options(tmp_path):
    """``Classifier(solver="dual")`` trains the model ``lomtree train --solver dual`` trains on the
    same lines (the same passes through the same runner), and a loaded dual model gives back its
    solver options, no learning rate, and refuses to learn further."""
    from lomtree_cli.api import Classifier

    lines = separable_lines(K, 240, seed=6, noise_feats=5)
    data = tmp_path / "d.vw"
    data.write_text("\n".join(lines) + "\n")
    m = tmp_path / "m.lt"
    code, _, err = cli("train", "-r", "oaa", "-k", K, "-b", 16, data, "--solver", "dual", "--passes", 4,
                       "--holdout-off", "--cost", 0.5, "-f", m, "--quiet")
    assert code == 0, err
    code, out, err = cli("predict", "-i", m, data, "-p", "-", "--quiet")
    assert code == 0, err
    code, shown, err = cli("inspect", m, "--json")
    assert code == 0, err
    shown = json.loads(shown)
    assert (shown["update"], shown["cost"], "learning_rate" in shown) == ("dual", 0.5, False)
    clf = Classifier(reduction="oaa", classes=K, bits=16, solver="dual", cost=0.5, passes=4, holdout_off=True)
    clf.fit(lines)
    assert clf.predict(lines).tolist() == [int(x) for x in out.split()]
    with pytest.raises(ValueError, match="cannot be trained on"):  # its dual variables were the fit's
        clf.partial_fit(lines[:5])
    cli_table = Learner.load(str(m)).base.arrays.table
    np.testing.assert_array_equal(clf._model.base.arrays.table, cli_table)

    loaded = Classifier.load(str(m))
    params = loaded.get_params()
    assert (params["solver"], params["cost"], params["learning_rate"], params["power_t"]) == ("dual", 0.5, None, None)
    with pytest.raises(ValueError, match="cannot be trained on"):
        loaded.partial_fit(lines[:5])
    again = Classifier(**params).fit(lines)  # scikit-learn's clone: the same options refit
    assert again.predict(lines).tolist() == clf.predict(lines).tolist()
    with pytest.raises(ValueError, match="--cost needs --solver dual"):
        Classifier(reduction="oaa", classes=K, cost=1.0).fit(lines)
