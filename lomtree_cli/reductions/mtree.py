"""M-ary softmax label tree over learned embeddings (``-r mtree``).

After Jernite, Choromanska & Sontag, *Simultaneous Learning of Trees and Representations for
Extreme Classification and Density Estimation* (ICML 2017): a tree of arity M (``--arity``)
whose leaves are the labels: a flat softmax when k <= max(FLAT_K, 4 M) and no ``--depth``; else
(``--tree huffman``, default) the M-ary Huffman tree of the label counts when they are known before
training (``plan``: a new model, ``--passes > 1`` over plain files, no ``--depth``; leaves at
several depths, no re-assignment), otherwise a balanced tree of depth L (``--depth``, or the least
L with M**L >= k). Every internal node is an M-way softmax over the children that hold labels, on a
shared learned representation ``h(x)``: the value-weighted average of the embeddings (``--dim D``)
of the example's hashed features, as fastText's bag of words; the root also adds hashed linear
scores ``sum_j v_j U[i_j]`` (``--linear``: their rate factor; one row of U per feature slot). ``P(y|x)`` is the product of the softmax
probabilities along y's path; everything (embeddings and node layers) is trained online by SGD on
``-log P(y|x)``; the progressive loss this reduction reports is that log-loss (natural log), so
``exp(average loss)`` is the perplexity (the summary prints it). With ``--passes > 1`` over
plain files the rate falls linearly to 0 over the run (``plan``), else as ``t ** -power_t``.

A balanced tree's structure is learned online by the paper's label-assignment step
(``kernels.mtree_kernels.assign_labels``): while training, each label accumulates the expected
child distribution ``p(j|i)`` of the nodes on its path; after ``--reassign-after N`` trained
examples, then at every doubling of that count (N, 2N, 4N, ...), labels are re-assigned top-down,
each node sending its labels greedily to the children where ``q_i (p(j|i) - p_j)`` (their term of
the node objective J_n) is largest, under the well-formedness cap (a subtree of depth d holds at
most M**d labels) and a balance cap (at most 2|I|/M of a node's labels per child). The node
layers keep their weights (a moved label takes over the output it was routed to); the statistics
restart. ``--reassign-after 0`` keeps the initial tree: a random balanced assignment (by
``--seed``), the random-tree baseline.

``--l1``/``--l2`` regularise every parameter a step moves (the node layers' outputs on the
label's path, the embedding rows of the example's features) at its SGD rate ``lr * iw``, as the
linear learner's touched weights (``kernels.linear``, "Regularisation"; ``learn_one``).

Prediction: beam search (``--beam``) over the path log-probabilities; ``--top-k`` and
``--probabilities`` report ``P(y|x)`` of the best leaves and of the true label (exact).

Embedding table: ``2**bits`` rows of D float32 (``-b 18 --dim 100``: 100 MB), rows initialised
uniform in (-1/D, 1/D) from a hash of (seed, row), so a model file stores only the rows training
updated (and the same rows of U, ``2**bits`` x the root's children, zero at first). The shared linear learner's table is not used (one regressor, kept minimal).

Choices and measurements: ``bench/notes/mtree.md``.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import mtree_kernels as T
from ..kernels.linear import HP_ETA, HP_L1, HP_L2, MODE_CPT
from ..learner import check_memory
from ..parsing import count_lines
from .base import Reduction, run_resuming

#: a child may take at most SLACK * |I| / M of its parent's labels (balance cap of the assignment)
SLACK = 2
#: default rate (no ``-l``) of a new model: under the linear schedule over T = passes x examples
#: ``ETA_C * T ** -ETA_EXP`` clipped to ETA_RANGE (fixed-horizon SGD takes steps ~ T**-0.5; the
#: constants fit the best rates measured: KJV book T = 124k: 1.0, Sector 32k: 2-3, KJV next word
#: 3.55M: 0.1), else (``t ** -power_t``: one pass, standard input) ETA_POWER; bench/notes/mtree.md
ETA_C = 1140.0
ETA_EXP = 0.6
ETA_RANGE = (0.05, 2.5)
ETA_POWER = 0.5


def default_eta(total: float) -> float:
    """The default rate of the linear schedule over ``total`` trained examples."""
    return float(min(max(ETA_C * max(total, 1.0) ** -ETA_EXP, ETA_RANGE[0]), ETA_RANGE[1]))


#: ``--depth 0`` with k <= max(FLAT_K, FLAT_ARITIES * arity): a flat softmax over the k labels (one
#: level, arity raised to k; at most twice the cost of the two-level 32-ary tree, and more
#: accurate: bench/notes/mtree.md)
FLAT_ARITIES = 4
FLAT_K = 128
#: ``--linear -1`` (default): the rate factor of the root's linear weights on a tree, and on a flat
#: softmax (measured, bench/notes/mtree.md: +0.3 points on KJV next word at 2; flat: KJV book +1.2 at 0.1
#: and -1.4 at 2, Sector +1.5 at 0.1 and +14.7 at 2)
LINEAR_RATE = 2.0
LINEAR_RATE_FLAT = 0.1


def tree_shape(k: int, M: int, depth: int) -> tuple[int, int]:
    """(arity, depth): ``depth`` if given (> 0) with arity M; else a flat softmax (k, 1) when
    k <= max(FLAT_K, FLAT_ARITIES * M); else M and the least L with M**L >= k."""
    if depth <= 0 and k <= max(FLAT_K, FLAT_ARITIES * M):
        return max(M, k), 1
    return M, tree_depth(k, M, depth)


def tree_depth(k: int, M: int, depth: int) -> int:
    """The tree depth: ``depth`` if given (> 0), else the least L with M**L >= k (at least 1)."""
    if depth > 0:
        return int(depth)
    L = 1
    while M ** L < k:
        L += 1
    return L


def initial_digits(k: int, M: int, L: int, seed: int) -> np.ndarray:
    """Digits (k+1, L) of a random balanced tree: the labels in a random order (by ``seed``),
    the r-th one at the leaf whose digits are those of r in base M, least significant first (so
    every node's children get equal shares)."""
    perm = np.random.default_rng(seed).permutation(k).astype(np.int64)
    digits = np.zeros((k + 1, L), dtype=np.int64)
    r = perm.copy()
    for d in range(L):
        digits[1:, d] = r % M
        r //= M
    return digits


def huffman_digits(counts: np.ndarray, M: int) -> np.ndarray:
    """Digits (k+1, L) of the M-ary Huffman tree of the label counts ``counts`` (k,) (label i+1):
    frequent labels near the root, -1 past each label's leaf (row 0 unused, zeros). Leaves are
    taken by increasing (count, label); the first merge takes ``(1 - k) mod (M - 1)`` empty slots
    so that every other node is full. Should the depth L exceed what node keys can number
    (``L log2 M > 60``), the counts are flattened (square roots) until it does not."""
    import heapq

    k = counts.size
    w = np.asarray(counts, dtype=np.float64)
    while True:
        order = np.lexsort((np.arange(k), w))
        # items: label y >= 1, 0 = an empty slot, -(n + 1) = merged node n; heap of (weight, rank, item)
        heap = [(0.0, r, 0) for r in range((1 - k) % (M - 1) if k > 1 else M - 1)]
        heap += [(float(w[i]), len(heap) + r, int(i) + 1) for r, i in enumerate(order)]
        kids = []
        rank = len(heap)
        while len(heap) > 1 or not kids:
            take = [heapq.heappop(heap) for _ in range(min(M, len(heap)))]
            kids.append([t[2] for t in take])
            heapq.heappush(heap, (sum(t[0] for t in take), rank, -len(kids)))
            rank += 1
        paths = {}
        stack = [(len(kids) - 1, ())]
        while stack:
            n, pre = stack.pop()
            for j, item in enumerate(kids[n]):
                if item > 0:
                    paths[item] = pre + (j,)
                elif item < 0:
                    stack.append((-item - 1, pre + (j,)))
        L = max(len(p) for p in paths.values())
        if L * math.log2(M) <= 60:
            break
        w = np.sqrt(w)
    digits = np.full((k + 1, L), -1, dtype=np.int64)
    digits[0] = 0
    for y, p in paths.items():
        digits[y, :len(p)] = p
    return digits


def node_keys(digits: np.ndarray, M: int) -> np.ndarray:
    """keys (k+1, L) int64: the node at depth d on each label's path, numbered as in the complete
    M-ary tree (breadth first: depth offset + the path prefix read in base M); -1 past the
    label's leaf (digit -1)."""
    k1, L = digits.shape
    keys = np.full((k1, L), -1, dtype=np.int64)
    offset = 0
    prefix = np.zeros(k1, dtype=np.int64)
    live = np.ones(k1, dtype=np.bool_)
    for d in range(L):
        live &= digits[:, d] >= 0
        keys[live, d] = offset + prefix[live]
        offset += M ** d
        prefix = prefix * M + np.maximum(digits[:, d], 0)
    return keys


class MaryTree(Reduction):
    """See the module docstring."""

    name = "mtree"
    slot_mode = MODE_CPT
    own_loss = True
    reports_log_loss = True
    parallel_predict = False

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        self.D = int(rcfg.dim)
        rows = 1 << int(learner.bits)
        M, L = tree_shape(self.k, int(rcfg.arity), int(rcfg.depth))[:2]
        # checked before anything is allocated: per label its path statistics (L x M), counts
        # and weight; the embedding table and the root's linear weights
        check_memory(8 * (self.k + 1) * (L * M + L + 1) + 4 * rows * (self.D + M),
                     f"k = {self.k} labels and 2^{learner.bits} embeddings of width {self.D}")
        self.label_n = np.zeros(self.k + 1, dtype=np.float64)  # trained weight per label (inspect)
        self.params = np.zeros(T.N_PAR, dtype=np.float64)
        self.params[T.PAR_POWER] = float(learner.config.power_t)
        self.params[T.PAR_NEXT] = float(rcfg.reassign_after)
        self.params[T.PAR_BEAM] = int(rcfg.beam)
        self.params[T.PAR_NEED_PRED] = 1.0
        self.reassignments = 0
        self.fresh = True  # a new model (not loaded): plan() may set the default rate
        self.passes = 0  # planned passes of this run (0: no linear schedule)
        self.passes_seen = 0
        self.E = np.empty((rows, self.D), dtype=np.float32)
        T.init_rows(self.E, int(rcfg.seed), 0, rows)
        self._shape(*tree_shape(self.k, int(rcfg.arity), int(rcfg.depth)))
        self.touched = np.zeros(rows, dtype=np.uint8)

    def _shape(self, M: int, L: int, digits: np.ndarray | None = None) -> None:
        """The tree of arity M and depth L: ``digits``, else a random balanced assignment; no node
        weights yet."""
        from ..errors import ConfigError

        if M ** L < self.k:
            raise ConfigError(f"--depth {L} is too small: {M}**{L} < k = {self.k}")
        if L * math.log2(M) > 60:
            raise ConfigError(f"--depth {L} is too large for arity {M}")
        self.M, self.L = M, L
        self.stats = np.zeros((self.k + 1, L, M), dtype=np.float64)
        self.cnt = np.zeros((self.k + 1, L), dtype=np.float64)
        self.node_key = np.zeros(0, dtype=np.int64)
        self.W = np.zeros((0, M, self.D), dtype=np.float32)
        lin = float(self.config.linear)
        self.params[T.PAR_LIN] = (LINEAR_RATE if L > 1 else LINEAR_RATE_FLAT) if lin < 0 else lin
        self.U = np.zeros((self.E.shape[0] if self.params[T.PAR_LIN] > 0 else 0, M), dtype=np.float32)
        self._set_digits(initial_digits(self.k, M, L, int(self.config.seed)) if digits is None else digits)
        self._work(1)

    @staticmethod
    def n_models_for(rcfg) -> int:
        return 1

    # -- structure ---------------------------------------------------------------------------
    def _set_digits(self, digits: np.ndarray) -> None:
        """Paths from the digits: node rows (existing keys keep their rows and weights; new
        keys get new zero rows), children table and per-label path arrays."""
        self.digits = digits
        keys = node_keys(digits, self.M)
        live = keys >= 0
        live[0] = False
        used = np.unique(keys[live])
        fresh = np.setdiff1d(used, self.node_key, assume_unique=True)
        if fresh.size:
            self.node_key = np.concatenate([self.node_key, fresh])
            W = np.zeros((self.node_key.size, self.M, self.D), dtype=np.float32)
            W[: self.W.shape[0]] = self.W
            self.W = W
        order = np.argsort(self.node_key, kind="stable")
        rows = np.zeros_like(keys)
        rows[live] = order[np.searchsorted(self.node_key, keys[live], sorter=order)]
        self.path_node = np.ascontiguousarray(rows, dtype=np.int64)
        self.path_child = np.ascontiguousarray(digits, dtype=np.int64)
        child = np.full((self.node_key.size, self.M), -1, dtype=np.int64)
        lens = live.sum(axis=1)
        for d in range(self.L):
            ys = np.flatnonzero(live[:, d])
            tgt = np.where(lens[ys] == d + 1, -ys - 1, rows[ys, min(d + 1, self.L - 1)])
            child[rows[ys, d], digits[ys, d]] = tgt
        self.child = child

    def reassign(self) -> None:
        """The label-assignment step over the statistics gathered since the last one."""
        new = T.assign_labels(self.digits, self.stats, self.cnt, self.M, SLACK)
        self._set_digits(np.ascontiguousarray(new, dtype=np.int64))
        self.stats[:] = 0.0
        self.cnt[:] = 0.0
        self.reassignments += 1

    def _next_point(self) -> None:
        self.reassign()
        self.params[T.PAR_NEXT] *= 2.0

    def _work(self, width: int):
        w = max(int(self.params[T.PAR_BEAM]), int(width))
        self.h = np.zeros(self.D, dtype=np.float32)
        self.gh = np.zeros(self.D, dtype=np.float32)
        self.zr = np.zeros(self.M, dtype=np.float32)
        self.lp = np.zeros(self.M, dtype=np.float64)
        self.beam = tuple(np.zeros(w, dtype=t) for t in (np.float64, np.int64, np.float64, np.int64))

    # -- training ----------------------------------------------------------------------------
    def plan(self, passes: int, paths, batches=None, lines: int | None = None) -> None:
        """Called by the driver before training ``passes`` passes over ``paths``. With
        ``passes > 1`` over plain files (a data set of known length: their line count), the rate
        falls linearly from eta to 0 over ``passes x lines`` trained examples (fastText's schedule;
        after the first pass the length is the number of examples it trained); the run is planned
        as a whole, so a later ``-i`` run starts a schedule of its own. One pass is a stream:
        ``eta (1 + t/10000) ** -power_t``, so a stream split over runs (save, load, continue)
        trains exactly as one run. A new model without ``-l`` gets the default rate of its
        schedule. ``lines``: the examples of a pass when known otherwise (the Python API's)."""
        n = (count_lines(paths) if lines is None else int(lines)) if passes > 1 else 0
        if n and self.fresh and batches is not None and self.config.tree == "huffman" and self.L > 1 \
                and int(self.config.depth) == 0:
            counts = np.zeros(self.k + 1, dtype=np.float64)
            for b in batches():
                ok = (b.labels >= 1) & (b.labels <= self.k)
                counts += np.bincount(b.labels[ok], weights=b.weights[ok], minlength=self.k + 1)
            digits = huffman_digits(counts[1:], self.M)
            self._shape(self.M, digits.shape[1], digits)
            self.params[T.PAR_NEXT] = 0.0  # never re-assigned: no label statistics (k x L x M)
            self.stats = np.zeros((0, self.L, self.M), dtype=np.float64)
            self.cnt = np.zeros((0, self.L), dtype=np.float64)
        if self.fresh and self.learner.config.learning_rate is None:
            self.learner.arrays.hp[HP_ETA] = default_eta(passes * n) if n else ETA_POWER
        self.passes, self.passes_seen = (int(passes), 0) if n else (0, 0)
        self.params[T.PAR_START] = self.params[T.PAR_CLOCK]
        self.params[T.PAR_TOTAL] = float(passes) * n if n else 0.0

    def end_pass(self) -> None:
        self.passes_seen += 1
        if self.passes and self.passes_seen == 1:  # the exact length: what the first pass trained
            trained = self.params[T.PAR_CLOCK] - self.params[T.PAR_START]
            if trained > 0:
                self.params[T.PAR_TOTAL] = self.passes * trained

    def set_need_predictions(self, need: bool) -> None:
        self.params[T.PAR_NEED_PRED] = 1.0 if need else 0.0

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        losses = np.zeros(n, dtype=np.float64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        self.params[T.PAR_ETA] = float(self.learner.arrays.hp[HP_ETA])
        self.params[T.PAR_L1] = float(self.learner.arrays.hp[HP_L1])
        self.params[T.PAR_L2] = float(self.learner.arrays.hp[HP_L2])
        labels = np.ascontiguousarray(batch.labels, dtype=np.int64)
        bl, bn, cl, cn = self.beam
        run_resuming(lambda i: T.mtree_process(self.E, self.U, self.W, self.child, self.path_node, self.path_child,
                                               self.stats, self.cnt, self.touched, self.params, batch.indptr,
                                               batch.indices, batch.values, labels, batch.weights, train, i,
                                               preds, losses, self.h, self.gh, self.zr, self.lp, bl, bn, cl, cn),
                     n, self._next_point)
        np.add.at(self.label_n, labels[train], batch.weights[train])
        return preds, losses

    # -- prediction ----------------------------------------------------------------------------
    def predict_top(self, batch, n):
        m = len(batch)
        n = max(1, int(n))
        self._work(n)
        labs = np.zeros((m, n), dtype=np.int64)
        probs = np.zeros((m, n), dtype=np.float64)
        p_true = np.zeros(m, dtype=np.float64)
        bl, bn, cl, cn = self.beam
        T.mtree_top(self.E, self.U, self.W, self.child, self.path_node, self.path_child, self.params, batch.indptr,
                    batch.indices, batch.values, np.ascontiguousarray(batch.labels, dtype=np.int64), n, labs, probs,
                    p_true, self.h, self.zr, self.lp, bl, bn, cl, cn)
        return labs, probs, p_true

    # -- persistence ---------------------------------------------------------------------------
    def state(self) -> dict:
        rows = np.flatnonzero(self.touched).astype(np.int64)
        return {"digits": self.digits.copy(), "node_key": self.node_key.copy(), "W": self.W.copy(),
                "E_rows": rows, "E": self.E[rows].copy(), "U": self.U[rows if self.U.shape[0] else rows[:0]].copy(),
                "stats": self.stats.copy(), "cnt": self.cnt.copy(), "label_n": self.label_n.copy(),
                "clock": self.params[[T.PAR_CLOCK, T.PAR_NEXT]].copy()}

    def meta(self) -> dict:
        return {"k": self.k, "arity": self.M, "depth": self.L, "dim": self.D, "reassignments": self.reassignments}

    def load_state(self, arrays: dict, meta: dict) -> None:
        need = ("digits", "node_key", "W", "E_rows", "E", "stats", "cnt", "label_n", "clock")
        for name in need:
            if name not in arrays or arrays[name] is None:
                raise ValueError(f"missing mtree array {name!r}")
        M0, L0 = int(self.config.arity), int(self.config.depth)
        shape = (int(meta.get("arity", -1)), int(meta.get("depth", -1)))
        digits = arrays["digits"]
        huffman = digits.ndim == 2 and digits.shape[1] == shape[1] and bool(np.any(digits < 0))
        if shape != (self.M, self.L) and (shape == (M0, tree_depth(self.k, M0, L0))  # from before the flat default
                                          or (huffman and shape[0] == M0 and 1 <= shape[1] <= 64)):
            self._shape(*shape)
        if int(meta.get("k", -1)) != self.k or int(meta.get("depth", -1)) != self.L \
                or int(meta.get("arity", -1)) != self.M or int(meta.get("dim", -1)) != self.D:
            raise ValueError("mtree k/arity/depth/dim disagree with the header")
        k1, L, M, D = self.k + 1, self.L, self.M, self.D
        key, W = arrays["node_key"], arrays["W"]
        rows, E = arrays["E_rows"], arrays["E"]
        stats, cnt, clock = arrays["stats"], arrays["cnt"], arrays["clock"]
        ks = k1 if stats.shape[:1] != (0,) or clock.shape != (2,) or clock[1] > 0 else 0  # none: never re-assigned
        checks = [(digits, np.int64, (k1, L)), (key, np.int64, (key.shape[0],)), (W, np.float32, (key.shape[0], M, D)),
                  (rows, np.int64, (rows.shape[0],)), (E, np.float32, (rows.shape[0], D)),
                  (stats, np.float64, (ks, L, M)), (cnt, np.float64, (ks, L)), (clock, np.float64, (2,)),
                  (arrays["label_n"], np.float64, (k1,))]
        for a, dt, shape in checks:
            if a.dtype != dt or a.shape != shape:
                raise ValueError("mtree arrays have the wrong shape or type")
        nrows = self.E.shape[0]
        if rows.size and (rows[0] < 0 or rows[-1] >= nrows or np.any(rows[1:] <= rows[:-1])):
            raise ValueError("mtree embedding rows invalid")
        if np.any(digits < -1) or np.any(digits >= M) or np.any(digits[0] != 0) or np.any(digits[:, 0] < 0) \
                or np.any((digits[:, 1:] >= 0) & (digits[:, :-1] < 0)):
            raise ValueError("mtree digits out of range")
        keys = node_keys(digits, M)[1:]
        slot = keys * M + digits[1:]  # (node, child) of each step of each path
        last = (keys >= 0).sum(axis=1) - 1
        leaf = slot[np.arange(self.k), last]
        inner = slot[(keys >= 0) & (np.arange(L) < last[:, None])]
        if np.unique(leaf).size != self.k or np.intersect1d(leaf, inner).size:
            raise ValueError("mtree labels share a leaf")
        if key.size and (np.any(key < 0) or np.unique(key).size != key.size):
            raise ValueError("mtree node keys invalid")
        if np.setdiff1d(np.unique(keys[keys >= 0]), key).size:
            raise ValueError("mtree node keys do not cover the paths")
        if not (np.all(np.isfinite(clock)) and clock[0] >= 0 and clock[1] >= 0):
            raise ValueError("mtree clock invalid")
        U = arrays.get("U")  # absent in models from before --linear: no linear weights trained
        if U is not None and (U.dtype != np.float32 or U.shape != ((rows.shape[0] if self.U.shape[0] else 0), M)):
            raise ValueError("mtree linear weights have the wrong shape or type")
        self.node_key = key.copy()
        self.W = W.copy()
        self._set_digits(digits.copy())
        self.E[rows] = E
        if U is not None and self.U.shape[0]:
            self.U[rows] = U
        self.touched[rows] = 1
        self.stats = stats.copy()
        self.cnt = cnt.copy()
        self.label_n = arrays["label_n"].copy()
        self.params[T.PAR_CLOCK] = clock[0]
        self.params[T.PAR_NEXT] = clock[1]
        self.reassignments = int(meta.get("reassignments", 0))
        self.fresh = False

    # -- description ---------------------------------------------------------------------------
    def summary_extra(self) -> dict:
        return {"reassignments": self.reassignments}

    def label_levels(self):
        """Leaves are labels: the trained examples of each label (``label_n``), grouped by the
        nodes of the current tree."""
        levels = []
        n = self.label_n[1:]
        for d in range(self.L + 1):
            if d == 0:
                levels.append([n])
                continue
            # a label whose leaf is above depth d (a Huffman tree) is a cell of its own
            node = np.where(self.path_child[1:, d] >= 0, self.path_node[1:, d],
                            -1 - np.arange(self.k)) if d < self.L else np.arange(self.k)
            order = np.argsort(node, kind="stable")
            cuts = np.flatnonzero(np.diff(node[order])) + 1
            levels.append(np.split(n[order], cuts))
        return levels, [np.array([c]) for c in n]

    def inspect(self) -> dict:
        used = self.child >= 0
        return {"reduction": self.name, "k": self.k, "arity": self.M, "depth": self.L, "dim": self.D,
                "nodes": int(np.unique(self.path_node[1:]).size), "node_rows": int(self.node_key.size),
                "reassignments": self.reassignments, "trained_examples": int(self.params[T.PAR_CLOCK]),
                "next_reassignment": int(self.params[T.PAR_NEXT]),
                "embedding_rows_trained": int(self.touched.sum()),
                "internal_links": int(used.sum())}
