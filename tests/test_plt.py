"""Probabilistic label tree: kernels against the pure-Python reference, the k-means label tree,
the prefix buffer, top-k/probabilities and the label tree's invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.config import LearnerConfig, ReductionConfig
from lomtree_cli.errors import ConfigError
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions.plt import ProbabilisticLabelTree, _validate, kmeans_tree

from .helpers import make_batch
from .reference.plt_ref import RefPLT, centroids


def make_plt(k, bits=12, loss="squared", **kw):
    lcfg = LearnerConfig(loss=loss)
    rcfg = ReductionConfig(name="plt", k=k, **kw)
    learner = LinearLearner(lcfg, bits, ProbabilisticLabelTree.n_models_for(rcfg), ProbabilisticLabelTree.slot_mode)
    return ProbabilisticLabelTree(rcfg, learner)


def stream(k, n, seed, n_feat=4, vocab=40):
    """(label, iw, idx, val) examples: each label has a few typical features plus noise."""
    rng = np.random.default_rng(seed)
    proto = {c: rng.integers(0, vocab, size=3) for c in range(1, k + 1)}
    out = []
    for _ in range(n):
        y = int(rng.integers(1, k + 1))
        idx = [int(h) for h in proto[y][: rng.integers(1, 4)]] + [int(h) for h in rng.integers(0, vocab, n_feat)]
        val = [float(np.float32(v)) for v in rng.uniform(0.2, 1.5, len(idx))]
        out.append((y, 1.0, idx + [4000], val + [1.0]))
    return out


def run(red, examples, chunk=None):
    preds = []
    chunk = chunk or len(examples)
    for s in range(0, len(examples), chunk):
        part = examples[s:s + chunk]
        b = make_batch([list(zip(e[2], e[3])) for e in part], [e[0] for e in part], [e[1] for e in part], bits=12)
        p, _ = red.process(b, (b.labels > 0) & (b.weights > 0))
        preds.extend(p.tolist())
    red.end_pass()
    return preds


def tree_of(red):
    n = red.n_nodes
    t = red.tree
    return {v: (int(t.parent[v]), int(t.label[v]), [int(c) for c in t.child[v, :t.nchild[v]]]) for v in range(n)}


def ref_tree(ref):
    return {v: (ref.parent[v], ref.label[v], list(ref.children[v])) for v in ref.parent}


# -- kernels against the reference --------------------------------------------------------------
@pytest.mark.parametrize("group", [2, 5])
def test_block_groups_match_reference(group):
    """With G blocks a feature region (``--block-group G``) the slots move, nothing else: the
    kernels' predictions and tree equal the reference's slot formula with the same G."""
    ex = stream(k=11, n=300, seed=group)
    ref = RefPLT(bits=12, arity=3, beam=2, gamma=0.5, negatives=True, group=group)
    want = ref.process(ex)
    red = make_plt(11, arity=3, beam=2, tree_buffer=0, path_weight=0.5, leaf_negatives=True, block_group=group)
    assert run(red, ex, 7) == want
    assert tree_of(red) == ref_tree(ref)


def test_block_group_default_is_the_balanced_trees_blocks():
    """0 (the default): the internal nodes of a balanced tree of k leaves at arity M, so a
    feature's region holds the tree and no more; never more than the table's 2^bits / W."""
    from lomtree_cli.reductions.plt import block_group

    assert block_group(0, 983, 32, 32, 24) == 32  # Delicious
    assert block_group(0, 105, 32, 32, 24) == 4  # Sector
    assert block_group(0, 14, 32, 32, 24) == 1  # Yeast: one node
    assert block_group(0, 20001, 8, 8, 24) == 2858
    assert block_group(0, 20001, 8, 8, 12) == 512  # clamped to the table
    assert block_group(7, 983, 32, 32, 24) == 7
    with pytest.raises(ConfigError, match="--block-group must be >= 0"):
        block_group(-1, 983, 32, 32, 24)


@pytest.mark.parametrize("arity,beam,gamma,negatives", [(2, 1, 1.0, False), (3, 2, 0.5, True), (4, 3, 0.0, True),
                                                        (5, 3, None, True), (3, 4, 1.0, False)])
def test_online_tree_matches_reference(arity, beam, gamma, negatives):
    """No buffer: every label is inserted online (push-down splits included at arity 2-3);
    progressive predictions and the final tree equal the reference's, chunk by chunk or whole
    (without leaf negatives and with a fixed gamma, a trained example is predicted greedily)."""
    ex = stream(k=11, n=300, seed=arity)
    ref = RefPLT(bits=12, arity=arity, beam=beam, gamma=gamma, negatives=negatives)
    want = ref.process(ex)
    for chunk in (None, 7):
        red = make_plt(11, arity=arity, beam=beam, tree_buffer=0, path_weight=-1.0 if gamma is None else gamma,
                       leaf_negatives=negatives)
        assert run(red, ex, chunk) == want
        assert tree_of(red) == ref_tree(ref)
        assert red.gstats.tolist() == ref.gstats  # (all zero unless the path weight is chosen)
        assert red.meta()["path_weight"] == ref.gamma
    assert red.n_labels == 11


@pytest.mark.parametrize("buf", [0, 120])
@pytest.mark.parametrize("gamma,negatives", [(1.0, False), (None, False), (0.5, True)])
def test_unread_progressive_predictions_change_nothing_else(buf, gamma, negatives):
    """``set_need_predictions(False)`` (``train --quiet``): the same tree and weights bit for bit
    and the same predictions of held-out examples (every 5th here); trained examples are not
    predicted (0) exactly when their beam serves nothing else (no negatives, a fixed path weight)."""
    ex = stream(k=11, n=400, seed=7)
    reds, preds = [], []
    for need in (True, False):
        red = make_plt(11, arity=3, beam=2, tree_buffer=buf, path_weight=-1.0 if gamma is None else gamma,
                       leaf_negatives=negatives)
        red.set_need_predictions(need)
        out = []
        for s in range(0, len(ex), 50):
            part = ex[s:s + 50]
            b = make_batch([list(zip(e[2], e[3])) for e in part], [e[0] for e in part], bits=12)
            train = np.arange(s, s + len(part)) % 5 != 0
            out.extend(red.process(b, train)[0].tolist())
        reds.append(red)
        preds.append(np.array(out))
    assert tree_of(reds[0]) == tree_of(reds[1])
    np.testing.assert_array_equal(reds[0].learner.arrays.table.view(np.uint32),
                                  reds[1].learner.arrays.table.view(np.uint32))
    held = np.arange(len(ex)) % 5 == 0
    np.testing.assert_array_equal(preds[0][held], preds[1][held])
    late = ~held & (np.arange(len(ex)) > buf + 1)  # (buffered ones are predicted by label frequency; 0 by an empty tree)
    skipped = gamma is not None and not negatives
    assert (preds[1][late] == 0).all() == skipped and (preds[0][late] > 0).all()
    if not skipped:
        np.testing.assert_array_equal(preds[0], preds[1])


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("arity,beam,gamma", [(2, 1, 1.0), (3, 2, 0.5), (4, 3, 0.0), (5, 2, 0.25)])
def test_predictions_without_training_match_reference(loss, arity, beam, gamma):
    """Prediction alone (the beam skips children that cannot enter it and keeps one leaf per
    frontier node) gives the reference's full-beam argmax, for both links."""
    ex = stream(k=13, n=300, seed=arity + 10)
    ref = RefPLT(bits=12, loss=loss, arity=arity, beam=beam, gamma=gamma, negatives=True)
    ref.process(ex)
    red = make_plt(13, loss=loss, arity=arity, beam=beam, tree_buffer=0, path_weight=gamma, leaf_negatives=True)
    run(red, ex)
    test = stream(k=13, n=200, seed=arity + 20)
    b = make_batch([list(zip(e[2], e[3])) for e in test], [e[0] for e in test], bits=12)
    assert red.predict(b).tolist() == [ref.predict(idx, val) for _, _, idx, val in test]


