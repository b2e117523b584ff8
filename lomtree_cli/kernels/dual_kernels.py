"""Dual coordinate descent for one-against-all over the hashed table (``--solver dual``,
docs/ALGORITHMS.md §2.7).

Hsieh, Chang, Lin, Keerthi & Sundararajan 2008, "A dual coordinate descent method for large-scale
linear SVM" (ICML), Algorithm 1; liblinear's ``L2R_L2LOSS_SVC_DUAL`` (squared hinge) and
``L2R_L1LOSS_SVC_DUAL`` (hinge), without shrinking.

The problem. Regressor ``c`` sees example ``i`` as the hashed vector ``phi_c(x_i)``: value ``v_j``
at slot ``(h_j W + c) mod 2^b``, so all ``n k`` pairs ``(i, c)`` are examples of *one* binary
linear SVM over the table ``w`` (different regressors may share a slot: the hashed OAA model is
that joint problem, solved exactly), target ``y_ic`` = +1 for the example's label(s), -1 else::

    min_w  |w|^2 / 2 + sum_ic C_i xi(y_ic w . phi_c(x_i)),   C_i = C iw_i,
    xi(m) = max(0, 1 - m)^2 (squared hinge) or max(0, 1 - m) (hinge).

Its dual keeps ``alpha_ic`` per pair, ``w = sum_ic alpha_ic y_ic phi_c(x_i)``; one coordinate step
is ``G = y w . phi - 1 + D_i alpha``, ``alpha' = min(max(alpha - G / (Q_i + D_i), 0), U_i)``,
``w += (alpha' - alpha) y phi`` with ``D_i = 1 / (2 C_i)``, ``U_i = inf`` (squared hinge) or
``D_i = 0``, ``U_i = C_i`` (hinge). ``Q_i = |phi_c(x_i)|^2`` is the same for every ``c``: two
features of an example share a slot of regressor ``c`` exactly when ``h W = h' W mod 2^b``,
whatever ``c`` (``hashed_sq_norm``).

Within an example the k steps are taken from the scores computed before them when the example's
k slot ranges do not overlap (``linear.stride_block_disjoint``): then no step changes another's
score, and the result is the sequential one; otherwise each regressor is rescored before its step.
"""

from __future__ import annotations

import numpy as np

from . import jit, kernel
from . import linear as K
from .oaa_kernels import clip_argmax, scores_all


@jit(error_model="numpy")
def hashed_sq_norm(lin, idx, val, start, end, tmp):
    """``|phi_c(x)|^2`` of the example ``idx/val[start:end]`` for any regressor c (stride mode):
    the values of features whose bases ``h W mod 2^b`` are equal are summed before squaring.
    tmp : int64, shape >= (end - start,)."""
    n = end - start
    W = np.int64(lin.hp[K.HP_W])
    mask = np.int64(lin.hp[K.HP_MASK])
    for j in range(n):
        tmp[j] = (np.int64(idx[start + j]) * W) & mask
    order = np.argsort(tmp[:n], kind="mergesort")
    q = 0.0
    acc = 0.0
    for t in range(n):
        j = order[t]
        if t > 0 and tmp[j] != tmp[order[t - 1]]:
            q += acc * acc
            acc = 0.0
        acc += np.float64(val[start + j])
    return q + acc * acc


@kernel(error_model="numpy")
def dual_step(a, f, y, D, U, Qbar):
    """The new dual variable after one coordinate step from ``a`` at score ``f`` (liblinear's
    projected-gradient test: no step when the bound is active and the gradient points out)."""
    G = y * f - 1.0 + D * a
    if a == 0.0:
        pg = min(G, 0.0)
    elif a >= U:
        pg = max(G, 0.0)
    else:
        pg = G
    if pg == 0.0:
        return a
    return min(max(a - G / Qbar, 0.0), U)


