"""The order of the cached passes 2..N (``--shuffle-passes``).

An online learner that reads a stream sorted by anything its labels follow (names sorted, labels
the name's tokens) ends every pass leaning toward the last labels; the first pass of a label tree
is already replayed shuffled (``--shuffle-buffer``), the later ones read the example cache. Here
they read it in a seeded random order, as scikit-learn's SGD shuffles each epoch: the cache's
blocks are gathered into windows of at most ``WINDOW_ENTRIES`` feature entries (the whole cache
when it fits: memory stays bounded) and each window's examples are permuted by
``default_rng([seed, pass, window])``, so a run is repeatable and every pass has its own order.
Each example is read exactly once per pass, with its weight, tag, labels and line number.
"""

from __future__ import annotations

import numpy as np

from .batch import ExampleBatch

#: feature entries (12 bytes each, plus the examples' own arrays) gathered before a window is
#: permuted: about 200 MB, a whole cache of some 10^6 short examples
WINDOW_ENTRIES = 1 << 24


def concat(batches: list[ExampleBatch]) -> ExampleBatch:
    """The examples of ``batches`` in order, as one batch (``source``: the first's)."""
    if len(batches) == 1:
        return batches[0]

    def rebased_ptr(ptrs):
        out = [np.zeros(1, np.int64)]
        base = 0
        for p in ptrs:
            out.append(p[1:] - p[0] + base)
            base += int(p[-1] - p[0])
        return np.concatenate(out)

    def feats(b, name):
        return getattr(b, name)[int(b.indptr[0]):int(b.indptr[-1])]

    sets = batches[0].label_ptr is not None
    tags = None
    if any(b.tags is not None for b in batches):
        tags = [t for b in batches for t in (b.tags if b.tags is not None else [None] * len(b))]
    real = None
    if batches[0].real is not None:
        real = np.concatenate([b.real for b in batches])
    return ExampleBatch(
        labels=np.concatenate([b.labels for b in batches]),
        weights=np.concatenate([b.weights for b in batches]),
        indptr=rebased_ptr([b.indptr for b in batches]),
        indices=np.concatenate([feats(b, "indices") for b in batches]),
        values=np.concatenate([feats(b, "values") for b in batches]),
        line_numbers=np.concatenate([b.line_numbers for b in batches]),
        source=batches[0].source,
        tags=tags,
        label_ptr=rebased_ptr([b.label_ptr for b in batches]) if sets else None,
        label_ids=np.concatenate([b.label_ids[int(b.label_ptr[0]):int(b.label_ptr[-1])] for b in batches])
        if sets else None,
        real=real,
    )


def take(batch: ExampleBatch, order: np.ndarray) -> ExampleBatch:
    """The examples of ``batch`` in the order ``order`` (a permutation of ``range(len(batch))``)."""
    order = np.asarray(order, dtype=np.int64)

    def gather(ptr, arrays):
        base = int(ptr[0])
        ptr = ptr - base
        counts = np.diff(ptr)[order]
        new = np.zeros(order.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=new[1:])
        pos = np.repeat(ptr[:-1][order] - new[:-1], counts) + np.arange(int(new[-1]), dtype=np.int64)
        return new, [a[base:][pos] for a in arrays]

    indptr, (indices, values) = gather(batch.indptr, (batch.indices, batch.values))
    lptr = lids = None
    if batch.label_ptr is not None:
        lptr, (lids,) = gather(batch.label_ptr, (batch.label_ids,))
    return ExampleBatch(labels=batch.labels[order], weights=batch.weights[order], indptr=indptr, indices=indices,
                        values=values, line_numbers=batch.line_numbers[order], source=batch.source,
                        tags=None if batch.tags is None else [batch.tags[i] for i in order],
                        label_ptr=lptr, label_ids=lids,
                        real=None if batch.real is None else batch.real[order])


def shuffled(batches, seed: int, pass_index: int, window: int = WINDOW_ENTRIES, out_size: int = 0):
    """Yield the examples of ``batches`` in a random order seeded by (``seed``, ``pass_index``):
    windows of whole batches holding at most ``window`` feature entries (at least one batch),
    each permuted, given back in batches of ``out_size`` examples (0: the input's largest batch)."""
    held: list[ExampleBatch] = []
    entries = 0
    largest = 0
    w = 0

    def flush():
        nonlocal held, entries, w
        whole = concat(held)
        held, entries = [], 0
        rng = np.random.default_rng([int(seed) & (2**64 - 1), int(pass_index), w])
        w += 1
        mixed = take(whole, rng.permutation(len(whole)))
        step = max(1, out_size or largest)
        for a in range(0, len(mixed), step):
            yield mixed.slice(a, min(a + step, len(mixed)))

    for b in batches:
        if len(b) == 0:
            continue
        nnz = int(b.indptr[-1] - b.indptr[0])
        if held and entries + nnz > window:
            yield from flush()
        held.append(b)
        entries += nnz
        largest = max(largest, len(b))
    if held:
        yield from flush()
