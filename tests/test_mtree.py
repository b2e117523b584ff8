"""M-ary softmax label tree (``-r mtree``): kernels against the slow reference (finite-difference
gradients, whole progressive runs with label re-assignments), the assignment's invariants,
probabilities, save/load/continue."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.config import LearnerConfig, ReductionConfig
from lomtree_cli.kernels import mtree_kernels as T
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions.mtree import SLACK, MaryTree, huffman_digits, initial_digits, node_keys, tree_depth

from .helpers import make_batch
from .reference import mtree_ref as R

BITS = 10


def make(k, learner=None, **kw):
    """A tree (depth given, or the least with arity**depth >= k: the tests want trees, not the
    flat softmax ``--depth 0`` gives for small k); ``learner``: LearnerConfig fields."""
    kw.setdefault("depth", tree_depth(k, kw.get("arity", 32), 0))
    lcfg = LearnerConfig(**(learner or {}))
    rcfg = ReductionConfig(name="mtree", k=k, **kw)
    learner = LinearLearner(lcfg, BITS, 1, MaryTree.slot_mode)
    return MaryTree(rcfg, learner)


def stream(k, n, seed, vocab=60):
    rng = np.random.default_rng(seed)
    proto = {c: rng.integers(0, vocab, size=3) for c in range(1, k + 1)}
    out = []
    for _ in range(n):
        y = int(rng.integers(1, k + 1))
        idx = [int(h) for h in proto[y][: rng.integers(1, 4)]] + [int(h) for h in rng.integers(0, vocab, 2)]
        val = [float(np.float32(v)) for v in rng.uniform(0.2, 1.5, len(idx))]
        out.append((y, idx + [1000], val + [1.0]))
    return out


def batch_of(examples):
    return make_batch([list(zip(e[1], e[2])) for e in examples], [e[0] for e in examples], bits=BITS)


def run(red, examples, chunk=None):
    preds, losses = [], []
    chunk = chunk or len(examples)
    for s in range(0, len(examples), chunk):
        b = batch_of(examples[s:s + chunk])
        p, lo = red.process(b, b.labels > 0)
        preds += p.tolist()
        losses += lo.tolist()
    return preds, losses


def rows_of(red):
    """prefix tuple -> row of red.W, from the reduction's node keys."""
    out = {}
    for y in range(1, red.k + 1):
        path = tuple(int(x) for x in red.digits[y] if x >= 0)
        for d in range(len(path)):
            out[path[:d]] = int(red.path_node[y, d])
    return out


def random_weights(red, seed):
    rng = np.random.default_rng(seed)
    red.W[:] = rng.normal(0, 0.5, red.W.shape).astype(np.float32)
    red.U[:] = rng.normal(0, 0.5, red.U.shape).astype(np.float32)


def huffman_tree(red, counts):
    """``red`` re-shaped to the Huffman tree of ``counts`` (as plan() does)."""
    digits = huffman_digits(np.asarray(counts, np.float64), red.M)
    red._shape(red.M, digits.shape[1], digits)
    red.params[T.PAR_NEXT] = 0.0
    red.stats, red.cnt = red.stats[:0], red.cnt[:0]
    return red


def ref_U(red):
    return red.U if red.U.shape[0] else None


# -- the softmax/embedding step against the reference, and its gradient by finite differences ----
@pytest.mark.parametrize("k,arity,counts", [(7, 2, None), (10, 3, None), (9, 16, None), (9, 3, [40, 1, 7, 7, 3, 0, 2, 9, 5]),
                                            (6, 2, [1, 2, 4, 8, 16, 32])])
