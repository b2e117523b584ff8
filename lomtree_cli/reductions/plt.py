"""Probabilistic label tree (PLT) over a k-means label tree, trained online in one pass.

A wide label tree whose leaves are the labels: each node ``v`` (but the root) owns a logistic
regressor estimating ``P(y in subtree(v) | y in subtree(parent(v)), x)``, and ``P(y|x)`` is the
product along the root-to-leaf path (Jasinska et al., *Extreme F-measure maximization using
sparse probability estimates*, ICML 2016; Jasinska-Kobus et al., *Online Probabilistic Label
Trees*, AISTATS 2021; for one label per example this is a hierarchical softmax with one-vs-
siblings logistic nodes, napkinXC's ``HSM``/``PLT``).

Choices (measured in one pass at ``-b 24``; figures and what lost in ``bench/notes/plt.md``):

* **Label tree: balanced hierarchical k-means on label centroids from a prefix of the stream.**
  The first ``--tree-buffer`` examples (default 1,000,000, and at most ``BUFFER_FEATURES``
  feature entries, about 400 MB) are held in memory; their labels' centroids (mean of the L2-normalised examples,
  count-sketched to at most 1,024 dimensions, 256 for 4,096 labels of label sets, centred, L2-normalised) are split recursively into
  at most M balanced groups by spherical k-means with a greedy capacity-constrained assignment,
  so the tree has the minimal depth ``ceil(log_M n_labels)``. Then the buffered examples are
  trained in order and the rest of the stream follows. Each example is still learned exactly
  once (one pass), and its progressive prediction is made before it is learned: while the prefix
  is buffered the prediction is the most frequent label so far (the model has no weights yet),
  and that is what the table and ``-p`` show for them. Once the tree is built, the replay
  predicts each buffered example again before it learns it, and the losses (progressive and
  holdout) count that prediction instead (``progressive_amendment``): a run shorter than the
  buffer reports the tree's progressive loss, not a frequency table's. The buffer is also
  emptied at the end of a pass and before a model is saved.
* **The buffer replayed in a random order** (``--shuffle-buffer``; default with label sets from
  k = 4,096): a stream sorted by something its labels follow (package names, dates, sources)
  would end the replay with its last labels' updates; the permutation is seeded by ``--seed``.
  Later examples, and later passes, keep the stream's order.
* **Labels unseen when the tree was built** are inserted online at the example that brings them
  (``plt_kernels.insert_label``): descend to the child of highest probability, discounted by
  the labels its subtree holds (so the tree stays near ``log_M k`` deep when most labels arrive
  after the buffer); add the leaf under the first node with free arity, else a new sibling
  group, else push the full group down one level.
* **Leaves trained one-against-some** (``--no-leaf-negatives`` turns it off): besides the PLT
  updates (each node on the label's path toward +1, its siblings toward -1), every candidate
  leaf of the example's beam is trained toward -1, so a leaf's regressor competes with the
  labels it is actually confused with (the Recall tree's idea: Daume III, Karampatziakis,
  Langford, Mineiro, *Logarithmic Time One-Against-Some*, ICML 2017).
* **Ranking: ``log P(leaf | parent) + gamma * log P(parent path)``**, gamma = ``--path-weight``
  (1 is the PLT's path probability). By default (``--path-weight -1``) gamma is chosen by
  progressive validation: the beam, and so training, does not depend on gamma, so every trained
  example scores each gamma of ``plt_kernels.GAMMAS`` (0.25, 0, 0.5, 0.75, 1) on the ranking it
  gets right before its update, and the best so far ranks the next predictions (and is saved).
  The best fixed gamma differs by task (synth 0, next word 1, KJV book 0.5; ``bench/notes/plt.md``).
  ``--probabilities`` and ``--top-k`` report the path probability ``P(y|x)`` of the ranked
  candidates.
* **Arity M** (``--arity``, default 32) and **beam width B** (``--beam``, default 10): prediction
  scores at most ``B * M`` regressors per level, training ``M`` per level plus at most ``B * M``
  candidate leaves, so an example costs ``O(B * M * log_M k)``. Single-label from k = 4,096
  (``registry.LARGE_K``): beam 4 and arity 8, from k = 32,769 16 (``registry.large_k_arity``):
  at k = 100,000 (5 levels) at most 320 regressors scored against OAA's 100,000.
* **Node loss: squared** (the default loss of this reduction; probability ``(clip(f)+1)/2``):
  logistic loss under the same adaptive update was 3-5 points worse in one pass on Sector.
* **Regressors in blocks** (block slot mode, ``kernels.linear``): the children of a node are
  ``W`` adjacent regressors (``W`` = M rounded up to a power of two), so a feature's weights for
  all children of a node sit in adjacent rows and a node is scored in one pass over the example.
  The tree grows without moving weights (each internal node owns a block; a push-down hands the
  block to the node that takes the children).

Model state: ``child`` (n_nodes, M), ``nchild, parent, label, block`` (int64); ``nleaves``,
``reg`` and ``leaf_of`` are rebuilt and the structure validated on load. Models of layout 1
(regressor = node id in CPT slot mode, before blocks) are refused with a message naming it.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import plt_kernels as P
from ..errors import ConfigError
from ..kernels.linear import HP_CLOCK, HP_GROUP, HP_NAN, HP_W, MODE_BLOCK
from ..batch import ExampleBatch
from ..learner import check_memory
from ..multilabel import in_sets
from ..workers import Pool
from .base import Reduction, run_resuming

#: most feature entries the tree-building buffer holds (about 12 bytes each)
BUFFER_FEATURES = 1 << 25
#: most dimensions (log2) of the label-centroid sketch, and the memory it may take (float64)
SKETCH_MAX_BITS = 10
SKETCH_BYTES = 1 << 28
#: label sets of this many labels have a sketch of at most 2^SKETCH_LARGE_BITS dimensions: 256
#: builds as good a tree as 1,024 there in a quarter of the k-means work (one pass, P@1 / P@3 / P@5:
#: PyPI names 54.59 / 36.09 / 25.70 against 54.70 / 36.12 / 25.75, its 10% 44.33 / 26.80 / 18.53
#: against 44.52 / 26.69 / 18.53, three trees 45.16 / 28.14 / 19.85 against 45.15 / 28.18 / 19.90;
#: 10-20% less CPU); not below it (Delicious, 983 labels, 10 passes: P@5 58.01 -> 57.60) nor for
#: one label an example (next word, 20,001 classes: error 78.66 -> 78.72 %), where it was not won
SKETCH_LARGE_LABELS = 4096
SKETCH_LARGE_BITS = 8
KMEANS_ITERS = 12
#: fewest examples of a batch part that ``--threads`` gives a thread of its own
MIN_PART = 64


#: layout version of the PLT state (1: one regressor per node id in CPT slot mode; 2: blocks)
PLT_FORMAT = 2


def block_width(M: int) -> int:
    """W: the arity rounded up to a power of two."""
    return 1 << max(0, int(M - 1).bit_length())


def _empty_tree(cap: int, M: int, k: int) -> P.PltTree:
    t = P.PltTree(np.full((cap, M), -1, dtype=np.int64), np.zeros(cap, np.int64), np.full(cap, -1, np.int64),
                  np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.full(k + 1, -1, np.int64),
                  np.full(cap, -1, np.int64), np.full(cap, -1, np.int64), np.zeros(P.N_CT, np.int64))
    t.counts[P.CT_NODES] = 1  # the root, owner of block 0
    t.block[0] = 0
    t.counts[P.CT_BLOCKS] = 1
    return t


def _grow(tree: P.PltTree, cap: int) -> P.PltTree:
    M = tree.child.shape[1]
    new = _empty_tree(cap, M, tree.leaf_of.shape[0] - 1)
    n = int(tree.counts[P.CT_NODES])
    for name in ("child", "nchild", "parent", "label", "nleaves", "block", "reg"):
        getattr(new, name)[:n] = getattr(tree, name)[:n]
    new.leaf_of[:] = tree.leaf_of
    new.counts[:] = tree.counts
    return new


def _caps(n: int, m: int) -> np.ndarray:
    """The sizes of m balanced clusters of n items (int64): they differ by at most one."""
    cap = np.full(m, n // m, dtype=np.int64)
    cap[: n % m] += 1
    return cap


def balanced_kmeans(X: np.ndarray, m: int, init: np.ndarray, iters: int = KMEANS_ITERS) -> np.ndarray:
    """Cluster ids (int64, (n,)) of the rows of X (L2-normalised) into m clusters of the sizes
    ``_caps(n, m)`` (every cluster is filled to its cap: the caps sum to n): spherical k-means from
    the centres ``X[init]``, each assignment step greedy over (row, centre) pairs by decreasing
    cosine similarity under the size caps."""
    n = X.shape[0]
    cap0 = _caps(n, m)
    centers = X[init]
    assign = np.full(n, -1, dtype=np.int64)
    for _ in range(iters):
        S = X @ centers.T
        new = np.empty(n, dtype=np.int64)
        P.greedy_balanced_assign(S, cap0.copy(), new)
        if np.array_equal(new, assign):
            break
        assign = new
        centers = np.zeros((m, X.shape[1]))
        P.cluster_sums(assign, X, centers)
        nrm = np.linalg.norm(centers, axis=1, keepdims=True)
        nrm[nrm == 0] = 1.0
        centers /= nrm
    return assign


def _groups(n: int, M: int) -> int:
    """Into how many clusters a group of n > M labels is split: ``ceil(n / M**(depth-1))``,
    depth = ``ceil(log_M n)``."""
    depth = 1
    while M ** depth < n:
        depth += 1
    return -(-n // M ** (depth - 1))


def kmeans_tree(labels: np.ndarray, X: np.ndarray, M: int, seed: int, threads: int = 1):
    """Parent and label arrays (creation order, root 0) of a balanced M-ary label tree over
    ``labels`` (int64, (n,)) by recursive balanced k-means on their centroids X (n, d): a group
    of more than M labels is split into ``_groups(n, M)`` clusters, so the tree has the minimal
    depth of an M-ary tree over n leaves.

    The sizes of every group follow from n and M alone (``balanced_kmeans`` fills each cluster to
    its cap), so the random first centres are drawn up front, in the order of a depth-first build
    (node by node, first child first); the splits then run level by level, ``threads`` at once,
    and the tree is the same for any number of threads."""
    rng = np.random.default_rng(seed)
    init = {}  # path of child positions from the root -> the rows of its first centres
    stack = [((), labels.shape[0])]
    while stack:
        path, n = stack.pop()
        if n > M:
            m = _groups(n, M)
            init[path] = rng.choice(n, m, replace=False)
            stack.extend((path + (c,), int(size)) for c, size in reversed(list(enumerate(_caps(n, m)))))
    assign = {}
    level = [((), np.arange(labels.shape[0]))]
    def split(path, idx):
        return balanced_kmeans(X[idx], init[path].shape[0], init[path])

    pool = Pool(threads, "lomtree-kmeans") if threads > 1 else None
    try:
        while level:
            level = [(path, idx) for path, idx in level if path in init]
            if pool is None:
                got = [split(path, idx) for path, idx in level]
            else:
                got = [job.result() for job in [pool.submit(split, path, idx) for path, idx in level]]
            nxt = []
            for (path, idx), a in zip(level, got):
                assign[path] = a
                nxt.extend((path + (c,), idx[a == c]) for c in range(init[path].shape[0]))
            level = nxt
    finally:
        if pool is not None:
            pool.shutdown()
    parent = [-1]
    label = [0]
    stack = [(0, (), np.arange(labels.shape[0]))]
    while stack:
        node, path, idx = stack.pop()
        if path not in assign:
            for i in idx:
                parent.append(node)
                label.append(int(labels[i]))
            continue
        kids = []
        for c in range(init[path].shape[0]):
            parent.append(node)
            label.append(0)
            kids.append((len(parent) - 1, path + (c,), idx[assign[path] == c]))
        stack.extend(reversed(kids))
    return np.array(parent, dtype=np.int64), np.array(label, dtype=np.int64)


def complete_tree(k: int, M: int) -> tuple[np.ndarray, np.ndarray]:
    """Parent and label arrays (int64) of VW's ``--plt`` tree: the complete M-ary tree of k leaves
    numbered heap-style (node v's children ``M v + 1 .. M v + M``), label l (1-based) at VW's node
    ``ti + l - 1`` (``ti`` internal nodes), under a root of one child. VW's root owns a regressor
    (every example trains it, and its probability multiplies every label's) where lomtree's root
    has none: lomtree's node ``v + 1`` is VW's node ``v``."""
    a = M ** int(math.floor(math.log(k) / math.log(M) + 1e-12))  # VW's node count, as VW computes it
    t = int(k - (a - math.ceil((k - a) / (M - 1.0))) + (M * a - 1.0) / (M - 1.0))
    ti = t - k
    v = np.arange(t, dtype=np.int64)
    parent = np.empty(t + 1, dtype=np.int64)
    parent[0] = -1
    parent[1] = 0
    parent[2:] = 1 + (v[1:] - 1) // M
    label = np.zeros(t + 1, dtype=np.int64)
    label[1 + ti:] = np.arange(1, k + 1)
    return parent, label


def block_group(given: int, k: int, M: int, W: int, bits: int) -> int:
    """G of the block layout (``kernels.linear``, mode 2): ``--block-group``, or with 0 the blocks
    of a balanced tree of k leaves and arity M, ``ceil((k - 1) / (M - 1))``, so that a feature's
    region holds the whole tree's rows and no more (a region larger than the blocks in use would
    leave the rest of its rows empty and crowd the features into fewer regions: Sector, 4 blocks,
    G = 64: 17.3 % error against 12.3 %); at most 2^bits / W, so that a group never wraps around
    a small table."""
    if given < 0:
        raise ConfigError(f"--block-group must be >= 0 (0: one group for a balanced tree of k labels), got {given}")
    g = given if given > 0 else max(1, -(-(k - 1) // (M - 1)))
    return max(1, min(g, (1 << bits) // W))


class ProbabilisticLabelTree(Reduction):
    """PLT reduction (see the module docstring)."""

    name = "plt"
    # a built tree (every loaded model) with no example to train: plt_process and plt_top only
    # read the tree and the weights, their beams and scores are arrays of the call
    parallel_predict = True
    parallel_top = True
    slot_mode = MODE_BLOCK
    fixed_models = False

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        # checked before anything is allocated: label frequencies, and for every label a leaf
        # (tree arrays) and its regressor's normaliser state
        check_memory(48 * (self.k + 1), f"the label tree of k = {self.k} labels")
        self.M = int(rcfg.arity)
        self.W = block_width(self.M)
        if self.W > 1 << learner.bits:
            raise ConfigError(f"plt: --arity {self.M} needs at least {self.W.bit_length() - 1} hash bits (-b)")
        learner.arrays.hp[HP_W] = self.W
        learner.arrays.hp[HP_GROUP] = block_group(int(rcfg.block_group), self.k, self.M, self.W, learner.bits)
        learner.ensure_models(self.W)
        self.tree = _empty_tree(16, self.M, self.k)
        self.params = np.zeros(P.N_PAR, dtype=np.float64)
        self.params[P.PAR_ARITY] = self.M
        self.params[P.PAR_BEAM] = int(rcfg.beam)
        self.params[P.PAR_LOGISTIC] = 1.0 if learner.config.loss == "logistic" else 0.0
        self.params[P.PAR_NEED_PRED] = 1.0
        self.need_predictions = True
        auto = float(rcfg.path_weight) < 0.0
        self.params[P.PAR_AUTO] = 1.0 if auto else 0.0
        self.params[P.PAR_GAMMA] = P.GAMMAS[0] if auto else float(rcfg.path_weight)
        self.gstats = np.zeros(P.GAMMAS.shape[0], dtype=np.float64)
        self.params[P.PAR_NEGATIVES] = 1.0 if rcfg.leaf_negatives else 0.0
        self.buffer_limit = int(rcfg.tree_buffer)
        self.shuffle = bool(rcfg.shuffle_buffer)
        self.built = self.buffer_limit == 0
        self.complete = bool(rcfg.complete_tree)
        if self.complete:  # VW's fixed tree, every label placed before the first example
            self._set_structure(*complete_tree(self.k, self.M))
            self.built = True
        self.buffer: list = []  # (batch copy, train mask, label-frequency predictions)
        self.buffered = 0
        self.buffered_features = 0
        self.amendment = None  # (progressive, holdout) loss sums the replay changed (``flush``)
        self.freq = np.zeros(self.k + 1, dtype=np.int64)
        self._room_labels = 1  # the most labels one example of the running batch may insert
        self.threads = 1  # train --threads (set_train_threads)

    @staticmethod
    def n_models_for(rcfg) -> int:
        return block_width(int(rcfg.arity))  # the root's block; grows with the tree

    @property
    def n_nodes(self) -> int:
        return int(self.tree.counts[P.CT_NODES])

    @property
    def n_labels(self) -> int:
        return int(self.tree.counts[P.CT_LABELS])

    # -- training ----------------------------------------------------------------------------
    def _run(self, batch, train) -> np.ndarray:
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        # learn_block keeps one rate per (feature, child) of a node (there is room for that many
        # when the batch's features are no more: one example is no longer than all of them)
        if min((int(batch.indptr[-1]) - int(batch.indptr[0])) * self.W, 1 << 20) > self.learner.scratch_features \
                and n and train.any():
            self.learner.ensure_scratch(min(int(batch.n_features.max()) * self.W, 1 << 20))
        lptr, lids = batch.label_sets()  # (one label: a set of one)
        # an example may bring as many new labels as it has: room for all of them at once
        self._room_labels = max(1, int(np.diff(lptr).max())) if n and batch.label_ptr is not None else 1
        parts = min(self.threads, n // MIN_PART)
        if parts > 1:
            return self._run_parts(batch, train, lptr, lids, parts)
        run_resuming(lambda i: P.plt_process(self.learner.arrays, self.tree, self.params, self.gstats, batch.indptr,
                                             batch.indices, batch.values, lptr, lids, batch.weights, train, i, preds),
                     n, self._make_room)
        return preds

    def _run_parts(self, batch, train, lptr, lids, parts: int) -> np.ndarray:
        """``_run`` in ``parts`` threads, Hogwild style (Recht et al. 2011, as fastText's
        ``-thread``): consecutive parts of the batch learned at once on the shared weights, G, N
        and per-regressor normalisers, without locks (an update may overwrite a concurrent one).
        The tree must not change while the threads read it: the batch's unseen labels are inserted
        first, in stream order (``plt_insert_unseen``), growing the arrays as needed. Each thread
        has its own scratch, SGD clock, NaN count, gamma statistics and parameters; the counts are
        summed after. Every thread's clock starts at the batch's: the parts are learned at the same
        time (with the clock of a part's place in the stream, ``--average`` weighed the later parts'
        updates down: 10 points of P@1 lost on Bibtex)."""
        n = len(batch)
        run_resuming(lambda i: P.plt_insert_unseen(self.learner.arrays, self.tree, self.params, batch.indptr,
                                                   batch.indices, batch.values, lptr, lids, train, i),
                     n, self._make_room)
        lin = self.learner.arrays
        cut = [n * j // parts for j in range(parts + 1)]
        g0, nan0, clock0 = self.gstats.copy(), lin.hp[HP_NAN], lin.hp[HP_CLOCK]
        states = [(lin, self.params, self.gstats)]
        for _ in range(1, parts):
            states.append((lin._replace(hp=lin.hp.copy(), scratch=np.zeros_like(lin.scratch),
                                        work=np.zeros_like(lin.work)), self.params.copy(), g0.copy()))

        def part(j):
            a, b = cut[j], cut[j + 1]
            out = np.zeros(b - a, dtype=np.int64)
            ln, params, gstats = states[j]
            P.plt_process(ln, self.tree, params, gstats, batch.indptr[a:b + 1], batch.indices, batch.values,
                          lptr[a:b + 1], lids, batch.weights[a:b], train[a:b], 0, out)
            return out

        pool = Pool(parts - 1, "lomtree-train")  # (a thread costs ~0.1 ms, a batch part ~100 ms)
        try:
            jobs = [pool.submit(part, j) for j in range(1, parts)]
            preds = [part(0)] + [job.result() for job in jobs]
        finally:
            pool.shutdown()
        for ln, _, gstats in states[1:]:
            lin.hp[HP_CLOCK] += ln.hp[HP_CLOCK] - clock0
            lin.hp[HP_NAN] += ln.hp[HP_NAN] - nan0
            self.gstats += gstats - g0
        if self.params[P.PAR_AUTO]:
            self.params[P.PAR_GAMMA] = P.GAMMAS[int(np.argmax(self.gstats))]
        return np.concatenate(preds)

    @property
    def n_blocks(self) -> int:
        return int(self.tree.counts[P.CT_BLOCKS])

    def _make_room(self) -> None:
        """Double the nodes and regressors the insertions of one example lack (one label, or as
        many as the largest label set of the batch)."""
        room = self._room_labels
        need = self.n_nodes + P.ROOM * room
        if need > self.tree.parent.shape[0]:
            self.tree = _grow(self.tree, 2 * need)
        self.learner.ensure_models(self.W * (self.n_blocks + 2 * room))

    def _hold(self, batch, train) -> np.ndarray:
        """Buffer a chunk for the tree; predictions by label frequency. The arrays are copied: a
        parsed chunk's arrays are views of larger worst-case arrays, and a slice's are views of
        the whole chunk, which the buffer should not keep alive."""
        train = np.ascontiguousarray(train, dtype=np.bool_)
        preds = np.zeros(len(batch), dtype=np.int64)
        first = batch.first_labels()  # (0 for an empty label set: nothing to count)
        P.majority_process(self.freq, first, train & (first > 0), preds)
        lo, hi = int(batch.indptr[0]), int(batch.indptr[-1])
        lptr = lids = None
        if batch.label_ptr is not None:
            la, lb = int(batch.label_ptr[0]), int(batch.label_ptr[-1])
            lptr, lids = batch.label_ptr - la, batch.label_ids[la:lb].copy()
        copy = ExampleBatch(labels=batch.labels.copy(), weights=batch.weights.copy(), indptr=batch.indptr - lo,
                            indices=batch.indices[lo:hi].copy(), values=batch.values[lo:hi].copy(),
                            line_numbers=batch.line_numbers.copy(), source=batch.source, label_ptr=lptr,
                            label_ids=lids)
        self.buffer.append((copy, train.copy(), preds.copy()))
        self.buffered += len(batch)
        self.buffered_features += int(batch.indptr[-1] - batch.indptr[0])
        return preds

    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        self.check_label_sets(batch, train)
        if self.built:
            return self._run(batch, train), None
        n = len(batch)
        # the examples that fit under both caps (examples 0..j-1 hold indptr[j] - indptr[0] features)
        left = int(batch.indptr[0]) + BUFFER_FEATURES - self.buffered_features
        fit = int(np.searchsorted(batch.indptr, left, side="right")) - 1
        room = min(self.buffer_limit - self.buffered, fit)
        if n <= room:
            preds = self._hold(batch, train)
            if self.buffered >= self.buffer_limit:
                self.flush()
            return preds, None
        first = self._hold(batch.slice(0, room), train[:room]) if room > 0 else np.zeros(0, np.int64)
        self.flush()
        rest = self._run(batch.slice(room, n), train[room:])
        return np.concatenate([first, rest]), None

    def flush(self) -> None:
        """Build the label tree from the buffered examples and train on them (once)."""
        if self.built:
            return
        self.built = True
        buf, self.buffer = self.buffer, []
        self.freq = np.zeros(0, dtype=np.int64)
        self._build_tree(buf)
        # the replay predicts each buffered example before learning it, as the examples after
        # the buffer are; the losses then count that prediction instead of the label frequency's
        # (held-out examples always are predicted, trained ones unless ``skips_progressive``)
        self.params[P.PAR_NEED_PRED] = 1.0 if self.need_predictions else 0.0
        trained = not self.skips_progressive
        d_prog = d_hold = 0.0
        if self.shuffle and buf:  # (an empty buffer: no example yet, or a model saved before any)
            buf = _shuffled(buf, int(self.config.seed))
        for b, t, freq in buf:
            preds = self._run(b, t)
            lptr, lids = b.label_sets()
            change = np.where(b.labels > 0, b.weights, 0.0) * (
                (~in_sets(preds, lptr, lids)).astype(np.float64) - (~in_sets(freq, lptr, lids)))
            d_hold += float(change[~t].sum())
            if trained:
                d_prog += float(change[t].sum())
        self.amendment = (d_prog, d_hold)

    def set_need_predictions(self, need: bool) -> None:
        """Without a reader of the progressive predictions, a trained example whose beam serves
        nothing else (no leaf negatives, a fixed path weight: the k >= 4,096 defaults) is not
        predicted at all (``PAR_NEED_PRED``); held-out examples always are."""
        self.need_predictions = bool(need)
        self.params[P.PAR_NEED_PRED] = 1.0 if need else 0.0

    @property
    def skips_progressive(self) -> bool:
        # plt_process's rule: the beam still runs for the leaf negatives or the path weight's counts
        return not (self.need_predictions or self.params[P.PAR_NEGATIVES] or self.params[P.PAR_AUTO])

    def _build_tree(self, buf) -> None:
        if not buf:
            return
        pairs = [_label_pairs(b, t) for b, t, _ in buf]  # (example, label) of the trained examples
        labels = np.concatenate([lab for _, lab in pairs])
        seen = np.flatnonzero(np.bincount(labels, minlength=self.k + 1)[1:]) + 1
        if seen.size == 0:
            return
        X, cnt = label_sketch([b for b, _, _ in buf], pairs, seen, self.k, sketch_bits(seen.size, self.multilabel))
        self.tree_from_sketch(seen, X, cnt)

    def tree_from_sketch(self, seen: np.ndarray, X: np.ndarray, cnt: np.ndarray) -> None:
        """Build the k-means label tree of the labels ``seen`` from their centroid sketches' sums
        ``X`` (``label_sketch``; sums over several parts of the input add up) and example counts
        ``cnt``; the tree is then built (``distributed.train`` builds it once from every shard's sums)."""
        X /= cnt[:, None]  # (in place: X is the caller's, up to SKETCH_BYTES)
        X -= X.mean(axis=0)
        nrm = np.sqrt(np.einsum("ij,ij->i", X, X))[:, None]  # (linalg.norm squares X into a copy first)
        nrm[nrm == 0] = 1.0
        X /= nrm
        parent, label = kmeans_tree(seen, X, self.M, int(self.config.seed), self.threads)
        self._set_structure(parent, label)
        self.built = True
        self.buffer = []

    def _set_structure(self, parent: np.ndarray, label: np.ndarray, child: np.ndarray | None = None,
                       block: np.ndarray | None = None) -> None:
        """Fill the tree from parent/label arrays, the children lists (default: each node's
        children in id order) and the blocks (default: the internal nodes' in id order)."""
        n = parent.shape[0]
        cap = 16
        while cap < n + P.ROOM:
            cap *= 2
        tree = _empty_tree(cap, self.M, self.k)
        tree.parent[:n] = parent
        tree.label[:n] = label
        if child is None:  # each node's children in id order: node v is child number (its rank among its siblings)
            par = parent[1:]
            by_parent = np.argsort(par, kind="stable")
            tree.nchild[:n] = np.bincount(par, minlength=n)
            first = np.cumsum(tree.nchild[:n]) - tree.nchild[:n]
            pos = np.empty_like(par)
            pos[by_parent] = np.arange(par.size) - first[par[by_parent]]
            tree.child[par, pos] = np.arange(1, n)
        else:
            tree.child[:n] = child
            tree.nchild[:n] = (child >= 0).sum(axis=1)
        if block is None:
            block = np.full(n, -1, dtype=np.int64)
            internal = np.flatnonzero(label == 0)
            block[internal] = np.arange(internal.size)
        tree.block[:n] = block
        nb = int(block.max()) + 1
        a, j = np.nonzero(np.arange(self.M) < tree.nchild[:n, None])
        tree.reg[tree.child[a, j]] = block[a] * self.W + j
        leaves = np.flatnonzero(label > 0)
        tree.leaf_of[label[leaves]] = leaves
        up = leaves  # every leaf counts at each of its ancestors, one level up at a time
        while up.size:
            tree.nleaves[:n] += np.bincount(up, minlength=n)
            up = parent[up]
            up = up[up >= 0]
        tree.counts[P.CT_NODES] = n
        tree.counts[P.CT_LABELS] = leaves.size
        tree.counts[P.CT_BLOCKS] = nb
        self.tree = tree
        self.learner.ensure_models(self.W * nb)

    def grow_classes(self, k: int, features: np.ndarray) -> None:
        """Labels up to ``k``: a new label joins the tree online at its first example (blocks
        grow without moving weights); only the arrays indexed by label grow."""
        old = self.k
        leaf_of = np.full(int(k) + 1, -1, dtype=np.int64)
        leaf_of[:old + 1] = self.tree.leaf_of
        self.tree = self.tree._replace(leaf_of=leaf_of)
        if self.freq.shape[0] == old + 1:  # (emptied once the tree is built)
            freq = np.zeros(int(k) + 1, dtype=np.int64)
            freq[:old + 1] = self.freq
            self.freq = freq
        self._set_k(k)

    def set_train_threads(self, n: int) -> None:
        self.threads = max(1, int(n))

    def end_pass(self) -> None:
        self.flush()

    def progressive_amendment(self):
        a, self.amendment = self.amendment, None
        return a

    def summary_extra(self) -> dict:
        return {"label_frequency_predictions": self.buffered} if self.buffered else {}

    def settle(self) -> None:
        """The tree is built from the examples buffered so far (later labels join it online)."""
        self.flush()

    # -- prediction ----------------------------------------------------------------------------
    def predict_top(self, batch, n):
        labs, probs, _, p_true = self.rank_top(batch, n)
        return labs, probs, p_true

    def rank_top(self, batch, n):
        """``predict_top``'s answer and the candidates' ranking scores, ``P(leaf | parent)
        P(parent path)^gamma``: the order of the answer, and what an ensemble averages."""
        m = len(batch)
        n = max(1, int(n))
        labs = np.zeros((m, n), dtype=np.int64)
        probs = np.zeros((m, n), dtype=np.float64)
        ranks = np.zeros((m, n), dtype=np.float64)
        p_true = np.zeros(m, dtype=np.float64)
        P.plt_top(self.learner.arrays, self.tree, self.params, batch.indptr, batch.indices, batch.values,
                  batch.labels, n, labs, probs, ranks, p_true)
        return labs, probs, ranks, p_true

    # -- persistence ---------------------------------------------------------------------------
    def state(self) -> dict:
        self.flush()
        n = self.n_nodes
        t = self.tree
        return {"child": t.child[:n].copy(), "nchild": t.nchild[:n].copy(), "parent": t.parent[:n].copy(),
                "label": t.label[:n].copy(), "block": t.block[:n].copy(), "gamma_stats": self.gstats.copy()}

    def meta(self) -> dict:
        return {"n_nodes": self.n_nodes, "n_labels": self.n_labels, "k": self.k, "plt_format": PLT_FORMAT,
                "path_weight": float(self.params[P.PAR_GAMMA])}

    def load_state(self, arrays: dict, meta: dict) -> None:
        layout = int(meta.get("plt_format", 1))
        if layout != PLT_FORMAT:
            raise ValueError(f"PLT model of layout {layout} (made before the block layout); this version "
                             f"reads layout {PLT_FORMAT}: train it again")
        if int(meta.get("k", -1)) != self.k:
            raise ValueError("PLT k disagrees with the header")
        for name in ("child", "nchild", "parent", "label", "block", "gamma_stats"):
            if name not in arrays:
                raise ValueError(f"missing PLT array {name!r}")
        child, nchild = np.asarray(arrays["child"]), np.asarray(arrays["nchild"])
        parent, label = np.asarray(arrays["parent"]), np.asarray(arrays["label"])
        block = np.asarray(arrays["block"])
        n = parent.shape[0]
        for a in (nchild, parent, label, child, block):
            if a.dtype != np.int64 or a.shape[0] != n:
                raise ValueError("PLT arrays have the wrong shape or type")
        if child.shape != (n, self.M) or n < 1:
            raise ValueError("PLT child array does not match the arity")
        if self.complete:  # VW's fixed tree mixes leaves and internal children: it must be exactly it
            want_parent, want_label = complete_tree(self.k, self.M)
            if not (np.array_equal(parent, want_parent) and np.array_equal(label, want_label)):
                raise ValueError("PLT tree is not the complete tree of --complete-tree")
        _validate(child, nchild, parent, label, self.k, mixed_ok=self.complete)
        internal = label == 0
        if np.any(block[~internal] != -1) or np.any(block[internal] < 0) or \
                np.unique(block[internal]).size != int(internal.sum()):
            raise ValueError("PLT blocks invalid")
        if self.W * (int(block.max()) + 1) > self.learner.n_models:
            raise ValueError("PLT uses more regressors than the model stores")
        gstats = np.asarray(arrays["gamma_stats"])
        if gstats.dtype != np.float64 or gstats.shape != P.GAMMAS.shape or not np.all(np.isfinite(gstats)) \
                or np.any(gstats < 0):
            raise ValueError("PLT gamma_stats invalid")
        self._set_structure(parent, label, child, block)
        self.gstats = gstats.copy()
        if self.params[P.PAR_AUTO]:
            self.params[P.PAR_GAMMA] = P.GAMMAS[int(np.argmax(self.gstats))]
        self.built = True
        self.buffer = []

    # -- description ---------------------------------------------------------------------------
    def depths(self) -> np.ndarray:
        n = self.n_nodes
        d = np.zeros(n, dtype=np.int64)
        order = [0]
        for a in order:  # breadth first from the root
            kids = self.tree.child[a, :self.tree.nchild[a]]
            d[kids] = d[a] + 1
            order.extend(kids.tolist())
        return d

    def inspect(self) -> dict:
        n = self.n_nodes
        t = self.tree
        d = self.depths()
        leaf = t.label[:n] > 0
        return {
            "reduction": self.name, "k": self.config.k, "labels": self.n_labels, "nodes": n,
            "regressors": n - 1, "blocks": self.n_blocks, "arity": self.M, "beam": int(self.params[P.PAR_BEAM]),
            "path_weight": float(self.params[P.PAR_GAMMA]),
            "path_weight_chosen": bool(self.params[P.PAR_AUTO]),
            "depth": int(d.max()) if n else 0,
            "balanced_depth": math.ceil(math.log(self.n_labels, self.M)) if self.n_labels > 1 else 0,
            "mean_leaf_depth": round(float(d[leaf].mean()), 4) if leaf.any() else 0.0,
            "levels": [{"depth": lev, "nodes": int((d == lev).sum()), "leaves": int(((d == lev) & leaf).sum())}
                       for lev in range(int(d.max()) + 1 if n else 0)],
        }


def _take(batch, idx: np.ndarray) -> ExampleBatch:
    """The examples ``idx`` of ``batch`` in that order (copies; tags dropped: the buffer keeps none)."""
    counts = np.diff(batch.indptr)[idx]
    indptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    feat = np.repeat(batch.indptr[idx] - indptr[:-1], counts) + np.arange(indptr[-1], dtype=np.int64)
    lptr = lids = None
    if batch.label_ptr is not None:
        lc = np.diff(batch.label_ptr)[idx]
        lptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
        np.cumsum(lc, out=lptr[1:])
        lids = batch.label_ids[np.repeat(batch.label_ptr[idx] - lptr[:-1], lc) + np.arange(lptr[-1], dtype=np.int64)]
    return ExampleBatch(labels=batch.labels[idx], weights=batch.weights[idx], indptr=indptr,
                        indices=batch.indices[feat], values=batch.values[feat],
                        line_numbers=batch.line_numbers[idx], source=batch.source, label_ptr=lptr, label_ids=lids)


def _concat(batches) -> ExampleBatch:
    """One batch of the buffered batches, in order (each with ``indptr[0] == 0``, as ``_hold``
    copies them)."""
    sets = batches[0].label_ptr is not None
    n_feat = np.cumsum([0] + [int(b.indptr[-1]) for b in batches])
    indptr = np.concatenate([np.zeros(1, np.int64)] + [b.indptr[1:] + o for b, o in zip(batches, n_feat)])
    lptr = lids = None
    if sets:
        n_lab = np.cumsum([0] + [int(b.label_ptr[-1]) for b in batches])
        lptr = np.concatenate([np.zeros(1, np.int64)] + [b.label_ptr[1:] + o for b, o in zip(batches, n_lab)])
        lids = np.concatenate([b.label_ids for b in batches])
    return ExampleBatch(labels=np.concatenate([b.labels for b in batches]),
                        weights=np.concatenate([b.weights for b in batches]), indptr=indptr,
                        indices=np.concatenate([b.indices for b in batches]),
                        values=np.concatenate([b.values for b in batches]),
                        line_numbers=np.concatenate([b.line_numbers for b in batches]),
                        source=batches[0].source, label_ptr=lptr, label_ids=lids)


def _shuffled(buf: list, seed: int):
    """The buffered (batch, train mask, frequency predictions) in one random order, in batches of
    the largest buffered batch's size (``--shuffle-buffer``). A stream sorted by anything the
    labels follow (names, time, source) would otherwise end the replay with its last labels'
    updates, and the weights lean toward them; the batch trees see no order. The batches are
    joined into one (the buffer's size again, until ``buf`` is emptied) and taken from it a batch
    at a time."""
    size = max(len(b) for b, _, _ in buf)
    trains = np.concatenate([t for _, t, _ in buf])
    freqs = np.concatenate([f for _, _, f in buf])
    whole = _concat([b for b, _, _ in buf])
    buf.clear()
    order = np.random.default_rng([seed, 0x5EED]).permutation(len(whole))
    for a in range(0, len(whole), size):
        idx = order[a:a + size]
        yield _take(whole, idx), trains[idx], freqs[idx]


def sketch_bits(n_labels: int, label_sets: bool = False) -> int:
    """Dimensions (log2) of the label-centroid sketch of ``n_labels`` labels: at most
    ``SKETCH_MAX_BITS`` (``SKETCH_LARGE_BITS`` for ``label_sets`` of ``SKETCH_LARGE_LABELS``
    labels or more), the sketch within ``SKETCH_BYTES``."""
    large = label_sets and n_labels >= SKETCH_LARGE_LABELS
    bits = SKETCH_LARGE_BITS if large else SKETCH_MAX_BITS
    while bits > 4 and n_labels * 8 << bits > SKETCH_BYTES:
        bits -= 1
    return bits


def label_sketch(batches, pairs, seen: np.ndarray, k: int, bits: int):
    """``(X, cnt)``: for each label of ``seen`` the sum of its examples' sketched, L2-normalised
    feature vectors (a row of X, ``2**bits`` wide) and their number, over ``batches`` and their
    ``(example, label)`` pairs (``_label_pairs``); labels outside ``seen`` are left out."""
    row_of = np.full(k + 1, -1, dtype=np.int64)
    row_of[seen] = np.arange(seen.size)
    X = np.zeros((seen.size, 1 << bits), dtype=np.float64)
    cnt = np.zeros(seen.size, dtype=np.float64)
    for b, (ex, lab) in zip(batches, pairs):
        rows = row_of[lab]
        keep = rows >= 0
        if not keep.all():
            ex, rows = ex[keep], rows[keep]
        P.sketch_centroids(b.indptr, b.indices, b.values, ex, rows, bits, X)
        np.add.at(cnt, rows, 1.0)
    return X, cnt


def _label_pairs(batch, train):
    """(example index, label) of every label of the examples that train: the label centroids'
    terms (an example of a label set is a term of each of its labels' centroids)."""
    ex = batch.label_owner()
    keep = np.asarray(train, dtype=bool)[ex]
    return ex[keep], batch.label_sets()[1][keep]


def _validate(child, nchild, parent, label, k, mixed_ok: bool = False) -> None:
    """ValueError unless the arrays form one tree rooted at 0 whose leaves carry distinct labels
    1..k and whose children are all leaves or all internal (``mixed_ok``: either)."""
    n = parent.shape[0]
    M = child.shape[1]
    if parent[0] != -1 or label[0] != 0:
        raise ValueError("PLT root invalid")
    if np.any(nchild < 0) or np.any(nchild > M):
        raise ValueError("PLT child count out of range")
    if n > 1 and (np.any(parent[1:] < 0) or np.any(parent[1:] >= n)):
        raise ValueError("PLT parent out of range")
    seen = np.zeros(n, dtype=np.int64)
    for a in range(n):
        kids = child[a, :nchild[a]]
        if np.any(child[a, nchild[a]:] != -1) or np.any(kids < 1) or np.any(kids >= n):
            raise ValueError("PLT child link invalid")
        if np.any(parent[kids] != a):
            raise ValueError("PLT parent/child links disagree")
        if not mixed_ok and kids.size and len(set((label[kids] > 0).tolist())) > 1:
            raise ValueError("PLT node mixes leaves and internal children")
        seen[kids] += 1
    if np.any(seen[1:] != 1):
        raise ValueError("PLT nodes are not a tree")
    # a tree: every node reaches the root (parents can be later ids after a push-down)
    for v in range(1, n):
        a, d = v, 0
        while a != 0:
            a = parent[a]
            d += 1
            if d > n:
                raise ValueError("PLT parent links form a cycle")
    leaves = label > 0
    if np.any(leaves & (nchild > 0)) or np.any(~leaves[1:] & (label[1:] != 0)):
        raise ValueError("PLT leaf labels invalid")
    lab = label[leaves]
    if np.any(lab > k) or np.unique(lab).size != lab.size:
        raise ValueError("PLT leaf labels invalid")
