"""Small shared helpers for tests: tiny generated datasets and batch builders."""

from __future__ import annotations

import numpy as np

from lomtree_cli.batch import ExampleBatch


def separable_lines(k: int, n: int, seed: int = 0, noise_feats: int = 0, vocab: int = 50,
                    noise_value: str = "") -> list[str]:
    """VW lines where class c always has the feature `c<c>` (linearly separable), and
    ``noise_feats`` features drawn from ``vocab`` names (value ``noise_value``, default 1). With a
    large vocabulary and a small value: regularisation tests (``--l1`` zeroes the noise weights)."""
    rng = np.random.default_rng(seed)
    val = f":{noise_value}" if noise_value else ""
    out = []
    for _ in range(n):
        c = int(rng.integers(1, k + 1))
        extra = " ".join(f"n{int(rng.integers(0, vocab))}{val}" for _ in range(noise_feats))
        out.append(f"{c} | c{c} {extra}".rstrip())
    return out


def make_batch(rows, labels, weights=None, bits=18) -> ExampleBatch:
    """Batch from rows of (index, value) pairs (indices masked to bits)."""
    mask = (1 << bits) - 1
    indptr = np.zeros(len(rows) + 1, np.int64)
    idx, val = [], []
    for i, r in enumerate(rows):
        for h, v in r:
            idx.append(h & mask)
            val.append(v)
        indptr[i + 1] = len(idx)
    n = len(rows)
    return ExampleBatch(
        labels=np.asarray(labels, np.int64),
        weights=np.ones(n) if weights is None else np.asarray(weights, np.float64),
        indptr=indptr,
        indices=np.asarray(idx, np.int64),
        values=np.asarray(val, np.float32),
        line_numbers=np.arange(1, n + 1, dtype=np.int64),
    )

