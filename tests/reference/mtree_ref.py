"""Slow pure-Python/numpy reference of ``-r mtree`` (reductions/mtree.py, kernels/mtree_kernels.py).

Written from the algorithm's description, not from the kernels: paths are tuples of digits (of
any length: a Huffman tree's leaves lie at several depths), nodes are found by their path prefix
in a dict, the softmax and its gradient are numpy expressions in float64, the label assignment is
a plain sort of (score, label, child) tuples, the Huffman tree a re-sorted list, prediction is an
exhaustive search over all labels (exact; the kernels' beam must be wide enough to be exact too).
The root (prefix ``()``) adds the linear scores ``sum_j v_j U[i_j]`` when U is given.
"""

from __future__ import annotations

import math

import numpy as np


def hidden(E, idx, val):
    s = float(np.sum(np.abs(val)))
    h = np.zeros(E.shape[1])
    for i, v in zip(idx, val):
        h += float(v) * E[i].astype(np.float64)
    return (h / s if s > 0 else h), s


def root_scores(U, idx, val):
    """The root's linear scores sum_j v_j U[i_j] (None without U)."""
    if U is None:
        return None
    return sum((float(v) * U[i].astype(np.float64) for i, v in zip(idx, val)), np.zeros(U.shape[1]))


def node_probs(Wn, kids, h, zr=None):
    """P(child j) over the non-empty slots ``kids`` (dict slot -> anything); ``zr``: linear scores
    added (the root)."""
    slots = sorted(kids)
    z = np.array([Wn[j].astype(np.float64) @ h + (0.0 if zr is None else zr[j]) for j in slots])
    z = z - z.max()
    p = np.exp(z) / np.exp(z).sum()
    return dict(zip(slots, p))


class Tree:
    """The tree of a digits table: prefix tuple -> {slot: child prefix or ('leaf', label)}."""

    def __init__(self, digits):
        self.digits = [tuple(int(x) for x in row if x >= 0) for row in digits]
        self.kids = {}
        for y in range(1, len(self.digits)):
            path = self.digits[y]
            for d in range(len(path)):
                pre = path[:d]
                tgt = ("leaf", y) if d == len(path) - 1 else path[:d + 1]
                self.kids.setdefault(pre, {})[path[d]] = tgt


def loss(E, W, rows, tree, idx, val, y, U=None):
    """-log P(y|x) in float64 (rows: prefix -> row of W)."""
    h, _ = hidden(E, idx, val)
    zr = root_scores(U, idx, val)
    path = tree.digits[y]
    out = 0.0
    for d in range(len(path)):
        pre = path[:d]
        p = node_probs(W[rows[pre]], tree.kids[pre], h, zr if d == 0 else None)
        out -= math.log(p[path[d]])
    return out


def all_label_probs(E, W, rows, tree, idx, val, U=None):
    h, _ = hidden(E, idx, val)
    zr = root_scores(U, idx, val)
    out = {}
    for y in range(1, len(tree.digits)):
        path = tree.digits[y]
        lp = 0.0
        for d in range(len(path)):
            pre = path[:d]
            lp += math.log(node_probs(W[rows[pre]], tree.kids[pre], h, zr if d == 0 else None)[path[d]])
        out[y] = math.exp(lp)
    return out


def _regularized(old, delta, rate, l1, l2):
    """``old - delta`` after l2 shrinking of ``old`` by ``1 - l2 rate`` (not below 0) and l1
    truncation of the result toward 0 by ``l1 rate`` (--l1/--l2; float64 arrays)."""
    if l1 == 0 and l2 == 0:
        return old - delta
    x = old * max(0.0, 1.0 - l2 * rate) - delta
    return np.sign(x) * np.maximum(np.abs(x) - l1 * rate, 0.0)


