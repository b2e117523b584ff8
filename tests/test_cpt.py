"""Conditional Probability Tree (-r cpt) and label-frequency table (-r table), docs/ALGORITHMS.md §3.5."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import model_io
from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.kernels import cpt_kernels as C
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions.cpt import ConditionalProbabilityTree, depth_bound
from lomtree_cli.reductions.table import LabelFrequencyTable

from .reference.cpt_ref import RefCPT

ALPHAS = (0.25, 0.5, 0.75, 1.0)


# -- helpers ---------------------------------------------------------------------------------------
def make_batch(examples):
    """examples: list of (label, iw, idx list, val list) -> ExampleBatch."""
    n = len(examples)
    indptr = np.zeros(n + 1, np.int64)
    idx, val = [], []
    for i, (_, _, ii, vv) in enumerate(examples):
        idx.extend(ii)
        val.extend(vv)
        indptr[i + 1] = len(idx)
    return ExampleBatch(labels=np.array([e[0] for e in examples], np.int64),
                        weights=np.array([e[1] for e in examples], np.float64),
                        indptr=indptr, indices=np.array(idx, np.int64), values=np.array(val, np.float32),
                        line_numbers=np.arange(1, n + 1, dtype=np.int64))


def make_cpt(bits=18, loss="squared", eta=None, **kw):
    lcfg = LearnerConfig(loss=loss, learning_rate=eta)
    rcfg = ReductionConfig(name="cpt", **kw)
    learner = LinearLearner(lcfg, bits, ConditionalProbabilityTree.n_models_for(rcfg),
                            ConditionalProbabilityTree.slot_mode)
    return ConditionalProbabilityTree(rcfg, learner)


def run(red, examples, chunk=None, train=True):
    preds, losses = [], []
    chunk = chunk or max(1, len(examples))
    for s in range(0, len(examples), chunk):
        b = make_batch(examples[s:s + chunk])
        tr = (b.labels > 0) & (b.weights > 0) & train
        p, lo = red.process(b, tr)
        preds.append(p)
        losses.append(lo)
    if not preds:
        return np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(preds), np.concatenate(losses)


def tree_arrays(red):
    return {k: v for k, v in red.state().items()}


def ref_tree_arrays(ref):
    keys = ("parent", "left", "right", "label", "model", "nleaves")
    return {k: np.array([nd[k] for nd in ref.nodes], np.int64) for k in keys}


def stream(rng, n, labels, bits=18, nfeat=6, dim=40):
    out = []
    for _ in range(n):
        y = int(labels[rng.integers(len(labels))])
        k = int(rng.integers(0, nfeat + 1))
        idx = list(rng.integers(0, dim, size=k) % (1 << bits))
        val = list(np.round(rng.normal(size=k), 3).astype(np.float32) + 0.01)
        idx.append(11650396 & ((1 << bits) - 1))  # constant
        val.append(1.0)
        out.append((y, 1.0, [int(i) for i in idx], [float(v) for v in val]))
    return out


def clustered_stream(rng, n, n_labels, dim=64):
    """Labels whose features are informative (each label has its own feature set)."""
    centers = rng.integers(0, 1 << 18, size=(n_labels, 4))
    out = []
    for _ in range(n):
        c = int(rng.integers(n_labels))
        idx = [int(h) for h in centers[c]] + [int(rng.integers(1 << 18)), 11650396 & ((1 << 18) - 1)]
        out.append((c + 1, 1.0, idx, [1.0] * len(idx)))
    return out


def leaf_probs(red, example):
    b = make_batch([example])
    n = max(1, red.n_labels)
    labs, probs, _ = red.predict_top(b, n)
    return labs[0], probs[0]


# -- kernel == reference -----------------------------------------------------------------------------
example_st = st.tuples(
    st.integers(0, 5),                                    # label index (0 -> unlabeled)
    st.sampled_from([1.0, 1.0, 0.5, 2.0]),
    st.lists(st.tuples(st.integers(0, 63), st.sampled_from([1.0, -0.5, 0.25, 3.0])), max_size=5),
)


@settings(deadline=None, max_examples=40)
@given(st.lists(example_st, max_size=30),
       st.lists(st.integers(1, 10**9), min_size=5, max_size=5, unique=True),
       st.sampled_from(ALPHAS + (0.0,)), st.sampled_from(["squared", "logistic"]),
       st.booleans(), st.sampled_from(["exact", "greedy"]), st.integers(1, 7))
def test_kernel_matches_reference(raw, pool, alpha, loss, random_insert, mode, chunk):
    bits = 6  # plenty of hash collisions between regressors
    examples = []
    for li, iw, feats in raw:
        y = 0 if li == 0 else pool[li - 1]
        examples.append((y, iw, [h for h, _ in feats], [v for _, v in feats]))
    red = make_cpt(bits=bits, loss=loss, cpt_alpha=alpha, cpt_random_insert=random_insert,
                   cpt_predict=mode, seed=7)
    ref = RefCPT(bits=bits, loss=loss, alpha=alpha, random_insert=random_insert, seed=7, predict=mode)
    preds, losses = run(red, examples, chunk=chunk)
    rp, rl = ref.process(examples)
    got, want = tree_arrays(red), ref_tree_arrays(ref)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    assert int(got["next_model"][0]) == ref.next_model
    np.testing.assert_array_equal(preds, np.array(rp, np.int64))
    np.testing.assert_allclose(losses, rl, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(red.learner.arrays.table[:, 0], ref.lin.dense_w(), rtol=1e-6, atol=1e-7)
    # probabilities and the exact top list
    for ex in examples[:5]:
        labs, probs = leaf_probs(red, ex)
        allp = ref.all_probs(ex[2], ex[3])
        if allp:
            assert math.isclose(probs.sum(), 1.0, rel_tol=1e-9)
            assert math.isclose(probs[0], max(allp.values()), rel_tol=1e-12)
            rtop = ref.top(ex[2], ex[3], len(allp))
            assert labs.tolist() == [a for a, _ in rtop]
            np.testing.assert_allclose(probs, [p for _, p in rtop], rtol=1e-12)


def test_leaf_probabilities_sum_to_one_and_argmax_is_exact():
    rng = np.random.default_rng(1)
    ex = clustered_stream(rng, 1500, 40)
    for mode in ("exact", "greedy"):
        red = make_cpt(cpt_predict=mode)
        run(red, ex, chunk=256)
        test = clustered_stream(rng, 60, 40)
        b = make_batch(test)
        labs, probs, p_true = red.predict_top(b, red.n_labels)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-9)
        assert np.all(np.diff(probs, axis=1) <= 0)  # sorted, non-increasing
        assert np.all(np.sort(labs, axis=1) == np.sort(labs[0]))  # every label exactly once
        # P(own label) agrees with its entry in the full list
        for i in range(len(test)):
            j = int(np.flatnonzero(labs[i] == test[i][0])[0])
            assert math.isclose(p_true[i], probs[i, j], rel_tol=1e-12)
        preds = red.predict(b)
        if mode == "exact":
            np.testing.assert_array_equal(preds, labs[:, 0])
        else:
            # greedy: a leaf, never more probable than the exact argmax
            l1, p1, _ = red.predict_top(b, 1)
            np.testing.assert_array_equal(l1[:, 0], preds)
            assert np.all(p1[:, 0] <= probs[:, 0] + 1e-15)
        top3 = red.predict_top(b, 3)
        np.testing.assert_array_equal(top3[0], labs[:, :3])
        np.testing.assert_allclose(top3[1], probs[:, :3])


def test_learns_and_beats_table():
    rng = np.random.default_rng(2)
    ex = clustered_stream(rng, 4000, 30)
    red = make_cpt()
    _, lo = run(red, ex, chunk=500)
    tab = LabelFrequencyTable(ReductionConfig(name="table"), LinearLearner(LearnerConfig(), 4, 1))
    _, tlo = run(tab, ex, chunk=500)
    assert lo[-1000:].mean() < 0.5 * tlo[-1000:].mean()
    assert red.n_labels == 30


# -- structure ----------------------------------------------------------------------------------------
def test_empty_single_and_unseen():
    red = make_cpt()
    b = make_batch([(5, 1.0, [1], [1.0]), (5, 1.0, [2], [1.0]), (9, 2.0, [3], [1.0]), (0, 1.0, [], [])])
    preds, losses = red.process(b, np.array([True, True, False, False]))
    assert preds.tolist() == [0, 5, 5, 5]
    assert losses.tolist() == [1.0, 0.0, 2.0, 0.0]  # empty tree; P=1 with one leaf; unseen -> iw
    assert red.n_labels == 1 and red.n_nodes == 1
    labs, probs, pt = red.predict_top(b, 3)
    assert labs[0].tolist() == [5, 0, 0] and probs[0].tolist() == [1.0, 0.0, 0.0]
    assert pt.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_chunk_size_one_equals_one_chunk():
    rng = np.random.default_rng(3)
    ex = stream(rng, 400, rng.integers(1, 10**9, size=70))
    a, b = make_cpt(), make_cpt()
    pa, la = run(a, ex, chunk=1)
    pb, lb = run(b, ex)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(la, lb)
    for k, v in a.state().items():
        np.testing.assert_array_equal(v, b.state()[k])
    np.testing.assert_array_equal(a.learner.arrays.table, b.learner.arrays.table)


def test_large_sparse_label_ids():
    rng = np.random.default_rng(4)
    labels = rng.choice(10**9, size=3000, replace=False) + 1
    ex = [(int(y), 1.0, [int(y) % 1000, 7], [1.0, 1.0]) for y in rng.permutation(np.repeat(labels, 2))]
    red = make_cpt(cpt_alpha=1.0)
    run(red, ex, chunk=2048)
    assert red.n_labels == 3000 and red.n_nodes == 5999 and red.next_model == 5999
    assert red.lmap.keys.shape[0] <= 8192  # proportional to labels seen, not to the ids
    assert red.tree.parent.shape[0] <= 8192
    assert red.depth() == math.ceil(math.log2(3000))
    keys, vals = C.map_items(red.lmap)
    assert sorted(keys.tolist()) == sorted(labels.tolist())
    assert np.all(red.tree.label[vals] == keys)


# -- depth guarantee ----------------------------------------------------------------------------------
def worst_case_depth(alpha, n):
    """Exact adversarial worst case: f(1)=0, f(m) = 1 + f(largest side reachable with m leaves)."""
    f = [0, 0]
    cl, cr = 1, 1
    big = {2: 1}
    while cl + cr < n:
        if (1 - alpha) * -1.0 + alpha * math.log2(cl / cr) > 0:
            cr += 1
        else:
            cl += 1
        big[cl + cr] = max(cl, cr)
    for m in range(2, n + 1):
        f.append(1 + f[big[m]])
    return f


@pytest.mark.parametrize("alpha", ALPHAS)
def test_depth_bound_formula_covers_worst_case(alpha):
    f = worst_case_depth(alpha, 3000)
    for m in range(2, 3001):
        assert f[m] <= depth_bound(alpha, m), m
    if alpha == 1.0:
        assert all(f[m] == math.ceil(math.log2(m)) for m in range(2, 3001))


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("force_p", [0.0, 1.0, None])
def test_depth_bound_adversarial_regressors(alpha, force_p):
    rng = np.random.default_rng(5)
    red = make_cpt(cpt_alpha=alpha)
    if force_p is not None:
        red.params[C.PAR_FORCE_P] = force_p  # regressors always prefer one side
    n_labels = 600
    order = list(range(1, n_labels + 1)) if force_p is not None else list(rng.permutation(n_labels) + 1)
    ex = [(int(y), 1.0, [int(y) % 50, 3], [1.0, 1.0]) for y in order]
    run(red, ex, chunk=97)
    assert red.n_labels == n_labels
    d = red.depth()
    assert d <= depth_bound(alpha, n_labels)
    if alpha == 1.0:
        assert d == math.ceil(math.log2(n_labels))
    if force_p is not None and alpha < 1.0:
        assert d > math.ceil(math.log2(n_labels))  # the adversary does push the tree off balance


@settings(deadline=None, max_examples=25)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=120), st.sampled_from(ALPHAS),
       st.sampled_from([0.0, 1.0, float("nan")]))
def test_depth_bound_hypothesis_orders(order, alpha, force_p):
    red = make_cpt(bits=8, cpt_alpha=alpha)
    red.params[C.PAR_FORCE_P] = force_p
    ex = [(y, 1.0, [y % 13, (y * 7) % 29], [1.0, -1.0]) for y in order]
    run(red, ex, chunk=16)
    n = red.n_labels
    assert n == len(set(order))
    assert red.depth() <= depth_bound(alpha, n)
    if alpha == 1.0:
        assert red.depth() == (math.ceil(math.log2(n)) if n > 1 else 0)
    # tree invariants: nleaves sums, parent links, one leaf per label
    st_ = red.state()
    from lomtree_cli.reductions.cpt import _validate_tree
    _validate_tree(st_, red.n_nodes, red.next_model)


def test_reference_adversary_pushing_deeper_side():
    """The reference with an adversary that always prefers the side with more leaves."""
    for alpha in ALPHAS:
        def choose(ref, a, p):
            nd = ref.nodes[a]
            return 0.0 if ref.nodes[nd["left"]]["nleaves"] >= ref.nodes[nd["right"]]["nleaves"] else 1.0
        ref = RefCPT(bits=8, alpha=alpha, choose_p=choose)
        for y in range(1, 301):
            ref.insert([y % 7], [1.0], y)
        assert ref.depth() <= depth_bound(alpha, 300)
        assert ref.depth() == worst_case_depth(alpha, 300)[300]


def test_random_insert_is_seeded():
    rng = np.random.default_rng(6)
    ex = stream(rng, 300, np.arange(1, 60))
    a = make_cpt(cpt_random_insert=True, seed=1)
    b = make_cpt(cpt_random_insert=True, seed=1)
    c = make_cpt(cpt_random_insert=True, seed=2)
    for r in (a, b, c):
        run(r, ex, chunk=50)
    np.testing.assert_array_equal(a.state()["parent"], b.state()["parent"])
    assert not np.array_equal(a.state()["label"], c.state()["label"])


# -- persistence ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("random_insert", [False, True])
def test_save_load_continue_exact(tmp_path, random_insert):
    rng = np.random.default_rng(8)
    ex = stream(rng, 600, np.arange(1, 81))
    first, second = ex[:300], ex[300:]  # the second half has labels unseen in the first
    assert set(e[0] for e in second) - set(e[0] for e in first)
    kw = dict(cpt_alpha=0.4, cpt_random_insert=random_insert, seed=3)
    full = make_cpt(**kw)
    pf, lf = run(full, ex, chunk=128)
    part = make_cpt(**kw)
    run(part, first, chunk=128)
    path = str(tmp_path / "cpt.lt")
    model_io.save_model(path, InputConfig(), part.learner, part)
    loaded = model_io.load_model(path).reduction
    # predictions identical after the reload
    b = make_batch(second)
    np.testing.assert_array_equal(loaded.predict(b), part.predict(b))
    for x, y in zip(loaded.predict_top(b, 4), part.predict_top(b, 4)):
        np.testing.assert_array_equal(x, y)
    p2, l2 = run(loaded, second, chunk=128)
    np.testing.assert_array_equal(p2, pf[300:])
    np.testing.assert_array_equal(l2, lf[300:])
    for k, v in full.state().items():
        np.testing.assert_array_equal(v, loaded.state()[k])
    np.testing.assert_array_equal(full.learner.arrays.table, loaded.learner.arrays.table)
    n = full.next_model
    np.testing.assert_array_equal(full.learner.arrays.S[:n], loaded.learner.arrays.S[:n])


def test_load_rejects_inconsistent_arrays():
    red = make_cpt()
    run(red, stream(np.random.default_rng(9), 100, np.arange(1, 12)))
    good, meta = red.state(), red.meta()
    bad_cases = []
    for name, fn in [("parent", lambda a: a.__setitem__(1, 2)), ("nleaves", lambda a: a.__setitem__(0, 99)),
                     ("label", lambda a: a.__setitem__(-1, a[-2])), ("left", lambda a: a.__setitem__(0, 0))]:
        arrs = {k: v.copy() for k, v in good.items()}
        fn(arrs[name])
        bad_cases.append(arrs)
    arrs = {k: v.copy() for k, v in good.items()}
    arrs["model"] = arrs["model"].astype(np.int32)
    bad_cases.append(arrs)
    for arrs in bad_cases:
        with pytest.raises(ValueError):
            make_cpt().load_state(arrs, meta)
    fresh = make_cpt()
    fresh.learner.ensure_models(red.next_model)
    fresh.load_state(good, meta)
    assert fresh.n_labels == red.n_labels


def test_inspect_reports_levels():
    red = make_cpt(cpt_alpha=1.0)
    run(red, stream(np.random.default_rng(10), 300, np.arange(1, 21)))
    info = red.inspect()
    assert info["labels"] == 20 and info["nodes"] == 39 and info["depth"] == 5
    assert info["depth"] == info["balanced_depth"] == 5
    assert sum(lv["leaves"] for lv in info["levels"]) == 20
    assert info["levels"][0]["max_larger_side_fraction"] == 0.5  # 10 | 10
    json.dumps(info)


# -- CLI ----------------------------------------------------------------------------------------------
def _write_vw(path, examples):
    with open(path, "w") as f:
        for y, _, idx, val in examples:
            f.write(f"{y} | " + " ".join(f"{h}:{v}" for h, v in zip(idx, val)) + "\n")


def test_cli_probabilities_topk_and_inspect(tmp_path):
    from lomtree_cli.cli import main

    rng = np.random.default_rng(11)
    ex = [(y, w, i[:-1], v[:-1]) for y, w, i, v in stream(rng, 200, [3, 17, 1000000000, 42])]
    train = tmp_path / "train.vw"
    _write_vw(train, ex)
    test = tmp_path / "test.vw"
    with open(test, "w") as f:
        f.write("17 | 1:1 2:1\n| 3:1\n99 | 4:1\n")
    model = str(tmp_path / "m.lt")
    runner = CliRunner()
    r = runner.invoke(main, ["train", "-r", "cpt", str(train), "-f", model, "--quiet"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["predict", "-i", model, str(test), "-p", "-", "--probabilities", "--quiet"])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().split("\n")
    assert len(lines) == 3
    assert lines[0].split()[-1].startswith("p(17)=") and lines[2].endswith("p(99)=0.000000")
    assert len(lines[1].split()) == 1  # unlabeled: only the prediction
    r = runner.invoke(main, ["predict", "-i", model, str(test), "-p", "-", "--top-k", "4", "--quiet"])
    lines = r.output.strip().split("\n")
    for ln in lines:
        pairs = [p.split(":") for p in ln.split()]
        assert len(pairs) == 4
        assert sorted(int(a) for a, _ in pairs) == [3, 17, 42, 1000000000]
        ps = [float(b) for _, b in pairs]
        assert ps == sorted(ps, reverse=True) and abs(sum(ps) - 1) < 1e-5
    rep = tmp_path / "r.json"
    r = runner.invoke(main, ["predict", "-i", model, str(test), "--report", str(rep), "--quiet"])
    assert r.exit_code == 0, r.output
    rj = json.load(open(rep))
    assert rj["examples"] == 3 and rj["average_zero_one_loss"] is not None
    r = runner.invoke(main, ["inspect", model, "--json"])
    info = json.loads(r.output)
    assert info["labels"] == 4 and info["depth"] == 2


# -- table baseline -------------------------------------------------------------------------------------
def make_table():
    rcfg = ReductionConfig(name="table")
    return LabelFrequencyTable(rcfg, LinearLearner(LearnerConfig(), 4, LabelFrequencyTable.n_models_for(rcfg)))


@settings(deadline=None, max_examples=30)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 5, 10**9, 77]), st.sampled_from([1.0, 0.5, 3.0])),
                max_size=60), st.integers(1, 9))
def test_table_matches_counting(raw, chunk):
    tab = make_table()
    ex = [(y, w, [], []) for y, w in raw]
    preds, losses = run(tab, ex, chunk=chunk)
    counts, total = {}, 0.0
    for i, (y, w) in enumerate(raw):
        best = min(counts, key=lambda a: (-counts[a], a)) if counts else 0
        assert preds[i] == best
        P = counts.get(y, 0.0) / total if total > 0 else 0.0
        assert math.isclose(losses[i], w * (1 - P) ** 2 if y > 0 else 0.0, rel_tol=1e-12, abs_tol=1e-15)
        if y > 0:
            counts[y] = counts.get(y, 0.0) + w
            total += w
    if counts:
        labs, probs, _ = tab.predict_top(make_batch([(0, 1.0, [], [])]), len(counts) + 2)
        want = sorted(counts, key=lambda a: (-counts[a], a))
        assert labs[0, :len(want)].tolist() == want
        assert math.isclose(probs[0].sum(), 1.0)


def test_table_save_load(tmp_path):
    tab = make_table()
    ex = [(int(y), 1.0, [], []) for y in np.random.default_rng(12).integers(1, 40, size=300)]
    run(tab, ex[:150], chunk=7)
    path = str(tmp_path / "t.lt")
    model_io.save_model(path, InputConfig(bits=4), tab.learner, tab)
    loaded = model_io.load_model(path).reduction
    p1, l1 = run(tab, ex[150:])
    p2, l2 = run(loaded, ex[150:])
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(l1, l2)
    assert loaded.inspect()["labels"] == tab.n_labels
    with pytest.raises(ValueError):
        make_table().load_state({"labels": np.array([1, 1]), "counts": np.array([1.0, 2.0])},
                                {"total": 3.0, "best": 1})


# -- data sets (slow) ------------------------------------------------------------------------------------
SECTOR = "bench/data/sector.train.vw"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SECTOR), reason="bench data not prepared")
def test_sector_cpt_beats_table(tmp_path):
    from lomtree_cli.driver import RunOptions, train

    reports = {}
    for red in ("cpt", "table"):
        rep = str(tmp_path / f"{red}.json")
        opts = RunOptions(inputs=[SECTOR], quiet=True, report=rep)
        train(InputConfig(), LearnerConfig(), ReductionConfig(name=red), opts)
        reports[red] = json.load(open(rep))
    assert reports["cpt"]["average_loss"] < reports["table"]["average_loss"] - 0.02


def test_cli_default_power_t_is_the_measured_best(tmp_path):
    """``-r cpt`` defaults to power_t 0.75 (better on 5 of 6 benchmark tasks, bench/notes/lomtree.md);
    the Filter tree keeps 0.5, and an explicit --power-t wins."""
    from lomtree_cli.cli import main

    data = tmp_path / "d.vw"
    data.write_text("".join(f"{1 + i % 3} | a{i % 3} b{i % 5}\n" for i in range(30)))
    m = str(tmp_path / "m.lt")
    for args, want in ((["-r", "cpt"], 0.75), (["-r", "cpt", "--power-t", "0.5"], 0.5),
                       (["-r", "filter", "-k", "3"], 0.5)):
        r = CliRunner().invoke(main, ["train", *args, "-b", "12", str(data), "-f", m, "--quiet"])
        assert r.exit_code == 0, r.output
        assert model_io.load_model(m).learner.config.power_t == want
