"""Shared numba helpers for the fixed-structure trees (docs/ALGORITHMS.md §3.2, §3.3).

- ``splitmix64_next(state)``: SplitMix64 (Steele, Lea, Flood 2014), the portable RNG used for the
  Rtree permutation and by other reductions (CPT random insertion). ``state`` is a ``uint64``
  array of shape (1,) advanced in place, so it can be stored in a model file and resumed.
- ``fisher_yates_permutation(k, seed)``: the permutation ``π`` of ``1..k`` of §3.3.
- ``build_bracket(k)``: VW's ``--ect`` single-elimination bracket (§3.2): leaves ``0..k-1``,
  internal nodes ``k..2k-2``, an odd node out gets a bye into the next round.
- ``filter_process``, ``rtree_process``: the chunk kernels of the Filter tree and the Rtree
  (``reductions/filter_tree.py``, ``reductions/random_tree.py``) over a ``TreeArrays`` bracket.

All arithmetic of the RNG is done in ``uint64`` (numba: never mix with int64, that silently
promotes to float64).
"""

from __future__ import annotations

import numpy as np

from . import jit, kernel

from . import linear as K

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


@kernel()
def splitmix64_next(state):
    """Advance ``state`` (uint64, shape (1,)) and return the next SplitMix64 output (uint64).

    ``st += 0x9E3779B97F4A7C15; z = st; z = (z ^ z>>30)*0xBF58476D1CE4E5B9;
    z = (z ^ z>>27)*0x94D049BB133111EB; return z ^ z>>31`` (all mod 2^64).
    """
    st = state[0] + _GOLDEN
    state[0] = st
    z = st
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@jit()
def fisher_yates_permutation(k, state):
    """The Rtree permutation ``π`` of ``1..k`` (int32, shape (k,)), advancing ``state``.

    ``a = [1..k]``; for ``i = k-1 … 1``: ``j = next() mod (i+1)``; swap ``a[i], a[j]``
    (docs/ALGORITHMS.md §3.3). ``state`` is a uint64 array of shape (1,) holding the SplitMix64 state,
    initialised by the caller to the seed. The modulo is taken in uint64 (no int64 mixing).
    """
    a = np.empty(k, dtype=np.int32)
    for i in range(k):
        a[i] = i + 1
    for i in range(k - 1, 0, -1):
        r = splitmix64_next(state)
        j = np.int64(r % np.uint64(i + 1))
        t = a[i]
        a[i] = a[j]
        a[j] = t
    return a


def permutation_from_seed(k: int, seed: int) -> np.ndarray:
    """``fisher_yates_permutation(k, [seed])`` as a convenience for Python callers."""
    st = np.array([seed], dtype=np.uint64)
    return fisher_yates_permutation(np.int64(k), st)


@jit()
def build_bracket(k):
    """VW's ``--ect`` single-elimination bracket over ``k`` leaves (docs/ALGORITHMS.md §3.2).

    Returns ``(parent, left, right)``, each int32 of shape (2k-1,): leaves are ids ``0..k-1``,
    internal nodes ``k..2k-2`` in creation order, the root is ``2k-2`` (``0`` when k = 1);
    ``-1`` = none. Each round pairs neighbours ``(level[2j], level[2j+1])``; an odd node out gets
    a bye and is appended at the end of the next round. Depth ``<= ceil(log2 k)``.
    """
    n = 2 * k - 1
    parent = np.full(n, -1, dtype=np.int32)
    left = np.full(n, -1, dtype=np.int32)
    right = np.full(n, -1, dtype=np.int32)
    level = np.arange(k).astype(np.int32)
    nxt = k
    size = k
    while size > 1:
        half = size // 2
        new = np.empty(half + (size & 1), dtype=np.int32)
        for j in range(half):
            a = level[2 * j]
            b = level[2 * j + 1]
            left[nxt] = a
            right[nxt] = b
            parent[a] = nxt
            parent[b] = nxt
            new[j] = nxt
            nxt += 1
        if size & 1:
            new[half] = level[size - 1]
        level = new
        size = new.shape[0]
    return parent, left, right


@jit()
def node_depths(parent):
    """int32, shape (2k-1,): depth of every node (root 0). Parents have larger ids than children."""
    n = parent.shape[0]
    d = np.zeros(n, dtype=np.int32)
    for v in range(n - 1, -1, -1):
        p = parent[v]
        if p >= 0:
            d[v] = d[p] + 1
    return d


@kernel(inline="always")
def prefetch_path(lin, idx, start, end, parent, c, k):
    """Prefetch the rows of the regressors of every ancestor of bracket node ``c`` (node ``a`` uses
    regressor ``a - k``) for ``idx[start:end]``: the nodes a label's training visits (bottom-up in
    the Filter tree, top-down in the Rtree), known before the prediction's descent, so their cache
    misses overlap with it. A hint only; it pays on examples with many features (``-q``), whose
    training is otherwise bound by those misses."""
    a = parent[c]
    while a >= 0:
        K.prefetch_block(lin, idx, start, end, a - k, 1)
        a = parent[a]


