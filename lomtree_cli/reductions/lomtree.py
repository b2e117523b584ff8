"""LOMtree: the online logarithmic-time multiclass tree (docs/ALGORITHMS.md §3.4).

Choromanska & Langford, *Logarithmic Time Online Multiclass prediction*, NIPS 2015, Algorithm 1
with node swapping (VW's ``--log_multi k``). Every internal node ``v`` owns a binary regressor
``h_v``; each class ``y`` is pushed to the side where its expected score ``e_v(y)`` lies relative
to the node's expected score ``E_v`` (routing target ``c = -1 if E_v > e_v(y) else +1``), which
increases ``J(h) = 2 sum_i pi_i |P(h>0) - P(h>0|i)|`` (pure and balanced splits). Examples
descend by the sign of the post-update score; leaves predict their most frequent label. At most
``T`` internal nodes are created; afterwards a leaf that holds many examples not of its majority
label (``C_j - maxcnt_j > R_S (C_root + 1)``) recycles the smallest leaf of the tree and its
parent (the *swap*), and ``UPDATE_C`` keeps ``C_v`` (smallest leaf count below ``v``) correct.

Design (choices the spec leaves open; the kernels are in ``kernels/lomtree_kernels.py``)
-------------------------------------------------------------------------------------
Node records, int64, shape (capacity, ``NF``) — columns ``N_PARENT, N_LEFT, N_RIGHT`` (``-1`` =
none), ``N_INTERNAL`` (0/1), ``N_MODEL`` (regressor id, ``-1`` for a leaf), ``N_C``, ``N_EN``
(training calls), ``N_MAXCNT``, ``N_MAXLAB`` (1-based; starts at 1), ``N_NCLS`` (number of live
class records), ``N_GEN`` (generation, bumped when a swap resets the node). ``Esum`` is a separate
float64 vector. Node capacity starts at ``min(2T+1, 1024)`` and doubles up to ``2T+1`` (the most
nodes a tree with ``T`` internal nodes can have), so memory follows the nodes actually created,
also for ``T = k-1`` with ``k = 10^6``. The root is node 0.

Class records (``cnt(y)``, ``n(y)``, ``msum(y)`` of one node) live in one open-addressing hash
table keyed by ``(node, label)``: int64 ``rec_i`` shape (capacity, 4) = ``R_KEY`` (``node << 32 |
label``, ``-1`` = empty slot), ``R_MSUM`` (read and written through ``rec_f``, a float64 view of
the same rows), ``R_GEN`` and ``R_CN`` (``cnt | n << 32``): 32 bytes a record (at 2.8M records,
300k PyPI summaries, the table is most of LOMtree's memory and its look-ups much of its time).
Counts are 32-bit, as VW's ``log_multi`` keeps them: every example counts its label at the root,
whose records are never reset, so ``n(y) <= cnt(y) <= cnt_root(y)`` at every node, and training
refuses (``InputError``, nothing of the example learned) an example whose label the root has counted
``CNT_MAX = 2^32 - 1`` times; a stream within that is trained exactly as with 64-bit counts.
Linear probing from a SplitMix64 hash of the key; a key occupies at most one slot. A record is
*live* iff its generation equals its node's ``N_GEN``: a swap resets a node in ``O(1)`` by
bumping the generation (no scan of the table); a stale record met again under the same key is
reset and reused, other stale records are dropped at the next rehash. Before each example the
kernel guarantees ``occupied + depth_bound + 2 <= 3/4 capacity`` (one example touches at most
``depth + 1`` records; ``depth_bound`` is the deepest depth ever created, an upper bound because
swaps only move subtrees up); else it stops, and ``_grow_records`` rehashes the live records
within a table enlarged to load <= 1/2 (the old rows copied into a new array, then
``LK.rehash_in_place``; once doubled, to load 3/8, unless stale records are many). So one statistics
look-up is ``O(1)`` expected, and no step ever scans the labels of a node: training costs
``O(depth)`` regressor calls plus ``O(depth)`` look-ups and ``UPDATE_C``/``SWAP`` walks. Memory
grows with (node, label) pairs actually seen, up to ``N = --max-class-records`` (default
``2^(b-4)``): before a training example that could pass it, ``LK.prune_records`` drops the records
of lowest count down to ``3N/4`` (all with ``cnt <= t``, ``t`` the least that suffices), never
the root's, a node's candidate list or its ``maxlab``; ``N >= 2 (k + (2T+1)(L+1) + T + 2)``, at
least twice those, so a prune frees ``N/4``. A dropped label met again starts afresh (``n``,
``e_v(y)``). The layout of the table never changes a result; pruning depends on the records alone.

* ``T`` default ``k - 1`` (``--max-internal-nodes``; VW hard-codes ``k-1``): enough internal
  nodes for a tree with one leaf per class; more (the paper explores up to ``64k-1``) lets
  frequent classes occupy several leaves. The command line's default from ``k = 4096`` on is
  1,023 (``registry.large_k_defaults``): with candidate lists the leaves need not separate the
  classes, and on next-word streams ``k - 1`` nodes grew swap chains hundreds deep.
  ``W = max(1, T)`` regressors are striped over the table (§2.5), model ids ``0..T-1`` assigned at creation and reused by swaps.
* Swap guard (spec choice; VW has none): when the smallest leaf's parent is the root, or the
  smallest leaf is the splitting leaf itself (only with ``R_S = 0``), the swap is refused and the
  leaf stays a leaf for this example.
* The recycled regressor keeps its weights (VW fidelity; resetting would need a scan over the
  model's slots). Its optimiser state (``G, N, S, T``) is kept as well.
* An empty new leaf predicts its parent's label (``maxlab`` inherited at the split).
* Counts are unweighted; ``iw`` only scales the regressor updates. ``iw = 0`` examples are not
  trained (driver contract).
* Scores in ``E_v`` and ``e_v(y)`` are the raw post-update scores (float64 sums, means computed
  on use), descent ``left iff s < 0`` (0 and NaN go right).
* Exact shortcuts (``G_SHORTCUTS``, on): progressive training predicts first, so while the
  training path follows the prediction path a node's pre-update score is the one the prediction
  computed, unless a regressor trained above it in this example may share one of its slots
  (``K.slot_layout``/``K.scores_independent``); the post-update score is summed in the
  update's weight pass when no slot repeats (``K.learn_rescore``). Per trained node that is two
  passes over the features instead of four, with the same bits (tests compare both ways).
  The leaf's candidates likewise (``lomtree_kernels._train_leaf``): their pre-update scores are the
  prediction's when nothing trained since shares their slots, and candidates that share no slot
  with each other are updated in one pass over the features (``K.learn_block``).

Candidate label lists (deviation from the paper, ``--leaf-labels L``, ``--candidates-up U``)
-----------------------------------------------------------------------------------------
The paper's leaf predicts its single most frequent label; with ``L > 0`` every node also keeps
its ``L`` most frequent labels (``node_top``: labels, then their counts; ranked by count
descending, label ascending; kept exact online by ``top_update`` in ``O(L)`` per node of the
training path, since only the example's label's count grows; recomputed from the class records
on load, so not stored). A leaf ``j`` predicts, among the candidates of the node ``U`` levels above
it (the root at most), the one ranked first by its *label regressor*'s score ``f_y`` plus a
label-frequency prior, ``f_y + beta * log(cnt_y / sum of the candidates' counts)`` (first on
ties; ``--label-prior beta``; by default, -1, beta is chosen among ``BETAS`` = 0, 0.02, 0.05, 0.1,
0.2 by progressive validation: before each trained example is learned, every beta's ranking of
its leaf's candidates is checked against its label (the scores are the prediction's, so this
costs no regressor call), and the best so far ranks the next predictions; its counts are saved
as ``prior_stats``; files without them load with beta 0). Label ``y`` owns regressor
``max(1, T) + y - 1`` (so ``W = max(1, T) + k``), shared by every leaf (one-against-some, as in
Recall tree, Daume III et al. 2017). Training: after the routers, at the training leaf, each of
those candidates' regressors learns toward +1 if it is the example's label (importance ``w iw``,
``w = --leaf-positive-weight``), else -1 (``iw``); with ``--trained-candidates M`` only the label
and the ``M`` best-scored before any learns (ties: the earlier). Per example that adds ``L``
regressor calls (score, and learn when training) to the ``O(depth)`` of routing, so cost stays
``O(log k + L)``. A feature's slots of all label regressors lie in one run of ``W`` rows from its
base, so the candidates are scored together, features outer (``K.score_set``): the
``L`` reads of a feature share a few cache lines (KJV book, k = 66: 13 lines) instead of being
``L`` passes of random reads over the table. While the candidate node has no record the leaf's ``maxlab`` is
predicted. Everything else (routing, splits, swaps, records) is the paper's Algorithm 1 unchanged;
``L = 0`` gives it exactly. The command line's defaults for ``-r lomtree`` are ``L = 32``, ``U = 3``,
the learned prior, squared loss (VW forces quantile, which lost: see the doc), ``power_t = 0.75``
(as CPT; 0.5 for the others) and learning rate 0.25 (0.5 for the others); one pass, -b 24, test
error (paper's rule with quantile; Filter tree): Sector 18.52 (25.66; 20.21), KJV book 49.84
(64.47; 52.83), synth k=1000 25.45 (31.05; 26.43), KJV next word 75.55 (81.56; 75.75), Letter
38.20 (49.96; 55.34), Pendigits 25.27 (20.73; 43.42). ``U = 2`` and rate 0.5 are better on the
small-k tasks (Sector 17.34, Letter 34.96, Pendigits 22.13) but lose to the Filter tree on next
word (76.42): the defaults serve many classes. Every variant: ``bench/notes/lomtree.md``.

Model state (``state()``): node arrays ``parent, left, right, internal, model, C, En, maxcnt,
maxlab`` (int64) and ``Esum`` (float64), each of length ``n_nodes``; class records in CSR form
``cls_ptr`` (n_nodes+1), ``cls_label, cls_cnt, cls_n`` (int64), ``cls_msum`` (float64), records
of a node sorted by label. ``load_state`` checks every invariant it can (links form one tree,
``C`` of an internal node = min of its children, ``En >= sum n(y)`` (equal unless pruned),
``maxcnt = max cnt(y)``, label ranges, counters) and raises ValueError otherwise; the hash table
is rebuilt, so saving then loading continues bit-exactly (record sums do not depend on the table
layout).

References
----------
A. Choromanska, J. Langford. Logarithmic Time Online Multiclass prediction. NIPS 2015
(arXiv:1406.1822), Algorithm 1, Lemma 3. VW ``vowpalwabbit/core/src/reductions/log_multi.cc``.
"""

