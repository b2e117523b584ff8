"""One-against-all (OAA): the O(k) reference reduction (docs/ALGORITHMS.md §3.1).

k regressors, model id ``i - 1`` for class ``i``. Predict ``argmax_i clip(f_{i-1}(x))`` (ties to
the smallest i); train every regressor, ``+1`` for the true class and ``-1`` for the others,
reusing the pre-update predictions. With logistic loss ``predict_top`` gives probabilities
``sigmoid(f_i) / sum_j sigmoid(f_j)``; with the other losses ``(clip(f_i)+1)/2`` normalised.

With label sets it is binary relevance (VW's ``--multilabel_oaa``): every regressor of a label of
the set is trained toward +1, the others toward -1, and ``P(label i | x)`` is each regressor's own
probability, ``sigmoid(f_i)`` or ``(clip(f_i)+1)/2``, not normalised. The kernels are in
``kernels/oaa_kernels.py``.

With ``--solver dual`` training is dual coordinate descent (``kernels/dual_kernels.py``): one
float32 dual variable per example and regressor (``DualState``), examples in a seeded order
within each chunk (pass 1 starts from alpha = 0; a later pass finds an example's alpha by its
position in the cache, chunks in an order seeded by (``--seed``, pass, position); the
``--dual-memory`` bound is checked from the line count, else when pass 1 reaches it); prediction is
the same, from unclipped scores (probabilities ``sigmoid(f_i)``).
"""

from __future__ import annotations

import numpy as np

from ..config import DUAL_NOT_CONTINUED
from ..errors import ConfigError
from ..kernels import direct
from ..kernels.oaa_kernels import oaa_one, oaa_process, oaa_scores
from ..parsing import count_lines
from .base import Reduction


