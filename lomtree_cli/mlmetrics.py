"""Multi-label evaluation as extreme classification reports it, accumulated over batches.

Ranking metrics of the K best labels ``top`` (n, K) against each example's true set ``Y``
(CSR ``lptr``/``lids``), for every k of ``ks``:

* ``p@k``: precision at k, ``|top_k ∩ Y| / k``, averaged over examples (Bhatia et al., *The
  Extreme Classification Repository*, 2016).
* ``ndcg@k``: ``DCG@k / IDCG@k`` with ``DCG@k = sum_{j<k, top_j in Y} 1 / log2(j + 2)`` and
  ``IDCG@k = sum_{j < min(k, |Y|)} 1 / log2(j + 2)`` (Järvelin & Kekäläinen, *Cumulated
  gain-based evaluation of IR techniques*, ACM TOIS 2002; the binary-gain form of the repository
  above and of pyxclib).
* ``psp@k`` (when ``inv_propensity`` is given): propensity-scored precision of Jain, Prabhu &
  Varma, *Extreme multi-label loss functions for recommendation, tagging, ranking & other
  missing label applications* (KDD 2016): ``sum_i (1/k) sum_{l in top_k ∩ Y_i} 1/p_l``, divided,
  as pyxclib's ``psprecision`` does, by the same sum for the best possible ranking of each
  example (its k true labels of largest ``1/p_l``), so a perfect ranking scores 1. It is a ratio
  of sums over the whole stream, not a mean of per-example ratios.

Set metrics of thresholded predictions (CSR ``pptr``/``pids``), when ``add`` is given them:

* ``micro_f1``: ``2 TP / (2 TP + FP + FN)`` over all (example, label) pairs.
* ``macro_f1``: the mean over labels of ``2 TP_l / (2 TP_l + FP_l + FN_l)``.

Choices:

* An example with an empty ``Y`` counts in every mean with 0 (P@k, nDCG@k) and adds nothing to
  either side of PSP@k. An undefined ratio (no examples; no true or predicted label at all) is
  reported as 0.0; ``"examples"`` says how many examples were counted.
* ``top`` entries 0 are empty slots and never count. A ranking narrower than k reads as padded
  with 0 (P@k still divides by k); columns past ``max(ks)`` are not read.
* Macro F1 leaves out a label that never occurs, neither true nor predicted (its F1 is 0/0):
  the mean is over the labels that occur. That equals scikit-learn's ``f1_score(average=
  'macro')`` over the label columns that occur; over all of 1..k_labels scikit-learn would count
  such labels as 0 (``zero_division``), which makes the score depend on how many labels the
  model could have named rather than on what it did.
* Labels beyond the end of ``inv_propensity`` get weight 1 (propensity 1, as in plain
  precision): the array comes from training counts and says nothing of them. Size it k + 1
  (``propensities`` of a count array over all labels) so that this never happens.

Every statistic is kept as integer counts (hits per rank and label-set size, hits per label for
PSP, TP/FP/FN per label) and turned into floats only by ``result``, so cutting a stream into
batches differently gives bit-for-bit the same result. Use::

    acc = MultilabelScores(ks=(1, 3, 5), inv_propensity=1.0 / propensities(counts, n_train))
    for top, lptr, lids in batches:
        acc.add(top, lptr, lids)
    acc.result()   # {"p@1": ..., "ndcg@1": ..., "psp@1": ..., "examples": ...}
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["propensities", "MultilabelScores", "scores"]


def propensities(counts: np.ndarray, n: int, a: float = 0.55, b: float = 1.5) -> np.ndarray:
    """Propensity ``p_l`` of each label from its training count (Jain, Prabhu & Varma 2016).

    ``p_l = 1 / (1 + C (N_l + b)^-a)`` with ``C = (log N - 1)(b + 1)^a``; ``counts`` is indexed
    by label id (``N_l``; index 0 unused), ``n`` is N, the number of training examples. This is
    the reciprocal of pyxclib's ``compute_inv_propesity``. The paper's values of (a, b): 0.55,
    1.5 in general; 0.5, 0.4 for Wikipedia; 0.6, 2.6 for Amazon. The model assumes N > e (C > 0);
    for smaller N the values exceed 1. Pass ``1 / propensities(...)`` as ``inv_propensity``.
    """
    if n < 1:
        raise ValueError(f"n (training examples) must be at least 1, got {n}")
    if b <= 0:
        raise ValueError(f"b must be positive (a label never seen would get propensity 0), got {b}")
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size and counts.min() < 0:
        raise ValueError("counts must be non-negative")
    C = (math.log(n) - 1.0) * (b + 1.0) ** a
    # exp(-a log(N_l + b)) written as a power, as pyxclib does
    return 1.0 / (1.0 + C * np.power(counts + b, -a))


def _ints(x, name: str, ndim: int) -> np.ndarray:
    """``x`` as int64 of ``ndim`` dimensions; refuses floats (a silent cast would hide a bug)."""
    a = np.asarray(x)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    return a.astype(np.int64, copy=False)


def _csr(ptr, ids, n: int, pname: str, iname: str):
    """Checked CSR sets: (set sizes, row of each id, ids), the ids cut to ``ptr[0]:ptr[-1]``."""
    ptr = _ints(ptr, pname, 1)
    ids = _ints(ids, iname, 1)
    if len(ptr) != n + 1:
        raise ValueError(f"{pname} has {len(ptr)} entries for {n} examples (needs n + 1)")
    sizes = np.diff(ptr)
    if ptr[0] < 0 or ptr[-1] > len(ids) or (sizes < 0).any():
        raise ValueError(f"{pname} is not a non-decreasing offset array into {iname}")
    ids = ids[ptr[0]:ptr[-1]]
    if ids.size and ids.min() < 1:
        raise ValueError(f"{iname}: label ids are 1, 2, ... (0 is only an empty slot of top)")
    rows = np.repeat(np.arange(n, dtype=np.int64), sizes)
    return sizes, rows, ids


def _sorted_keys(rows, ids, base: int, iname: str) -> np.ndarray:
    """Sorted (example, label) keys; a repeated key is a label listed twice for one example."""
    keys = np.sort(rows * base + ids)
    if keys.size > 1 and (keys[1:] == keys[:-1]).any():
        raise ValueError(f"{iname}: a label is listed twice for one example")
    return keys


def _member(sorted_keys: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Which of the keys ``q`` are in ``sorted_keys``."""
    if sorted_keys.size == 0:
        return np.zeros(q.shape, dtype=bool)
    i = np.searchsorted(sorted_keys, q)
    np.minimum(i, sorted_keys.size - 1, out=i)
    return sorted_keys[i] == q


