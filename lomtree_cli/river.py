"""River's classes over the Python API: ``Classifier`` (a ``river.base.Classifier``) and
``MultiLabelClassifier`` (a ``river.base.MultiLabelClassifier``).

Imported only when River is installed (``pip install 'lomtree[river]'``). Each holds an
``api.Classifier`` and hands it River's calls: a feature dict is the VW line ``| key:value ...``
(``api.dict_line``), the labels form an open set (a label never seen joins at its first
example; reductions ``oaa``, ``lomtree``, ``plt``, ``cpt``; the Filter tree and the random tree
need ``classes=``). They work in ``evaluate.progressive_val_score``, ``|`` pipelines and
``compose``; pickling and ``clone`` keep the model file's bytes, never the model's objects.

>>> from lomtree_cli.river import Classifier
>>> model = Classifier(reduction="oaa")
>>> model.learn_one({"a": 1.0}, "x"); model.learn_one({"b": 1.0}, "y")
>>> sorted(model.predict_proba_one({"a": 1.0}))
['x', 'y']
"""

from __future__ import annotations

from river import base

from . import api
from .reductions.registry import DEFAULT, DEFAULT_LABEL_SETS, REGISTRY


def _api_params(reduction, classes, bits, learning_rate, power_t, loss_function, seed, options, multilabel):
    params = dict(options or {})
    for name in ("reduction", "classes", "bits", "multilabel"):
        if name in params:
            raise ValueError(f"options: give {name} as its own parameter")
    spec = REGISTRY.get(reduction) if isinstance(reduction, str) else None
    if spec is not None and any(o.field == "tree_buffer" for o in spec.options):
        # a stream has no end at which to build the label tree from a buffer (the CLI's
        # --tree-buffer, 10^6 examples): here it grows online from the first example
        # (ImageSegments, progressive accuracy: 85.8% online, 56.6% with a buffer of 1,000)
        params.setdefault("tree_buffer", 0)
    return api.Classifier(reduction=reduction, classes=classes, bits=bits, learning_rate=learning_rate,
                          power_t=power_t, loss_function=loss_function, seed=seed, multilabel=multilabel,
                          **params)


class Classifier(base.Classifier):
    """A lomtree model as a River classifier.

    Parameters
    ----------
    reduction
        ``lomtree`` (the default), ``oaa``, ``plt``, ``cpt``, ``filter``, ``rtree``, ...
        (``lomtree train -r``).
    classes
        None: an open label set, each label joins at its first example; else ``K`` (labels
        1..K) or the list of labels (needed by ``filter`` and ``rtree``).
    bits
        Hash bits of the weight table (``-b``).
    learning_rate, power_t, loss_function
        The CLI's options (None: the reduction's default).
    seed
        The reduction's seed (``--seed``).
    options
        Any other option of ``lomtree_cli.Classifier`` (``{"arity": 8, "quadratic": "ab"}``).
        ``{"quadratic": "  "}`` crosses every pair of features: on dense numeric streams behind
        a ``StandardScaler`` it adds 3-18 points (ImageSegments, Bananas, RandomRBF) and costs
        about 4x the time per example; not a default, since it can lose (Phishing: -0.9).

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from lomtree_cli.river import Classifier
    >>> model = preprocessing.StandardScaler() | Classifier(reduction="oaa")
    >>> evaluate.progressive_val_score(datasets.ImageSegments().take(300), model, metrics.Accuracy()).get() > 0.5
    True
    """

    def __init__(self, reduction: str = DEFAULT, classes=None, bits: int = 18, learning_rate: float | None = None,
                 power_t: float | None = None, loss_function: str | None = None, seed: int = 0,
                 options: dict | None = None):
        self.reduction = reduction
        self.classes = classes
        self.bits = bits
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.loss_function = loss_function
        self.seed = seed
        self.options = options
        self._model = _api_params(reduction, classes, bits, learning_rate, power_t, loss_function, seed, options,
                                  False)

    @property
    def _multiclass(self) -> bool:
        return True

    def learn_one(self, x: dict, y) -> None:
        self._model.learn_one(x, y)

    def predict_one(self, x: dict, **kwargs):
        return self._model.predict_one(x)

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        """{label: probability} of every label seen (all of them > 0, summing to 1); ``{}``
        before the first example; NotImplementedError for a reduction without probabilities
        (lomtree, filter, rtree: River's convention)."""
        return self._model.predict_proba_one(x)


class MultiLabelClassifier(base.MultiLabelClassifier):
    """A lomtree model of label sets as a River multi-label classifier: ``learn_one(x, {label:
    bool})``, ``predict_one(x)`` -> ``{label: bool}`` (P(label|x) >= ``threshold``),
    ``predict_proba_one(x)`` -> ``{label: {False: 1 - p, True: p}}`` for every label met (as a
    key, True or False).

    Parameters
    ----------
    reduction
        ``plt`` (the default) or ``oaa`` (binary relevance), as ``lomtree train --multilabel``.
    classes
        None: an open label set; else ``K`` or the list of labels.
    bits
        Hash bits of the weight table (``-b``).
    learning_rate, power_t, loss_function
        The CLI's options (None: the reduction's default for label sets).
    seed
        The reduction's seed (``--seed``).
    threshold
        The probability from which ``predict_one`` says True.
    options
        Any other option of ``lomtree_cli.Classifier``.

    Examples
    --------
    >>> from lomtree_cli.river import MultiLabelClassifier
    >>> model = MultiLabelClassifier(reduction="oaa")
    >>> for _ in range(20):
    ...     model.learn_one({"a": 1.0}, {"x": True, "y": False})
    ...     model.learn_one({"b": 1.0}, {"x": False, "y": True})
    >>> model.predict_one({"a": 1.0})
    {'x': True, 'y': False}
    """

    def __init__(self, reduction: str = DEFAULT_LABEL_SETS, classes=None, bits: int = 18, learning_rate: float | None = None,
                 power_t: float | None = None, loss_function: str | None = None, seed: int = 0,
                 threshold: float = 0.5, options: dict | None = None):
        self.reduction = reduction
        self.classes = classes
        self.bits = bits
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.loss_function = loss_function
        self.seed = seed
        self.threshold = threshold
        self.options = options
        self._model = _api_params(reduction, classes, bits, learning_rate, power_t, loss_function, seed, options,
                                  True)

    def learn_one(self, x: dict, y: dict) -> None:
        if not isinstance(y, dict):
            raise ValueError(f"y must be a dict {{label: bool}}, got {type(y).__name__}")
        m = self._model
        m._know(list(y))
        m.learn_one(x, {label for label, on in y.items() if on})

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        m = self._model
        if getattr(m, "_model", None) is None:
            return {}
        p = m.predict_proba([x])[0]
        return {api._py(c): {False: 1.0 - float(v), True: float(v)} for c, v in zip(m.classes_, p)}

    def predict_one(self, x: dict, **kwargs) -> dict:
        return {label: p[True] >= self.threshold for label, p in self.predict_proba_one(x).items()}


__all__ = ["Classifier", "MultiLabelClassifier"]
