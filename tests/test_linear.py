"""The compiled base learner against the pure-Python reference and the spec's test vectors."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lomtree_cli.config import LearnerConfig
from lomtree_cli.kernels import linear as K
from lomtree_cli.learner import LinearLearner
from tests.reference.linear_ref import RefLinear


def make(bits=18, n_models=1, **kw):
    lcfg = LearnerConfig(**kw)
    return LinearLearner(lcfg, bits, n_models)


def assert_same_state(a, b):
    """Two learners' arrays hold the same bits: table, S, T."""
    np.testing.assert_array_equal(a.table.view(np.uint32), b.table.view(np.uint32))
    np.testing.assert_array_equal(a.S, b.S)
    np.testing.assert_array_equal(a.T, b.T)


def step(lrn, idx, val, m, y, iw=1.0):
    a = lrn.arrays
    f = K.score(a, idx, val, 0, len(idx), m)
    K.learn(a, idx, val, 0, len(idx), m, y, iw, K.clip_score(a, f))
    K.end_example(a, iw)
    return f


def test_spec_vectors_default_update():
    """docs/ALGORITHMS.md §9: two examples `| a`, squared loss, eta 0.5."""
    lrn = make()
    idx = np.array([95318, 116060], np.int64)
    val = np.ones(2, np.float32)
    assert step(lrn, idx, val, 0, 1.0) == 0.0
    w = lrn.arrays.table[:, 0]
    assert w[95318] == pytest.approx(0.25346565, abs=1e-7)
    assert w[116060] == pytest.approx(0.25346565, abs=1e-7)
    f2 = step(lrn, idx, val, 0, -1.0)
    assert f2 == pytest.approx(0.50693131, abs=1e-7)
    assert w[95318] == pytest.approx(0.00963910, abs=1e-7)


def test_no_update_without_loss():
    lrn = make()
    idx = np.array([1, 2], np.int64)
    val = np.array([1.0, 1.0], np.float32)
    lrn.arrays.table[K.slot(lrn.arrays, 1, 0), 0] = 3.0  # score 3 -> clipped to 1
    before = lrn.arrays.table.copy()
    step(lrn, idx, val, 0, 1.0)
    np.testing.assert_array_equal(before, lrn.arrays.table)  # squared loss at clip(3)=1, y=1 is 0


def test_zero_importance_does_nothing():
    lrn = make()
    idx = np.array([5], np.int64)
    val = np.array([2.0], np.float32)
    before = lrn.arrays.table.copy()
    a = lrn.arrays
    K.learn(a, idx, val, 0, 1, 0, 1.0, 0.0, 0.0)
    np.testing.assert_array_equal(before, a.table)


def test_importance_invariance_squared():
    """One example with iw=2 moves the score less than twice... but never past the label."""
    lrn = make(learning_rate=10.0)
    idx = np.array([3], np.int64)
    val = np.array([1.0], np.float32)
    step(lrn, idx, val, 0, 1.0, iw=1000.0)
    f = K.score(lrn.arrays, idx, val, 0, 1, 0)
    assert 0 < f <= 1.0 + 1e-6  # importance-aware: never overshoots the target


@pytest.mark.parametrize("loss", ["logistic", "hinge", "quantile", "squared"])
def test_logistic_and_friends_move_toward_label(loss):
    lrn = make(loss=loss)
    idx = np.array([7, 9], np.int64)
    val = np.array([0.5, -1.5], np.float32)
    f0 = K.score(lrn.arrays, idx, val, 0, 2, 0)
    step(lrn, idx, val, 0, 1.0)
    f1 = K.score(lrn.arrays, idx, val, 0, 2, 0)
    assert f1 > f0


def test_logistic_solver_matches_lambert_definition():
    for z in (-40.0, -3.0, 0.0, 0.7, 1.0, 5.0, 101.0, 1e6):
        a = K._solve_logistic(z)
        assert a + math.exp(a) == pytest.approx(z, rel=1e-9, abs=1e-9)


#: (l1, l2): off, each alone, both (--l1/--l2 enter every update kernel)
REGS = st.sampled_from([(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.02, 0.1), (0.0, 3.0)])

examples = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from([1.0, -1.0, 0.5, 2.0, 1e-30, 3.25, -0.125])),
                 min_size=0, max_size=6),
        st.integers(0, 2),                      # model
        st.sampled_from([-1.0, 1.0]),           # label
        st.sampled_from([1.0, 0.5, 2.0, 0.0]),  # importance
    ),
    min_size=1, max_size=25,
)


