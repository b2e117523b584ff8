"""Filter tree (`-r filter`, VW --ect with no errors): bracket, training rule, kernel vs reference,
model files, CLI (docs/ALGORITHMS.md §3.2, §5, §9)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import model_io
from lomtree_cli.cli import main
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.kernels.trees import build_bracket, node_depths
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions.filter_tree import FilterTree
from lomtree_cli.reductions.random_tree import RandomTree
from tests.reference.linear_ref import RefLinear
from tests.reference.trees_ref import RefFilterTree, RefLinearLog1p, bracket, make_batch

BITS = 10


def make_tree(k, bits=BITS, loss="squared", lr=None, cls=FilterTree, seed=0):
    rcfg = ReductionConfig(name=cls.name, k=k, seed=seed)
    lcfg = LearnerConfig(loss=loss, learning_rate=lr)
    lin = LinearLearner(lcfg, bits, cls.n_models_for(rcfg), cls.slot_mode)
    return cls(rcfg, lin)


def w_of(tree, h, m):
    """Weight of feature h in regressor m (stride slots, §2.5)."""
    W = tree.learner.n_models
    return float(tree.learner.arrays.table[(h * W + m) & ((1 << tree.learner.bits) - 1), 0])


# -- structure -------------------------------------------------------------------------------

def test_bracket_k5_vector():
    parent, left, right = build_bracket(5)
    assert [(int(left[a]), int(right[a])) for a in range(5, 9)] == [(0, 1), (2, 3), (5, 6), (7, 4)]
    assert int(parent[4]) == 8 and int(parent[8]) == -1
    assert int(node_depths(parent).max()) == 3


@pytest.mark.parametrize("k", list(range(1, 40)) + [64, 65, 105, 1000, 1025])
def test_bracket_shape(k):
    parent, left, right = build_bracket(k)
    assert parent.shape == (2 * k - 1,) and parent.dtype == np.int32
    root = 2 * k - 2
    assert parent[root] == -1
    assert (left[:k] == -1).all() and (right[:k] == -1).all()
    for a in range(k, 2 * k - 1):
        assert parent[left[a]] == a and parent[right[a]] == a and left[a] < a and right[a] < a
    depth = node_depths(parent)
    assert depth[:k].max() <= math.ceil(math.log2(k)) if k > 1 else depth[0] == 0
    ref_parent, ref_children, ref_root = bracket(k)
    assert ref_root == root
    assert {int(a): (int(left[a]), int(right[a])) for a in range(k, 2 * k - 1)} == ref_children


# -- hand-worked 4-label example ----------------------------------------------------------------
# k = 4: node 4 = (leaf 0, leaf 1) -> regressor 0; node 5 = (2, 3) -> regressor 1;
# root 6 = (4, 5) -> regressor 2. Example "| a" = features h=7 and h=3 (values 1): from a zero
# state one update toward z moves both weights to z * 0.25346565 (§9 vector).

HA, HC = 7, 3
W1 = 0.25346565


def test_hand_worked_label3_trains_node5_then_root():
    t = make_tree(4)
    batch = make_batch([(3, 1.0, [HA, HC], [1.0, 1.0])])
    preds, _ = t.process(batch, np.ones(1, dtype=bool))
    assert preds[0] == 1  # untrained tree predicts label 1
    # leaf 2 is node 5's left child: target -1; it wins (score -0.507), so the root trains
    # with target +1 (node 5 is the root's right child) and wins too.
    for h in (HA, HC):
        assert w_of(t, h, 0) == 0.0
        assert w_of(t, h, 1) == pytest.approx(-W1, abs=1e-6)
        assert w_of(t, h, 2) == pytest.approx(W1, abs=1e-6)
    assert t.tree.counts.tolist() == [[0, 0], [1, 0], [0, 1]]
    assert t.predict(batch)[0] == 3


def test_hand_worked_filtering_stops_at_a_lost_match():
    # A: label 2 trains node 4 toward +1 and the root toward -1.
    # B: label 1, same x, tiny learning rate: node 4 learns toward -1 but its post-update score
    # stays > 0 (label 1 loses to label 2), so B never reaches the root.
    t = make_tree(4, lr=0.01)
    a = make_batch([(2, 1.0, [HA, HC], [1.0, 1.0])] * 3)
    t.process(a, np.ones(3, dtype=bool))
    root_before = (w_of(t, HA, 2), w_of(t, HC, 2))
    node4_before = w_of(t, HA, 0)
    assert node4_before > 0 and root_before[0] < 0
    b = make_batch([(1, 1.0, [HA, HC], [1.0, 1.0])])
    preds, _ = t.process(b, np.ones(1, dtype=bool))
    assert preds[0] == 2
    assert 0 < w_of(t, HA, 0) < node4_before  # trained toward -1, still positive
    assert (w_of(t, HA, 2), w_of(t, HC, 2)) == root_before  # filtered: root untouched
    assert t.tree.counts.tolist() == [[1, 3], [0, 0], [3, 0]]
    ref = RefFilterTree(4, RefLinear(bits=BITS, n_models=3, eta=0.01))
    ref.process([(2, 1.0, [HA, HC], [1.0, 1.0])] * 3 + [(1, 1.0, [HA, HC], [1.0, 1.0])], [True] * 4)
    assert ref.trace == [[(0, 1.0), (2, -1.0)]] * 3 + [[(0, -1.0)]]


# -- kernel == reference --------------------------------------------------------------------------

def streams(max_k=9):
    example = st.tuples(
        st.integers(1, max_k),
        st.sampled_from([1.0, 0.5, 2.0, 0.0]),
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from([1.0, -0.5, 0.5, 2.0, -1.0])),
                 min_size=1, max_size=6),
        st.booleans(),
    )
    return st.tuples(st.integers(1, max_k), st.sampled_from(["squared", "logistic", "hinge", "quantile"]),
                     st.lists(example, min_size=1, max_size=25))


def run_both(make, ref_make, k, loss, raw, bits=6):
    exs = [((y - 1) % k + 1, iw, [h for h, _ in f], [v for _, v in f]) for y, iw, f, _ in raw]
    train = np.array([tr for *_, tr in raw], dtype=bool)
    t = make(k, bits, loss)
    lin = RefLinearLog1p(bits=bits, n_models=max(1, k - 1), loss=loss)
    ref = ref_make(k, lin)
    half = len(exs) // 2
    preds = np.concatenate([t.process(make_batch(exs[:half]), train[:half])[0] if half else np.zeros(0, int),
                            t.process(make_batch(exs[half:]), train[half:])[0]])
    ref_preds = ref.process(exs, train)
    assert preds.tolist() == ref_preds
    np.testing.assert_allclose(t.learner.arrays.table[:, 0], lin.dense_w(), rtol=1e-5, atol=1e-6)
    return t, ref


@settings(deadline=None, max_examples=60)
@given(streams())
def test_kernel_matches_reference(data):
    k, loss, raw = data
    run_both(lambda k, b, loss: make_tree(k, b, loss), lambda k, lin: RefFilterTree(k, lin), k, loss, raw)


# -- learning ---------------------------------------------------------------------------------------

def separable(k, n, seed=0):
    """Class c has indicator feature 100+c (value 1) plus 3 random noise features of value 0.1."""
    rng = np.random.default_rng(seed)
    exs = []
    for _ in range(n):
        y = int(rng.integers(1, k + 1))
        noise = [int(h) for h in rng.integers(500, 900, size=3)]
        exs.append((y, 1.0, [100 + y] + noise + [1], [1.0, 0.1, 0.1, 0.1, 1.0]))
    return exs


@pytest.mark.parametrize("k", [2, 7, 16])
def test_zero_training_error_on_separable_data(k):
    t = make_tree(k, bits=14)
    batch = make_batch(separable(k, 300))
    for _ in range(4):
        t.process(batch, np.ones(len(batch), dtype=bool))
    assert (t.predict(batch) == batch.labels).all()


def test_k1_predicts_one_and_trains_nothing():
    t = make_tree(1)
    batch = make_batch([(1, 1.0, [1, 2], [1.0, 1.0])] * 3)
    preds, _ = t.process(batch, np.ones(3, dtype=bool))
    assert preds.tolist() == [1, 1, 1]
    assert not t.learner.arrays.table.any()
    assert t.inspect()["depth"] == 0 and t.inspect()["internal_nodes"] == 0


# -- model files ------------------------------------------------------------------------------------

def test_save_load_continue_equals_uninterrupted(tmp_path):
    k = 11
    exs = separable(k, 200, seed=3)
    a, b = make_batch(exs[:100]), make_batch(exs[100:])
    ones = np.ones(100, dtype=bool)
    full = make_tree(k)
    full.process(a, ones)
    p_full, _ = full.process(b, ones)
    part = make_tree(k)
    part.process(a, ones)
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, InputConfig(bits=BITS), part.learner, part)
    loaded = model_io.load_model(path).reduction
    assert isinstance(loaded, FilterTree)
    p_cont, _ = loaded.process(b, ones)
    assert p_cont.tolist() == p_full.tolist()
    assert np.array_equal(loaded.learner.arrays.table, full.learner.arrays.table)
    assert np.array_equal(loaded.tree.counts, full.tree.counts)


@pytest.mark.parametrize("n_features", [5, 400])
def test_small_prediction_models_skip_prefetching(tmp_path, n_features):
    """A prediction-only load of a model with at most PREFETCH_MIN_SLOTS nonzero weights turns the
    descent's prefetches off (hp[HP_PREFETCH] = 0); larger models and training loads keep them.
    Prefetches are hints: the predictions are the same either way."""
    from lomtree_cli.kernels import linear as K

    k = 13
    rng = np.random.default_rng(5)
    exs = [(int(y), 1.0, [int(h) for h in rng.choice(1 << 14, size=n_features, replace=False)],
            [0.5] * n_features) for y in rng.integers(1, k + 1, size=120)]
    batch = make_batch(exs)
    t = make_tree(k, bits=14)
    t.process(batch, np.ones(len(batch), dtype=bool))
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, InputConfig(bits=14), t.learner, t)
    nz = int(np.count_nonzero(t.learner.arrays.table[:, 0]))
    small = nz <= K.PREFETCH_MIN_SLOTS
    assert small == (n_features == 5)
    pred = model_io.load_model(path, predict_only=True, skip_unused=True)
    assert pred.learner.arrays.hp[K.HP_PREFETCH] == (0.0 if small else 1.0)
    assert model_io.load_model(path).learner.arrays.hp[K.HP_PREFETCH] == 1.0
    no = np.zeros(len(batch), dtype=bool)
    got = pred.reduction.process(batch, no)[0]
    pred.learner.arrays.hp[K.HP_PREFETCH] = 1.0 - pred.learner.arrays.hp[K.HP_PREFETCH]
    assert got.tolist() == pred.reduction.process(batch, no)[0].tolist() == t.process(batch, no)[0].tolist()


def test_load_rejects_a_wrong_tree():
    t = make_tree(6)
    st_ = t.state()
    bad = dict(st_)
    bad["left"] = st_["left"].copy()
    bad["left"][6], bad["right"] = st_["right"][6], st_["right"].copy()
    with pytest.raises(ValueError):
        make_tree(6).load_state(bad, {})
    with pytest.raises(ValueError):
        make_tree(7).load_state(st_, {})
    bad = dict(st_)
    bad["node_counts"] = -st_["node_counts"] - 1
    with pytest.raises(ValueError):
        make_tree(6).load_state(bad, {})


# -- CLI --------------------------------------------------------------------------------------------

def _vw_lines(exs):
    return "".join(f"{y} | f{h[0]} n{h[1]}:0.1\n" for y, _, h, _ in exs)


def test_cli_train_predict_inspect(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text(_vw_lines(separable(5, 200)))
    m = tmp_path / "m.lt"
    r = CliRunner().invoke(main, ["train", "-r", "filter", "-k", "5", "-b", "16", "--passes", "3", "--holdout-off",
                                  "--quiet", str(data), "-f", str(m)])
    assert r.exit_code == 0, r.output
    rep = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["predict", "-i", str(m), str(data), "-p", str(tmp_path / "p"), "--quiet",
                                  "--report", str(rep)])
    assert r.exit_code == 0, r.output
    assert json.loads(rep.read_text())["average_loss"] == 0.0
    r = CliRunner().invoke(main, ["inspect", str(m), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["reduction"] == "filter" and info["depth"] == 3 and info["leaves"] == 5
    assert info["internal_nodes"] == 4 and info["levels"][0]["examples"] > 0


def test_cli_rejects_label_above_k(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("1 | a\n5 | b\n")
    r = CliRunner().invoke(main, ["train", "-r", "filter", "-k", "4", "--quiet", str(data)])
    assert r.exit_code == 1
    assert "outside 1..4" in r.output


# -- exact shortcuts ----------------------------------------------------------------------------

@settings(deadline=None, max_examples=60)
@given(streams(max_k=12), st.sampled_from([4, 6, 8, 18]), st.sampled_from(["filter", "rtree"]),
       st.sampled_from([(0.5, False), (0.75, False), (0.5, True)]))
def test_shortcuts_are_bit_identical(data, bits, name, opt):
    """Reusing the prediction's scores (and, Filter tree, fusing re-scores into updates) gives the
    same bits as scoring every node afresh; small tables make duplicate and close slots common."""
    k, loss, raw = data
    power_t, sgd = opt
    exs = [((y - 1) % k + 1, iw, [h for h, _ in f], [v for _, v in f]) for y, iw, f, _ in raw]
    train = np.array([tr for *_, tr in raw], dtype=bool)
    cls = FilterTree if name == "filter" else RandomTree
    out = []
    for shortcuts in (True, False):
        rcfg = ReductionConfig(name=name, k=k, seed=3)
        lin = LinearLearner(LearnerConfig(loss=loss, power_t=power_t, sgd=sgd), bits, cls.n_models_for(rcfg),
                            cls.slot_mode)
        t = cls(rcfg, lin)
        t.shortcuts = shortcuts
        preds = t.process(make_batch(exs), train)[0]
        out.append((preds.tobytes(), t.tree.counts.tobytes(), lin.arrays.table.tobytes(), lin.arrays.S.tobytes(),
                    lin.arrays.hp.tobytes()))
    assert out[0] == out[1]
