"""The Python API of the scalar learner: ``Regressor`` (-r regression, VW's default learner) and
``BinaryClassifier`` (-r binary, labels -1/1), scikit-learn's and River's conventions.

Both reuse ``api.Classifier``'s machinery (inputs: text lines, feature dicts, arrays; the CLI's
runner for ``fit``; streaming for ``partial_fit`` and ``learn_one``; model files) and replace what
is about classes: ``y`` is real (or -1/1), predictions are floats (or -1/1), ``score`` is R^2
(or accuracy). ``Classifier.load`` of a binary or regression model file gives one of these.

>>> import numpy as np
>>> from lomtree_cli.regressor import Regressor
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 50); y = np.array([1.0, 0.0] * 50)
>>> r = Regressor(passes=2, holdout_off=True).fit(X, y)
>>> bool(abs(r.predict(X[:1])[0] - 1.0) < 0.2)
True
"""

from __future__ import annotations

import numpy as np

from .api import CHUNK, Classifier, _is_dicts, _is_lines, _sample_weight, _value_error, dicts_batch, \
    lines_batch, matrix_batch, _check_matrix, _feature_params
from .batch import ExampleBatch
from .errors import LomtreeError
from .reductions.registry import REAL_DEFAULT, VW_BINARY


def _real_y(y) -> np.ndarray:
    """``y`` as a 1-d float64 array of finite numbers (ValueError otherwise)."""
    try:
        a = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("y must hold numbers") from None
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.ravel()
    if a.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {a.shape} instead.")
    if not np.all(np.isfinite(a)):
        raise ValueError("Input y contains NaN or infinity.")
    return a


