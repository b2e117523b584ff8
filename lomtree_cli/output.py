"""What a run shows: the prediction lines, the preamble, the summary and the JSON report.

The model (``core.Learner``) computes; the driver, the daemon and Dask write through here.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from .errors import ConfigError
from .runtime import quiet_stdout


class PredictionWriter:
    """Writes one prediction per line (``label`` or ``label tag``), '-' = stdout.

    Labels below ``NAME_CACHE`` are written from a list of their decimal strings, built as larger
    labels appear: a ``str`` call per prediction cost several times as much."""

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
        """``[str(p) for p in preds]`` (an integer array); the names with string labels; real
        predictions (a float array) as VW writes them (``real_strings``)."""
        if preds.dtype.kind == "f":
            return real_strings(preds)
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


def real_strings(preds: np.ndarray) -> list[str]:
    """Real predictions as VW prints them: an integral value without decimals (``-1``, ``0``),
    any other with six (``0.826601``)."""
    whole = np.floor(preds) == preds
    return ["%.0f" % v if w else "%.6f" % v for v, w in zip(preds.tolist(), whole.tolist())]


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


def preamble(err, input_cfg, learner, reduction, paths) -> None:
    """The lines a training run starts with on stderr (VW's)."""
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


def summary(progress, reduction, input_cfg, passes: int, start: float, holdout_loss, need_predictions: bool = True) -> dict:
    """The JSON report of a run: ``progress`` (``metrics.Progress``) totals and the model's sizes."""
    pr = progress
    seconds = max(time.time() - start, 1e-9)
    avg = None if (reduction.skips_progressive and not reduction.own_loss) else pr.average_loss
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
    if reduction.own_loss and not getattr(reduction, "real_labels", False):
        s["average_zero_one_loss"] = (pr.zero_one / pr.wl) if (pr.wl > 0 and need_predictions) else None
    if reduction.multilabel and avg is not None:  # the loss is 1 - precision@1 there
        s["progressive_p@1"] = 1.0 - avg
    if reduction.reports_log_loss:
        log_loss = holdout_loss if holdout_loss is not None else avg
        s["perplexity"] = math.exp(min(log_loss, 700.0)) if log_loss is not None else None
    s.update(reduction.summary_extra())
    return s


def finish(err, opts, s: dict) -> None:
    """The end of a run: the summary on ``err`` (unless ``opts.quiet``), the JSON report to
    ``opts.report`` (a regular file is replaced atomically, a symlink followed, a device written)."""
    if not opts.quiet:
        f = lambda v: "n.a." if v is None else "%.6f" % v  # noqa: E731
        err.write("\nfinished run\n")
        if s["passes"] > 1:
            err.write(f"number of examples per pass = {s['examples'] // s['passes']}\n")
            err.write(f"passes used = {s['passes']}\n")
        else:
            err.write(f"number of examples = {s['examples']}\n")
        err.write(f"weighted example sum = {s['weighted_examples']:.6f}\n")
        err.write(f"weighted label sum = {s.get('weighted_label_sum', 0.0):.6f}\n")
        if s["holdout_loss"] is not None:
            err.write(f"average loss = {s['holdout_loss']:.6f} h\n")
        elif "best_pass" in s:
            err.write("average loss = undefined (no holdout)\n")
        else:
            err.write(f"average loss = {f(s['average_loss'])}\n")
        if "best_constant" in s:  # VW's lines (-r binary, -r regression)
            err.write(f"best constant = {s['best_constant']:.6f}\n")
            if "best_constant_loss" in s:
                err.write(f"best constant's loss = {s['best_constant_loss']:.6f}\n")
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
            if key == "record_prunes" and v:
                err.write(f"class records pruned (--max-class-records) = {v} times\n")
            if key == "label_frequency_predictions":
                err.write(f"held for the tree (--tree-buffer) = {v} examples: the table and -p show their "
                          f"label-frequency predictions, the losses their replay into the tree\n")
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
            try:
                with open(opts.report, "w") as fh:
                    fh.write(text)
            except OSError as e:
                from .errors import LomtreeError

                raise LomtreeError(f"cannot write the report to {opts.report}: {e.strerror or e}") from None
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
