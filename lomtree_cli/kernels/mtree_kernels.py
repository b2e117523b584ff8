"""Numba kernels of the M-ary softmax label tree over learned embeddings (``reductions/mtree.py``).

Arrays (k labels, arity M, depth L, embedding width D, ``R = 2**bits`` embedding rows):

    E : float32 (R, D)            input embeddings (a row per hashed feature slot)
    U : float32 (R, M) or (0, M)  linear weights of the root's children per hashed feature slot
                                  (``--linear``; no rows: none)
    W : float32 (C, M, D)         node softmax layers, one (M, D) block per node row
    child : int64 (C, M)          -1 = empty slot; >= 0 = internal child's row; <= -2 = leaf of
                                  label ``-child - 1``
    path_node : int64 (k+1, L)    row of the node at depth d on label y's path (row 0 unused)
    path_child : int64 (k+1, L)   child slot taken at depth d on label y's path (the digits; -1
                                  past the label's leaf when leaves lie at several depths)
    stats : float64 (k+1, L, M)   sum of iw * softmax(node at depth d of y's path) over trained y
    cnt : float64 (k+1, L)        sum of iw of the trained examples of y
    touched : uint8 (R,)          1 once the row of E was updated (saved rows)
    params : float64 (N_PAR,)     see ``PAR_*``

Representation: ``h = sum_j v_j E[i_j] / sum_j |v_j|`` (the bag-of-features average of fastText,
weighted by the feature values). Node n's distribution over its non-empty children is
``softmax(W[n] h)`` (empty slots take no mass), plus at the root (row 0) the linear scores
``z_c = sum_j v_j U[i_j, c]`` of the hashed features when U has rows (the paper's hashed linear
features, at the root only: there one row of U per feature serves); ``P(y|x)`` is the product
along y's path.
Training is plain SGD on ``-log P(y|x)`` (fastText's hierarchical-softmax update: the gradient
for h is accumulated with each node's weights before they are updated, then spread over the
input rows), rate ``learning_rate(params, t)`` at the t-th trained example: fastText's linear
decay to 0 when the run is planned (``PAR_TOTAL`` > 0), else ``eta * (1 + t / LR_SCALE) ** -power_t``.
"""

from __future__ import annotations

import math

import numpy as np

from . import jit, kernel
from .linear import regularized

PAR_ETA = 0        # base learning rate (the learner's current eta)
PAR_POWER = 1      # power_t of the rate decay
PAR_CLOCK = 2      # trained examples so far
PAR_NEXT = 3       # clock value at which the tree is re-assigned next (0 = never)
PAR_BEAM = 4       # beam width of prediction
PAR_NEED_PRED = 5  # 0: training discards progressive predictions (skip the search)
PAR_START = 6      # clock value at the start of the planned schedule
PAR_TOTAL = 7      # > 0: rate falls linearly to 0 over this many trained examples from PAR_START
PAR_L1 = 8         # --l1: each updated parameter truncated toward 0 by l1 * lr * iw (learn_one)
PAR_L2 = 9         # --l2: each updated parameter first multiplied by 1 - l2 * lr * iw
PAR_LIN = 10       # --linear: rate of U relative to the SGD rate
N_PAR = 11

#: examples over which the rate falls by (1 + 1) ** -power_t
LR_SCALE = 10_000.0
#: the linear schedule's rate never falls below this fraction of eta
LR_FLOOR = 1e-4
#: floor of a probability in a log-loss (a label outside 1..k, or an underflow)
PROB_FLOOR = 1e-10
NEG = -1e300
#: fastmath flags of the dot products (reassociation lets LLVM vectorise the sums; no
#: assumptions about NaN or infinity)
FAST = {"reassoc", "contract", "arcp", "nsz"}


@kernel()
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@kernel()
def init_rows(E, seed, lo, hi):
    """Rows ``lo:hi`` of E to their initial values: uniform in (-1/D, 1/D) from a SplitMix64 hash
    of (seed, row, column), so any row can be re-created without the others."""
    D = E.shape[1]
    scale = 1.0 / D
    s = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
    for r in range(lo, hi):
        for c in range(D):
            z = _mix(s + np.uint64(r * D + c) + np.uint64(1))
            u = float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)
            E[r, c] = np.float32((2.0 * u - 1.0) * scale)