def _add_counts(arr: np.ndarray, labels: np.ndarray) -> int:
    """``arr[l] += 1`` for each l (repeats allowed); returns how many l fall past ``arr``'s end."""
    inside = labels < arr.size
    # unique + fancy add is O(hits log hits); bincount(minlength=arr.size) would be O(labels)
    # per batch, too slow with millions of labels and small batches
    u, c = np.unique(labels[inside], return_counts=True)
    arr[u] += c
    return int(labels.size - np.count_nonzero(inside))


class MultilabelScores:
    """Streaming P@k, nDCG@k, PSP@k and micro/macro F1 (see the module docstring).

    ``ks``: the cut-offs (distinct positive ints; the keys follow them). ``inv_propensity``:
    ``1/p_l`` indexed by label id (index 0 unused), turns on ``psp@k``. ``k_labels``: the largest
    label id; ids above it are then an error, and the per-label F1 counts are allocated once
    instead of growing with the largest id seen (the macro F1 does not depend on it).
    """

    def __init__(self, ks=(1, 3, 5), inv_propensity: np.ndarray | None = None,
                 k_labels: int | None = None):
        ks = tuple(int(k) for k in ks)
        if not ks or min(ks) < 1 or len(set(ks)) != len(ks):
            raise ValueError(f"ks must be distinct positive integers, got {ks}")
        self.ks = ks
        self._kmax = max(ks)
        if k_labels is not None and int(k_labels) < 0:
            raise ValueError(f"k_labels must be >= 0, got {k_labels}")
        self.k_labels = None if k_labels is None else int(k_labels)
        self.examples = 0
        # _hits[j, c]: examples with a true label at rank j whose min(|Y|, max ks) is c; P@k and
        # nDCG@k of any k <= max(ks) are weighted sums of it
        self._hits = np.zeros((self._kmax, self._kmax + 1), np.int64)
        self._inv = None
        if inv_propensity is not None:
            inv = np.asarray(inv_propensity, dtype=np.float64)
            if inv.ndim != 1 or not np.isfinite(inv).all() or (inv < 0).any():
                raise ValueError("inv_propensity must be a 1-D array of finite values >= 0")
            self._inv = inv
            # per k: how often each label was a hit in the top k (numerator) and in the ideal top
            # k (denominator); labels past the array are counted apart, with weight 1
            self._ps_num = np.zeros((len(ks), inv.size), np.int64)
            self._ps_den = np.zeros((len(ks), inv.size), np.int64)
            self._ps_num_out = [0] * len(ks)
            self._ps_den_out = [0] * len(ks)
        # None until the first add says whether thresholded predictions come with the batches
        self._thresholded = None
        size = 1 if self.k_labels is None else self.k_labels + 1
        self._tp = np.zeros(size, np.int64)
        self._fp = np.zeros(size, np.int64)
        self._fn = np.zeros(size, np.int64)

    def add(self, top, lptr, lids, pptr=None, pids=None) -> None:
        """Accumulate one batch: ranking ``top`` (n, K), true sets ``lptr``/``lids``, optionally
        thresholded predictions ``pptr``/``pids`` (give them to every ``add`` or to none).

        Everything is checked before anything is counted, so a refused batch changes nothing.
        """
        top = _ints(top, "top", 2)
        n, width = top.shape
        kmax = self._kmax
        t = np.zeros((n, kmax), np.int64)
        t[:, :min(width, kmax)] = top[:, :kmax]
        if t.size and t.min() < 0:
            raise ValueError("top: label ids are >= 0 (0 = empty slot)")
        s = np.sort(t, axis=1)
        if ((s[:, 1:] == s[:, :-1]) & (s[:, 1:] > 0)).any():
            raise ValueError("top: a label appears twice in one ranking")
        sizes, rows, lids = _csr(lptr, lids, n, "lptr", "lids")
        if (pptr is None) != (pids is None):
            raise ValueError("give both pptr and pids, or neither")
        thresholded = pptr is not None
        if self._thresholded is not None and thresholded != self._thresholded:
            raise ValueError("thresholded predictions must come with every batch or with none")
        if thresholded:
            _, prows, pids = _csr(pptr, pids, n, "pptr", "pids")
        else:
            prows = pids = np.zeros(0, np.int64)
        maxlab = max((int(x.max()) for x in (t, lids, pids) if x.size), default=0)
        if self.k_labels is not None and maxlab > self.k_labels:
            raise ValueError(f"label id {maxlab} is above k_labels = {self.k_labels}")
        base = maxlab + 1
        # (example, label) pairs as one int64 key: membership is a sorted search, not a loop
        if n * base >= 2 ** 63:
            raise ValueError("batch too large for int64 (example, label) keys; split it")
        tkeys = _sorted_keys(rows, lids, base, "lids")

        hit = np.zeros((n, kmax), dtype=bool)
        filled = t > 0
        r = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], t.shape)
        hit[filled] = _member(tkeys, r[filled] * base + t[filled])

        ii, jj = np.nonzero(hit)
        c = np.minimum(sizes, kmax)
        hits_inc = np.bincount(jj * (kmax + 1) + c[ii], minlength=kmax * (kmax + 1))
        hits_inc = hits_inc.reshape(kmax, kmax + 1)

        if self._inv is not None:
            num = [t[:, :k][hit[:, :k]] for k in self.ks]
            # the ideal ranking: each example's true labels by decreasing 1/p (stable, so ties
            # keep the order of lids, which does not depend on the batching)
            w = np.ones(lids.size)
            inside = lids < self._inv.size
            w[inside] = self._inv[lids[inside]]
            order = np.lexsort((-w, rows))
            starts = np.cumsum(sizes) - sizes
            rank = np.arange(lids.size) - starts[rows[order]]
            ranked = lids[order]
            den = [ranked[rank < k] for k in self.ks]

        if thresholded:
            pkeys = _sorted_keys(prows, pids, base, "pids")
            pred_true = _member(tkeys, prows * base + pids)
            true_pred = _member(pkeys, rows * base + lids)
            tp, fp, fn = pids[pred_true], pids[~pred_true], lids[~true_pred]

        # all checks passed: count
        self.examples += n
        self._hits += hits_inc
        if self._inv is not None:
            for i in range(len(self.ks)):
                self._ps_num_out[i] += _add_counts(self._ps_num[i], num[i])
                self._ps_den_out[i] += _add_counts(self._ps_den[i], den[i])
        self._thresholded = thresholded
        if thresholded:
            if base > self._tp.size:  # only without k_labels: grow to the largest id seen
                grow = base - self._tp.size
                self._tp, self._fp, self._fn = (np.concatenate([a, np.zeros(grow, np.int64)])
                                                for a in (self._tp, self._fp, self._fn))
            _add_counts(self._tp, tp)
            _add_counts(self._fp, fp)
            _add_counts(self._fn, fn)

    def merge(self, other: "MultilabelScores") -> None:
        """Add the counts of ``other`` (made with the same ``ks``, propensities and ``k_labels``):
        the result is that of one accumulator given both's batches (every count is an integer
        sum). Dask's prediction ranges are scored apart and merged."""
        if other.ks != self.ks or (other._inv is None) != (self._inv is None) or other.k_labels != self.k_labels:
            raise ValueError("merge: the accumulators were made with different settings")
        if other._thresholded is not None:
            if self._thresholded is not None and other._thresholded != self._thresholded:
                raise ValueError("thresholded predictions must come with every batch or with none")
            self._thresholded = other._thresholded
        self.examples += other.examples
        self._hits += other._hits
        if self._inv is not None:
            if not np.array_equal(self._inv, other._inv):
                raise ValueError("merge: the accumulators were made with different propensities")
            self._ps_num += other._ps_num
            self._ps_den += other._ps_den
            self._ps_num_out = [a + b for a, b in zip(self._ps_num_out, other._ps_num_out)]
            self._ps_den_out = [a + b for a, b in zip(self._ps_den_out, other._ps_den_out)]
        size = max(self._tp.size, other._tp.size)
        for name in ("_tp", "_fp", "_fn"):
            mine, theirs = getattr(self, name), getattr(other, name)
            out = np.zeros(size, np.int64)
            out[:mine.size] += mine
            out[:theirs.size] += theirs
            setattr(self, name, out)

    def result(self) -> dict:
        """The metrics so far: fractions in [0, 1] as floats, and ``"examples"`` (an int)."""
        n = self.examples
        kmax = self._kmax
        disc = 1.0 / np.log2(np.arange(kmax) + 2.0)
        idcg = np.concatenate(([0.0], np.cumsum(disc)))  # idcg[c]: c true labels ranked first
        sizes = np.arange(kmax + 1)
        out = {}
        for k in self.ks:
            out[f"p@{k}"] = float(self._hits[:k].sum()) / (k * n) if n else 0.0
        for k in self.ks:
            # column c = 0 (no true label) holds no hits; skip it, its IDCG is 0
            gain = self._hits[:k, 1:] * disc[:k, None] / idcg[np.minimum(sizes[1:], k)][None, :]
            out[f"ndcg@{k}"] = float(gain.sum()) / n if n else 0.0
        if self._inv is not None:
            for i, k in enumerate(self.ks):
                # the 1/k of both sums cancels
                num = float(self._inv @ self._ps_num[i]) + self._ps_num_out[i]
                den = float(self._inv @ self._ps_den[i]) + self._ps_den_out[i]
                out[f"psp@{k}"] = num / den if den > 0 else 0.0
        if self._thresholded:
            tp, fp, fn = int(self._tp.sum()), int(self._fp.sum()), int(self._fn.sum())
            d = 2 * tp + fp + fn
            out["micro_f1"] = 2 * tp / d if d else 0.0
            dl = 2 * self._tp + self._fp + self._fn
            occurs = dl > 0  # labels never true nor predicted are left out of the mean
            out["macro_f1"] = float(np.mean(2 * self._tp[occurs] / dl[occurs])) if occurs.any() else 0.0
        out["examples"] = n
        return out


def scores(top, lptr, lids, ks=(1, 3, 5), inv_propensity=None, pptr=None, pids=None,
           k_labels=None) -> dict:
    """The metrics of one batch: ``MultilabelScores(...).add(...)`` then ``result()``."""
    acc = MultilabelScores(ks, inv_propensity=inv_propensity, k_labels=k_labels)
    acc.add(top, lptr, lids, pptr, pids)
    return acc.result()
