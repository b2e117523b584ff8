"""ExampleBatch: a chunk of parsed, hashed examples in CSR form.

This is the only thing that flows from the parser (``parsing.py``) or the example cache into the
driver and the reductions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class ExampleBatch:
    """A CSR chunk of examples.

    Attributes
    ----------
    labels : int64, shape (n,)
        Class label, ``>= 1``; 0 means unlabeled (predict only).
    weights : float64, shape (n,)
        Importance weight ``iw >= 0`` (1 when not given).
    indptr : int64, shape (n + 1,)
        Example ``i`` owns features ``indptr[i]:indptr[i+1]``.
    indices : int64, shape (nnz,)
        Hashed feature index, already masked to ``[0, 2**bits)``; constant feature last.
    values : float32, shape (nnz,)
        Feature values (never 0: zero-valued features are dropped by the parser).
    line_numbers : int64, shape (n,)
        1-based line number of each example in ``source``.
    source : str
        Name of the input the batch came from (for ``file:line:`` messages).
    tags : list of (str or None), or None
        Per-example tag (VW ``'tag``); None when no example of the batch has one.
    skipped : list of InputError
        Lines of this chunk that were skipped under ``--skip-invalid``.
    label_ptr, label_ids : int64, shapes (n + 1,) and (m,), or None
        Label sets (multi-label input): example ``i`` carries the distinct labels
        ``label_ids[label_ptr[i]:label_ptr[i+1]]`` (1..k, possibly none). ``labels[i]`` is then
        1 when the example has a label set (even an empty one) and 0 when it is unlabeled.
    real : float64, shape (n,), or None
        Real labels (``InputConfig.real_labels``: -r binary, -r regression); ``labels[i]`` is then
        1 for a labeled example and 0 for an unlabeled one.
    """

    labels: np.ndarray
    weights: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    line_numbers: np.ndarray
    source: str = "<stdin>"
    tags: list | None = None
    skipped: list = field(default_factory=list)
    label_ptr: np.ndarray | None = None
    label_ids: np.ndarray | None = None
    real: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def label_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, ids): example i's labels are ``ids[ptr[i]:ptr[i+1]]``, ``ptr[0] = 0``; without
        label sets each example's label is a set of one (0 for an unlabeled one)."""
        if self.label_ptr is None:
            return np.arange(len(self) + 1, dtype=np.int64), self.labels
        lo = self.label_ptr[0]
        return self.label_ptr - lo, self.label_ids[lo:self.label_ptr[-1]]

    def label_owner(self) -> np.ndarray:
        """int64 (m,): the example of each entry of ``label_sets()[1]``."""
        ptr = self.label_sets()[0]
        return np.repeat(np.arange(len(self)), np.diff(ptr))

    def label_set(self, i: int) -> np.ndarray:
        """The labels of example ``i`` (multi-label batches)."""
        return self.label_ids[self.label_ptr[i]:self.label_ptr[i + 1]]

    def first_labels(self) -> np.ndarray:
        """int64 (n,): each example's label, or with label sets the first one (0 for none)."""
        if self.label_ptr is None:
            return self.labels
        p = self.label_ptr
        has = p[1:] > p[:-1]
        out = np.zeros(len(self), np.int64)
        out[has] = self.label_ids[p[:-1][has]]
        return out

    def _label_sets_kept(self, keep: np.ndarray):
        if self.label_ptr is None:
            return None, None
        counts = np.diff(self.label_ptr)
        ptr = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[keep], out=ptr[1:])
        ids = self.label_ids[np.repeat(keep, counts)] if counts.size else self.label_ids[:0]
        return ptr, ids

    @property
    def n_features(self) -> np.ndarray:
        """int64, shape (n,): feature count of each example (constant included)."""
        return np.diff(self.indptr)

    def subset(self, keep: np.ndarray) -> "ExampleBatch":
        """The examples where the boolean mask ``keep`` (shape (n,)) is True, in order."""
        keep = np.asarray(keep, dtype=bool)
        if keep.all():
            return self
        counts = np.diff(self.indptr)
        feat_keep = np.repeat(keep, counts)
        new_counts = counts[keep]
        indptr = np.zeros(new_counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(new_counts, out=indptr[1:])
        tags = None
        if self.tags is not None:
            tags = [t for t, k in zip(self.tags, keep) if k]
        lptr, lids = self._label_sets_kept(keep)
        return ExampleBatch(
            labels=self.labels[keep],
            weights=self.weights[keep],
            indptr=indptr,
            indices=self.indices[feat_keep],
            values=self.values[feat_keep],
            line_numbers=self.line_numbers[keep],
            source=self.source,
            tags=tags,
            skipped=self.skipped,
            label_ptr=lptr,
            label_ids=lids,
            real=None if self.real is None else self.real[keep],
        )

    def slice(self, a: int, b: int) -> "ExampleBatch":
        """Examples ``a:b`` in order; feature arrays are views, ``indptr`` is rebased (a copy)."""
        lo, hi = int(self.indptr[a]), int(self.indptr[b])
        lptr = lids = None
        if self.label_ptr is not None:
            la, lb = int(self.label_ptr[a]), int(self.label_ptr[b])
            lptr, lids = self.label_ptr[a:b + 1] - la, self.label_ids[la:lb]
        return ExampleBatch(
            labels=self.labels[a:b],
            weights=self.weights[a:b],
            indptr=self.indptr[a:b + 1] - lo,
            indices=self.indices[lo:hi],
            values=self.values[lo:hi],
            line_numbers=self.line_numbers[a:b],
            source=self.source,
            tags=None if self.tags is None else self.tags[a:b],
            label_ptr=lptr,
            label_ids=lids,
            real=None if self.real is None else self.real[a:b],
        )

    @staticmethod
    def empty(source: str = "<stdin>") -> "ExampleBatch":
        return ExampleBatch(
            labels=np.zeros(0, np.int64),
            weights=np.zeros(0, np.float64),
            indptr=np.zeros(1, np.int64),
            indices=np.zeros(0, np.int64),
            values=np.zeros(0, np.float32),
            line_numbers=np.zeros(0, np.int64),
            source=source,
        )
