"""Label-frequency table: the no-features baseline for CPT (``-r table``).

Predicts the empirical label distribution seen so far, ignoring ``x``:
``P(y) = count(y) / n`` with importance-weighted counts (``count(y) = sum of iw`` of the trained
examples with label ``y``, ``n`` their total), prediction = the most frequent label (ties: the
smaller label; 0 before any training). Progressive loss as CPT reports it: ``iw (1 - P(y))^2``
(an unseen label has ``P = 0``); the driver adds the 0/1 loss of the prediction.

No regressors are used (``n_models_for`` = 1 keeps a minimal weight table). Labels are any
integers >= 1; a numba hash map (label -> row) keeps memory proportional to the labels seen.

State: ``labels`` (int64) and ``counts`` (float64), one row per label in order of first sight,
plus meta ``total`` and ``best`` (row of the current prediction).
"""

from __future__ import annotations

import numpy as np

from ..kernels import cpt_kernels as C
from ..kernels.linear import MODE_CPT
from .base import Reduction, n_distinct


class LabelFrequencyTable(Reduction):
    name = "table"
    slot_mode = MODE_CPT
    own_loss = True

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        self.labels = np.zeros(16, dtype=np.int64)
        self.counts = np.zeros(16, dtype=np.float64)
        self.stat = np.array([0.0, -1.0, 0.0])  # total, best row, rows used
        self.lmap = C.new_map(32)

    @staticmethod
    def n_models_for(rcfg) -> int:
        return 1

    @property
    def n_labels(self) -> int:
        return int(self.stat[2])

    def _make_room(self):
        n = self.n_labels
        if n + 1 > self.labels.shape[0]:
            cap = 2 * self.labels.shape[0]
            lab = np.zeros(cap, np.int64)
            cnt = np.zeros(cap, np.float64)
            lab[:n] = self.labels[:n]
            cnt[:n] = self.counts[:n]
            self.labels, self.counts = lab, cnt
        self.lmap = C.grow_map(self.lmap, int(self.lmap.size[0]) + 1)

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        losses = np.zeros(n, dtype=np.float64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        i = 0
        while True:
            i = C.table_process(self.lmap, self.labels, self.counts, self.stat, batch.labels, batch.weights,
                                train, i, preds, losses)
            if i >= n:
                return preds, losses
            self._make_room()

    def distribution(self):
        """(labels int64, probabilities float64) sorted by decreasing probability, ties by label."""
        n = self.n_labels
        lab = self.labels[:n]
        cnt = self.counts[:n]
        order = np.lexsort((lab, -cnt))
        total = self.stat[0]
        p = cnt[order] / total if total > 0 else np.zeros(n)
        return lab[order], p

    def top_k_bound(self) -> int:
        return max(1, self.k or int(self.lmap.size[0]))

    def predict_top(self, batch, n):
        m = len(batch)
        n = max(1, int(n))
        lab, p = self.distribution()
        labs = np.zeros((m, n), dtype=np.int64)
        probs = np.zeros((m, n), dtype=np.float64)
        j = min(n, lab.shape[0])
        labs[:, :j] = lab[:j]
        probs[:, :j] = p[:j]
        rows = np.zeros(m, dtype=np.int64)
        C.map_lookup_many(self.lmap, np.ascontiguousarray(batch.labels, dtype=np.int64), rows)
        p_true = np.zeros(m, dtype=np.float64)
        ok = rows >= 0
        if self.stat[0] > 0:
            p_true[ok] = self.counts[rows[ok]] / self.stat[0]
        return labs, probs, p_true

    def state(self) -> dict:
        n = self.n_labels
        return {"labels": self.labels[:n].copy(), "counts": self.counts[:n].copy()}

    def meta(self) -> dict:
        return {"total": float(self.stat[0]), "best": int(self.stat[1]), "n_labels": self.n_labels}

    def load_state(self, arrays: dict, meta: dict) -> None:
        lab = np.asarray(arrays.get("labels"))
        cnt = np.asarray(arrays.get("counts"))
        if lab.dtype != np.int64 or cnt.dtype != np.float64 or lab.ndim != 1 or lab.shape != cnt.shape:
            raise ValueError("table arrays have the wrong shape or type")
        n = lab.shape[0]
        if n and (lab.min() < 1 or n_distinct(lab) != n or not np.all(cnt > 0)):
            raise ValueError("table labels/counts invalid")
        total = float(meta.get("total", cnt.sum()))
        best = int(meta.get("best", -1))
        if not -1 <= best < n or (n and best < 0) or (n == 0 and best != -1):
            raise ValueError("table best row invalid")
        if n and not np.isclose(total, cnt.sum(), rtol=1e-9, atol=0.0):
            raise ValueError("table total disagrees with the counts")
        cap = 16
        while cap < n + 1:
            cap *= 2
        self.labels = np.zeros(cap, np.int64)
        self.counts = np.zeros(cap, np.float64)
        self.labels[:n] = lab
        self.counts[:n] = cnt
        self.stat = np.array([total, float(best), float(n)])
        self.lmap = C.new_map(2 * n + 2)
        C.map_fill(self.lmap, lab, np.arange(n, dtype=np.int64))

    def inspect(self) -> dict:
        lab, p = self.distribution()
        return {"reduction": self.name, "k": self.config.k, "labels": self.n_labels,
                "weighted_examples": float(self.stat[0]),
                "most_frequent": [[int(a), round(float(b), 6)] for a, b in zip(lab[:10], p[:10])]}
