"""Numba kernels of the probabilistic label tree (``reductions/plt.py``).

``PltTree`` (capacity ``C`` nodes, arity ``M``; node 0 is the root, never a leaf)
    child : int64, shape (C, M)     children of a node, ``child[a, :nchild[a]]``; -1 = none
    nchild : int64, shape (C,)      0 on leaves (and on the root of an empty tree)
    parent : int64, shape (C,)      -1 on the root
    label : int64, shape (C,)       the label of a leaf (>= 1); 0 on internal nodes
    nleaves : int64, shape (C,)     labels in the subtree
    leaf_of : int64, shape (k + 1,) leaf node of each label, -1 = not in the tree yet
    block : int64, shape (C,)       the regressor block of an internal node; -1 on leaves
    reg : int64, shape (C,)         the regressor of a node, ``block[parent] * W + position``
                                    among its parent's children; -1 on the root
    counts : int64, shape (N_CT,)   ``CT_NODES`` nodes used, ``CT_LABELS`` labels in the tree,
                                    ``CT_BLOCKS`` blocks given out

Regressors live in block slot mode (``kernels.linear``, ``W`` = the arity rounded up to a power
of two): the children of internal node ``a`` are regressors ``block[a] * W + j``, j = 0 ..
nchild - 1, and a feature's slots for them are adjacent rows, so a node's children are scored in
one pass over the example (``score_block``); the tree grows without moving any weight. Blocks are
given out in creation order of the internal nodes (those of a k-means tree in id order); a
push-down split (``insert_label``) hands the full node's block to the new node that takes its
children, so they keep their weights. The children of a node are either all leaves or all
internal nodes (every rule below keeps it so).

``params`` : float64, shape (N_PAR,) -- ``PAR_ARITY`` M, ``PAR_BEAM`` B, ``PAR_LOGISTIC`` (1 =
sigmoid link, else ``(clip(f)+1)/2``), ``PAR_NEED_PRED`` (0: the caller discards the
predictions), ``PAR_GAMMA`` (weight of the parent path in a candidate's ranking score, see
``best_candidate``), ``PAR_NEGATIVES`` (1: a trained example also trains every candidate leaf of
its beam toward -1, one-against-some), ``PAR_AUTO`` (1: gamma is chosen by progressive
validation among ``GAMMAS``).

``gstats`` : float64, shape (len(GAMMAS),) -- with ``PAR_AUTO``, the importance weight of the
trained examples each gamma of ``GAMMAS`` ranked right before their update (progressive
validation of the ranking alone: the beam, and so training, does not depend on gamma). After each
trained example ``PAR_GAMMA`` becomes the gamma with the largest count (ties: the earlier one in
``GAMMAS``, whose first entry is the default 0.25).

A kernel that would need more room (nodes or regressors) for an insertion stops *before* the
example that needs it and returns its index; the caller grows the arrays and calls again from
there, so results do not depend on chunking.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import jit, kernel

from . import linear as K

CT_NODES = 0
CT_LABELS = 1
CT_BLOCKS = 2
N_CT = 3

#: weight of ``log nleaves`` against the log-probability when an unseen label picks its subtree
#: (``insert_label``). 1 would rank subtrees by probability per label; 2 keeps the tree shallower
#: at the same accuracy (PyPI next word, 100,001 classes, most labels inserted online: depth 386
#: by probability alone, 22 with 1, 15 with 2; ``bench/notes/plt-at-scale.md``).
INSERT_BALANCE = 2.0

PAR_ARITY = 0
PAR_BEAM = 1
PAR_LOGISTIC = 2
PAR_NEED_PRED = 3
PAR_GAMMA = 4
PAR_NEGATIVES = 5
PAR_AUTO = 6
N_PAR = 7

#: the path weights PAR_AUTO chooses from, the default first (it wins ties, e.g. before any count)
GAMMAS = np.array([0.25, 0.0, 0.5, 0.75, 1.0])

#: weight of a leaf's raw score in its ranking score: it only orders leaves whose clipped
#: probabilities tie (e.g. several at 1 with squared loss)
TIE = 1e-6

#: nodes an insertion may create (a push-down split: two internal nodes and the leaf)
ROOM = 3


class PltTree(NamedTuple):
    child: np.ndarray
    nchild: np.ndarray
    parent: np.ndarray
    label: np.ndarray
    nleaves: np.ndarray
    leaf_of: np.ndarray
    block: np.ndarray
    reg: np.ndarray
    counts: np.ndarray


@kernel(inline="always")
def clipped_logp(logistic, f):
    """``node_logp`` of an already clipped score f."""
    if logistic:
        if f >= 0.0:
            return -math.log1p(math.exp(-f))
        return f - math.log1p(math.exp(f))
    p = (f + 1.0) * 0.5
    if p < 1e-12:
        p = 1e-12
    return math.log(p)


@kernel(inline="always")
def node_logp(lin, logistic, f):
    """log of the node probability ``P(label in this subtree | label in the parent's)`` from the
    raw score f: ``log sigmoid(clip(f))`` (logistic) or ``log((clip(f)+1)/2)`` floored at 1e-12."""
    return clipped_logp(logistic, K.clip_score(lin, f))


@kernel(inline="always")
def score_floor(logistic, t):
    """A clipped score below which ``clipped_logp`` is surely < t (by a margin far above rounding):
    the beam skips such children without a logarithm. -inf when no score is below it safely."""
    q = math.exp(t)
    if logistic:
        if t > -1e-9:
            return -np.inf
        f = t - math.log1p(-q)
        return f - 1e-6 if f < 10.0 else -np.inf  # the slope of log sigmoid, >= 4.5e-5 below 10
    if q <= 1e-12:
        return -np.inf
    return 2.0 * q - 1.0 - 1e-6  # (f + 1) / 2 >= q; the log's slope 1 / (f + 1) is far above 1e-9


@kernel(inline="always")
def _add_candidate(cn, cl, cs, cb, nc, c, parent_lp, lp, f):
    """Append leaf ``c`` (raw score f, ``lp = log P(c | parent)``) to the candidates; returns nc + 1."""
    cn[nc] = c
    cl[nc] = parent_lp + lp
    cs[nc] = lp + TIE * f
    cb[nc] = parent_lp
    return nc + 1


@kernel()
def beam_search(lin, tree, logistic, indices, values, s, e, B, bn, bl, nn, nl, cn, cl, cs, cb, fs, fst, ex, best_only):
    """Candidate labels of example ``s:e`` by beam search over the internal nodes.

    The frontier starts at the root and keeps the ``B`` internal nodes of highest log path
    probability ``sum log P(node | parent)`` (ties: smaller id); every leaf child of a frontier
    node becomes a candidate with its log path probability ``cl``, its own score
    ``cs = log P(leaf | parent) + TIE * f`` (the raw score f breaks ties of clipped
    probabilities) and its parent's log path probability ``cb`` (ranked by ``best_candidate``).
    Out: ``cn[:nc]`` (leaf nodes), ``cl``, ``cs``, ``cb``; returns nc (0 for an empty tree),
    candidates in discovery order. ``bn, bl, nn, nl``: frontier work arrays, size >= B;
    ``cn, cl, cs, cb`` size >= B * M * depth. The scores of each expanded node's children are left
    in ``fs[block]`` (float64, (blocks, M); ``block_scores``), stamped ``fst[block] = ex``.
    Cost: at most ``B * M`` scores per level, ``B`` passes over the example's features (one per
    expanded node).

    Logarithms only where they can matter (the result is the same): once the next frontier is
    full, a child whose clipped score is below ``score_floor`` of what it must beat is skipped;
    with ``best_only`` (a prediction that needs ``best_candidate`` alone, and a trained example,
    whose leaf negatives need only the frontier nodes: ``train_beam_negatives``) a frontier node's leaf
    children give one candidate, the one of highest raw score (ties: smaller label), since
    ``cs`` grows with f and its siblings share ``cb``: an argmax over the scores, without the
    other leaves' clipped scores.
    """
    nc = 0
    if tree.nchild[0] == 0:
        return 0
    nb = 1
    bn[0] = 0
    bl[0] = 0.0
    cap = cn.shape[0]
    W = np.int64(lin.hp[K.HP_W])
    while nb > 0:
        nx = 0  # the next frontier, kept sorted best first (ties: smaller id) in nn[:nx], nl[:nx]
        for b in range(nb):
            a = bn[b]
            fb = fs[tree.block[a]]
            K.score_block(lin, indices, values, s, e, tree.block[a] * W, tree.nchild[a], fb)
            fst[tree.block[a]] = ex
            if best_only and tree.nchild[tree.child[a, 0]] == 0:  # leaf children (all or none are leaves)
                top = 0
                for j in range(tree.nchild[a]):
                    f = fb[j]
                    if f != f:  # counted as clip_score counts each NaN score
                        lin.hp[K.HP_NAN] += 1.0
                    elif j > 0 and (f > fb[top] or (f == fb[top] and
                                                    tree.label[tree.child[a, j]] < tree.label[tree.child[a, top]])):
                        top = j
                f = fb[top]
                if nc < cap:
                    nc = _add_candidate(cn, cl, cs, cb, nc, tree.child[a, top], bl[b],
                                        clipped_logp(logistic, 0.0 if f != f else K.clip_score(lin, f)), f)
                continue
            floor = -np.inf
            if nx == B:
                floor = score_floor(logistic, nl[B - 1] - bl[b])
            for j in range(tree.nchild[a]):
                c = tree.child[a, j]
                f = fb[j]
                fc = K.clip_score(lin, f)
                if tree.nchild[c] == 0:
                    if nc < cap:
                        nc = _add_candidate(cn, cl, cs, cb, nc, c, bl[b], clipped_logp(logistic, fc), f)
                    continue
                if fc < floor:
                    continue
                y = bl[b] + clipped_logp(logistic, fc)
                if nx == B:
                    t = B - 1
                    if not (y > nl[t] or (y == nl[t] and c < nn[t])):
                        continue
                else:
                    t = nx
                    nx += 1
                while t > 0 and (y > nl[t - 1] or (y == nl[t - 1] and c < nn[t - 1])):
                    nn[t] = nn[t - 1]
                    nl[t] = nl[t - 1]
                    t -= 1
                nn[t] = c
                nl[t] = y
                if nx == B:
                    floor = score_floor(logistic, nl[B - 1] - bl[b])
        nb = nx
        for t in range(nb):
            bn[t] = nn[t]
            bl[t] = nl[t]
            K.prefetch_block(lin, indices, s, e, tree.block[bn[t]] * W, tree.nchild[bn[t]])
    return nc


@kernel()
def best_candidate(tree, cn, cs, cb, gamma, nc):
    """Index into the candidates of the highest ranking score ``cs + gamma * cb``, i.e.
    ``log P(leaf | parent) + gamma * log P(parent path)`` (gamma = 1: the PLT's path probability;
    0: the leaf's own regressor alone, which is trained against every candidate); ties: the
    smaller label; -1 if none."""
    best = -1
    bs = 0.0
    for t in range(nc):
        sc = cs[t] + gamma * cb[t]
        if best < 0 or sc > bs or (sc == bs and tree.label[cn[t]] < tree.label[cn[best]]):
            best = t
            bs = sc
    return best


@kernel(inline="always")
def _new_node(tree, W, par, lab):
    """A fresh node (leaf if ``lab > 0``; an internal node gets the next block) as the last
    child of ``par`` (or detached, par = -1, regressor -1)."""
    v = tree.counts[CT_NODES]
    tree.counts[CT_NODES] = v + 1
    tree.nchild[v] = 0
    tree.label[v] = lab
    tree.nleaves[v] = 1 if lab > 0 else 0
    tree.parent[v] = par
    tree.block[v] = -1
    if lab == 0:
        tree.block[v] = tree.counts[CT_BLOCKS]
        tree.counts[CT_BLOCKS] += 1
    tree.reg[v] = -1
    if par >= 0:
        tree.reg[v] = tree.block[par] * W + tree.nchild[par]
        tree.child[par, tree.nchild[par]] = v
        tree.nchild[par] += 1
    return v


@kernel()
def insert_label(lin, tree, logistic, M, indices, values, s, e, y, fb):
    """Put the unseen label ``y`` into the tree, guided by the example ``s:e``.

    Descend from the root to the child with the highest ``log P(child | parent, x) -
    INSERT_BALANCE * log nleaves(child)`` (ties: the child with fewer labels, then the smaller
    id), until a node whose children are leaves; add a leaf for ``y`` there if it has fewer than M children; otherwise add a new
    internal sibling (holding the leaf) under its parent if that has room; otherwise push the
    full node's leaves down into a new internal child A (which takes over the full node's block,
    so the leaves keep their regressors) and add a second new child B holding the leaf. New
    nodes start with fresh regressors; nothing is trained here. The per-label term keeps the tree
    balanced: by probability alone the fresh nodes of earlier insertions (an untrained regressor
    scores 0.5, above most trained siblings) would draw every new label, and the push-downs
    would chain them one level deeper each time. Caller guarantees room for
    ``ROOM`` nodes and 2 blocks. Returns the new leaf.
    """
    W = np.int64(lin.hp[K.HP_W])
    a = 0
    while True:
        na = tree.nchild[a]
        if na == 0 or tree.label[tree.child[a, 0]] > 0:
            break
        best = tree.child[a, 0]
        bl = -np.inf
        K.score_block(lin, indices, values, s, e, tree.block[a] * W, na, fb)
        for j in range(na):
            c = tree.child[a, j]
            lp = node_logp(lin, logistic, fb[j]) - INSERT_BALANCE * math.log(max(tree.nleaves[c], 1))
            if lp > bl or (lp == bl and tree.nleaves[c] < tree.nleaves[best]):
                bl = lp
                best = c
        a = best
    if tree.nchild[a] < M:
        leaf = _new_node(tree, W, a, y)
    else:
        p = tree.parent[a]
        if p >= 0 and tree.nchild[p] < M:
            leaf = _new_node(tree, W, _new_node(tree, W, p, 0), y)
        else:
            A = _new_node(tree, W, -1, 0)
            for j in range(tree.nchild[a]):
                c = tree.child[a, j]
                tree.child[A, j] = c
                tree.parent[c] = A
                tree.child[a, j] = -1
            tree.nchild[A] = tree.nchild[a]
            tree.nleaves[A] = tree.nleaves[a]
            tree.nchild[a] = 0
            x = tree.block[A]  # A takes the full node's block (its children keep their weights)
            tree.block[A] = tree.block[a]
            tree.block[a] = x
            tree.parent[A] = a
            tree.child[a, 0] = A
            tree.nchild[a] = 1
            tree.reg[A] = x * W
            leaf = _new_node(tree, W, _new_node(tree, W, a, 0), y)
    x = tree.parent[leaf]
    while x >= 0:
        tree.nleaves[x] += 1
        x = tree.parent[x]
    tree.leaf_of[y] = leaf
    tree.counts[CT_LABELS] += 1
    return leaf


@kernel()
def node_depth(tree, a):
    d = 0
    while tree.parent[a] >= 0:
        a = tree.parent[a]
        d += 1
    return d


@jit(nogil=True)
def tree_depth(tree):
    d = 1
    for v in range(tree.counts[CT_NODES]):
        if tree.nchild[v] == 0 and v > 0:
            x = node_depth(tree, v)
            if x > d:
                d = x
    return d


@jit(nogil=True)
def _beam_work(B, M, depth):
    """``beam_search``'s work arrays: frontier (node, log p) x2 of size B, candidates (node,
    log p, own score, parent log p) of size B * M * depth, a node's child scores (M)."""
    return (np.empty(B, dtype=np.int64), np.empty(B, dtype=np.float64),
            np.empty(B, dtype=np.int64), np.empty(B, dtype=np.float64),
            np.empty(B * M * depth, dtype=np.int64), np.empty(B * M * depth, dtype=np.float64),
            np.empty(B * M * depth, dtype=np.float64), np.empty(B * M * depth, dtype=np.float64),
            np.empty(M, dtype=np.float64))


