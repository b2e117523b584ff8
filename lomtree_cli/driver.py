"""The online loop: read a chunk, predict-then-learn, account, report (docs/ALGORITHMS.md §4).

``train(...)`` and ``predict(...)`` are the library entry points behind ``lomtree train`` and
``lomtree predict``; the CLI only builds configs and calls them. Everything user-visible goes
through the ``RunOptions.err`` stream (the table, the summary, warnings) or the predictions
file; the functions return a summary dict (the JSON report).

Choices (documented for users):
- the unit of work is a chunk of examples (one compiled call each); SIGINT/SIGTERM stop the run
  at the next chunk boundary, which is an example boundary: the model written is complete;
- with ``--passes > 1`` (or ``-c``) pass 1 writes the binary example cache (``cache.py``; a
  temporary file unless ``-c``) and later passes read it; a valid cache left by an earlier run
  (same inputs, sizes, mtimes and parsing options) is read from pass 1 on, as VW does. If the
  cache cannot be written, files are re-parsed in every pass (stdin then fails clearly);
- with holdout active (passes > 1, not ``--holdout-off``), every ``holdout_period``-th example of
  each pass is evaluated only, in every pass including the first; the model kept is the snapshot
  of the pass with the best holdout loss (VW keeps the last pass unless it stopped early).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .batch import ExampleBatch
from .config import DUAL_NOT_CONTINUED, InputConfig, LearnerConfig, ReductionConfig, check_regularization
from .core import Learner
from .errors import ConfigError, InputError, Interrupted
from .kernels.linear import HP_ETA, HP_L1, HP_L2
from .labels import output_names
from .metrics import Progress
from .output import PredictionWriter, finish, preamble, probability_fields, summary, vw_lines
from .runtime import StopFlag
from .workers import prefetch


@dataclass
class RunOptions:
    """Driver options shared by train and predict."""

    inputs: list = field(default_factory=list)
    predictions: str | None = None
    passes: int = 1
    cache: str | None = None
    use_cache: bool = False
    #: standard input was read into -c's cache earlier in this process (train --trees): reuse it
    stdin_cached: bool = False
    holdout_period: int = 10
    holdout_off: bool = False
    early_terminate: int = 3
    quiet: bool = False
    progress_interval: float | int = 2.0
    progress_bar: bool = False
    report: str | None = None
    flush: bool = False
    probabilities: bool = False
    top_k: int = 0
    threshold: float | None = None  # multi-label predict: print the labels with P(label|x) >= this
    chunk_bytes: int = 1 << 20
    err: object = None
    start_time: float | None = None
    handle_signals: bool = False
    threads: int = 1  # predict: threads that parse chunks and share each batch (train: 1)
    train_threads: int = 1  # train: threads that learn parts of each batch at once (plt; one parser thread)
    max_line_bytes: int | None = None  # predict: --max-line-bytes (None: the default)
    max_example_features: int | None = None  # predict: --max-example-features (None: the model's)
    on_started: object = None  # called before the first example (the CLI: ``runtime.end_startup``)
    #: batches from elsewhere than ``inputs`` (the Python API's arrays, a Dask shard):
    #: ``source(pass_index)`` -> iterable of ExampleBatch; no example cache then
    source: object = None
    #: the examples ``source`` gives a pass when known (the API's arrays; 0: not known, a stream)
    source_lines: int = 0
    #: train: ``model_io.Compact`` to write -f as a predict-only model (``--predict_only_model``)
    compact: object = None
    #: VW's --holdout_after N: the examples after the first N of each pass are held out (also with
    #: one pass), in place of every holdout_period-th (0: off)
    holdout_after: int = 0
    #: train: False for VW's --noop and -t without -i (the new model predicts, nothing is learned)
    learn: bool = True
    #: VW's command lines (``vwopts``): labels outside the model's classes are skipped with a
    #: warning, not refused; a label set keeps its labels inside them; unknown --named_labels
    #: names are read as unlabeled examples
    vw_labels: bool = False
    #: -p as VW writes it: "probabilities" or "scores" (every class, ``1:0.25 2:0.75``); label sets
    #: and --top-k with ``,`` between labels
    vw_output: str | None = None
    #: VW's command lines: with holdout the model saved is the last pass's (VW's), not the best one's
    keep_last_pass: bool = False
    #: train: read the cached passes 2..N in a seeded random order (``passorder``); None: the
    #: reduction's choice (plt: with its shuffled buffer). Never with holdout: its examples are
    #: chosen by their position in the pass
    shuffle_passes: bool | None = None


def _batches_for_pass(paths, input_cfg, opts, pass_index, cache, label_dict=None):
    """The batches of one pass: from the example cache when it is complete (a valid cache left by
    an earlier run is read from pass 1 on, as VW does), otherwise parsed from the inputs; pass 1
    writes the cache. If the cache could not be written, files are re-parsed; stdin cannot be."""
    from .parsing import iter_batches

    if cache is not None and cache.ready:
        yield from cache.read()
        return
    if pass_index > 0 and "-" in paths:
        from .cache import CacheError

        why = getattr(cache, "failed", None) or "the example cache is not available"
        raise CacheError(f"cannot read standard input again for pass {pass_index + 1}: {why}")
    writer = cache.writer() if (cache is not None and pass_index == 0) else None
    # predict (opts.threads > 1) parses chunks in parallel too; training keeps one parser thread
    for batch in iter_batches(paths, input_cfg, chunk_bytes=opts.chunk_bytes, flush=opts.flush, label_dict=label_dict,
                              workers=opts.threads):
        if writer is not None:
            writer.add(batch)
        yield batch
    if writer is not None:
        writer.close()


def _inside_sets(batch: ExampleBatch, k: int) -> ExampleBatch:
    """``batch`` with only the labels 1..k in its label sets."""
    from dataclasses import replace as _replace

    ptr, ids = batch.label_sets()
    keep = ids <= k
    counts = np.bincount(batch.label_owner()[keep], minlength=len(batch))
    new_ptr = np.zeros(len(batch) + 1, np.int64)
    np.cumsum(counts, out=new_ptr[1:])
    return _replace(batch, label_ptr=new_ptr, label_ids=ids[keep])


class Runner:
    """One run (train or predict) of the model ``model`` (``core.Learner``) over batches parsed
    with ``input_cfg``: label checks, holdout, progress, prediction lines; see ``train`` and
    ``predict``."""

    def __init__(self, input_cfg: InputConfig, model: Learner, opts: RunOptions, learn: bool):
        self.input_cfg = input_cfg
        self.model = model
        self.opts = opts
        self.learn = learn
        self.err = opts.err if opts.err is not None else sys.stderr
        out = None if opts.quiet or opts.progress_bar else self.err
        self.progress = Progress(out, opts.progress_interval)
        self.warned_range = False
        self.warned_nan = False
        self.skipped_shown = 0
        self.bar = None
        self.need_predictions = True
        self._pool = None
        self.low_labels = 0  # predict: labels below 1 read as unlabeled
        self.label_dict = model.label_dict  # labels.LabelDict with string labels
        if opts.vw_labels and self.label_dict is not None:
            self.label_dict.unknown_unlabeled = True
        self.names = output_names(self.label_dict, input_cfg)  # how predictions write class ids
        self.progress.names = self.names
        self.sets = None  # multilabel.SetPredictor: a multi-label model's prediction lines and test metrics
        #: examples of the current pass seen so far (holdout positions); a pass starts at 0, a
        #: Dask shard's segment goes on from where its last one ended
        self.holdout_counter = 0

    @property
    def learner(self):
        """The model's weight table (``learner.LinearLearner``)."""
        return self.model.base

    @property
    def reduction(self):
        return self.model.reduction

    def _process(self, batch: ExampleBatch, train: np.ndarray):
        """``reduction.process``; when only predicting, a large batch is cut into ``opts.threads``
        consecutive parts predicted at once (the kernels release the GIL and only read the model,
        so the predictions are the same as in one piece)."""
        parts = self.opts.threads if (not self.learn and self.reduction.parallel_predict) else 1
        n = len(batch)
        if parts <= 1 or n < 16 * parts or batch.indptr[-1] < 16384 * parts:  # too small to pay off
            return self.model.process(batch, train)
        if self._pool is None:
            from .workers import Pool

            self._pool = Pool(parts - 1, "lomtree-predict")
        cut = [n * i // parts for i in range(parts + 1)]
        futures = [self._pool.submit(self.model.process, batch.slice(a, b), train[a:b])
                   for a, b in zip(cut[1:-1], cut[2:])]
        outs = [self.model.process(batch.slice(0, cut[1]), train[:cut[1]])]
        outs += [f.result() for f in futures]
        preds = np.concatenate([o[0] for o in outs])
        losses = None if any(o[1] is None for o in outs) else np.concatenate([o[1] for o in outs])
        return preds, losses

    @property
    def vw_progressive(self) -> bool:
        """-p while training a VW command line prints VW's lines (``output.vw_lines``): each example's
        made before its own update, so the batch is learned one example at a time."""
        o = self.opts
        return o.vw_output is not None or (o.vw_labels and self.reduction.multilabel) or (o.vw_labels and o.top_k > 0)

    def _process_vw(self, batch: ExampleBatch, train: np.ndarray):
        """``_process`` one example at a time, with each one's VW prediction line before its update."""
        preds, losses, lines = [], [], []
        for i in range(len(batch)):
            one = batch.slice(i, i + 1)
            lines += vw_lines(self.reduction, one, self.opts.vw_output or "labels", self.names,
                              self.opts.top_k) or [""]
            p, loss = self.model.process(one, train[i:i + 1])
            preds.append(p)
            losses.append(loss)
        if not preds:
            return np.zeros(0, np.int64), None, lines
        return (np.concatenate(preds), None if any(x is None for x in losses) else np.concatenate(losses), lines)

    def amend(self) -> None:
        """Take the reduction's amendment of losses already counted (``progressive_amendment``)."""
        a = self.reduction.progressive_amendment()
        if a is not None:
            self.progress.amend(*a)

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    # -- helpers -----------------------------------------------------------------------------
    def _warn(self, msg: str):
        if not self.opts.quiet:
            self.err.write(f"warning: {msg}\n")

    def _handle_skipped(self, batch: ExampleBatch):
        for e in batch.skipped:
            self.progress.skipped += 1
            if self.skipped_shown < 10 and not self.opts.quiet:
                self.err.write(f"skipping {e.message()}\n")
                self.skipped_shown += 1

    def _range_text(self, label: int) -> str:
        """Why class id ``label`` (past -k) cannot be trained, in the input's own terms: its name,
        or the label as written (``--label-offset``, the 0-based XMC labels) and their range."""
        k = self.reduction.k
        if self.label_dict is None:
            o = self.input_cfg.offset
            return f"label {label - o} is outside {1 - o}..{k - o}" + (f" (-k {k})" if o else "")
        return (f"label {self.label_dict.name(label)!r} would be class {label}, outside 1..{k} "
                f"(more distinct labels than -k)")

    def _check_labels(self, batch: ExampleBatch, train_possible: bool) -> ExampleBatch:
        if batch.label_ptr is not None:
            return self._check_label_sets(batch, train_possible)
        if batch.real is not None:
            return self._check_real(batch, train_possible)
        bad = self.reduction.invalid_labels(batch.labels)
        if not bad.any():
            return batch
        if train_possible and self.opts.vw_labels:  # VW warns and goes on
            if not self.warned_range:
                i = int(np.flatnonzero(bad)[0])
                self._warn(f"{batch.source}:{int(batch.line_numbers[i])}: {self._range_text(int(batch.labels[i]))}; "
                           f"such examples are predicted, not learned")
                self.warned_range = True
            batch.labels = np.where(bad, 0, batch.labels)
            return batch
        if train_possible:
            i = int(np.flatnonzero(bad)[0])
            if not self.input_cfg.skip_invalid:
                raise InputError(batch.source, int(batch.line_numbers[i]), "label_range",
                                 self._range_text(int(batch.labels[i])))
            for i in np.flatnonzero(bad):
                self.progress.skipped += 1
                if self.skipped_shown < 10 and not self.opts.quiet:
                    self.err.write(f"skipping {batch.source}:{int(batch.line_numbers[i])}: "
                                   f"{self._range_text(int(batch.labels[i]))}\n")
                    self.skipped_shown += 1
            return batch.subset(~bad)
        if not self.warned_range:
            self._warn(f"{batch.source}:{int(batch.line_numbers[np.flatnonzero(bad)[0]])}: label outside "
                       f"1..{self.reduction.k}; such examples are counted as mistakes")
            self.warned_range = True
        return batch

    def _check_real(self, batch: ExampleBatch, train_possible: bool) -> ExampleBatch:
        """Real labels the reduction does not expect (-r binary: not -1 or 1): learned as they are
        and their base loss counted, as VW's --binary does after its error message; said once."""
        bad = self.reduction.invalid_real(batch.real) & (batch.labels > 0)
        if bad.any() and not self.warned_range:
            i = int(np.flatnonzero(bad)[0])
            self._warn(f"{batch.source}:{int(batch.line_numbers[i])}: label {batch.real[i]:g} is not "
                       f"{self.reduction.label_rule} (-r {self.reduction.name}): such labels are learned as they "
                       f"are, their loss the loss function's, not 0/1 (VW's --binary)")
            self.warned_range = True
        return batch

    def _check_label_sets(self, batch: ExampleBatch, train_possible: bool) -> ExampleBatch:
        """Label sets to train on must be in 1..k (else a malformed line, or skipped); in
        predict a label beyond k is a label the model cannot predict (a miss in the metrics)."""
        k = self.reduction.k
        if not train_possible or not batch.label_ids.size or int(batch.label_ids.max()) <= k:
            return batch
        if self.opts.vw_labels:  # VW's multi-label reductions ignore a label they have no regressor for
            return _inside_sets(batch, k)
        bad = np.zeros(len(batch), dtype=bool)
        bad[batch.label_owner()[batch.label_sets()[1] > k]] = True

        def text(i):  # the first label of the set past k: with string labels, the first name that did not fit
            ids = batch.label_set(i)
            return self._range_text(int(ids[ids > k].min()))

        if not self.input_cfg.skip_invalid:
            i = int(np.flatnonzero(bad)[0])
            raise InputError(batch.source, int(batch.line_numbers[i]), "label_range", text(i))
        for i in np.flatnonzero(bad):
            self.progress.skipped += 1
            if self.skipped_shown < 10 and not self.opts.quiet:
                self.err.write(f"skipping {batch.source}:{int(batch.line_numbers[i])}: {text(i)}\n")
                self.skipped_shown += 1
        return batch.subset(~bad)

    # -- the loop ----------------------------------------------------------------------------
    def run_pass(self, batches, pass_index: int, holdout: bool, writer: PredictionWriter, stop: StopFlag):
        if self.opts.on_started is not None:
            self.opts.on_started()
        period = self.opts.holdout_period
        counter = self.holdout_counter  # examples of this pass before these batches
        for batch in batches:
            self._handle_skipped(batch)
            if len(batch) == 0:
                continue
            if not self.learn:  # the parser marks labels below 1 with -1: unlabeled, counted
                low = batch.labels < 0
                if low.any():
                    self.low_labels += int(np.count_nonzero(low))
                    batch.labels = np.where(low, 0, batch.labels)
            batch = self._check_labels(batch, self.learn)
            n = len(batch)
            if n == 0:
                continue
            if holdout:
                pos = counter + 1 + np.arange(n)
                after = self.opts.holdout_after
                hold = pos > after if after else (pos % period) == 0
            else:
                hold = np.zeros(n, dtype=bool)
            counter += n
            self.holdout_counter = counter
            labels = batch.labels
            weights = batch.weights
            labeled = labels > 0
            if self.learn:
                train = labeled & ~hold & (weights > 0)
            else:
                train = np.zeros(n, dtype=bool)
            if self.learn:
                self.learner.ensure_scratch(int(batch.n_features.max()))
            vw_text = None
            if self.learn and writer.f is not None and self.vw_progressive:
                preds, losses, vw_text = self._process_vw(batch, train)
            else:
                preds, losses = self._process(batch, train)
                if writer.f is not None and self.opts.vw_output is not None:
                    vw_text = vw_lines(self.reduction, batch, self.opts.vw_output, self.names, self.opts.top_k)
                    if vw_text is not None and self.sets is not None:
                        self.sets.batch(batch, False)  # its metrics
            shown = shown_pred = None
            if batch.label_ptr is not None:
                from .multilabel import in_sets, label_text

                miss = ~in_sets(preds, batch.label_ptr, batch.label_ids)
                shown = lambda j, b=batch: label_text(b, j, self.names)  # noqa: E731
            elif batch.real is not None:  # real labels and predictions: VW's 4 decimals
                miss = preds != batch.real
                shown = lambda j, b=batch: "%.4f" % b.real[j] if b.labels[j] > 0 else "unknown"  # noqa: E731
                shown_pred = lambda j, p=preds: "%.4f" % p[j]  # noqa: E731
            else:
                miss = preds != labels
            zero_one = np.where(labeled & miss, weights, 0.0)
            if losses is None:
                losses = zero_one
                zero_one = None
            self.progress.add_batch(labels, weights, preds, losses, batch.n_features, hold, zero_one, shown,
                                    shown_pred)
            self.amend()  # after the batch's own losses: an amendment may cover its first examples
            if self.learner.nan_count and not self.warned_nan:
                self._warn("a regressor produced NaN (score or update); it was replaced by 0")
                self.warned_nan = True
            extra = None
            if vw_text is not None:
                writer.write_lines(vw_text, batch.tags)
            elif self.sets is not None:
                lines = self.sets.batch(batch, writer.f is not None)[1]
                if lines is not None:
                    writer.write_lines(lines, batch.tags)
            elif writer.f is not None and (self.opts.probabilities or self.opts.top_k):
                extra = probability_fields(self.reduction, batch, self.opts.top_k, self.opts.probabilities,
                                           self.names)
                writer.write(extra[0], batch.tags, extra[1])
            else:
                writer.write(preds, batch.tags)
            if self.bar is not None:
                self.bar.update(n)
            if stop.signum:
                return False
            if writer.broken and not self.learn:
                return True  # predictions were the only output and nobody reads them
        return True


def _open_cache(opts: RunOptions, input_cfg: InputConfig, paths, final_model: str | None = None,
                label_dict=None):
    """The example cache of a train run (None with one pass and no ``-c``).

    ``opts.cache``: None (no ``-c``) = a temporary file deleted at the end; "" (``-c``) =
    ``MODEL.cache`` next to ``-f`` (temporary without ``-f``); a path = that file, kept.
    """
    if opts.passes <= 1 and not opts.use_cache:
        return None
    from .cache import ExampleCache

    return ExampleCache.open(opts.cache, input_cfg, paths, opts, err=None if opts.quiet else (opts.err or sys.stderr),
                             model_path=final_model, label_dict=label_dict)


def train(input_cfg: InputConfig, learner_cfg: LearnerConfig, red_cfg: ReductionConfig, opts: RunOptions,
          initial_model: str | None = None, final_model: str | None = None,
          explicit: dict | None = None) -> dict:
    """Train (progressive validation) over ``opts.inputs``; returns the summary dict.

    A new model is made from the three configs; with ``initial_model`` that model is continued
    (``learner_cfg`` and ``red_cfg`` unused; ``explicit``: the options given on the command line,
    checked against the model or applied to it)."""
    start = opts.start_time or time.time()
    check_train_options(opts)
    if initial_model is None:
        model = Learner.new(input_cfg, learner_cfg, red_cfg)
    else:
        model = continued_model(initial_model, input_cfg, explicit or {})
    passes_before = model.passes_done

    def save(passes_done: int) -> bool:
        if final_model is None:
            return False
        model.save(final_model, passes_done=passes_before + passes_done, compact=opts.compact)
        return True

    return fit(model, opts, save, final_model, start)


def fit(model: Learner, opts: RunOptions, save, final_model: str | None = None, start: float | None = None) -> dict:
    """Train ``model`` in place over ``opts.inputs`` (or ``opts.source``): passes, holdout,
    progressive validation, report; ``save(passes_done) -> bool`` keeps the model (a file for
    ``train``, a snapshot for the Python API) when a pass wins on holdout and at the end (when no
    pass was kept). Returns the summary dict. ``train`` and ``api.Classifier.fit`` both run
    through here."""
    start = start or opts.start_time or time.time()
    err = opts.err if opts.err is not None else sys.stderr
    check_train_options(opts)
    paths = list(opts.inputs) or ["-"]
    input_cfg, reduction = model.input_config, model.reduction
    reduction.set_train_threads(opts.train_threads)
    runner = Runner(input_cfg, model, opts, learn=opts.learn)
    runner.need_predictions = opts.predictions is not None or not (opts.quiet or opts.progress_bar)
    reduction.set_need_predictions(runner.need_predictions)
    if hasattr(reduction, "plan"):  # -r mtree: rate schedule, Huffman tree of the label counts
        from .parsing import iter_batches

        if opts.source is not None:  # examples in memory: planned as a file of as many lines
            model.plan(opts.passes, paths, lambda: opts.source(0), lines=opts.source_lines or None)
        else:
            model.plan(opts.passes, paths, lambda: iter_batches(paths, input_cfg, chunk_bytes=opts.chunk_bytes,
                                                                label_dict=model.label_dict))
    if not opts.quiet:
        preamble(err, input_cfg, model.base, reduction, paths)
    holdout = Holdout(opts.learn and (opts.passes > 1 or opts.holdout_after > 0) and not opts.holdout_off,
                      opts.early_terminate, opts.keep_last_pass)
    if opts.shuffle_passes and model.base.config.solver == "dual":
        raise ConfigError("--shuffle-passes cannot be used with --solver dual (its dual variables belong to the "
                          "cache's positions; it visits each chunk in its own seeded order)")
    stop = StopFlag()
    passes_used = _run_passes(runner, paths, opts, stop, holdout, save, final_model)
    reduction.end_training()
    # with holdout the file already holds the best pass (also after an interrupt: a half pass is not
    # validated, so the best complete pass is kept); otherwise write the model as it is now
    if not holdout.saved:
        _save_whole(save, passes_used, opts, stop)
    report = summary(runner.progress, reduction, input_cfg, passes_used, start,
                     holdout.best if holdout.active and math.isfinite(holdout.best) else None, runner.need_predictions)
    if holdout.active:
        report["best_pass"] = holdout.best_pass
        report["holdout_losses"] = holdout.losses
    finish(err, opts, report)
    if stop.signum:
        raise Interrupted(stop.signum, report)
    return report


def check_train_options(opts: RunOptions) -> None:
    """ConfigError for pass and holdout options out of range."""
    if opts.passes < 1:
        raise ConfigError("--passes must be >= 1")
    if opts.passes > 1 and not opts.holdout_off:
        if opts.holdout_period < 1:
            raise ConfigError("--holdout-period must be >= 1")
        if opts.early_terminate < 1:
            raise ConfigError("--early-terminate must be >= 1")


def continued_model(path: str, input_cfg: InputConfig, explicit: dict) -> Learner:
    """The model at ``path``, to be trained on: the options in ``explicit`` are checked against it
    (ConfigError), or applied (learning rate and its decay, --l1, --l2: they change how training
    goes on, and the saved model keeps them); the run's own input options (``--skip-invalid``,
    ``--max-line-bytes``, ``--max-example-features``) are kept."""
    from . import model_io

    loaded = model_io.load_model(path)
    if loaded.learner.config.solver == "dual":
        raise ConfigError(f"{path}: {DUAL_NOT_CONTINUED}")
    _check_model_conflicts(loaded, explicit, input_cfg)
    model = Learner.of(loaded)
    model.input_config = replace(loaded.input_config, skip_invalid=input_cfg.skip_invalid,
                                 max_line_bytes=input_cfg.max_line_bytes,
                                 max_example_features=input_cfg.max_example_features)
    learner = model.base
    if explicit.get("learning_rate") is not None:
        learner.arrays.hp[HP_ETA] = float(explicit["learning_rate"])
    if explicit.get("decay_learning_rate") is not None:
        learner.config = replace(learner.config, decay_learning_rate=float(explicit["decay_learning_rate"]))
    check_regularization(loaded.reduction.name, explicit.get("l1"), explicit.get("l2"))
    for name, slot in (("l1", HP_L1), ("l2", HP_L2)):
        if explicit.get(name) is not None:
            learner.config = replace(learner.config, **{name: float(explicit[name])})
            learner.arrays.hp[slot] = getattr(learner.config, name)
    return model


class Holdout:
    """Holdout bookkeeping of a run (``active``: more than one pass, holdout not off): each pass's
    holdout loss, the best pass (its model saved when it wins) and early termination."""

    def __init__(self, active: bool, early_terminate: int, keep_last: bool = False):
        self.active = active
        self.keep_last = keep_last  # no model saved per pass: the last one is, at the end
        self.early_terminate = early_terminate
        self.best = math.inf
        self.best_pass = 0
        self.losses = []  # holdout loss of each completed pass (None: nothing held out)
        self.no_win = 0
        self.saved = False  # the model file holds the best pass

    def end_pass(self, p: int, loss: float, save) -> bool:
        """Record pass ``p``'s (0-based) holdout loss; ``save(passes)`` the model when it is the
        best so far. True when the run should stop early."""
        self.losses.append(loss if math.isfinite(loss) else None)
        if loss < self.best:
            self.best, self.best_pass, self.no_win = loss, p + 1, 0
            if not self.keep_last:
                self.saved = save(p + 1) or self.saved
        elif not (math.isinf(loss) and math.isinf(self.best)):
            self.no_win += 1
        return self.no_win >= self.early_terminate


def _run_passes(runner: Runner, paths, opts: RunOptions, stop: StopFlag, holdout: Holdout, save,
                final_model: str | None) -> int:
    """Up to ``opts.passes`` passes over the inputs (the example cache after the first); returns
    the passes run (the last one possibly interrupted by a signal)."""
    err = runner.err
    writer = PredictionWriter(opts.predictions, opts.flush, runner.names)
    if opts.handle_signals:
        stop.install()
    cache = None if opts.source is not None else _open_cache(opts, runner.input_cfg, paths, final_model,
                                                             runner.label_dict)
    if opts.progress_bar:
        from tqdm import tqdm

        runner.bar = tqdm(unit="ex", unit_scale=True, file=err, dynamic_ncols=True)
    passes_used = 0
    try:
        runner.progress.start()
        for p in range(opts.passes):
            runner.progress.holdout_reporting = p > 0 and holdout.active
            runner.holdout_counter = 0
            runner.reduction.count_labels = p == 0  # label counts: each training example once
            source = opts.source(p) if opts.source is not None else \
                _batches_for_pass(paths, runner.input_cfg, opts, p, cache, runner.label_dict)
            if p > 0 and source_shuffled(runner, opts, holdout, cache):
                from .passorder import shuffled

                source = shuffled(source, int(runner.reduction.config.seed), p)
            batches = prefetch(source, should_stop=lambda: stop.signum != 0)
            passes_used = p + 1
            try:
                done = runner.run_pass(batches, p, holdout.active, writer, stop)
            finally:  # a bad line stops the parser thread now, not at exit
                batches.close()
            if not done:
                break
            if end_of_pass(runner, holdout, p, opts, save):
                break
    finally:
        runner.reduction.count_labels = True
        if runner.bar is not None:
            runner.bar.close()
        writer.close()
        stop.restore()
        if cache is not None:
            cache.close()
    return passes_used


def source_shuffled(runner: Runner, opts: RunOptions, holdout: Holdout, cache) -> bool:
    """Whether a later pass reads the example cache in a random order: ``--shuffle-passes``, by
    default when the reduction replays its first pass shuffled; never with holdout on (the
    held-out examples are every Nth of a pass: another order would hold out others) nor when
    the batches do not come from the cache."""
    if opts.source is not None or cache is None or holdout.active or not runner.learn:
        return False
    if opts.shuffle_passes is not None:
        return bool(opts.shuffle_passes)
    return bool(getattr(runner.reduction, "shuffle", False))


def end_of_pass(runner: Runner, holdout: Holdout, p: int, opts: RunOptions, save) -> bool:
    """After pass ``p`` (0-based): the reduction's pass hook, the learning-rate decay, the holdout
    verdict (``save`` the best pass); True when the run stops early. (``distributed.train`` too.)"""
    runner.model.end_pass()
    runner.amend()
    if holdout.active and holdout.end_pass(p, runner.progress.end_pass(), save) and p + 1 < opts.passes:
        if not opts.quiet:
            runner.err.write(f"early stopping after pass {p + 1}: no holdout improvement in "
                             f"{holdout.no_win} passes; keeping pass {holdout.best_pass}\n")
        return True
    return False


def _save_whole(save, passes_used: int, opts: RunOptions, stop: StopFlag) -> None:
    """Save the model as it is now; a signal during the save only sets the flag: the save completes."""
    if opts.handle_signals:
        stop.install()
    try:
        save(passes_used)
    finally:
        stop.restore()


#: ``predict --threads`` is at most this many times the CPUs
THREADS_PER_CPU = 4


def resolve_threads(n: int) -> int:
    """``predict --threads``: 0 = one per CPU this process may use, at most 4; more than
    ``THREADS_PER_CPU`` per CPU is a usage error (ConfigError)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    if n > 0:
        if n > THREADS_PER_CPU * cpus:
            raise ConfigError(f"--threads must be at most {THREADS_PER_CPU} x the {cpus} CPUs = "
                              f"{THREADS_PER_CPU * cpus}, got {n}")
        return n
    return max(1, min(4, cpus))


#: batches ``predict``'s parser may run ahead of the predictions (``train``: 2). It starts while
#: the command loads (click, the model), so with only 2 it stopped after two chunks and left the
#: second core idle until the predictions began. Bounded memory: about 1-3 MB of arrays per batch
#: of 1 MB of input.
PREDICT_AHEAD = 16

def _predict_parser(paths: list, input_cfg: InputConfig, skip_invalid: bool, opts: RunOptions, should_stop=None):
    """``predict``'s batches of ``paths``, parsed in a thread that starts now and may run
    ``PREDICT_AHEAD`` batches ahead."""
    cfg = predict_input(input_cfg, skip_invalid, opts)
    return prefetch(_batches_for_pass(paths, cfg, opts, 0, None), depth=PREDICT_AHEAD, should_stop=should_stop,
                    eager=True)


def predict_input(input_cfg: InputConfig, skip_invalid: bool, opts: RunOptions) -> InputConfig:
    """The model's input options as ``predict`` reads with them: its own ``--skip-invalid`` and
    ``--max-line-bytes``, ``--max-example-features``, and labels below 1 read as unlabeled
    (counted), not as errors."""
    extra = {name: int(v) for name in ("max_line_bytes", "max_example_features")
             if (v := getattr(opts, name)) is not None}
    return replace(input_cfg, skip_invalid=bool(skip_invalid), low_labels_unlabeled=True, **extra)


def predict(model_path, opts: RunOptions, skip_invalid: bool = False) -> dict:
    """Test only: predict every example of ``opts.inputs`` with the model; nothing changes.
    ``model_path``: a model file, or a list of them that predict as one (``ensemble``; a file of
    several trees counts each)."""
    from . import model_io

    paths_in = [model_path] if isinstance(model_path, str) else list(model_path)
    model_path = paths_in[0]

    start = opts.start_time or time.time()
    err = opts.err if opts.err is not None else sys.stderr
    paths = list(opts.inputs) or ["-"]
    stop = StopFlag()
    # The parser starts on the inputs while the model loads (both release the GIL in their
    # kernels and file reads): the input options come from the model's header, read first.
    # ``batches`` is closed on every way out (a no-op once the pass has consumed it).
    batches = runner = writer = None
    peek = model_io.peek_input_config(model_path)
    if peek is not None and not peek.has_string_labels:  # string labels need the model's dictionary first
        batches = _predict_parser(paths, peek, skip_invalid, opts, should_stop=lambda: stop.signum != 0)
    try:
        from .ensemble import load_predictor

        model = load_predictor(paths_in)
        if opts.top_k:  # no answer holds more labels than the model knows: nothing is sized beyond them
            opts = replace(opts, top_k=min(int(opts.top_k), model.reduction.top_k_bound()))
        if batches is not None and model.input_config != peek:
            raise model_io.ModelFormatError(f"{model_path}: the model file changed while it was read")
        input_cfg = predict_input(model.input_config, skip_invalid, opts)
        runner = Runner(input_cfg, model, opts, learn=False)
        label_dict = model.label_dict
        if label_dict is not None:
            label_dict.grow = False  # predict never adds to the model's dictionary
        writer = PredictionWriter(opts.predictions, opts.flush, runner.names)
        if opts.handle_signals:
            stop.install()
        from .multilabel import set_predictor

        runner.sets = set_predictor(model.reduction, opts.top_k, opts.threshold, runner.names, opts.probabilities)
        if runner.sets is None and (opts.probabilities or opts.top_k) and writer.f is not None:
            model.predict_top(ExampleBatch.empty(), max(1, opts.top_k))  # fail early if unsupported
        if batches is None:
            batches = prefetch(_batches_for_pass(paths, input_cfg, opts, 0, None, label_dict),
                               should_stop=lambda: stop.signum != 0)
        runner.run_pass(batches, 0, False, writer, stop)
    finally:
        if batches is not None:
            batches.close()
        if runner is not None:
            runner.close()
        if writer is not None:
            writer.close()
        stop.restore()
    report = summary(runner.progress, model.reduction, input_cfg, 1, start, None)
    if runner.sets is not None:
        report.update(runner.sets.result())
    if runner.low_labels:
        report["labels_below_1"] = runner.low_labels
    finish(err, opts, report)
    if stop.signum:
        raise Interrupted(stop.signum, report)
    return report


#: options fixed by the model (besides every reduction option): name -> (part of the model, attribute)
_FIXED = {
    "reduction": ("reduction", "name"), "k": ("reduction", "k"), "bits": ("input", "bits"),
    "hash_seed": ("input", "hash_seed"), "noconstant": ("input", "noconstant"),
    "format": ("input", "format"), "label_offset": ("input", "label_offset"),
    "loss": ("learner", "loss"), "sgd": ("learner", "sgd"), "quantile_tau": ("learner", "quantile_tau"),
    "power_t": ("learner", "power_t"), "average": ("learner", "average"), "solver": ("learner", "solver"),
    "cost": ("learner", "cost"), "dual_memory": ("learner", "dual_memory"), "link": ("learner", "link"),
    "min_prediction": ("learner", "min_prediction"), "max_prediction": ("learner", "max_prediction"),
    # feature and label options are fixed by the model
    "interactions": ("input", "interactions"), "ngram": ("input", "ngram"), "skips": ("input", "skips"),
    "ignore": ("input", "ignore"), "keep": ("input", "keep"), "ignore_linear": ("input", "ignore_linear"),
    "named_labels": ("input", "named_labels"), "string_labels": ("input", "string_labels"),
    "multilabel": ("input", "multilabel"),
}


#: the flags of the fixed options whose parameter name is not the flag's
_SPELLED = {"k": "-k", "loss": "--loss-function"}


def _check_model_conflicts(loaded, explicit: dict, input_cfg: InputConfig):
    """ConfigError when an option given next to ``-i`` differs from the model's value."""
    from .reductions.registry import reduction_options

    where = {"reduction": loaded.reduction.config, "input": loaded.input_config,
             "learner": loaded.learner.config}
    options = reduction_options()
    for name, value in explicit.items():
        if value is None or (name not in _FIXED and name not in options):
            continue
        part, attr = _FIXED.get(name, ("reduction", name))
        have = getattr(where[part], attr)
        if have != value:
            opt = options[name][0] if name in options else None
            given = _SPELLED.get(name, f"--{name.replace('_', '-')}") if opt is None else \
                opt.off if value is False and opt.off else opt.flags[0]
            if not isinstance(value, bool) or name not in options:
                given += f" {value}"
            raise ConfigError(f"{given} conflicts with the initial model ({attr} = {have}); it is fixed by the model")
