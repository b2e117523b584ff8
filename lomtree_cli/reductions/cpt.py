"""Conditional Probability Tree (CPT; Beygelzimer, Langford, Lifshits, Sorkin, Strehl, UAI 2009).

Estimates ``P(y|x)`` as the product of binary conditional probabilities along the root-to-leaf
path of a tree whose leaves are exactly the labels seen so far (docs/ALGORITHMS.md §3.5). ``k`` is never
needed; labels are any integers >= 1 (ids up to 2^63-1; memory follows the number of *distinct*
labels through an open-addressing hash map label -> leaf).

Per example (progressive validation): predict the argmax leaf and ``P(y|x)`` with the current
model, report ``iw * (1 - P(y|x))^2`` (an unseen label has ``P = 0``); then, when training:

1. empty tree: the label becomes the root leaf;
2. unseen label: descend from the root without training, at internal node ``a`` going right iff
   ``(1 - alpha)(2 p_a(x) - 1) + alpha * log2(Cl / Cr) > 0`` (ties left), where ``Cl, Cr`` are
   the exact leaf counts of the two subtrees and ``p_a`` the node's pre-update probability; the
   leaf reached (label l) becomes internal *keeping its regressor*; its new left child is a leaf
   for l with a fresh regressor, its new right child the leaf for the new label (fresh regressor);
   with ``--cpt-random-insert`` the side is the top bit of the next SplitMix64 output instead;
3. always: train the path bottom-up: the leaf's own regressor toward -1, then every ancestor
   toward -1 if the label is in its left subtree, +1 otherwise, all with importance ``iw``; each
   regressor is scored right before its own update.

Choices (docs/ALGORITHMS.md §8 open questions):

* **Q1, alpha rule form and constants:** shogun's form with exact leaf counts,
  ``(1-alpha)(2p-1) + alpha*log2(Cl/Cr)``. A side can only receive a new label while its leaf count
  is at most ``c = 2^((1-alpha)/alpha)`` times the other side's, so every node's larger side holds
  at most a fraction ``beta = c/(1+c)`` of its leaves (plus one), giving
  ``depth <= ceil(log_{1/beta} n_labels) + 1`` (beta = 1/2 at alpha = 1: the tree is then perfectly
  balanced, depth ``ceil(log2 n_labels)``; alpha = 0 gives no guarantee). Default alpha = 0.5.
* **Q2, loss:** the reported loss is ``iw (1 - P(y|x))^2`` (O(depth) per example), not the full
  Brier score (``--cpt-brier`` is not implemented). The driver also reports the 0/1 loss of the
  argmax.
* **Q3, converted node and fresh leaf regressor:** the leaf that is split keeps its trained
  regressor (trained toward "left" on its label's examples, so it starts as a sensible splitter);
  the old label's new leaf gets a fresh (zero) regressor rather than a copy (copying one regressor
  out of the shared hashed table would cost O(2^b)); the converted node *is* trained on the
  inserting example (toward right), by the same "train the whole path" routine.
* **Probability link:** ``p = (clip(f, -1, 1) + 1) / 2`` for squared, hinge and quantile loss;
  ``p = 1 / (1 + exp(-clip(f, -50, 50)))`` for logistic loss.
* **Prediction:** ``--cpt-predict exact`` (default) is best-first search over a binary max-heap
  keyed by path probability (ties: smaller node id first); the first leaf popped is the exact
  argmax, and continuing until N leaves are popped gives the exact top N (``--top-k``, always
  exact). ``greedy`` descends to the child with the larger conditional (``p > 0.5`` -> right).
  During training the argmax is computed only when someone reads it (a predictions file or the
  progress table; then the summary also gives its 0/1 loss). Empty tree -> prediction 0.
* **Regressor ids:** node ``i`` uses regressor ``i`` (root 0, then two per inserted label), in
  CPT slot mode ``slot(h, m) = (h + m * 0x9E3779B1) mod 2^b`` (§2.5); per-regressor normaliser
  arrays grow by doubling.
* ``-t``/``predict``: no insertion; an unseen label gets ``P = 0`` (loss ``iw``).

Model state: ``parent, left, right, label, model, nleaves`` (int64, one entry per node) and meta
``next_model``, ``rng_state`` (decimal string); ``leaf_of`` is rebuilt from the leaves and the
whole structure is validated on load.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import cpt_kernels as C
from ..kernels.linear import MODE_CPT
from .base import Reduction, n_distinct, run_resuming


def depth_bound(alpha: float, n_labels: int) -> float:
    """The guaranteed maximum depth ``ceil(log_{1/beta} n) + 1`` (inf for alpha = 0)."""
    if n_labels <= 1:
        return 0
    if alpha <= 0.0:
        return math.inf
    c = 2.0 ** ((1.0 - alpha) / alpha)
    beta = c / (1.0 + c)
    if alpha >= 1.0:
        return math.ceil(math.log2(n_labels))
    return math.ceil(math.log(n_labels) / math.log(1.0 / beta)) + 1


def _empty_tree(cap: int) -> C.CptTree:
    z = lambda: np.full(cap, -1, dtype=np.int64)  # noqa: E731
    return C.CptTree(z(), z(), z(), np.zeros(cap, np.int64), z(), np.zeros(cap, np.int64),
                     np.zeros(C.N_CT, np.int64))


def _grow_tree(tree: C.CptTree, cap: int) -> C.CptTree:
    new = _empty_tree(cap)
    n = int(tree.counts[C.CT_NODES])
    for a, b in zip(tree[:-1], new[:-1]):
        b[:n] = a[:n]
    new.counts[:] = tree.counts
    return new


class ConditionalProbabilityTree(Reduction):
    """CPT reduction (see the module docstring)."""

    name = "cpt"
    slot_mode = MODE_CPT
    own_loss = True

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        self.tree = _empty_tree(16)
        self.lmap = C.new_map(16)
        self.rng = np.array([int(rcfg.seed)], dtype=np.uint64)
        self.params = np.zeros(C.N_PAR, dtype=np.float64)
        self.params[C.PAR_ALPHA] = float(rcfg.cpt_alpha)
        self.params[C.PAR_RANDOM] = 1.0 if rcfg.cpt_random_insert else 0.0
        self.params[C.PAR_EXACT] = 1.0 if rcfg.cpt_predict == "exact" else 0.0
        self.params[C.PAR_LOGISTIC] = 1.0 if learner.config.loss == "logistic" else 0.0
        self.params[C.PAR_FORCE_P] = math.nan
        self.params[C.PAR_NEED_PRED] = 1.0

    def set_need_predictions(self, need: bool) -> None:
        """Without a reader for the progressive predictions, skip the argmax search (§3.5)."""
        self.params[C.PAR_NEED_PRED] = 1.0 if need else 0.0

    @staticmethod
    def n_models_for(rcfg) -> int:
        return 1  # initial capacity; grows with the tree

    # -- sizes -----------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.tree.counts[C.CT_NODES])

    @property
    def n_labels(self) -> int:
        return int(self.tree.counts[C.CT_LEAVES])

    @property
    def next_model(self) -> int:
        return int(self.tree.counts[C.CT_NEXT_MODEL])

    def _make_room(self) -> None:
        """Double whatever the next insertion lacks (nodes, regressors, map slots)."""
        cap = self.tree.parent.shape[0]
        if self.n_nodes + 2 > cap:
            self.tree = _grow_tree(self.tree, 2 * cap)
        if self.next_model + 2 > self.learner.n_models:
            self.learner.ensure_models(max(self.next_model + 2, 2 * self.learner.n_models))
        if 2 * (int(self.lmap.size[0]) + 1) > self.lmap.keys.shape[0]:
            self.lmap = C.grow_map(self.lmap, int(self.lmap.size[0]) + 1)

    # -- the contract ----------------------------------------------------------------------
    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        losses = np.zeros(n, dtype=np.float64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        run_resuming(lambda i: C.cpt_process(self.learner.arrays, self.tree, self.lmap, self.rng, self.params,
                                             batch.indptr, batch.indices, batch.values, batch.labels,
                                             batch.weights, train, i, preds, losses),
                     n, self._make_room)
        return preds, losses

    def grow_classes(self, k: int, features: np.ndarray) -> None:
        self._set_k(k)  # labels map to leaves as they come (``lmap``): nothing to lay out

    def top_k_bound(self) -> int:
        return max(1, self.k or int(self.lmap.size[0]))

    def predict_top(self, batch, n):
        m = len(batch)
        n = max(1, int(n))
        labs = np.zeros((m, n), dtype=np.int64)
        probs = np.zeros((m, n), dtype=np.float64)
        p_true = np.zeros(m, dtype=np.float64)
        C.cpt_top(self.learner.arrays, self.tree, self.lmap, self.params, batch.indptr, batch.indices,
                  batch.values, batch.labels, n, labs, probs, p_true)
        return labs, probs, p_true

    # -- persistence -----------------------------------------------------------------------
    def state(self) -> dict:
        n = self.n_nodes
        t = self.tree
        return {"parent": t.parent[:n].copy(), "left": t.left[:n].copy(), "right": t.right[:n].copy(),
                "label": t.label[:n].copy(), "model": t.model[:n].copy(), "nleaves": t.nleaves[:n].copy(),
                "next_model": np.array([self.next_model], dtype=np.int64)}

    def meta(self) -> dict:
        return {"next_model": self.next_model, "n_nodes": self.n_nodes, "n_labels": self.n_labels,
                "rng_state": str(int(self.rng[0])), "cpt_alpha": float(self.config.cpt_alpha),
                "cpt_random_insert": bool(self.config.cpt_random_insert),
                "cpt_predict": self.config.cpt_predict}

    def load_state(self, arrays: dict, meta: dict) -> None:
        names = ("parent", "left", "right", "label", "model", "nleaves")
        for k in names + ("next_model",):
            if k not in arrays:
                raise ValueError(f"missing CPT array {k!r}")
        arr = {k: np.asarray(arrays[k]) for k in names}
        n = arr["parent"].shape[0]
        for k, a in arr.items():
            if a.dtype != np.int64 or a.shape != (n,):
                raise ValueError(f"CPT array {k!r} has the wrong shape or type")
        nm = np.asarray(arrays["next_model"])
        if nm.shape != (1,) or nm.dtype != np.int64:
            raise ValueError("CPT next_model has the wrong shape or type")
        next_model = int(nm[0])
        if int(meta.get("next_model", next_model)) != next_model:
            raise ValueError("CPT next_model disagrees with the header")
        _validate_tree(arr, n, next_model)
        if next_model > self.learner.n_models:
            raise ValueError("CPT uses more regressors than the model stores")
        cap = 16
        while cap < n + 2:
            cap *= 2
        tree = _empty_tree(cap)
        for k in names:
            getattr(tree, k)[:n] = arr[k]
        leaves = np.flatnonzero(arr["left"] == -1) if n else np.zeros(0, np.int64)
        tree.counts[C.CT_NODES] = n
        tree.counts[C.CT_NEXT_MODEL] = next_model
        tree.counts[C.CT_LEAVES] = leaves.shape[0]
        lmap = C.new_map(2 * leaves.shape[0] + 2)
        C.map_fill(lmap, arr["label"][leaves].astype(np.int64), leaves.astype(np.int64))
        self.tree = tree
        self.lmap = lmap
        try:
            rs = int(meta.get("rng_state", str(int(self.config.seed))))
        except (TypeError, ValueError):
            raise ValueError("bad CPT rng_state") from None
        if not 0 <= rs < 2**64:
            raise ValueError("bad CPT rng_state")
        self.rng = np.array([rs], dtype=np.uint64)

    # -- description -----------------------------------------------------------------------
    def depths(self) -> np.ndarray:
        """int64 (n_nodes,): depth of each node (root 0)."""
        n = self.n_nodes
        d = np.zeros(n, dtype=np.int64)
        # parents have smaller ids than their children (nodes are created top-down)
        par = self.tree.parent[:n]
        for i in range(1, n):
            d[i] = d[par[i]] + 1
        return d

    def depth(self) -> int:
        return int(self.depths().max()) if self.n_nodes else 0

    def inspect(self) -> dict:
        n = self.n_nodes
        t = self.tree
        d = self.depths()
        internal = np.flatnonzero(t.left[:n] >= 0)
        leaf = t.left[:n] < 0
        levels = []
        for lev in range(self.depth() + 1):
            at = d == lev
            ints = internal[d[internal] == lev]
            row = {"depth": lev, "nodes": int(at.sum()), "leaves": int((at & leaf).sum())}
            if ints.size:
                cl = t.nleaves[t.left[ints]].astype(np.float64)
                cr = t.nleaves[t.right[ints]].astype(np.float64)
                frac = np.maximum(cl, cr) / (cl + cr)
                row["mean_larger_side_fraction"] = round(float(frac.mean()), 4)
                row["max_larger_side_fraction"] = round(float(frac.max()), 4)
            levels.append(row)
        alpha = float(self.config.cpt_alpha)
        info = {
            "reduction": self.name,
            "k": self.config.k,
            "labels": self.n_labels,
            "nodes": n,
            "regressors": self.next_model,
            "depth": self.depth(),
            "depth_bound": None if self.config.cpt_random_insert else depth_bound(alpha, self.n_labels),
            "balanced_depth": math.ceil(math.log2(self.n_labels)) if self.n_labels > 1 else 0,
            "mean_leaf_depth": round(float(d[leaf].mean()), 4) if n else 0.0,
            "cpt_alpha": alpha,
            "cpt_predict": self.config.cpt_predict,
            "cpt_random_insert": bool(self.config.cpt_random_insert),
            "levels": levels,
        }
        if info["depth_bound"] == math.inf:
            info["depth_bound"] = None
        return info


def _validate_tree(arr: dict, n: int, next_model: int) -> None:
    """Raise ValueError unless the arrays form one binary tree rooted at 0 with sane counts."""
    if n == 0:
        return
    parent, left, right = arr["parent"], arr["left"], arr["right"]
    label, model, nleaves = arr["label"], arr["model"], arr["nleaves"]
    if parent[0] != -1:
        raise ValueError("CPT root has a parent")
    for a in (parent, left, right):
        if a.min() < -1 or a.max() >= n:
            raise ValueError("CPT node link out of range")
    is_leaf = left == -1
    if np.any((right == -1) != is_leaf):
        raise ValueError("CPT node with one child")
    if n > 1 and np.any(parent[1:] < 0):
        raise ValueError("CPT node without parent")
    ids = np.arange(n)
    ints = ids[~is_leaf]
    if np.any(left[ints] <= ints) or np.any(right[ints] <= ints):
        raise ValueError("CPT child id not after its parent")
    if np.any(parent[left[ints]] != ints) or np.any(parent[right[ints]] != ints):
        raise ValueError("CPT parent/child links disagree")
    # every non-root node is the child of exactly one node
    child_count = np.bincount(np.concatenate([left[ints], right[ints]]), minlength=n)
    if child_count[0] != 0 or np.any(child_count[1:] != 1):
        raise ValueError("CPT nodes are not a tree")
    if np.any(label[is_leaf] < 1) or np.any(label[~is_leaf] != 0):
        raise ValueError("CPT leaf labels invalid")
    if n_distinct(label[is_leaf]) != int(is_leaf.sum()):
        raise ValueError("CPT label on two leaves")
    if model.min() < 0 or model.max() >= next_model or n_distinct(model) != n:
        raise ValueError("CPT regressor ids invalid")
    want = is_leaf.astype(np.int64)
    for a in ints[::-1]:  # children have larger ids: a reverse sweep sees them first
        want[a] = want[left[a]] + want[right[a]]
    if np.any(want != nleaves):
        raise ValueError("CPT leaf counts inconsistent")