def test_sgd_step_is_the_gradient(k, arity, counts):
    """Balanced trees and Huffman trees (``counts``: leaves at several depths); the root's linear
    weights U move at PAR_LIN (2) times the rate (given: k = 9, arity 16 is one level)."""
    red = make(k, arity=arity, dim=6, linear=2.0)
    if counts is not None:
        huffman_tree(red, counts)
    random_weights(red, k)
    assert red.U.shape[0] and red.params[T.PAR_LIN] == 2.0
    tree = R.Tree(red.digits)
    rows = rows_of(red)
    idx, val = [3, 17, 3, 900], [0.5, 1.25, -0.75, 1.0]
    y = k - 2
    E0, W0, U0 = red.E.astype(np.float64), red.W.astype(np.float64), red.U.astype(np.float64)
    # the kernel's step at lr = 1 is minus the gradient (computed at the old point)
    ex = [(y, idx, [float(np.float32(v)) for v in val])]
    b = batch_of(ex)
    T.learn_one(red.E, red.U, red.W, red.child, red.path_node, red.path_child, red.stats, red.cnt, red.touched,
                b.indices, b.values, 0, len(idx), y, 1.0, 1.0, 0.0, 0.0, 2.0, red.h, red.gh, red.zr, red.lp, True)
    gE = E0 - red.E.astype(np.float64)
    gW = W0 - red.W.astype(np.float64)
    gU = (U0 - red.U.astype(np.float64)) / 2.0
    f = lambda E, W, U=U0: R.loss(E, W, rows, tree, idx, np.float32(val), y, U)  # noqa: E731
    eps = 1e-6
    for r in sorted(set(idx)):
        for j in range(red.M):
            Up, Um = U0.copy(), U0.copy()
            Up[r, j] += eps
            Um[r, j] -= eps
            fd = (f(E0, W0, Up) - f(E0, W0, Um)) / (2 * eps)
            assert gU[r, j] == pytest.approx(fd, rel=1e-3, abs=1e-6)
    for r in sorted(set(idx)):
        for c in range(red.D):
            Ep, Em = E0.copy(), E0.copy()
            Ep[r, c] += eps
            Em[r, c] -= eps
            fd = (f(Ep, W0) - f(Em, W0)) / (2 * eps)
            assert gE[r, c] == pytest.approx(fd, rel=1e-3, abs=1e-6)
    for pre, n in rows.items():
        for j in range(red.M):
            for c in range(red.D):
                Wp, Wm = W0.copy(), W0.copy()
                Wp[n, j, c] += eps
                Wm[n, j, c] -= eps
                fd = (f(E0, Wp) - f(E0, Wm)) / (2 * eps)
                assert gW[n, j, c] == pytest.approx(fd, rel=1e-3, abs=1e-6)
    # and equals the reference's step
    E1, W1, U1 = E0.astype(np.float32), W0.astype(np.float32), U0.astype(np.float32)
    R.sgd_step(E1, W1, rows, tree, idx, np.float32(val), y, 1.0, U=U1, lin=2.0)
    np.testing.assert_allclose(red.E, E1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(red.W, W1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(red.U, U1, rtol=1e-5, atol=1e-6)


# -- whole progressive runs against the reference ------------------------------------------------
class RefRun:
    """The reference learner: same initial tree, re-assignment at N, 2N, 4N, ... trained examples."""

    def __init__(self, red0, reassign_after, eta, power, total=0.0, l1=0.0, l2=0.0):
        self.E = red0.E.copy()
        self.U = red0.U.copy() if red0.U.shape[0] else None
        self.lin = float(red0.params[T.PAR_LIN])
        self.W = {}
        self.M, self.L, self.D = red0.M, red0.L, red0.D
        self.digits = red0.digits.copy()
        self.next = reassign_after
        self.eta, self.power, self.total = eta, power, total
        self.l1, self.l2 = l1, l2
        self.clock = 0
        self.stats = {}
        self.tree = R.Tree(self.digits)
        self.reassignments = 0

    def wrow(self, pre):
        if pre not in self.W:
            self.W[pre] = np.zeros((self.M, self.D), np.float32)
        return self.W[pre]

    def arrays(self):
        pres = sorted(self.W)
        rows = {p: i for i, p in enumerate(pres)}
        W = np.stack([self.W[p] for p in pres]) if pres else np.zeros((0, self.M, self.D), np.float32)
        return W, rows

    def process(self, examples):
        preds, losses = [], []
        for y, idx, val in examples:
            if self.next and self.clock >= self.next:
                self.digits = R.assign(self.digits, self.stats, self.M, SLACK)
                self.tree = R.Tree(self.digits)
                self.stats = {}
                self.next *= 2
                self.reassignments += 1
            for pre in self.tree.kids:
                self.wrow(pre)
            W, rows = self.arrays()
            probs = R.all_label_probs(self.E, W, rows, self.tree, idx, np.float32(val), self.U)
            preds.append(max(probs, key=lambda c: (probs[c], -c)))
            lr = R.rate(self.eta, self.power, self.clock, 0.0, self.total)
            losses.append(-math.log(probs[y]))
            R.sgd_step(self.E, W, rows, self.tree, idx, np.float32(val), y, lr, self.stats, self.l1, self.l2, self.U,
                       self.lin)
            for p, r in rows.items():
                self.W[p] = W[r]
            self.clock += 1
        return preds, losses


@pytest.mark.parametrize("k,arity,reassign,total,reg,linear,huffman", [
    (9, 2, 16, 0, (0, 0), -1, False), (13, 3, 20, 0, (0, 0), 0, False), (12, 4, 0, 0, (0, 0), -1, False),
    (9, 2, 16, 150, (0, 0), 0.5, False), (40, 64, 0, 150, (0, 0), -1, False), (9, 2, 16, 0, (0.05, 0), -1, False),
    (13, 3, 20, 0, (0, 0.5), 0, False), (12, 4, 0, 150, (0.02, 0.3), -1, False), (13, 3, 0, 150, (0, 0), -1, True),
    (9, 2, 0, 0, (0.02, 0.3), 1.0, True), (40, 4, 0, 150, (0, 0), -1, True)])
def test_progressive_run_matches_reference(k, arity, reassign, total, reg, linear, huffman):
    """Predictions, log-losses, the re-assigned tree and the weights equal the reference's, whole or
    in chunks that cut through re-assignment points (beam wide enough to be exact); ``total`` > 0:
    the planned linear rate schedule over the whole stream (the floor: test_plan_sets_the_linear_schedule);
    ``reg``: --l1, --l2; ``linear``: --linear (-1: 2 on these trees); ``huffman``: the Huffman tree
    of skewed label counts (leaves at several depths)."""
    ex = stream(k, 150, seed=k)
    lrn = {"l1": reg[0], "l2": reg[1]}
    counts = [float((7 * i) % 11) ** 2 for i in range(k)]

    def new():
        red = make(k, learner=lrn, arity=arity, dim=5, beam=64, reassign_after=reassign, seed=k, linear=linear)
        return huffman_tree(red, counts) if huffman else red

    red0 = new()
    assert (red0.U.shape[0] > 0) == (linear != 0) and red0.params[T.PAR_LIN] == (linear if linear >= 0 else
                                                                                   2.0 if red0.L > 1 else 0.1)
    assert not huffman or np.any(red0.digits < 0)
    ref = RefRun(red0, reassign, eta=0.5, power=0.5, total=total, l1=reg[0], l2=reg[1])
    want_p, want_l = ref.process(ex)
    for chunk in (None, 7):
        red = new()
        red.params[T.PAR_TOTAL] = total
        p, lo = run(red, ex, chunk)
        assert p == want_p
        np.testing.assert_allclose(lo, want_l, rtol=1e-4)
        np.testing.assert_array_equal(red.digits, ref.digits)
        assert red.reassignments == ref.reassignments
        np.testing.assert_allclose(red.E, ref.E, rtol=1e-4, atol=1e-6)
        if ref.U is not None:
            np.testing.assert_allclose(red.U, ref.U, rtol=1e-4, atol=1e-6)
        W, rows = ref.arrays()
        for pre, r in rows_of(red).items():
            np.testing.assert_allclose(red.W[r], ref.W[pre], rtol=1e-4, atol=1e-6)


# -- the assignment step --------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 40), arity=st.integers(2, 6), extra=st.integers(0, 1), seed=st.integers(0, 10**6),
       dense=st.floats(0.0, 1.0))
def test_assignment_keeps_every_label_in_one_leaf(k, arity, extra, seed, dense):
    L = tree_depth(k, arity, 0) + extra
    rng = np.random.default_rng(seed)
    digits = initial_digits(k, arity, L, seed)
    cnt = np.where(rng.random((k + 1, L)) < dense, rng.integers(1, 9, (k + 1, L)), 0).astype(np.float64)
    stats = rng.random((k + 1, L, arity)) * cnt[:, :, None]
    new = T.assign_labels(digits, stats, cnt, arity, SLACK)
    assert new.shape == digits.shape and new.min() >= 0 and new.max() < arity
    leaves = node_keys(new, arity)[1:, -1] * arity + new[1:, -1]
    assert np.unique(leaves).size == k  # every label in exactly one leaf, no leaf shared
    for d in range(L):  # the caps: a node's child holds at most min(M^(L-d-1), ceil(2|I|/M)) labels
        pre = node_keys(new, arity)[1:, d]
        for key in np.unique(pre):
            mine = new[1:][pre == key]
            m = mine.shape[0]
            cap = min(arity ** (L - d - 1), max(1, -(-SLACK * m // arity)))
            assert np.bincount(mine[:, d], minlength=arity).max() <= cap
    want = R.assign(digits, {(i, d): (cnt[i, d], stats[i, d]) for i in range(1, k + 1) for d in range(L)
                             if cnt[i, d] > 0}, arity, SLACK)
    np.testing.assert_array_equal(new, want)


def test_assignment_follows_the_classifier():
    """Hand-made: 4 labels, arity 2, depth 2; the root routes labels 1 and 3 to child 1 and labels 2
    and 4 to child 0 although the tree has them the other way: they move there."""
    digits = np.array([[0, 0], [0, 0], [1, 0], [0, 1], [1, 1]], np.int64)
    cnt = np.zeros((5, 2))
    stats = np.zeros((5, 2, 2))
    cnt[1:, 0] = 10
    stats[1, 0] = [1, 9]
    stats[3, 0] = [2, 8]
    stats[2, 0] = [9, 1]
    stats[4, 0] = [8, 2]
    new = T.assign_labels(digits, stats, cnt, 2, SLACK)
    assert new[1:, 0].tolist() == [1, 0, 1, 0]
    leaves = {tuple(r) for r in new[1:]}
    assert len(leaves) == 4


# -- probabilities -------------------------------------------------------------------------------
@pytest.mark.parametrize("huffman", [False, True])
def test_top_k_and_probabilities_are_the_path_products(huffman):
    k = 11
    red = make(k, arity=3, dim=4, beam=40, seed=5)
    if huffman:
        huffman_tree(red, [30, 1, 1, 2, 9, 4, 0, 0, 13, 5, 2])
    run(red, stream(k, 200, seed=1))
    ex = stream(k, 20, seed=2)
    b = batch_of(ex)
    labs, probs, p_true = red.predict_top(b, k)
    W, tree, rows = red.W, R.Tree(red.digits), rows_of(red)
    for i, (y, idx, val) in enumerate(ex):
        want = R.all_label_probs(red.E, W, rows, tree, idx, np.float32(val), ref_U(red))
        assert sum(want.values()) == pytest.approx(1.0)
        assert sorted(labs[i].tolist()) == list(range(1, k + 1))
        for lab, p in zip(labs[i], probs[i]):
            assert p == pytest.approx(want[int(lab)], rel=1e-6)
        assert p_true[i] == pytest.approx(want[y], rel=1e-6)
        assert np.all(np.diff(probs[i]) <= 1e-15)


def test_held_out_log_loss_is_minus_log_p():
    k = 6
    red = make(k, arity=2, dim=4, seed=2)
    run(red, stream(k, 100, seed=3))
    ex = stream(k, 10, seed=4)
    b = batch_of(ex)
    _, losses = red.process(b, np.zeros(len(ex), bool))
    _, _, p_true = red.predict_top(b, 1)
    np.testing.assert_allclose(losses, -np.log(p_true), rtol=1e-9)


# -- persistence ---------------------------------------------------------------------------------
@pytest.mark.parametrize("huffman", [False, True])
def test_save_load_continue_is_exact(huffman):
    k = 10
    ex = stream(k, 300, seed=9)
    counts = [5, 50, 1, 1, 0, 3, 20, 8, 2, 2]

    def new():
        red = make(k, arity=3, dim=4, reassign_after=16)
        return huffman_tree(red, counts) if huffman else red

    whole = new()
    p_whole, _ = run(whole, ex)
    first = new()
    p1, _ = run(first, ex[:137])
    arrays = {n: np.asarray(a).copy() for n, a in first.state().items()}
    meta = first.meta()
    second = make(k, arity=3, dim=4, reassign_after=16)  # a new model's balanced shape until it loads
    second.load_state(arrays, meta)
    p2, _ = run(second, ex[137:])
    assert p1 + p2 == p_whole
    np.testing.assert_array_equal(second.E, whole.E)
    np.testing.assert_array_equal(second.U, whole.U)
    np.testing.assert_array_equal(second.W, whole.W)
    np.testing.assert_array_equal(second.digits, whole.digits)
    assert second.reassignments == whole.reassignments


def test_load_refuses_shared_leaves():
    red = make(5, arity=2, dim=3)
    arrays = {n: np.asarray(a).copy() for n, a in red.state().items()}
    arrays["digits"][2] = arrays["digits"][1]
    with pytest.raises(ValueError):
        make(5, arity=2, dim=3).load_state(arrays, red.meta())
    # a Huffman tree whose leaf is another label's inner node, or with a gap in a path
    huff = huffman_tree(make(5, arity=2, dim=3), [8, 4, 2, 1, 1])
    good = {n: np.asarray(a).copy() for n, a in huff.state().items()}
    make(5, arity=2, dim=3).load_state({n: a.copy() for n, a in good.items()}, huff.meta())
    deep = 1 + int(np.argmax((good["digits"][1:] >= 0).sum(axis=1)))
    for bad in (good["digits"][deep, :1], None):
        arrays = {n: a.copy() for n, a in good.items()}
        if bad is None:
            arrays["digits"][deep, 1] = -1
        else:
            arrays["digits"][1] = -1
            arrays["digits"][1, 0] = bad[0]
        with pytest.raises(ValueError):
            make(5, arity=2, dim=3).load_state(arrays, huff.meta())


# -- the Huffman tree --------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(0, 60), min_size=1, max_size=40), arity=st.integers(2, 6))
def test_huffman_tree_is_the_reference(counts, arity):
    """The kernel's Huffman digits equal the reference's; every label has one leaf, no leaf is
    another's inner node, and the expected depth is the optimum's (checked against the sum of
    the merged weights)."""
    c = np.array(counts, np.float64)
    got = huffman_digits(c, arity)
    np.testing.assert_array_equal(got, R.huffman(counts, arity))
    k = len(counts)
    red = make(k, arity=arity, dim=2)
    huffman_tree(red, c)
    leaves = [tuple(int(x) for x in row if x >= 0) for row in got[1:]]
    assert len(set(leaves)) == k
    inner = {p[:d] for p in leaves for d in range(1, len(p))}
    assert not inner & set(leaves)
    assert sorted(int(-v - 1) for v in red.child[red.child <= -2]) == list(range(1, k + 1))


def test_plan_builds_the_huffman_tree(tmp_path):
    """With --passes > 1 over files, a new model's tree is the Huffman tree of the files' label
    counts (no re-assignment); --tree balanced, one pass or --depth keep the balanced tree."""
    from lomtree_cli.config import InputConfig
    from lomtree_cli.parsing import iter_batches

    k = 130  # above the flat softmax's FLAT_K
    f = tmp_path / "a.vw"
    f.write_text("".join(f"{y} | w{y}\n" for y in [1] * 20 + [2] * 9 + [3] * 3 + list(range(4, k + 1))))
    batches = lambda: iter_batches([str(f)], InputConfig(bits=BITS))  # noqa: E731
    counts = [20, 9, 3] + [1] * (k - 3)
    red = make(k, arity=4, dim=3, depth=0)
    red.plan(2, [str(f)], batches)
    np.testing.assert_array_equal(red.digits, R.huffman(counts, 4))
    assert red.params[T.PAR_NEXT] == 0 and red.L == red.digits.shape[1] and red.U.shape[0] > 0
    assert red.stats.shape == (0, red.L, 4) and red.cnt.shape == (0, red.L)  # never re-assigned
    for kw, passes in (({"tree": "balanced", "depth": 0}, 2), ({"depth": 0}, 1), ({"depth": 4}, 2)):
        other = make(k, arity=4, dim=3, **kw)
        other.plan(passes, [str(f)], batches)
        assert not np.any(other.digits < 0) and other.params[T.PAR_NEXT] == 1000


# -- the rate schedule and the tree shape -----------------------------------------------------------
def test_plan_sets_the_linear_schedule(tmp_path):
    """plan(): with passes > 1, T = passes x lines of plain files; a new model without -l gets
    default_eta(T); after the first pass T = passes x the examples it trained; one pass or an
    unknown length (standard input, a compressed file): the t**-power_t schedule at ETA_POWER; a
    loaded model keeps its rate."""
    from lomtree_cli.kernels.linear import HP_ETA
    from lomtree_cli.reductions.mtree import ETA_POWER, count_lines, default_eta

    f1, f2 = tmp_path / "a.vw", tmp_path / "b.vw"
    f1.write_text("1 | a\n2 | b\n\n")
    f2.write_text("3 | c\n1 | d")  # no final newline
    assert count_lines([str(f1), str(f2)]) == 5
    gz = tmp_path / "c.vw.gz"
    gz.write_bytes(b"")
    assert count_lines([str(f1), "-"]) == 0 and count_lines([str(gz)]) == 0
    red = make(6, arity=2)
    red.plan(3, [str(f1), str(f2)])
    assert red.params[T.PAR_TOTAL] == 15 and red.params[T.PAR_START] == 0
    assert red.learner.arrays.hp[HP_ETA] == pytest.approx(default_eta(15))
    red.params[T.PAR_ETA] = red.learner.arrays.hp[HP_ETA]  # process() copies it
    for t, want in ((0, 1.0), (6, 0.6), (15, 1e-4), (40, 1e-4)):
        assert T.learning_rate(red.params, float(t)) == pytest.approx(default_eta(15) * want)
    run(red, stream(6, 4, seed=1))
    red.end_pass()
    assert red.params[T.PAR_TOTAL] == 12  # 3 passes x the 4 examples the first pass trained
    assert default_eta(1) == 2.5 and default_eta(10**12) == 0.05 and default_eta(124410) == pytest.approx(1.0, rel=1e-4)
    one = make(6, arity=2)
    one.plan(1, [str(f1)])
    assert one.params[T.PAR_TOTAL] == 0 and one.learner.arrays.hp[HP_ETA] == ETA_POWER
    other = make(6, arity=2)
    other.plan(2, ["-"])
    assert other.params[T.PAR_TOTAL] == 0 and other.learner.arrays.hp[HP_ETA] == ETA_POWER
    other.params[T.PAR_ETA] = ETA_POWER
    assert T.learning_rate(other.params, 30000.0) == pytest.approx(ETA_POWER * 4 ** -0.5)
    loaded = make(6, arity=2)
    loaded.load_state({n: np.asarray(a).copy() for n, a in red.state().items()}, red.meta())
    loaded.learner.arrays.hp[HP_ETA] = 0.3
    loaded.plan(2, [str(f1)])
    assert loaded.learner.arrays.hp[HP_ETA] == 0.3 and loaded.params[T.PAR_TOTAL] == 6
    explicit = MaryTree(ReductionConfig(name="mtree", k=6, arity=2),
                        LinearLearner(LearnerConfig(learning_rate=0.7), BITS, 1, MaryTree.slot_mode))
    explicit.plan(2, [str(f1)])
    assert explicit.learner.arrays.hp[HP_ETA] == pytest.approx(0.7)


def test_default_shape_is_flat_for_small_k():
    from lomtree_cli.reductions.mtree import tree_shape

    assert tree_shape(66, 32, 0) == (66, 1) and tree_shape(128, 32, 0) == (128, 1) and tree_shape(20, 32, 0) == (32, 1)
    assert tree_shape(129, 32, 0) == (32, 2) and tree_shape(5001, 32, 0) == (32, 3)
    assert tree_shape(66, 32, 2) == (32, 2) and tree_shape(66, 8, 0) == (66, 1) and tree_shape(129, 8, 0) == (8, 3)
    assert tree_shape(200, 64, 0) == (200, 1)
    red = MaryTree(ReductionConfig(name="mtree", k=66), LinearLearner(LearnerConfig(), BITS, 1, MaryTree.slot_mode))
    assert (red.M, red.L) == (66, 1) and sorted(red.child[0, :].tolist()) == sorted(range(-67, -1))
    assert red.U.shape == (1 << BITS, 66) and red.params[T.PAR_LIN] == 0.1  # --linear -1 on a flat softmax


def test_model_from_before_the_flat_default_loads():
    """A model saved with --depth 0 when that meant the least L with M**L >= k (k = 66, M = 32: a
    two-level tree) loads as that tree and predicts as before."""
    ex = stream(66, 200, seed=4)
    old = MaryTree(ReductionConfig(name="mtree", k=66, depth=2, dim=4),
                   LinearLearner(LearnerConfig(), BITS, 1, MaryTree.slot_mode))
    run(old, ex[:150])
    arrays = {n: np.asarray(a).copy() for n, a in old.state().items()}
    new = MaryTree(ReductionConfig(name="mtree", k=66, depth=0, dim=4),
                   LinearLearner(LearnerConfig(), BITS, 1, MaryTree.slot_mode))
    assert (new.M, new.L) == (66, 1)
    new.load_state(arrays, old.meta())
    assert (new.M, new.L) == (32, 2)
    assert run(new, ex[150:]) == run(old, ex[150:])
    with pytest.raises(ValueError):  # anything else that disagrees still fails
        make(66, arity=8, dim=4).load_state(arrays, old.meta())


def test_depth_bound():
    assert tree_depth(5001, 65, 0) == 3 and tree_depth(66, 32, 0) == 2 and tree_depth(66, 66, 0) == 1
    from lomtree_cli.errors import ConfigError

    with pytest.raises(ConfigError):
        make(100, arity=4, depth=3)
    assert make(100, arity=4, depth=5).L == 5