def test_buffered_tree_is_kmeans_of_reference_centroids():
    """With a buffer: predictions by label frequency while buffering; the tree is kmeans_tree of
    the centroids (computed here independently of the sketch kernel); then training and the
    rest of the stream equal the reference started from that tree and the buffered examples."""
    k, nb = 20, 120
    ex = stream(k=k, n=400, seed=5)
    red = make_plt(k, arity=4, beam=3, tree_buffer=nb, path_weight=0.5, leaf_negatives=True)
    got = run(red, ex, chunk=50)
    # frequency-table predictions for the buffered prefix
    counts, want = {}, []
    for y, _, _, _ in ex[:nb]:
        want.append(max(counts, key=lambda c: (counts[c], -c)) if counts else 0)
        counts[y] = counts.get(y, 0) + 1
    assert got[:nb] == want
    # the structure
    labels = sorted({e[0] for e in ex[:nb]})
    X = np.array(centroids(ex[:nb], labels, d_bits=10))
    X -= X.mean(axis=0)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)
    parent, label = kmeans_tree(np.array(labels), X, 4, seed=0)
    ref = RefPLT(bits=12, arity=4, beam=3, gamma=0.5, negatives=True)
    ref.set_structure(parent, label)
    for y, iw, idx, val in ex[:nb]:
        ref.learn(idx, val, y, iw, ref.candidates(idx, val))
    assert got[nb:] == ref.process(ex[nb:])
    assert tree_of(red) == ref_tree(ref)


