"""LOMtree's class-record table (``reductions/lomtree.py``, docs/ALGORITHMS.md §3.4): look-ups,
node resets and in-place growth against a plain dict; the training kernel's stop-and-grow path
against a table large enough never to grow; the 32-bit counts at their limit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lomtree_cli.errors import InputError
from lomtree_cli.kernels import lomtree_kernels as LT
from lomtree_cli.reductions.lomtree import LomTree
from tests.test_lomtree import CONST, _assert_same, _stream, make, run

HS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
NODES = 8


def _table():
    red = make(1 << 20, T=NODES)  # node rows for nodes 0..NODES-1, none of them linked: the table alone
    for v in range(NODES):
        LT.init_leaf(red.node_i, red.node_f, v)
    red.glob[LT.G_NNODES] = NODES
    return red


def _touch(red, ref, j, y, grow=True):
    """Count one example of ``y`` at node ``j``, growing first as the kernel asks (load 3/4)."""
    if grow and 4 * (red.glob[LT.G_OCC] + 2) > 3 * red.rec_i.shape[0]:
        red._grow_records(2)
    h = LT._record(red.node_i, red.rec_i, red.rec_f, red.glob, j, y)
    red.rec_i[h, LT.R_CN] += 1 + LT.N_ONE * (y % 2)  # n: odd labels only, to tell it from cnt
    red.rec_f[h, LT.R_MSUM] += 0.5 * y
    ref[(j, y)] = ref.get((j, y), 0) + 1


def _check(red, ref):
    """The table holds exactly ``ref``'s records, each found from its hash, counters right."""
    node, label, cnt, n, msum = red.records()
    got = {(int(a), int(b)): (int(c), int(d), float(m)) for a, b, c, d, m in zip(node, label, cnt, n, msum)}
    want = {key: (c, c * (key[1] % 2), 0.5 * key[1] * c) for key, c in ref.items()}
    assert got == want
    assert list(zip(node.tolist(), label.tolist())) == sorted(ref)
    assert red.glob[LT.G_LIVE] == len(ref)
    assert red.glob[LT.G_OCC] == int((red.rec_i[:, LT.R_KEY] != -1).sum())
    live = int(red.glob[LT.G_LIVE])
    for (j, y), c in ref.items():  # a look-up of a live record finds it (and creates nothing)
        h = LT._record(red.node_i, red.rec_i, red.rec_f, red.glob, j, y)
        assert red.rec_i[h, LT.R_CN] & LT.CNT_MAX == c
    assert red.glob[LT.G_LIVE] == live


ops = st.lists(st.one_of(
    st.tuples(st.just("touch"), st.integers(0, NODES - 1), st.integers(1, 40)),
    st.tuples(st.just("touch"), st.integers(0, NODES - 1), st.integers(1, (1 << 31) - 1)),
    st.tuples(st.just("reset"), st.integers(1, NODES - 1), st.just(0)),
    st.tuples(st.just("grow"), st.integers(0, 300), st.just(0))), max_size=400)


@HS
@given(ops)
def test_table_against_a_dict(seq):
    """Inserts, look-ups, node resets (generation bumps: deletes) and growths, of any size and
    in any order, keep the table equal to a dict of counts."""
    red, ref = _table(), {}
    for op, a, b in seq:
        if op == "touch":
            _touch(red, ref, a, b)
        elif op == "reset":
            LT._reset_node(red.node_i, red.node_f, red.glob, a)
            ref = {key: c for key, c in ref.items() if key[0] != a}
        else:
            red._grow_records(a)
            assert 2 * (len(ref) + a) <= red.rec_i.shape[0]
    _check(red, ref)


def _labels_homed(node, home, cap, count, start=1):
    """``count`` labels whose record at ``node`` hashes to slot ``home`` of a ``cap``-slot table."""
    out, y = [], start
    while len(out) < count:
        if LT._hash(node, y, cap - 1) == home:
            out.append(y)
        y += 1
    return out


