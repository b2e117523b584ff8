"""The online loop: read a chunk, predict-then-learn, account, report (ALGORITHMS.md §4).

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
import signal
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .batch import ExampleBatch
from .config import InputConfig, LearnerConfig, ReductionConfig, check_regularization
from .errors import ConfigError, InputError, Interrupted
from .kernels.linear import HP_ETA, HP_L1, HP_L2
from .metrics import Progress
from .runtime import quiet_stdout


@dataclass
class RunOptions:
    """Driver options shared by train and predict."""

    inputs: list = field(default_factory=list)
    predictions: str | None = None
    passes: int = 1
    cache: str | None = None
    use_cache: bool = False
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
    max_line_bytes: int | None = None  # predict: --max-line-bytes (None: the default)
    max_example_features: int | None = None  # predict: --max-example-features (None: the model's)
    on_started: object = None  # called before the first example (the CLI: ``runtime.end_startup``)
    #: batches from elsewhere than ``inputs`` (the Python API's arrays, a Dask shard):
    #: ``source(pass_index)`` -> iterable of ExampleBatch; no example cache then
    source: object = None


class _StopFlag:
    def __init__(self):
        self.signum = 0
        self._old = {}

    def install(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread
                pass

    def _handler(self, signum, frame):
        self.signum = signum

    def restore(self):
        for s, h in self._old.items():
            signal.signal(s, h)


class PredictionWriter:
    """Writes one prediction per line (``label`` or ``label tag``), '-' = stdout.

    Labels below ``NAME_CACHE`` are written from a list of their decimal strings, built as larger
    labels appear (``str`` per prediction was 5 ms per 25,000 predictions, 1 ms this way)."""

    NAME_CACHE = 1 << 16

    def __init__(self, path: str | None, flush: bool = False, label_dict=None):
        self.label_dict = label_dict  # string labels: ids are written as their names
        self.flush = flush
        self.own = False
        self.broken = False
        self._names: list[str] = []
        self.path = path
        if path is None:
            self.f = None
        elif path == "-":
            if sys.stdout is None:  # fd 1 closed (``>&-``)
                raise ConfigError("cannot write predictions to standard output (-p -): it is closed")
            self.f = sys.stdout
        else:
            try:
                self.f = open(path, "w", buffering=1 << 16)
            except OSError as e:
                raise ConfigError(f"cannot write predictions to {path}: {e.strerror}") from None
            self.own = True

    def lines(self, preds: np.ndarray, tags, extra: list | None = None) -> list[str]:
        """The answer lines of a batch: ``label`` (``extra`` appended) and `` tag`` if any."""
        lines = self.label_strings(preds)
        if extra is not None:
            lines = [a + b for a, b in zip(lines, extra)]
        return self.tagged(lines, tags)

    @staticmethod
    def tagged(lines: list, tags) -> list:
        """``lines`` with `` tag`` appended where an example has one."""
        if tags is None:
            return lines
        return [ln if t is None else f"{ln} {t}" for ln, t in zip(lines, tags)]

    def write(self, preds: np.ndarray, tags, extra: list | None = None):
        if self.f is None or preds.shape[0] == 0:
            return
        self.write_lines(self.lines(preds, None, extra), tags)

    def write_lines(self, lines: list, tags=None):
        """Write answer lines as given (`` tag`` appended where there is one)."""
        if self.f is None or not lines:
            return
        lines = self.tagged(lines, tags)
        try:
            self.f.write("\n".join(lines) + "\n")
            if self.flush:
                self.f.flush()
        except BrokenPipeError:
            # the reader went away (e.g. `| head`): stop writing, keep the run (training) going
            self.broken = True
            self.f = None
            quiet_stdout()
        except OSError as e:  # a full disk, /dev/full, ...: name the file
            self._failed(e)

    def label_strings(self, preds: np.ndarray) -> list[str]:
        """``[str(p) for p in preds]`` (an integer array); the names with string labels."""
        values = preds.tolist()
        if self.label_dict is not None:
            return self.label_dict.strings(values)
        lo, hi = int(preds.min()), int(preds.max())
        if lo < 0 or hi >= self.NAME_CACHE:
            return list(map(str, values))
        names = self._names
        if hi >= len(names):
            names.extend(map(str, range(len(names), hi + 1)))
        return [names[v] for v in values]

    def _failed(self, e: OSError):
        from .errors import LomtreeError

        f, self.f = self.f, None
        if self.own:
            try:
                f.close()
            except OSError:
                pass
        where = "standard output" if self.path == "-" else self.path
        raise LomtreeError(f"cannot write predictions to {where}: {e.strerror or e}") from None

    def close(self):
        if self.f is not None:
            try:
                if self.own:
                    self.f.close()
                else:
                    self.f.flush()
            except BrokenPipeError:
                self.broken = True
                quiet_stdout()
            except OSError as e:
                self._failed(e)


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


_END = object()


class _Prefetch:
    """The iterator ``prefetch`` returns: iterate it once; ``close()`` stops the thread even when
    the iteration never began (e.g. the model failed to load while the parser ran ahead).
    ``should_stop`` may be replaced until the iteration begins."""

    def __init__(self, gen, halt, should_stop=None):
        self._gen = gen
        self._halt = halt
        self.should_stop = should_stop

    def __iter__(self):
        return self._gen

    def close(self):
        if self._halt is not None:
            self._halt.set()
        close = getattr(self._gen, "close", None)  # a plain iterator with LOMTREE_THREADS=0
        if close is not None:
            close()


def prefetch(iterable, depth: int = 2, should_stop=None, eager: bool = False):
    """Iterate ``iterable`` in a background thread, up to ``depth`` items ahead (VW's parser thread).

    The parse kernels and the reductions' chunk kernels are compiled with ``nogil=True``, and
    gzip/bz2/lzma release the GIL while decompressing, so parsing chunk i+1 overlaps learning on
    chunk i on a second core. Items arrive in order; an exception in the producer (e.g. an
    ``InputError``) is raised here, after the items before it. ``should_stop()`` is polled while
    waiting so a signal ends the wait. ``eager``: the thread starts now, not at the first item
    asked for (``predict`` parses while the model loads). ``LOMTREE_THREADS=0`` turns the thread
    off (debugging).
    """
    if os.environ.get("LOMTREE_THREADS", "1") == "0":
        return _Prefetch(iter(iterable), None, should_stop)
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    halt = threading.Event()

    def put(item):
        while not halt.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in iterable:
                if not put((item, None)):
                    return
            put((_END, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put((_END, e))

    t = threading.Thread(target=work, name="lomtree-parser", daemon=True)

    def drain():
        if not t.is_alive() and t.ident is None:
            t.start()
        try:
            while True:
                try:
                    item, err = q.get(timeout=0.2)
                except queue.Empty:
                    if handle.should_stop is not None and handle.should_stop():
                        return
                    continue
                if item is _END:
                    if err is not None:
                        raise err
                    return
                yield item
        finally:
            halt.set()
            t.join(timeout=2.0)
            if not t.is_alive() and hasattr(iterable, "close"):
                iterable.close()

    handle = _Prefetch(drain(), halt, should_stop)
    if eager:
        t.start()
    return handle


class Runner:
    """One run (train or predict) over the inputs; see ``train`` and ``predict``."""

    def __init__(self, input_cfg: InputConfig, learner, reduction, opts: RunOptions, learn: bool):
        self.input_cfg = input_cfg
        self.learner = learner
        self.reduction = reduction
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
        self.label_dict = None  # labels.LabelDict with string labels
        self.sets = None  # multilabel.SetPredictor: a multi-label model's prediction lines and test metrics
        #: examples of the current pass seen so far (holdout positions); a pass starts at 0, a
        #: Dask shard's segment goes on from where its last one ended
        self.holdout_counter = 0

    def _process(self, batch: ExampleBatch, train: np.ndarray):
        """``reduction.process``; when only predicting, a large batch is cut into ``opts.threads``
        consecutive parts predicted at once (the kernels release the GIL and only read the model,
        so the predictions are the same as in one piece)."""
        parts = self.opts.threads if (not self.learn and self.reduction.parallel_predict) else 1
        n = len(batch)
        if parts <= 1 or n < 16 * parts or batch.indptr[-1] < 16384 * parts:  # too small to pay off
            return self.reduction.process(batch, train)
        if self._pool is None:
            from .workers import Pool

            self._pool = Pool(parts - 1, "lomtree-predict")
        cut = [n * i // parts for i in range(parts + 1)]
        futures = [self._pool.submit(self.reduction.process, batch.slice(a, b), train[a:b])
                   for a, b in zip(cut[1:-1], cut[2:])]
        outs = [self.reduction.process(batch.slice(0, cut[1]), train[:cut[1]])]
        outs += [f.result() for f in futures]
        preds = np.concatenate([o[0] for o in outs])
        losses = None if any(o[1] is None for o in outs) else np.concatenate([o[1] for o in outs])
        return preds, losses

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
        if self.label_dict is None:
            return f"label {label} is outside 1..{self.reduction.k}"
        return (f"label {self.label_dict.name(label)!r} would be class {label}, outside 1..{self.reduction.k} "
                f"(more distinct labels than -k)")

    def _check_labels(self, batch: ExampleBatch, train_possible: bool) -> ExampleBatch:
        if batch.label_ptr is not None:
            return self._check_label_sets(batch, train_possible)
        bad = self.reduction.invalid_labels(batch.labels)
        if not bad.any():
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

    def _check_label_sets(self, batch: ExampleBatch, train_possible: bool) -> ExampleBatch:
        """Label sets to train on must be in 1..k (else a malformed line, or skipped); in
        predict a label beyond k is a label the model cannot predict (a miss in the metrics)."""
        k = self.reduction.k
        if not train_possible or not batch.label_ids.size or int(batch.label_ids.max()) <= k:
            return batch
        bad = np.zeros(len(batch), dtype=bool)
        bad[batch.label_owner()[batch.label_sets()[1] > k]] = True

        def text(i):
            big = int(batch.label_set(i).max())
            name = str(big) if self.label_dict is None else repr(self.label_dict.name(big))
            return f"label {name} is outside 1..{k}" + ("" if self.label_dict is None else " (more distinct labels than -k)")

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
    def run_pass(self, batches, pass_index: int, holdout: bool, writer: PredictionWriter, stop: _StopFlag):
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
                hold = (pos % period) == 0
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
            preds, losses = self._process(batch, train)
            shown = None
            if batch.label_ptr is not None:
                from .multilabel import in_sets, label_text

                miss = ~in_sets(preds, batch.label_ptr, batch.label_ids)
                shown = lambda j, b=batch: label_text(b, j, self.label_dict)  # noqa: E731
            else:
                miss = preds != labels
            zero_one = np.where(labeled & miss, weights, 0.0)
            if losses is None:
                losses = zero_one
                zero_one = None
            self.progress.add_batch(labels, weights, preds, losses, batch.n_features, hold, zero_one, shown)
            if self.learner.nan_count and not self.warned_nan:
                self._warn("a regressor produced NaN (score or update); it was replaced by 0")
                self.warned_nan = True
            extra = None
            if self.sets is not None:
                lines = self.sets.batch(batch, writer.f is not None)[1]
                if lines is not None:
                    writer.write_lines(lines, batch.tags)
            elif writer.f is not None and (self.opts.probabilities or self.opts.top_k):
                extra = probability_fields(self.reduction, batch, self.opts.top_k, self.opts.probabilities,
                                           self.label_dict)
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


def probability_fields(reduction, batch, top_k: int, probabilities: bool, label_dict=None):
    """``--top-k``/``--probabilities`` output of a batch: (best labels, per example the text that
    follows the label: ``:p``, the next labels ``label:p``, ``p(true label)=p``)."""
    ntop = max(1, top_k)
    labs, probs, p_true = reduction.predict_top(batch, ntop)
    name = str if label_dict is None else label_dict.name
    extra = []
    has_label = batch.labels > 0
    for i in range(len(batch)):
        parts = [f":{probs[i, 0]:.6f}"]
        for j in range(1, ntop if top_k else 1):
            if j < labs.shape[1] and labs[i, j] > 0:
                parts.append(f" {name(int(labs[i, j]))}:{probs[i, j]:.6f}")
        if probabilities and has_label[i]:
            parts.append(f" p({name(int(batch.labels[i]))})={p_true[i]:.6f}")
        extra.append("".join(parts))
    return labs[:, 0], extra


def _open_cache(opts: RunOptions, input_cfg: InputConfig, paths, final_model: str | None = None):
    """The example cache of a train run (None with one pass and no ``-c``).

    ``opts.cache``: None (no ``-c``) = a temporary file deleted at the end; "" (``-c``) =
    ``MODEL.cache`` next to ``-f`` (temporary without ``-f``); a path = that file, kept.
    """
    if opts.passes <= 1 and not opts.use_cache:
        return None
    from .cache import ExampleCache

    return ExampleCache.open(opts.cache, input_cfg, paths, opts,
                             err=None if opts.quiet else (opts.err or sys.stderr), model_path=final_model)


def train(input_cfg: InputConfig, learner_cfg: LearnerConfig, red_cfg: ReductionConfig, opts: RunOptions,
          initial_model: str | None = None, final_model: str | None = None,
          explicit: dict | None = None) -> dict:
    """Train (progressive validation) over ``opts.inputs``; returns the summary dict.

    A new model is made from the three configs; with ``initial_model`` that model is continued
    (``learner_cfg`` and ``red_cfg`` unused; ``explicit``: the options given on the command line,
    checked against the model or applied to it)."""
    from . import model_io
    from .labels import LabelDict

    start = opts.start_time or time.time()
    _check_train_options(opts)
    if initial_model is None:
        passes_before = 0
        learner, reduction = _new_model(input_cfg, learner_cfg, red_cfg)
        label_dict = LabelDict.from_config(input_cfg)
    else:
        input_cfg, learner, reduction, passes_before, label_dict = _continued_model(initial_model, input_cfg,
                                                                                    explicit or {})

    def save(passes_done: int) -> bool:
        if final_model is None:
            return False
        model_io.save_model(final_model, input_cfg, learner, reduction, passes_before + passes_done, label_dict)
        return True

    return fit(input_cfg, learner, reduction, opts, save, final_model, start, label_dict)


def fit(input_cfg: InputConfig, learner, reduction, opts: RunOptions, save, final_model: str | None = None,
        start: float | None = None, label_dict=None) -> dict:
    """Train the model ``(learner, reduction)`` in place over ``opts.inputs`` (or ``opts.source``):
    passes, holdout, progressive validation, report; ``save(passes_done) -> bool`` keeps the model
    (a file for ``train``, a snapshot for the Python API) when a pass wins on holdout and at the
    end (when no pass was kept). Returns the summary dict. ``train`` and ``api.Classifier.fit``
    both run through here."""
    start = start or opts.start_time or time.time()
    err = opts.err if opts.err is not None else sys.stderr
    _check_train_options(opts)
    paths = list(opts.inputs) or ["-"]
    runner = Runner(input_cfg, learner, reduction, opts, learn=True)
    runner.label_dict = label_dict
    runner.need_predictions = opts.predictions is not None or not (opts.quiet or opts.progress_bar)
    reduction.set_need_predictions(runner.need_predictions)
    if hasattr(reduction, "plan"):  # -r mtree: rate schedule, Huffman tree of the label counts
        from .parsing import iter_batches

        reduction.plan(opts.passes, paths, lambda: iter_batches(paths, input_cfg, chunk_bytes=opts.chunk_bytes,
                                                                label_dict=label_dict))
    if not opts.quiet:
        _preamble(err, input_cfg, learner, reduction, paths)
    holdout = _Holdout(opts.passes > 1 and not opts.holdout_off, opts.early_terminate)
    stop = _StopFlag()
    passes_used = _run_passes(runner, paths, opts, stop, holdout, save, final_model)
    # with holdout the file already holds the best pass (also after an interrupt: a half pass is not
    # validated, so the best complete pass is kept); otherwise write the model as it is now
    if not holdout.saved:
        _save_whole(save, passes_used, opts, stop)
    summary = _summary(runner, reduction, input_cfg, passes_used, start,
                       holdout.best if holdout.active and math.isfinite(holdout.best) else None)
    if holdout.active:
        summary["best_pass"] = holdout.best_pass
        summary["holdout_losses"] = holdout.losses
    _finish(err, opts, runner, summary)
    if stop.signum:
        raise Interrupted(stop.signum, summary)
    return summary


def _check_train_options(opts: RunOptions) -> None:
    if opts.passes < 1:
        raise ConfigError("--passes must be >= 1")
    if opts.passes > 1 and not opts.holdout_off:
        if opts.holdout_period < 1:
            raise ConfigError("--holdout-period must be >= 1")
        if opts.early_terminate < 1:
            raise ConfigError("--early-terminate must be >= 1")


def _new_model(input_cfg: InputConfig, learner_cfg: LearnerConfig, red_cfg: ReductionConfig):
    """(learner, reduction) of a new model."""
    from .learner import LinearLearner
    from .reductions import get_reduction_class

    cls = get_reduction_class(red_cfg.name)
    learner = LinearLearner(learner_cfg, input_cfg.bits, cls.n_models_for(red_cfg), cls.slot_mode)
    reduction = cls(red_cfg, learner)
    if input_cfg.multilabel:
        reduction.set_multilabel()
    return learner, reduction


def _continued_model(path: str, input_cfg: InputConfig, explicit: dict):
    """(input config, learner, reduction, passes done, label dictionary) of the model at ``path``, continued: the
    options in ``explicit`` are checked against it (ConfigError), or applied (learning rate and its
    decay, --l1, --l2: they change how training goes on, and the saved model keeps them); the run's own input options (``--skip-invalid``, ``--max-line-bytes``, ``--max-example-features``) are kept."""
    from . import model_io

    loaded = model_io.load_model(path)
    _check_model_conflicts(loaded, explicit, input_cfg)
    input_cfg = replace(loaded.input_config, skip_invalid=input_cfg.skip_invalid,
                        max_line_bytes=input_cfg.max_line_bytes,
                        max_example_features=input_cfg.max_example_features)
    learner = loaded.learner
    if explicit.get("learning_rate") is not None:
        learner.arrays.hp[HP_ETA] = float(explicit["learning_rate"])
    if explicit.get("decay_learning_rate") is not None:
        learner.config = replace(learner.config, decay_learning_rate=float(explicit["decay_learning_rate"]))
    check_regularization(loaded.reduction.name, explicit.get("l1"), explicit.get("l2"))
    for name, slot in (("l1", HP_L1), ("l2", HP_L2)):
        if explicit.get(name) is not None:
            learner.config = replace(learner.config, **{name: float(explicit[name])})
            learner.arrays.hp[slot] = getattr(learner.config, name)
    return input_cfg, learner, loaded.reduction, loaded.passes_done, loaded.label_dict


class _Holdout:
    """Holdout bookkeeping of a run (``active``: more than one pass, holdout not off): each pass's
    holdout loss, the best pass (its model saved when it wins) and early termination."""

    def __init__(self, active: bool, early_terminate: int):
        self.active = active
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
            self.saved = save(p + 1) or self.saved
        elif not (math.isinf(loss) and math.isinf(self.best)):
            self.no_win += 1
        return self.no_win >= self.early_terminate


def _run_passes(runner: Runner, paths, opts: RunOptions, stop: _StopFlag, holdout: _Holdout, save,
                final_model: str | None) -> int:
    """Up to ``opts.passes`` passes over the inputs (the example cache after the first); returns
    the passes run (the last one possibly interrupted by a signal)."""
    err = runner.err
    writer = PredictionWriter(opts.predictions, opts.flush, runner.label_dict)
    if opts.handle_signals:
        stop.install()
    cache = None if opts.source is not None else _open_cache(opts, runner.input_cfg, paths, final_model)
    if opts.progress_bar:
        from tqdm import tqdm

        runner.bar = tqdm(unit="ex", unit_scale=True, file=err, dynamic_ncols=True)
    passes_used = 0
    try:
        runner.progress.start()
        for p in range(opts.passes):
            runner.progress.holdout_reporting = p > 0 and holdout.active
            runner.holdout_counter = 0
            source = opts.source(p) if opts.source is not None else \
                _batches_for_pass(paths, runner.input_cfg, opts, p, cache, runner.label_dict)
            batches = prefetch(source, should_stop=lambda: stop.signum != 0)
            passes_used = p + 1
            if not runner.run_pass(batches, p, holdout.active, writer, stop):
                break
            if end_of_pass(runner, holdout, p, opts, save):
                break
    finally:
        if runner.bar is not None:
            runner.bar.close()
        writer.close()
        stop.restore()
        if cache is not None:
            cache.close()
    return passes_used


def end_of_pass(runner: Runner, holdout: _Holdout, p: int, opts: RunOptions, save) -> bool:
    """After pass ``p`` (0-based): the reduction's pass hook, the learning-rate decay, the holdout
    verdict (``save`` the best pass); True when the run stops early. (``distributed.train`` too.)"""
    runner.reduction.end_pass()
    runner.learner.decay(runner.learner.config.decay_learning_rate)
    if holdout.active and holdout.end_pass(p, runner.progress.end_pass(), save) and p + 1 < opts.passes:
        if not opts.quiet:
            runner.err.write(f"early stopping after pass {p + 1}: no holdout improvement in "
                             f"{holdout.no_win} passes; keeping pass {holdout.best_pass}\n")
        return True
    return False


def _save_whole(save, passes_used: int, opts: RunOptions, stop: _StopFlag) -> None:
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
#: the command loads (click, the model: 50-100 ms); with 2 it stopped after two chunks and left
#: the second core idle until the predictions began (Sector test x5, 15 alternating runs, median
#: 384 -> 363 ms). Bounded memory: about 1-3 MB of arrays per batch of 1 MB of input.
PREDICT_AHEAD = 16

def _predict_parser(paths: list, input_cfg: InputConfig, skip_invalid: bool, opts: RunOptions, should_stop=None):
    """``predict``'s batches of ``paths``, parsed in a thread that starts now and may run
    ``PREDICT_AHEAD`` batches ahead."""
    cfg = _predict_input(input_cfg, skip_invalid, opts)
    return prefetch(_batches_for_pass(paths, cfg, opts, 0, None), depth=PREDICT_AHEAD, should_stop=should_stop,
                    eager=True)


def _predict_input(input_cfg: InputConfig, skip_invalid: bool, opts: RunOptions) -> InputConfig:
    """The model's input options as ``predict`` reads with them: its own ``--skip-invalid`` and
    ``--max-line-bytes``, ``--max-example-features``, and labels below 1 read as unlabeled
    (counted), not as errors."""
    extra = {name: int(v) for name in ("max_line_bytes", "max_example_features")
             if (v := getattr(opts, name)) is not None}
    return replace(input_cfg, skip_invalid=bool(skip_invalid), low_labels_unlabeled=True, **extra)


def predict(model_path: str, opts: RunOptions, skip_invalid: bool = False) -> dict:
    """Test only: predict every example of ``opts.inputs`` with the model; nothing changes."""
    from . import model_io

    start = opts.start_time or time.time()
    err = opts.err if opts.err is not None else sys.stderr
    paths = list(opts.inputs) or ["-"]
    stop = _StopFlag()
    # The parser starts on the inputs while the model loads (both release the GIL in their
    # kernels and file reads): the input options come from the model's header, read first.
    # ``batches`` is closed on every way out (a no-op once the pass has consumed it).
    batches = runner = writer = None
    peek = model_io.peek_input_config(model_path)
    if peek is not None and not peek.has_string_labels:  # string labels need the model's dictionary first
        batches = _predict_parser(paths, peek, skip_invalid, opts, should_stop=lambda: stop.signum != 0)
    try:
        loaded = model_io.load_model(model_path, predict_only=True, skip_unused=True)
        if opts.top_k:  # no answer holds more labels than the model knows: nothing is sized beyond them
            opts = replace(opts, top_k=min(int(opts.top_k), loaded.reduction.top_k_bound()))
        if batches is not None and loaded.input_config != peek:
            raise model_io.ModelFormatError(f"{model_path}: the model file changed while it was read")
        input_cfg = _predict_input(loaded.input_config, skip_invalid, opts)
        runner = Runner(input_cfg, loaded.learner, loaded.reduction, opts, learn=False)
        label_dict = runner.label_dict = loaded.label_dict
        if label_dict is not None:
            label_dict.grow = False  # predict never adds to the model's dictionary
        writer = PredictionWriter(opts.predictions, opts.flush, label_dict)
        if opts.handle_signals:
            stop.install()
        from .multilabel import set_predictor

        runner.sets = set_predictor(loaded.reduction, opts.top_k, opts.threshold, label_dict)
        if runner.sets is None and (opts.probabilities or opts.top_k) and writer.f is not None:
            loaded.reduction.predict_top(ExampleBatch.empty(), max(1, opts.top_k))  # fail early if unsupported
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
    summary = _summary(runner, loaded.reduction, input_cfg, 1, start, None)
    if runner.sets is not None:
        summary.update(runner.sets.result())
    if runner.low_labels:
        summary["labels_below_1"] = runner.low_labels
    _finish(err, opts, runner, summary)
    if stop.signum:
        raise Interrupted(stop.signum, summary)
    return summary


#: options fixed by the model (besides every reduction option): name -> (part of the model, attribute)
_FIXED = {
    "reduction": ("reduction", "name"), "k": ("reduction", "k"), "bits": ("input", "bits"),
    "hash_seed": ("input", "hash_seed"), "noconstant": ("input", "noconstant"),
    "format": ("input", "format"), "label_offset": ("input", "label_offset"),
    "loss": ("learner", "loss"), "sgd": ("learner", "sgd"), "quantile_tau": ("learner", "quantile_tau"),
    "power_t": ("learner", "power_t"),
    # issue #23: feature and label options are fixed by the model
    "interactions": ("input", "interactions"), "ngram": ("input", "ngram"), "skips": ("input", "skips"),
    "ignore": ("input", "ignore"), "keep": ("input", "keep"), "ignore_linear": ("input", "ignore_linear"),
    "named_labels": ("input", "named_labels"), "string_labels": ("input", "string_labels"),
    "multilabel": ("input", "multilabel"),
}


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
            given = options[name][0].flags[0] if name in options else f"--{name.replace('_', '-')}"
            if not isinstance(value, bool) or name not in options:
                given += f" {value}"
            raise ConfigError(f"{given} conflicts with the initial model ({attr} = {have}); it is fixed by the model")


def _preamble(err, input_cfg, learner, reduction, paths):
    lc = learner.config
    err.write(f"Num weight bits = {input_cfg.bits}\n")
    err.write(f"learning rate = {learner.eta:g}\n")
    err.write(f"initial_t = {lc.t0:g}\n")
    err.write(f"power_t = {lc.power_t:g}\n")
    if lc.l1 > 0:
        err.write(f"using l1 regularization = {lc.l1:g}\n")
    if lc.l2 > 0:
        err.write(f"using l2 regularization = {lc.l2:g}\n")
    err.write(f"Reading datafile = {', '.join('<stdin>' if p == '-' else p for p in paths)}\n")
    k = reduction.config.k
    err.write(f"Reduction = {reduction.name}{'' if k is None else f' k={k}'} loss={lc.loss}\n")


def _summary(runner: Runner, reduction, input_cfg, passes, start, holdout_loss):
    pr = runner.progress
    seconds = max(time.time() - start, 1e-9)
    avg = pr.average_loss
    s = {
        "examples": pr.ex,
        "weighted_examples": pr.wl + pr.wu,
        "average_loss": avg,
        "holdout_loss": holdout_loss,
        "passes": passes,
        "total_features": pr.feats,
        "skipped_lines": pr.skipped,
        "seconds": seconds,
        "examples_per_second": pr.ex / seconds,
        "reduction": reduction.name,
        "k": reduction.config.k,
        "bits": input_cfg.bits,
    }
    if reduction.own_loss:
        s["average_zero_one_loss"] = (pr.zero_one / pr.wl) if (pr.wl > 0 and runner.need_predictions) else None
    if reduction.multilabel and avg is not None:  # the loss is 1 - precision@1 there
        s["progressive_p@1"] = 1.0 - avg
    if reduction.reports_log_loss:
        log_loss = holdout_loss if holdout_loss is not None else avg
        s["perplexity"] = math.exp(min(log_loss, 700.0)) if log_loss is not None else None
    s.update(reduction.summary_extra())
    return s


def _finish(err, opts: RunOptions, runner: Runner, s: dict):
    if not opts.quiet:
        f = lambda v: "n.a." if v is None else "%.6f" % v  # noqa: E731
        err.write("\nfinished run\n")
        if s["passes"] > 1:
            err.write(f"number of examples per pass = {s['examples'] // s['passes']}\n")
            err.write(f"passes used = {s['passes']}\n")
        else:
            err.write(f"number of examples = {s['examples']}\n")
        err.write(f"weighted example sum = {s['weighted_examples']:.6f}\n")
        err.write("weighted label sum = 0.000000\n")
        if s["holdout_loss"] is not None:
            err.write(f"average loss = {s['holdout_loss']:.6f} h\n")
        elif "best_pass" in s:
            err.write("average loss = undefined (no holdout)\n")
        else:
            err.write(f"average loss = {f(s['average_loss'])}\n")
        if "average_zero_one_loss" in s:
            err.write(f"average 0/1 loss = {f(s['average_zero_one_loss'])}\n")
        if "perplexity" in s:
            err.write(f"perplexity = {f(s['perplexity'])}\n")
        if "progressive_p@1" in s and "p@1" not in s:
            err.write(f"progressive precision@1 = {s['progressive_p@1']:.6f}\n")
        if "p@1" in s:
            from .multilabel import KS

            for name, key in (("precision", "p"), ("nDCG", "ndcg"), ("PSP", "psp")):
                if f"{key}@1" in s:
                    err.write(f"{name}@{'/'.join(map(str, KS))} = "
                              + " / ".join("%.4f" % s[f"{key}@{k}"] for k in KS) + "\n")
            if "micro_f1" in s:
                err.write(f"micro F1 = {s['micro_f1']:.4f}, macro F1 = {s['macro_f1']:.4f}\n")
        err.write(f"total feature number = {s['total_features']}\n")
        for key, v in s.items():
            if key in ("number_of_swaps",):
                err.write(f"number of swaps = {v}\n")
        if s["skipped_lines"]:
            err.write(f"skipped lines = {s['skipped_lines']}\n")
        if s.get("labels_below_1"):
            err.write(f"labels below 1 read as unlabeled = {s['labels_below_1']}\n")
        err.flush()
    if opts.report:
        import json

        text = json.dumps(s, indent=2, sort_keys=True) + "\n"
        if opts.report == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        elif os.path.exists(opts.report) and not os.path.isfile(opts.report):
            # /dev/stdout, a FIFO, ...: write in place; a rename would replace the device node
            with open(opts.report, "w") as fh:
                fh.write(text)
        else:
            target = os.path.realpath(opts.report)  # a symlink is followed, not replaced
            from .paths import temporary_name

            tmp = temporary_name("--report", target)
            try:
                with open(tmp, "w") as fh:
                    fh.write(text)
                os.replace(tmp, target)
            except OSError as e:
                from .errors import LomtreeError

                raise LomtreeError(f"cannot write the report to {opts.report}: {e.strerror or e}") from None
