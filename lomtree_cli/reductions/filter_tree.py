"""Filter tree (`-r filter -k K`): VW's ``--ect K`` with no errors (docs/ALGORITHMS.md §3.2).

A single-elimination tournament over the labels 1..k (Beygelzimer, Langford, Ravikumar,
*Error-Correcting Tournaments*, ALT 2009; *Multiclass Classification with Filter Trees*, 2007).

Structure
---------
VW's bracket (``kernels.trees.build_bracket``): leaves ``0..k-1`` (leaf ``i`` = label ``i+1``),
internal nodes ``k..2k-2`` created round by round pairing neighbours; an odd node out gets a bye
into the end of the next round. Works for any ``k`` (not only powers of two); depth
``<= ceil(log2 k)``; ``W = max(1, k-1)`` regressors, node ``a`` uses regressor ``a - k``.
The tree is a pure function of ``k``; it is still saved (``parent``, ``left``, ``right``) and on
load must equal the tree rebuilt from ``k``.

Predict (top-down)
    from the root, go right iff ``clip(f_a(x)) > 0`` (ties go left); the leaf reached is the label.
Train (bottom-up, filtered)
    ``c = leaf(y)``; while ``a = parent(c)`` exists: target ``z = -1`` if ``c`` is ``a``'s left
    child else ``+1``; ``learn(a, x, z, iw, pre-update clip(f_a))``; re-score; if the
    *post-update* raw score ``s'`` has ``s' * z > 0`` the label won the match, ``c = a`` and go on,
    otherwise stop. So a node only ever sees examples whose label survived every lower match.

Choices (documented in docs/ALGORITHMS.md §3.2 unless noted)
-------------------------------------------------------
- VW's online rule: "won" is decided with the post-update score (VW ect.cc does the same), not
  the paper's batch level-by-level training.
- Class boundary 0 (squared/hinge/quantile predictions live in [-1, 1]; logistic in [-50, 50]).
- A NaN post-update score counts as a loss (training stops there).
- ``k = 1``: one (unused) regressor, predicts 1, trains nothing; the SGD clock still advances
  once per trained example, as for every reduction.
- Ours: per internal node we count the trained examples by target side
  (``node_counts[a-k] = [#left targets, #right targets]``, int64). It costs nothing, is saved
  with the model so continuing is exact, and ``inspect`` reports, per level, how many examples
  reached it (the filtering) and the fraction routed right.

Cost per example: predict ``depth`` scores; train ``<= depth`` x (score, update, re-score), where
the score is skipped for nodes the prediction already scored and the re-score is summed in the
update's weight pass (both exact: ``K.slot_layout``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels import trees as TR
from .base import Reduction


class TreeArrays(NamedTuple):
    """A bracket and its statistics.

    parent, left, right : int32, shape (2k-1,); -1 = none
    counts : int64, shape (max(1, k-1), 2): trained examples per internal node by target side
    perm : int32, shape (k,): label at each leaf position (identity for the Filter tree)
    pos : int32, shape (k,): leaf position of label ``y`` at ``pos[y-1]`` (inverse of perm)
    """

    parent: np.ndarray
    left: np.ndarray
    right: np.ndarray
    counts: np.ndarray
    perm: np.ndarray
    pos: np.ndarray


def level_stats(tree: TreeArrays, k: int) -> list:
    """Per level (root = 0): internal nodes, trained examples, fraction routed right."""
    if k < 2:
        return []
    depth = TR.node_depths(tree.parent)
    out = []
    for lev in range(int(depth[k:].max()) + 1):
        ids = np.flatnonzero(depth[k:] == lev)
        c = tree.counts[ids]
        n = int(c.sum())
        out.append({"level": lev, "internal_nodes": int(ids.size), "examples": n,
                    "fraction_right": (float(c[:, 1].sum()) / n) if n else None})
    return out


class BracketTree(Reduction):
    """Shared part of the Filter tree and the Rtree: the bracket, its state and inspection."""

    #: reuse the prediction's scores and fuse re-scores into updates (bit-identical either way;
    #: tests switch it off to compare against scoring afresh)
    shortcuts = True

    @staticmethod
    def n_models_for(rcfg) -> int:
        return max(1, int(rcfg.k) - 1)

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        k = self.k
        parent, left, right = TR.build_bracket(np.int64(k))
        counts = np.zeros((max(1, k - 1), 2), dtype=np.int64)
        perm = self._initial_perm()
        pos = np.empty(k, dtype=np.int32)
        pos[perm - 1] = np.arange(k, dtype=np.int32)
        self.tree = TreeArrays(parent, left, right, counts, perm, pos)
        self._depth = int(TR.node_depths(parent).max())

    def _initial_perm(self) -> np.ndarray:
        return np.arange(1, self.k + 1, dtype=np.int32)

    @property
    def depth(self) -> int:
        """Longest root-to-leaf path (0 for k = 1); ``<= ceil(log2 k)``."""
        return self._depth

    def state(self) -> dict:
        t = self.tree
        return {"parent": t.parent.copy(), "left": t.left.copy(), "right": t.right.copy(),
                "node_counts": t.counts.copy()}

    def load_state(self, arrays: dict, meta: dict) -> None:
        t = self.tree
        for name, ref in (("parent", t.parent), ("left", t.left), ("right", t.right)):
            a = arrays.get(name)
            if a is None:
                raise ValueError(f"{self.name}: missing tree array {name!r}")
            if a.dtype != np.int32 or a.shape != ref.shape or not np.array_equal(a, ref):
                raise ValueError(f"{self.name}: stored tree array {name!r} does not match the bracket for k={self.k}")
        c = arrays.get("node_counts")
        if c is None or c.dtype != np.int64 or c.shape != t.counts.shape or (c.size and c.min() < 0):
            raise ValueError(f"{self.name}: bad node_counts array")
        t.counts[:] = c

    def label_levels(self):
        """Leaves are labels; a label's count is the first match of its leaf (every trained
        example of the label plays it), a node's counts are those of the labels below it."""
        from ..entropy import depths_from_parents, levels_of_leaf_tree

        st = self.state()
        parent, left = st["parent"].astype(np.int64), st["left"].astype(np.int64)
        counts = st["node_counts"]
        k = self.k
        if k < 2:
            return None
        leaf_count = {}
        for leaf in range(k):
            a = int(parent[leaf])
            leaf_count[leaf] = float(counts[a - k, 0 if left[a] == leaf else 1])
        levels = levels_of_leaf_tree(parent, leaf_count, depths_from_parents(parent))
        return levels, [np.array([c]) for c in leaf_count.values()]

    def inspect(self) -> dict:
        k = self.k
        info = super().inspect()
        info.update({"depth": self.depth, "internal_nodes": max(0, k - 1), "leaves": k,
                     "trained_examples_at_root": int(self.tree.counts[k - 2].sum()) if k > 1 else 0,
                     "levels": level_stats(self.tree, k)})
        return info


class FilterTree(BracketTree):
    name = "filter"
    parallel_predict = True

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        d = self.depth + 1
        TR.filter_process(self.learner.arrays, self.tree, batch.indptr, batch.indices, batch.values,
                          batch.labels, batch.weights, np.ascontiguousarray(train, dtype=np.bool_),
                          np.int64(self.k), preds, np.zeros(d, dtype=np.int64), np.zeros(d, dtype=np.float64),
                          np.zeros(d, dtype=np.int64), self.shortcuts)
        return preds, None
