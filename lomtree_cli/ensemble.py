"""Several models predicting as one: ``lomtree predict -i A -i B ...`` averages their label
scores (an ensemble).

Label trees built from different k-means seeds (``--seed``) make different mistakes, and the mean
of their scores ranks better than any one of them: the ensembles of napkinXC (``ensemble``),
Parabel and Omikuji (``n_trees``). Here the members are ordinary model files trained apart (one
after another, in parallel, or on other machines), or the trees of one file (``train --trees N``:
N models of seeds S..S+N-1, ``model_io.save_trees``); the ensemble exists only at prediction, so
training and ``-i`` continuation stay those of one model.

Rule: every member answers its ``max(n, WIDTH)`` best labels; a label's score is the mean over
the members of the ranking score each gives it (0 where it is not among a member's answers): the
probability, or plt's ``P(leaf | parent) P(parent path)^gamma`` (``Reduction.rank_top``: a tree
ranks by it, and averaging plt's probabilities instead made three trees worse than one wherever
the path weight is not 1, e.g. Bibtex P@1 61.71 against one tree's 62.58; 62.74 by the scores).
The ``n`` best scores are the answer, ties to the smaller class id, each shown with the mean of
the members' probabilities. ``P(true label)`` is the mean of the members'. Multi-label members
give marginals ``P(label|x)``: their mean is thresholded as one model's. Members must read
examples alike (equal input options: one parse serves all) and name the same classes.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError

#: labels each member answers (at least the n asked): the ensemble's candidates
WIDTH = 32


def combine(answers, n: int):
    """(labels (m, n) int64, probabilities (m, n) float64) of the mean of the members' answers,
    each (labels (m, w), probabilities (m, w)[, ranking scores (m, w)]) whose label 0 is no
    answer: ordered by the mean ranking score (the probabilities where a member gives none), best
    first, ties to the smaller label, each with its mean probability; a row with fewer than n
    labels ends in 0 / 0.0."""
    labs = np.hstack([np.asarray(a[0], dtype=np.int64) for a in answers])
    probs = np.hstack([np.asarray(a[1], dtype=np.float64) for a in answers]) / len(answers)
    ranks = np.hstack([np.asarray(a[-1], dtype=np.float64) for a in answers]) / len(answers)
    m = labs.shape[0]
    out_l = np.zeros((m, n), dtype=np.int64)
    out_p = np.zeros((m, n), dtype=np.float64)
    given = labs > 0
    if m == 0 or not given.any():
        return out_l, out_p
    rows = np.broadcast_to(np.arange(m, dtype=np.int64)[:, None], labs.shape)[given]
    span = int(labs.max()) + 1
    keys, inv = np.unique(rows * span + labs[given], return_inverse=True)
    score = np.bincount(inv.ravel(), weights=ranks[given], minlength=keys.shape[0])
    prob = np.bincount(inv.ravel(), weights=probs[given], minlength=keys.shape[0])
    row, lab = keys // span, keys % span
    order = np.lexsort((lab, -score, row))
    row, lab, prob = row[order], lab[order], prob[order]
    pos = np.arange(row.shape[0]) - np.searchsorted(row, row)
    keep = pos < n
    out_l[row[keep], pos[keep]] = lab[keep]
    out_p[row[keep], pos[keep]] = prob[keep]
    return out_l, out_p


class EnsembleReduction:
    """The members' reductions as one for prediction: ``predict_top`` and ``process`` combine
    their answers; what describes the classes (``k``, ``config``, ``multilabel``, label checks)
    is the first member's, the same for all (``check_members``)."""

    own_loss = False  # the 0/1 loss of the combined answer (mtree's log-loss is one model's)
    reports_log_loss = False
    parallel_predict = False

    def __init__(self, members):
        self.members = members  # core.Learner objects
        self.first = members[0].reduction
        self.name = "+".join(m.reduction.name for m in members)
        # the daemon's threads may share it when every member answers read-only
        self.parallel_top = all(getattr(m.reduction, "parallel_top", False) for m in members)

    def __getattr__(self, name):
        if name == "first":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.first, name)

    def predict_top(self, batch, n: int):
        n = max(1, int(n))
        width = max(n, WIDTH)
        answers, p_true = [], []
        for m in self.members:
            labs, probs, ranks, pt = m.rank_top(batch, min(width, m.reduction.top_k_bound()))
            answers.append((labs, probs, ranks))
            p_true.append(np.asarray(pt, dtype=np.float64))
        labs, probs = combine(answers, n)
        return labs, probs, np.mean(p_true, axis=0)

    def process(self, batch, train):
        if np.any(train):
            raise ConfigError("an ensemble of models predicts; it does not learn")
        return self.predict_top(batch, 1)[0][:, 0], None

    def summary_extra(self) -> dict:
        return {"ensemble": len(self.members)}