#: most features of an example whose block rows ``blocks_distinct`` checks (more: not checked)
DISTINCT_MAX = 64


@kernel()
def blocks_distinct(lin, indices, s, e, tmp):
    """True when no two features of example ``s:e`` share a block row: in block mode feature h's
    row of block b starts at ``(h W K(b) + W C(b)) mod 2^bits`` with K(b) odd, so two features
    meet in some block exactly when ``h = h'`` modulo ``2^bits / W``, the same for every block.
    Then each (feature, child) slot of a node occurs once on the example, and ``learn_block`` may
    keep its rates packed (its ``distinct``). ``tmp``: int64 work, size >= ``DISTINCT_MAX``."""
    n = e - s
    if n > DISTINCT_MAX:
        return False
    m = np.int64(lin.hp[K.HP_MASK]) // np.int64(lin.hp[K.HP_W])
    for j in range(n):  # insertion into a sorted list
        v = np.int64(indices[s + j]) & m
        t = j
        while t > 0 and tmp[t - 1] > v:
            tmp[t] = tmp[t - 1]
            t -= 1
        if t > 0 and tmp[t - 1] == v:
            return False
        tmp[t] = v
    return True


#: entries of ``claim_rows``'s set (twice the block rows one example's training may claim)
ROW_SET = 1 << 11


