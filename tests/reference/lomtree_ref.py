"""Slow pure-Python LOMtree (docs/ALGORITHMS.md §3.4), written from the spec for comparison tests.

One Python object per node holding a dict of class statistics; no hashing tricks, no flat
arrays. The regressors come from ``tests/reference/linear_ref.RefLinear`` (or any object with
``score``, ``clip``, ``learn``, ``end_example``), so the whole reference is independent of the
numba kernels.

Usage::

    ref = RefLomTree(k=5, T=4, swap_resistance=4, lin=RefLinear(bits=10, n_models=4, loss="quantile"))

With ``leaf_labels=L > 0`` a leaf predicts the best-scoring of its ``L`` most frequent labels (count
descending, label ascending), each label ``y`` having its own regressor ``max(1, T) + y - 1``
(``lin`` then needs ``max(1, T) + k`` models); training trains those candidates at the training
leaf toward +1 (the true label) or -1. A candidate ``c`` ranks by ``score_c + beta * log(cnt_c /
sum of the candidates' counts)``; ``label_prior=-1`` chooses beta among ``BETAS`` by progressive
validation (each trained example counts, per beta, whether its candidates ranked its label first
before it is learned; the best so far, first on ties, is used), else beta = ``label_prior``.
    pred = ref.predict(idx, val)
    ref.train(idx, val, y, iw)

With ``max_records=N``, before a training example finds ``live + depth_bound + 2 > N`` (``live``
the records of all nodes, ``depth_bound`` the deepest split ever made), the records are pruned to
``3N/4`` by count: never the root's, a node's ``L`` candidates or its ``maxlab``; of the others
all with ``cnt <= t`` for the least ``t >= 1`` that reaches the target (counts >= ``HIST`` in one
bin; ``t = HIST`` drops all of them).
"""

from __future__ import annotations

import math


class Node:
    def __init__(self):
        self.parent = None
        self.left = None
        self.right = None
        self.internal = False
        self.model = None
        self.C = 0
        self.Esum = 0.0
        self.En = 0
        self.classes = {}  # label -> [cnt, n, msum]
        self.maxcnt = 0
        self.maxlab = 1

    def reset(self):
        """SetNode: an empty leaf (C and parent are set by the caller)."""
        self.left = self.right = None
        self.internal = False
        self.model = None
        self.Esum = 0.0
        self.En = 0
        self.classes = {}
        self.maxcnt = 0
        self.maxlab = 1


