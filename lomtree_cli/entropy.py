"""The three entropy criteria of a tree's leaves (``lomtree inspect``).

Choromanska & Jain, *Extreme Multiclass Classification Criteria* (Computation 2019, 7(1), 16)
show that the LOMtree objective is a surrogate for three criteria of the partition a tree makes,
each weighted by the probability ``w_l`` that an example reaches leaf ``l``; with ``pi_{l,i}`` the
fraction of leaf ``l``'s examples that have label ``i``:

* Shannon entropy   ``G_e = sum_l w_l sum_i pi_{l,i} ln(1 / pi_{l,i})``
* Gini entropy      ``G_g = sum_l w_l sum_i pi_{l,i} (1 - pi_{l,i})``
* modified Gini     ``G_m = sum_l w_l sum_i sqrt(pi_{l,i} (C - pi_{l,i}))`` (constant ``C``,
  ``lomtree inspect --gini-c``, default 1: then a pure leaf scores 0 as with the other two)

All three are computed from the label statistics the model stores (counts of trained examples),
for the whole tree (its leaves) and per level ``d`` (the tree cut at depth d: its nodes of depth
d and its leaves above d), so the numbers fall from the root's (the label distribution's own
entropy) to the leaves'. Which counts: each reduction's ``label_levels()`` says (LOMtree: the
class records of every node; Filter tree, Rtree and mtree: leaves are labels, counted by the
trained examples of each label); a reduction without per-label counts (or without a tree)
returns None and gets no report.
"""

from __future__ import annotations

import numpy as np


def criteria(groups, C: float = 1.0) -> dict:
    """The three criteria of a partition: ``groups`` = one array of label counts per cell."""
    total = float(sum(float(np.sum(g)) for g in groups))
    out = {"shannon": 0.0, "gini": 0.0, "modified_gini": 0.0}
    if total <= 0:
        return out
    for g in groups:
        g = np.asarray(g, dtype=np.float64)
        g = g[g > 0]
        n = float(g.sum())
        if n <= 0:
            continue
        w = n / total
        pi = g / n
        out["shannon"] += w * float(-(pi * np.log(pi)).sum())
        out["gini"] += w * float((pi * (1.0 - pi)).sum())
        out["modified_gini"] += w * float(np.sqrt(pi * (C - pi)).sum())
    return out


def levels_of_leaf_tree(parent: np.ndarray, leaf_count: dict, depth: np.ndarray) -> list:
    """Per level d: the count arrays of the cut at depth d of a tree whose leaves are single
    labels (``leaf_count``: leaf node -> count)."""
    maxd = int(max((depth[v] for v in leaf_count), default=0))
    levels = []
    for d in range(maxd + 1):
        cells: dict = {}
        for v, c in leaf_count.items():
            a = v
            while depth[a] > d:
                a = parent[a]
            cells.setdefault(int(a), []).append(c)
        levels.append([np.array(x, dtype=np.float64) for x in cells.values()])
    return levels


def depths_from_parents(parent: np.ndarray) -> np.ndarray:
    """Depth of every node (root 0) from parent links in any id order (vectorised pointer
    jumping); LOMtree's swaps leave parents with larger or smaller ids than their children."""
    n = parent.shape[0]
    depth = np.zeros(n, dtype=np.int64)
    anc = parent.copy()
    while True:
        act = anc >= 0
        if not act.any():
            return depth
        depth[act] += 1
        anc[act] = parent[anc[act]]


def report(reduction, C: float = 1.0):
    """The ``entropy`` entry of ``lomtree inspect`` (None when not available)."""
    got = reduction.label_levels()
    if got is None:
        return None
    levels, leaves = got
    r6 = lambda d: {k: round(v, 6) for k, v in d.items()}  # noqa: E731
    return {"C": C, "tree": r6(criteria(leaves, C)),
            "levels": [dict(depth=d, cells=len(g), **r6(criteria(g, C))) for d, g in enumerate(levels)],
            "examples": float(sum(float(np.sum(g)) for g in leaves))}


__all__ = ["criteria", "depths_from_parents", "levels_of_leaf_tree", "report"]
