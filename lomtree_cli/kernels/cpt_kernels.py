"""Numba kernels of the Conditional Probability Tree and the label-frequency table (§3.5).

State is flat arrays grouped in NamedTuples (docs/ARCHITECTURE.md); Python grows them by doubling between
kernel calls. A kernel that would need more room stops *before* the example that needs it and
returns that example's index; the caller grows the arrays and calls again from there, so results
do not depend on chunking.

``CptTree`` (capacity ``C`` nodes, node 0 is the root once the tree is non-empty)
    parent, left, right : int64, shape (C,)   -1 = none; a node is a leaf iff ``left == -1``
    label : int64, shape (C,)                 the label of a leaf (0 on internal nodes)
    model : int64, shape (C,)                 regressor id of every node (leaves included)
    nleaves : int64, shape (C,)               leaves in the subtree
    counts : int64, shape (N_CT,)             ``CT_NODES`` used nodes, ``CT_NEXT_MODEL``,
                                              ``CT_LEAVES`` labels seen

``LabelMap``: open addressing with linear probing, label (int64 >= 1) -> int64 value
    keys : int64, shape (H,)   H a power of two, 0 = empty slot
    vals : int64, shape (H,)
    size : int64, shape (1,)   number of keys; callers keep ``2 * size <= H``

``params`` : float64, shape (N_PAR,) -- ``PAR_ALPHA``, ``PAR_RANDOM`` (1 = random insertion),
``PAR_EXACT`` (1 = best-first argmax, 0 = greedy), ``PAR_LOGISTIC`` (1 = sigmoid link),
``PAR_FORCE_P`` (NaN = off; otherwise every insertion decision uses this node probability
instead of the regressor's -- a test hook for adversarial regressors, never set by the CLI).

References
----------
A. Beygelzimer, J. Langford, Y. Lifshits, G. Sorkin, A. Strehl. Conditional Probability Tree
Estimation Analysis and Algorithms. UAI 2009 (arXiv:0903.4217).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import jit, kernel

from . import linear as K
from .trees import splitmix64_next

CT_NODES = 0
CT_NEXT_MODEL = 1
CT_LEAVES = 2
N_CT = 3

PAR_ALPHA = 0
PAR_RANDOM = 1
PAR_EXACT = 2
PAR_LOGISTIC = 3
PAR_FORCE_P = 4
PAR_NEED_PRED = 5  # 0: progressive predictions not wanted (no argmax; preds 0)
N_PAR = 6

_H1 = np.uint64(0xBF58476D1CE4E5B9)
_H2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S63 = np.uint64(63)


class CptTree(NamedTuple):
    """Tree arrays (see the module docstring)."""

    parent: np.ndarray
    left: np.ndarray
    right: np.ndarray
    label: np.ndarray
    model: np.ndarray
    nleaves: np.ndarray
    counts: np.ndarray


class LabelMap(NamedTuple):
    """Open-addressing hash map label -> value (see the module docstring)."""

    keys: np.ndarray
    vals: np.ndarray
    size: np.ndarray


# -- label map ---------------------------------------------------------------------------------
@kernel(inline="always")
def _hash_slot(key, mask):
    z = np.uint64(key)
    z = (z ^ (z >> _S30)) * _H1
    z = (z ^ (z >> _S27)) * _H2
    z = z ^ (z >> _S31)
    return np.int64(z & np.uint64(mask))


@kernel()
def map_get(lmap, key):
    """Value stored for ``key`` (>= 1), or -1."""
    keys = lmap.keys
    mask = keys.shape[0] - 1
    i = _hash_slot(key, mask)
    while True:
        k = keys[i]
        if k == key:
            return lmap.vals[i]
        if k == 0:
            return -1
        i = (i + 1) & mask


@kernel()
def map_put(lmap, key, val):
    """Insert or overwrite ``key -> val``; the caller guarantees a free slot."""
    keys = lmap.keys
    mask = keys.shape[0] - 1
    i = _hash_slot(key, mask)
    while True:
        k = keys[i]
        if k == key:
            lmap.vals[i] = val
            return
        if k == 0:
            keys[i] = key
            lmap.vals[i] = val
            lmap.size[0] += 1
            return
        i = (i + 1) & mask


@kernel()
def map_fill(lmap, keys, vals):
    """Put every ``keys[i] -> vals[i]`` (used to rebuild a grown or loaded map)."""
    for i in range(keys.shape[0]):
        map_put(lmap, keys[i], vals[i])


def new_map(capacity: int) -> LabelMap:
    cap = 16
    while cap < capacity:
        cap *= 2
    return LabelMap(np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(1, np.int64))


def map_items(lmap: LabelMap):
    used = lmap.keys != 0
    return lmap.keys[used], lmap.vals[used]


def grow_map(lmap: LabelMap, min_size: int) -> LabelMap:
    """A map with room for ``min_size`` keys at load <= 1/2 holding the same items."""
    cap = lmap.keys.shape[0]
    if 2 * min_size <= cap:
        return lmap
    while 2 * min_size > cap:
        cap *= 2
    out = new_map(cap)
    k, v = map_items(lmap)
    map_fill(out, k, v)
    return out


# -- probabilities -------------------------------------------------------------------------------
@kernel()
def node_prob(lin, idx, val, s, e, m, logistic):
    """``p_a(x)`` = P(right | x, reached a) of regressor ``m`` (§3.5 link)."""
    f = K.clip_score(lin, K.score(lin, idx, val, s, e, m))
    if logistic:
        return 1.0 / (1.0 + math.exp(-f))
    return (f + 1.0) * 0.5


@kernel()
def path_prob(lin, tree, idx, val, s, e, leaf, logistic):
    """``P(label of leaf | x)``: product of the conditionals from the leaf up to the root."""
    P = 1.0
    a = leaf
    while tree.parent[a] >= 0:
        par = tree.parent[a]
        p = node_prob(lin, idx, val, s, e, tree.model[par], logistic)
        if tree.right[par] == a:
            P *= p
        else:
            P *= 1.0 - p
        a = par
    return P


@kernel(inline="always")
def _better(p1, n1, p2, n2):
    return p1 > p2 or (p1 == p2 and n1 < n2)


@kernel()
def _heap_push(hp, hn, size, p, node):
    i = size
    while i > 0:
        par = (i - 1) >> 1
        if _better(p, node, hp[par], hn[par]):
            hp[i] = hp[par]
            hn[i] = hn[par]
            i = par
        else:
            break
    hp[i] = p
    hn[i] = node
    return size + 1


@kernel()
def _heap_pop(hp, hn, size):
    """Remove the top; returns the new size (the top is read by the caller before)."""
    size -= 1
    if size == 0:
        return 0
    p = hp[size]
    node = hn[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _better(hp[c + 1], hn[c + 1], hp[c], hn[c]):
            c += 1
        if _better(hp[c], hn[c], p, node):
            hp[i] = hp[c]
            hn[i] = hn[c]
            i = c
        else:
            break
    hp[i] = p
    hn[i] = node
    return size


@kernel()
def best_first(lin, tree, idx, val, s, e, logistic, nwant, out_lab, out_p, hp, hn):
    """The ``nwant`` most probable leaves, exactly, in order (best-first search, §3.5).

    Max-heap of (path probability, node), ties to the smaller node id. A popped leaf is the next
    most probable label because a child never exceeds its parent's probability.
    hp : float64, hn : int64, shape >= number of leaves + 1 (scratch). Returns how many were found.
    """
    if tree.counts[CT_NODES] == 0 or nwant <= 0:
        return 0
    size = _heap_push(hp, hn, 0, 1.0, 0)
    found = 0
    while size > 0:
        P = hp[0]
        a = hn[0]
        size = _heap_pop(hp, hn, size)
        if tree.left[a] < 0:
            out_lab[found] = tree.label[a]
            out_p[found] = P
            found += 1
            if found >= nwant:
                break
        else:
            p = node_prob(lin, idx, val, s, e, tree.model[a], logistic)
            size = _heap_push(hp, hn, size, P * (1.0 - p), tree.left[a])
            size = _heap_push(hp, hn, size, P * p, tree.right[a])
    return found


@kernel()
def greedy(lin, tree, idx, val, s, e, logistic):
    """Greedy descent (``p > 0.5`` -> right): (label, path probability); (0, 0) if empty."""
    if tree.counts[CT_NODES] == 0:
        return 0, 0.0
    a = 0
    P = 1.0
    while tree.left[a] >= 0:
        p = node_prob(lin, idx, val, s, e, tree.model[a], logistic)
        if p > 0.5:
            P *= p
            a = tree.right[a]
        else:
            P *= 1.0 - p
            a = tree.left[a]
    return tree.label[a], P


# -- training ----------------------------------------------------------------------------------
@kernel()
def _new_leaf(tree, node, label, parent):
    tree.parent[node] = parent
    tree.left[node] = -1
    tree.right[node] = -1
    tree.label[node] = label
    tree.model[node] = tree.counts[CT_NEXT_MODEL]
    tree.counts[CT_NEXT_MODEL] += 1
    tree.nleaves[node] = 1


@kernel()
def insert_label(lin, tree, lmap, rng, params, idx, val, s, e, y):
    """Insert unseen label ``y`` (§3.5 step 1-2): descend by the alpha rule, split the leaf.

    Returns the new leaf. The caller guarantees room for two nodes, two models, one map key.
    """
    n = tree.counts[CT_NODES]
    if n == 0:
        _new_leaf(tree, 0, y, -1)
        tree.counts[CT_NODES] = 1
        tree.counts[CT_LEAVES] = 1
        map_put(lmap, y, 0)
        return 0
    alpha = params[PAR_ALPHA]
    random_insert = params[PAR_RANDOM] != 0.0
    logistic = params[PAR_LOGISTIC] != 0.0
    force_p = params[PAR_FORCE_P]
    a = 0
    while tree.left[a] >= 0:
        if random_insert:
            go_right = (splitmix64_next(rng) >> _S63) == np.uint64(1)
        else:
            cl = np.float64(tree.nleaves[tree.left[a]])
            cr = np.float64(tree.nleaves[tree.right[a]])
            if force_p == force_p:
                p = force_p
            elif alpha < 1.0:
                p = node_prob(lin, idx, val, s, e, tree.model[a], logistic)
            else:
                p = 0.5  # (1 - alpha) = 0: the regressor does not matter
            obj = (1.0 - alpha) * (2.0 * p - 1.0) + alpha * math.log2(cl / cr)
            go_right = obj > 0.0
        a = tree.right[a] if go_right else tree.left[a]
    old = tree.label[a]
    lnode = n
    rnode = n + 1
    _new_leaf(tree, lnode, old, a)
    _new_leaf(tree, rnode, y, a)
    tree.left[a] = lnode
    tree.right[a] = rnode
    tree.label[a] = 0
    tree.nleaves[a] = 2
    up = tree.parent[a]
    while up >= 0:
        tree.nleaves[up] += 1
        up = tree.parent[up]
    tree.counts[CT_NODES] = n + 2
    tree.counts[CT_LEAVES] += 1
    map_put(lmap, old, lnode)
    map_put(lmap, y, rnode)
    return rnode


@kernel()
def train_path(lin, tree, idx, val, s, e, leaf, iw):
    """§3.5 step 3: the leaf's model toward -1, then each ancestor toward its side, bottom-up.

    Each regressor is scored just before its update (pre-update prediction of that regressor).
    """
    m = tree.model[leaf]
    f = K.score(lin, idx, val, s, e, m)
    K.learn(lin, idx, val, s, e, m, -1.0, iw, K.clip_score(lin, f))
    a = leaf
    while tree.parent[a] >= 0:
        par = tree.parent[a]
        y = 1.0 if tree.right[par] == a else -1.0
        m = tree.model[par]
        f = K.score(lin, idx, val, s, e, m)
        K.learn(lin, idx, val, s, e, m, y, iw, K.clip_score(lin, f))
        a = par
    K.end_example(lin, iw)


@jit()
def cpt_process(lin, tree, lmap, rng, params, indptr, indices, values, labels, weights, train,
                start, preds, losses):
    """Progressive predict-then-learn over examples ``start..n-1`` of a chunk.

    preds : int64 (n,) out, argmax label (0 = empty tree); losses : float64 (n,) out,
    ``iw * (1 - P(y|x))^2`` for labeled examples (0 for unlabeled).
    Returns n when done, or the index of the first example that needs more room (nodes, models
    or map slots); nothing of that example has been done yet.
    """
    n = labels.shape[0]
    cap = tree.parent.shape[0]
    logistic = params[PAR_LOGISTIC] != 0.0
    exact = params[PAR_EXACT] != 0.0
    hp = np.empty(cap + 2, dtype=np.float64)
    hn = np.empty(cap + 2, dtype=np.int64)
    lab1 = np.zeros(1, dtype=np.int64)
    p1 = np.zeros(1, dtype=np.float64)
    for i in range(start, n):
        y = labels[i]
        leaf = -1
        if y > 0:
            leaf = map_get(lmap, y)
        if train[i] and leaf < 0:
            if (tree.counts[CT_NODES] + 2 > cap or tree.counts[CT_NEXT_MODEL] + 2 > lin.S.shape[0]
                    or 2 * (lmap.size[0] + 1) > lmap.keys.shape[0]):
                return i
        s = indptr[i]
        e = indptr[i + 1]
        # progressive evaluation
        if params[PAR_NEED_PRED] == 0.0:
            preds[i] = 0
        elif exact:
            if best_first(lin, tree, indices, values, s, e, logistic, 1, lab1, p1, hp, hn) == 1:
                preds[i] = lab1[0]
            else:
                preds[i] = 0
        else:
            preds[i] = greedy(lin, tree, indices, values, s, e, logistic)[0]
        if y > 0:
            P = 0.0
            if leaf >= 0:
                P = path_prob(lin, tree, indices, values, s, e, leaf, logistic)
            losses[i] = weights[i] * (1.0 - P) * (1.0 - P)
        else:
            losses[i] = 0.0
        # learning
        if train[i]:
            if leaf < 0:
                leaf = insert_label(lin, tree, lmap, rng, params, indices, values, s, e, y)
            train_path(lin, tree, indices, values, s, e, leaf, weights[i])
    return n


@jit()
def cpt_top(lin, tree, lmap, params, indptr, indices, values, labels, ntop, out_lab, out_p, p_true):
    """Top-``ntop`` labels with probabilities (exact), and P(own label | x) (0 if unseen/unlabeled).

    out_lab : int64 (n, ntop), out_p : float64 (n, ntop) (unused columns 0); p_true float64 (n,).
    With greedy prediction and ``ntop == 1`` the column holds the greedy label instead.
    """
    n = labels.shape[0]
    cap = tree.parent.shape[0]
    logistic = params[PAR_LOGISTIC] != 0.0
    exact = params[PAR_EXACT] != 0.0
    hp = np.empty(cap + 2, dtype=np.float64)
    hn = np.empty(cap + 2, dtype=np.int64)
    for i in range(n):
        s = indptr[i]
        e = indptr[i + 1]
        if exact or ntop > 1:
            best_first(lin, tree, indices, values, s, e, logistic, ntop, out_lab[i], out_p[i], hp, hn)
        else:
            lab, P = greedy(lin, tree, indices, values, s, e, logistic)
            out_lab[i, 0] = lab
            out_p[i, 0] = P
        y = labels[i]
        p_true[i] = 0.0
        if y > 0:
            leaf = map_get(lmap, y)
            if leaf >= 0:
                p_true[i] = path_prob(lin, tree, indices, values, s, e, leaf, logistic)


# -- label-frequency table -----------------------------------------------------------------------
@kernel()
def table_process(lmap, tlabels, tcounts, tstat, labels, weights, train, start, preds, losses):
    """Progressive evaluation of the empirical label distribution, then counting.

    lmap : label -> row; tlabels int64 (C,), tcounts float64 (C,) rows in order of first sight;
    tstat float64 (3,): [total weight, best row (-1 = none), rows used].
    P(y) = count(y) / total; prediction = most frequent label (ties: smaller label).
    Returns n, or the first index that needs a new row when there is no room.
    """
    n = labels.shape[0]
    cap = tlabels.shape[0]
    for i in range(start, n):
        y = labels[i]
        row = -1
        if y > 0:
            row = map_get(lmap, y)
        if train[i] and row < 0:
            if np.int64(tstat[2]) + 1 > cap or 2 * (lmap.size[0] + 1) > lmap.keys.shape[0]:
                return i
        best = np.int64(tstat[1])
        total = tstat[0]
        preds[i] = tlabels[best] if best >= 0 else 0
        if y > 0:
            P = tcounts[row] / total if (row >= 0 and total > 0.0) else 0.0
            losses[i] = weights[i] * (1.0 - P) * (1.0 - P)
        else:
            losses[i] = 0.0
        if train[i]:
            if row < 0:
                row = np.int64(tstat[2])
                tlabels[row] = y
                tcounts[row] = 0.0
                tstat[2] += 1.0
                map_put(lmap, y, row)
            tcounts[row] += weights[i]
            tstat[0] += weights[i]
            if best < 0 or tcounts[row] > tcounts[best] or (tcounts[row] == tcounts[best] and y < tlabels[best]):
                tstat[1] = row
    return n


@kernel()
def map_lookup_many(lmap, keys, out):
    """out[i] = value of keys[i] or -1 (keys <= 0 give -1)."""
    for i in range(keys.shape[0]):
        out[i] = map_get(lmap, keys[i]) if keys[i] > 0 else -1