class RefLomTree:
    BETAS = (0.0, 0.02, 0.05, 0.1, 0.2)
    HIST = 4096

    def __init__(self, k, lin, T=None, swap_resistance=4, leaf_labels=0, candidates_up=0, label_prior=-1.0,
                 positive_weight=1.0, trained_candidates=0, max_records=0):
        self.k = k
        self.auto = label_prior < 0
        self.beta = self.BETAS[0] if self.auto else label_prior
        self.stats = [0.0] * len(self.BETAS)
        self.T = k - 1 if T is None else T
        self.L = leaf_labels
        self.W0 = max(1, self.T)
        self.up = candidates_up
        self.posw = positive_weight
        self.M = trained_candidates
        self.N = max_records
        self.depth_bound = 0
        self.prunes = 0
        self.RS = swap_resistance
        self.lin = lin
        self.nodes = [Node()]  # node 0 is the root; ids are creation order
        self.t = 0
        self.swaps = 0
        self.log = []  # (event, details) for debugging / step tests

    # helpers ------------------------------------------------------------------------------
    def _update_c(self, v):
        nodes = self.nodes
        while v != 0:
            p = nodes[v].parent
            if nodes[p].C == nodes[v].C:
                break
            v = p
            nodes[v].C = min(nodes[nodes[v].left].C, nodes[nodes[v].right].C)

    def _swap(self, j):
        nodes = self.nodes
        s = 0
        while nodes[s].internal:
            a, b = nodes[s].left, nodes[s].right
            s = a if nodes[a].C < nodes[b].C else b
        pa = nodes[s].parent
        if s == j or pa is None or pa == 0:
            self.log.append(("swap_refused", j))
            return None
        gpa = nodes[pa].parent
        sib = nodes[pa].left if nodes[pa].right == s else nodes[pa].right
        if nodes[gpa].left == pa:
            nodes[gpa].left = sib
        else:
            nodes[gpa].right = sib
        nodes[sib].parent = gpa
        self._update_c(sib)
        model = nodes[pa].model
        nodes[s].reset()
        nodes[pa].reset()
        nodes[j].model = model
        self.swaps += 1
        self.log.append(("swap", j, s, pa))
        return s, pa

    # algorithm ----------------------------------------------------------------------------
    def _leaf_candidates(self, idx, val):
        """(leaf, its candidates, their counts, their label regressors' scores)."""
        v = 0
        nodes = self.nodes
        while nodes[v].internal:
            f = self.lin.score(idx, val, nodes[v].model)
            v = nodes[v].left if f < 0 else nodes[v].right
        cands = self.candidates(v)
        counts = [self.count_node(v).classes[c][0] for c in cands]
        return v, cands, counts, [self.lin.score(idx, val, self.W0 + c - 1) for c in cands]

    @staticmethod
    def ranked_first(cands, counts, scores, beta):
        tot = sum(counts)
        key = [s + beta * (math.log(c) - math.log(tot)) for s, c in zip(scores, counts)]
        best = 0
        for q in range(1, len(cands)):
            if key[q] > key[best]:
                best = q
        return cands[best]

    def predict(self, idx, val):
        v, cands, counts, scores = self._leaf_candidates(idx, val)
        if not cands:
            return self.nodes[v].maxlab
        return self.ranked_first(cands, counts, scores, self.beta)

    def _prior_stats(self, idx, val, y):
        _, cands, counts, scores = self._leaf_candidates(idx, val)
        if not cands:
            return
        for b, beta in enumerate(self.BETAS):
            if self.ranked_first(cands, counts, scores, beta) == y:
                self.stats[b] += 1.0
        if self.auto:
            self.beta = self.BETAS[max(range(len(self.BETAS)), key=lambda b: (self.stats[b], -b))]

    def count_node(self, v):
        """The node ``candidates_up`` levels above leaf v (at most the root)."""
        for _ in range(self.up):
            if v == 0:
                break
            v = self.nodes[v].parent
        return self.nodes[v]

    def candidates(self, v):
        """Leaf v's candidate labels: the L most frequent (ties: smaller label first) of
        ``count_node(v)``."""
        return self.candidates_of(self.count_node(v))

    def candidates_of(self, nd):
        cl = nd.classes
        return sorted(cl, key=lambda lab: (-cl[lab][0], lab))[:self.L]

    def _prune(self):
        nodes = self.nodes
        live = sum(len(nd.classes) for nd in nodes)
        if not self.N or live + self.depth_bound + 2 <= self.N:
            return
        kept = set()
        for v, nd in enumerate(nodes):
            if v == 0:
                kept |= {(0, lab) for lab in nd.classes}
                continue
            if nd.maxcnt > 0:
                kept.add((v, nd.maxlab))
            if self.L > 0:
                kept |= {(v, lab) for lab in self.candidates_of(nd)}
        hist = [0] * (self.HIST + 1)
        for v, nd in enumerate(nodes):
            for lab, rec in nd.classes.items():
                if (v, lab) not in kept:
                    hist[min(rec[0], self.HIST)] += 1
        t, drop = 0, 0
        while t < self.HIST and live - drop > self.N * 3 // 4:
            t += 1
            drop += hist[t]
        for v, nd in enumerate(nodes):
            nd.classes = {lab: rec for lab, rec in nd.classes.items()
                          if (v, lab) in kept or not (t == self.HIST or rec[0] <= t)}
        self.prunes += 1

    def train(self, idx, val, y, iw=1.0):
        self._prune()
        if self.L > 0:
            self._prior_stats(idx, val, y)
        nodes = self.nodes
        j = 0
        depth = 0
        while True:
            nd = nodes[j]
            rec = nd.classes.setdefault(y, [0, 0, 0.0])
            rec[0] += 1
            if rec[0] > nd.maxcnt:
                nd.maxcnt = rec[0]
                nd.maxlab = y
            if not nd.internal:
                if len(nd.classes) < 2:
                    break
                if self.t < self.T:
                    L, R = len(nodes), len(nodes) + 1
                    nodes.append(Node())
                    nodes.append(Node())
                    nd.model = self.t
                    self.t += 1
                    self.log.append(("split", j, L, R))
                elif nd.C - nd.maxcnt > self.RS * (nodes[0].C + 1):
                    got = self._swap(j)
                    if got is None:
                        break
                    L, R = got
                else:
                    break
                nd.left, nd.right = L, R
                nodes[L].parent = nodes[R].parent = j
                nodes[L].C = nd.C // 2
                nodes[R].C = nd.C - nodes[L].C
                self._update_c(L)
                nodes[L].maxlab = nodes[R].maxlab = nd.maxlab
                nd.internal = True
                self.depth_bound = max(self.depth_bound, depth + 1)
            E = nd.Esum / nd.En if nd.En else 0.0
            e = rec[2] / rec[1] if rec[1] else 0.0
            z = -1.0 if E > e else 1.0
            f = self.lin.score(idx, val, nd.model)
            self.lin.learn(idx, val, nd.model, z, iw, self.lin.clip(f))
            s = self.lin.score(idx, val, nd.model)
            self.log.append(("train", j, y, z, s))
            nd.Esum += s
            nd.En += 1
            rec[2] += s
            rec[1] += 1
            j = nd.left if s < 0 else nd.right
            depth += 1
        nodes[j].C += 1
        self._update_c(j)
        cands = self.candidates(j)
        keep = range(len(cands))
        if self.M and len(cands) > self.M:  # the label and the M best-scored before any learns
            scores = [self.lin.score(idx, val, self.W0 + c - 1) for c in cands]
            keep = set(sorted(range(len(cands)), key=lambda q: (-scores[q], q))[:self.M])
            keep |= {q for q, c in enumerate(cands) if c == y}
        for q, c in enumerate(cands):
            if q not in keep:
                continue
            m = self.W0 + c - 1
            f = self.lin.score(idx, val, m)
            self.lin.learn(idx, val, m, 1.0 if c == y else -1.0, iw * self.posw if c == y else iw, self.lin.clip(f))
        self.lin.end_example(iw)

    # views for comparisons -----------------------------------------------------------------
    def arrays(self):
        """Dict of plain lists in the layout of ``LomTree.state()``."""
        out = {k: [] for k in ("parent", "left", "right", "internal", "model", "C", "En", "maxcnt", "maxlab",
                               "Esum")}
        recs = []
        for v, nd in enumerate(self.nodes):
            out["parent"].append(-1 if nd.parent is None else nd.parent)
            out["left"].append(-1 if nd.left is None else nd.left)
            out["right"].append(-1 if nd.right is None else nd.right)
            out["internal"].append(int(nd.internal))
            out["model"].append(-1 if nd.model is None else nd.model)
            out["C"].append(nd.C)
            out["En"].append(nd.En)
            out["maxcnt"].append(nd.maxcnt)
            out["maxlab"].append(nd.maxlab)
            out["Esum"].append(nd.Esum)
            for lab in sorted(nd.classes):
                recs.append((v, lab, *nd.classes[lab]))
        out["records"] = recs
        return out
