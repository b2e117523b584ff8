"""Numba kernels of one-against-all (``reductions/oaa.py``): all k scores of an example in one
pass over its features, and the chunk's progressive predict-then-learn."""

from __future__ import annotations

import numpy as np

from . import jit, kernel

from . import linear as K


@kernel()
def scores_all(lin, indices, values, s, e, k, out):
    """Raw scores of the k regressors into out[:k], features outer / classes inner.

    Each class's sum is accumulated in feature order, so the values equal ``K.score``; the loop
    order only makes the k slots of one feature contiguous in memory.
    """
    for c in range(k):
        out[c] = 0.0
    tab = lin.table
    nc = np.int64(tab.shape[1])
    w = tab.reshape(tab.size)  # flat view: slot s's weight is w[s * nc]
    W = np.int64(lin.hp[K.HP_W])
    mask = np.int64(lin.hp[K.HP_MASK])
    for j in range(s, e):
        base = (np.int64(indices[j]) * W) & mask
        v = np.float64(values[j])
        if base + k <= mask + 1:
            # the k slots are one run: no masking; with a weights-only table (predict) the run
            # is contiguous and the loop vectorises
            # unsigned indices: numba then emits no negative-index wrap-around fix-up, and the
            # loop vectorises (slots are never negative)
            if nc == 1:
                ub = np.uint64(base)
                for c in range(k):
                    out[c] += np.float64(w[ub + np.uint64(c)]) * v
            else:
                ub = np.uint64(base * nc)
                unc = np.uint64(nc)
                for c in range(k):
                    out[c] += np.float64(w[ub + np.uint64(c) * unc]) * v
        else:
            for c in range(k):
                out[c] += np.float64(w[np.uint64(((base + c) & mask) * nc)]) * v


@kernel(inline="always")
def clip_argmax(lin, scores, k):
    """Clip ``scores[:k]`` in place (``K.clip_score``); the index of the first largest (ties to
    the smallest class)."""
    best = -np.inf
    arg = 0
    for c in range(k):
        f = K.clip_score(lin, scores[c])
        scores[c] = f
        if f > best:
            best = f
            arg = c
    return arg


@jit(nogil=True)
def oaa_process(lin, indptr, indices, values, lptr, lids, weights, train, k, preds, scratch):
    """Progressive predict-then-learn over a chunk; example i's labels (one, or a set: binary
    relevance) are ``lids[lptr[i]:lptr[i+1]]``.

    preds : int64, shape (n,) out: predicted label (1-based) before each update
    scratch : float64, shape (k,)
    """
    n = preds.shape[0]
    ys = np.empty(k, dtype=np.float64)
    work = np.empty((k, 4), dtype=np.float64)
    act = np.empty(k, dtype=np.int64)
    ms = np.arange(k, dtype=np.int64)  # class c is regressor c
    maxf = 1
    for i in range(n):
        if indptr[i + 1] - indptr[i] > maxf:
            maxf = indptr[i + 1] - indptr[i]
    tmp = np.empty(maxf, dtype=np.int64)
    for i in range(n):
        s = indptr[i]
        e = indptr[i + 1]
        scores_all(lin, indices, values, s, e, k, scratch)
        preds[i] = clip_argmax(lin, scratch, k) + 1
        if train[i]:
            iw = weights[i]
            for c in range(k):
                ys[c] = -1.0
            for j in range(lptr[i], lptr[i + 1]):
                ys[lids[j] - 1] = 1.0
            code = K.stride_block_disjoint(lin, indices, s, e, k, tmp)
            if code:
                K.learn_block(lin, indices, values, s, e, ms, k, ys, iw, scratch, work, act, code == 2,
                              np.int64(lin.hp[K.HP_W]), np.int64(0))
            else:
                for c in range(k):
                    K.learn(lin, indices, values, s, e, c, ys[c], iw, scratch[c])
            K.end_example(lin, iw)


@kernel(nogil=True)
def oaa_scores(lin, indptr, indices, values, k, out):
    """Clipped scores of every class, out: float64 (n, k)."""
    for i in range(indptr.shape[0] - 1):
        scores_all(lin, indices, values, indptr[i], indptr[i + 1], k, out[i])
        for c in range(k):
            out[i, c] = K.clip_score(lin, out[i, c])
