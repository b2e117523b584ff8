"""Slow pure-Python Conditional Probability Tree, written from docs/ALGORITHMS.md §3.5.

Nodes are dicts in a list; ``leaf_of`` is a dict; the base learner is ``linear_ref.RefLinear`` in
CPT slot mode. Independent of ``lomtree_cli/kernels/cpt_kernels.py`` (used to compare tree
structure exactly and probabilities with allclose).

``choose_p`` (optional callable ``(node_id, p) -> p``) replaces the node probability used by the
insertion rule: the tests use it to play an adversary against the depth guarantee.
"""

from __future__ import annotations

import heapq
import math

from .linear_ref import RefLinear

MASK64 = (1 << 64) - 1


def splitmix64(state):
    """(new_state, output) of SplitMix64 (§3.3)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class RefCPT:
    def __init__(self, bits=18, loss="squared", eta=None, alpha=0.5, random_insert=False, seed=0,
                 predict="exact", choose_p=None, sgd=False):
        self.lin = RefLinear(bits=bits, n_models=1, loss=loss, eta=eta, sgd=sgd, mode="cpt")
        self.logistic = loss == "logistic"
        self.alpha = alpha
        self.random_insert = random_insert
        self.rng = seed
        self.predict_mode = predict
        self.choose_p = choose_p
        self.nodes = []  # dicts: parent, left, right, label, model, nleaves
        self.leaf_of = {}
        self.next_model = 0

    # -- probabilities ----------------------------------------------------------------------
    def p_node(self, idx, val, a):
        f = self.lin.clip(self.lin.score(idx, val, self.nodes[a]["model"]))
        if self.logistic:
            return 1.0 / (1.0 + math.exp(-f))
        return (f + 1.0) / 2.0

    def prob(self, idx, val, y):
        if y not in self.leaf_of:
            return 0.0
        a = self.leaf_of[y]
        P = 1.0
        while self.nodes[a]["parent"] != -1:
            par = self.nodes[a]["parent"]
            p = self.p_node(idx, val, par)
            P *= p if self.nodes[par]["right"] == a else 1.0 - p
            a = par
        return P

    def all_probs(self, idx, val):
        """{label: P(label|x)} for every leaf (brute force, top-down)."""
        out = {}
        if not self.nodes:
            return out
        stack = [(0, 1.0)]
        while stack:
            a, P = stack.pop()
            nd = self.nodes[a]
            if nd["left"] == -1:
                out[nd["label"]] = P
                continue
            p = self.p_node(idx, val, a)
            stack.append((nd["left"], P * (1.0 - p)))
            stack.append((nd["right"], P * p))
        return out

    def top(self, idx, val, n):
        """Best-first search with heapq, key (-P, node id): [(label, P)] of the n best leaves."""
        if not self.nodes:
            return []
        heap = [(-1.0, 0)]
        out = []
        while heap and len(out) < n:
            negP, a = heapq.heappop(heap)
            nd = self.nodes[a]
            if nd["left"] == -1:
                out.append((nd["label"], -negP))
                continue
            p = self.p_node(idx, val, a)
            heapq.heappush(heap, (negP * (1.0 - p), nd["left"]))
            heapq.heappush(heap, (negP * p, nd["right"]))
        return out

    def predict(self, idx, val):
        if not self.nodes:
            return 0
        if self.predict_mode == "exact":
            return self.top(idx, val, 1)[0][0]
        a = 0
        while self.nodes[a]["left"] != -1:
            p = self.p_node(idx, val, a)
            a = self.nodes[a]["right"] if p > 0.5 else self.nodes[a]["left"]
        return self.nodes[a]["label"]

    # -- training ---------------------------------------------------------------------------
    def _leaf(self, label, parent):
        self.nodes.append({"parent": parent, "left": -1, "right": -1, "label": label,
                           "model": self.next_model, "nleaves": 1})
        self.next_model += 1
        return len(self.nodes) - 1

    def insert(self, idx, val, y):
        if not self.nodes:
            self.leaf_of[y] = self._leaf(y, -1)
            return
        a = 0
        while self.nodes[a]["left"] != -1:
            nd = self.nodes[a]
            if self.random_insert:
                self.rng, r = splitmix64(self.rng)
                right = (r >> 63) == 1
            else:
                cl = self.nodes[nd["left"]]["nleaves"]
                cr = self.nodes[nd["right"]]["nleaves"]
                p = self.p_node(idx, val, a) if self.alpha < 1.0 or self.choose_p else 0.5
                if self.choose_p is not None:
                    p = self.choose_p(self, a, p)
                obj = (1.0 - self.alpha) * (2.0 * p - 1.0) + self.alpha * math.log2(cl / cr)
                right = obj > 0.0
            a = nd["right"] if right else nd["left"]
        old = self.nodes[a]["label"]
        lnode = self._leaf(old, a)
        rnode = self._leaf(y, a)
        nd = self.nodes[a]
        nd["left"], nd["right"], nd["label"], nd["nleaves"] = lnode, rnode, 0, 2
        up = nd["parent"]
        while up != -1:
            self.nodes[up]["nleaves"] += 1
            up = self.nodes[up]["parent"]
        self.leaf_of[old] = lnode
        self.leaf_of[y] = rnode

    def learn(self, idx, val, y, iw):
        if y not in self.leaf_of:
            self.insert(idx, val, y)
        a = self.leaf_of[y]
        path = [(self.nodes[a]["model"], -1.0)]
        while self.nodes[a]["parent"] != -1:
            par = self.nodes[a]["parent"]
            path.append((self.nodes[par]["model"], 1.0 if self.nodes[par]["right"] == a else -1.0))
            a = par
        for m, target in path:
            f = self.lin.score(idx, val, m)
            self.lin.learn(idx, val, m, target, iw, self.lin.clip(f))
        self.lin.end_example(iw)

    def process(self, examples, train=True):
        """examples: list of (label, iw, idx, val); returns (preds, losses) progressive."""
        preds, losses = [], []
        for y, iw, idx, val in examples:
            preds.append(self.predict(idx, val))
            losses.append(iw * (1.0 - self.prob(idx, val, y)) ** 2 if y > 0 else 0.0)
            if train and y > 0 and iw > 0:
                self.learn(idx, val, y, iw)
        return preds, losses

    def depth(self):
        best = 0
        for i in range(len(self.nodes)):
            d, a = 0, i
            while self.nodes[a]["parent"] != -1:
                a = self.nodes[a]["parent"]
                d += 1
            best = max(best, d)
        return best
