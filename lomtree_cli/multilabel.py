"""What a run does with label sets besides learning them: progressive loss, prediction lines and
the test metrics (``lomtree predict`` on labelled input, the API's ``score``).

- Progressive validation: an example's loss is 1 when the predicted label is not one of its
  labels (1 - precision@1), so the table's average loss is one minus the progressive P@1.
- Prediction lines: with ``--top-k K`` the K best labels as ``label:P(label|x)`` (best first);
  otherwise every label with ``P(label|x) >= threshold`` (``--threshold``, default 0.5, VW
  ``--plt``'s rule) as ``l1,l2,...`` (an empty line when none reaches it). A threshold is
  applied to the ``THRESHOLD_CANDIDATES`` best-ranked labels (PLT's beam widens to that many).
- Metrics (``mlmetrics``): P@1/3/5, nDCG@1/3/5 and, with the training label counts stored in the
  model, propensity-scored P@k (Jain, Prabhu & Varma 2016; A = 0.55, B = 1.5); micro and macro
  F1 of the thresholded sets when the lines are thresholded. Unlabeled examples are not scored.
"""

from __future__ import annotations

import numpy as np

from .mlmetrics import MultilabelScores, propensities

#: ``P(label|x) >= threshold`` is looked for among this many best-ranked labels
THRESHOLD_CANDIDATES = 32
#: VW ``--plt``'s threshold, the default of multi-label prediction lines
DEFAULT_THRESHOLD = 0.5
#: the precision@k, nDCG@k and PSP@k reported
KS = (1, 3, 5)


def in_sets(preds: np.ndarray, lptr: np.ndarray, lids: np.ndarray) -> np.ndarray:
    """bool (n,): ``preds[i]`` is one of example i's labels ``lids[lptr[i]:lptr[i+1]]``."""
    counts = np.diff(lptr)
    owner = np.repeat(np.arange(preds.shape[0]), counts)
    hit = np.zeros(preds.shape[0], dtype=bool)
    ids = lids[lptr[0]:lptr[-1]]
    hit[owner[ids == preds[owner]]] = True
    return hit


def label_text(batch, i: int, label_dict=None) -> str:
    """Example i's label set as the table shows it: ``1,5,7`` (names with string labels)."""
    ids = batch.label_set(i).tolist()
    if not ids:
        return "{}" if batch.labels[i] > 0 else "unknown"
    return ",".join(map(str, ids)) if label_dict is None else ",".join(label_dict.strings(ids))


def set_predictor(reduction, top_k: int = 0, threshold: float | None = None, label_dict=None,
                  probabilities: bool = False):
    """The ``SetPredictor`` of a multi-label model, None for a single-label one (where
    ``threshold`` is a ConfigError): ``lomtree predict`` and the daemon decide alike. A
    ``--top-k`` answer holds at most the labels the model knows (nothing is sized beyond them);
    ``--threshold`` is a number in 0..1 and cannot go with ``--top-k`` (whose lines are the K best
    labels whatever their probability), as in the Python API."""
    from .errors import ConfigError

    if threshold is not None:
        if not (isinstance(threshold, (int, float)) and 0.0 <= float(threshold) <= 1.0):
            raise ConfigError(f"--threshold must be a number in 0..1, got {threshold!r}")
        if top_k:
            raise ConfigError("give --top-k or --threshold, not both (--top-k prints the K best labels whatever "
                              "their probability)")
    if reduction.multilabel:
        if top_k:
            top_k = min(int(top_k), reduction.top_k_bound())
        return SetPredictor(reduction, top_k, threshold, label_dict, probabilities)
    if threshold is not None:
        raise ConfigError("--threshold is for multi-label models (trained with --multilabel); "
                          "use --top-k or --probabilities")
    return None


class SetPredictor:
    """Prediction lines and test metrics of a multi-label model over a run's batches."""

    def __init__(self, reduction, top_k: int = 0, threshold: float | None = None, label_dict=None,
                 probabilities: bool = False):
        self.reduction = reduction
        self.top_k = int(top_k)
        self.probabilities = probabilities  # thresholded sets as ``label:P``, as ``--top-k`` prints them
        self.threshold = threshold if threshold is not None else (None if top_k else DEFAULT_THRESHOLD)
        self.label_dict = label_dict
        inv = None
        counts = reduction.label_counts
        if counts is not None and counts[0] >= 3:  # (the formula needs log N > 1)
            inv = 1.0 / propensities(counts, int(counts[0]))
        self.scores = MultilabelScores(KS, inv_propensity=inv, k_labels=None)
        self.scored = False

    @property
    def n_ranked(self) -> int:
        return max(max(KS), self.top_k, THRESHOLD_CANDIDATES if self.threshold is not None else 0)

    def ranked(self, batch):
        """(labels, probabilities, chosen) of a batch: its ``n_ranked`` best labels, best first
        (0 where P(label|x) is 0), their P(label|x), and with a threshold the mask of the labels
        that reach it (None without one). The lines, the metrics and the Python API's label sets
        all come from here, so they agree."""
        labs, probs, _ = self.reduction.predict_top(batch, self.n_ranked)
        labs = np.where(probs > 0, labs, 0) if labs.size else labs
        chosen = None
        if self.threshold is not None:
            chosen = (probs >= self.threshold) & (labs > 0)
        return labs, probs, chosen

    def batch(self, batch, want_lines: bool):
        """(first labels, per-example line texts or None) of a batch; its metrics accumulated."""
        labs, probs, chosen = self.ranked(batch)
        labelled = batch.labels > 0
        if labelled.any():
            sub = labelled if not labelled.all() else slice(None)
            lptr, lids = batch.subset(labelled).label_sets()  # (subset: the batch itself when all are)
            top = labs[sub][:, :max(KS)]
            if top.shape[1] < max(KS):
                top = np.pad(top, ((0, 0), (0, max(KS) - top.shape[1])))
            pptr = pids = None
            if chosen is not None:
                c = chosen[sub]
                pptr = np.zeros(c.shape[0] + 1, np.int64)
                np.cumsum(c.sum(axis=1), out=pptr[1:])
                pids = labs[sub][c]
            self.scores.add(top, lptr, lids, pptr, pids)
            self.scored = True
        lines = self._lines(labs, probs, chosen) if want_lines else None
        return labs[:, 0] if labs.shape[1] else np.zeros(len(batch), np.int64), lines

    def _lines(self, labs, probs, chosen) -> list[str]:
        name = str if self.label_dict is None else self.label_dict.name
        out = []
        if self.top_k:
            for row_l, row_p in zip(labs[:, :self.top_k].tolist(), probs[:, :self.top_k].tolist()):
                out.append(" ".join(f"{name(l)}:{p:.6f}" for l, p in zip(row_l, row_p) if l > 0))
            return out
        if self.probabilities:
            for row_l, row_p, row_c in zip(labs.tolist(), probs.tolist(), chosen.tolist()):
                out.append(" ".join(f"{name(l)}:{p:.6f}" for l, p, c in zip(row_l, row_p, row_c) if c))
            return out
        for row_l, row_c in zip(labs.tolist(), chosen.tolist()):
            out.append(",".join(name(l) for l, c in zip(row_l, row_c) if c))
        return out

    def result(self) -> dict:
        if not self.scored:
            return {}
        r = self.scores.result()
        r.pop("examples", None)
        return r