@kernel(fastmath=FAST)
def hidden(E, U, indices, values, a, b, h, zr):
    """h = the value-weighted average of the rows of E of features a:b (0 if none), zr = the
    root's linear scores ``sum_j v_j U[i_j]`` (0 when U has no rows); returns the normaliser sum |v|."""
    D = h.shape[0]
    M = zr.shape[0]
    lin = U.shape[0] > 0
    for c in range(D):
        h[c] = 0.0
    for c in range(M):
        zr[c] = 0.0
    s = 0.0
    for j in range(a, b):
        v = np.float64(values[j])
        s += abs(v)
        r = indices[j]
        vf = np.float32(v)
        for c in range(D):
            h[c] += vf * E[r, c]
        if lin:
            for c in range(M):
                zr[c] += vf * U[r, c]
    if s > 0.0:
        inv = np.float32(1.0 / s)
        for c in range(D):
            h[c] *= inv
    return s


@kernel(fastmath=FAST)
def node_logits(W, child, n, h, zr, out):
    """out[j] = W[n, j] . h (+ zr[j] at the root, row 0) over the non-empty children (NEG on empty
    slots); returns the largest."""
    M = child.shape[1]
    D = h.shape[0]
    mx = NEG
    for j in range(M):
        if child[n, j] == -1:
            out[j] = NEG
            continue
        z = np.float32(0.0)
        for c in range(D):
            z += W[n, j, c] * h[c]
        if n == 0:
            z += zr[j]
        out[j] = z
        if z > mx:
            mx = z
    return mx


@kernel(fastmath=FAST)
def node_logsoftmax(W, child, n, h, zr, out):
    """out[j] = log P(child j | node n, h) over the non-empty children (NEG on empty slots)."""
    M = child.shape[1]
    mx = node_logits(W, child, n, h, zr, out)
    tot = 0.0
    for j in range(M):
        if child[n, j] != -1:
            tot += math.exp(out[j] - mx)
    lz = mx + math.log(tot)
    for j in range(M):
        if child[n, j] != -1:
            out[j] -= lz


@kernel()
def path_logp(W, child, path_node, path_child, y, h, zr, lp):
    """log P(y | x) along y's path (lp: work, (M,))."""
    L = path_node.shape[1]
    s = 0.0
    for d in range(L):
        t = path_child[y, d]
        if t < 0:
            break
        node_logsoftmax(W, child, path_node[y, d], h, zr, lp)
        s += lp[t]
    return s


@kernel(fastmath=FAST)
def node_softmax(W, child, n, h, zr, out):
    """out[j] = P(child j | node n, h) over the non-empty children (0 on empty slots); returns
    the log-partition ``log sum_j exp(W[n, j] . h)`` (so log P(j) = W[n, j] . h - it)."""
    M = child.shape[1]
    mx = node_logits(W, child, n, h, zr, out)
    tot = 0.0
    for j in range(M):
        if child[n, j] != -1:
            e = math.exp(out[j] - mx)
            out[j] = e
            tot += e
        else:
            out[j] = 0.0
    inv = 1.0 / tot
    for j in range(M):
        out[j] *= inv
    return mx + math.log(tot)


