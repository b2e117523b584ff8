"""Slow pure-Python reference of the probabilistic label tree (``reductions/plt.py``).

Written from the module docstring with dicts and lists, independently of ``kernels/plt_kernels.py``:
the tree is ``children: dict node -> list``, ``parent: dict``, ``label: dict``; beam search keeps
sorted Python lists; the base learner is ``RefLinear`` in block slot mode: an internal node owns
a block (in creation order; a k-means tree's in id order; a push-down hands the full node's block
to the node that takes its children) and child number j of node a is regressor
``block[a] * W + j``, W the arity rounded up to a power of two. Structures from a buffer come
from ``reductions.plt.kmeans_tree`` (numpy, not a kernel) on centroids computed here.
"""

from __future__ import annotations

import math

from .linear_ref import RefLinear

PHI = 0x9E3779B97F4A7C15
TIE = 1e-6


class RefPLT:
    GAMMAS = (0.25, 0.0, 0.5, 0.75, 1.0)  # gamma=None: chosen by progressive validation, first wins ties

    def __init__(self, bits=18, loss="squared", eta=None, arity=4, beam=3, gamma=0.5, negatives=True, group=1):
        self.W = 1
        while self.W < arity:
            self.W *= 2
        self.lin = RefLinear(bits=bits, n_models=self.W, loss=loss, eta=eta, mode="block", group=group)
        self.M = arity
        self.B = beam
        self.auto = gamma is None
        self.gamma = self.GAMMAS[0] if gamma is None else gamma
        self.gstats = [0.0] * len(self.GAMMAS)
        self.negatives = negatives
        self.children = {0: []}
        self.parent = {0: -1}
        self.label = {0: 0}
        self.block = {0: 0}
        self.leaf_of = {}

    # structure ---------------------------------------------------------------------------------
    def set_structure(self, parent, label):
        self.children = {v: [] for v in range(len(parent))}
        self.parent = {v: int(parent[v]) for v in range(len(parent))}
        self.label = {v: int(label[v]) for v in range(len(parent))}
        for v in range(1, len(parent)):
            self.children[int(parent[v])].append(v)
        self.leaf_of = {int(label[v]): v for v in range(len(parent)) if label[v] > 0}
        internal = [v for v in range(len(parent)) if label[v] == 0]
        self.block = {v: b for b, v in enumerate(internal)}

    def _new(self, par, lab):
        v = len(self.parent)
        self.children[v] = []
        self.parent[v] = par
        self.label[v] = lab
        if lab == 0:
            self.block[v] = len(self.block)
        if par >= 0:
            self.children[par].append(v)
        return v

    def reg(self, v):
        a = self.parent[v]
        return self.block[a] * self.W + self.children[a].index(v)

    def is_leaf(self, v):
        return self.label[v] > 0

    def nleaves(self, v):
        if self.is_leaf(v):
            return 1
        return sum(self.nleaves(c) for c in self.children[v])

    # node probabilities ----------------------------------------------------------------------
    def logp(self, idx, val, v):
        f = self.lin.clip(self.lin.score(idx, val, self.reg(v)))
        if self.lin.loss == "logistic":
            return -math.log1p(math.exp(-f)) if f >= 0 else f - math.log1p(math.exp(f))
        return math.log(max((f + 1.0) / 2.0, 1e-12))

    def candidates(self, idx, val, beam=None):
        """[(leaf, log path probability, ranking score)] in discovery order."""
        B = beam or self.B
        if not self.children[0]:
            return []
        out = []
        frontier = [(0.0, 0)]
        while frontier:
            nxt = []
            for lp_a, a in frontier:
                for c in self.children[a]:
                    f = self.lin.score(idx, val, self.reg(c))
                    lp = self.logp(idx, val, c)
                    if not self.children[c]:
                        out.append((c, lp_a + lp, lp + TIE * f, lp_a))
                    else:
                        nxt.append((lp_a + lp, c))
            nxt.sort(key=lambda t: (-t[0], t[1]))
            frontier = nxt[:B]
        return out

    def ranked(self, idx, val, beam=None, gamma=None):
        """(leaf, log path probability, ranking score) by score ``own + gamma * parent``."""
        g = self.gamma if gamma is None else gamma
        c = [(n, lp, own + g * par) for n, lp, own, par in self.candidates(idx, val, beam)]
        return sorted(c, key=lambda t: (-t[2], self.label[t[0]]))

    def predict(self, idx, val):
        r = self.ranked(idx, val)
        return self.label[r[0][0]] if r else 0

    # training ----------------------------------------------------------------------------------
    def insert(self, idx, val, y):
        a = 0
        while self.children[a] and not self.is_leaf(self.children[a][0]):
            best, bl = None, -math.inf
            for c in self.children[a]:
                lp = self.logp(idx, val, c) - 2.0 * math.log(max(self.nleaves(c), 1))  # plt_kernels.INSERT_BALANCE
                if lp > bl or (lp == bl and self.nleaves(c) < self.nleaves(best)):
                    best, bl = c, lp
            a = best
        if len(self.children[a]) < self.M:
            leaf = self._new(a, y)
        elif self.parent[a] >= 0 and len(self.children[self.parent[a]]) < self.M:
            leaf = self._new(self._new(self.parent[a], 0), y)
        else:
            A = self._new(-1, 0)
            self.block[A], self.block[a] = self.block[a], self.block[A]
            self.children[A] = self.children[a]
            for c in self.children[A]:
                self.parent[c] = A
            self.parent[A] = a
            self.children[a] = [A]
            leaf = self._new(self._new(a, 0), y)
        self.leaf_of[y] = leaf
        return leaf

    def learn(self, idx, val, y, iw, cands):
        leaf = self.leaf_of.get(y)
        if leaf is None:
            leaf = self.insert(idx, val, y)
        path = [leaf]
        while self.parent[path[-1]] >= 0:
            path.append(self.parent[path[-1]])
        path.reverse()  # root first
        lin = self.lin
        for a, on in zip(path[:-1], path[1:]):
            for c in self.children[a]:
                r = self.reg(c)
                lin.learn(idx, val, r, 1.0 if c == on else -1.0, iw, lin.clip(lin.score(idx, val, r)))
        if self.negatives:
            for c, *_ in cands:
                if self.parent[c] != self.parent[leaf]:
                    r = self.reg(c)
                    lin.learn(idx, val, r, -1.0, iw, lin.clip(lin.score(idx, val, r)))
        lin.end_example(iw)

    def process(self, examples, train=True):
        """examples: (label, iw, idx, val); returns the progressive predictions."""
        preds = []
        for y, iw, idx, val in examples:
            trains = train and y > 0 and iw > 0
            # a trained example's beam is greedy unless it gives leaf negatives or gamma statistics
            cands = self.candidates(idx, val, 1 if trains and not (self.negatives or self.auto) else None)
            rank = lambda g: sorted(cands, key=lambda t: (-(t[2] + g * t[3]), self.label[t[0]]))  # noqa: E731
            r = rank(self.gamma)
            preds.append(self.label[r[0][0]] if r else 0)
            if train and y > 0 and iw > 0:
                if self.auto and cands:
                    for g, gamma in enumerate(self.GAMMAS):
                        if self.label[rank(gamma)[0][0]] == y:
                            self.gstats[g] += iw
                    self.gamma = self.GAMMAS[max(range(len(self.GAMMAS)), key=lambda g: (self.gstats[g], -g))]
                self.learn(idx, val, y, iw, cands)
        return preds

    # -- label sets (multi-label PLT) --------------------------------------------------------
    # Written from the semantics of a PLT on label sets (Jasinska et al. 2016), not from
    # ``kernels/plt_kernels.plt_process``: the labels of the set that are new are inserted first
    # (in increasing order, each guided by the example, nothing trained in between); then the union
    # of the labels' root-to-leaf paths *in the tree after the insertions* is positive; the root is
    # always a node whose children are trained (an empty set trains them all toward -1); breadth first
    # from the root, every child of a positive internal node is trained toward +1 if positive, else -1;
    # with leaf negatives, every candidate leaf of the beam (computed before the insertions) whose
    # parent is not positive is trained toward -1 (the others were just trained as children of a
    # positive node).
    def learn_set(self, idx, val, ys, iw, cands):
        ys = sorted(set(ys))
        for y in ys:
            if y not in self.leaf_of:
                self.insert(idx, val, y)
        pos = {0}
        for y in ys:
            a = self.leaf_of[y]
            while a >= 0 and a not in pos:
                pos.add(a)
                a = self.parent[a]
        lin = self.lin
        queue = [0]
        while queue:
            a = queue.pop(0)
            for c in self.children[a]:
                r = self.reg(c)
                on = c in pos
                lin.learn(idx, val, r, 1.0 if on else -1.0, iw, lin.clip(lin.score(idx, val, r)))
                if on and self.children[c]:
                    queue.append(c)
        if self.negatives:
            for c, *_ in cands:
                if self.parent[c] not in pos:
                    r = self.reg(c)
                    lin.learn(idx, val, r, -1.0, iw, lin.clip(lin.score(idx, val, r)))
        lin.end_example(iw)

    def process_sets(self, examples, train=True):
        """examples: (label set or None (unlabeled), iw, idx, val); an example trains when it has a
        set (possibly empty) and iw > 0. Returns the progressive predictions (the best candidate
        before the update, 0 for an empty tree); with gamma chosen, a gamma counts an example when
        its best candidate is one of the labels."""
        preds = []
        for ys, iw, idx, val in examples:
            trains = train and ys is not None and iw > 0
            cands = self.candidates(idx, val, 1 if trains and not (self.negatives or self.auto) else None)
            rank = lambda g: sorted(cands, key=lambda t: (-(t[2] + g * t[3]), self.label[t[0]]))  # noqa: E731
            r = rank(self.gamma)
            preds.append(self.label[r[0][0]] if r else 0)
            if train and ys is not None and iw > 0:
                if self.auto and cands:
                    for g, gamma in enumerate(self.GAMMAS):
                        if self.label[rank(gamma)[0][0]] in ys:
                            self.gstats[g] += iw
                    self.gamma = self.GAMMAS[max(range(len(self.GAMMAS)), key=lambda g: (self.gstats[g], -g))]
                self.learn_set(idx, val, ys, iw, cands)
        return preds


