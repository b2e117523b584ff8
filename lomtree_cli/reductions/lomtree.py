"""LOMtree: the online logarithmic-time multiclass tree (docs/ALGORITHMS.md §3.4).

Choromanska & Langford, *Logarithmic Time Online Multiclass prediction*, NIPS 2015, Algorithm 1
with node swapping (VW's ``--log_multi k``). Every internal node ``v`` owns a binary regressor
``h_v``; each class ``y`` is pushed to the side where its expected score ``e_v(y)`` lies relative
to the node's expected score ``E_v`` (routing target ``c = -1 if E_v > e_v(y) else +1``), which
increases ``J(h) = 2 sum_i pi_i |P(h>0) - P(h>0|i)|`` (pure and balanced splits). Examples
descend by the sign of the post-update score; leaves predict their most frequent label. At most
``T`` internal nodes are created; afterwards a leaf that holds many examples not of its majority
label (``C_j - maxcnt_j > R_S (C_root + 1)``) recycles the smallest leaf of the tree and its
parent (the *swap*), and ``UPDATE_C`` keeps ``C_v`` (smallest leaf count below ``v``) correct.

Design (choices the spec leaves open)
-------------------------------------
Node records, int64, shape (capacity, ``NF``) — columns ``N_PARENT, N_LEFT, N_RIGHT`` (``-1`` =
none), ``N_INTERNAL`` (0/1), ``N_MODEL`` (regressor id, ``-1`` for a leaf), ``N_C``, ``N_EN``
(training calls), ``N_MAXCNT``, ``N_MAXLAB`` (1-based; starts at 1), ``N_NCLS`` (number of live
class records), ``N_GEN`` (generation, bumped when a swap resets the node). ``Esum`` is a separate
float64 vector. Node capacity starts at ``min(2T+1, 1024)`` and doubles up to ``2T+1`` (the most
nodes a tree with ``T`` internal nodes can have), so memory follows the nodes actually created,
also for ``T = k-1`` with ``k = 10^6``. The root is node 0.

Class records (``cnt(y)``, ``n(y)``, ``msum(y)`` of one node) live in one open-addressing hash
table keyed by ``(node, label)``: int64 ``rec_i`` shape (capacity, 5) = ``R_NODE`` (``-1`` = empty
slot), ``R_GEN``, ``R_LABEL``, ``R_CNT``, ``R_N``; float64 ``rec_f`` = ``msum``. Linear probing from
a SplitMix64 hash of the key; a key occupies at most one slot. A record is *live* iff its
generation equals its node's ``N_GEN``: a swap resets a node in ``O(1)`` by bumping the
generation (no scan of the table); a stale record met again under the same key is reset and
reused, other stale records are dropped at the next rehash. Before each example the kernel
guarantees ``occupied + depth_bound + 1 <= capacity / 2`` (one example touches at most
``depth + 1`` records; ``depth_bound`` is the deepest depth ever created, an upper bound because
swaps only move subtrees up), rehashing the live records into a table with load <= 1/4 (doubling
as needed). So one statistics look-up is ``O(1)`` expected, and no step ever scans the labels of
a node: training costs ``O(depth)`` regressor calls plus ``O(depth)`` look-ups and
``UPDATE_C``/``SWAP`` walks. Memory grows with (node, label) pairs actually seen.

* ``T`` default ``k - 1`` (``--max-internal-nodes``; VW hard-codes ``k-1``): enough internal
  nodes for a tree with one leaf per class; more (the paper explores up to ``64k-1``) lets
  frequent classes occupy several leaves. ``W = max(1, T)`` regressors are striped over the
  table (§2.5), model ids ``0..T-1`` assigned at creation and reused by swaps.
* Swap guard (spec choice; VW has none): when the smallest leaf's parent is the root, or the
  smallest leaf is the splitting leaf itself (only with ``R_S = 0``), the swap is refused and the
  leaf stays a leaf for this example.
* The recycled regressor keeps its weights (VW fidelity; resetting would need a scan over the
  model's slots). Its optimiser state (``G, N, S, T``) is kept as well.
* An empty new leaf predicts its parent's label (``maxlab`` inherited at the split).
* Counts are unweighted; ``iw`` only scales the regressor updates. ``iw = 0`` examples are not
  trained (driver contract).
* Scores in ``E_v`` and ``e_v(y)`` are the raw post-update scores (float64 sums, means computed
  on use), descent ``left iff s < 0`` (0 and NaN go right).
* Exact shortcuts (``G_SHORTCUTS``, on): progressive training predicts first, so while the
  training path follows the prediction path a node's pre-update score is the one the prediction
  computed, unless a regressor trained above it in this example may share one of its slots
  (``K.slot_layout``/``K.scores_independent``); the post-update score is summed in the
  update's weight pass when no slot repeats (``K.learn_rescore``). Per trained node that is two
  passes over the features instead of four, with the same bits (tests compare both ways).
  The leaf's candidates likewise (``_train_leaf``): their pre-update scores are the
  prediction's when nothing trained since shares their slots, and candidates that share no slot
  with each other are updated in one pass over the features (``K.learn_block``).

Candidate label lists (deviation from the paper, ``--leaf-labels L``, ``--candidates-up U``)
-----------------------------------------------------------------------------------------
The paper's leaf predicts its single most frequent label; with ``L > 0`` every node also keeps
its ``L`` most frequent labels (``node_top``: labels, then their counts; ranked by count
descending, label ascending; kept exact online by ``_top_update`` in ``O(L)`` per node of the
training path, since only the example's label's count grows; recomputed from the class records
on load, so not stored). A leaf ``j`` predicts, among the candidates of the node ``U`` levels above
it (the root at most), the one ranked first by its *label regressor*'s score ``f_y`` plus a
label-frequency prior, ``f_y + beta * log(cnt_y / sum of the candidates' counts)`` (first on
ties; ``--label-prior beta``; by default, -1, beta is chosen among ``BETAS`` = 0, 0.02, 0.05, 0.1,
0.2 by progressive validation: before each trained example is learned, every beta's ranking of
its leaf's candidates is checked against its label (the scores are the prediction's, so this
costs no regressor call), and the best so far ranks the next predictions; its counts are saved
as ``prior_stats``; files without them load with beta 0). Label ``y`` owns regressor
``max(1, T) + y - 1`` (so ``W = max(1, T) + k``), shared by every leaf (one-against-some, as in
Recall tree, Daume III et al. 2017). Training: after the routers, at the training leaf, each of
those candidates' regressors learns toward +1 if it is the example's label, else -1. Per example
that adds ``L`` regressor calls (score, and learn when training) to the ``O(depth)`` of routing,
so cost stays ``O(log k + L)``. A feature's slots of all label regressors lie in one run of ``W``
rows from its base, so the candidates are scored together, features outer (``K.score_set``): the
``L`` reads of a feature share a few cache lines (KJV book, k = 66: 13 lines) instead of being
``L`` passes of random reads over the table. While the candidate node has no record the leaf's ``maxlab`` is
predicted. Everything else (routing, splits, swaps, records) is the paper's Algorithm 1 unchanged;
``L = 0`` gives it exactly. The command line's defaults for ``-r lomtree`` are ``L = 32``, ``U = 3``,
the learned prior, squared loss (VW forces quantile, which lost: see the doc), ``power_t = 0.75``
(as CPT; 0.5 for the others) and learning rate 0.25 (0.5 for the others); one pass, -b 24, test
error (paper's rule with quantile; Filter tree): Sector 18.52 (25.66; 20.21), KJV book 49.84
(64.47; 52.83), synth k=1000 25.45 (31.05; 26.43), KJV next word 75.55 (81.56; 75.75), Letter
38.20 (49.96; 55.34), Pendigits 25.27 (20.73; 43.42). ``U = 2`` and rate 0.5 are better on the
small-k tasks (Sector 17.34, Letter 34.96, Pendigits 22.13) but lose to the Filter tree on next
word (76.42): the defaults serve many classes. Every variant: ``bench/notes/lomtree.md``.

Model state (``state()``): node arrays ``parent, left, right, internal, model, C, En, maxcnt,
maxlab`` (int64) and ``Esum`` (float64), each of length ``n_nodes``; class records in CSR form
``cls_ptr`` (n_nodes+1), ``cls_label, cls_cnt, cls_n`` (int64), ``cls_msum`` (float64), records
of a node sorted by label. ``load_state`` checks every invariant it can (links form one tree,
``C`` of an internal node = min of its children, ``En = sum n(y)``, ``maxcnt = max cnt(y)``,
label ranges, counters) and raises ValueError otherwise; the hash table is rebuilt, so saving
then loading continues bit-exactly (record sums do not depend on the table layout).

References
----------
A. Choromanska, J. Langford. Logarithmic Time Online Multiclass prediction. NIPS 2015
(arXiv:1406.1822), Algorithm 1, Lemma 3. VW ``vowpalwabbit/core/src/reductions/log_multi.cc``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..entropy import depths_from_parents
from ..kernels import jit, kernel, prefetch_row

from ..kernels import linear as K
from .base import Reduction, n_distinct

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

# record columns
R_NODE = 0
R_GEN = 1
R_LABEL = 2
R_CNT = 3
R_N = 4
RF = 5

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
NG = 13

#: label-prior weights beta, chosen among by progressive validation (``--label-prior -1``); the
#: first is the choice before any statistics (0: the label regressors alone)
BETAS = np.array([0.0, 0.02, 0.05, 0.1, 0.2])
NB = BETAS.shape[0]
# prior: float64, (NB + 2,): correct progressive rankings per beta, then the beta in use, then 1 if
# it is chosen automatically
P_BETA = NB
P_AUTO = NB + 1

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


def leaf_work(L: int) -> LeafWork:
    L = max(1, int(L))
    return LeafWork(np.zeros((2, L)), np.full(L + 1, -1, dtype=np.int64), np.zeros(L, dtype=np.int64), np.zeros(L),
                    np.zeros(L, dtype=np.int64), np.zeros(L), np.zeros(L), np.zeros((L, 4)),
                    np.zeros(L, dtype=np.int64))


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
def _init_leaf(node_i, node_f, v):
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
    h = _hash(j, y, hmask)
    while True:
        nd = rec_i[h, R_NODE]
        if nd == -1:
            rec_i[h, R_NODE] = j
            rec_i[h, R_GEN] = g
            rec_i[h, R_LABEL] = y
            rec_i[h, R_CNT] = 0
            rec_i[h, R_N] = 0
            rec_f[h] = 0.0
            glob[G_OCC] += 1
            glob[G_LIVE] += 1
            node_i[j, N_NCLS] += 1
            return h
        if nd == j and rec_i[h, R_LABEL] == y:
            if rec_i[h, R_GEN] != g:
                rec_i[h, R_GEN] = g
                rec_i[h, R_CNT] = 0
                rec_i[h, R_N] = 0
                rec_f[h] = 0.0
                glob[G_LIVE] += 1
                node_i[j, N_NCLS] += 1
            return h
        h = (h + 1) & hmask


@jit()
def _rehash(node_i, rec_i, rec_f, glob, need):
    """New table holding the live records with load <= 1/4 after adding ``need`` more."""
    cap = rec_i.shape[0]
    live = glob[G_LIVE]
    while 4 * (live + need) > cap:
        cap *= 2
    ni = np.empty((cap, RF), dtype=np.int64)
    ni[:, R_NODE] = -1
    nf = np.zeros(cap, dtype=np.float64)
    hmask = cap - 1
    occ = 0
    for r in range(rec_i.shape[0]):
        nd = rec_i[r, R_NODE]
        if nd == -1 or rec_i[r, R_GEN] != node_i[nd, N_GEN]:
            continue
        h = _hash(nd, rec_i[r, R_LABEL], hmask)
        while ni[h, R_NODE] != -1:
            h = (h + 1) & hmask
        for c in range(RF):
            ni[h, c] = rec_i[r, c]
        nf[h] = rec_f[r]
        occ += 1
    glob[G_OCC] = occ
    glob[G_LIVE] = occ
    return ni, nf


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
def _top_update(node_top, j, y, c, L):
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
    """``fs[1, q] = log(cnt_q / sum of the candidates' counts)`` for the candidates of node ``v``
    (computed once per example, whatever the number of betas ranked)."""
    tot = 0
    for q in range(L):
        if node_top[v, q] == 0:
            break
        tot += node_top[v, L + q]
    for q in range(L):
        if node_top[v, q] == 0:
            break
        fs[1, q] = np.log(node_top[v, L + q] / tot)


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


@kernel()
def _prior_stats(node_i, node_top, glob, prior, fs, j, y):
    """Progressive validation of the label prior: count, for every beta of ``BETAS``, whether the
    candidates of leaf ``j`` (scores and shares ``fs``, before this example is learned) rank ``y`` first;
    in automatic mode the best so far (first on ties) becomes the beta in use."""
    L = glob[G_LEAFL]
    if L == 0:
        return
    v = _candidate_node(node_i, glob, j)
    if node_top[v, 0] == 0:
        return
    for b in range(NB):
        if _best_candidate(node_top, v, L, fs, BETAS[b]) == y:
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
def _train_leaf(lin, idx, val, st, en, y, iw, node_i, node_top, glob, j, lw, trained, nt, distinct, nd):
    """One-against-some at leaf ``j``: every candidate's label regressor (the candidates of
    ``_candidate_node``) learns toward +1 if it is ``y``, else -1, in list order: each scored
    (``K.score``) and updated (``K.learn``) in turn.

    With ``G_SHORTCUTS`` the same bits, cheaper. A candidate's pre-update score is the
    prediction's (``lw.cand``/``lw.fs``) unless a regressor trained on this example since may
    share one of its slots (``K.scores_independent``, ``nd`` from ``K.slot_layout``: the routers
    ``trained[:nt]``); if any candidate's is not, all are scored in one pass (``K.score_set``).
    Consecutive candidates that share no slot are then updated together in one pass over the
    features (``K.learn_block``); a candidate that shares a slot with one of the batch starts the
    next batch, and is scored again if it shares one with a candidate of an earlier batch. A batch
    visits no slot twice when, besides, no two features share a base (``distinct`` of
    ``K.slot_layout``), and ``K.learn_block`` is told so.
    ``trained`` : int64, capacity >= nt + L."""
    L = glob[G_LEAFL]
    W0 = glob[G_W0]
    v = _candidate_node(node_i, glob, j)
    if glob[G_SHORTCUTS] == 0:
        for q in range(L):
            c = node_top[v, q]
            if c == 0:
                break
            m = W0 + c - 1
            f = K.score(lin, idx, val, st, en, m)
            K.learn(lin, idx, val, st, en, m, 1.0 if c == y else -1.0, iw, K.clip_score(lin, f))
        return
    P = 0  # the prediction's list: lw.cand[:P] (entries after its -1 are older examples')
    while lw.cand[P] >= 0:
        P += 1
    n = 0
    known = True
    while n < L and node_top[v, n] != 0:
        m = W0 + node_top[v, n] - 1
        lw.tm[n] = m
        p = n  # the prediction's list at the same position (the same leaf), else found by a scan
        if p >= P or lw.cand[p] != m:
            p = 0
            while p < P and lw.cand[p] != m:
                p += 1
        if p == P or not _independent_of(lin, m, trained, 0, nt, nd):
            known = False
        else:
            lw.tf[n] = lw.fs[0, p]
        n += 1
    if not known:
        K.score_set(lin, idx, val, st, en, lw.tm, n, lw.tf)
    nr = nt
    nb = 0
    for q in range(n):
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
def _prefetch_records(rec_i, rec_f, pnode, plen, y):
    """Prefetch the first probe of the records ``(node, y)`` of the prediction path's nodes: the
    training path mostly follows it, and each record look-up is otherwise a cache miss that
    waits for the one before (KJV next-word: the look-ups were a fifth of LOMtree's training
    time). A hint only; nothing is read or changed."""
    hmask = rec_i.shape[0] - 1
    for d in range(plen):
        h = _hash(pnode[d], y, hmask)
        prefetch_row(rec_i, h)
        prefetch_row(rec_f, h)


@kernel()
def _train_one(lin, idx, val, st, en, y, iw, node_i, node_f, node_top, rec_i, rec_f, glob, pnode, pscore,
               plen, lw, trained):
    """Algorithm 1 for one example (capacity for 2 nodes and depth+1 records guaranteed).

    ``pnode[:plen]``, ``pscore[:plen]``: the internal nodes of this example's prediction path and
    their raw scores (``predict_path``, just before, same weights). While the training path
    follows it, a node's pre-update score is taken from there instead of being recomputed,
    unless ``K.slot_layout`` says a regressor trained above it may share one of its slots; the
    post-update score comes from ``K.learn_rescore``. Both bit-identical to scoring afresh.
    ``lw``, ``trained``: the leaf's scratch (``_train_leaf``; ``trained`` >= depth + 1 + L).
    """
    T = glob[G_T]
    RS = glob[G_RS]
    j = 0
    depth = 0
    shortcuts = glob[G_SHORTCUTS] != 0
    distinct, nd = K.slot_layout(lin, idx, st, en)
    onpath = plen > 0 and shortcuts
    nt = 0
    _prefetch_records(rec_i, rec_f, pnode, plen, y)
    while True:
        r = _record(node_i, rec_i, rec_f, glob, j, y)
        cnt = rec_i[r, R_CNT] + 1
        rec_i[r, R_CNT] = cnt
        if cnt > node_i[j, N_MAXCNT]:
            node_i[j, N_MAXCNT] = cnt
            node_i[j, N_MAXLAB] = y
        if glob[G_LEAFL] > 0:
            _top_update(node_top, j, y, cnt, glob[G_LEAFL])
        if node_i[j, N_INTERNAL] == 0:
            if node_i[j, N_NCLS] < 2:
                break
            Cj = node_i[j, N_C]
            if glob[G_TUSED] < T:
                L = glob[G_NNODES]
                R = L + 1
                _init_leaf(node_i, node_f, L)
                _init_leaf(node_i, node_f, R)
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
        ny = rec_i[r, R_N]
        e = rec_f[r] / ny if ny > 0 else 0.0
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
        if shortcuts:
            s = K.learn_rescore(lin, idx, val, st, en, m, z, iw, f, distinct)
        else:
            K.learn(lin, idx, val, st, en, m, z, iw, K.clip_score(lin, f))
            s = K.score(lin, idx, val, st, en, m)
        trained[nt] = m
        nt += 1
        node_f[j] += s
        node_i[j, N_EN] = en_j + 1
        rec_f[r] += s
        rec_i[r, R_N] = ny + 1
        j = node_i[j, N_LEFT] if s < 0 else node_i[j, N_RIGHT]
        depth += 1
    node_i[j, N_C] += 1
    update_c(node_i, j)
    if glob[G_LEAFL] > 0:
        _train_leaf(lin, idx, val, st, en, y, iw, node_i, node_top, glob, j, lw, trained, nt, distinct, nd)


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
        K.prefetch_block(lin, idx, st, en, node_i[0, N_MODEL])
        for c in (node_i[0, N_LEFT], node_i[0, N_RIGHT]):
            if node_i[c, N_INTERNAL] != 0:
                K.prefetch_block(lin, idx, st, en, node_i[c, N_MODEL])
    W = np.int64(lin.hp[K.HP_W])
    W0 = glob[G_W0]
    if glob[G_LEAFL] > 0 and W - W0 <= PREFETCH_LABELS:
        for r in range(0, W - W0, 5):  # 5 rows of 12 bytes: every cache line of the run
            K.prefetch_block(lin, idx, st, en, W0 + r)


@jit(nogil=True)
def lomtree_process(lin, indptr, indices, values, labels, weights, train, node_i, node_f, node_top, rec_i,
                    rec_f, glob, prior, lw, preds):
    """Progressive predict-then-learn over one chunk (``prior``: see ``_prior_stats``; ``lw``:
    ``LeafWork``).

    preds : int64, shape (n,) out. Returns the (possibly regrown) node, leaf-list and record arrays.
    """
    n = labels.shape[0]
    L = max(1, glob[G_LEAFL])
    # the prediction path: at most glob[G_DEPTH] internal nodes, a bound training may raise; the
    # regressors trained on one example: the routers (at most depth + 1), then the candidates
    pnode = np.empty(glob[G_DEPTH] + 1, dtype=np.int64)
    pscore = np.empty(glob[G_DEPTH] + 1, dtype=np.float64)
    trained = np.empty(glob[G_DEPTH] + 2 + L, dtype=np.int64)
    for i in range(n):
        st = indptr[i]
        en = indptr[i + 1]
        if glob[G_DEPTH] >= pnode.shape[0]:
            pnode = np.empty(2 * glob[G_DEPTH] + 1, dtype=np.int64)
            pscore = np.empty(2 * glob[G_DEPTH] + 1, dtype=np.float64)
            trained = np.empty(2 * glob[G_DEPTH] + 2 + L, dtype=np.int64)
        preds[i], plen, leaf = predict_path(lin, indices, values, st, en, node_i, node_top, glob, prior, lw, pnode,
                                            pscore)
        if i + 1 < n:
            _prefetch_next(lin, indices, en, indptr[i + 2], node_i, glob)
        if train[i]:
            _prior_stats(node_i, node_top, glob, prior, lw.fs, leaf, labels[i])
            if glob[G_NNODES] + 2 > node_i.shape[0] and node_i.shape[0] < glob[G_NODECAP_MAX]:
                node_i, node_f, node_top = _grow_nodes(node_i, node_f, node_top, glob)
            need = glob[G_DEPTH] + 2
            if 2 * (glob[G_OCC] + need) > rec_i.shape[0]:
                rec_i, rec_f = _rehash(node_i, rec_i, rec_f, glob, need)
            _train_one(lin, indices, values, st, en, labels[i], weights[i], node_i, node_f, node_top, rec_i, rec_f,
                       glob, pnode, pscore, plen, lw, trained)
            K.end_example(lin, weights[i])
    return node_i, node_f, node_top, rec_i, rec_f


@kernel(nogil=True)
def lomtree_predict(lin, indptr, indices, values, node_i, node_top, glob, prior, preds, lw, pnode, pscore):
    """Predictions only; lw (``LeafWork``), pnode, pscore: scratch of ``predict_path``."""
    for i in range(indptr.shape[0] - 1):
        preds[i] = predict_path(lin, indices, values, indptr[i], indptr[i + 1], node_i, node_top, glob, prior, lw,
                                pnode, pscore)[0]


@kernel()
def _insert_records(node_i, rec_i, rec_f, glob, rnode, rlabel, rcnt, rn, rmsum):
    """Rebuild the hash table from record lists (after load); False on a duplicate key."""
    for q in range(rnode.shape[0]):
        j = rnode[q]
        before = glob[G_LIVE]
        h = _record(node_i, rec_i, rec_f, glob, j, rlabel[q])
        if glob[G_LIVE] == before:
            return False
        rec_i[h, R_CNT] = rcnt[q]
        rec_i[h, R_N] = rn[q]
        rec_f[h] = rmsum[q]
    return True


@jit()
def _live_slots(node_i, rec_i):
    """Slots of the live records and their keys ``node << 32 | label`` (one pass over the table:
    what ``records`` sorts; numpy masks over the strided columns took 3x longer). Labels are in
    ``1..k`` with ``k < 2^31`` (config, parser and ``load_state`` all enforce it), so the key is
    exact and orders by (node, label)."""
    n = 0
    for r in range(rec_i.shape[0]):
        nd = rec_i[r, R_NODE]
        if nd >= 0 and rec_i[r, R_GEN] == node_i[nd, N_GEN]:
            n += 1
    sel = np.empty(n, dtype=np.int64)
    key = np.empty(n, dtype=np.int64)
    q = 0
    for r in range(rec_i.shape[0]):
        nd = rec_i[r, R_NODE]
        if nd >= 0 and rec_i[r, R_GEN] == node_i[nd, N_GEN]:
            sel[q] = r
            key[q] = (nd << 32) | rec_i[r, R_LABEL]
            q += 1
    return sel, key


_NODE_FIELDS = (("parent", N_PARENT), ("left", N_LEFT), ("right", N_RIGHT), ("internal", N_INTERNAL),
                ("model", N_MODEL), ("C", N_C), ("En", N_EN), ("maxcnt", N_MAXCNT), ("maxlab", N_MAXLAB))
_CLS_FIELDS = ("cls_ptr", "cls_label", "cls_cnt", "cls_n", "cls_msum")


class LomTree(Reduction):
    """The LOMtree reduction (``-r lomtree -k K``); see the module docstring."""

    name = "lomtree"
    parallel_predict = True

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        self.T = self.max_internal(rcfg)
        self.R_S = int(rcfg.swap_resistance)
        cap_max = 2 * self.T + 1
        node_cap = min(cap_max, NODE_CAP0)
        self.node_i = np.zeros((node_cap, NF), dtype=np.int64)
        self.node_f = np.zeros(node_cap, dtype=np.float64)
        _init_leaf(self.node_i, self.node_f, 0)
        self.rec_i = np.full((MIN_HASH_CAP, RF), -1, dtype=np.int64)
        self.rec_f = np.zeros(MIN_HASH_CAP, dtype=np.float64)
        self.glob = np.zeros(NG, dtype=np.int64)
        self.glob[G_NNODES] = 1
        self.glob[G_T] = self.T
        self.glob[G_RS] = self.R_S
        self.glob[G_NODECAP_MAX] = cap_max
        self.glob[G_SHORTCUTS] = 1
        self.L = int(rcfg.leaf_labels)
        self.glob[G_LEAFL] = self.L
        self.glob[G_W0] = max(1, self.T)
        self.up = int(rcfg.candidates_up)
        self.glob[G_UP] = self.up
        self.node_top = np.zeros((node_cap, 2 * max(1, self.L)), dtype=np.int64)
        self.prior = np.zeros(NB + 2, dtype=np.float64)
        auto = float(rcfg.label_prior) < 0.0
        self.prior[P_AUTO] = 1.0 if auto else 0.0
        self.prior[P_BETA] = BETAS[0] if auto else float(rcfg.label_prior)
        self._pending = None  # loaded class records not yet in the hash table (load_state)

    @staticmethod
    def max_internal(rcfg) -> int:
        k = int(rcfg.k)
        T = rcfg.max_internal_nodes
        return max(0, k - 1) if T is None else int(T)

    @staticmethod
    def n_models_for(rcfg) -> int:
        """Router regressors ``max(1, T)``, then one per label when leaves keep candidate lists."""
        return max(1, LomTree.max_internal(rcfg)) + (int(rcfg.k) if int(rcfg.leaf_labels) > 0 else 0)

    # -- counters --------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.glob[G_NNODES])

    @property
    def n_swaps(self) -> int:
        return int(self.glob[G_NSWAPS])

    @property
    def t_used(self) -> int:
        return int(self.glob[G_TUSED])

    # -- running ---------------------------------------------------------------------------
    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        if not train.any():
            d = int(self.glob[G_DEPTH]) + 1
            lomtree_predict(self.learner.arrays, batch.indptr, batch.indices, batch.values, self.node_i,
                            self.node_top, self.glob, self.prior, preds, leaf_work(self.L),
                            np.empty(d, dtype=np.int64),
                            np.empty(d, dtype=np.float64))
            return preds, None
        self._ensure_records()
        # let learn_block cache one rate per (feature, candidate) pair of the longest example
        # (there is room when the batch's features are no more: one example is no longer)
        if self.L > 0 and n and \
                min((int(batch.indptr[-1]) - int(batch.indptr[0])) * self.L, 1 << 20) > self.learner.scratch_features:
            self.learner.ensure_scratch(min(int(batch.n_features.max()) * self.L, 1 << 20))
        self.node_i, self.node_f, self.node_top, self.rec_i, self.rec_f = lomtree_process(
            self.learner.arrays, batch.indptr, batch.indices, batch.values, batch.labels, batch.weights, train,
            self.node_i, self.node_f, self.node_top, self.rec_i, self.rec_f, self.glob, self.prior,
            leaf_work(self.L), preds)
        return preds, None

    # -- state -----------------------------------------------------------------------------
    def records(self):
        """Live class records sorted by (node, label): node, label, cnt, n (int64), msum (float64)."""
        if self._pending is not None:  # loaded and not trained since: already in this form
            return tuple(a.copy() for a in self._pending)
        ri = self.rec_i
        sel, key = _live_slots(self.node_i, ri)
        sel = sel[np.argsort(key)]  # keys are unique, so any sort gives this order
        return (ri[sel, R_NODE].copy(), ri[sel, R_LABEL].copy(), ri[sel, R_CNT].copy(), ri[sel, R_N].copy(),
                self.rec_f[sel].copy())

    def state(self) -> dict:
        nn = self.n_nodes
        out = {name: self.node_i[:nn, col].copy() for name, col in _NODE_FIELDS}
        out["Esum"] = self.node_f[:nn].copy()
        node, label, cnt, n, msum = self.records()
        ptr = np.zeros(nn + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=nn), out=ptr[1:])
        out.update(cls_ptr=ptr, cls_label=label, cls_cnt=cnt, cls_n=n, cls_msum=msum)
        out["prior_stats"] = self.prior[:NB].copy()
        return out

    def meta(self) -> dict:
        return {"T": self.T, "swap_resistance": self.R_S, "leaf_labels": self.L, "candidates_up": self.up,
                "t_used": self.t_used,
                "n_swaps": self.n_swaps, "n_nodes": self.n_nodes, "depth_bound": int(self.glob[G_DEPTH]),
                "label_prior": float(self.prior[P_BETA])}

    def load_state(self, arrays: dict, meta: dict) -> None:
        names = [n for n, _ in _NODE_FIELDS] + ["Esum", *_CLS_FIELDS]
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ValueError(f"lomtree state lacks {', '.join(missing)}")
        extra = set(arrays) - set(names) - {"prior_stats"}  # absent before the label prior: zeros
        if extra:
            raise ValueError(f"unexpected lomtree arrays {sorted(extra)}")
        for key in ("T", "swap_resistance", "t_used", "n_swaps", "n_nodes", "depth_bound"):
            if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool) or meta[key] < 0:
                raise ValueError(f"lomtree meta {key!r} missing or invalid")
        if meta["T"] != self.T or meta["swap_resistance"] != self.R_S:
            raise ValueError("lomtree T/swap_resistance do not match the configuration")
        # absent in files from before leaf lists: 0
        if meta.get("leaf_labels", 0) != self.L or meta.get("candidates_up", 0) != self.up:
            raise ValueError("lomtree leaf_labels/candidates_up do not match the configuration")
        nn = meta["n_nodes"]
        k = self.k
        if not 1 <= nn <= 2 * self.T + 1:
            raise ValueError("node count out of range")
        for name in names:
            a = arrays[name]
            want = np.float64 if name in ("Esum", "cls_msum") else np.int64
            if a.dtype != want or a.ndim != 1:
                raise ValueError(f"lomtree array {name} has the wrong type or shape")
        for name, _ in _NODE_FIELDS:
            if arrays[name].shape[0] != nn:
                raise ValueError(f"lomtree array {name} has the wrong length")
        if arrays["Esum"].shape[0] != nn:
            raise ValueError("lomtree array Esum has the wrong length")
        parent, left, right = arrays["parent"], arrays["left"], arrays["right"]
        internal, model, C = arrays["internal"], arrays["model"], arrays["C"]
        En, maxcnt, maxlab = arrays["En"], arrays["maxcnt"], arrays["maxlab"]
        t_used = meta["t_used"]
        if t_used > self.T or nn != 2 * t_used + 1:
            raise ValueError("t_used is inconsistent with the node count")
        if not np.isin(internal, (0, 1)).all():
            raise ValueError("bad internal flags")
        isint = internal == 1
        lf = left[isint]
        rt = right[isint]
        if ((lf < 1) | (lf >= nn) | (rt < 1) | (rt >= nn) | (lf == rt)).any():
            raise ValueError("bad child links")
        if ((left[~isint] != -1) | (right[~isint] != -1)).any():
            raise ValueError("a leaf has children")
        ids = np.flatnonzero(isint)
        if parent[0] != -1 or (nn > 1 and ((parent[lf] != ids).any() or (parent[rt] != ids).any())):
            raise ValueError("parent links do not match child links")
        # every non-root node is a child of exactly one internal node -> with n-1 edges it is a tree
        kids = np.concatenate([lf, rt])
        if kids.size != nn - 1 or n_distinct(kids) != nn - 1:
            raise ValueError("links do not form one tree")
        seen = np.zeros(nn, dtype=bool)  # reachability from the root (no cycles)
        stack = [0]
        while stack:
            v = stack.pop()
            if seen[v]:
                raise ValueError("links do not form one tree")
            seen[v] = True
            if isint[v]:
                stack.append(int(left[v]))
                stack.append(int(right[v]))
        if not seen.all():
            raise ValueError("links do not form one tree")
        W = self.n_models_for(self.config)
        if ((model[isint] < 0) | (model[isint] >= W)).any() or (model[~isint] != -1).any():
            raise ValueError("bad regressor ids")
        if isint.sum() and n_distinct(model[isint]) != isint.sum():
            raise ValueError("two internal nodes share a regressor")
        if (C < 0).any() or (En < 0).any() or (maxcnt < 0).any() or ((maxlab < 1) | (maxlab > k)).any():
            raise ValueError("bad node counters")
        if ids.size and (C[ids] != np.minimum(C[left[ids]], C[right[ids]])).any():
            raise ValueError("C of an internal node is not the minimum of its children")
        ptr = arrays["cls_ptr"]
        lab, cnt, cn, msum = arrays["cls_label"], arrays["cls_cnt"], arrays["cls_n"], arrays["cls_msum"]
        nrec = lab.shape[0]
        if ptr.shape[0] != nn + 1 or ptr[0] != 0 or ptr[-1] != nrec or (np.diff(ptr) < 0).any():
            raise ValueError("bad cls_ptr")
        if cnt.shape[0] != nrec or cn.shape[0] != nrec or msum.shape[0] != nrec:
            raise ValueError("class record arrays differ in length")
        if ((lab < 1) | (lab > k) | (cnt < 1) | (cn < 0) | (cn > cnt)).any():
            raise ValueError("bad class records")
        rnode = np.repeat(np.arange(nn, dtype=np.int64), np.diff(ptr))
        if nrec > 1 and ((rnode[1:] == rnode[:-1]) & (lab[1:] <= lab[:-1])).any():
            raise ValueError("class records of a node are not sorted by label")
        if (np.bincount(rnode, weights=cn, minlength=nn) != En).any():
            raise ValueError("En does not match the class records")
        mx = np.zeros(nn, dtype=np.int64)
        np.maximum.at(mx, rnode, cnt)
        if (mx != maxcnt).any():
            raise ValueError("maxcnt does not match the class records")
        has = maxcnt > 0
        if has.any():
            pos = np.searchsorted(lab + rnode * (k + 1), maxlab[has] + np.flatnonzero(has) * (k + 1))
            ok = pos < nrec
            ok[ok] = (rnode[pos[ok]] == np.flatnonzero(has)[ok]) & (lab[pos[ok]] == maxlab[has][ok])
            if not ok.all() or (cnt[pos] != maxcnt[has]).any():
                raise ValueError("maxlab does not match the class records")
        stats = np.asarray(arrays.get("prior_stats", np.zeros(NB)))
        if stats.dtype != np.float64 or stats.shape != (NB,) or not np.all(np.isfinite(stats)) or (stats < 0).any():
            raise ValueError("lomtree prior_stats invalid")
        # build
        cap_max = 2 * self.T + 1
        cap = min(cap_max, max(NODE_CAP0, 1 << int(nn).bit_length()))
        node_i = np.zeros((cap, NF), dtype=np.int64)
        node_f = np.zeros(cap, dtype=np.float64)
        for name, col in _NODE_FIELDS:
            node_i[:nn, col] = arrays[name]
        node_f[:nn] = arrays["Esum"]
        glob = np.zeros(NG, dtype=np.int64)
        glob[G_NNODES] = nn
        glob[G_TUSED] = t_used
        glob[G_NSWAPS] = meta["n_swaps"]
        glob[G_T] = self.T
        glob[G_RS] = self.R_S
        glob[G_DEPTH] = meta["depth_bound"]
        glob[G_NODECAP_MAX] = cap_max
        glob[G_SHORTCUTS] = 1
        glob[G_LEAFL] = self.L
        glob[G_W0] = max(1, self.T)
        glob[G_UP] = self.up
        depths = depths_from_parents(node_i[:nn, N_PARENT])
        if depths.max() > meta["depth_bound"]:
            raise ValueError("depth_bound is smaller than the tree depth")
        self.node_i, self.node_f, self.glob = node_i, node_f, glob
        self.prior[:NB] = stats
        if self.prior[P_AUTO]:
            self.prior[P_BETA] = BETAS[int(np.argmax(stats))]
        self.node_top = self._node_lists(cap, rnode, lab, cnt)
        # the class records (sorted and unique per node: checked above) go into the hash table
        # when training or a report needs them; prediction uses only the nodes (on KJV the table
        # is 400 MB, and filling it was a third of `lomtree predict`)
        self._pending = (rnode, lab.copy(), cnt.copy(), cn.copy(), msum.copy())
        self.rec_i = self.rec_f = None
        if not getattr(self.learner, "predict_only", False):
            self._ensure_records()

    def _node_lists(self, cap, rnode, lab, cnt):
        """The candidate lists of the nodes from their class records: top ``L`` by (count
        descending, label ascending), what ``_top_update`` maintains online."""
        L = max(1, self.L)
        top = np.zeros((cap, 2 * L), dtype=np.int64)
        if self.L == 0 or rnode.size == 0:
            return top
        order = np.lexsort((lab, -cnt, rnode))
        rn, lb, ct = rnode[order], lab[order], cnt[order]
        first = np.searchsorted(rn, rn, side="left")
        rank = np.arange(rn.size) - first
        sel = rank < L
        top[rn[sel], rank[sel]] = lb[sel]
        top[rn[sel], L + rank[sel]] = ct[sel]
        return top

    def _ensure_records(self) -> None:
        """Build the class-record hash table from the loaded records (once)."""
        if self._pending is None:
            return
        rnode, lab, cnt, cn, msum = self._pending
        hcap = MIN_HASH_CAP
        while 4 * (lab.shape[0] + int(self.glob[G_DEPTH]) + 2) > hcap:
            hcap *= 2
        rec_i = np.full((hcap, RF), -1, dtype=np.int64)
        rec_f = np.zeros(hcap, dtype=np.float64)
        if not _insert_records(self.node_i, rec_i, rec_f, self.glob, rnode, lab, cnt, cn, msum):
            raise ValueError("duplicate class record")
        self.rec_i, self.rec_f, self._pending = rec_i, rec_f, None

    # -- reporting -------------------------------------------------------------------------
    def summary_extra(self) -> dict:
        return {"number_of_swaps": self.n_swaps}

    def inspect(self) -> dict:
        """Tree shape and split quality.

        Per internal node ``v`` with children ``l, r``, let ``n_l(y)``, ``n_r(y)`` be the class
        counts recorded at the children (examples of ``y`` that reached the child since it was
        created or last recycled), ``n_l = sum_y n_l(y)``, ``n_r`` likewise, ``n = n_l + n_r``
        (nodes with ``n = 0`` are skipped):

        * balance(v) = ``min(n_l, n_r) / n`` — the fraction of the node's examples that went the
          smaller way; in [0, 1/2], 1/2 is perfectly balanced (empirical ``beta`` of the paper's
          Definition 2: the split is beta-balanced iff balance >= beta);
        * purity(v) = ``sum_y max(n_l(y), n_r(y)) / n`` — the fraction of the node's examples
          whose label goes mostly to one side; in [1/2, 1], 1 is perfectly pure (the paper's
          Definition 1 with ``alpha = 1 - purity``: ``sum_y pi_y min(P(h>0|y), P(h<0|y))``).

        Per level (depth of ``v``): number of nodes, min and example-weighted mean balance, min
        and example-weighted mean purity. Depths: max leaf depth and the average leaf depth
        weighted by the examples recorded at each leaf.
        """
        nn = self.n_nodes
        st = self.state()
        parent, left, right = st["parent"], st["left"], st["right"]
        isint = st["internal"] == 1
        depth = depths_from_parents(parent)
        node, label, cnt, _, _ = self.records()
        tot = np.bincount(node, weights=cnt, minlength=nn).astype(np.int64)
        leaves = np.flatnonzero(~isint)
        lw = tot[leaves]
        info = {
            "reduction": self.name,
            "k": self.k,
            "regressors": self.n_models_for(self.config),
            "max_internal_nodes": self.T,
            "swap_resistance": self.R_S,
            "internal_nodes": int(isint.sum()),
            "leaves": int(leaves.size),
            "max_depth": int(depth[leaves].max()),
            "avg_depth_weighted": float((depth[leaves] * lw).sum() / lw.sum()) if lw.sum() else 0.0,
            "number_of_swaps": self.n_swaps,
            "distinct_leaf_labels": int(np.unique(st["maxlab"][leaves]).size),
            "class_records": int(node.size),
        }
        levels = []
        ids = np.flatnonzero(isint)
        if ids.size:
            nl = tot[left[ids]]
            nr = tot[right[ids]]
            n = nl + nr
            # purity: sum over labels of max(left count, right count) per parent
            side_parent = parent[node]
            is_child = side_parent >= 0
            pnode = side_parent[is_child]
            plab = label[is_child]
            pc = cnt[is_child]
            key = pnode * (self.k + 1) + plab
            uk, inv = np.unique(key, return_inverse=True)
            best = np.zeros(uk.size, dtype=np.int64)
            np.maximum.at(best, inv, pc)
            pure_num = np.bincount(uk // (self.k + 1), weights=best, minlength=nn)[ids]
            ok = n > 0
            bal = np.where(ok, np.minimum(nl, nr) / np.maximum(n, 1), 0.0)
            pur = np.where(ok, pure_num / np.maximum(n, 1), 0.0)
            d = depth[ids]
            for lev in np.unique(d[ok]):
                sel = ok & (d == lev)
                w = n[sel]
                levels.append({
                    "level": int(lev), "nodes": int(sel.sum()), "examples": int(w.sum()),
                    "balance_min": round(float(bal[sel].min()), 4),
                    "balance_mean": round(float((bal[sel] * w).sum() / w.sum()), 4),
                    "purity_min": round(float(pur[sel].min()), 4),
                    "purity_mean": round(float((pur[sel] * w).sum() / w.sum()), 4),
                })
        info["levels"] = levels
        return info