@kernel(fastmath=FAST)
def learn_one(E, U, W, child, path_node, path_child, stats, cnt, touched, indices, values, a, b, y, iw, lr, l1, l2,
              lin, h, gh, zr, lp, gather):
    """One SGD step on ``-iw log P(y|x)``; accumulates the label statistics when ``gather`` (a
    re-assignment is still to come); returns the loss before the step (iw * -log P). The root's
    linear weights (rows of U) move at ``lin`` times the rate.

    With ``l1`` or ``l2`` (``--l1``/``--l2``) every parameter the step moves (the node layers'
    outputs on y's path with a nonzero gradient, the embedding rows of the example's features) is
    regularised as the linear learner's weights (``linear.regularized``) at its rate ``lr * iw``:
    ``w <- trunc(max(0, 1 - l2 lr iw) w - step, l1 lr iw)``."""
    reg = l1 != 0.0 or l2 != 0.0
    rate = lr * iw
    L = path_node.shape[1]
    M = child.shape[1]
    D = h.shape[0]
    s = hidden(E, U, indices, values, a, b, h, zr)
    ulin = U.shape[0] > 0
    for c in range(D):
        gh[c] = 0.0
    loss = 0.0
    for d in range(L):
        n = path_node[y, d]
        t = path_child[y, d]
        if t < 0:
            break
        node_softmax(W, child, n, h, zr, lp)
        loss -= math.log(max(lp[t], 1e-300))
        if gather:
            cnt[y, d] += iw
            for j in range(M):
                stats[y, d, j] += iw * lp[j]
        for j in range(M):
            if child[n, j] == -1:
                continue
            p = lp[j]
            g = lr * iw * (p - (1.0 if j == t else 0.0))
            if g == 0.0:
                continue
            gf = np.float32(g)
            w = W[n, j]
            if n == 0 and ulin:
                for q in range(a, b):
                    r = indices[q]
                    step = lin * g * np.float64(values[q])
                    U[r, j] = np.float32(regularized(np.float64(U[r, j]), -step, rate * lin, l1, l2)) if reg \
                        else U[r, j] - np.float32(step)
            if reg:
                for c in range(D):
                    gh[c] += gf * w[c]
                    w[c] = np.float32(regularized(np.float64(w[c]), -np.float64(gf * h[c]), rate, l1, l2))
                continue
            for c in range(D):
                gh[c] += gf * w[c]
                w[c] -= gf * h[c]
    if s > 0.0:
        inv = 1.0 / s
        for j in range(a, b):
            r = indices[j]
            f = np.float32(np.float64(values[j]) * inv)
            touched[r] = 1
            if reg:
                for c in range(D):
                    E[r, c] = np.float32(regularized(np.float64(E[r, c]), -np.float64(f * gh[c]), rate, l1, l2))
                continue
            for c in range(D):
                E[r, c] -= f * gh[c]
    return iw * loss


@kernel()
def _insert(bl, bn, width, count, lp, node):
    """Insert (lp, node) into the top list bl/bn of at most ``width``, ordered by decreasing lp,
    ties by decreasing node code (for leaves, ``-label - 1``: the smaller label first); new count."""
    if count == width:
        if lp < bl[count - 1] or (lp == bl[count - 1] and node <= bn[count - 1]):
            return count
        count -= 1
    p = count
    while p > 0 and (bl[p - 1] < lp or (bl[p - 1] == lp and bn[p - 1] < node)):
        bl[p] = bl[p - 1]
        bn[p] = bn[p - 1]
        p -= 1
    bl[p] = lp
    bn[p] = node
    return count + 1


@kernel()
def beam_search(W, child, h, zr, width, bl, bn, cl, cn, lp):
    """The ``width`` best leaves by path log-probability, level by level (a beam of ``width``
    nodes or leaves per level: a leaf reached at a shallower level stays in the beam; exact when
    width >= the entries of a level). Leaves in ``cn[:m]`` (codes ``-label - 1``) with
    log-probabilities ``cl[:m]``, descending; returns m."""
    M = child.shape[1]
    nb = 1
    bl[0] = 0.0
    bn[0] = 0
    while True:
        m = 0
        internal = False
        for q in range(nb):
            n = bn[q]
            if n < 0:  # a leaf: kept as it is
                m = _insert(cl, cn, width, m, bl[q], n)
                continue
            node_logsoftmax(W, child, n, h, zr, lp)
            for j in range(M):
                c = child[n, j]
                if c == -1:
                    continue
                if c >= 0:
                    internal = True
                m = _insert(cl, cn, width, m, bl[q] + lp[j], c)
        if not internal or m == 0:
            return m
        for q in range(m):
            bl[q] = cl[q]
            bn[q] = cn[q]
        nb = m