@jit(nogil=True)
def block_scores(lin, tree):
    """``beam_search``'s per-block score store ``fs`` (float64, (blocks, M)) and stamps ``fst``
    (int64, 0), for every block the regressors of ``lin`` can hold; and ``claim_rows``'s set."""
    nb = lin.S.shape[0] // np.int64(lin.hp[K.HP_W])
    return (np.empty((nb, tree.child.shape[1]), dtype=np.float64), np.zeros(nb, dtype=np.int64),
            np.zeros(ROW_SET + 1, dtype=np.int64))


@kernel()
def claim_rows(lin, indices, s, e, r0, rows, stamp):
    """Add the rows of block ``r0 / W`` that example ``s:e`` touches to the example's set of
    written rows (``rows[:ROW_SET]``, open addressing; an entry is a row group's first slot,
    tagged with ``stamp``, the trained example's number; ``rows[ROW_SET]`` counts the example's
    entries as ``stamp * 2^32 + count``). Returns True when none of them was in the set before
    this call, i.e. no earlier update of this example wrote a weight of this block's rows (two
    blocks share a slot only where the first slots of their W-row groups coincide), so the
    block's scores from before the updates are still exact. False also when the set is full:
    then every later block of the example is scored afresh (exact, only slower)."""
    mult, off, mask = K.slot_params(lin, r0)
    tag = stamp << 32
    cnt = rows[ROW_SET]
    if cnt >> 32 != stamp:
        cnt = tag
    if cnt - tag + (e - s) > ROW_SET // 2:
        rows[ROW_SET] = tag + ROW_SET  # full for the rest of this example
        return False
    hm = ROW_SET - 1
    clean = True
    for t in range(s, e):
        base = (np.int64(indices[t]) * mult + off) & mask
        key = tag | base
        q = (base * np.int64(0x9E3779B1) >> 8) & hm
        while True:
            v = rows[q]
            if v == key:
                clean = False
                break
            if v >> 32 != stamp:  # an empty entry, or one of an earlier example
                rows[q] = key
                cnt += 1
                break
            q = (q + 1) & hm
    rows[ROW_SET] = cnt
    return clean


