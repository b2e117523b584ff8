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
entropy) to the leaves'. Which counts:

* ``lomtree``: the class records of every node (examples of each label that reached it);
* ``filter``/``rtree``: leaves are labels; a label's count is the first match of its leaf (every
  trained example of the label plays it), a node's counts are those of the labels below it;
* ``mtree``: leaves are labels; the trained examples of each label (``label_n``), grouped by the
  nodes of the current tree;
* ``cpt``, ``plt``, ``oaa``, ``table``: no per-label counts stored (or no tree): not reported.
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


def _levels_of_leaf_tree(parent: np.ndarray, leaf_count: dict, depth: np.ndarray) -> list:
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


def label_levels(reduction):
    """(per-level list of count arrays, list of the leaves' count arrays), or None when the
    reduction stores no per-label counts."""
    name = reduction.name
    if name == "lomtree":
        st = reduction.state()
        parent = st["parent"].astype(np.int64)
        isint = st["internal"] == 1
        depth = depths_from_parents(parent)
        node, _, cnt, _, _ = reduction.records()
        per_node: dict = {}
        for v, c in zip(node.tolist(), cnt.tolist()):
            per_node.setdefault(v, []).append(c)
        arr = {v: np.array(c, dtype=np.float64) for v, c in per_node.items()}
        empty = np.zeros(0)
        leaves = np.flatnonzero(~isint)
        levels = []
        for d in range(int(depth[leaves].max()) + 1 if leaves.size else 0):
            cut = np.flatnonzero((depth == d) | (~isint & (depth < d)))
            levels.append([arr.get(int(v), empty) for v in cut])
        return levels, [arr.get(int(v), empty) for v in leaves]
    if name in ("filter", "rtree"):
        st = reduction.state()
        parent, left = st["parent"].astype(np.int64), st["left"].astype(np.int64)
        counts = st["node_counts"]
        k = reduction.k
        if k < 2:
            return None
        leaf_count = {}
        for leaf in range(k):
            a = int(parent[leaf])
            leaf_count[leaf] = float(counts[a - k, 0 if left[a] == leaf else 1])
        depth = depths_from_parents(parent)
        levels = _levels_of_leaf_tree(parent, leaf_count, depth)
        return levels, [np.array([c]) for c in leaf_count.values()]
    if name == "mtree":
        levels = []
        n = reduction.label_n[1:]
        for d in range(reduction.L + 1):
            if d == 0:
                levels.append([n])
                continue
            # a label whose leaf is above depth d (a Huffman tree) is a cell of its own
            node = np.where(reduction.path_child[1:, d] >= 0, reduction.path_node[1:, d],
                            -1 - np.arange(reduction.k)) if d < reduction.L else np.arange(reduction.k)
            order = np.argsort(node, kind="stable")
            cuts = np.flatnonzero(np.diff(node[order])) + 1
            levels.append(np.split(n[order], cuts))
        return levels, [np.array([c]) for c in n]
    return None


def report(reduction, C: float = 1.0):
    """The ``entropy`` entry of ``lomtree inspect`` (None when not available)."""
    got = label_levels(reduction)
    if got is None:
        return None
    levels, leaves = got
    r6 = lambda d: {k: round(v, 6) for k, v in d.items()}  # noqa: E731
    return {"C": C, "tree": r6(criteria(leaves, C)),
            "levels": [dict(depth=d, cells=len(g), **r6(criteria(g, C))) for d, g in enumerate(levels)],
            "examples": float(sum(float(np.sum(g)) for g in leaves))}


__all__ = ["criteria", "label_levels", "report"]