@kernel()
def learning_rate(params, t):
    """The rate at the t-th trained example: ``eta (1 - (t - start) / total)`` (at least
    ``eta * LR_FLOOR``) when a schedule is planned (``PAR_TOTAL > 0``: fastText's linear decay to 0),
    else ``eta (1 + t / LR_SCALE) ** -power_t``."""
    eta = params[PAR_ETA]
    if params[PAR_TOTAL] > 0.0:
        return eta * max(LR_FLOOR, 1.0 - (t - params[PAR_START]) / params[PAR_TOTAL])
    return eta * (1.0 + t / LR_SCALE) ** (-params[PAR_POWER])


@kernel(nogil=True)
def mtree_process(E, U, W, child, path_node, path_child, stats, cnt, touched, params, indptr, indices, values,
                  labels, weights, train, start, preds, losses, h, gh, zr, lp, bl, bn, cl, cn):
    """Progressive validation over examples ``start:``: predict (beam search), log-loss of the
    label, then learn when ``train[i]``. Stops before a trained example at which the clock reaches
    ``PAR_NEXT`` (the caller re-assigns the labels, then calls again from there); returns the index
    where it stopped (n when done)."""
    n = labels.shape[0]
    k = path_node.shape[0] - 1
    width = int(params[PAR_BEAM])
    need = params[PAR_NEED_PRED] != 0.0
    # label statistics only while a re-assignment is to come (within the planned run, if planned)
    gather = params[PAR_NEXT] > 0.0 and (params[PAR_TOTAL] <= 0.0 or
                                         params[PAR_NEXT] <= params[PAR_START] + params[PAR_TOTAL])
    for i in range(start, n):
        if train[i] and params[PAR_NEXT] > 0.0 and params[PAR_CLOCK] >= params[PAR_NEXT]:
            return i
        a = indptr[i]
        b = indptr[i + 1]
        y = labels[i]
        if need or not train[i]:
            hidden(E, U, indices, values, a, b, h, zr)
            m = beam_search(W, child, h, zr, width, bl, bn, cl, cn, lp)
            preds[i] = -cn[0] - 1 if m > 0 else 1
        if train[i]:
            t = params[PAR_CLOCK]
            lr = learning_rate(params, t)
            losses[i] = learn_one(E, U, W, child, path_node, path_child, stats, cnt, touched, indices, values, a, b,
                                  y, weights[i], lr, params[PAR_L1], params[PAR_L2], params[PAR_LIN], h, gh, zr, lp,
                                  gather)
            params[PAR_CLOCK] = t + 1.0
        elif 1 <= y <= k:
            hidden(E, U, indices, values, a, b, h, zr)
            lq = path_logp(W, child, path_node, path_child, y, h, zr, lp)
            losses[i] = weights[i] * min(-lq, -math.log(PROB_FLOOR))
        elif y > k:
            losses[i] = weights[i] * -math.log(PROB_FLOOR)
        else:
            losses[i] = 0.0
    return n


@kernel(nogil=True)
def mtree_top(E, U, W, child, path_node, path_child, params, indptr, indices, values, labels, ntop, labs, probs,
              p_true, h, zr, lp, bl, bn, cl, cn):
    """The ``ntop`` most probable labels (beam of max(beam, ntop)) with P(y|x), and P(label|x)."""
    n = labels.shape[0]
    k = path_node.shape[0] - 1
    width = max(int(params[PAR_BEAM]), ntop)
    for i in range(n):
        a = indptr[i]
        b = indptr[i + 1]
        hidden(E, U, indices, values, a, b, h, zr)
        m = beam_search(W, child, h, zr, width, bl, bn, cl, cn, lp)
        for q in range(min(m, ntop)):
            labs[i, q] = -cn[q] - 1
            probs[i, q] = math.exp(cl[q])
        y = labels[i]
        if 1 <= y <= k:
            p_true[i] = math.exp(path_logp(W, child, path_node, path_child, y, h, zr, lp))
        else:
            p_true[i] = 0.0