@kernel()
def train_positive(lin, tree, indices, values, s, e, mark, stamp, iw, queue, fs, fst, ex, rows, ms, ys, yh, work, act,
                   distinct):
    """Train the node regressors for an example whose positive nodes (the union of its labels'
    root-to-leaf paths) carry ``mark[v] == stamp``: at every positive internal node, from the
    root down (breadth first), each child toward +1 if it is positive, else -1 (Jasinska et al.
    2016; with one label, the path's nodes and their siblings). An example without
    labels trains the root's children toward -1. A node's children are updated together
    (``learn_block``: their slots never meet, so this equals their updates one after another).
    A node's children are scored afresh unless the beam scored them for this example
    (``fst[block] == ex``) and no earlier update of the example wrote their rows (``claim_rows``):
    then the beam's scores ``fs[block]`` are the same numbers.
    ``queue``: work, size >= the number of nodes; ``ms, ys, yh`` (M,), ``work`` (M, 4), ``act`` (M,)."""
    W = np.int64(lin.hp[K.HP_W])
    # the next positive node's rows are fetched while this one learns (as ``linear.prefetch_slots``:
    # short examples only, and not on a model small enough to stay cached)
    pf = e - s <= K.PREFETCH_MAX_FEATURES and lin.hp[K.HP_PREFETCH] != 0.0
    queue[0] = 0
    qh = 0
    qt = 1
    while qh < qt:
        a = queue[qh]
        qh += 1
        na = tree.nchild[a]
        if na == 0:
            continue
        r0 = tree.block[a] * W
        fb = fs[tree.block[a]]
        if not claim_rows(lin, indices, s, e, r0, rows, stamp) or fst[tree.block[a]] != ex:
            K.score_block(lin, indices, values, s, e, r0, na, fb)
        for j in range(na):
            c = tree.child[a, j]
            on = mark[c] == stamp
            ms[j] = r0 + j
            ys[j] = 1.0 if on else -1.0
            yh[j] = K.clip_score(lin, fb[j])
            if on and tree.nchild[c] > 0:
                queue[qt] = c
                qt += 1
        if pf and qh < qt:
            K.prefetch_block(lin, indices, s, e, tree.block[queue[qh]] * W, tree.nchild[queue[qh]])
        mult, off, _ = K.slot_params(lin, r0)
        K.learn_block(lin, indices, values, s, e, ms, na, ys, iw, yh, work, act, distinct, mult, off - r0)