def centroids(examples, labels_in_order, d_bits):
    """Label centroids as ``reductions.plt`` builds them before normalising: the mean of each
    label's L2-normalised examples, count-sketched (bucket = top d_bits of h * PHI, sign = bit 31)."""
    d = 1 << d_bits
    row = {y: i for i, y in enumerate(labels_in_order)}
    X = [[0.0] * d for _ in labels_in_order]
    cnt = [0] * len(labels_in_order)
    for y, _, idx, val in examples:
        nrm = math.sqrt(sum(float(v) * float(v) for v in val))
        if nrm == 0:
            continue
        r = row[y]
        cnt[r] += 1
        for h, v in zip(idx, val):
            hv = (int(h) * PHI) % (1 << 64)
            b = hv >> (64 - d_bits)
            sign = -1.0 if (hv >> 31) & 1 else 1.0
            X[r][b] += sign * float(v) / nrm
    return [[x / c for x in row_] if c else row_ for row_, c in zip(X, cnt)]


def set_centroids(examples, labels_in_order, d_bits):
    """``centroids`` for label-set examples (ys, iw, idx, val): an example is a term of the
    centroid of each of its labels."""
    return centroids([(y, iw, idx, val) for ys, iw, idx, val in examples if ys for y in ys], labels_in_order, d_bits)