@kernel()
def descend_path(lin, idx, val, start, end, left, right, root, k, pnode, pscore):
    """Top-down prediction through a bracket: (the leaf id (0..k-1) reached, number of internal
    nodes scored); those nodes and their raw scores are recorded in ``pnode``/``pscore``
    (capacity >= depth), which training reuses.

    At internal node ``a`` (regressor ``a - k``) go right iff ``clip(f_{a-k}(x)) > 0`` (ties left).
    The rows of both children's regressors are prefetched while ``a`` is scored.
    """
    node = root
    d = 0
    while node >= k:
        if left[node] >= k:
            K.prefetch_slots(lin, idx, start, end, left[node] - k)
        if right[node] >= k:
            K.prefetch_slots(lin, idx, start, end, right[node] - k)
        raw = K.score(lin, idx, val, start, end, node - k)
        pnode[d] = node
        pscore[d] = raw
        d += 1
        if K.clip_score(lin, raw) > 0.0:
            node = right[node]
        else:
            node = left[node]
    return node, d


@kernel(inline="always")
def known_score(lin, a, k, pnode, pscore, plen, trained, ntrained, nd):
    """(True, raw score of node ``a``) when the prediction path ``pnode[:plen]`` scored ``a`` and
    none of the ``ntrained`` regressors trained on this example since (``trained``, node ids)
    can share a slot with it (``K.scores_independent``); else (False, 0.0)."""
    for d in range(plen):
        if pnode[d] == a:
            for t in range(ntrained):
                if not K.scores_independent(lin, trained[t] - k, a - k, nd):
                    return False, 0.0
            return True, pscore[d]
    return False, 0.0


@kernel(nogil=True)
def filter_process(lin, tree, indptr, indices, values, labels, weights, train, k, preds, pnode, pscore,
                   trained, shortcuts):
    """Progressive predict-then-learn over a chunk (Filter tree).

    preds : int64, shape (n,) out: label predicted before each example's update
    pnode, pscore, trained : int64, float64, int64, shape >= (depth,): scratch. A node the
    prediction scored keeps that score as its pre-update score when no regressor trained
    below it may share a slot with it (``known_score``), and the post-update score is summed
    in the update (``K.learn_rescore``); bit-identical to scoring afresh, which ``shortcuts =
    False`` does.
    """
    root = tree.parent.shape[0] - 1
    for i in range(labels.shape[0]):
        s = indptr[i]
        e = indptr[i + 1]
        if train[i]:
            prefetch_path(lin, indices, s, e, tree.parent, labels[i] - 1, k)
        leaf, plen = descend_path(lin, indices, values, s, e, tree.left, tree.right, root, k, pnode, pscore)
        preds[i] = leaf + 1
        if train[i]:
            iw = weights[i]
            c = labels[i] - 1
            a = tree.parent[c]
            distinct, nd = K.slot_layout(lin, indices, s, e)
            if not shortcuts:
                plen = 0
            nt = 0
            while a >= 0:
                z = -1.0 if tree.left[a] == c else 1.0
                m = a - k
                known, f0 = known_score(lin, a, k, pnode, pscore, plen, trained, nt, nd)
                if not known:
                    f0 = K.score(lin, indices, values, s, e, m)
                f1 = K.learn_scored(lin, indices, values, s, e, m, z, iw, f0, distinct, shortcuts)
                trained[nt] = a
                nt += 1
                tree.counts[m, 0 if z < 0.0 else 1] += 1
                if not f1 * z > 0.0:
                    break
                c = a
                a = tree.parent[c]
            K.end_example(lin, iw)


@kernel(nogil=True)
def rtree_process(lin, tree, indptr, indices, values, labels, weights, train, k, preds, path, pnode, pscore,
                  trained, shortcuts):
    """Progressive predict-then-learn over a chunk (Rtree).

    preds : int64, shape (n,) out: label predicted before each example's update
    path : int32, shape (depth + 1,) scratch for the leaf → root path
    pnode, pscore, trained : int64, float64, int64, shape >= (depth,): scratch. A node the
    prediction scored keeps that score as its pre-update score when no regressor trained
    above it may share a slot with it (``known_score``); bit-identical to scoring afresh,
    which ``shortcuts = False`` does.
    """
    root = tree.parent.shape[0] - 1
    for i in range(labels.shape[0]):
        s = indptr[i]
        e = indptr[i + 1]
        if train[i]:
            prefetch_path(lin, indices, s, e, tree.parent, tree.pos[labels[i] - 1], k)
        leaf, plen = descend_path(lin, indices, values, s, e, tree.left, tree.right, root, k, pnode, pscore)
        preds[i] = tree.perm[leaf]
        if train[i]:
            iw = weights[i]
            c = tree.pos[labels[i] - 1]
            n = 0
            while c >= 0:
                path[n] = c
                n += 1
                c = tree.parent[c]
            nd = K.slot_layout(lin, indices, s, e)[1]
            if not shortcuts:
                plen = 0
            # path[n-1] is the root, path[0] the leaf; train top-down
            nt = 0
            for j in range(n - 1, 0, -1):
                a = path[j]
                z = -1.0 if tree.left[a] == path[j - 1] else 1.0
                m = a - k
                known, f = known_score(lin, a, k, pnode, pscore, plen, trained, nt, nd)
                if not known:
                    f = K.score(lin, indices, values, s, e, m)
                K.learn(lin, indices, values, s, e, m, z, iw, K.clip_score(lin, f))
                trained[nt] = a
                nt += 1
                tree.counts[m, 0 if z < 0.0 else 1] += 1
            K.end_example(lin, iw)
