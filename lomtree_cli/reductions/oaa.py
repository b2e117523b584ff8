"""One-against-all (OAA): the O(k) reference reduction (docs/ALGORITHMS.md §3.1).

k regressors, model id ``i - 1`` for class ``i``. Predict ``argmax_i clip(f_{i-1}(x))`` (ties to
the smallest i); train every regressor, ``+1`` for the true class and ``-1`` for the others,
reusing the pre-update predictions. With logistic loss ``predict_top`` gives probabilities
``sigmoid(f_i) / sum_j sigmoid(f_j)``; with the other losses ``(clip(f_i)+1)/2`` normalised.

With label sets it is binary relevance (VW's ``--multilabel_oaa``): every regressor of a label of
the set is trained toward +1, the others toward -1, and ``P(label i | x)`` is each regressor's own
probability, ``sigmoid(f_i)`` or ``(clip(f_i)+1)/2``, not normalised.
"""

from __future__ import annotations

import numpy as np

from ..kernels import jit, kernel

from ..kernels import linear as K
from .base import Reduction


@kernel()
def _scores_all(lin, indices, values, s, e, k, out):
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
        _scores_all(lin, indices, values, s, e, k, scratch)
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
        _scores_all(lin, indices, values, indptr[i], indptr[i + 1], k, out[i])
        for c in range(k):
            out[i, c] = K.clip_score(lin, out[i, c])


class OneAgainstAll(Reduction):
    name = "oaa"
    parallel_predict = True
    label_sets = True

    @staticmethod
    def n_models_for(rcfg) -> int:
        return int(rcfg.k)

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        self.check_label_sets(batch, train)
        n = len(batch)
        # let learn_block cache one rate per (feature, class) pair of the longest example (no
        # example is longer than all of them together: then there is room already)
        if min((int(batch.indptr[-1]) - int(batch.indptr[0])) * self.k, 1 << 20) > self.learner.scratch_features \
                and len(batch) and train.any():
            self.learner.ensure_scratch(min(int(batch.n_features.max()) * self.k, 1 << 20))
        preds = np.zeros(n, dtype=np.int64)
        scratch = np.zeros(self.k, dtype=np.float64)
        lptr, lids = batch.label_sets()  # (one label: a set of one)
        oaa_process(self.learner.arrays, batch.indptr, batch.indices, batch.values, lptr, lids,
                    batch.weights, np.ascontiguousarray(train, dtype=np.bool_), self.k, preds, scratch)
        return preds, None

    def predict_top(self, batch, n):
        scores = np.zeros((len(batch), self.k), dtype=np.float64)
        oaa_scores(self.learner.arrays, batch.indptr, batch.indices, batch.values, self.k, scores)
        if self.learner.config.loss == "logistic":
            p = 1.0 / (1.0 + np.exp(-scores))
        else:
            p = (scores + 1.0) / 2.0
        if not self.multilabel:
            tot = p.sum(axis=1, keepdims=True)
            tot[tot == 0] = 1.0
            p = p / tot
        order = np.argsort(-p, axis=1, kind="stable")[:, :n]
        top_p = np.take_along_axis(p, order, axis=1)
        lab = batch.labels
        p_true = np.zeros(len(batch))
        ok = (lab >= 1) & (lab <= self.k)
        p_true[ok] = p[np.nonzero(ok)[0], lab[ok] - 1]
        return order.astype(np.int64) + 1, top_p, p_true