@kernel()
def train_beam_negatives(lin, tree, indices, values, s, e, cn, nc, mark, stamp, iw, fs, fst, ex, rows, ms, ys, yh,
                         work, act, distinct):
    """One-against-some: every leaf child of the beam's frontier nodes that are not marked
    positive (``mark[a] != stamp``) toward -1, one ``learn_block`` over each such node's block (the
    same updates as one leaf after another, each scored right before it: the children's slots
    never meet). The candidates ``cn[:nc]`` name the nodes: a training beam is ``best_only``
    (``beam_search``), one candidate per frontier node with leaf children, in frontier order.
    Scores as ``train_positive``."""
    W = np.int64(lin.hp[K.HP_W])
    for t in range(nc):
        a = tree.parent[cn[t]]
        if mark[a] == stamp:
            continue
        r0 = tree.block[a] * W
        na = tree.nchild[a]
        fb = fs[tree.block[a]]
        if not claim_rows(lin, indices, s, e, r0, rows, stamp) or fst[tree.block[a]] != ex:
            K.score_block(lin, indices, values, s, e, r0, na, fb)
        for j in range(na):
            ms[j] = r0 + j
            ys[j] = -1.0
            yh[j] = K.clip_score(lin, fb[j])
        mult, off, _ = K.slot_params(lin, r0)
        K.learn_block(lin, indices, values, s, e, ms, na, ys, iw, yh, work, act, distinct, mult, off - r0)


@kernel(inline="always")
def unseen_labels(tree, lids, ls, le):
    """How many labels of ``lids[ls:le]`` are not in the tree yet."""
    new = 0
    for j in range(ls, le):
        if tree.leaf_of[lids[j]] < 0:
            new += 1
    return new


@kernel(inline="always")
def lacks_room(lin, tree, new, W):
    """True when inserting ``new`` labels may need more nodes or regressors than there are."""
    return new > 0 and (tree.counts[CT_NODES] + ROOM * new > tree.parent.shape[0]
                        or (tree.counts[CT_BLOCKS] + 2 * new) * W > lin.S.shape[0])