def test_top_k_and_probabilities_match_reference():
    ex = stream(k=9, n=200, seed=3)
    red = make_plt(9, arity=3, beam=2, tree_buffer=0, path_weight=0.5, leaf_negatives=True)
    ref = RefPLT(bits=12, arity=3, beam=2, gamma=0.5, negatives=True)
    run(red, ex)
    ref.process(ex)
    test = stream(k=9, n=30, seed=4)
    b = make_batch([list(zip(e[2], e[3])) for e in test], [e[0] for e in test], bits=12)
    labs, probs, p_true = red.predict_top(b, 4)
    for i, (y, _, idx, val) in enumerate(test):
        r = ref.ranked(idx, val, beam=4)[:4]
        assert labs[i, :len(r)].tolist() == [ref.label[c] for c, _, _ in r]
        np.testing.assert_allclose(probs[i, :len(r)], [np.exp(lp) for _, lp, _ in r], rtol=1e-9)
        leaf = ref.leaf_of[y]
        lp, a = 0.0, leaf
        while ref.parent[a] >= 0:
            lp += ref.logp(idx, val, a)
            a = ref.parent[a]
        assert p_true[i] == pytest.approx(np.exp(lp), rel=1e-9)
    top1, _, _ = red.predict_top(b, 1)  # within the beam width: the prediction itself
    assert top1[:, 0].tolist() == red.predict(b).tolist()