@settings(deadline=None, max_examples=120)
@given(
    exs=examples,
    loss=st.sampled_from(["squared", "logistic", "hinge", "quantile"]),
    sgd=st.booleans(),
    power_t=st.sampled_from([0.5, 0.3, 0.0]),
    bits=st.sampled_from([4, 18]),
    initial_t=st.sampled_from([None, 2.0]),
    mode=st.sampled_from([K.MODE_STRIDE, K.MODE_CPT]),
    reg=REGS,
)
# a float32 adaptive sum that underflows to 0 (rate 0 ** -p = inf; the update becomes NaN and is dropped)
@example(exs=[([(0, 1e-30)], 0, -1.0, 1.0), ([(0, 1.0), (1, 1e-30)], 0, -1.0, 1.0)], loss="logistic", sgd=False,
         power_t=0.5, bits=4, initial_t=None, mode=K.MODE_STRIDE, reg=(0.0, 0.0))
def test_kernel_matches_reference(exs, loss, sgd, power_t, bits, initial_t, mode, reg):
    """Scores and every weight agree with the reference (bits=4 forces collisions and duplicates)."""
    lcfg = LearnerConfig(loss=loss, sgd=sgd, power_t=power_t, initial_t=initial_t, quantile_tau=0.3,
                         l1=reg[0], l2=reg[1])
    lrn = LinearLearner(lcfg, bits, 3, mode)
    ref = RefLinear(bits=bits, n_models=3, loss=loss, power_t=power_t, initial_t=initial_t, tau=0.3, sgd=sgd,
                    mode="stride" if mode == K.MODE_STRIDE else "cpt", l1=reg[0], l2=reg[1])
    mask = (1 << bits) - 1
    for feats, m, y, iw in exs:
        idx = np.array([h & mask for h, _ in feats], np.int64)
        val = np.array([v for _, v in feats], np.float32)
        a = lrn.arrays
        f = K.score(a, idx, val, 0, len(idx), m)
        fr = ref.score(idx, val, m)
        assert f == pytest.approx(fr, rel=1e-6, abs=1e-6)
        K.learn(a, idx, val, 0, len(idx), m, y, iw, K.clip_score(a, f))
        ref.learn(idx, val, m, y, iw, ref.clip(fr))
        if iw > 0:
            K.end_example(a, iw)
            ref.end_example(iw)
    np.testing.assert_allclose(lrn.arrays.table[:, 0], ref.dense_w(), rtol=1e-5, atol=1e-6)
    if not sgd:
        for m in range(3):
            s_ref, t_ref = ref._ST(m)
            assert lrn.arrays.S[m] == pytest.approx(s_ref, rel=1e-6)
            assert lrn.arrays.T[m] == pytest.approx(t_ref, rel=1e-9)


def test_slot_schemes():
    lrn = LinearLearner(LearnerConfig(), 10, 7, K.MODE_STRIDE)
    assert K.slot(lrn.arrays, 5, 3) == (5 * 7 + 3) % 1024
    lrn = LinearLearner(LearnerConfig(), 10, 7, K.MODE_CPT)
    assert K.slot(lrn.arrays, 5, 3) == (5 + 3 * 0x9E3779B1) % 1024


def test_sgd_clock_and_defaults():
    lrn = make(sgd=True)
    assert lrn.eta == 10.0
    idx = np.array([1], np.int64)
    val = np.array([1.0], np.float32)
    step(lrn, idx, val, 0, 1.0)
    # t_eff = 1 + 0 + 1 = 2; sigma = 10 * 2^-0.5; u = -sigma * 2(0-1)
    assert lrn.arrays.table[K.slot(lrn.arrays, 1, 0), 0] == pytest.approx(np.float32(20 / math.sqrt(2)))
    assert lrn.arrays.hp[K.HP_CLOCK] == 1.0


def test_ensure_models_grows_and_keeps_state():
    lrn = LinearLearner(LearnerConfig(), 8, 2, K.MODE_CPT)
    lrn.arrays.S[1] = 5.0
    lrn.ensure_models(9)
    assert lrn.n_models >= 9 and lrn.arrays.S[1] == 5.0