@jit(nogil=True)
def plt_insert_unseen(lin, tree, params, indptr, indices, values, lptr, lids, train, start):
    """Insert the labels of the trained examples ``start:`` that are not in the tree yet, in stream
    order, each guided by its example (``insert_label``, as ``plt_process`` does right before it
    learns the example), without learning anything: the tree is then complete for the batch, whose
    parts several threads learn at once while it must not change (``reductions/plt.py``).
    Returns n, or the index of the first example whose insertions need more room (as
    ``plt_process``)."""
    n = train.shape[0]
    M = np.int64(params[PAR_ARITY])
    logistic = params[PAR_LOGISTIC] != 0.0
    W = np.int64(lin.hp[K.HP_W])
    fb = np.empty(M, dtype=np.float64)
    for i in range(start, n):
        if not train[i]:
            continue
        new = unseen_labels(tree, lids, lptr[i], lptr[i + 1])
        if new == 0:
            continue
        if lacks_room(lin, tree, new, W):
            return i
        for j in range(lptr[i], lptr[i + 1]):
            if tree.leaf_of[lids[j]] < 0:
                insert_label(lin, tree, logistic, M, indices, values, indptr[i], indptr[i + 1], lids[j], fb)
    return n


@jit(nogil=True)
def plt_process(lin, tree, params, gstats, indptr, indices, values, lptr, lids, weights, train, start, preds):
    """Progressive predict-then-learn over examples ``start:`` of a chunk; example i's labels are
    ``lids[lptr[i]:lptr[i+1]]`` (one label: a set of one).

    Per example: beam search (``beam_search``) and the best candidate's label as the prediction
    (0: empty tree); a trained example whose beam serves neither leaf negatives nor the gamma
    statistics is predicted greedily (beam 1), as its prediction is only the progressive loss
    (held-out and test examples always get the full beam). Then, if it trains: with ``PAR_AUTO`` count the gammas whose best candidate
    is one of its labels (progressive precision@1; ``gstats``) and move ``PAR_GAMMA`` to the
    best; insert each of its labels not yet in the tree (``insert_label``: all of them, or none
    and the kernel stops before the example for room); mark the union of their root-to-leaf
    paths positive and train every positive node's children toward +1 or -1
    (``train_positive``; with one label, the path and its siblings); with ``PAR_NEGATIVES``
    train every leaf child of the beam's frontier nodes that are not positive toward -1
    (``train_beam_negatives``; the others were trained as children of a positive node). The beam
    is ``best_only`` throughout: a frontier node's leaves give one candidate (no logarithm for the
    others), which decides the prediction and the gamma statistics alike and names the node.

    preds : int64, shape (n,) out: the prediction before each update
    Returns n, or the index of the first example whose label insertions need more room.
    """
    n = preds.shape[0]
    M = np.int64(params[PAR_ARITY])
    B = np.int64(params[PAR_BEAM])
    logistic = params[PAR_LOGISTIC] != 0.0
    need = params[PAR_NEED_PRED] != 0.0
    gamma = params[PAR_GAMMA]
    negatives = params[PAR_NEGATIVES] != 0.0
    auto = params[PAR_AUTO] != 0.0
    depth = tree_depth(tree)
    bn, bl, nn, nl, cn, cl, cs, cb, fb = _beam_work(B, M, depth)
    W = np.int64(lin.hp[K.HP_W])
    cap = tree.parent.shape[0]
    mark = np.zeros(cap, dtype=np.int64)
    queue = np.empty(cap, dtype=np.int64)
    ms = np.empty(M, dtype=np.int64)
    ys = np.empty(M, dtype=np.float64)
    yh = np.empty(M, dtype=np.float64)
    work = np.empty((M, 4), dtype=np.float64)
    act = np.empty(M, dtype=np.int64)
    dtmp = np.empty(DISTINCT_MAX, dtype=np.int64)
    fs, fst, rows = block_scores(lin, tree)
    stamp = 0
    for i in range(start, n):
        s = indptr[i]
        e = indptr[i + 1]
        ls = lptr[i]
        le = lptr[i + 1]
        full = not train[i] or negatives or auto
        nc = 0
        ex = i + 1  # the stamp of the beam's scores (fst)
        if need or full:
            # a trained example's prediction is a progressive-validation figure only, unless its beam
            # also gives the leaf negatives or the gamma statistics: greedy (beam 1) then
            nc = beam_search(lin, tree, logistic, indices, values, s, e, B if full else 1, bn, bl, nn, nl, cn, cl, cs,
                             cb, fs, fst, ex, True)
            t = best_candidate(tree, cn, cs, cb, gamma, nc)
            preds[i] = tree.label[cn[t]] if t >= 0 else 0
        if not train[i]:
            continue
        new = unseen_labels(tree, lids, ls, le)
        if lacks_room(lin, tree, new, W):
            return i
        stamp += 1
        if auto and nc > 0:
            g_best = 0
            for g in range(GAMMAS.shape[0]):
                t = best_candidate(tree, cn, cs, cb, GAMMAS[g], nc)
                y = tree.label[cn[t]]
                for j in range(ls, le):
                    if lids[j] == y:
                        gstats[g] += weights[i]
                        break
                if gstats[g] > gstats[g_best]:
                    g_best = g
            gamma = GAMMAS[g_best]
            params[PAR_GAMMA] = gamma
        d = 0
        for j in range(ls, le):  # all insertions first: a push-down moves earlier leaves
            if tree.leaf_of[lids[j]] < 0:
                x = node_depth(tree, insert_label(lin, tree, logistic, M, indices, values, s, e, lids[j], fb))
                if x > d:
                    d = x
        if new > 0:
            ex = -1  # the new leaves have no beam scores: every node is scored afresh
        mark[0] = stamp  # the root's children are trained whatever the labels (none: all toward -1)
        for j in range(ls, le):
            a = tree.leaf_of[lids[j]]
            while a >= 0 and mark[a] != stamp:
                mark[a] = stamp
                a = tree.parent[a]
        iw = weights[i]
        distinct = blocks_distinct(lin, indices, s, e, dtmp)
        train_positive(lin, tree, indices, values, s, e, mark, stamp, iw, queue, fs, fst, ex, rows, ms, ys, yh, work,
                       act, distinct)
        if negatives:
            train_beam_negatives(lin, tree, indices, values, s, e, cn, nc, mark, stamp, iw, fs, fst, ex, rows, ms, ys, yh,
                                 work, act, distinct)
        K.end_example(lin, iw)
        if d > depth:  # room for more candidates (after the negatives, which read this example's)
            depth = d
            cn = np.empty(B * M * depth, dtype=np.int64)
            cl = np.empty(B * M * depth, dtype=np.float64)
            cs = np.empty(B * M * depth, dtype=np.float64)
            cb = np.empty(B * M * depth, dtype=np.float64)
    return n


