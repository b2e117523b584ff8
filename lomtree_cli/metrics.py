"""Progressive validation: accumulators, VW's doubling table and the run summary (§4.1, §4.2).

Each example is predicted before it is learned; the average of those losses over the labeled,
non-holdout examples (weighted by importance) is the progressive validation loss (Blum, Kalai &
Langford 1999). The table goes to a text stream (stderr); the library never prints by itself.
"""

from __future__ import annotations

import math

import numpy as np

HEADER = (
    "average  since         example        example        current        current  current\n"
    "loss     last          counter         weight          label        predict features\n"
)


def _fix(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def _loss_field(v: float | None) -> str:
    if v is None:
        return "n.a.".ljust(8)
    return ("%.6f" % v)[:8].ljust(8)


def format_row(avg, since, ex, weight, label, pred, nfeat, holdout=False) -> str:
    """One table line (docs/ALGORITHMS.md §4.2)."""
    lab = "unknown" if label is None or label == 0 else str(label)
    line = "%s %s %12d %14s %14s %14s %8d" % (
        _loss_field(avg), _loss_field(since), ex, _fix("%.1f" % weight, 14),
        _fix(lab, 14), _fix(str(pred), 14), nfeat,
    )
    return line + (" h" if holdout else "")


class Progress:
    """Counters of §4.1 and the doubling table.

    Parameters
    ----------
    out : text stream for the table, or None for quiet
    progress : float (multiplicative, default 2.0) or int (additive) print interval
    """

    def __init__(self, out=None, progress: float | int = 2.0):
        self.out = out
        self.progress = progress
        #: writes class ids in the table as the input wrote its labels (``labels.output_names``:
        #: string labels, label offsets, XMC's 0-based ones), as the predictions do; None: the ids
        self.names = None
        self.wl = 0.0   # weighted labeled examples
        self.wu = 0.0   # weighted unlabeled
        self.L = 0.0
        self.Ld = 0.0
        self.wl_old = 0.0
        self.ex = 0
        self.feats = 0
        self.wh = 0.0   # holdout totals
        self.Lh = 0.0
        self.whd = 0.0  # holdout since print
        self.Lhd = 0.0
        self.whp = 0.0  # holdout since pass start
        self.Lhp = 0.0
        self.holdout_reporting = False  # second pass on with holdout active
        self.next_dump = 1.0
        self.header_done = False
        self.skipped = 0
        self.zero_one = 0.0  # 0/1 loss sum (reported separately when the main loss is not 0/1)

    def _header(self):
        if self.out is not None and not self.header_done:
            self.out.write(HEADER)
            self.header_done = True

    def start(self):
        self._header()

    def add_batch(self, labels, weights, preds, losses, nfeat, holdout, zero_one=None, shown=None, shown_pred=None):
        """Account a processed chunk, printing table lines at the doubling points.

        labels, preds : int64 (n,); weights, losses : float64 (n,); nfeat : int64 (n,);
        holdout : bool (n,). Loss of unlabeled examples is ignored. ``shown(j)``: the text of
        example j's label in the table (label sets, real labels), else ``labels[j]``; ``shown_pred(j)``:
        the text of its prediction (real predictions), else ``preds[j]``.
        """
        n = labels.shape[0]
        if n == 0:
            return
        labeled = labels > 0
        if zero_one is not None:
            self.zero_one += float(np.sum(zero_one[labeled & ~holdout]))
        # fast path: no print point inside the chunk
        w_all = np.where(holdout, 0.0, weights)
        cum = (self.wl + self.wu) + np.cumsum(w_all)
        if self.out is None or cum[-1] < self.next_dump:
            self._accumulate(labeled, weights, losses, nfeat, holdout, 0, n)
            return
        i = 0
        while i < n:
            # first index j >= i where the running weight reaches next_dump
            j = int(np.searchsorted(cum, self.next_dump, side="left"))
            if j >= n:
                self._accumulate(labeled, weights, losses, nfeat, holdout, i, n)
                break
            j = max(j, i)
            self._accumulate(labeled, weights, losses, nfeat, holdout, i, j + 1)
            label = int(labels[j])
            self._print((label if label <= 0 else self._name(label)) if shown is None else shown(j),
                        self._name(int(preds[j])) if shown_pred is None else shown_pred(j), int(nfeat[j]))
            i = j + 1

    def _accumulate(self, labeled, weights, losses, nfeat, holdout, a, b):
        if b <= a:
            return
        lab = labeled[a:b]
        w = weights[a:b]
        lo = losses[a:b]
        ho = holdout[a:b]
        tr = ~ho
        lt = lab & tr
        self.wl += float(w[lt].sum())
        self.wu += float(w[~lab & tr].sum())
        s = float(lo[lt].sum())
        self.L += s
        self.Ld += s
        self.ex += int(tr.sum())
        self.feats += int(nfeat[a:b][tr].sum())
        lh = lab & ho
        if lh.any():
            wh = float(w[lh].sum())
            Lh = float(lo[lh].sum())
            self.wh += wh
            self.Lh += Lh
            self.whd += wh
            self.Lhd += Lh
            self.whp += wh
            self.Lhp += Lh

    def _name(self, c: int):
        """Class id c as the predictions write it (an untrained model's 0 included)."""
        return c if self.names is None else self.names.name(c)

    def _print(self, label, pred, nfeat):
        if self.out is None:
            return
        self._header()
        if self.holdout_reporting:
            avg = self.Lh / self.wh if self.wh > 0 else None
            since = self.Lhd / self.whd if self.whd > 0 else None
            self.Lhd = 0.0
            self.whd = 0.0
        else:
            avg = self.L / self.wl if self.wl > 0 else None
            dw = self.wl - self.wl_old
            since = self.Ld / dw if dw > 0 else None
        self.out.write(format_row(avg, since, self.ex, self.wl + self.wu, label, pred, nfeat,
                                  self.holdout_reporting) + "\n")
        self.out.flush()
        self.Ld = 0.0
        self.wl_old = self.wl
        tot = self.wl + self.wu
        if isinstance(self.progress, int) and not isinstance(self.progress, bool):
            self.next_dump = tot + self.progress
        else:
            self.next_dump = tot * float(self.progress)

    def amend(self, progressive: float, holdout: float) -> None:
        """Add to the progressive and holdout loss sums (``Reduction.progressive_amendment``);
        lines already printed stay as they were."""
        self.L += progressive
        self.Lh += holdout
        self.Lhp += holdout

    def end_pass(self) -> float:
        """Holdout loss of the pass just ended (inf when it had no holdout example); resets it."""
        hl = self.Lhp / self.whp if self.whp > 0 else math.inf
        self.Lhp = 0.0
        self.whp = 0.0
        return hl

    @property
    def average_loss(self):
        return self.L / self.wl if self.wl > 0 else None