class Regressor(Classifier):
    """One linear model of real labels: VW's losses (``loss_function``: squared, classic,
    logistic, hinge, quantile, poisson), ``link``, ``min_prediction``/``max_prediction`` and update
    flags (``adaptive``, ``normalized``, ``invariant``; none named: all three; ``sgd``: none), as
    ``lomtree train -r regression`` (``lomtree train --help``)."""

    # the Classifier's parameters that have no meaning here, fixed
    classes = None
    multilabel = False
    label_offset = 0
    threads = 1
    solver = "online"
    cost = None
    dual_memory = None
    shuffle = False
    random_state = None

    def __init__(self, reduction=REAL_DEFAULT, bits=18, learning_rate=None, power_t=None, initial_t=None,
                 loss_function=None, quantile_tau=0.5, sgd=False, adaptive=False, normalized=False, invariant=False,
                 link="identity", min_prediction=None, max_prediction=None, decay_learning_rate=None, l1=0.0, l2=0.0,
                 passes=1, holdout_period=10, holdout_off=False, early_terminate=3, seed=0, hash_seed=0,
                 noconstant=False, format=None, verbose=False, average=None, quadratic=None, cubic=None,
                 interactions=None, ngram=None, skips=None, ignore=None, keep=None, ignore_linear=None):
        self.reduction = reduction
        self.bits = bits
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.initial_t = initial_t
        self.loss_function = loss_function
        self.quantile_tau = quantile_tau
        self.sgd = sgd
        self.adaptive = adaptive
        self.normalized = normalized
        self.invariant = invariant
        self.link = link
        self.min_prediction = min_prediction
        self.max_prediction = max_prediction
        self.decay_learning_rate = decay_learning_rate
        self.l1 = l1
        self.l2 = l2
        self.passes = passes
        self.holdout_period = holdout_period
        self.holdout_off = holdout_off
        self.early_terminate = early_terminate
        self.seed = seed
        self.hash_seed = hash_seed
        self.noconstant = noconstant
        self.format = format
        self.verbose = verbose
        self.average = average
        self.quadratic = quadratic
        self.cubic = cubic
        self.interactions = interactions
        self.ngram = ngram
        self.skips = skips
        self.ignore = ignore
        self.keep = keep
        self.ignore_linear = ignore_linear

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "regressor"
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {}

    @property
    def _estimator_type(self):
        return "regressor"

    @property
    def predict_proba(self):
        raise AttributeError(f"predict_proba is not available for reduction {self.reduction}")

    # -- a new model -----------------------------------------------------------------------------
    def _configs(self, k, fmt: str):
        from .commands import new_model_configs
        from .reductions.registry import REGISTRY, reduction_options

        if REGISTRY.get(self.reduction) is None or not REGISTRY[self.reduction].real_labels:
            raise ValueError(f"{type(self).__name__}: reduction must be one of "
                             f"{', '.join(n for n, s in REGISTRY.items() if s.real_labels)}, got {self.reduction!r}")
        p = {name: None for name in reduction_options()}
        p.update(reduction=self.reduction, k=None, seed=self.seed, learning_rate=self.learning_rate,
                 initial_t=self.initial_t, power_t=self.power_t, loss=self.loss_function,
                 quantile_tau=self.quantile_tau, sgd=bool(self.sgd), adaptive=bool(self.adaptive),
                 normalized=bool(self.normalized), invariant=bool(self.invariant), link=self.link,
                 min_prediction=self.min_prediction, max_prediction=self.max_prediction,
                 decay_learning_rate=self.decay_learning_rate, l1=self.l1, l2=self.l2, passes=int(self.passes or 1),
                 average=self.average, solver="online")
        icfg = self._input_config(fmt)
        try:
            rcfg, lcfg = new_model_configs(p)
        except LomtreeError as e:
            raise _value_error(e) from None
        except TypeError as e:
            raise ValueError(f"bad parameter value: {e}") from None
        from dataclasses import replace

        return replace(icfg, real_labels=True), lcfg, rcfg

    def _new_model(self, labels=None, fmt: str = "vw"):
        from .core import Learner

        icfg, lcfg, rcfg = self._configs(None, fmt)
        try:
            model = Learner.new(icfg, lcfg, rcfg)
        except LomtreeError as e:
            raise _value_error(e) from None
        self._set_model(model, None)
        self.passes_done_ = 0

    def _set_model(self, model, labels=None):
        self._model = model
        self._labels = None
        if model.reduction.binary:
            self.classes_ = np.array([-1, 1])

    # -- examples ----------------------------------------------------------------------------------
    def _batch(self, X, y=None, sample_weight=None, fitting: bool = False, parsed=None) -> ExampleBatch:
        icfg = self._model.input_config
        if _is_lines(X):
            batch = lines_batch(X, icfg)  # the lines' own labels: batch.real
        elif _is_dicts(X):
            batch = dicts_batch(X, icfg)
        else:
            _, _, _, d = _check_matrix(X)
            have = getattr(self, "n_features_in_", None)
            if fitting and have is None:
                self.n_features_in_ = d
            elif have is not None and d != have:
                raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting {have} features as input.")
            batch = matrix_batch(X, icfg)
        n = len(batch)
        if y is not None:
            real = _real_y(y)
            if real.shape[0] != n:
                raise ValueError(f"X has {n} examples but y has {real.shape[0]} labels")
            batch.real = real.astype(np.float32).astype(np.float64)  # the labels as a file gives them
            batch.labels = np.ones(n, np.int64)
        elif fitting and not _is_lines(X):
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        elif batch.real is None:
            batch.real = np.zeros(n, np.float64)
            batch.labels = np.zeros(n, np.int64)
        if fitting and y is not None:  # the API's y: a label the reduction does not take is refused
            bad = self._model.reduction.invalid_real(batch.real)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"example {i + 1}: label {batch.real[i]:g} is not {self._model.reduction.label_rule}")
        if sample_weight is not None:
            batch.weights = _sample_weight(sample_weight, n)
        return batch

    def _format_for(self, X) -> str:
        # real labels are read from VW text; arrays and dicts are hashed alike in any format
        return self.format or "vw"

    def _model_for(self, X):
        if getattr(self, "_model", None) is None:
            self._new_model(None, self._format_for(X))

    # -- scikit-learn's API --------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None):
        """A new model trained on ``X``, ``y`` for ``passes`` passes (as ``lomtree train``)."""
        for attr in ("n_features_in_", "_model"):
            self.__dict__.pop(attr, None)
        self._model_for(X)
        self._train(self._batch(X, y, sample_weight, fitting=True), self.passes)
        return self

    def partial_fit(self, X, y=None, sample_weight=None):
        """Learn ``X``, ``y`` as the next examples of a stream (no pass ends)."""
        self._model_for(X)
        self._stream(self._batch(X, y, sample_weight, fitting=True))
        return self

    def predict(self, X):
        """The prediction of every example: the link of the clipped score (``BinaryClassifier``:
        -1 or 1, int64); nothing in the model changes."""
        self._check_fitted()
        batch = self._batch(X)
        batch.labels = np.zeros(len(batch), np.int64)
        model = self._model
        out = [model.predict(batch.slice(a, min(a + CHUNK, len(batch)))) for a in range(0, len(batch), CHUNK)]
        preds = np.concatenate(out) if out else np.zeros(0, np.float64)
        return preds.astype(np.int64) if model.reduction.binary else preds

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of ``predict(X)`` against ``y`` (``BinaryClassifier``: the accuracy), weighted by
        ``sample_weight``."""
        pred = np.asarray(self.predict(X), dtype=np.float64)
        y = _real_y(y)
        if y.shape[0] != pred.shape[0]:
            raise ValueError(f"X has {pred.shape[0]} examples but y has {y.shape[0]} labels")
        w = np.ones_like(y) if sample_weight is None else _sample_weight(sample_weight, y.shape[0])
        if self._model.reduction.binary:
            return float(((pred == y) * w).sum() / w.sum())
        mean = (w * y).sum() / w.sum()
        tot = (w * (y - mean) ** 2).sum()
        res = (w * (y - pred) ** 2).sum()
        return float(1.0 - res / tot) if tot > 0 else (1.0 if res == 0 else 0.0)

    # -- River's API -------------------------------------------------------------------------------
    def learn_one(self, x: dict, y):
        """Learn the feature dict ``x`` with label ``y`` as the next example of a stream."""
        self._model_for([x])
        self._stream(self._batch([x], [y], fitting=True))
        return self

    def predict_one(self, x: dict):
        """The prediction of the feature dict ``x`` (None before any learning, as River)."""
        if getattr(self, "_model", None) is None:
            return None
        v = self.predict([x])[0]
        return v.item()

    # -- model files --------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        self._check_fitted()
        try:
            self._model.save(path, passes_done=self.passes_done_)
        except LomtreeError as e:
            raise _value_error(e) from None

    def to_bytes(self) -> bytes:
        self._check_fitted()
        return self._model.to_bytes(passes_done=self.passes_done_)

    @classmethod
    def _from_loaded(cls, loaded, verbose: bool = False):
        icfg, rcfg, lcfg = loaded.input_config, loaded.reduction.config, loaded.learner.config
        if cls is Regressor and loaded.reduction.binary:
            cls = BinaryClassifier
        a, n, i = lcfg.rule if not lcfg.sgd and lcfg.flagged else (False, False, False)
        est = cls(reduction=rcfg.name, bits=icfg.bits, learning_rate=lcfg.learning_rate, power_t=lcfg.power_t,
                  initial_t=lcfg.initial_t, loss_function=lcfg.loss, quantile_tau=lcfg.quantile_tau, sgd=lcfg.sgd,
                  adaptive=a, normalized=n, invariant=i, link=lcfg.link, min_prediction=lcfg.min_prediction,
                  max_prediction=lcfg.max_prediction, decay_learning_rate=lcfg.decay_learning_rate, l1=lcfg.l1,
                  l2=lcfg.l2, seed=rcfg.seed, hash_seed=icfg.hash_seed, noconstant=icfg.noconstant,
                  format=icfg.format, verbose=verbose, average=lcfg.average, **_feature_params(icfg))
        from .core import Learner

        est._set_model(Learner.of(loaded))
        est.passes_done_ = loaded.passes_done
        return est


class BinaryClassifier(Regressor):
    """``Regressor`` of ``-r binary``: labels -1/1, ``predict`` gives -1 or 1, ``score`` the
    accuracy (VW's ``--binary``)."""

    def __init__(self, reduction=VW_BINARY, **params):
        super().__init__(reduction=reduction, **params)

    @classmethod
    def _get_param_names(cls):
        return Regressor._get_param_names()

    def __sklearn_tags__(self):
        tags = Classifier.__sklearn_tags__(self)
        return tags

    @property
    def _estimator_type(self):
        return "classifier"


Classifier.real_label_estimator = Regressor
