"""Slow pure-Python references of the Filter tree and the Rtree (docs/ALGORITHMS.md §3.2, §3.3).

Written from the spec with plain lists and Python ints, independently of
``kernels/trees.py`` and ``reductions/{filter_tree,random_tree}.py``; the binary regressors are
``tests.reference.linear_ref.RefLinear``. Each ``process`` call records which regressors were
trained with which targets (``self.trace``) so tests can check the training rule by hand.
"""

from __future__ import annotations

import math

from .linear_ref import RefLinear

MASK64 = (1 << 64) - 1


class RefLinearLog1p(RefLinear):
    """RefLinear with the logistic loss value computed as ``log1p(exp(-yp))``.

    ``RefLinear`` uses ``log(1 + exp(-yp))``, which is exactly 0 in floating point once
    ``yp > ~37``, so it skips updates the spec (``l > 0``) and the kernel still make.
    """

    def loss_value(self, p, y):
        if self.loss == "logistic":
            return math.log1p(math.exp(-y * p))
        return super().loss_value(p, y)


def splitmix64(state: int):
    """(new_state, output) of one SplitMix64 step, in Python ints."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def permutation(k: int, seed: int) -> list:
    a = list(range(1, k + 1))
    st = seed
    for i in range(k - 1, 0, -1):
        st, r = splitmix64(st)
        j = r % (i + 1)
        a[i], a[j] = a[j], a[i]
    return a


def bracket(k: int):
    """dicts parent, children (node -> (left, right)) and the root."""
    parent = {}
    children = {}
    level = list(range(k))
    nxt = k
    while len(level) > 1:
        new = []
        for j in range(len(level) // 2):
            a, b = level[2 * j], level[2 * j + 1]
            children[nxt] = (a, b)
            parent[a] = nxt
            parent[b] = nxt
            new.append(nxt)
            nxt += 1
        if len(level) % 2:
            new.append(level[-1])
        level = new
    return parent, children, level[0]


class _RefTree:
    def __init__(self, k, lin: RefLinear, perm):
        self.k = k
        self.lin = lin
        self.parent, self.children, self.root = bracket(k)
        self.perm = perm  # label at leaf position
        self.trace = []  # per example: list of (model id, target)

    def _f(self, idx, val, m):
        return self.lin.clip(self.lin.score(idx, val, m))

    def predict(self, idx, val):
        node = self.root
        while node in self.children:
            left, right = self.children[node]
            node = right if self._f(idx, val, node - self.k) > 0 else left
        return self.perm[node]

    def process(self, examples, train):
        """examples: list of (label, iw, idx list, val list); returns predictions."""
        preds = []
        for (y, iw, idx, val), tr in zip(examples, train):
            preds.append(self.predict(idx, val))
            if tr:
                steps = []
                self._learn(y, iw, idx, val, steps)
                self.lin.end_example(iw)
                self.trace.append(steps)
        return preds


class RefFilterTree(_RefTree):
    def __init__(self, k, lin):
        super().__init__(k, lin, list(range(1, k + 1)))

    def _learn(self, y, iw, idx, val, steps):
        c = y - 1
        while c in self.parent:
            a = self.parent[c]
            z = -1.0 if self.children[a][0] == c else 1.0
            m = a - self.k
            self.lin.learn(idx, val, m, z, iw, self._f(idx, val, m))
            steps.append((m, z))
            after = self.lin.score(idx, val, m)
            if not after * z > 0:
                return
            c = a


class RefRandomTree(_RefTree):
    def __init__(self, k, lin, seed):
        super().__init__(k, lin, permutation(k, seed))

    def _learn(self, y, iw, idx, val, steps):
        leaf = self.perm.index(y)
        path = [leaf]
        while path[-1] in self.parent:
            path.append(self.parent[path[-1]])
        for j in range(len(path) - 1, 0, -1):
            a = path[j]
            z = -1.0 if self.children[a][0] == path[j - 1] else 1.0
            m = a - self.k
            self.lin.learn(idx, val, m, z, iw, self._f(idx, val, m))
            steps.append((m, z))


def make_batch(examples):
    """ExampleBatch from a list of (label, iw, idx list, val list) (test helper)."""
    import numpy as np

    from lomtree_cli.batch import ExampleBatch

    n = len(examples)
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i, (_, _, idx, _) in enumerate(examples):
        indptr[i + 1] = indptr[i] + len(idx)
    indices = np.array([h for ex in examples for h in ex[2]], dtype=np.int64)
    values = np.array([v for ex in examples for v in ex[3]], dtype=np.float32)
    return ExampleBatch(labels=np.array([ex[0] for ex in examples], dtype=np.int64),
                        weights=np.array([ex[1] for ex in examples], dtype=np.float64),
                        indptr=indptr, indices=indices, values=values,
                        line_numbers=np.arange(1, n + 1, dtype=np.int64))