@settings(deadline=None, max_examples=80)
@given(
    exs=st.lists(st.tuples(
        st.lists(st.tuples(st.integers(0, 3000), st.sampled_from([1.0, -1.0, 0.5, 2.0, 1e-30, 3.25, np.inf])),
                 min_size=0, max_size=8),
        st.integers(0, 4), st.sampled_from([1.0, 0.5, 2.0, 0.0])), min_size=1, max_size=20),
    loss=st.sampled_from(["squared", "logistic", "hinge", "quantile"]),
    sgd=st.booleans(), power_t=st.sampled_from([0.5, 0.75, 0.25]), bits=st.sampled_from([6, 16]), reg=REGS,
)
def test_learn_block_equals_sequential_learns(exs, loss, sgd, power_t, bits, reg):
    """The fused k-regressor update is bit-identical to k sequential updates whenever the
    disjointness check passes, through its distinct path when the check says no slot repeats
    (code 2) (bits=6 makes the check fail often: then only the check is exercised)."""
    k = 5
    lcfg = LearnerConfig(loss=loss, sgd=sgd, power_t=power_t, l1=reg[0], l2=reg[1])
    a_l = LinearLearner(lcfg, bits, k)
    b_l = LinearLearner(lcfg, bits, k)
    mask = (1 << bits) - 1
    used = 0
    for feats, y, iw in exs:
        idx = np.array([h & mask for h, _ in feats], np.int64)
        val = np.array([v for _, v in feats], np.float32)
        a, b = a_l.arrays, b_l.arrays
        yh = np.array([K.clip_score(a, K.score(a, idx, val, 0, len(idx), c)) for c in range(k)])
        ys = np.array([1.0 if c == y else -1.0 for c in range(k)])
        code = K.stride_block_disjoint(a, idx, 0, len(idx), k, np.zeros(max(1, len(idx)), np.int64))
        bases = [(int(h) * k) & mask for h in idx]
        if not code:
            # check it: some two distinct bases really are closer than k
            bases = sorted(set(bases))
            gaps = [y2 - y1 for y1, y2 in zip(bases, bases[1:])] + [bases[0] + mask + 1 - bases[-1]]
            assert min(gaps) < k
            continue
        # code 2: every base distinct and no range wraps; then learn_block may take its distinct path
        assert (code == 2) == (len(set(bases)) == len(bases) and all(x + k <= mask + 1 for x in bases))
        used += 1
        for c in range(k):
            K.learn(a, idx, val, 0, len(idx), c, ys[c], iw, yh[c])
        K.learn_block(b, idx, val, 0, len(idx), np.arange(k), k, ys, iw, yh, np.zeros((k, 4)), np.zeros(k, np.int64),
                      code == 2, np.int64(k), np.int64(0))
        if iw > 0:
            K.end_example(a, iw)
            K.end_example(b, iw)
        np.testing.assert_array_equal(a.table, b.table)
        np.testing.assert_array_equal(a.S, b.S)
        np.testing.assert_array_equal(a.T, b.T)


@settings(deadline=None, max_examples=80)
@given(
    exs=st.lists(st.tuples(
        st.lists(st.tuples(st.integers(0, 3000), st.sampled_from([1.0, -1.0, 0.5, 2.0, 1e-30, 3.25])),
                 min_size=0, max_size=8),
        st.lists(st.integers(0, 11), min_size=1, max_size=6, unique=True), st.sampled_from([1.0, 0.5, 0.0])),
        min_size=1, max_size=20),
    loss=st.sampled_from(["squared", "quantile", "logistic"]), power_t=st.sampled_from([0.5, 0.75, 0.25]),
    bits=st.sampled_from([6, 8, 16]),
)
def test_learn_block_over_any_regressors_equals_sequential_learns(exs, loss, power_t, bits):
    """``learn_block`` over any regressor ids ``ms`` (LOMtree's leaf candidates) is bit-identical
    to sequential updates whenever no two of them share a slot on the example
    (``scores_independent`` for every pair, from ``slot_layout``), told ``slot_layout``'s
    ``distinct`` as LOMtree's leaf tells it; small tables make that fail often."""
    W = 12
    lcfg = LearnerConfig(loss=loss, power_t=power_t)
    a_l, b_l = LinearLearner(lcfg, bits, W), LinearLearner(lcfg, bits, W)
    used = 0
    for feats, ms, iw in exs:
        idx = np.array([h for h, _ in feats], np.int64)
        val = np.array([v for _, v in feats], np.float32)
        for lrn in (a_l, b_l):
            lrn.ensure_scratch(max(1, len(idx)) * len(ms))
        a, b = a_l.arrays, b_l.arrays
        distinct, nd = K.slot_layout(a, idx, 0, len(idx))
        if not all(K.scores_independent(a, p, c, nd) for p in ms for c in ms if p != c):
            continue
        used += 1
        ms = np.array(ms, np.int64)
        k = len(ms)
        yh = np.array([K.clip_score(a, K.score(a, idx, val, 0, len(idx), m)) for m in ms])
        ys = np.where(np.arange(k) == 0, 1.0, -1.0)
        for c in range(k):
            K.learn(a, idx, val, 0, len(idx), ms[c], ys[c], iw, yh[c])
        K.learn_block(b, idx, val, 0, len(idx), ms, k, ys, iw, yh, np.zeros((k, 4)), np.zeros(k, np.int64),
                      distinct, np.int64(W), np.int64(0))
        assert_same_state(a, b)