# -- the label tree ---------------------------------------------------------------------------
def _greedy_walk(S, cap):
    """The balanced assignment by its definition: every (item, cluster) pair, most similar first
    (ties: the smaller flat index ``item * m + cluster``), gives the item the cluster while it is
    unassigned and the cluster has room."""
    n, m = S.shape
    pairs = sorted(range(n * m), key=lambda f: (-S[f // m, f % m], f))
    out, cap = [-1] * n, list(cap)
    for f in pairs:
        i, c = divmod(f, m)
        if out[i] < 0 and cap[c] > 0:
            out[i], cap[c] = c, cap[c] - 1
    return out, cap


@settings(deadline=None, max_examples=60)
@given(n=st.integers(1, 60), m=st.integers(1, 9), levels=st.integers(1, 4), seed=st.integers(0, 10**6),
       spare=st.integers(-3, 3))
def test_greedy_balanced_assign_is_the_sorted_walk(n, m, levels, seed, spare):
    """The heap's assignment equals the walk over all pairs, ties (few similarity levels, signed
    zeros) and clusters short of room included."""
    from lomtree_cli.kernels.plt_kernels import greedy_balanced_assign
    rng = np.random.default_rng(seed)
    S = rng.integers(-levels, levels + 1, size=(n, m)).astype(np.float64) / levels
    S[rng.random((n, m)) < 0.1] = -0.0
    cap = np.full(m, n // m, dtype=np.int64)
    cap[: n % m] += 1
    cap[rng.integers(m)] += spare
    cap = np.maximum(cap, 0)
    got = np.empty(n, dtype=np.int64)
    left = cap.copy()
    greedy_balanced_assign(S, left, got)
    want, want_cap = _greedy_walk(S, cap)
    assert got.tolist() == want
    assert left.tolist() == want_cap


@settings(deadline=None, max_examples=25)
@given(n=st.integers(1, 300), M=st.integers(2, 17), seed=st.integers(0, 5))
def test_kmeans_tree_is_balanced_and_complete(n, M, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    labels = rng.permutation(np.arange(1, n + 1) * 3)
    parent, label = kmeans_tree(labels, X, M, seed)
    nodes = parent.shape[0]
    kids = {v: [] for v in range(nodes)}
    for v in range(1, nodes):
        assert 0 <= parent[v] < v
        kids[parent[v]].append(v)
    assert sorted(label[label > 0].tolist()) == sorted(labels.tolist())
    depth = {0: 0}
    for v in range(1, nodes):
        depth[v] = depth[parent[v]] + 1
    leaf_depths = {depth[v] for v in range(nodes) if label[v] > 0}
    want = 1
    while M ** want < n:
        want += 1
    assert max(leaf_depths) == want  # the minimal depth of an M-ary tree with n leaves
    for v, c in kids.items():
        assert len(c) <= M
        if c and label[v] == 0:
            sizes = [sum(1 for u in range(nodes) if label[u] > 0 and _under(parent, u, w)) for w in c]
            if all(label[w] == 0 for w in c):
                assert max(sizes) - min(sizes) <= 1


def _under(parent, u, w):
    while u >= 0:
        if u == w:
            return True
        u = parent[u]
    return False


@settings(deadline=None, max_examples=20)
@given(k=st.integers(1, 40), arity=st.integers(2, 5), buf=st.sampled_from([0, 10, 1000]), seed=st.integers(0, 9))
def test_tree_stays_valid_over_labels_seen(k, arity, buf, seed):
    """After any stream: one tree, each label seen in exactly one leaf, nothing else a leaf, no
    node over its arity, and a save/load round trip validates."""
    ex = stream(k=k, n=150, seed=seed)
    red = make_plt(k, arity=arity, beam=2, tree_buffer=buf)
    run(red, ex, chunk=13)
    n = red.n_nodes
    t = red.tree
    _validate(t.child[:n], t.nchild[:n], t.parent[:n], t.label[:n], k)
    leaves = t.label[:n][t.label[:n] > 0]
    assert sorted(leaves.tolist()) == sorted({e[0] for e in ex})
    assert all(t.leaf_of[y] >= 0 and t.label[t.leaf_of[y]] == y for y in leaves)
    assert int(t.nleaves[0]) == leaves.size
    red2 = make_plt(k, arity=arity, beam=2, tree_buffer=buf)
    red2.learner.ensure_models(red.learner.n_models)
    red2.load_state(red.state(), red.meta())
    assert tree_of(red2) == tree_of(red)


@pytest.mark.parametrize("k,arity", [(200, 3), (300, 4), (500, 8)])
def test_online_insertion_keeps_the_tree_shallow(k, arity):
    """Every label inserted online (no buffer): the tree stays within two levels of the balanced
    depth. Ranking subtrees by probability alone made chains here (depth 29, 24 and 17: the fresh
    nodes of earlier insertions draw the next labels and each push-down adds a level)."""
    red = make_plt(k, arity=arity, beam=1, tree_buffer=0, path_weight=1.0, leaf_negatives=False)
    run(red, stream(k=k, n=3 * k, seed=1), chunk=100)
    leaves = red.tree.label[:red.n_nodes] > 0
    assert red.depths()[leaves].max() <= math.ceil(math.log(int(leaves.sum()), arity)) + 2


@pytest.mark.parametrize("bad", ["cycle", "two_parents", "mixed", "label_range", "dup_label"])
def test_corrupt_structure_refused(bad):
    red = make_plt(6, arity=3, beam=2, tree_buffer=0)
    run(red, stream(k=6, n=60, seed=1))
    st_ = {k: v.copy() for k, v in red.state().items()}
    leaves = np.flatnonzero(st_["label"] > 0)
    internal = np.flatnonzero((st_["label"] == 0) & (np.arange(len(st_["label"])) > 0))
    if bad == "cycle":
        st_["parent"][internal[0]] = internal[-1] if internal.size > 1 else leaves[0]
    elif bad == "two_parents":
        st_["child"][0, 0] = st_["child"][0, 1]
    elif bad == "mixed":
        st_["label"][internal[0]] = 5 if internal.size else 0
    elif bad == "label_range":
        st_["label"][leaves[0]] = 7
    else:
        st_["label"][leaves[0]] = st_["label"][leaves[1]]
    with pytest.raises(ValueError):
        make_plt(6, arity=3, beam=2).load_state(st_, red.meta())


def test_separable_stream_learned():
    """A separable stream (each label has its own feature): the pure PLT (no leaf negatives,
    path weight 1) makes no error after the buffer; the defaults (one-against-some leaves) stay
    above 98.5% (measured 98.5-100% per 1,000 examples: the leaf negatives cost a few mistakes
    here, see bench/notes/plt.md)."""
    rng = np.random.default_rng(0)
    ex = [(int(y), 1.0, [int(y) * 7, 4000], [1.0, 1.0]) for y in rng.integers(1, 51, 4000)]
    pure = run(make_plt(50, arity=8, beam=4, tree_buffer=500, leaf_negatives=False, path_weight=1.0), ex)
    assert all(p == e[0] for p, e in zip(pure[-2000:], ex[-2000:]))
    default = run(make_plt(50, arity=8, beam=4, tree_buffer=500), ex)
    assert np.mean([p == e[0] for p, e in zip(default[-1000:], ex[-1000:])]) >= 0.985


def test_feature_cap_of_the_buffer_is_exact_and_chunk_independent(monkeypatch):
    """The buffer stops at the last example that fits under the feature cap, whatever the chunk
    size: same predictions and tree with chunks of 7 and one chunk."""
    import lomtree_cli.reductions.plt as plt_mod

    monkeypatch.setattr(plt_mod, "BUFFER_FEATURES", 200)
    ex = stream(k=10, n=150, seed=2)
    runs = []
    for chunk in (None, 7):
        red = make_plt(10, arity=3, beam=2, tree_buffer=1000)
        held = []
        orig = red.flush
        red.flush = lambda: (held.append(red.buffered_features), held.append(red.buffered), orig())[-1]
        runs.append((run(red, ex, chunk), tree_of(red)))
        feats = np.cumsum([len(e[2]) for e in ex])
        assert held[0] <= 200 and held[0] == feats[held[1] - 1] and feats[held[1]] > 200
    assert runs[0] == runs[1]


def test_model_of_the_old_layout_is_refused_by_name():
    """A PLT saved before the block layout (no ``plt_format`` in its meta: layout 1) is refused
    with a message naming the layout, not read with its regressors in the wrong slots."""
    red = make_plt(6, arity=3, beam=2, tree_buffer=0)
    run(red, stream(k=6, n=60, seed=1))
    meta = red.meta()
    del meta["plt_format"]
    with pytest.raises(ValueError, match="layout 1"):
        make_plt(6, arity=3, beam=2).load_state(red.state(), meta)


@pytest.mark.parametrize("chunk", [None, 9])
def test_chosen_path_weight_is_saved_and_used(chunk):
    """With the path weight chosen, the saved gamma is the argmax of the saved counts, a loaded
    model predicts as the trained one, and a fixed --path-weight keeps no counts."""
    ex = stream(k=12, n=400, seed=7)
    red = make_plt(12, arity=4, beam=3, tree_buffer=100)
    run(red, ex, chunk)
    from lomtree_cli.kernels.plt_kernels import GAMMAS
    assert red.gstats.sum() > 0
    assert red.meta()["path_weight"] == GAMMAS[int(np.argmax(red.gstats))]
    red2 = make_plt(12, arity=4, beam=3, tree_buffer=100)
    red2.learner.ensure_models(red.learner.n_models)
    red2.learner.load_state(red.learner.state(), red.learner.meta())
    red2.load_state(red.state(), red.meta())
    b = make_batch([list(zip(e[2], e[3])) for e in ex[:50]], [e[0] for e in ex[:50]], bits=12)
    assert red2.predict(b).tolist() == red.predict(b).tolist()
    fixed = make_plt(12, arity=4, beam=3, tree_buffer=100, path_weight=0.5)
    run(fixed, ex, chunk)
    assert fixed.gstats.sum() == 0 and fixed.meta()["path_weight"] == 0.5


def test_quiet_report_has_no_loss_of_skipped_predictions(tmp_path):
    """``train --quiet --report``: where plt skips the trained examples' predictions (no negatives,
    a fixed path weight) the report says null, not the loss of unmade predictions; with the
    progress table, or with leaf negatives (the beam runs anyway), the progressive 0/1 loss."""
    import json

    from .helpers import cli, separable_lines

    data = tmp_path / "t.vw"
    data.write_text("\n".join(separable_lines(9, 600, seed=3, noise_feats=2)) + "\n")
    losses = {}
    for name, extra in (("quiet", ["--quiet"]), ("table", []), ("negatives", ["--quiet", "--leaf-negatives"])):
        rep = tmp_path / f"{name}.json"
        opts = ["--no-leaf-negatives"] if name != "negatives" else []
        code, _, err = cli("train", data, "-k", 9, "-r", "plt", "--path-weight", 1, "--tree-buffer", 50, *opts,
                           "--report", rep, *extra)
        assert code == 0, err
        losses[name] = json.loads(rep.read_text())["average_loss"]
    assert losses["quiet"] is None
    assert 0.0 <= losses["table"] < 0.5 and 0.0 <= losses["negatives"] < 0.5


def test_buffered_examples_count_by_their_replay_into_the_tree(tmp_path):
    """The examples held for the tree are shown (table, ``-p``) with their label-frequency
    predictions, but the losses count their replay into the built tree, each predicted before it
    is learned: on a stream whose label is one of its features, a run shorter than the buffer
    reports about the loss of a run without a buffer, not a frequency table's (6/7 wrong here),
    and so does the first pass's holdout loss. The summary and the report say how many examples
    were held: all of a short run, the buffer's size of a longer one, none without a buffer (or
    at ``predict``)."""
    import json

    from click.testing import CliRunner

    from lomtree_cli.cli import main

    data = tmp_path / "s.vw"
    data.write_text("".join(f"{1 + i % 7} |a f{i % 7} g{i % 3}\n" for i in range(300)))
    got = {}
    for buf, held in (("1000", 300), ("120", 120), ("0", None)):
        rep, preds = tmp_path / f"r{buf}.json", tmp_path / f"p{buf}.txt"
        r = CliRunner().invoke(main, ["train", "-r", "plt", "-k", "7", "-b", "16", str(data), "--tree-buffer", buf,
                                      "-f", str(tmp_path / "m.lt"), "--report", str(rep), "-p", str(preds)])
        assert r.exit_code == 0, r.output
        got[buf] = json.loads(rep.read_text())
        assert got[buf].get("label_frequency_predictions") == held
        assert (f"held for the tree (--tree-buffer) = {held} examples" in r.output) == (held is not None)
        if held == 300:  # what -p shows: the frequency table's predictions, wrong 6 times in 7
            shown = [int(x) for x in preds.read_text().split()]
            assert np.mean([p != 1 + i % 7 for i, p in enumerate(shown)]) > 0.8
    assert got["1000"]["average_loss"] < 0.15 and got["0"]["average_loss"] < 0.15
    assert abs(got["120"]["average_loss"] - got["0"]["average_loss"]) < 0.1
    r = CliRunner().invoke(main, ["train", "-r", "plt", "-k", "7", "-b", "16", str(data), "--passes", "2", "-c",
                                  "-f", str(tmp_path / "m2.lt"), "--report", str(rep)])
    assert r.exit_code == 0, r.output
    assert json.loads(rep.read_text())["holdout_losses"][0] < 0.2
    r = CliRunner().invoke(main, ["predict", "-i", str(tmp_path / "m.lt"), str(data), "--report", str(rep)])
    assert r.exit_code == 0 and "label_frequency_predictions" not in json.loads(rep.read_text())


# -- the buffer's replay in a random order (--shuffle-buffer) -------------------------------------
def _multilabel_batch(rows, sets, first_line):
    b = make_batch(rows, [1] * len(rows), bits=12)
    b.label_ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    b.label_ids = np.asarray([y for s in sets for y in s], np.int64)
    b.line_numbers = b.line_numbers + first_line - 1
    return b


def test_shuffled_buffer_is_a_permutation_of_the_examples():
    """``_shuffled`` hands back every buffered example once, with its own features, labels, train
    flag and frequency prediction, in an order fixed by the seed and not the stream's."""
    from lomtree_cli.reductions.plt import _shuffled

    rng = np.random.default_rng(3)
    buf, want, line = [], {}, 1
    for n in (5, 9, 1, 7):
        rows = [[(int(h), float(np.float32(rng.uniform(0.1, 2)))) for h in rng.integers(0, 4000, rng.integers(0, 5))]
                for _ in range(n)]
        sets = [sorted(set(int(y) for y in rng.integers(1, 30, rng.integers(0, 4)))) for _ in range(n)]
        b = _multilabel_batch(rows, sets, line)
        t, f = rng.random(n) < 0.7, rng.integers(0, 30, n)
        for i in range(n):
            want[line + i] = (rows[i], sets[i], bool(t[i]), int(f[i]))
        buf.append((b, t, f))
        line += n
    orders = []
    for seed in (1, 1, 2):
        got, order = {}, []
        for b, t, f in _shuffled(list(buf), seed):
            assert len(b) <= 9 and b.indptr[0] == 0 and b.label_ptr[0] == 0
            for i in range(len(b)):
                rows = [(int(h), float(v)) for h, v in zip(b.indices[b.indptr[i]:b.indptr[i + 1]],
                                                         b.values[b.indptr[i]:b.indptr[i + 1]])]
                got[int(b.line_numbers[i])] = (rows, b.label_set(i).tolist(), bool(t[i]), int(f[i]))
                order.append(int(b.line_numbers[i]))
        assert got == want
        orders.append(order)
    assert orders[0] == orders[1] != orders[2] and orders[0] != sorted(orders[0])


def test_shuffled_replay_unlearns_the_streams_order():
    """A stream sorted by label (every label's examples together, as a file sorted by name is):
    replayed in order, the last labels' updates come last and the leaves lean toward them; in a
    random order the held-out examples of every label are found (measured: accuracy 0.51 in order
    against 0.92 shuffled on this stream)."""
    ex = stream(k=20, n=4000, seed=5, n_feat=2, vocab=400)
    ex, test = sorted(ex[:3000], key=lambda e: e[0]), ex[3000:]
    acc = {}
    for shuffle in (False, True):
        red = make_plt(20, arity=4, beam=4, tree_buffer=10_000, shuffle_buffer=shuffle)
        run(red, ex, chunk=500)
        b = make_batch([list(zip(e[2], e[3])) for e in test], [e[0] for e in test], bits=12)
        p, _ = red.process(b, np.zeros(len(b), bool))
        acc[shuffle] = float(np.mean(p == b.labels))
    assert acc[True] > 0.85 and acc[False] < 0.7, acc


def test_shuffled_buffer_saves_a_model_before_any_example(tmp_path):
    """A model with ``--shuffle-buffer`` saved before it saw an example (an empty input; Dask sends
    the new model to its workers): an empty tree, no error; it then learns as a new one does."""
    from .helpers import cli

    (tmp_path / "empty.vw").write_text("")
    (tmp_path / "t.vw").write_text("1,2 | a b\n3 | c\n2 | b\n")
    code, _, err = cli("train", tmp_path / "empty.vw", "--multilabel", "-k", 5000, "-r", "plt", "-f",
                       tmp_path / "e.lt", "--quiet")
    assert code == 0, err
    from lomtree_cli.model_io import load_model

    m = load_model(str(tmp_path / "e.lt"))
    assert m.reduction.shuffle and m.reduction.n_labels == 0
    code, _, err = cli("train", "-i", tmp_path / "e.lt", tmp_path / "t.vw", "-f", tmp_path / "m.lt", "--quiet")
    assert code == 0, err
    assert load_model(str(tmp_path / "m.lt")).reduction.n_labels == 3


# -- VW's complete tree (--complete-tree, VW's --plt spelling) --------------------------------------
def vw_heap_tree(k, M):
    """VW's tree by its definition, independently of ``complete_tree``'s node-count formula: the
    fewest heap-numbered nodes 0..t-1 (node v's children M v + 1 .. M v + M, those below t) with k
    leaves; label l (1-based) at leaf t - k + l - 1; under lomtree's root as node v + 1."""
    t = 1
    while sum(1 for v in range(t) if M * v + 1 >= t) != k:
        t += 1
    parent = [-1, 0] + [1 + (v - 1) // M for v in range(1, t)]
    label = [0] * (t + 1)
    for v in range(t - k, t):
        label[v + 1] = v - (t - k) + 1
    return parent, label


def test_complete_tree_is_vws_heap_tree():
    from lomtree_cli.reductions.plt import complete_tree

    parent, label = complete_tree(10, 2)  # VW's --plt 10: 19 nodes, 9 internal, label l at node 9 + l
    assert parent.tolist() == [-1, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9]
    assert label.tolist() == [0] * 10 + list(range(1, 11))
    for k in range(1, 40):
        for M in (2, 3, 4, 7):
            p, lab = complete_tree(k, M)
            assert (p.tolist(), lab.tolist()) == vw_heap_tree(k, M), (k, M)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_complete_tree_matches_reference(loss):
    """The fixed tree is placed before the first example (a label never moves) and trained as
    the reference PLT on that tree: the same progressive predictions, top-k probabilities and tree;
    the one-child root makes VW's root regressor a node of the path."""
    k = 11
    ex = stream(k=k, n=300, seed=5)
    ref = RefPLT(bits=12, loss=loss, arity=2, beam=3, gamma=1.0, negatives=False)
    ref.set_structure(*vw_heap_tree(k, 2))
    want = ref.process(ex)
    red = make_plt(k, loss=loss, arity=2, beam=3, tree_buffer=0, path_weight=1.0, leaf_negatives=False,
                   complete_tree=True)
    before = tree_of(red)
    assert run(red, ex, 7) == want
    assert tree_of(red) == ref_tree(ref) == before
    assert red.tree.nchild[0] == 1 and red.n_labels == k


def test_complete_tree_is_not_written_unless_set():
    """lomtree's own plt models keep their bytes: the field is written only when set."""
    from lomtree_cli.config import to_dict

    assert "complete_tree" not in to_dict(ReductionConfig(name="plt", k=5))
    assert to_dict(ReductionConfig(name="plt", k=5, complete_tree=True))["complete_tree"] is True


def test_sketch_dimensions():
    """Label sets of 4,096 labels or more: a sketch of 256 dimensions; fewer labels, or one label an
    example: 1,024; always within SKETCH_BYTES (100,001 labels: 2^28 / (8 * 100,001) < 512)."""
    from lomtree_cli.reductions.plt import sketch_bits

    assert [sketch_bits(n, True) for n in (983, 4095, 4096, 25596)] == [10, 10, 8, 8]
    assert [sketch_bits(n) for n in (983, 4096, 20001)] == [10, 10, 10]
    assert sketch_bits(100001) == sketch_bits(100001, True) == 8 and sketch_bits(10 ** 6, True) == 5