@jit(nogil=True)
def plt_top(lin, tree, params, indptr, indices, values, labels, n_top, labs, probs, ranks, p_true):
    """The ``n_top`` best candidates by ranking score (beam ``max(B, n_top)``) with their path
    probabilities ``prod P(node | parent)`` and their ranking scores as numbers in 0..1,
    ``exp(cs + gamma cb)`` (``best_candidate``; the path probability when gamma = 1: an ensemble
    averages them); ``p_true`` the path probability of the given label (0 if unlabeled or not in
    the tree). labs int64, probs and ranks float64 (n, n_top); p_true (n,)."""
    n = labels.shape[0]
    M = np.int64(params[PAR_ARITY])
    B = np.int64(params[PAR_BEAM])
    if B < n_top:
        B = n_top
    logistic = params[PAR_LOGISTIC] != 0.0
    gamma = params[PAR_GAMMA]
    depth = tree_depth(tree)
    bn, bl, nn, nl, cn, cl, cs, cb, fb = _beam_work(B, M, depth)
    fs, fst, _ = block_scores(lin, tree)
    for i in range(n):
        s = indptr[i]
        e = indptr[i + 1]
        nc = beam_search(lin, tree, logistic, indices, values, s, e, B, bn, bl, nn, nl, cn, cl, cs, cb, fs, fst, 0, False)
        for t in range(n_top):
            labs[i, t] = 0
            probs[i, t] = 0.0
            ranks[i, t] = 0.0
            b = best_candidate(tree, cn, cs, cb, gamma, nc)
            if b < 0:
                continue
            labs[i, t] = tree.label[cn[b]]
            probs[i, t] = math.exp(cl[b])
            ranks[i, t] = math.exp(cs[b] + gamma * cb[b])
            cn[b] = cn[nc - 1]
            cl[b] = cl[nc - 1]
            cs[b] = cs[nc - 1]
            cb[b] = cb[nc - 1]
            nc -= 1
        y = labels[i]
        p_true[i] = 0.0
        if 1 <= y < tree.leaf_of.shape[0] and tree.leaf_of[y] >= 0:
            lp = 0.0
            a = tree.leaf_of[y]
            while tree.parent[a] >= 0:
                lp += node_logp(lin, logistic, K.score(lin, indices, values, s, e, tree.reg[a]))
                a = tree.parent[a]
            p_true[i] = math.exp(lp)


@jit(nogil=True)
def majority_process(counts, labels, train, preds):
    """Predictions while the tree is not built yet: the most frequent trained label so far
    (ties: the smallest; 0 before any), then count the example's label if it trains.
    counts : int64, shape (k + 1,), in/out; ``counts[0]`` holds the current argmax."""
    for i in range(labels.shape[0]):
        preds[i] = counts[0]
        if train[i]:
            y = labels[i]
            counts[y] += 1
            b = counts[0]
            if b == 0 or counts[y] > counts[b] or (counts[y] == counts[b] and y < b):
                counts[0] = y


