"""Multi-label metrics (lomtree_cli/mlmetrics.py): hand-computed cases, a slow per-example
reference, scikit-learn's F1, and batching that does not change a bit of the result."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.mlmetrics import MultilabelScores, propensities, scores

HYP = settings(deadline=None, max_examples=60)


def csr(sets):
    """CSR (ptr, ids) of a list of label collections, ids in the order given."""
    ptr = np.zeros(len(sets) + 1, np.int64)
    ptr[1:] = np.cumsum([len(s) for s in sets])
    ids = np.array([l for s in sets for l in s], np.int64)
    return ptr, ids


def ranking(rows, width):
    """(n, width) int64 ranking, rows padded with 0."""
    top = np.zeros((len(rows), width), np.int64)
    for i, r in enumerate(rows):
        top[i, :len(r)] = r
    return top


# --- hand-computed -------------------------------------------------------------------------

# example 1: Y = {1, 2}, ranking 1 3 2 . .      predicted set {1, 3}
# example 2: Y = {4},    ranking 5 6 7 8 4      predicted set {4, 5}
# example 3: Y = {},     ranking 1 2 3 4 5      predicted set {}
TOP = ranking([[1, 3, 2], [5, 6, 7, 8, 4], [1, 2, 3, 4, 5]], 5)
Y = [[1, 2], [4], []]
P = [[1, 3], [4, 5], []]
# 1/p by label id (index 0 unused)
INV = np.array([0.0, 2.0, 4.0, 1.0, 8.0, 1.0, 1.0, 1.0, 1.0])


def test_precision_and_ndcg_by_hand():
    lptr, lids = csr(Y)
    got = scores(TOP, lptr, lids)
    # hits in the top 1 / 3 / 5: example 1: 1, 2 (labels 1, 2 at ranks 0, 2), 2; example 2: 0, 0,
    # 1 (label 4 at rank 4); example 3: none (and counts with 0)
    assert got["p@1"] == pytest.approx((1 / 1 + 0 + 0) / 3)          # 1/3
    assert got["p@3"] == pytest.approx((2 / 3 + 0 + 0) / 3)          # 2/9
    assert got["p@5"] == pytest.approx((2 / 5 + 1 / 5 + 0) / 3)      # 1/5
    # nDCG@1: example 1 DCG = 1 / log2(2) = 1 = IDCG                 -> (1 + 0 + 0) / 3
    assert got["ndcg@1"] == pytest.approx(1 / 3)
    # nDCG@3: example 1 DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.6309297535714575
    #   -> 1.5 / 1.6309297535714575 = 0.9197207891481876; example 2: 0
    assert got["ndcg@3"] == pytest.approx(0.9197207891481876 / 3)
    # nDCG@5: example 1 as at 3; example 2 DCG = 1/log2(6) = 0.38685280723454163, IDCG = 1
    assert got["ndcg@5"] == pytest.approx((0.9197207891481876 + 0.38685280723454163) / 3)
    assert got["examples"] == 3
    assert set(got) == {"p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5", "examples"}


def test_psp_by_hand():
    lptr, lids = csr(Y)
    got = scores(TOP, lptr, lids, inv_propensity=INV)
    # k = 1: found 1/p_1 = 2 (example 1); ideal: example 1's best label 2 (4), example 2's 4 (8)
    #   -> 2 / (4 + 8) = 1/6   (the 1/k of both sums cancels)
    assert got["psp@1"] == pytest.approx(2 / 12)
    # k = 3: found 2 + 4 = 6; ideal 4 + 2 = 6 and 8 -> 6 / 14 = 3/7
    assert got["psp@3"] == pytest.approx(6 / 14)
    # k = 5: found 6 + 8 = 14; ideal 14 -> 1
    assert got["psp@5"] == pytest.approx(1.0)


def test_f1_by_hand():
    lptr, lids = csr(Y)
    pptr, pids = csr(P)
    got = scores(TOP, lptr, lids, pptr=pptr, pids=pids)
    # TP: (1, 1), (2, 4) = 2; FP: (1, 3), (2, 5) = 2; FN: (1, 2) = 1 -> 2*2 / (4 + 2 + 1) = 4/7
    assert got["micro_f1"] == pytest.approx(4 / 7)
    # per label: 1 -> 1, 2 -> 0 (missed), 3 -> 0 (wrong), 4 -> 1, 5 -> 0; labels 6, 7, 8 (only
    # in rankings) never true nor predicted: left out -> 2 / 5
    assert got["macro_f1"] == pytest.approx(2 / 5)
    # k_labels only bounds the ids; the never-occurring labels 6..20 still stay out of the mean
    assert scores(TOP, lptr, lids, pptr=pptr, pids=pids, k_labels=20)["macro_f1"] == pytest.approx(2 / 5)


def test_psp_labels_past_the_propensity_array_weigh_1():
    # example 1: Y = {9}, ranking 9 (past the array of 1/p for labels 0..2) -> found 1, ideal 1
    # example 2: Y = {1}, 1/p_1 = 3, ranking 2 -> found 0, ideal 3
    lptr, lids = csr([[9], [1]])
    got = scores(ranking([[9], [2]], 1), lptr, lids, ks=(1,), inv_propensity=np.array([0.0, 3.0, 5.0]))
    assert got["psp@1"] == pytest.approx(1 / (1 + 3))


def test_narrow_ranking_and_custom_ks():
    # one column only: P@2 = 1 hit / 2; nDCG@2 with |Y| = 2: 1 / (1 + 1/log2(3))
    lptr, lids = csr([[1, 2]])
    got = scores(np.array([[2]]), lptr, lids, ks=(2, 1))
    assert list(got) == ["p@2", "p@1", "ndcg@2", "ndcg@1", "examples"]
    assert got["p@2"] == pytest.approx(0.5)
    assert got["ndcg@2"] == pytest.approx(1 / 1.6309297535714575)
    # columns past max(ks) are not read, and a ranking with a 0 in the middle just skips it
    assert scores(np.array([[0, 2, 7, 1]]), lptr, lids, ks=(2,))["p@2"] == pytest.approx(0.5)


def test_lptr_may_point_into_a_longer_array():
    # lptr = [2, 4, 5]: example 0 has lids[2:4] = {1, 2}, example 1 has lids[4:5] = {4}
    top = ranking([[1, 3], [4]], 2)
    a = scores(top, np.array([2, 4, 5]), np.array([7, 7, 1, 2, 4, 9]))
    b = scores(top, *csr([[1, 2], [4]]))
    assert a == b


def test_empty_stream_and_empty_labels():
    acc = MultilabelScores(ks=(1,), inv_propensity=np.ones(3))
    assert acc.result() == {"p@1": 0.0, "ndcg@1": 0.0, "psp@1": 0.0, "examples": 0}
    acc.add(np.zeros((2, 0), np.int64), np.zeros(3, np.int64), np.zeros(0, np.int64),
            np.zeros(3, np.int64), np.zeros(0, np.int64))
    assert acc.result() == {"p@1": 0.0, "ndcg@1": 0.0, "psp@1": 0.0, "micro_f1": 0.0,
                            "macro_f1": 0.0, "examples": 2}


# --- propensities --------------------------------------------------------------------------

def test_propensities_by_hand():
    # N = 100, a = 0.55, b = 1.5: C = (ln 100 - 1) * 2.5^0.55 = 3.605170185988092 * 1.655262989969583
    #   = 5.967504781407847
    # N_l = 0:  C * 1.5^-0.55  = 5.967504781407847 * 0.8001102010732514 = 4.774661450557821
    #           p = 1 / 5.774661450557821 = 0.17317032497262708
    # N_l = 1:  C * 2.5^-0.55 = ln 100 - 1 = 3.605170185988092 -> p = 1 / 4.605170185988092
    # N_l = 10: C * 11.5^-0.55 = 5.967504781407847 * 0.26098538498507357 = 1.5574315327759942
    #           p = 1 / 2.5574315327759942 = 0.3910173106040255
    p = propensities(np.array([0, 0, 1, 10]), 100)
    assert p.dtype == np.float64 and p.shape == (4,)
    want = [0.17317032497262708, 1 / 4.605170185988092, 0.3910173106040255]
    assert p[1:] == pytest.approx(want, rel=1e-12)
    # more examples of a label: likelier to be tagged; a head label's propensity tends to 1
    q = propensities(np.array([0, 1e9]), 100)
    assert q[1] == pytest.approx(1.0, abs=1e-4)
    # pyxclib's form of the inverse: 1 + C (N_l + b)^-a, here with a, b of Amazon
    C = (math.log(1000) - 1) * 3.6 ** 0.6
    assert 1 / propensities(np.array([0, 5]), 1000, a=0.6, b=2.6)[1] == pytest.approx(1 + C * 7.6 ** -0.6)
    with pytest.raises(ValueError):
        propensities(np.array([0, 1]), 0)


# --- a slow reference, per example, with sets ----------------------------------------------

def reference(top, Y, ks, inv=None, P=None):
    n = len(Y)
    out = {}
    weight = (lambda l: inv[l] if l < len(inv) else 1.0) if inv is not None else None
    for k in ks:
        rows = [[int(l) for l in top[i][:k]] + [0] * max(0, k - top.shape[1]) for i in range(n)]
        hits = [[j for j, l in enumerate(r) if l != 0 and l in set(Y[i])] for i, r in enumerate(rows)]
        out[f"p@{k}"] = sum(len(h) / k for h in hits) / n if n else 0.0
        nd = 0.0
        for i in range(n):
            if Y[i]:
                dcg = sum(1 / math.log2(j + 2) for j in hits[i])
                nd += dcg / sum(1 / math.log2(j + 2) for j in range(min(k, len(Y[i]))))
        out[f"ndcg@{k}"] = nd / n if n else 0.0
        if inv is not None:
            num = sum(sum(weight(rows[i][j]) for j in hits[i]) / k for i in range(n))
            den = sum(sum(sorted((weight(l) for l in Y[i]), reverse=True)[:k]) / k for i in range(n))
            out[f"psp@{k}"] = num / den if den > 0 else 0.0
    out = {**{key: out[key] for key in out if key.startswith("p@")},
           **{key: out[key] for key in out if key.startswith("ndcg@")},
           **{key: out[key] for key in out if key.startswith("psp@")}}
    if P is not None:
        tp, fp, fn = {}, {}, {}
        for y, p in zip(Y, P):
            y, p = set(y), set(p)
            for l in y & p:
                tp[l] = tp.get(l, 0) + 1
            for l in p - y:
                fp[l] = fp.get(l, 0) + 1
            for l in y - p:
                fn[l] = fn.get(l, 0) + 1
        T, F_P, F_N = sum(tp.values()), sum(fp.values()), sum(fn.values())
        out["micro_f1"] = 2 * T / (2 * T + F_P + F_N) if T + F_P + F_N else 0.0
        labels = set(tp) | set(fp) | set(fn)
        f1 = [2 * tp.get(l, 0) / (2 * tp.get(l, 0) + fp.get(l, 0) + fn.get(l, 0)) for l in labels]
        out["macro_f1"] = sum(f1) / len(f1) if f1 else 0.0
    out["examples"] = n
    return out


@st.composite
def streams(draw, max_n=10):
    """(top, Y, P, ks, inv, k_labels): random sets over labels 1..L, rankings of width K."""
    L = draw(st.integers(1, 12))
    n = draw(st.integers(0, max_n))
    K = draw(st.integers(0, 7))
    lab = st.integers(1, L)
    Y = [draw(st.lists(lab, unique=True, max_size=L)) for _ in range(n)]
    P = [draw(st.lists(lab, unique=True, max_size=L)) for _ in range(n)]
    top = ranking([draw(st.lists(lab, unique=True, max_size=min(K, L))) for _ in range(n)], K)
    ks = tuple(draw(st.lists(st.integers(1, 6), unique=True, min_size=1, max_size=4)))
    # sometimes shorter than L + 1, so that labels past its end occur
    inv = np.array(draw(st.lists(st.floats(0.0, 50.0), max_size=L + 2)), np.float64)
    return top, Y, P, ks, inv, L


@HYP
@given(streams())
def test_matches_reference(s):
    top, Y, P, ks, inv, L = s
    lptr, lids = csr(Y)
    pptr, pids = csr(P)
    got = scores(top, lptr, lids, ks=ks, inv_propensity=inv, pptr=pptr, pids=pids, k_labels=L)
    want = reference(top, Y, ks, inv, P)
    assert list(got) == list(want)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert all(type(v) is float for key, v in got.items() if key != "examples")
    assert type(got["examples"]) is int


@HYP
@given(streams(max_n=14), st.data())
def test_batches_give_the_same_bits(s, data):
    top, Y, P, ks, inv, L = s
    n = len(Y)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *cuts, n]
    for k_labels in (None, L):
        whole = MultilabelScores(ks, inv_propensity=inv, k_labels=k_labels)
        whole.add(top, *csr(Y), *csr(P))
        parts = MultilabelScores(ks, inv_propensity=inv, k_labels=k_labels)
        for a, b in zip(bounds[:-1], bounds[1:]):
            parts.add(top[a:b], *csr(Y[a:b]), *csr(P[a:b]))
        assert parts.result() == whole.result()  # exactly, not approximately


def random_sets(rng, n, L, density):
    return [[int(l) for l in rng.permutation(np.arange(1, L + 1)) if rng.random() < density]
            for _ in range(n)]


def test_f1_matches_scikit_learn():
    # seeded random streams rather than hypothesis: scikit-learn's checks cost milliseconds a call
    from sklearn.metrics import f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    rng = np.random.default_rng(7)
    for case in range(16):
        L = int(rng.integers(1, 12))
        n = int(rng.integers(1, 40))
        Y = random_sets(rng, n, L, rng.uniform(0.0, 0.5))
        P = random_sets(rng, n, L, rng.uniform(0.0, 0.5))
        # k_labels past the ids in use: labels L + 1.. never occur and stay out of the mean
        got = scores(np.zeros((n, 1), np.int64), *csr(Y), pptr=csr(P)[0], pids=csr(P)[1], k_labels=L + 5)
        occurring = sorted({l for y in Y for l in y} | {l for p in P for l in p})
        if not occurring:
            assert got["micro_f1"] == 0.0 and got["macro_f1"] == 0.0
            continue
        # the label columns that occur: there scikit-learn's zero_division never comes into play
        # for the macro mean, so the two conventions agree
        mlb = MultiLabelBinarizer(classes=occurring)
        Ym, Pm = mlb.fit_transform(Y), mlb.transform(P)
        # one column reads as a binary target to scikit-learn (micro would then also count the
        # negatives as a class); micro and macro over one label are both that label's F1
        avg = ("binary", "binary") if len(occurring) == 1 else ("micro", "macro")
        assert got["micro_f1"] == pytest.approx(f1_score(Ym, Pm, average=avg[0], zero_division=0), rel=1e-12)
        assert got["macro_f1"] == pytest.approx(f1_score(Ym, Pm, average=avg[1], zero_division=0), rel=1e-12)


# --- refused input -------------------------------------------------------------------------

def test_bad_input_is_refused_and_counts_nothing():
    acc = MultilabelScores(ks=(1, 2), inv_propensity=INV, k_labels=8)
    acc.add(TOP, *csr(Y), *csr(P))
    before = acc.result()
    lptr, lids = csr(Y)
    pptr, pids = csr(P)
    bad = [
        ((ranking([[1, 1]], 2), *csr([[1]]), *csr([[1]])), ValueError),     # label twice in a ranking
        ((ranking([[-1]], 1), *csr([[1]]), *csr([[1]])), ValueError),       # negative id
        ((ranking([[1]], 1), *csr([[2, 2]]), *csr([[1]])), ValueError),     # label twice in Y
        ((ranking([[1]], 1), *csr([[0]]), *csr([[1]])), ValueError),        # 0 is no label
        ((ranking([[1]], 1), np.array([0, 1, 1]), np.array([1]), *csr([[1]])), ValueError),  # n + 1
        ((ranking([[9]], 1), *csr([[1]]), *csr([[1]])), ValueError),       # above k_labels
        ((TOP, lptr, lids, pptr, None), ValueError),                       # pids missing
        ((TOP, lptr, lids), ValueError),                                   # batches without P
        ((TOP.astype(float), lptr, lids, pptr, pids), TypeError),         # not integers
    ]
    for args, exc in bad:
        with pytest.raises(exc):
            acc.add(*args)
    assert acc.result() == before
    with pytest.raises(ValueError):
        MultilabelScores(ks=(1, 1))
    with pytest.raises(ValueError):
        MultilabelScores(ks=(0,))


def test_import_does_not_load_numba():
    code = "import sys, lomtree_cli.mlmetrics; assert 'numba' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@HYP
@given(streams(max_n=14), st.data())
def test_merged_accumulators_give_the_same_bits(s, data):
    """Batches scored by separate accumulators then merged (Dask's prediction ranges) give exactly
    the one accumulator's result, with and without thresholded sets and propensities."""
    top, Y, P, ks, inv, L = s
    n = len(Y)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *cuts, n]
    for k_labels, thresholded, prop in ((None, True, inv), (L, False, None)):
        extra = (lambda a, b: csr(P[a:b])) if thresholded else (lambda a, b: ())
        whole = MultilabelScores(ks, inv_propensity=prop, k_labels=k_labels)
        whole.add(top, *csr(Y), *extra(0, n))
        merged = MultilabelScores(ks, inv_propensity=prop, k_labels=k_labels)
        for a, b in zip(bounds[:-1], bounds[1:]):
            part = MultilabelScores(ks, inv_propensity=prop, k_labels=k_labels)
            part.add(top[a:b], *csr(Y[a:b]), *extra(a, b))
            merged.merge(part)
        assert merged.result() == whole.result()
    with pytest.raises(ValueError, match="different settings"):
        MultilabelScores((1, 3)).merge(MultilabelScores((1, 5)))