class Ensemble:
    """Models (``core.Learner``) that predict as one (``EnsembleReduction``): the interface of a
    ``core.Learner`` that ``driver.predict`` uses. The weight table shown (``base``: NaN counts)
    is the first member's."""

    def __init__(self, members):
        self.members = list(members)
        first = self.members[0]
        self.input_config = first.input_config
        self.base = first.base
        self.label_dict = first.label_dict
        self.reduction = EnsembleReduction(self.members)

    has_probabilities = True  # check_members

    def process(self, batch, train):
        return self.reduction.process(batch, train)

    def predict(self, batch):
        """The combined first label of every example (``process`` without learning)."""
        return self.reduction.process(batch, np.zeros(len(batch), dtype=np.bool_))[0]

    def predict_top(self, batch, n: int):
        return self.reduction.predict_top(batch, n)

    def settle(self) -> None:
        for m in self.members:
            m.settle()


def load_predictor(paths):
    """The model that predicts for the model files ``paths`` (``-i`` of ``predict`` and its
    daemon): one ``core.Learner``, or the ``Ensemble`` of every model they hold (a file of several
    trees, ``train --trees``, gives each of them); checked by ``check_members``."""
    from .core import Learner
    from .model_io import load_models

    members, names = [], []
    for path in paths:
        models = load_models(path, predict_only=True, skip_unused=True)
        members += [Learner.of(m) for m in models]
        names += [f"-i {path}"] if len(models) == 1 else [f"-i {path} (tree {i})" for i in range(1, len(models) + 1)]
    if len(members) == 1:
        return members[0]
    check_members(members, names)
    return Ensemble(members)


def check_members(members, paths) -> None:
    """ConfigError unless the models can be averaged: every one gives probabilities, reads
    examples with the same input options and names the same classes. ``paths``: how the errors
    name the members (``-i A``, ``members[0]``)."""
    first, name0 = members[0], paths[0]
    for m, name in zip(members, paths):
        if not m.has_probabilities:
            raise ConfigError(f"{name}: reduction {m.reduction.name} gives no probabilities, and an "
                              f"ensemble averages them")
    for m, name in zip(members[1:], paths[1:]):
        a, b = first.input_config, m.input_config
        if a != b:
            field = next(f for f in a.__dataclass_fields__ if getattr(a, f) != getattr(b, f))
            raise ConfigError(f"{name}: its input options differ from {name0}'s ({field} = "
                              f"{getattr(b, field)!r}, not {getattr(a, field)!r}); an ensemble reads "
                              f"each example once, as all its models do")
        if m.reduction.k != first.reduction.k:
            raise ConfigError(f"{name}: it has {m.reduction.k} classes, {name0} has {first.reduction.k}")
        da, db = first.label_dict, m.label_dict
        if (da is None) != (db is None) or (da is not None and list(da.names) != list(db.names)):
            raise ConfigError(f"{name}: its class names differ from {name0}'s")