@jit(nogil=True)
def sketch_centroids(indptr, indices, values, ex, rows, d_bits, out):
    """For each pair t, add example ``ex[t]``'s L2-normalised features, count-sketched to
    ``2**d_bits`` dimensions, to row ``rows[t]`` of ``out`` (float64, (n_labels, 2**d_bits));
    rows[t] < 0: skipped (an example with several labels is one pair per label). Feature h goes
    to bucket ``(h * phi) >> (64 - d_bits)`` with the sign of bit 31 of the same product (phi
    the 64-bit golden ratio), so equal features agree across examples."""
    phi = np.uint64(0x9E3779B97F4A7C15)
    sh = np.uint64(64 - d_bits)
    for t in range(rows.shape[0]):
        r = rows[t]
        i = ex[t]
        if r < 0:
            continue
        s = indptr[i]
        e = indptr[i + 1]
        nrm = 0.0
        for j in range(s, e):
            v = np.float64(values[j])
            if math.isfinite(v):
                nrm += v * v
        if nrm <= 0.0:
            continue
        nrm = 1.0 / math.sqrt(nrm)
        for j in range(s, e):
            v = np.float64(values[j])
            if not math.isfinite(v):
                continue
            hv = np.uint64(indices[j]) * phi
            b = np.int64(hv >> sh)
            if (hv >> np.uint64(31)) & np.uint64(1):
                out[r, b] -= v * nrm
            else:
                out[r, b] += v * nrm


@jit(nogil=True)
def cluster_sums(assign, X, out):
    """``out[assign[i]] += X[i]`` for every row in order (``np.add.at``'s sums, bit for bit;
    np.add.at itself made the k-means build of a 5,001-label binary tree take ~30 s)."""
    for i in range(X.shape[0]):
        c = assign[i]
        for j in range(X.shape[1]):
            out[c, j] += X[i, j]


@kernel(inline="always")
def _before(S, i, c, j, d):
    """Whether the pair (item i, cluster c) comes before (j, d) in the walk of
    ``greedy_balanced_assign``: more similar first, ties by the flat index ``item * m + cluster``
    (the order of a stable sort of ``-S``)."""
    a = S[i, c]
    b = S[j, d]
    return a > b or (a == b and (i < j or (i == j and c < d)))


@kernel(inline="always")
def _sift_down(S, cur, heap, size, j):
    """Restore the heap (items, keyed by their current pair ``(item, cur[item])``) below slot j."""
    while True:
        lo = j
        left = 2 * j + 1
        if left < size and _before(S, heap[left], cur[heap[left]], heap[lo], cur[heap[lo]]):
            lo = left
        if left + 1 < size and _before(S, heap[left + 1], cur[heap[left + 1]], heap[lo], cur[heap[lo]]):
            lo = left + 1
        if lo == j:
            return
        heap[j], heap[lo] = heap[lo], heap[j]
        j = lo


@jit(nogil=True)
def greedy_balanced_assign(S, cap, out):
    """Balanced assignment of n items to m clusters by similarity ``S`` (float64, (n, m)): walk
    all (item, cluster) pairs from the most similar (ties: the smaller flat index ``item * m +
    cluster``) and give an item the first cluster that still has capacity. cap : int64 (m,)
    capacities, in/out (decremented); out : int64 (n,), -1 for an item left without room.

    The walk is not sorted as a whole (``n m log(n m)``: numpy's stable argsort of the pairs was
    half of the label tree's k-means at 100,000 labels): each item's clusters are ranked once
    (insertion sort: m is small), and a heap holds every unassigned item at its best cluster not
    yet found full. The heap's minimum is the next pair of the whole walk that can change
    anything (a full cluster stays full; an item's later pairs come after its earlier ones), so
    the assignment is the walk's."""
    n, m = S.shape
    rank = np.empty((n, m), dtype=np.int64)
    for i in range(n):
        out[i] = -1
        for c in range(m):  # stable insertion by decreasing similarity
            t = c
            while t > 0 and S[i, c] > S[i, rank[i, t - 1]]:
                rank[i, t] = rank[i, t - 1]
                t -= 1
            rank[i, t] = c
    nxt = np.zeros(n, dtype=np.int64)
    cur = rank[:, 0].copy()
    heap = np.arange(n)
    size = n
    for j in range(size // 2 - 1, -1, -1):
        _sift_down(S, cur, heap, size, j)
    while size > 0:
        i = heap[0]
        c = cur[i]
        if cap[c] > 0:
            out[i] = c
            cap[c] -= 1
            size -= 1
            heap[0] = heap[size]
        else:
            nxt[i] += 1
            if nxt[i] == m:  # every cluster is full: the item stays -1
                size -= 1
                heap[0] = heap[size]
            else:
                cur[i] = rank[i, nxt[i]]
        _sift_down(S, cur, heap, size, 0)