from __future__ import annotations

import numpy as np

from ..entropy import depths_from_parents
from ..errors import ConfigError, InputError
from ..learner import check_memory
from ..kernels import lomtree_kernels as LK
from .base import Reduction, n_distinct


_NODE_FIELDS = (("parent", LK.N_PARENT), ("left", LK.N_LEFT), ("right", LK.N_RIGHT), ("internal", LK.N_INTERNAL),
                ("model", LK.N_MODEL), ("C", LK.N_C), ("En", LK.N_EN), ("maxcnt", LK.N_MAXCNT), ("maxlab", LK.N_MAXLAB))
_CLS_FIELDS = ("cls_ptr", "cls_label", "cls_cnt", "cls_n", "cls_msum")
#: the entries of ``glob`` that the configuration fixes (set in ``__init__``; a loaded model's
#: other entries are its counters)
_SETTINGS = [LK.G_T, LK.G_RS, LK.G_NODECAP_MAX, LK.G_SHORTCUTS, LK.G_LEAFL, LK.G_W0, LK.G_UP, LK.G_TOPM,
             LK.G_RECMAX]
#: class records per piece of a saved model's record members (``LomTree.state_members``)
SAVE_RECORDS = 1 << 18


class LomTree(Reduction):
    """The LOMtree reduction (``-r lomtree -k K``); see the module docstring."""

    name = "lomtree"
    parallel_predict = True

    def __init__(self, rcfg, learner):
        super().__init__(rcfg, learner)
        self.T = self.max_internal(rcfg)
        self.R_S = int(rcfg.swap_resistance)
        cap_max = 2 * self.T + 1
        node_cap = min(cap_max, LK.NODE_CAP0)
        self.node_i = np.zeros((node_cap, LK.NF), dtype=np.int64)
        self.node_f = np.zeros(node_cap, dtype=np.float64)
        LK.init_leaf(self.node_i, self.node_f, 0)
        self.rec_i = np.full((LK.MIN_HASH_CAP, LK.RF), -1, dtype=np.int64)
        self.rec_f = self.rec_i.view(np.float64)
        self.glob = np.zeros(LK.NG, dtype=np.int64)
        self.glob[LK.G_NNODES] = 1
        self.glob[LK.G_T] = self.T
        self.glob[LK.G_RS] = self.R_S
        self.glob[LK.G_NODECAP_MAX] = cap_max
        self.glob[LK.G_SHORTCUTS] = 1
        self.L = int(rcfg.leaf_labels)
        self.glob[LK.G_LEAFL] = self.L
        self.glob[LK.G_W0] = max(1, self.T)
        self.up = int(rcfg.candidates_up)
        self.glob[LK.G_UP] = self.up
        self.glob[LK.G_TOPM] = int(rcfg.trained_candidates)
        self.glob[LK.G_RECMAX] = N = self.max_records(rcfg, learner.bits)
        # the table holds at most N live records at load <= 1/2 (``_grow_records``)
        check_memory(LK.RF * 8 * (1 << (2 * N - 1).bit_length()),
                     f"at most {N:,} class records (--max-class-records)")
        self.node_top = np.zeros((node_cap, 2 * max(1, self.L)), dtype=np.int64)
        # training's leaf scratch, made once (per call it cost a one-example ``learn_one`` about
        # 20 µs): training runs on one thread, and each example predicts before it trains, so it
        # writes the candidate list it reads, as within one chunk; predictions, which may run on
        # several threads, take their own
        self.train_work = LK.leaf_work(self.L)
        self.prior = np.zeros(LK.NP, dtype=np.float64)
        self.prior[LK.P_POSW] = float(rcfg.leaf_positive_weight)
        auto = float(rcfg.label_prior) < 0.0
        self.prior[LK.P_AUTO] = 1.0 if auto else 0.0
        self.prior[LK.P_BETA] = LK.BETAS[0] if auto else float(rcfg.label_prior)
        self._pending = None  # loaded class records not yet in the hash table (load_state)
        self.n_prunes = 0

    @staticmethod
    def max_internal(rcfg) -> int:
        k = int(rcfg.k)
        T = rcfg.max_internal_nodes
        return max(0, k - 1) if T is None else int(T)

    @staticmethod
    def min_records(rcfg) -> int:
        """The fewest class records ``--max-class-records`` may allow: twice those a prune never
        drops (the root's, at most k; a candidate list and a majority label a node) and one
        example's, so that every prune frees at least a quarter of them."""
        T = LomTree.max_internal(rcfg)
        return 2 * (int(rcfg.k) + (2 * T + 1) * (int(rcfg.leaf_labels) + 1) + T + 2)

    @staticmethod
    def max_records(rcfg, bits: int) -> int:
        """N, the most live class records (``--max-class-records``; default ``2^(b-4)``: a table of
        at most ``2^(b-3)`` slots of 32 bytes, 1/3 of the weight table's bytes; on PyPI next word
        ``2^(b-3)`` and no bound were as accurate, bench/notes/lomtree.md), at least
        ``min_records``."""
        lo = LomTree.min_records(rcfg)
        N = rcfg.max_class_records
        if N is None:
            return max(1 << max(0, int(bits) - 4), lo)
        if int(N) < lo:
            raise ConfigError(f"--max-class-records must be at least 2 (k + (2T + 1)(L + 1) + T + 2) = {lo:,} "
                              f"(twice the records a prune keeps), got {int(N):,}")
        return int(N)

    @staticmethod
    def n_models_for(rcfg) -> int:
        """Router regressors ``max(1, T)``, then one per label when leaves keep candidate lists."""
        return max(1, LomTree.max_internal(rcfg)) + (int(rcfg.k) if int(rcfg.leaf_labels) > 0 else 0)

    def grow_classes(self, k: int, features: np.ndarray) -> None:
        """Classes up to ``k``: T grows with k when it is k - 1 (no ``--max-internal-nodes``), the
        label regressors follow the routers (label y's is ``W0 + y - 1``), and the table is laid
        out for the new count (``LinearLearner.restride``); nodes and class records stay."""
        from dataclasses import replace

        old_n, old_w0 = self.n_models_for(self.config), max(1, self.T)
        cfg = replace(self.config, k=int(k))
        T = self.max_internal(cfg)
        N = self.max_records(cfg, self.learner.bits)
        new_id = np.arange(old_n, dtype=np.int64)
        new_id[old_w0:] += max(1, T) - old_w0
        self.learner.restride(self.n_models_for(cfg), new_id, features)
        self._set_k(k)
        self.T = T
        self.glob[LK.G_T] = T
        self.glob[LK.G_W0] = max(1, T)
        self.glob[LK.G_NODECAP_MAX] = 2 * T + 1
        self.glob[LK.G_RECMAX] = N

    # -- counters --------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.glob[LK.G_NNODES])

    @property
    def n_swaps(self) -> int:
        return int(self.glob[LK.G_NSWAPS])

    @property
    def t_used(self) -> int:
        return int(self.glob[LK.G_TUSED])

    # -- running ---------------------------------------------------------------------------
    def process(self, batch, train):
        self.check_labels(batch.labels, train)
        n = len(batch)
        preds = np.zeros(n, dtype=np.int64)
        train = np.ascontiguousarray(train, dtype=np.bool_)
        if not (train[0] if n == 1 else train.any()):  # one example (learn_one): no array reduction
            d = int(self.glob[LK.G_DEPTH]) + 1
            LK.lomtree_predict(self.learner.arrays, batch.indptr, batch.indices, batch.values, self.node_i,
                               self.node_top, self.glob, self.prior, preds, LK.leaf_work(self.L),
                               np.empty(d, dtype=np.int64), np.empty(d, dtype=np.float64))
            return preds, None
        self._ensure_records()
        # let learn_block cache one rate per (feature, candidate) pair of the longest example
        # (there is room when the batch's features are no more: one example is no longer)
        if self.L > 0 and n and \
                min((int(batch.indptr[-1]) - int(batch.indptr[0])) * self.L, 1 << 20) > self.learner.scratch_features:
            self.learner.ensure_scratch(min(int(batch.n_features.max()) * self.L, 1 << 20))
        start = 0
        while True:
            self.node_i, self.node_f, self.node_top, start, status = LK.lomtree_process(
                self.learner.arrays, batch.indptr, batch.indices, batch.values, batch.labels, batch.weights, train,
                self.node_i, self.node_f, self.node_top, self.rec_i, self.rec_f, self.glob, self.prior,
                self.train_work, preds, start)
            if status == LK.DONE:
                return preds, None
            if status == LK.FULL:
                raise InputError(batch.source, int(batch.line_numbers[start]), "class_count",
                                 f"lomtree cannot train on label {int(batch.labels[start])}: the tree has counted "
                                 f"{LK.CNT_MAX:,} examples of it, the most its 32-bit class records hold")
            if status == LK.PRUNE:
                self._prune_records()
            else:
                self._grow_records(int(self.glob[LK.G_DEPTH]) + 2)

    def _prune_records(self) -> None:
        """Drop the live records of lowest count down to 3/4 of ``--max-class-records``
        (``LK.prune_records``), then rehash the rest within the table."""
        LK.prune_records(self.node_i, self.node_top, self.rec_i, self.glob)
        self.n_prunes += 1
        LK.rehash_in_place(self.node_i, self.rec_i, self.rec_i.shape[0], self.glob)

    def _grow_records(self, need: int) -> None:
        """Make room for ``need`` more records at load <= 1/2: the live records rehashed within
        the table, enlarged (by doubling unless stale records were many) into a new array that
        the old one's rows are copied to, so that the old one lives only during the copy. A new
        array, not ``ndarray.resize`` (a ``realloc`` that moves the pages without copying
        them): numpy asks the kernel for huge pages for a new large array, and the table's
        look-ups are random reads that missed the TLB on 4 KB pages (300k PyPI summaries: 5%
        of training; the old table beside the new one adds half the new one's size at
        that moment, 32 MB at the default bound of ``-b 24``)."""
        old = self.rec_i.shape[0]
        cap = old
        while 2 * (int(self.glob[LK.G_LIVE]) + need) > cap:
            cap *= 2
        if cap > old:
            grown = np.empty((cap, LK.RF), dtype=np.int64)
            grown[:old] = self.rec_i
            self.rec_i = grown
        LK.rehash_in_place(self.node_i, self.rec_i, old, self.glob)
        self.rec_f = self.rec_i.view(np.float64)

    # -- state -----------------------------------------------------------------------------
    def records(self):
        """Live class records sorted by (node, label): node, label, cnt, n (int64), msum (float64)."""
        if self._pending is not None:  # loaded and not trained since: already in this form
            return tuple(a.copy() for a in self._pending)
        ptr, lab = LK.live_labels(self.node_i, self.rec_i, self.n_nodes)
        node = np.repeat(np.arange(self.n_nodes, dtype=np.int64), np.diff(ptr))
        sel = self._slots(node, lab)
        cn = self.rec_i[sel, LK.R_CN]
        return node, lab.astype(np.int64), cn & LK.CNT_MAX, (cn >> 32) & LK.CNT_MAX, self.rec_f[sel, LK.R_MSUM]

    def _slots(self, node, lab):
        out = np.empty(node.shape[0], dtype=np.int64)
        LK.find_slots(self.rec_i, node, lab, out)
        return out

    def state(self) -> dict:
        from ..streamed import materialize

        return materialize(self.state_members())

    def state_members(self) -> dict:
        """``state()``, the class records' label, cnt, n and msum as ``streamed.Streamed``: each
        gathered from the record table ``SAVE_RECORDS`` records at a time as it is written (the
        five columns at once were 40 bytes a record at the peak of a save, 110 MB on 300k PyPI
        summaries, more than training's own peak)."""
        from ..streamed import Streamed

        nn = self.n_nodes
        out = {name: self.node_i[:nn, col].copy() for name, col in _NODE_FIELDS}
        out["Esum"] = self.node_f[:nn].copy()
        if self._pending is not None:  # loaded and not trained since: the sorted columns themselves
            m = self._pending[0].shape[0]
            cols = [lambda s, e, c=c: c[s:e] for c in self._pending]
            ptr = np.zeros(nn + 1, dtype=np.int64)
            np.cumsum(np.bincount(self._pending[0], minlength=nn), out=ptr[1:])
        else:
            # the labels alone, grouped by node and sorted (4 bytes a record); each piece finds
            # its records' slots again
            ptr, lab = LK.live_labels(self.node_i, self.rec_i, nn)
            m = lab.shape[0]
            rf = self.rec_f

            def node(s, e):
                return np.searchsorted(ptr, np.arange(s, min(e, m), dtype=np.int64), side="right") - 1

            def cn(s, e):
                return self.rec_i[self._slots(node(s, e), lab[s:e]), LK.R_CN]

            cols = [node, lambda s, e: lab[s:e].astype(np.int64), lambda s, e: cn(s, e) & LK.CNT_MAX,
                    lambda s, e: (cn(s, e) >> 32) & LK.CNT_MAX,
                    lambda s, e: rf[self._slots(node(s, e), lab[s:e]), LK.R_MSUM]]

        def pieces(col):
            for s in range(0, m, SAVE_RECORDS):
                yield col(s, s + SAVE_RECORDS)

        out["cls_ptr"] = ptr
        for name, col in zip(_CLS_FIELDS[1:], cols[1:]):
            dtype = np.dtype(np.float64 if name == "cls_msum" else np.int64)
            out[name] = Streamed(dtype, (m,), lambda col=col: pieces(col))
        out["prior_stats"] = self.prior[:LK.NB].copy()
        return out

    def meta(self) -> dict:
        return {"T": self.T, "swap_resistance": self.R_S, "leaf_labels": self.L, "candidates_up": self.up,
                "t_used": self.t_used,
                "n_swaps": self.n_swaps, "n_nodes": self.n_nodes, "depth_bound": int(self.glob[LK.G_DEPTH]),
                "label_prior": float(self.prior[LK.P_BETA])}

    def load_state(self, arrays: dict, meta: dict) -> None:
        names = [n for n, _ in _NODE_FIELDS] + ["Esum", *_CLS_FIELDS]
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ValueError(f"lomtree state lacks {', '.join(missing)}")
        extra = set(arrays) - set(names) - {"prior_stats"}  # absent before the label prior: zeros
        if extra:
            raise ValueError(f"unexpected lomtree arrays {sorted(extra)}")
        for key in ("T", "swap_resistance", "t_used", "n_swaps", "n_nodes", "depth_bound"):
            if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool) or meta[key] < 0:
                raise ValueError(f"lomtree meta {key!r} missing or invalid")
        if meta["T"] != self.T or meta["swap_resistance"] != self.R_S:
            raise ValueError("lomtree T/swap_resistance do not match the configuration")
        # absent in files from before leaf lists: 0
        if meta.get("leaf_labels", 0) != self.L or meta.get("candidates_up", 0) != self.up:
            raise ValueError("lomtree leaf_labels/candidates_up do not match the configuration")
        nn = meta["n_nodes"]
        k = self.k
        if not 1 <= nn <= 2 * self.T + 1:
            raise ValueError("node count out of range")
        for name in names:
            a = arrays[name]
            want = np.float64 if name in ("Esum", "cls_msum") else np.int64
            if a.dtype != want or a.ndim != 1:
                raise ValueError(f"lomtree array {name} has the wrong type or shape")
        for name, _ in _NODE_FIELDS:
            if arrays[name].shape[0] != nn:
                raise ValueError(f"lomtree array {name} has the wrong length")
        if arrays["Esum"].shape[0] != nn:
            raise ValueError("lomtree array Esum has the wrong length")
        parent, left, right = arrays["parent"], arrays["left"], arrays["right"]
        internal, model, C = arrays["internal"], arrays["model"], arrays["C"]
        En, maxcnt, maxlab = arrays["En"], arrays["maxcnt"], arrays["maxlab"]
        t_used = meta["t_used"]
        if t_used > self.T or nn != 2 * t_used + 1:
            raise ValueError("t_used is inconsistent with the node count")
        if not np.isin(internal, (0, 1)).all():
            raise ValueError("bad internal flags")
        isint = internal == 1
        lf = left[isint]
        rt = right[isint]
        if ((lf < 1) | (lf >= nn) | (rt < 1) | (rt >= nn) | (lf == rt)).any():
            raise ValueError("bad child links")
        if ((left[~isint] != -1) | (right[~isint] != -1)).any():
            raise ValueError("a leaf has children")
        ids = np.flatnonzero(isint)
        if parent[0] != -1 or (nn > 1 and ((parent[lf] != ids).any() or (parent[rt] != ids).any())):
            raise ValueError("parent links do not match child links")
        # every non-root node is a child of exactly one internal node -> with n-1 edges it is a tree
        kids = np.concatenate([lf, rt])
        if kids.size != nn - 1 or n_distinct(kids) != nn - 1:
            raise ValueError("links do not form one tree")
        seen = np.zeros(nn, dtype=bool)  # reachability from the root (no cycles)
        stack = [0]
        while stack:
            v = stack.pop()
            if seen[v]:
                raise ValueError("links do not form one tree")
            seen[v] = True
            if isint[v]:
                stack.append(int(left[v]))
                stack.append(int(right[v]))
        if not seen.all():
            raise ValueError("links do not form one tree")
        W = self.n_models_for(self.config)
        if ((model[isint] < 0) | (model[isint] >= W)).any() or (model[~isint] != -1).any():
            raise ValueError("bad regressor ids")
        if isint.sum() and n_distinct(model[isint]) != isint.sum():
            raise ValueError("two internal nodes share a regressor")
        if (C < 0).any() or (En < 0).any() or (maxcnt < 0).any() or ((maxlab < 1) | (maxlab > k)).any():
            raise ValueError("bad node counters")
        if ids.size and (C[ids] != np.minimum(C[left[ids]], C[right[ids]])).any():
            raise ValueError("C of an internal node is not the minimum of its children")
        ptr = arrays["cls_ptr"]
        lab, cnt, cn, msum = arrays["cls_label"], arrays["cls_cnt"], arrays["cls_n"], arrays["cls_msum"]
        nrec = lab.shape[0]
        if ptr.shape[0] != nn + 1 or ptr[0] != 0 or ptr[-1] != nrec or (np.diff(ptr) < 0).any():
            raise ValueError("bad cls_ptr")
        if cnt.shape[0] != nrec or cn.shape[0] != nrec or msum.shape[0] != nrec:
            raise ValueError("class record arrays differ in length")
        if ((lab < 1) | (lab > k) | (cnt < 1) | (cnt > LK.CNT_MAX) | (cn < 0) | (cn > cnt)).any():
            raise ValueError("bad class records")
        rnode = np.repeat(np.arange(nn, dtype=np.int64), np.diff(ptr))
        if nrec > 1 and ((rnode[1:] == rnode[:-1]) & (lab[1:] <= lab[:-1])).any():
            raise ValueError("class records of a node are not sorted by label")
        # every example counts its label at the root, never reset: training's count limit
        # (LK.CNT_MAX, checked at the root only) holds for every node only if this does
        root_lab, root_cnt = lab[:ptr[1]], cnt[:ptr[1]]
        pos = np.minimum(np.searchsorted(root_lab, lab), root_lab.shape[0] - 1) if ptr[1] else None
        if nrec and (pos is None or (root_lab[pos] != lab).any() or (root_cnt[pos] < cnt).any()):
            raise ValueError("a class record counts more examples than the root's record of its label")
        # pruned records (--max-class-records) leave En above their sum
        if (np.bincount(rnode, weights=cn, minlength=nn) > En).any():
            raise ValueError("En is less than the n of its class records")
        mx = np.zeros(nn, dtype=np.int64)
        np.maximum.at(mx, rnode, cnt)
        if (mx != maxcnt).any():
            raise ValueError("maxcnt does not match the class records")
        has = maxcnt > 0
        if has.any():
            pos = np.searchsorted(lab + rnode * (k + 1), maxlab[has] + np.flatnonzero(has) * (k + 1))
            ok = pos < nrec
            ok[ok] = (rnode[pos[ok]] == np.flatnonzero(has)[ok]) & (lab[pos[ok]] == maxlab[has][ok])
            if not ok.all() or (cnt[pos] != maxcnt[has]).any():
                raise ValueError("maxlab does not match the class records")
        stats = np.asarray(arrays.get("prior_stats", np.zeros(LK.NB)))
        if stats.dtype != np.float64 or stats.shape != (LK.NB,) or not np.all(np.isfinite(stats)) or (stats < 0).any():
            raise ValueError("lomtree prior_stats invalid")
        # build
        cap = min(int(self.glob[LK.G_NODECAP_MAX]), max(LK.NODE_CAP0, 1 << int(nn).bit_length()))
        node_i = np.zeros((cap, LK.NF), dtype=np.int64)
        node_f = np.zeros(cap, dtype=np.float64)
        for name, col in _NODE_FIELDS:
            node_i[:nn, col] = arrays[name]
        node_f[:nn] = arrays["Esum"]
        glob = np.zeros(LK.NG, dtype=np.int64)
        glob[_SETTINGS] = self.glob[_SETTINGS]  # as __init__ derived them from the configuration
        glob[LK.G_NNODES] = nn
        glob[LK.G_TUSED] = t_used
        glob[LK.G_NSWAPS] = meta["n_swaps"]
        glob[LK.G_DEPTH] = meta["depth_bound"]
        depths = depths_from_parents(node_i[:nn, LK.N_PARENT])
        if depths.max() > meta["depth_bound"]:
            raise ValueError("depth_bound is smaller than the tree depth")
        self.node_i, self.node_f, self.glob = node_i, node_f, glob
        self.prior[:LK.NB] = stats
        if self.prior[LK.P_AUTO]:
            self.prior[LK.P_BETA] = LK.BETAS[int(np.argmax(stats))]
        self.node_top = self._node_lists(cap, rnode, lab, cnt)
        # the class records (sorted and unique per node: checked above) go into the hash table
        # when training or a report needs them; prediction uses only the nodes (on KJV the table
        # is 400 MB, and filling it was a third of `lomtree predict`)
        self._pending = (rnode, lab.copy(), cnt.copy(), cn.copy(), msum.copy())
        self.rec_i = self.rec_f = None
        if not getattr(self.learner, "predict_only", False):
            self._ensure_records()

    def _node_lists(self, cap, rnode, lab, cnt):
        """The candidate lists of the nodes from their class records: top ``L`` by (count
        descending, label ascending), what ``LK.top_update`` maintains online."""
        L = max(1, self.L)
        top = np.zeros((cap, 2 * L), dtype=np.int64)
        if self.L == 0 or rnode.size == 0:
            return top
        order = np.lexsort((lab, -cnt, rnode))
        rn, lb, ct = rnode[order], lab[order], cnt[order]
        first = np.searchsorted(rn, rn, side="left")
        rank = np.arange(rn.size) - first
        sel = rank < L
        top[rn[sel], rank[sel]] = lb[sel]
        top[rn[sel], L + rank[sel]] = ct[sel]
        return top

    def _ensure_records(self) -> None:
        """Build the class-record hash table from the loaded records (once)."""
        if self._pending is None:
            return
        rnode, lab, cnt, cn, msum = self._pending
        hcap = LK.MIN_HASH_CAP
        while 2 * (lab.shape[0] + int(self.glob[LK.G_DEPTH]) + 2) > hcap:
            hcap *= 2
        rec_i = np.full((hcap, LK.RF), -1, dtype=np.int64)
        rec_f = rec_i.view(np.float64)
        if not LK.insert_records(self.node_i, rec_i, rec_f, self.glob, rnode, lab, cnt, cn, msum):
            raise ValueError("duplicate class record")
        self.rec_i, self.rec_f, self._pending = rec_i, rec_f, None

    # -- reporting -------------------------------------------------------------------------
    def summary_extra(self) -> dict:
        return {"number_of_swaps": self.n_swaps, "record_prunes": self.n_prunes}

    def label_levels(self):
        """The class records of every node: the examples of each label that reached it."""
        st = self.state()
        parent = st["parent"].astype(np.int64)
        isint = st["internal"] == 1
        depth = depths_from_parents(parent)
        node, _, cnt, _, _ = self.records()
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

    def inspect(self) -> dict:
        """Tree shape and split quality.

        Per internal node ``v`` with children ``l, r``, let ``n_l(y)``, ``n_r(y)`` be the class
        counts recorded at the children (examples of ``y`` that reached the child since it was
        created or last recycled), ``n_l = sum_y n_l(y)``, ``n_r`` likewise, ``n = n_l + n_r``
        (nodes with ``n = 0`` are skipped):

        * balance(v) = ``min(n_l, n_r) / n`` — the fraction of the node's examples that went the
          smaller way; in [0, 1/2], 1/2 is perfectly balanced (empirical ``beta`` of the paper's
          Definition 2: the split is beta-balanced iff balance >= beta);
        * purity(v) = ``sum_y max(n_l(y), n_r(y)) / n`` — the fraction of the node's examples
          whose label goes mostly to one side; in [1/2, 1], 1 is perfectly pure (the paper's
          Definition 1 with ``alpha = 1 - purity``: ``sum_y pi_y min(P(h>0|y), P(h<0|y))``).

        Per level (depth of ``v``): number of nodes, min and example-weighted mean balance, min
        and example-weighted mean purity. Depths: max leaf depth and the average leaf depth
        weighted by the examples recorded at each leaf.
        """
        nn = self.n_nodes
        st = self.state()
        parent, left, right = st["parent"], st["left"], st["right"]
        isint = st["internal"] == 1
        depth = depths_from_parents(parent)
        node, label, cnt, _, _ = self.records()
        tot = np.bincount(node, weights=cnt, minlength=nn).astype(np.int64)
        leaves = np.flatnonzero(~isint)
        lw = tot[leaves]
        info = {
            "reduction": self.name,
            "k": self.k,
            "regressors": self.n_models_for(self.config),
            "max_internal_nodes": self.T,
            "swap_resistance": self.R_S,
            "internal_nodes": int(isint.sum()),
            "leaves": int(leaves.size),
            "max_depth": int(depth[leaves].max()),
            "avg_depth_weighted": float((depth[leaves] * lw).sum() / lw.sum()) if lw.sum() else 0.0,
            "number_of_swaps": self.n_swaps,
            "distinct_leaf_labels": int(np.unique(st["maxlab"][leaves]).size),
            "class_records": int(node.size),
        }
        levels = []
        ids = np.flatnonzero(isint)
        if ids.size:
            nl = tot[left[ids]]
            nr = tot[right[ids]]
            n = nl + nr
            # purity: sum over labels of max(left count, right count) per parent
            side_parent = parent[node]
            is_child = side_parent >= 0
            pnode = side_parent[is_child]
            plab = label[is_child]
            pc = cnt[is_child]
            key = pnode * (self.k + 1) + plab
            uk, inv = np.unique(key, return_inverse=True)
            best = np.zeros(uk.size, dtype=np.int64)
            np.maximum.at(best, inv, pc)
            pure_num = np.bincount(uk // (self.k + 1), weights=best, minlength=nn)[ids]
            ok = n > 0
            bal = np.where(ok, np.minimum(nl, nr) / np.maximum(n, 1), 0.0)
            pur = np.where(ok, pure_num / np.maximum(n, 1), 0.0)
            d = depth[ids]
            for lev in np.unique(d[ok]):
                sel = ok & (d == lev)
                w = n[sel]
                levels.append({
                    "level": int(lev), "nodes": int(sel.sum()), "examples": int(w.sum()),
                    "balance_min": round(float(bal[sel].min()), 4),
                    "balance_mean": round(float((bal[sel] * w).sum() / w.sum()), 4),
                    "purity_min": round(float(pur[sel].min()), 4),
                    "purity_mean": round(float((pur[sel] * w).sum() / w.sum()), 4),
                })
        info["levels"] = levels
        return info
