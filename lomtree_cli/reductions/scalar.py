"""The base learner on its own: one linear model of real labels (docs/ALGORITHMS.md §3.9), VW's
default learner (``-r regression``) and its ``--binary`` (``-r binary``).

One regressor (model id 0) of the shared table, trained by the learner's update and loss
(squared, classic, logistic, hinge, quantile, poisson). Its score is clipped to the range of the
labels trained on so far (VW's ``set_minmax``: from [0, 0], or [-50, 50] for logistic and
poisson loss; fixed by ``--min_prediction``/``--max_prediction``), and the prediction is the
link of the clipped score (``--link``); ``-r binary`` predicts its sign (-1 or 1) and reports
the 0/1 loss. The range is saved with the model (a loaded model predicts with it and, trained
on, widens it further). Labels come as ``ExampleBatch.real`` (``InputConfig.real_labels``).

The run's label statistics (``count_label``) give the summary's weighted label sum and VW's
best constant and its loss (``best_constant``); they are the run's own, not saved.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import linear as K
from ..kernels.scalar_kernels import LINK_IDS, N_STATS, ST_FIRST, ST_LABEL_SUM, ST_MORE, ST_SECOND, ST_WEIGHT, \
    scalar_process
from .base import Reduction

#: losses whose scores are clipped to [-50, 50] until --min/--max_prediction say otherwise (VW)
WIDE_LOSSES = ("logistic", "poisson")


def best_constant(loss: str, tau: float, stats, lo: float, hi: float):
    """VW's ``get_best_constant``: (the constant prediction of least average loss over the counted
    labels, its loss or None when more than two labels were seen), or None when it is not known
    for this loss or these labels."""
    first, second = stats[ST_FIRST], stats[ST_SECOND]
    if first != first:
        return None
    l1, l2 = float(first), 0.0 if second != second else float(second)
    if l1 > l2:
        l1, l2 = l2, l1
    if l1 == l2:
        return None
    wsum, lsum = float(stats[ST_WEIGHT]), float(stats[ST_LABEL_SUM])
    c1 = (lsum - l2 * wsum) / (l1 - l2)
    c2 = wsum - c1
    if c1 + c2 <= 0:
        return None
    more = stats[ST_MORE] != 0.0
    if loss in ("squared", "classic"):
        best = lsum / wsum
    elif more:
        return None
    elif loss == "hinge":
        best = -1.0 if c2 <= c1 else 1.0
    elif loss == "logistic":
        l1, l2 = -1.0, 1.0
        best = 1.0 if c1 <= 0 else -1.0 if c2 <= 0 else math.log(c2 / c1)
    elif loss == "quantile":
        best = l2 if tau * (c1 + c2) < c2 else l1
    else:
        return None
    if more:
        return best, None
    lid = K.LOSS_IDS[loss]

    def at(y):
        return float(K.loss_value(lid, tau, best, y))

    value = (at(l1) * c1 if c1 > 0 else 0.0) + (at(l2) * c2 if c2 > 0 else 0.0)
    return best, value / (c1 + c2)


class Regression(Reduction):
    name = "regression"
    own_loss = True
    #: labels are real numbers (``batch.real``), predictions floats
    real_labels = True
    #: -r binary: the sign of the prediction, the 0/1 loss
    binary = False

    @staticmethod
    def n_models_for(rcfg) -> int:
        return 1

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        lc = learner.config
        hp = learner.arrays.hp
        wide = 50.0 if lc.loss in WIDE_LOSSES else 0.0
        hp[K.HP_LO] = (-wide if wide else 0.0) if lc.min_prediction is None else float(lc.min_prediction)
        hp[K.HP_HI] = wide if lc.max_prediction is None else float(lc.max_prediction)
        #: VW stops widening the range once either bound is given
        self.fixed = lc.min_prediction is not None or lc.max_prediction is not None
        if lc.sgd:  # VW's --sgd is the flagged update with no flag (eta times initial_t^power_t)
            hp[K.HP_RULE] = K.rule_code(lc)
        self.link = LINK_IDS[lc.link]
        self.stats = np.zeros(N_STATS, dtype=np.float64)
        self.stats[ST_FIRST] = self.stats[ST_SECOND] = np.nan

    @staticmethod
    def reals(batch) -> np.ndarray:
        """The batch's real labels; a batch of class ids (library use) gives its ids as numbers."""
        if batch.real is None:
            return np.ascontiguousarray(batch.labels, dtype=np.float64)
        return np.ascontiguousarray(batch.real, dtype=np.float64)

    def invalid_real(self, real: np.ndarray) -> np.ndarray:
        """Boolean mask of real labels this reduction cannot learn (none for regression)."""
        return np.zeros(real.shape[0], dtype=bool)

    #: what ``invalid_real`` refuses, for messages
    label_rule = ""

    def process(self, batch, train):
        real = self.reals(batch)
        self.check_labels(batch.labels, train)
        n = len(batch)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        labeled = batch.labels > 0
        counted = train if train.any() else labeled
        preds = np.zeros(n, dtype=np.float64)
        losses = np.zeros(n, dtype=np.float64)
        scalar_process(self.learner.arrays, batch.indptr, batch.indices, batch.values,
                       real, labeled, batch.weights, train,
                       np.ascontiguousarray(counted, dtype=np.bool_), self.fixed, self.binary, self.link, preds,
                       losses, self.stats)
        return preds, losses

    def meta(self) -> dict:
        hp = self.learner.arrays.hp
        return {"min_label": float(hp[K.HP_LO]), "max_label": float(hp[K.HP_HI])}

    @staticmethod
    def merge_meta(a: dict, b: dict) -> dict:
        """The meta of two models' average (Dask): the union of their label ranges."""
        return {"min_label": min(a["min_label"], b["min_label"]), "max_label": max(a["max_label"], b["max_label"])}

    def load_state(self, arrays: dict, meta: dict) -> None:
        lo, hi = meta.get("min_label"), meta.get("max_label")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi)) or lo > hi:
            raise ValueError(f"{self.name}: bad label range in the model ({lo}, {hi})")
        hp = self.learner.arrays.hp
        hp[K.HP_LO], hp[K.HP_HI] = float(lo), float(hi)

    def summary_extra(self) -> dict:
        lc = self.learner.config
        out = {"weighted_label_sum": float(self.stats[ST_LABEL_SUM])}
        hp = self.learner.arrays.hp
        best = best_constant(lc.loss, lc.quantile_tau, self.stats, float(hp[K.HP_LO]), float(hp[K.HP_HI]))
        if best is not None:
            out["best_constant"] = best[0]
            if best[1] is not None:
                out["best_constant_loss"] = best[1]
        return out

    def inspect(self) -> dict:
        lc = self.learner.config
        hp = self.learner.arrays.hp
        info = super().inspect()
        info.update({"loss": lc.loss, "link": lc.link, "min_label": float(hp[K.HP_LO]),
                     "max_label": float(hp[K.HP_HI]), "update": "/".join(
                         n for n, on in zip(("adaptive", "normalized", "invariant"), lc.rule) if on) or "sgd"})
        return info


class Binary(Regression):
    name = "binary"
    binary = True
    label_rule = "-1 or 1"

    def invalid_real(self, real: np.ndarray) -> np.ndarray:
        return (real != 1.0) & (real != -1.0)