@jit()
def assign_labels(digits, stats, cnt, M, slack):
    """The label-assignment step: new digits (k+1, L) of every label's path, top-down.

    At a node holding the label set I (the labels whose new path reaches it), label i's statistics
    are valid when its old path reached the same node (same digits above); then
    ``p(j|i) = stats / cnt`` and ``q_i`` is its share of the node's examples, ``p_j = sum_i q_i
    p(j|i)``. Pairs (i, j) are taken by decreasing ``q_i (p(j|i) - p_j)`` (the label's
    contribution to the node objective J_n = 2/M sum_j sum_i q_i |p_j - p(j|i)| when it is sent to
    child j) and label i goes to child j while j has room: at most ``min(M**(L-d-1),
    ceil(slack |I| / M))`` labels (the subtree's leaves, and a balance cap). Labels without valid
    statistics then stay at their old digit if it has room, else go to the least-filled child.
    Every label 1..k ends in exactly one leaf."""
    k = digits.shape[0] - 1
    L = digits.shape[1]
    new = digits.copy()
    valid = np.ones(k + 1, dtype=np.bool_)
    order = np.arange(1, k + 1).astype(np.int64)
    seg = np.zeros(k + 2, dtype=np.int64)
    nseg = 1
    seg[0] = 0
    seg[1] = k
    tmp = np.empty(k, dtype=np.int64)
    for d in range(L):
        full = 1
        for _ in range(L - d - 1):
            full *= M
        nseg_new = 0
        seg_new = np.zeros(k + 2, dtype=np.int64)
        for s in range(nseg):
            a = seg[s]
            b = seg[s + 1]
            m = b - a
            cap = min(full, max(1, (slack * m + M - 1) // M))
            q = np.zeros(m)
            P = np.zeros((m, M))
            tot = 0.0
            for r in range(m):
                i = order[a + r]
                if valid[i] and cnt[i, d] > 0.0:
                    q[r] = cnt[i, d]
                    tot += q[r]
                    for j in range(M):
                        P[r, j] = stats[i, d, j] / cnt[i, d]
            pj = np.zeros(M)
            if tot > 0.0:
                for r in range(m):
                    q[r] /= tot
                    for j in range(M):
                        pj[j] += q[r] * P[r, j]
            fill = np.zeros(M, dtype=np.int64)
            dest = np.full(m, -1, dtype=np.int64)
            npos = 0
            for r in range(m):
                if q[r] > 0.0:
                    npos += 1
            if npos > 0:
                score = np.empty(npos * M)
                pr = np.empty(npos * M, dtype=np.int64)
                t = 0
                for r in range(m):
                    if q[r] > 0.0:
                        for j in range(M):
                            score[t] = -(q[r] * (P[r, j] - pj[j]))
                            pr[t] = r * M + j
                            t += 1
                idx = np.argsort(score, kind="mergesort")
                left = npos
                for t in range(npos * M):
                    r = pr[idx[t]] // M
                    j = pr[idx[t]] % M
                    if dest[r] >= 0 or fill[j] >= cap:
                        continue
                    dest[r] = j
                    fill[j] += 1
                    left -= 1
                    if left == 0:
                        break
            for r in range(m):
                if dest[r] >= 0:
                    continue
                i = order[a + r]
                j = digits[i, d]
                if fill[j] >= cap:
                    j = 0
                    for jj in range(1, M):
                        if fill[jj] < fill[j]:
                            j = jj
                dest[r] = j
                fill[j] += 1
            # counting sort of the segment by child: the children's segments, in child order
            start = np.zeros(M + 1, dtype=np.int64)
            for j in range(M):
                start[j + 1] = start[j] + fill[j]
            pos = start.copy()
            for r in range(m):
                i = order[a + r]
                j = dest[r]
                new[i, d] = j
                if j != digits[i, d]:
                    valid[i] = False
                tmp[pos[j]] = i
                pos[j] += 1
            for r in range(m):
                order[a + r] = tmp[r]
            for j in range(M):
                if fill[j] > 0:
                    seg_new[nseg_new] = a + start[j]
                    nseg_new += 1
        seg_new[nseg_new] = k
        seg = seg_new
        nseg = nseg_new
    return new
