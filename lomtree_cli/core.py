"""The in-memory model: input options, the shared weight table and a reduction, with ``learn``,
``predict`` and ``predict_top`` on parsed examples (``ExampleBatch``).

No files, threads, signals or printing here: the command line's runner (``driver``: passes,
example cache, holdout, prefetching, signals, progress), the Python API (``api.Classifier``) and
Dask (``distributed``) all drive a ``Learner``, and what they show goes through ``output``.
Loading and saving are the model file's (``model_io``); ``Learner.load`` / ``to_bytes`` /
``save`` only hand the parts over.
"""

from __future__ import annotations

import numpy as np

from .batch import ExampleBatch
from .config import InputConfig, LearnerConfig, ReductionConfig


class Learner:
    """A model in memory.

    Attributes
    ----------
    input_config : InputConfig, how examples are parsed and hashed (saved with the model)
    base : learner.LinearLearner, the regressors' hashed weight table (ALGORITHMS.md §2)
    reduction : reductions.base.Reduction, multiclass (or label sets) onto the regressors
    label_dict : labels.LabelDict or None, the names of string labels
    passes_done : passes over data completed before (recorded in the model file)
    """

    def __init__(self, input_config: InputConfig, base, reduction, label_dict=None, passes_done: int = 0):
        self.input_config = input_config
        self.base = base
        self.reduction = reduction
        self.label_dict = label_dict
        self.passes_done = int(passes_done)

    # -- making one ------------------------------------------------------------------------------
    @classmethod
    def new(cls, input_cfg: InputConfig, learner_cfg: LearnerConfig, red_cfg: ReductionConfig) -> "Learner":
        """A new, untrained model of these options (ConfigError on options that do not fit)."""
        from .labels import LabelDict
        from .learner import LinearLearner
        from .reductions.classes import get_reduction_class

        from dataclasses import replace

        from .reductions.registry import REGISTRY

        red_cls = get_reduction_class(red_cfg.name)
        real = REGISTRY[red_cfg.name].real_labels
        if input_cfg.real_labels != real and not input_cfg.multilabel:  # the reduction decides how labels are read
            input_cfg = replace(input_cfg, real_labels=real)
        base = LinearLearner(learner_cfg, input_cfg.bits, red_cls.n_models_for(red_cfg), red_cls.slot_mode)
        reduction = red_cls(red_cfg, base)
        if input_cfg.multilabel:
            reduction.set_multilabel()
        return cls(input_cfg, base, reduction, LabelDict.from_config(input_cfg))

    @classmethod
    def of(cls, loaded) -> "Learner":
        """The model of a ``model_io.LoadedModel``."""
        return cls(loaded.input_config, loaded.learner, loaded.reduction, loaded.label_dict, loaded.passes_done)

    @classmethod
    def load(cls, source, predict_only: bool = False, skip_unused: bool = False) -> "Learner":
        """The model of a model file (a path, or a binary file object); ``model_io.load_model``'s
        checks and errors."""
        from .model_io import load_model

        return cls.of(load_model(source, predict_only=predict_only, skip_unused=skip_unused))

    def to_bytes(self, extra_arrays: dict | None = None, extra_header: dict | None = None,
                 passes_done: int | None = None) -> bytes:
        """The model file's bytes (``save``'s)."""
        import io

        from .model_io import write_model

        buf = io.BytesIO()
        write_model(buf, self.input_config, self.base, self.reduction, self._passes(passes_done), extra_arrays,
                    extra_header, self.label_dict)
        return buf.getvalue()

    def save(self, path: str, extra_arrays: dict | None = None, extra_header: dict | None = None,
             passes_done: int | None = None, compact=None) -> None:
        """Write the model file at ``path`` (atomically); ``passes_done``: the count to record
        (``self.passes_done`` by default); ``compact`` (``model_io.Compact``): a predict-only model."""
        from .model_io import save_model

        save_model(path, self.input_config, self.base, self.reduction, self._passes(passes_done), self.label_dict,
                   extra_arrays=extra_arrays, extra_header=extra_header, compact=compact)

    def _passes(self, passes_done: int | None) -> int:
        return self.passes_done if passes_done is None else int(passes_done)

    # -- learning --------------------------------------------------------------------------------
    def plan(self, passes: int = 1, paths=(), batches=None, lines: int | None = None) -> None:
        """Tell the reduction how much training comes (mtree's learning-rate schedule; one pass
        is a stream); a no-op for the others. ``lines``: the examples of a pass when they are
        not the lines of ``paths`` (the Python API's in memory)."""
        plan = getattr(self.reduction, "plan", None)
        if plan is not None:
            plan(passes, list(paths), batches, lines)

    def process(self, batch: ExampleBatch, train: np.ndarray):
        """Progressive validation over ``batch``: each example is predicted, then learned when
        ``train[i]``. Returns (predictions made before each update, int64 (n,); per-example
        losses, float64 (n,), or None where the 0/1 loss applies)."""
        # scratch for the longest example (no example is longer than all of them together)
        if int(batch.indptr[-1]) - int(batch.indptr[0]) > self.base.scratch_features and train.any():
            self.base.ensure_scratch(int(batch.n_features.max()))
        self.base.for_learning()  # progressive validation and holdout see the online weights
        return self.reduction.process(batch, train)

    def learn(self, batch: ExampleBatch) -> np.ndarray:
        """Learn every labelled example of positive weight (in order); the predictions made
        before each update."""
        return self.process(batch, trainable(batch))[0]

    def predict(self, batch: ExampleBatch) -> np.ndarray:
        """The predicted label (1..k) of every example; the model does not change."""
        self.settle()
        self.reduction.set_need_predictions(True)  # training may have switched them off
        return self.reduction.predict(batch)

    def predict_top(self, batch: ExampleBatch, n: int):
        """(labels (m, n'), probabilities (m, n'), P(the example's label) (m,)): the most probable
        labels, best first, for reductions with probabilities (ConfigError for the others)."""
        self.settle()
        return self.reduction.predict_top(batch, n)

    def rank_top(self, batch: ExampleBatch, n: int):
        """``predict_top`` with the ranking scores of its labels (``Reduction.rank_top``)."""
        self.settle()
        return self.reduction.rank_top(batch, n)

    def settle(self) -> None:
        """Make the model the one that predicts: the reduction's pending learning done (plt's
        buffered examples), then the averaged weights in the table (``--average``)."""
        self.reduction.settle()
        self.base.for_prediction()

    def end_pass(self) -> None:
        """The end of a pass over the data: the reduction's pass hook, the learning-rate decay."""
        self.reduction.end_pass()
        self.base.decay(self.base.config.decay_learning_rate)

    @property
    def has_probabilities(self) -> bool:
        """The reduction gives ``predict_top``."""
        return gives_probabilities(self.reduction.name)


def gives_probabilities(reduction: str) -> bool:
    """The reduction named ``reduction`` has ``predict_top`` (False for an unknown name)."""
    from .reductions.registry import REGISTRY

    spec = REGISTRY.get(reduction)
    return spec is not None and spec.probabilities


def trainable(batch: ExampleBatch) -> np.ndarray:
    """The examples of ``batch`` that learning uses: labelled (label > 0) with weight > 0."""
    if batch.labels.shape[0] == 1:  # one example (learn_one): Python's comparisons are quicker
        return np.array([batch.labels[0] > 0 and batch.weights[0] > 0])
    return (batch.labels > 0) & (batch.weights > 0)