# -- slot_layout / learn_rescore: the exact shortcuts of the tree reductions ----------------------

def _layout_brute(idx, W, bits):
    """(distinct, set of |d| of close pairs, number of close position pairs), by all pairs."""
    size = 1 << bits
    bases = [(int(h) * W) & (size - 1) for h in idx]
    close = set()
    n_close = 0
    for i in range(len(bases)):
        for j in range(i + 1, len(bases)):
            d = (bases[j] - bases[i]) % size
            if d == 0:
                continue
            d = min(d, size - d)
            if d < W:
                close.add(d)
                n_close += 1
    return len(set(bases)) == len(bases), close, n_close


@st.composite
def layouts(draw):
    bits = draw(st.sampled_from([6, 10, 16, 24]))
    W = draw(st.sampled_from([1, 2, 3, 7, 104, 150, 5000]))
    kind = draw(st.sampled_from(["random", "sorted", "sorted+constant", "clustered", "dups"]))
    n = draw(st.integers(0, 60))
    if kind == "random":
        idx = draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n))
    elif kind in ("sorted", "sorted+constant"):
        start = draw(st.integers(0, 2**31))
        gaps = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
        idx = list(np.cumsum([start] + gaps)[:n])
        if kind == "sorted+constant":
            idx.append(draw(st.sampled_from([11650396, draw(st.integers(0, 2**32 - 1))])))
    elif kind == "clustered":  # small numeric names in any order: the narrow window, not rising
        idx = draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
    else:
        base = draw(st.lists(st.integers(0, 2**20), min_size=1, max_size=8))
        idx = draw(st.lists(st.sampled_from(base), min_size=n, max_size=n))
    return bits, W, np.array(idx, dtype=np.int64) & (2**32 - 1)


@settings(deadline=None, max_examples=400)
@given(layouts())
def test_slot_layout_matches_all_pairs(case):
    """``slot_layout`` against every pair of bases: distinctness exactly; the close differences
    exactly when it lists them (nd >= 0); "too many" only when there are more than ND_MAX."""
    bits, W, idx = case
    lrn = make(bits=bits, n_models=W)
    lrn.ensure_scratch(max(1, len(idx)))
    distinct, nd = K.slot_layout(lrn.arrays, idx, 0, len(idx))
    b_distinct, b_close, b_n = _layout_brute(idx, W, bits)
    size = 1 << bits
    small = size < 16 * W  # fewer than 4 buckets of the general path: may answer "unknown"
    if small and len(idx) > 1:
        assert (distinct, nd) == (False, -1) or distinct == b_distinct
    else:
        assert distinct == b_distinct
    if nd >= 0:
        got = {abs(int(d)) for d in lrn.arrays.work[:nd]}
        assert got == b_close
    elif not small:
        assert b_n > K.ND_MAX


def test_slot_layout_sector_like_example_is_free():
    """Sorted numeric names plus the constant (a LIBSVM file): the narrow path, no pairs."""
    lrn = make(bits=24, n_models=104)
    idx = np.array(list(range(1, 200)) + [11650396], dtype=np.int64)
    assert K.slot_layout(lrn.arrays, idx, 0, len(idx)) == (True, 0)
    # a feature whose base lies 8 slots from the constant's is still found (104 h is a multiple
    # of 8 mod 2**24, so 8 is the smallest possible gap)
    W, mask = 104, (1 << 24) - 1
    c = (11650396 * W) & mask
    target = next(h for h in range(1, 1 << 24) if (h * W) & mask == c + 8)
    idx2 = np.array(sorted([1, 2, 3, target]) + [11650396], dtype=np.int64)
    distinct, nd = K.slot_layout(lrn.arrays, idx2, 0, len(idx2))
    assert distinct and nd == 1 and abs(int(lrn.arrays.work[0])) == 8