def sgd_step(E, W, rows, tree, idx, val, y, lr, stats=None, l1=0.0, l2=0.0, U=None, lin=0.0):
    """One SGD step (in place, float32 arrays updated from float64 gradients at the old point);
    every parameter it moves regularised at rate ``lr`` with ``l1``, ``l2``; the root's linear
    weights U (if given) at ``lin * lr``."""
    h, s = hidden(E, idx, val)
    zr = root_scores(U, idx, val)
    path = tree.digits[y]
    gh = np.zeros_like(h)
    dW = []
    dU = []
    for d in range(len(path)):
        pre = path[:d]
        r = rows[pre]
        p = node_probs(W[r], tree.kids[pre], h, zr if d == 0 else None)
        if stats is not None:
            c, vec = stats.get((y, d), (0.0, np.zeros(W.shape[1])))
            vec = vec.copy()
            for j, pj in p.items():
                vec[j] += pj
            stats[(y, d)] = (c + 1.0, vec)
        for j, pj in p.items():
            g = lr * (pj - (1.0 if j == path[d] else 0.0))
            if g == 0:
                continue
            gh += g * W[r, j].astype(np.float64)
            dW.append((r, j, g * h))
            if d == 0 and U is not None:
                for i, v in zip(idx, val):
                    dU.append((i, j, lin * g * float(v)))
    for r, j, delta in dW:
        W[r, j] = _regularized(W[r, j].astype(np.float64), delta, lr, l1, l2).astype(np.float32)
    for i, j, delta in dU:  # one feature may appear twice: its steps add up
        U[i, j] = np.float32(_regularized(np.float64(U[i, j]), delta, lin * lr, l1, l2))
    if s > 0:
        for i, v in zip(idx, val):
            E[i] = _regularized(E[i].astype(np.float64), float(v) / s * gh, lr, l1, l2).astype(np.float32)


def assign(digits, stats, M, slack):
    """The label-assignment step (see ``assign_labels``), top-down over label sets."""
    k = len(digits) - 1
    L = len(digits[0])
    old = [tuple(int(x) for x in row) for row in digits]
    new = [list(r) for r in old]
    groups = [list(range(1, k + 1))]
    for d in range(L):
        full = M ** (L - d - 1)
        nxt = []
        for labs in groups:
            m = len(labs)
            cap = min(full, max(1, -(-slack * m // M)))
            valid = {i: tuple(new[i][:d]) == old[i][:d] and stats.get((i, d), (0, None))[0] > 0 for i in labs}
            tot = sum(stats[(i, d)][0] for i in labs if valid[i])
            P = {i: stats[(i, d)][1] / stats[(i, d)][0] for i in labs if valid[i]}
            q = {i: stats[(i, d)][0] / tot for i in labs if valid[i]}
            pj = sum((q[i] * P[i] for i in P), np.zeros(M))
            pairs = sorted(((-(q[i] * (P[i][j] - pj[j])), pos, j, i) for pos, i in enumerate(labs) if valid[i]
                            for j in range(M)))
            fill = [0] * M
            dest = {}
            for _, _, j, i in pairs:
                if i not in dest and fill[j] < cap:
                    dest[i] = j
                    fill[j] += 1
            for i in labs:
                if i in dest:
                    continue
                j = old[i][d]
                if fill[j] >= cap:
                    j = min(range(M), key=lambda c: (fill[c], c))
                dest[i] = j
                fill[j] += 1
            for i in labs:
                new[i][d] = dest[i]
            for j in range(M):
                part = [i for i in labs if dest[i] == j]
                if part:
                    nxt.append(part)
        groups = nxt
    return np.array(new, dtype=np.int64)


def huffman(counts, M):
    """Digits (k+1, L) of the M-ary Huffman tree of ``counts`` (label i+1), -1 past each leaf:
    ``(1 - k) mod (M - 1)`` empty slots and the labels by increasing (count, label) queue up; the
    M first items of the list sorted by (weight, queue position) merge into a node that joins the
    queue at the end; a node's j-th merged item is its child j."""
    k = len(counts)
    pad = (1 - k) % (M - 1) if k > 1 else M - 1
    items = [(0.0, q, None) for q in range(pad)]
    for lab in sorted(range(1, k + 1), key=lambda i: (counts[i - 1], i)):
        items.append((float(counts[lab - 1]), len(items), ("leaf", lab)))
    pos = len(items)
    while True:
        items.sort(key=lambda t: (t[0], t[1]))
        take, items = items[:M], items[M:]
        node = ("node", [t[2] for t in take])
        if not items:
            root = node
            break
        items.append((sum(t[0] for t in take), pos, node))
        pos += 1
    paths = {}

    def walk(node, pre):
        for j, c in enumerate(node[1]):
            if c is None:
                continue
            if c[0] == "leaf":
                paths[c[1]] = pre + (j,)
            else:
                walk(c, pre + (j,))

    walk(root, ())
    L = max(len(p) for p in paths.values())
    out = np.full((k + 1, L), -1, dtype=np.int64)
    out[0] = 0
    for lab, p in paths.items():
        out[lab, :len(p)] = p
    return out


def rate(eta, power, t, start=0.0, total=0.0):
    """The rate of the t-th trained example: fastText's linear decay to 0 over ``total`` examples
    counted from ``start`` (never below 1e-4 eta) when ``total`` > 0, else eta (1 + t/10^4)^-power."""
    if total > 0:
        return eta * max(1e-4, 1.0 - (t - start) / total)
    return eta * (1.0 + t / 10_000.0) ** -power
