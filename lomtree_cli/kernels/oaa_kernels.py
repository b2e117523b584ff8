"""Numba kernels of one-against-all (``reductions/oaa.py``): all k scores of an example in one
pass over its features, the chunk's progressive predict-then-learn, and the same for one example
in one call (the Python API's ``learn_one`` / ``predict_one``)."""

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


@jit(inline="always")
def oaa_example(lin, indices, values, s, e, ys, iw, train, k, scratch, work, act, ms, tmp):
    """Predict then (when ``train``) learn the example ``indices/values[s:e]`` toward the targets
    ``ys[:k]`` (+1 for its labels, -1 for the others); returns the label (1-based) predicted
    before the update. The body of ``oaa_process`` for one example, and ``oaa_one``'s whole work.

    scratch : float64 (k,); work : float64 (k, 4); act : int64 (k,); ms : int64 (k,) = 0..k-1;
    tmp : int64 (>= e - s,)
    """
    scores_all(lin, indices, values, s, e, k, scratch)
    pred = clip_argmax(lin, scratch, k) + 1
    if train:
        code = K.stride_block_disjoint(lin, indices, s, e, k, tmp)
        if code:
            K.learn_block(lin, indices, values, s, e, ms, k, ys, iw, scratch, work, act, code == 2,
                          np.int64(lin.hp[K.HP_W]), np.int64(0))
        else:
            for c in range(k):
                K.learn(lin, indices, values, s, e, c, ys[c], iw, scratch[c])
        K.end_example(lin, iw)
    return pred


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
        if train[i]:
            for c in range(k):
                ys[c] = -1.0
            for j in range(lptr[i], lptr[i + 1]):
                ys[lids[j] - 1] = 1.0
        preds[i] = oaa_example(lin, indices, values, indptr[i], indptr[i + 1], ys, weights[i], train[i], k,
                               scratch, work, act, ms, tmp)


@jit()
def oaa_one(lin, feats, n, label, iw, train, k, seen, mark, idx, val, scratch, work, act, ms, tmp, ys):
    """One example, the whole of a ``learn_one`` / ``predict_one`` of the Python API in one call:
    ``oaa_process`` of the one-example chunk whose n hashed features are ``feats[:n]`` with the
    values ``feats[n:2n]`` (one float64 array: one conversion from Python; each value is taken as
    float32, as the parser's batches hold it), label ``label`` (1..k) and weight ``iw``, learned
    when ``train``; with ``mark``, ``seen[h] = True`` for each hashed feature ``h`` learned (an
    open label set's record). Returns the label predicted before the update. Every other array is
    the caller's, kept between calls: idx int64, val float32, tmp int64 (>= n,); scratch, ys
    float64 (k,); work float64 (k, 4); act int64 (k,); ms int64 (k,) = 0..k-1."""
    for j in range(n):
        idx[j] = np.int64(feats[j])
        val[j] = np.float32(feats[n + j])
    if train:
        for c in range(k):
            ys[c] = -1.0
        ys[label - 1] = 1.0
        if mark:
            for j in range(n):
                seen[idx[j]] = True
    return oaa_example(lin, idx, val, 0, n, ys, iw, train, k, scratch, work, act, ms, tmp)


@kernel(nogil=True)
def oaa_scores(lin, indptr, indices, values, k, out):
    """Clipped scores of every class, out: float64 (n, k)."""
    for i in range(indptr.shape[0] - 1):
        scores_all(lin, indices, values, indptr[i], indptr[i + 1], k, out[i])
        for c in range(k):
            out[i, c] = K.clip_score(lin, out[i, c])