def test_slot_layout_one_feature_when_ids_alias():
    """One feature: free of close pairs (nd = 0) only if no two regressor ids share its slot;
    with W > size, ids m and m + size do, so nd is unknown and scores_independent says no."""
    idx = np.array([1023], dtype=np.int64)
    lrn = make(bits=4, n_models=17)
    lrn.ensure_scratch(1)
    assert K.slot_layout(lrn.arrays, idx, 0, 1) == (True, -1)
    assert not K.scores_independent(lrn.arrays, 0, 16, -1)
    lrn = make(bits=4, n_models=16)
    lrn.ensure_scratch(1)
    assert K.slot_layout(lrn.arrays, idx, 0, 1) == (True, 0)
    assert K.slot_layout(lrn.arrays, idx, 0, 0) == (True, 0)


@settings(deadline=None, max_examples=150)
@given(
    exs=st.lists(st.tuples(
        st.lists(st.tuples(st.integers(0, 3000), st.sampled_from([1.0, -1.0, 0.5, 2.0, 1e-30, 3.25, np.inf, np.nan])),
                 min_size=0, max_size=8),
        st.integers(0, 3), st.sampled_from([1.0, -1.0]), st.sampled_from([1.0, 0.5, 2.0, 0.0])),
        min_size=1, max_size=20),
    loss=st.sampled_from(["squared", "logistic", "hinge", "quantile"]),
    sgd=st.booleans(), power_t=st.sampled_from([0.5, 0.75]), bits=st.sampled_from([5, 16]),
    t0=st.sampled_from([0.0, 1.0]), reg=REGS,
)
def test_learn_rescore_equals_learn_then_score(exs, loss, sgd, power_t, bits, t0, reg):
    """``learn_rescore`` (with the distinct flag of ``slot_layout``) is bit-identical to
    ``learn`` followed by ``score``: weights, optimiser state, NaN count and the returned score
    (bits=5 makes duplicate slots common, so both paths run)."""
    W = 4
    lcfg = LearnerConfig(loss=loss, sgd=sgd, power_t=power_t, initial_t=t0, l1=reg[0], l2=reg[1])
    a_l = LinearLearner(lcfg, bits, W)
    b_l = LinearLearner(lcfg, bits, W)
    for feats, m, y, iw in exs:
        idx = np.array([h for h, _ in feats], np.int64)
        val = np.array([v for _, v in feats], np.float32)
        a, b = a_l.arrays, b_l.arrays
        f = K.score(a, idx, val, 0, len(idx), m)
        K.learn(a, idx, val, 0, len(idx), m, y, iw, K.clip_score(a, f))
        want = K.score(a, idx, val, 0, len(idx), m)
        distinct, _ = K.slot_layout(b, idx, 0, len(idx))
        got = K.learn_rescore(b, idx, val, 0, len(idx), m, y, iw, K.score(b, idx, val, 0, len(idx), m), distinct)
        assert np.float64(got).tobytes() == np.float64(want).tobytes() or (want != want and got != got)
        if iw > 0:
            K.end_example(a, iw)
            K.end_example(b, iw)
        assert_same_state(a, b)
        assert a.hp.tobytes() == b.hp.tobytes()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(0, 40), st.booleans(), st.randoms(use_true_random=False))
def test_kept_rows_are_numpys_selection(cols, size, averaged, rnd):
    """``kept_count``/``kept_slots``/``kept_column``: the rows with a non-zero bit pattern (a -0.0
    included) or, when averaged, a non-zero average, in order, as numpy selects them."""
    choices = [0.0, -0.0, 1.5, 0.0, 0.0]
    table = np.array([[rnd.choice(choices) for _ in range(cols)] for _ in range(size)], dtype=np.float32)
    table = table.reshape(size, cols)
    avg = np.array([rnd.choice([0.0, 0.0, 2.0]) for _ in range(size)]) if averaged else np.zeros(0)
    bits = table.view(np.uint32)
    want = (bits != 0).any(axis=1)
    if averaged:
        want |= avg != 0
    nz = np.flatnonzero(want)
    m = K.kept_count(bits, avg)
    assert m == nz.size
    slots = np.full(m + 1, -7, dtype=np.int64)
    assert K.kept_slots(bits, avg, slots) == m
    np.testing.assert_array_equal(slots[:m], nz)
    for c in range(cols):
        out = np.zeros(m + 1, dtype=np.uint32)
        assert K.kept_column(bits, avg, c, out) == m
        np.testing.assert_array_equal(out[:m], bits[nz, c])