@kernel(error_model="numpy")
def add_scaled(lin, idx, val, start, end, c, d):
    """``w[slot(h_j, c)] += d v_j`` for every feature of the example (stride mode)."""
    tab = lin.table
    W = np.int64(lin.hp[K.HP_W])
    mask = np.int64(lin.hp[K.HP_MASK])
    for j in range(start, end):
        s = np.uint64((np.int64(idx[j]) * W + c) & mask)
        tab[s, 0] = np.float32(np.float64(tab[s, 0]) + d * np.float64(val[j]))


@jit(nogil=True, error_model="numpy")
def dual_process(lin, indptr, indices, values, lptr, lids, weights, train, k, order, alpha, row0, cost, squared,
                 preds, scratch):
    """Progressive predict-then-step over a chunk, examples visited in ``order``.

    Example ``i`` (labels ``lids[lptr[i]:lptr[i+1]]``) is predicted from the table as it is when
    its turn comes, then, when ``train[i]``, its k coordinates step.

    order : int64, shape (n,), a permutation of 0..n-1
    alpha : float32, shape (rows, k): example i's dual variables are row ``row0 + i``
    cost : C; squared : True for the squared hinge, False for the hinge
    preds : int64, shape (n,) out: predicted label (1-based) before each step
    scratch : float64, shape (k,)
    """
    n = preds.shape[0]
    ys = np.empty(k, dtype=np.float64)
    ds = np.empty(k, dtype=np.float64)
    cs = np.empty(k, dtype=np.int64)
    maxf = 1
    for i in range(n):
        if indptr[i + 1] - indptr[i] > maxf:
            maxf = indptr[i + 1] - indptr[i]
    tmp = np.empty(maxf, dtype=np.int64)
    W = np.int64(lin.hp[K.HP_W])
    mask = np.int64(lin.hp[K.HP_MASK])
    tab = lin.table
    for t in range(n):
        i = order[t]
        s = indptr[i]
        e = indptr[i + 1]
        scores_all(lin, indices, values, s, e, k, scratch)
        preds[i] = clip_argmax(lin, scratch, k) + 1  # dual models' bounds are wide: the scores stay
        if not train[i]:
            continue
        ci = cost * weights[i]
        if squared:
            D = 0.5 / ci
            U = np.inf
        else:
            D = 0.0
            U = ci
        Qbar = hashed_sq_norm(lin, indices, values, s, e, tmp) + D
        if not Qbar > 0.0:
            continue  # an empty example under the hinge: nothing to step along
        for c in range(k):
            ys[c] = -1.0
        for j in range(lptr[i], lptr[i + 1]):
            ys[lids[j] - 1] = 1.0
        row = row0 + i
        if K.stride_block_disjoint(lin, indices, s, e, k, tmp):
            na = 0
            for c in range(k):
                a = np.float64(alpha[row, c])
                a2 = dual_step(a, scratch[c], ys[c], D, U, Qbar)
                alpha[row, c] = np.float32(a2)
                # the stored float32 is the step taken, so w stays sum alpha y phi
                d = (np.float64(alpha[row, c]) - a) * ys[c]
                if d != 0.0:
                    ds[na] = d
                    cs[na] = c
                    na += 1
            if na == 0:
                continue
            # features outer, stepped regressors inner: the k slots of a feature are adjacent
            for j in range(s, e):
                base = np.int64(indices[j]) * W
                v = np.float64(values[j])
                for q in range(na):
                    sl = np.uint64((base + cs[q]) & mask)
                    tab[sl, 0] = np.float32(np.float64(tab[sl, 0]) + ds[q] * v)
        else:
            for c in range(k):
                a = np.float64(alpha[row, c])
                a2 = dual_step(a, K.score(lin, indices, values, s, e, c), ys[c], D, U, Qbar)
                alpha[row, c] = np.float32(a2)
                d = (np.float64(alpha[row, c]) - a) * ys[c]
                if d != 0.0:
                    add_scaled(lin, indices, values, s, e, c, d)