@pytest.mark.parametrize("factor", [2, 8])
def test_growth_with_a_cluster_wrapping_round_the_end(factor):
    """A cluster at the end of the table, wrapping to its start, through an in-place growth: the
    records whose new probe would wrap past the last slot wait in the spill buffer; the records
    at the start, not yet rehashed when they are met, are not skipped over."""
    cap = LT.MIN_HASH_CAP
    new = cap * factor
    red, ref = _table(), {}
    assert red.rec_i.shape[0] == cap
    # homes: the last slot in the old table and in the new one (so they wrap in both), and the first
    for y in _labels_homed(1, new - 1, new, 6):
        _touch(red, ref, 1, y, grow=False)
    for y in _labels_homed(2, 0, new, 4):
        _touch(red, ref, 2, y, grow=False)
    assert red.rec_i[cap - 1, LT.R_KEY] != -1 and red.rec_i[0, LT.R_KEY] != -1
    _check(red, ref)
    red._grow_records(new // 2 - len(ref))
    assert red.rec_i.shape[0] == new
    _check(red, ref)
    for y in range(1, 30):
        _touch(red, ref, 3, y)
    _check(red, ref)


def test_growth_drops_stale_records_and_keeps_the_size_when_they_are_many():
    red, ref = _table(), {}
    for y in range(1, 40):
        _touch(red, ref, 5, y, grow=False)
    _touch(red, ref, 4, 7, grow=False)
    LT._reset_node(red.node_i, red.node_f, red.glob, 5)
    ref = {(4, 7): 1}
    assert red.glob[LT.G_OCC] == 40
    red._grow_records(2)
    assert red.rec_i.shape[0] == LT.MIN_HASH_CAP
    assert red.glob[LT.G_OCC] == 1
    _check(red, ref)


def test_growth_allocates_the_new_table_and_nothing_more():
    """A growth allocates the larger table and copies the old rows in: no third table or
    temporary of table size (the rehash works within the new array)."""
    import tracemalloc

    red, ref = _table(), {}
    red._grow_records(3000)
    old = red.rec_i.shape[0]
    for y in range(1, 3 * old // 4 + 2):
        _touch(red, ref, 0, y, grow=False)
    tracemalloc.start()
    try:
        red._grow_records(2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert red.rec_i.shape[0] == 2 * old
    assert red.rec_i.base is None and red.rec_f.base is red.rec_i
    assert peak < red.rec_i.nbytes + old * LT.RF * 8 // 4
    _check(red, ref)


@pytest.mark.parametrize("L", [0, 3])
def test_training_that_grows_the_table_equals_training_that_never_does(L):
    """The kernel stops before an example that needs a larger table and resumes after the growth;
    the model, the progressive predictions and the label prior's statistics are those of a run
    whose table was large enough from the start (so no example is predicted or counted twice)."""
    ex = _stream(n=1500, k=40, seed=3)
    a = make(40, T=9, L=L, up=1)
    b = make(40, T=9, L=L, up=1)
    b.rec_i = np.full((1 << 14, LT.RF), -1, dtype=np.int64)
    b.rec_f = b.rec_i.view(np.float64)
    pa = run(a, ex)
    pb = run(b, ex)
    assert a.rec_i.shape[0] < b.rec_i.shape[0]
    assert pa == pb
    _assert_same(a, b)
    np.testing.assert_array_equal(a.prior, b.prior)


# -- 32-bit counts -------------------------------------------------------------------------------
def _near_the_limit(left):
    """A trained tree whose root record of label 1 is ``left`` examples short of ``CNT_MAX``,
    its n as large (n above 2^31 sets the packed word's sign bit)."""
    red = make(4, T=1, rs=0)
    run(red, [(1, [CONST], 1.0), (2, [(3, 1.0), CONST], 1.0)] * 3)
    assert red.node_i[0, LT.N_INTERNAL] == 1
    st_, meta = red.state(), red.meta()
    r = int(np.flatnonzero(st_["cls_label"][:st_["cls_ptr"][1]] == 1)[0])
    dc = LT.CNT_MAX - left - int(st_["cls_cnt"][r])
    st_["cls_cnt"][r] += dc
    st_["cls_n"][r] += dc
    st_["En"][0] += dc
    st_["maxcnt"][0] = st_["cls_cnt"][r]
    st_["maxlab"][0] = 1
    big = LomTree(red.config, red.learner)
    big.load_state(st_, meta)
    return big


def _root_record(red, y):
    node, label, cnt, n, msum = red.records()
    i = int(np.flatnonzero((node == 0) & (label == y))[0])
    return int(cnt[i]), int(n[i]), float(msum[i])


def test_counts_reach_the_limit_exactly_then_training_refuses():
    red = _near_the_limit(3)
    c0, n0, m0 = _root_record(red, 1)
    assert c0 == LT.CNT_MAX - 3 and n0 > 1 << 31
    run(red, [(1, [CONST], 1.0)] * 3)
    c1, n1, m1 = _root_record(red, 1)
    assert (c1, n1) == (LT.CNT_MAX, n0 + 3) and m1 != m0
    twin = _near_the_limit(3)
    run(twin, [(1, [CONST], 1.0)] * 3 + [(2, [CONST], 1.0)])
    with pytest.raises(InputError, match=r"<stdin>:2: lomtree cannot train on label 1: .*4,294,967,295"):
        run(red, [(2, [CONST], 1.0), (1, [CONST], 1.0)])
    _assert_same(red, twin)  # the refused example changed nothing
    run(red, [(2, [CONST], 1.0)])  # other labels go on
    assert LT.root_count(red.node_i, red.rec_i, 1) == LT.CNT_MAX


def _fix_max(a):
    """maxcnt and maxlab of every node from its records (what load_state checks them against)."""
    ptr = a["cls_ptr"]
    for v in range(ptr.shape[0] - 1):
        if ptr[v + 1] > ptr[v]:
            i = ptr[v] + int(np.argmax(a["cls_cnt"][ptr[v]:ptr[v + 1]]))
            a["maxcnt"][v], a["maxlab"][v] = a["cls_cnt"][i], a["cls_label"][i]


def test_counts_beyond_32_bits_or_above_the_roots_are_rejected_on_load():
    red = make(12, T=5)
    run(red, _stream())
    good, meta = red.state(), red.meta()
    root = int(good["cls_ptr"][1])
    child = root + int(np.flatnonzero(good["cls_n"][root:] == 0)[0])  # a record of a leaf: n is free
    child_root = int(np.flatnonzero(good["cls_label"][:root] == good["cls_label"][child])[0])

    def load(mutate):
        arrays = {k: v.copy() for k, v in good.items()}
        mutate(arrays)
        _fix_max(arrays)
        LomTree(red.config, red.learner).load_state(arrays, dict(meta))

    load(lambda a: None)
    load(lambda a: a["cls_cnt"].__setitem__(child, a["cls_cnt"][child_root]))
    for mutate in (lambda a: a["cls_cnt"].__setitem__(child, a["cls_cnt"][child_root] + 1),
                   lambda a: a["cls_cnt"].__setitem__(child_root, LT.CNT_MAX + 1)):
        with pytest.raises(ValueError, match="root's record|bad class records"):
            load(mutate)