class DualState:
    """The dual solver's state over a training run: ``alpha`` float32 (rows, k), row i for the
    i-th example of every pass (the passes read the same examples in the same order: the cache);
    ``pos``: examples of the current pass so far; ``first``: examples of the first pass. With
    ``kept`` False (one pass) every example is visited once: its dual variables start at 0 and
    are dropped after its chunk."""

    def __init__(self, k: int, budget: float, seed: int, kept: bool = True):
        self.k = k
        self.kept = kept
        self.budget = budget  # bytes
        self.seed = seed
        self.alpha = np.zeros((0, k), dtype=np.float32)
        self.pos = 0
        self.passes = 0
        self.first = None

    def refuse(self, n: int, what: str) -> None:
        mb = 4 * n * self.k / 2**20
        need = f"{mb:,.0f}" if mb >= 10 else f"{mb:.2g}"
        raise ConfigError(f"--solver dual keeps {self.k} dual variables (4 bytes each) per example: {what} "
                          f"{n:,} examples need {need} MB, more than --dual-memory {self.budget / 2**20:g} MB "
                          f"(raise it, or train with the online solver)")

    def rows(self, n: int) -> int:
        """Room for the next ``n`` examples; the row of the first of them."""
        if not self.kept:
            self.alpha = np.zeros((n, self.k), dtype=np.float32)
            return 0
        row0, need = self.pos, self.pos + n
        if need > self.alpha.shape[0]:
            if self.first is not None:
                raise ConfigError(f"--solver dual: pass {self.passes + 1} has more examples than the first "
                                  f"({self.first:,}); every pass must read the same examples")
            if 4 * need * self.k > self.budget:
                self.refuse(need, "the first")
            from ..learner import check_memory

            size = min(max(need, 2 * self.alpha.shape[0], 1024), max(need, int(self.budget // (4 * self.k))))
            check_memory(4 * size * self.k, "the dual variables of --solver dual")
            grown = np.zeros((size, self.k), dtype=np.float32)
            grown[:self.alpha.shape[0]] = self.alpha
            self.alpha = grown
        self.pos = need
        return row0

    def order(self, row0: int, n: int) -> np.ndarray:
        """The visiting order of the chunk starting at row ``row0``: a permutation seeded by
        (--seed, pass, row0), so a run is repeatable and each pass visits in a new order."""
        return np.random.default_rng([self.seed, self.passes, row0]).permutation(n).astype(np.int64)

    def end_pass(self) -> None:
        if not self.kept:
            self.passes += 1
            return
        if self.first is None:
            self.first = self.pos
        elif self.pos != self.first:
            raise ConfigError(f"--solver dual: pass {self.passes + 1} read {self.pos:,} examples, the first "
                              f"{self.first:,}; every pass must read the same examples")
        self.passes += 1
        self.pos = 0


class OneStep:
    """One example of the Python API (``learn_one`` / ``predict_one``) in one compiled call,
    ``oaa_one``: the kernel of ``oaa_process`` for one example, so the same predictions and
    weights as a one-example chunk, without that path's per-call arrays and checks (the
    arrays live here; the caller has checked the label; the compiled function is looked up
    once per set of arrays, ``kernels.direct``). Made for the model's current k: a model that
    grows needs a new one (``Reduction.one_step``)."""

    def __init__(self, red):
        self.learner = red.learner
        k = self.k = int(red.k)
        self.scratch = np.zeros(k)
        self.ys = np.zeros(k)
        self.work = np.zeros((k, 4))
        self.act = np.zeros(k, dtype=np.int64)
        self.ms = np.arange(k, dtype=np.int64)
        self.unmarked = np.zeros(1, dtype=np.bool_)
        self._room(32)

    def _room(self, n: int) -> None:
        self.idx = np.zeros(n, dtype=np.int64)
        self.val = np.zeros(n, dtype=np.float32)
        self.tmp = np.zeros(n, dtype=np.int64)
        self.fns = {}  # mark -> (weight table, seen, the function looked up for them and these arrays)

    def __call__(self, feats: list, label: int, train: bool, seen) -> int:
        """The label (1..k) predicted for the example whose hashed features then values are
        ``feats`` (``api._DictHashes.add``'s two lists, joined); learned (label ``label``,
        weight 1) when ``train``; ``seen``: the open label set's record of features, or None."""
        n = len(feats) >> 1
        if n > self.idx.shape[0]:
            self._room(max(n, 2 * self.idx.shape[0]))
        learner = self.learner
        if train:  # the scratch ``Learner.process`` and ``_process`` make room for, in that order
            if n > learner.scratch_features:
                learner.ensure_scratch(n)
            if min(n * self.k, 1 << 20) > learner.scratch_features:
                learner.ensure_scratch(min(n * self.k, 1 << 20))
        lin = learner.arrays
        mark = seen is not None
        if not mark:
            seen = self.unmarked
        args = (lin, np.array(feats, dtype=np.float64), n, label, 1.0, train, self.k, seen, mark, self.idx, self.val,
                self.scratch, self.work, self.act, self.ms, self.tmp, self.ys)
        got = self.fns.get(mark)  # (learn_one marks the features, predict_one does not: two keys)
        if got is None or got[0] is not lin or got[1] is not seen:
            got = self.fns[mark] = (lin, seen, direct(oaa_one, args))
        return got[2](*args)


class OneAgainstAll(Reduction):
    name = "oaa"
    parallel_predict = True
    parallel_top = True  # oaa_scores into arrays of the call

    @staticmethod
    def n_models_for(rcfg) -> int:
        return int(rcfg.k)

    #: the dual solver's state while it trains (``plan``), else None
    dual = None
    cost_per_class = True

    def grow_classes(self, k: int, features: np.ndarray) -> None:
        """New classes' regressors: the table laid out for ``k`` regressors, the old ones' weights
        kept (a new regressor starts untrained, as if its class had just appeared)."""
        if self.learner.config.solver == "dual":
            raise ConfigError("--solver dual trains on a fixed set of classes: give them at the first call")
        self.learner.restride(int(k), np.arange(self.k, dtype=np.int64), features)
        self._set_k(k)

    def one_step(self):
        """``OneStep`` for this model (None with the dual solver or label sets: their batch path)."""
        if self.learner.config.solver == "dual" or self.multilabel:
            return None
        return OneStep(self)

    def plan(self, passes: int, paths, batches, lines: int | None = None) -> None:
        """Before training: with ``--solver dual`` its state, refused up front when the lines of
        the input files would need more than ``--dual-memory`` for their dual variables (one
        pass keeps none)."""
        lcfg = self.learner.config
        if lcfg.solver != "dual":
            return
        self.dual = DualState(self.k, lcfg.dual_memory * 2**20, self.config.seed, kept=passes > 1)
        if passes < 2:
            return
        if lines is None:
            lines = count_lines(paths)  # 0: not known before it is read
        if 4 * lines * self.k > self.dual.budget:
            self.dual.refuse(lines, "the input's")

    def end_pass(self) -> None:
        if self.dual is not None:
            self.dual.end_pass()

    def end_training(self) -> None:
        # the dual variables belong to the examples just trained: pairing the next examples with
        # them would be wrong, so a fitted model of the dual solver learns no further (as a loaded one)
        self.dual = None

    def predict(self, batch):
        none = np.zeros(len(batch), dtype=bool)
        self.check_labels(batch.labels, none)
        self.check_label_sets(batch, none)
        return self._process(batch, none)[0]

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        self.check_label_sets(batch, train)
        if self.dual is not None:
            return self._process_dual(batch, train)
        if self.learner.config.solver == "dual" and np.any(train):
            # a loaded model (Python API): its table has no G, N for the online update
            raise ConfigError(DUAL_NOT_CONTINUED)
        return self._process(batch, train)

    def _process_dual(self, batch, train):
        from ..kernels.dual_kernels import dual_process

        n = len(batch)
        row0 = self.dual.rows(n)
        preds = np.zeros(n, dtype=np.int64)
        lptr, lids = batch.label_sets()
        dual_process(self.learner.arrays, batch.indptr, batch.indices, batch.values, lptr, lids, batch.weights,
                     np.ascontiguousarray(train, dtype=np.bool_), self.k, self.dual.order(row0, n), self.dual.alpha,
                     row0, float(self.learner.config.cost), self.learner.config.loss == "squared-hinge", preds,
                     np.zeros(self.k, dtype=np.float64))
        return preds, None

    def _process(self, batch, train):
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

    def class_scores(self, batch) -> np.ndarray:
        """(n, k) float64: every class regressor's raw score of each example."""
        scores = np.zeros((len(batch), self.k), dtype=np.float64)
        oaa_scores(self.learner.arrays, batch.indptr, batch.indices, batch.values, self.k, scores)
        return scores

    def predict_top(self, batch, n):
        scores = self.class_scores(batch)
        if self.learner.config.solver == "dual":  # margins, not clipped: bounded only against overflow
            np.clip(scores, -50.0, 50.0, out=scores)
        if self.learner.config.loss == "logistic" or self.learner.config.solver == "dual":
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
