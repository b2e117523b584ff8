"""Random balanced tree (`-r rtree -k K`), the LOMtree paper's baseline (docs/ALGORITHMS.md §3.3).

"A balanced random tree of logarithmic depth" (Choromanska & Langford, NIPS 2015). VW has no
implementation; this definition is ours (open question Q5 of the spec).

Structure
---------
The Filter tree's bracket (``kernels.trees.build_bracket``) over leaf *positions* ``0..k-1``;
position ``i`` holds label ``perm[i]``, where ``perm`` is a permutation of ``1..k`` drawn with
SplitMix64 seeded by ``--seed`` and Fisher–Yates (``kernels.trees.fisher_yates_permutation``;
portable, not numpy's RNG, so the same seed gives the same tree everywhere). ``pos`` is the
inverse. ``W = max(1, k-1)`` regressors; node ``a`` uses regressor ``a - k``.

Predict (top-down)
    from the root go right iff ``clip(f_a(x)) > 0`` (ties left); return ``perm[leaf position]``.
Train (top-down, no filtering)
    every internal node on the root → ``pos[y]`` path, from the root down, learns with target
    ``-1`` if the leaf lies in its left subtree else ``+1``, from its pre-update clipped score.

Choices
-------
- Top-down order (matters only when slots of different regressors collide in the hash table).
- The permutation is stored in the model (``perm``, int32, shape (k,)) and is authoritative on
  load; it must be a permutation of ``1..k``. The tree arrays must equal the bracket for ``k``.
  ``--seed`` only matters when a model is created.
- Like the Filter tree we count trained examples per node by target side (``node_counts``);
  ``inspect`` reports the per-level fraction routed right (the balance of the random split) and
  the first entries of the permutation.
- "Balanced" means depth ``<= ceil(log2 k)``, not equal leaf counts: with byes the root of the
  bracket splits ``k = 105`` as 64 | 41 and ``k = 5001`` as 4096 | 905 leaves, so the root's
  fraction routed right is about ``905/5001`` on uniform labels. We keep VW's bracket so both
  trees share one structure and one test vector (§9).
- ``k = 1``: predicts 1, trains nothing.

Cost per example: predict ``depth`` scores; train ``depth`` (score, update) pairs, the score
skipped for nodes the prediction already scored (exact: ``K.slot_layout``).
"""

from __future__ import annotations

import numpy as np

from ..kernels import trees as TR
from .filter_tree import BracketTree

#: how many permutation entries ``inspect`` shows
N_PERM_SHOWN = 20


class RandomTree(BracketTree):
    name = "rtree"
    parallel_predict = True

    def _initial_perm(self) -> np.ndarray:
        return TR.permutation_from_seed(self.k, int(self.config.seed))

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        path = np.zeros(self.depth + 2, dtype=np.int32)
        d = self.depth + 1
        TR.rtree_process(self.learner.arrays, self.tree, batch.indptr, batch.indices, batch.values,
                         batch.labels, batch.weights, np.ascontiguousarray(train, dtype=np.bool_),
                         np.int64(self.k), preds, path, np.zeros(d, dtype=np.int64), np.zeros(d, dtype=np.float64),
                         np.zeros(d, dtype=np.int64), self.shortcuts)
        return preds, None

    def state(self) -> dict:
        out = super().state()
        out["perm"] = self.tree.perm.copy()
        return out

    def load_state(self, arrays: dict, meta: dict) -> None:
        super().load_state(arrays, meta)
        k = self.k
        perm = arrays.get("perm")
        if perm is None or perm.dtype != np.int32 or perm.shape != (k,):
            raise ValueError("rtree: missing or malformed permutation")
        if not np.array_equal(np.sort(perm), np.arange(1, k + 1, dtype=np.int32)):
            raise ValueError(f"rtree: stored permutation is not a permutation of 1..{k}")
        self.tree.perm[:] = perm
        self.tree.pos[perm - 1] = np.arange(k, dtype=np.int32)

    def inspect(self) -> dict:
        info = super().inspect()
        info["seed"] = int(self.config.seed)
        info["permutation_first"] = [int(v) for v in self.tree.perm[:N_PERM_SHOWN]]
        return info
