"""One-against-all (OAA): the O(k) reference reduction (docs/ALGORITHMS.md §3.1).

k regressors, model id ``i - 1`` for class ``i``. Predict ``argmax_i clip(f_{i-1}(x))`` (ties to
the smallest i); train every regressor, ``+1`` for the true class and ``-1`` for the others,
reusing the pre-update predictions. With logistic loss ``predict_top`` gives probabilities
``sigmoid(f_i) / sum_j sigmoid(f_j)``; with the other losses ``(clip(f_i)+1)/2`` normalised.

With label sets it is binary relevance (VW's ``--multilabel_oaa``): every regressor of a label of
the set is trained toward +1, the others toward -1, and ``P(label i | x)`` is each regressor's own
probability, ``sigmoid(f_i)`` or ``(clip(f_i)+1)/2``, not normalised. The kernels are in
``kernels/oaa_kernels.py``.
"""

from __future__ import annotations

import numpy as np

from ..kernels.oaa_kernels import oaa_process, oaa_scores
from .base import Reduction


class OneAgainstAll(Reduction):
    name = "oaa"
    parallel_predict = True

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
