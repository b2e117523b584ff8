"""The reduction interface and the registry of reductions.

A reduction turns one multiclass example into calls of binary regressors of the shared
``LinearLearner``. Every reduction implements the same small contract so the driver, the model
files and the tests treat all of them alike:

- ``n_models_for(rcfg)`` (static): W, how many regressors it needs (stride of the weight table);
- ``process(batch, train)``: progressive validation over one chunk, in one compiled call: for each
  example, predict with the current model, then learn if ``train[i]``; returns the predictions
  (int64, shape (n,)) made *before* each update, and per-example losses (float64, shape (n,)) or
  None to let the driver compute the multiclass 0/1 loss ``iw * (pred != label)``;
- ``state()`` / ``meta()`` / ``load_state(arrays, meta)``: everything needed to predict and to
  continue training exactly (arrays are numpy, meta is JSON-able scalars);
- ``inspect()``: a JSON-able description for ``lomtree inspect``;
- optional ``predict_top(batch, n)``: the ``n`` most probable labels with probabilities.

Label sets (multi-label input, ``batch.label_ptr``): a reduction that learns them says so with
``label_sets = True`` and trains on every label of a set in ``process`` (PLT: the union of the
labels' paths; OAA: binary relevance); ``set_multilabel`` refuses the others with a message
that names the ones that can. A multi-label model also keeps the count of each label over the
trained examples (``label_counts``, saved with the model): the propensities of PSP@k. Each
example counts once however many passes a run makes over it (``count_labels``: off after the
first pass).

Labels are 1-based at this interface (0 = unlabeled); kernels use 0-based ids inside.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..config import ReductionConfig
from ..errors import ConfigError
from ..kernels.linear import MODE_STRIDE
from .registry import REGISTRY


def n_distinct(a) -> int:
    """Number of distinct values of a 1-d integer array (``np.unique(a).size`` without
    ``np.unique``, which imports ``numpy.ma``: 12 ms of every model load)."""
    s = np.sort(np.asarray(a).ravel())
    return int(s.size and 1 + np.count_nonzero(s[1:] != s[:-1]))


def run_resuming(step, n: int, make_room) -> None:
    """Drive a kernel that stops *before* an example needing more room (CPT, PLT): ``step(i)``
    processes examples ``i:`` and returns n, or the index where it stopped; ``make_room()`` grows
    the arrays before the kernel is called again from there (so results do not depend on chunking)."""
    i = step(0)
    while i < n:
        make_room()
        i = step(i)


class Reduction:
    """Base class; see the module docstring for the contract."""

    name: ClassVar[str] = ""
    slot_mode: ClassVar[int] = MODE_STRIDE
    #: from the registry entry: ``-k`` is required
    needs_k: ClassVar[bool] = True
    #: False when the number of regressors grows with the model (CPT, PLT): not fixed by k
    fixed_models: ClassVar[bool] = True
    #: True when ``process`` returns its own losses (CPT: squared loss of P(y|x))
    own_loss: ClassVar[bool] = False
    #: True when those own losses are log-losses -log P(y|x) (the summary adds the perplexity)
    reports_log_loss: ClassVar[bool] = False
    #: from the registry entry: the loss this reduction uses when the user gives none
    default_loss: ClassVar[str] = "squared"
    #: True when ``process`` with no example to train only reads the model (its kernel releases
    #: the GIL and keeps no state between examples), so parts of a batch may be predicted in
    #: parallel threads (``lomtree predict --threads``)
    parallel_predict: ClassVar[bool] = False
    #: True when ``predict_top`` only reads the model (its kernel releases the GIL and keeps its
    #: work arrays to the call): the daemon answers ``--top-k``/``--probabilities`` and label sets
    #: of several connections at once
    parallel_top: ClassVar[bool] = False
    #: from the registry entry: ``process`` can learn a batch in several threads at once
    #: (``set_train_threads``)
    train_threads: ClassVar[bool] = False
    #: from the registry entry: ``process`` learns label sets (multi-label input)
    label_sets: ClassVar[bool] = False
    #: a multi-label model: labels counted over the trained examples, index = label (0: examples)
    label_counts: np.ndarray | None = None
    #: the trained examples' labels are counted (the driver turns it off for passes after the first:
    #: the same examples again, and the propensities are those of the training set's frequencies)
    count_labels: bool = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        spec = REGISTRY.get(cls.__dict__.get("name", ""))
        if spec is not None:
            cls.needs_k = spec.needs_k
            cls.default_loss = spec.defaults.get("loss", "squared")
            cls.label_sets = spec.label_sets
            cls.train_threads = spec.train_threads

    def __init__(self, rcfg: ReductionConfig, learner):
        self.config = rcfg
        self.learner = learner

    @staticmethod
    def n_models_for(rcfg: ReductionConfig) -> int:
        raise NotImplementedError

    @property
    def multilabel(self) -> bool:
        return self.label_counts is not None

    def set_multilabel(self) -> None:
        """Make this a model of label sets; ConfigError if the reduction cannot learn them."""
        if not self.label_sets:
            able = [n for n, spec in REGISTRY.items() if spec.label_sets]
            raise ConfigError(f"-r {self.name} does not learn label sets (--multilabel); use "
                              + " or ".join(f"-r {n}" for n in able))
        if self.label_counts is None:
            self.label_counts = np.zeros(self.k + 1, dtype=np.float64)

    def check_label_sets(self, batch, train) -> None:
        """``check_labels`` for label sets, and their count: ValueError unless the batch has label
        sets exactly when the model is multi-label and every label of a trained example is in
        1..k; then the trained examples' labels are added to ``label_counts``."""
        if (batch.label_ptr is not None) != self.multilabel:
            raise ValueError(f"{self.name}: " + ("label sets given to a single-label model" if self.multilabel is False
                                                  else "a multi-label model needs label sets"))
        if batch.label_ptr is None:
            return
        t = np.asarray(train, dtype=bool)
        ids = batch.label_sets()[1][t[batch.label_owner()]]
        if ids.size and (int(ids.min()) < 1 or int(ids.max()) > self.k):
            bad = int(ids.min()) if int(ids.min()) < 1 else int(ids.max())
            raise ValueError(f"{self.name}: cannot train on label {bad}: labels must be in 1..{self.k}")
        if self.count_labels:
            self.label_counts += np.bincount(ids, minlength=self.k + 1)[:self.k + 1]
            self.label_counts[0] += float(np.count_nonzero(t))

    def label_set_state(self) -> dict:
        return {} if self.label_counts is None else {"label_counts": self.label_counts.copy()}

    def load_label_set_state(self, arrays: dict) -> None:
        c = arrays.get("label_counts")
        if c is None:
            raise ValueError("a multi-label model without its label counts")
        c = np.asarray(c)
        # counts of examples: whole numbers that float64 holds exactly (a crafted 1e308 overflowed
        # the sums of ``inspect`` and the propensities)
        if c.dtype != np.float64 or c.shape != (self.k + 1,) or not np.all(np.isfinite(c)) or np.any(c < 0) \
                or np.any(c > 2.0 ** 53) or np.any(c != np.floor(c)):
            raise ValueError("label_counts invalid (counts of examples: whole numbers in 0..2^53)")
        self.label_counts = c.copy()

    @property
    def k(self) -> int:
        return int(self.config.k or 0)

    #: learning and prediction cost grows with k (OAA's regressor per class): an open label set
    #: grows to the classes met, not by doubling (``api.Classifier._take_labels``)
    cost_per_class: ClassVar[bool] = False

    def grow_classes(self, k: int, features: np.ndarray) -> None:
        """Take labels up to ``k`` (more than now): the open label set of the Python API's
        streams without ``classes``. ``features``: every hashed feature index learned so far
        (stride-mode reductions lay their regressors out again, ``LinearLearner.restride``).
        ConfigError for a reduction whose structure is made for a fixed k."""
        raise ConfigError(f"-r {self.name} builds its structure for a fixed number of classes: give classes=K "
                          f"or the list of labels at the first call")

    def _set_k(self, k: int) -> None:
        """``config.k`` becomes ``k``; the label counts of a multi-label model grow with it."""
        from dataclasses import replace

        old = self.k
        self.config = replace(self.config, k=int(k))
        if self.label_counts is not None:
            c = np.zeros(int(k) + 1, dtype=np.float64)
            c[:old + 1] = self.label_counts
            self.label_counts = c

    def top_k_bound(self) -> int:
        """The most labels a ``--top-k`` answer can hold: k (without -k, the labels known)."""
        return self.k

    def invalid_labels(self, labels: np.ndarray) -> np.ndarray:
        """Boolean mask of labels this reduction cannot take (> k, also for CPT and the table
        when -k was given); 0 = unlabeled is fine."""
        if self.config.k is None:
            return np.zeros(labels.shape[0], dtype=bool)
        return labels > self.k

    def check_labels(self, labels: np.ndarray, train) -> None:
        """ValueError unless every label is >= 0 (0 = unlabeled) and every label to train on is
        in 1..k (1..2^31-1 without k). Every ``process`` calls it first: a kernel indexes its
        arrays by label, so a bad label from library code must stop here (it once crashed the
        Filter tree's kernel), not only in the CLI's runner."""
        n = labels.shape[0]
        if n == 0:
            return
        if n == 1:  # one example (the Python API's learn_one): no array reductions
            lo = lo_t = hi_t = int(labels[0])
            trained = bool(train[0])
        else:
            lo = int(labels.min())
            t = labels[np.asarray(train, dtype=bool)]
            trained = t.shape[0] > 0
            if trained:
                lo_t, hi_t = int(t.min()), int(t.max())
        if lo < 0:
            raise ValueError(f"{self.name}: label {lo} is negative (labels are 1..k, 0 = unlabeled)")
        if not trained:
            return
        hi = self.k if self.config.k is not None else 2**31 - 1
        if lo_t < 1 or hi_t > hi:
            bad = lo_t if lo_t < 1 else hi_t
            raise ValueError(f"{self.name}: cannot train on label {bad}: labels must be in 1..{hi}")

    def process(self, batch, train: np.ndarray):
        raise NotImplementedError

    def predict(self, batch) -> np.ndarray:
        """Predictions only; nothing in the model changes."""
        preds, _ = self.process(batch, np.zeros(len(batch), dtype=bool))
        return preds

    def predict_top(self, batch, n: int):
        raise ConfigError(f"--probabilities/--top-k are not available for reduction {self.name}")

    def rank_top(self, batch, n: int):
        """(labels, probabilities, ranking scores, P(the example's label)): ``predict_top``'s
        answer and the scores that ordered it, numbers in 0..1 that an ensemble averages; the
        probabilities themselves unless the reduction ranks by something else (plt's path weight)."""
        labs, probs, p_true = self.predict_top(batch, n)
        return labs, probs, probs, p_true

    def one_step(self):
        """A callable doing a single-label example of the Python API's ``learn_one`` /
        ``predict_one`` in one compiled call (``oaa.OneStep`` has the contract), or None: the
        batch path (the default)."""
        return None

    def set_need_predictions(self, need: bool) -> None:
        """Whether ``process`` must compute progressive predictions (no-op where they are free)."""

    def progressive_amendment(self):
        """None, or ``(progressive, holdout)``: how much the loss sums of examples ``process``
        already returned predictions for changed, their predictions having been made again before
        they were learned (plt: its buffer's replay into the tree); taken once (the driver adds
        them to its totals after each batch and at the end of a pass)."""
        return None

    @property
    def skips_progressive(self) -> bool:
        """``process`` leaves trained examples unpredicted (``set_need_predictions(False)`` took
        effect): a 0/1 loss read from its predictions would be wrong, so none is reported."""
        return False

    def set_train_threads(self, n: int) -> None:
        """Learn each batch in ``n`` threads sharing the weights (``train --threads``);
        ConfigError for n > 1 unless its registry entry says it can (``train_threads``)."""
        if int(n) > 1 and not self.train_threads:
            able = " or ".join(f"-r {r}" for r, spec in REGISTRY.items() if spec.train_threads)
            raise ConfigError(f"--threads {n}: -r {self.name} trains in one thread (--threads > 1 trains {able})")

    def end_pass(self) -> None:
        """Hook at the end of each pass (nothing by default)."""

    def end_training(self) -> None:
        """Hook after a training run's last pass (nothing by default)."""

    def settle(self) -> None:
        """Make the model predict from everything learned so far, mid-pass (a stream learned
        example by example is predicted between its examples); nothing by default."""

    def state(self) -> dict:
        return {}

    def state_members(self) -> dict:
        """What a save writes: ``state()``, where a large member may be a ``streamed.Streamed``
        (made a piece at a time as it is written)."""
        return self.state()

    def meta(self) -> dict:
        return {}

    def load_state(self, arrays: dict, meta: dict) -> None:
        """Restore from ``state()``/``meta()``; raise ValueError on inconsistent arrays."""

    def summary_extra(self) -> dict:
        """Extra lines for the run summary (e.g. LOMtree's number of swaps)."""
        return {}

    def label_levels(self):
        """The label counts behind the entropy criteria of ``lomtree inspect`` (``entropy.py``):
        (per depth d, the count arrays of the cells of the tree cut at d; the leaves' count
        arrays), or None when the model stores no per-label counts or has no tree."""
        return None

    def inspect(self) -> dict:
        return {"reduction": self.name, "k": self.config.k, "regressors": self.n_models_for(self.config)}
