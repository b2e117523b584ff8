"""Numba kernels of LOMtree (``reductions/lomtree.py``, whose docstring describes the node and
class-record arrays they work on): training and prediction of a chunk, the per-leaf candidate
labels and their prior, swaps, and the record hash table."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import jit, kernel, prefetch_row

from . import linear as K

# node columns
N_PARENT = 0
N_LEFT = 1
N_RIGHT = 2
N_INTERNAL = 3
N_MODEL = 4
N_C = 5
N_EN = 6
N_MAXCNT = 7
N_MAXLAB = 8
N_NCLS = 9
N_GEN = 10
NF = 11

# record columns: one int64 row of 32 bytes a record, msum read through a float64 view of the rows
R_KEY = 0  # node << 32 | label; -1 = empty slot
R_MSUM = 1
R_GEN = 2
R_CN = 3  # cnt | n << 32, both below 2^32 (``CNT_MAX``)
RF = 4
#: the most examples of one label a class record counts (32-bit counts, as VW's ``log_multi``):
#: training refuses an example whose label the root has counted this often (``lomtree_process``)
CNT_MAX = 0xFFFFFFFF
N_ONE = 1 << 32  # n's unit in R_CN

# glob: counters, int64
G_NNODES = 0
G_TUSED = 1
G_NSWAPS = 2
G_OCC = 3  # occupied hash slots (live + stale)
G_LIVE = 4  # live records
G_T = 5  # max internal nodes
G_RS = 6  # swap resistance
G_DEPTH = 7  # depth bound (deepest node ever created)
G_NODECAP_MAX = 8  # 2T + 1
G_SHORTCUTS = 9  # 1: reuse prediction scores and fuse re-scores (exact); 0: score afresh (tests)
G_LEAFL = 10  # L: candidate labels kept per leaf (0: the leaf predicts its most frequent label)
G_W0 = 11  # router regressors max(1, T); label y's regressor is W0 + y - 1 (when L > 0)
G_UP = 12  # the candidates are those of the node this many levels above the leaf (or the root)
G_TOPM = 13  # M: the leaf trains the label and the M best-scored candidates (0: every candidate)
G_RECMAX = 14  # N: the most live class records (``--max-class-records``; 0: no bound)
NG = 15

#: a prune (``prune_records``) keeps at most this share of ``N`` live records
PRUNE_KEEP_NUM = 3
PRUNE_KEEP_DEN = 4
#: counts from this one on fall in one bin of the prune's histogram
PRUNE_HIST = 4096

#: label-prior weights beta, chosen among by progressive validation (``--label-prior -1``); the
#: first is the choice before any statistics (0: the label regressors alone)
BETAS = np.array([0.0, 0.02, 0.05, 0.1, 0.2])
NB = BETAS.shape[0]
# prior: float64, (NB + 3,): correct progressive rankings per beta, then the beta in use, then 1 if
# it is chosen automatically, then the importance of the label's own update at the leaf
# (``--leaf-positive-weight``)
P_BETA = NB
P_AUTO = NB + 1
P_POSW = NB + 2
NP = NB + 3

#: ``LOG_COUNT[c] = log(c)`` (``math.log``: the C library's, as the kernels' own ``np.log``) for
#: the counts of candidates below ``LOG_SMALL``: the log shares of 64 candidates per example
#: were 64 calls of ``log``, 2.5% of training at scale
LOG_SMALL = 4096
LOG_COUNT = np.array([-np.inf] + [math.log(c) for c in range(1, LOG_SMALL)])

MIN_HASH_CAP = 64
NODE_CAP0 = 1024
#: ``_prefetch_next`` prefetches the label regressors' rows of the next example for at most this
#: many labels (KJV book: 66; not KJV next word's 5,001)
PREFETCH_LABELS = 128


class LeafWork(NamedTuple):
    """Scratch of the leaf's candidates (``L = max(1, --leaf-labels)``), reused by every example.

    fs : float64 (2, L): the prediction's candidate scores (row 0) and log count shares (row 1)
    cand : int64 (L + 1,): the regressors the prediction scored, in ``fs``'s order, ``-1`` after
        the last (training takes their scores when nothing trained since shares a slot with them)
    tm, tf : int64, float64 (L,): the regressors of the training leaf's candidates and their
        pre-update scores
    ms, ys, yh : int64, float64, float64 (L,): a batch of candidates trained together
        (``K.learn_block``): regressors, targets, pre-update predictions
    work : float64 (L, 4), act : int64 (L,): ``K.learn_block``'s scratch
    sel : int64 (L,): 1 for the candidates the leaf trains (``_select_trained``)
    """

    fs: np.ndarray
    cand: np.ndarray
    tm: np.ndarray
    tf: np.ndarray
    ms: np.ndarray
    ys: np.ndarray
    yh: np.ndarray
    work: np.ndarray
    act: np.ndarray
    sel: np.ndarray


def leaf_work(L: int) -> LeafWork:
    L = max(1, int(L))
    return LeafWork(np.zeros((2, L)), np.full(L + 1, -1, dtype=np.int64), np.zeros(L, dtype=np.int64), np.zeros(L),
                    np.zeros(L, dtype=np.int64), np.zeros(L), np.zeros(L), np.zeros((L, 4)),
                    np.zeros(L, dtype=np.int64), np.zeros(L, dtype=np.int64))


@kernel(inline="always")
def _hash(node, label, hmask):
    z = np.uint64(node) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(label)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z & np.uint64(hmask))


@kernel(inline="always")
def _empty_leaf(node_i, node_f, v):
    """The fields of an empty leaf shared by a new node and a recycled one: no children, no
    regressor, no statistics (parent, C and the record bookkeeping are the callers')."""
    node_i[v, N_LEFT] = -1
    node_i[v, N_RIGHT] = -1
    node_i[v, N_INTERNAL] = 0
    node_i[v, N_MODEL] = -1
    node_i[v, N_EN] = 0
    node_i[v, N_MAXCNT] = 0
    node_i[v, N_MAXLAB] = 1
    node_f[v] = 0.0


@kernel()
def init_leaf(node_i, node_f, v):
    _empty_leaf(node_i, node_f, v)
    node_i[v, N_PARENT] = -1
    node_i[v, N_C] = 0
    node_i[v, N_NCLS] = 0
    node_i[v, N_GEN] = 0


@kernel()
def _reset_node(node_i, node_f, glob, v):
    """SetNode of the paper: empty leaf, class records dropped by a generation bump (O(1))."""
    glob[G_LIVE] -= node_i[v, N_NCLS]
    node_i[v, N_NCLS] = 0
    node_i[v, N_GEN] += 1
    _empty_leaf(node_i, node_f, v)


@kernel()
def _record(node_i, rec_i, rec_f, glob, j, y):
    """Slot of the live record (j, y), created (zeroed) if absent."""
    hmask = rec_i.shape[0] - 1
    g = node_i[j, N_GEN]
    key = (j << 32) | y
    h = _hash(j, y, hmask)
    while True:
        kh = rec_i[h, R_KEY]
        if kh == -1:
            rec_i[h, R_KEY] = key
            rec_i[h, R_GEN] = g
            rec_i[h, R_CN] = 0
            rec_f[h, R_MSUM] = 0.0
            glob[G_OCC] += 1
            glob[G_LIVE] += 1
            node_i[j, N_NCLS] += 1
            return h
        if kh == key:
            if rec_i[h, R_GEN] != g:
                rec_i[h, R_GEN] = g
                rec_i[h, R_CN] = 0
                rec_f[h, R_MSUM] = 0.0
                glob[G_LIVE] += 1
                node_i[j, N_NCLS] += 1
            return h
        h = (h + 1) & hmask


@kernel(inline="always")
def _find(rec_i, j, y):
    """Slot of the record (j, y), live or stale, or -1; reads only."""
    hmask = rec_i.shape[0] - 1
    key = (j << 32) | y
    h = _hash(j, y, hmask)
    while True:
        kh = rec_i[h, R_KEY]
        if kh == key:
            return h
        if kh == -1:
            return -1
        h = (h + 1) & hmask


@kernel()
def root_count(node_i, rec_i, y):
    """cnt of the root's live record of label ``y`` (0 if none); reads only."""
    h = _find(rec_i, np.int64(0), np.int64(y))
    if h < 0 or rec_i[h, R_GEN] != node_i[0, N_GEN]:
        return 0
    return rec_i[h, R_CN] & CNT_MAX


@kernel()
def find_slots(rec_i, nodes, labels, out):
    """``out[q]`` = the slot of the live record (``nodes[q]``, ``labels[q]``), which exists."""
    for q in range(nodes.shape[0]):
        out[q] = _find(rec_i, nodes[q], np.int64(labels[q]))


@jit()
def rehash_in_place(node_i, rec_i, old, glob):
    """Rehash the table's first ``old`` rows (a table of ``old`` slots) into all of ``rec_i``
    (``old`` or a power-of-two multiple of it slots: the caller copied the old rows into a
    larger array), dropping the stale records; no second table.

    The old slots are visited once, cyclically from an empty one; each record is taken out and
    inserted again from its new hash. A record whose new home is in the old range has the same
    home as before, and every slot from that home to its old slot was occupied, so visited
    already: it lands there or before, or past the old range (which holds only records inserted
    again). A record whose probe would wrap from the last slot to the first (where records not yet
    visited may be) waits in a small spill buffer and is inserted last. So no probe chain ever
    crosses a slot that is emptied later, and every look-up finds its record."""
    cap = rec_i.shape[0]
    hmask = cap - 1
    for r in range(old, cap):
        rec_i[r, R_KEY] = -1
    e = 0
    while rec_i[e, R_KEY] != -1:  # load < 1: there is one
        e += 1
    spill = np.empty((16, RF), dtype=np.int64)
    ns = 0
    live = 0
    for t in range(1, old + 1):
        r = e + t if e + t < old else e + t - old
        key = rec_i[r, R_KEY]
        if key == -1:
            continue
        rec_i[r, R_KEY] = -1
        nd = key >> 32
        if rec_i[r, R_GEN] != node_i[nd, N_GEN]:
            continue
        live += 1
        h = _hash(nd, key & 0xFFFFFFFF, hmask)
        wrap = False
        while rec_i[h, R_KEY] != -1:
            h = (h + 1) & hmask
            if h == 0 and cap > old:
                wrap = True
                break
        if wrap:
            if ns == spill.shape[0]:
                more = np.empty((2 * ns, RF), dtype=np.int64)
                more[:ns] = spill
                spill = more
            for c in range(RF):
                spill[ns, c] = rec_i[r, c]
            spill[ns, R_KEY] = key
            ns += 1
            continue
        if h != r:
            for c in range(1, RF):  # msum's bits with the rest
                rec_i[h, c] = rec_i[r, c]
        rec_i[h, R_KEY] = key
    for q in range(ns):
        key = spill[q, R_KEY]
        h = _hash(key >> 32, key & 0xFFFFFFFF, hmask)
        while rec_i[h, R_KEY] != -1:
            h = (h + 1) & hmask
        for c in range(RF):
            rec_i[h, c] = spill[q, c]
    glob[G_OCC] = live
    glob[G_LIVE] = live


@jit()
def prune_records(node_i, node_top, rec_i, glob):
    """Drop the live class records of lowest count until at most ``N * 3/4`` are live (``N =
    glob[G_RECMAX]``), marking them stale (the caller's ``rehash_in_place`` removes them); returns
    the count threshold ``t``.

    Never dropped: the root's records (every label's, which bound all counts), and at every node
    the records of its candidate list (``node_top``) and of ``maxlab``, so the node's lists and
    majority label are those of its remaining records. The others are dropped by count: all with
    ``cnt <= t`` for the least ``t >= 1`` that brings the live records to the target (counts of
    ``PRUNE_HIST`` and more share one bin; ``t = PRUNE_HIST`` drops them all). Depends on the
    records alone, not on the table's layout. A dropped label met again at that node starts a
    new record, as a label never seen there."""
    cap = rec_i.shape[0]
    L = glob[G_LEAFL]
    prot = np.zeros(cap, dtype=np.uint8)
    for v in range(glob[G_NNODES]):
        if node_i[v, N_MAXCNT] > 0:
            h = _find(rec_i, np.int64(v), node_i[v, N_MAXLAB])
            if h >= 0:
                prot[h] = 1
        for q in range(L):
            c = node_top[v, q]
            if c == 0:
                break
            h = _find(rec_i, np.int64(v), c)
            if h >= 0:
                prot[h] = 1
    hist = np.zeros(PRUNE_HIST + 1, dtype=np.int64)
    live = 0
    for r in range(cap):
        key = rec_i[r, R_KEY]
        if key == -1:
            continue
        nd = key >> 32
        if rec_i[r, R_GEN] != node_i[nd, N_GEN]:
            continue
        live += 1
        if nd != 0 and prot[r] == 0:
            hist[min(rec_i[r, R_CN] & CNT_MAX, PRUNE_HIST)] += 1
    keep = glob[G_RECMAX] * PRUNE_KEEP_NUM // PRUNE_KEEP_DEN
    t = 0
    drop = 0
    while t < PRUNE_HIST and live - drop > keep:
        t += 1
        drop += hist[t]
    for r in range(cap):
        key = rec_i[r, R_KEY]
        if key == -1:
            continue
        nd = key >> 32
        if nd == 0 or prot[r] != 0 or rec_i[r, R_GEN] != node_i[nd, N_GEN]:
            continue
        if (rec_i[r, R_CN] & CNT_MAX) <= t or t == PRUNE_HIST:
            rec_i[r, R_GEN] = -1
            node_i[nd, N_NCLS] -= 1
    return t


@jit()
def _grow_nodes(node_i, node_f, node_top, glob):
    cap = node_i.shape[0]
    new = min(2 * cap, glob[G_NODECAP_MAX])
    ni = np.empty((new, NF), dtype=np.int64)
    nf = np.zeros(new, dtype=np.float64)
    nt = np.zeros((new, node_top.shape[1]), dtype=np.int64)
    ni[:cap] = node_i
    nf[:cap] = node_f
    nt[:cap] = node_top
    return ni, nf, nt


@kernel()
def top_update(node_top, j, y, c, L):
    """Keep row ``j`` of ``node_top`` = the ``L`` labels of node ``j`` ranked first by (count
    descending, label ascending) after label ``y``'s count became ``c`` (labels in columns
    ``0..L-1``, 0 = empty, their counts in ``L..2L-1``). Exact: only ``y``'s key grew, so it
    either moves up within the list or replaces the last entry; ``O(L)``, and ``O(1)`` when the
    list is full and ``y`` ranks below its last entry (then ``y`` is not in the list, where its
    count would be at least the last one's: the common case at the busy nodes near the root)."""
    if node_top[j, L - 1] != 0:
        wc = node_top[j, 2 * L - 1]
        if c < wc or (c == wc and y > node_top[j, L - 1]):
            return
    pos = -1
    n = 0
    for q in range(L):
        lab = node_top[j, q]
        if lab == 0:
            break
        if lab == y:
            pos = q
        n += 1
    if pos < 0:
        pos = n if n < L else L - 1  # full: y outranks the last entry (checked above)
        node_top[j, pos] = y
    node_top[j, L + pos] = c
    while pos > 0:
        pc = node_top[j, L + pos - 1]
        pl = node_top[j, pos - 1]
        if c < pc or (c == pc and y > pl):
            break
        node_top[j, pos] = pl
        node_top[j, L + pos] = pc
        node_top[j, pos - 1] = y
        node_top[j, L + pos - 1] = c
        pos -= 1


@kernel(inline="always")
def _candidate_node(node_i, glob, j):
    """The node whose candidate list serves leaf ``j``: ``G_UP`` levels up (at most the root)."""
    for _ in range(glob[G_UP]):
        if j == 0:
            break
        j = node_i[j, N_PARENT]
    return j


@kernel()
def _candidate_shares(node_top, v, L, fs):
    """``fs[1, q] = log(cnt_q) - log(sum of the candidates' counts)``, the log share of each
    candidate of node ``v`` (computed once per example, whatever the number of betas ranked;
    ``log(cnt_q)`` from ``LOG_COUNT`` below ``LOG_SMALL``)."""
    tot = 0
    for q in range(L):
        if node_top[v, q] == 0:
            break
        tot += node_top[v, L + q]
    lt = np.log(np.float64(tot))
    for q in range(L):
        if node_top[v, q] == 0:
            break
        c = node_top[v, L + q]
        fs[1, q] = (LOG_COUNT[c] if c < LOG_SMALL else np.log(np.float64(c))) - lt


@kernel()
def _best_candidate(node_top, v, L, fs, beta):
    """The candidate of node ``v`` ranked first by ``fs[0, q] + beta * fs[1, q]`` (score plus
    beta times log share, ``_candidate_shares``; first on ties); 0 when ``v`` has none."""
    best = 0
    bs = 0.0
    for q in range(L):
        c = node_top[v, q]
        if c == 0:
            break
        sc = fs[0, q] + beta * fs[1, q]
        if q == 0 or sc > bs:
            bs = sc
            best = c
    return best


@kernel()
def leaf_label(lin, idx, val, st, en, node_i, node_top, glob, prior, lw, j):
    """The prediction of leaf ``j``: with ``L = 0``, or while its candidate node has no candidate
    yet, its most frequent label (``maxlab``); else the candidate ranked first by its label
    regressor's score plus ``beta * log`` of its share of the candidates' counts
    (``_best_candidate``; one-against-some, Recall tree's leaf rule, with a label-frequency
    prior). ``lw.fs`` receives the candidates' scores and log shares, ``lw.cand`` their
    regressors; all candidates are scored in one pass over the features (``K.score_set``)."""
    L = glob[G_LEAFL]
    lw.cand[0] = -1
    if L == 0:
        return node_i[j, N_MAXLAB]
    W0 = glob[G_W0]
    v = _candidate_node(node_i, glob, j)
    n = 0
    while n < L and node_top[v, n] != 0:
        lw.cand[n] = W0 + node_top[v, n] - 1
        n += 1
    lw.cand[n] = -1
    K.score_set(lin, idx, val, st, en, lw.cand, n, lw.fs[0])
    _candidate_shares(node_top, v, L, lw.fs)
    best = _best_candidate(node_top, v, L, lw.fs, prior[P_BETA])
    return best if best > 0 else node_i[j, N_MAXLAB]


@kernel(inline="always")
def _ranks_first(node_top, v, L, fs, n, qy, beta):
    """``_best_candidate(node_top, v, L, fs, beta)`` is candidate ``qy`` (of ``n``): no candidate
    scores more, none before it as much. Stops at the first that outranks it (most do, early:
    the five betas of every example scanned all 64 candidates, 3% of training at scale); a NaN
    key takes ``_best_candidate``'s own rule."""
    ky = fs[0, qy] + beta * fs[1, qy]
    for q in range(n):
        if q == qy:
            continue
        k = fs[0, q] + beta * fs[1, q]
        if k != k or ky != ky:
            return _best_candidate(node_top, v, L, fs, beta) == node_top[v, qy]
        if k > ky or (k == ky and q < qy):
            return False
    return True


@kernel()
def _prior_stats(node_i, node_top, glob, prior, fs, j, y):
    """Progressive validation of the label prior: count, for every beta of ``BETAS``, whether the
    candidates of leaf ``j`` (scores and shares ``fs``, before this example is learned) rank ``y`` first
    (``_ranks_first``; never when ``y`` is not among them); in automatic mode the best so far
    (first on ties) becomes the beta in use."""
    L = glob[G_LEAFL]
    if L == 0:
        return
    v = _candidate_node(node_i, glob, j)
    if node_top[v, 0] == 0:
        return
    n = 0
    qy = -1
    while n < L and node_top[v, n] != 0:
        if node_top[v, n] == y:
            qy = n
        n += 1
    if qy >= 0:
        for b in range(NB):
            if _ranks_first(node_top, v, L, fs, n, qy, BETAS[b]):
                prior[b] += 1.0
    if prior[P_AUTO] != 0.0:
        bi = 0
        for b in range(1, NB):
            if prior[b] > prior[bi]:
                bi = b
        prior[P_BETA] = BETAS[bi]


@kernel(inline="always")
def _independent_of(lin, m, ms, a, b, nd):
    """Training none of the regressors ``ms[a:b]`` on this example can change ``m``'s score."""
    for t in range(a, b):
        if not K.scores_independent(lin, ms[t], m, nd):
            return False
    return True


@kernel()
def _select_trained(node_top, v, y, tf, n, M, sel):
    """``sel[q] = 1`` for the candidates the leaf trains: all of them when ``M = 0`` or ``n <= M``,
    else the M best by pre-update score ``tf`` (ties: the earlier in the list) and the label;
    a NaN score ranks below none, so it is trained and takes none of the M places.
    A candidate is among the M best iff fewer than M rank above it: counted over all n, without
    branches (the compiler vectorises it), by score first and by position only when ties put more
    than M in (a scan for each of the M was 13% of training at scale, a heap 8%, Hoare's
    selection of the M-th score 9% against this count's 6%: its branches mispredict)."""
    full = M == 0 or n <= M
    for q in range(n):
        sel[q] = 1 if full else 0
    if full:
        return
    c = 0
    for q in range(n):
        t = tf[q]
        g = 0
        for p in range(n):
            g += tf[p] > t
        if g < M:
            sel[q] = 1
            c += 1
    if c > M:  # ties at the M-th score: the earlier ones
        for q in range(n):
            if sel[q] != 0:
                t = tf[q]
                r = 0
                for p in range(n):
                    r += (tf[p] > t) + ((tf[p] == t) & (p < q))
                sel[q] = 1 if r < M else 0
    for q in range(n):
        if node_top[v, q] == y:
            sel[q] = 1


@kernel()
def _train_leaf(lin, idx, val, st, en, y, iw, posw, node_i, node_top, glob, j, lw, trained, nt, distinct, nd, pv):
    """One-against-some at leaf ``j``: the label regressors of the candidates (of
    ``_candidate_node``) chosen by ``_select_trained`` from their scores before any of them learns
    (all of them with ``M = 0``) learn toward +1 if it is ``y`` (importance ``iw * posw``), else -1
    (``iw``), in list order: each scored (``K.score``) and updated (``K.learn``) in turn.

    With ``G_SHORTCUTS`` the same bits, cheaper. A candidate's pre-update score is the
    prediction's (``lw.cand``/``lw.fs``) unless a regressor trained on this example since may
    share one of its slots (``K.scores_independent``, ``nd`` from ``K.slot_layout``: the routers
    ``trained[:nt]``); those whose is not are scored together in one pass (``K.score_set``).
    Consecutive candidates that share no slot are then updated together in one pass over the
    features (``K.learn_block``); a candidate that shares a slot with one of the batch starts the
    next batch, and is scored again if it shares one with a candidate of an earlier batch. A batch
    visits no slot twice when, besides, no two features share a base (``distinct`` of
    ``K.slot_layout``), and ``K.learn_block`` is told so. The label's own regressor, of another
    importance when ``posw != 1``, learns alone (``K.learn``) at its place in the list, as a
    candidate of a batch of its own.
    ``trained`` : int64, capacity >= nt + L; ``pv``: the node whose candidates the prediction
    scored."""
    L = glob[G_LEAFL]
    W0 = glob[G_W0]
    M = glob[G_TOPM]
    v = _candidate_node(node_i, glob, j)
    if glob[G_SHORTCUTS] == 0:
        n = 0
        while n < L and node_top[v, n] != 0:
            if M > 0:
                lw.tf[n] = K.score(lin, idx, val, st, en, W0 + node_top[v, n] - 1)
            n += 1
        _select_trained(node_top, v, y, lw.tf, n, M, lw.sel)
        for q in range(n):
            if lw.sel[q] == 0:
                continue
            c = node_top[v, q]
            m = W0 + c - 1
            f = K.score(lin, idx, val, st, en, m)
            K.learn(lin, idx, val, st, en, m, 1.0 if c == y else -1.0, iw * posw if c == y else iw,
                    K.clip_score(lin, f))
        return
    P = 0  # the prediction's list: lw.cand[:P] (entries after its -1 are older examples')
    while lw.cand[P] >= 0:
        P += 1
    # the same node: training moved only y in its list (up, or in at the end), so a candidate is
    # at its place in the prediction's list or one before, and y may need a scan; another node
    # (the training path left the prediction's): no look-ups, all are scored
    same = pv == v
    n = 0
    nu = 0  # candidates to score: regressors lw.ms[:nu], positions lw.act[:nu]
    while n < L and node_top[v, n] != 0:
        m = W0 + node_top[v, n] - 1
        lw.tm[n] = m
        p = P
        if same:
            if n < P and lw.cand[n] == m:
                p = n
            elif 0 < n <= P and lw.cand[n - 1] == m:
                p = n - 1
            else:
                p = 0
                while p < P and lw.cand[p] != m:
                    p += 1
        if p < P and _independent_of(lin, m, trained, 0, nt, nd):
            lw.tf[n] = lw.fs[0, p]
        else:
            lw.ms[nu] = m
            lw.act[nu] = n
            nu += 1
        n += 1
    if nu > 0:
        K.score_set(lin, idx, val, st, en, lw.ms, nu, lw.yh)
        for u in range(nu):
            lw.tf[lw.act[u]] = lw.yh[u]
    _select_trained(node_top, v, y, lw.tf, n, M, lw.sel)
    nr = nt
    nb = 0
    for q in range(n):
        if lw.sel[q] == 0:
            continue
        m = lw.tm[q]
        if not _independent_of(lin, m, lw.ms, 0, nb, nd):
            K.learn_block(lin, idx, val, st, en, lw.ms, nb, lw.ys, iw, lw.yh, lw.work, lw.act, distinct,
                  np.int64(lin.hp[K.HP_W]), np.int64(0))
            for b in range(nb):
                trained[nt] = lw.ms[b]
                nt += 1
            nb = 0
        f = lw.tf[q]
        if not _independent_of(lin, m, trained, nr, nt, nd):
            f = K.score(lin, idx, val, st, en, m)
        if posw != 1.0 and node_top[v, q] == y:
            # independent of the batch (else it was learned above), so learning it first is
            # learning it in list order; the candidates after it see it among the trained
            K.learn(lin, idx, val, st, en, m, 1.0, iw * posw, K.clip_score(lin, f))
            trained[nt] = m
            nt += 1
            continue
        lw.ms[nb] = m
        lw.ys[nb] = 1.0 if node_top[v, q] == y else -1.0
        lw.yh[nb] = K.clip_score(lin, f)
        nb += 1
    K.learn_block(lin, idx, val, st, en, lw.ms, nb, lw.ys, iw, lw.yh, lw.work, lw.act, distinct,
                  np.int64(lin.hp[K.HP_W]), np.int64(0))


@kernel()
def update_c(node_i, v):
    """UPDATE_C(v): restore ``C_u = min(C_left, C_right)`` on the path above ``v``."""
    while v != 0:
        p = node_i[v, N_PARENT]
        if node_i[p, N_C] == node_i[v, N_C]:
            return
        v = p
        a = node_i[node_i[v, N_LEFT], N_C]
        b = node_i[node_i[v, N_RIGHT], N_C]
        node_i[v, N_C] = a if a < b else b


@kernel()
def _swap(node_i, node_f, glob, j):
    """SWAP(j): recycle the smallest leaf and its parent; returns (L, R) or (-1, -1) if refused."""
    s = 0
    while node_i[s, N_INTERNAL] != 0:
        lf = node_i[s, N_LEFT]
        rt = node_i[s, N_RIGHT]
        s = lf if node_i[lf, N_C] < node_i[rt, N_C] else rt
    pa = node_i[s, N_PARENT]
    if s == j or pa <= 0:  # guard: s is the root or its parent is the root, or s = j
        return -1, -1
    gpa = node_i[pa, N_PARENT]
    sib = node_i[pa, N_LEFT] if node_i[pa, N_RIGHT] == s else node_i[pa, N_RIGHT]
    if node_i[gpa, N_LEFT] == pa:
        node_i[gpa, N_LEFT] = sib
    else:
        node_i[gpa, N_RIGHT] = sib
    node_i[sib, N_PARENT] = gpa
    update_c(node_i, sib)
    model = node_i[pa, N_MODEL]
    _reset_node(node_i, node_f, glob, s)
    _reset_node(node_i, node_f, glob, pa)
    node_i[j, N_MODEL] = model
    glob[G_NSWAPS] += 1
    return s, pa


@kernel(inline="always")
def _prefetch_children(lin, idx, st, en, node_i, j):
    """Prefetch the weight rows of the internal children of internal node ``j`` (the descent's next
    score finds them in cache, whichever side it takes)."""
    a = node_i[j, N_LEFT]
    b = node_i[j, N_RIGHT]
    if node_i[a, N_INTERNAL] != 0:
        K.prefetch_slots(lin, idx, st, en, node_i[a, N_MODEL])
    if node_i[b, N_INTERNAL] != 0:
        K.prefetch_slots(lin, idx, st, en, node_i[b, N_MODEL])


@kernel(inline="always")
def _prefetch_records(rec_i, pnode, plen, y):
    """Prefetch the first probe of the records ``(node, y)`` of the prediction path's nodes, both
    cache lines of each row (rows of 32 bytes start 16 bytes into a line): the training path
    mostly follows it, and each record look-up is otherwise a cache miss that waits for the one
    before. A hint only; nothing is read or changed."""
    hmask = rec_i.shape[0] - 1
    for d in range(plen):
        h = _hash(pnode[d], y, hmask)
        prefetch_row(rec_i, h)
        if h + 1 <= hmask:
            prefetch_row(rec_i, h + 1)


@kernel()
def _train_one(lin, idx, val, st, en, y, iw, posw, node_i, node_f, node_top, rec_i, rec_f, glob, pnode, pscore,
               plen, lw, trained, pv):
    """Algorithm 1 for one example (capacity for 2 nodes and depth+1 records guaranteed).

    ``pnode[:plen]``, ``pscore[:plen]``: the internal nodes of this example's prediction path and
    their raw scores (``predict_path``, just before, same weights). While the training path
    follows it, a node's pre-update score is taken from there instead of being recomputed,
    unless ``K.slot_layout`` says a regressor trained above it may share one of its slots; the
    post-update score comes from ``K.learn_rescore``. Both bit-identical to scoring afresh.
    ``lw``, ``trained``, ``pv``: the leaf's scratch and the prediction's candidate node
    (``_train_leaf``; ``trained`` >= depth + 1 + L).
    """
    T = glob[G_T]
    RS = glob[G_RS]
    j = 0
    depth = 0
    shortcuts = glob[G_SHORTCUTS] != 0
    distinct, nd = K.slot_layout(lin, idx, st, en)
    onpath = plen > 0 and shortcuts
    nt = 0
    _prefetch_records(rec_i, pnode, plen, y)
    while True:
        r = _record(node_i, rec_i, rec_f, glob, j, y)
        # cnt(j, y) <= cnt(root, y) < CNT_MAX (lomtree_process): no carry into n
        cn = rec_i[r, R_CN] + 1
        rec_i[r, R_CN] = cn
        cnt = cn & CNT_MAX
        if cnt > node_i[j, N_MAXCNT]:
            node_i[j, N_MAXCNT] = cnt
            node_i[j, N_MAXLAB] = y
        if glob[G_LEAFL] > 0:
            top_update(node_top, j, y, cnt, glob[G_LEAFL])
        if node_i[j, N_INTERNAL] == 0:
            if node_i[j, N_NCLS] < 2:
                break
            Cj = node_i[j, N_C]
            if glob[G_TUSED] < T:
                L = glob[G_NNODES]
                R = L + 1
                init_leaf(node_i, node_f, L)
                init_leaf(node_i, node_f, R)
                glob[G_NNODES] += 2
                node_i[j, N_MODEL] = glob[G_TUSED]
                glob[G_TUSED] += 1
            elif Cj - node_i[j, N_MAXCNT] > RS * (node_i[0, N_C] + 1):
                L, R = _swap(node_i, node_f, glob, j)
                if L < 0:
                    break
            else:
                break
            node_i[j, N_LEFT] = L
            node_i[j, N_RIGHT] = R
            node_i[L, N_PARENT] = j
            node_i[R, N_PARENT] = j
            node_top[L, :] = 0
            node_top[R, :] = 0
            node_i[L, N_C] = Cj // 2
            node_i[R, N_C] = Cj - Cj // 2
            update_c(node_i, L)
            node_i[L, N_MAXLAB] = node_i[j, N_MAXLAB]
            node_i[R, N_MAXLAB] = node_i[j, N_MAXLAB]
            node_i[j, N_INTERNAL] = 1
            if depth + 1 > glob[G_DEPTH]:
                glob[G_DEPTH] = depth + 1
        # j is internal: train its regressor toward the routing target
        en_j = node_i[j, N_EN]
        E = node_f[j] / en_j if en_j > 0 else 0.0
        ny = (rec_i[r, R_CN] >> 32) & CNT_MAX
        e = rec_f[r, R_MSUM] / ny if ny > 0 else 0.0
        z = -1.0 if E > e else 1.0
        m = node_i[j, N_MODEL]
        _prefetch_children(lin, idx, st, en, node_i, j)
        known = False
        if onpath:
            if depth < plen and pnode[depth] == j:
                known = True
                if nd != 0:
                    for a in range(depth):
                        if not K.scores_independent(lin, node_i[pnode[a], N_MODEL], m, nd):
                            known = False
                            break
            else:
                onpath = False
        f = pscore[depth] if known else K.score(lin, idx, val, st, en, m)
        s = K.learn_scored(lin, idx, val, st, en, m, z, iw, f, distinct, shortcuts)
        trained[nt] = m
        nt += 1
        node_f[j] += s
        node_i[j, N_EN] = en_j + 1
        rec_f[r, R_MSUM] += s
        rec_i[r, R_CN] += N_ONE  # n <= cnt
        j = node_i[j, N_LEFT] if s < 0 else node_i[j, N_RIGHT]
        depth += 1
    node_i[j, N_C] += 1
    update_c(node_i, j)
    if glob[G_LEAFL] > 0:
        _train_leaf(lin, idx, val, st, en, y, iw, posw, node_i, node_top, glob, j, lw, trained, nt, distinct, nd,
                    pv)


@kernel()
def predict_path(lin, idx, val, st, en, node_i, node_top, glob, prior, lw, pnode, pscore):
    """Descend by the sign of each node's score to a leaf; returns (the leaf's prediction
    (``leaf_label``, 1-based), the number of internal nodes scored, the leaf). Those nodes and their raw scores are
    recorded in ``pnode``/``pscore`` (capacity > ``glob[G_DEPTH]``, the depth bound), which
    training reuses. While node ``j`` is scored, both children's rows are prefetched."""
    j = 0
    d = 0
    while node_i[j, N_INTERNAL] != 0:
        _prefetch_children(lin, idx, st, en, node_i, j)
        f = K.score(lin, idx, val, st, en, node_i[j, N_MODEL])
        pnode[d] = j
        pscore[d] = f
        d += 1
        j = node_i[j, N_LEFT] if f < 0 else node_i[j, N_RIGHT]
    return leaf_label(lin, idx, val, st, en, node_i, node_top, glob, prior, lw, j), d, j


@kernel(inline="always")
def _prefetch_next(lin, idx, st, en, node_i, glob):
    """Prefetch the rows the next example ``idx[st:en]`` reads first: its root's and the root's
    internal children's regressors, and with at most ``PREFETCH_LABELS`` labels the whole run of
    its features' label regressors (the candidates of any leaf are among them). Issued before this
    example trains, so the next one's misses overlap with this one's arithmetic; a hint only.
    KJV book with ``-q ww`` (423 features, 66 labels): training 5-10% less CPU."""
    if node_i[0, N_INTERNAL] != 0:
        K.prefetch_block(lin, idx, st, en, node_i[0, N_MODEL], 1)
        for c in (node_i[0, N_LEFT], node_i[0, N_RIGHT]):
            if node_i[c, N_INTERNAL] != 0:
                K.prefetch_block(lin, idx, st, en, node_i[c, N_MODEL], 1)
    W = np.int64(lin.hp[K.HP_W])
    W0 = glob[G_W0]
    if glob[G_LEAFL] > 0 and W - W0 <= PREFETCH_LABELS:
        for r in range(0, W - W0, 5):  # 5 rows of 12 bytes: every cache line of the run
            K.prefetch_block(lin, idx, st, en, W0 + r, 1)


#: ``lomtree_process``'s status: the chunk is done; the record table must grow before example
#: ``stop`` (``LomTree._grow_records``, then call again from ``stop``); example ``stop``'s label has
#: ``CNT_MAX`` examples at the root (nothing of it was predicted or learned); the live records
#: must be pruned before example ``stop`` (``prune_records``)
DONE = 0
GROW = 1
FULL = 2
PRUNE = 3


#: ``_process_span`` stopped before an example that needs more node capacity, or a depth bound
#: beyond its scratch (``lomtree_process`` grows them and goes on)
_NODES = 4
_DEPTH = 5


@kernel()
def _process_span(lin, indptr, indices, values, labels, weights, train, node_i, node_f, node_top, rec_i, rec_f,
                  glob, prior, lw, preds, start, pnode, pscore, trained):
    """``lomtree_process``'s loop over examples ``start..`` until one needs what only the caller
    can give (a status of ``lomtree_process``, or ``_NODES``, ``_DEPTH``); returns (that example,
    the status). None of its arrays is replaced here, so numba passes them on without reference
    counting (the loop that replaced them counted references on every call: 5% of training)."""
    n = labels.shape[0]
    for i in range(start, n):
        st = indptr[i]
        en = indptr[i + 1]
        if glob[G_DEPTH] >= pnode.shape[0]:
            return i, _DEPTH
        if train[i]:
            # checked before the prediction (which the progressive prior counts): a stop here
            # leaves example i untouched; the tables do not change until its training
            if glob[G_RECMAX] > 0 and glob[G_LIVE] + glob[G_DEPTH] + 2 > glob[G_RECMAX]:
                return i, PRUNE
            if 4 * (glob[G_OCC] + glob[G_DEPTH] + 2) > 3 * rec_i.shape[0]:
                return i, GROW
            # every example counts its label at the root, whose records are never reset, so
            # cnt(j, y) <= cnt(root, y); the root's maxcnt bounds them all and is checked first
            if node_i[0, N_MAXCNT] >= CNT_MAX and root_count(node_i, rec_i, labels[i]) >= CNT_MAX:
                return i, FULL
            if glob[G_NNODES] + 2 > node_i.shape[0] and node_i.shape[0] < glob[G_NODECAP_MAX]:
                return i, _NODES
        preds[i], plen, leaf = predict_path(lin, indices, values, st, en, node_i, node_top, glob, prior, lw, pnode,
                                            pscore)
        if i + 1 < n:
            _prefetch_next(lin, indices, en, indptr[i + 2], node_i, glob)
        if train[i]:
            _prior_stats(node_i, node_top, glob, prior, lw.fs, leaf, labels[i])
            _train_one(lin, indices, values, st, en, labels[i], weights[i], prior[P_POSW], node_i, node_f, node_top,
                       rec_i, rec_f, glob, pnode, pscore, plen, lw, trained, _candidate_node(node_i, glob, leaf))
            K.end_example(lin, weights[i])
    return n, DONE


@jit(nogil=True)
def lomtree_process(lin, indptr, indices, values, labels, weights, train, node_i, node_f, node_top, rec_i,
                    rec_f, glob, prior, lw, preds, start):
    """Progressive predict-then-learn over examples ``start..`` of one chunk (``prior``: see
    ``_prior_stats``; ``lw``: ``LeafWork``).

    preds : int64, shape (n,) out. Returns the (possibly regrown) node and leaf-list arrays, the
    example it stopped before (n when done) and a status (``DONE``, ``GROW``, ``FULL``,
    ``PRUNE``). The record table is grown by the caller (``LomTree._grow_records``).
    """
    L = max(1, glob[G_LEAFL])
    # the prediction path: at most glob[G_DEPTH] internal nodes, a bound training may raise; the
    # regressors trained on one example: the routers (at most depth + 1), then the candidates
    pnode = np.empty(glob[G_DEPTH] + 1, dtype=np.int64)
    pscore = np.empty(glob[G_DEPTH] + 1, dtype=np.float64)
    trained = np.empty(glob[G_DEPTH] + 2 + L, dtype=np.int64)
    i = start
    while True:
        i, status = _process_span(lin, indptr, indices, values, labels, weights, train, node_i, node_f, node_top,
                                  rec_i, rec_f, glob, prior, lw, preds, i, pnode, pscore, trained)
        if status == _NODES:
            node_i, node_f, node_top = _grow_nodes(node_i, node_f, node_top, glob)
        elif status == _DEPTH:
            pnode = np.empty(2 * glob[G_DEPTH] + 1, dtype=np.int64)
            pscore = np.empty(2 * glob[G_DEPTH] + 1, dtype=np.float64)
            trained = np.empty(2 * glob[G_DEPTH] + 2 + L, dtype=np.int64)
        else:
            return node_i, node_f, node_top, i, status


@kernel(nogil=True)
def lomtree_predict(lin, indptr, indices, values, node_i, node_top, glob, prior, preds, lw, pnode, pscore):
    """Predictions only; lw (``LeafWork``), pnode, pscore: scratch of ``predict_path``."""
    for i in range(indptr.shape[0] - 1):
        preds[i] = predict_path(lin, indices, values, indptr[i], indptr[i + 1], node_i, node_top, glob, prior, lw,
                                pnode, pscore)[0]


@kernel()
def insert_records(node_i, rec_i, rec_f, glob, rnode, rlabel, rcnt, rn, rmsum):
    """Rebuild the hash table from record lists (after load); False on a duplicate key."""
    for q in range(rnode.shape[0]):
        j = rnode[q]
        before = glob[G_LIVE]
        h = _record(node_i, rec_i, rec_f, glob, j, rlabel[q])
        if glob[G_LIVE] == before:
            return False
        rec_i[h, R_CN] = rcnt[q] | (rn[q] << 32)  # both below 2^32 (load_state checks)
        rec_f[h, R_MSUM] = rmsum[q]
    return True


@jit()
def live_labels(node_i, rec_i, nn):
    """The live records in (node, label) order, as what a save writes: ``ptr`` (int64, nn + 1;
    node v's records are ``ptr[v]:ptr[v+1]``) and their labels (int32: labels are below 2^31);
    4 bytes a record, where their keys and slots (``find_slots`` finds those a piece at a time)
    were 8-32. Two passes over the table: count per node, then place (nodes from ``nn`` on, which
    hold no live record, are skipped)."""
    ptr = np.zeros(nn + 1, dtype=np.int64)
    for r in range(rec_i.shape[0]):
        k = rec_i[r, R_KEY]
        if k >= 0 and (k >> 32) < nn and rec_i[r, R_GEN] == node_i[k >> 32, N_GEN]:
            ptr[(k >> 32) + 1] += 1
    for v in range(nn):
        ptr[v + 1] += ptr[v]
    pos = ptr[:nn].copy()
    lab = np.empty(ptr[nn], dtype=np.int32)
    for r in range(rec_i.shape[0]):
        k = rec_i[r, R_KEY]
        if k >= 0 and (k >> 32) < nn and rec_i[r, R_GEN] == node_i[k >> 32, N_GEN]:
            v = k >> 32
            lab[pos[v]] = k & 0xFFFFFFFF
            pos[v] += 1
    for v in range(nn):
        lab[ptr[v]:ptr[v + 1]].sort()
    return ptr, lab
