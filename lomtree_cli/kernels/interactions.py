"""Feature generation over a parsed chunk: namespace filters, n-grams/skip-grams and interactions,
with Vowpal Wabbit's semantics (``lomtree_cli/features.py`` turns the options into the tables
used here; ``tests/test_features.py`` checks the slots against a pure-Python reference).

Input: a parsed chunk in CSR form whose features carry their namespace index ``nsid`` (VW's
index: the first byte of the namespace name, 32 for the default namespace, 128 for the
constant). Per example:

1. features of an ignored namespace (``ns_mode == IGNORE``) are dropped;
2. the remaining features are grouped by namespace index, in input order within a namespace;
3. n-grams: for every skip-gram pattern of the namespace (offsets ``0 = o_0 < o_1 < ... < o_m``)
   and every start ``s`` with ``s + o_m < L`` (L = the namespace's feature count before any
   gram), the feature ``h = idx[s]; h = h * 27942141 + idx[s + o_q]`` (VW's quadratic constant,
   wrapping 64-bit) of value 1 is appended to the namespace (so interactions cross n-grams too);
4. linear features of every namespace not marked ``IGNORE_LINEAR``;
5. every interaction term (a sequence of namespace indices, all present in the example): the
   features ``h = idx_0; h = (16777619 * h) ^ idx_q`` (FNV prime mix, wrapping 64-bit), value
   the product of the values (float32, left to right). Where a namespace repeats the one before
   it, its loop starts at the earlier one's position (VW 9: no duplicate pairs, the diagonal
   kept);
6. the constant feature(s) (namespace 128) last, never crossed.

Sizes: ``count_features`` counts, before anything is generated, the features each example holds
(its groups with their grams) and writes, exactly and saturated (a product of 64-bit counts never
wraps); ``features.FeatureSpec.plan`` refuses an example over ``--max-example-features`` and
``expand_features`` is then given the exact size of its output.

Indices are masked (``& mask``) when written; masking before the mix changes nothing (the low b
bits of a product or xor depend only on the low b bits of its operands). Features whose product
underflows to 0 are dropped (a batch never holds a zero value).
"""

from __future__ import annotations

import numpy as np

from . import jit

FNV_PRIME = np.uint64(16777619)
QUADRATIC_CONSTANT = np.uint64(27942141)
KEEP, IGNORE, IGNORE_LINEAR = 0, 1, 2
CONSTANT_NS = 128


@jit()
def _grow(a, need):
    """A copy of ``a`` with room for ``need`` items (doubling); compiled once per dtype."""
    n = a.shape[0]
    while n < need:
        n *= 2
    b = np.empty(n, a.dtype)
    b[: a.shape[0]] = a
    return b


@jit(nogil=True)
def _sat_mul(a, b, limit):
    """``a * b`` for ``0 <= a, b <= limit + 1``, or ``limit + 1`` when it is larger (never wraps)."""
    if a == 0 or b == 0:
        return 0
    if a > (limit + 1) // b:
        return limit + 1
    return min(a * b, limit + 1)


@jit(nogil=True)
def _multisets(g, r, limit):
    """C(g + r - 1, r), the pairs, triples, ... of one namespace with itself (a run of ``r`` equal
    namespaces of ``g`` features), or ``limit + 1`` when larger. Each step's value is exact and
    the steps do not decrease, so the first one over the limit decides."""
    c = 1
    for j in range(1, r + 1):
        f = g + j - 1
        if np.float64(c) * np.float64(f) / np.float64(j) > np.float64(limit) + 1.0:
            return limit + 1
        c = c * f // j
    return c


@jit(nogil=True)
def _group_size(L, s, pat_range, pat_stats, pat_off, pat_len):
    """Namespace ``s``'s ``L`` features plus its n-grams: a pattern whose last offset is ``o``
    makes ``max(0, L - o)`` (in one step when ``L`` exceeds every ``o``)."""
    if L > pat_stats[s, 2]:
        return L + pat_stats[s, 0] * L - pat_stats[s, 1]
    g = L
    for p in range(pat_range[s, 0], pat_range[s, 1]):
        g += max(0, L - pat_off[p, pat_len[p] - 1])
    return g


@jit(nogil=True)
def _example_size(a, b, nsid, ns_mode, pat_range, pat_stats, pat_off, pat_len, terms, term_len, limit,
                  cnt, order):
    """Group example ``a:b``'s features by namespace (``cnt``, ``order``: the caller clears
    ``cnt`` of ``order[:n_ns]`` afterwards) and count what expanding it makes, exactly and
    saturated at ``limit + 1``: ``(n_ns, n_const, scratch, total)``, ``scratch`` the features of
    every group with its grams, ``total`` the features written (linear kept, every term's
    candidates, constants). ``pat_stats[s]``: (patterns, sum of their last offsets, largest)."""
    n_ns = 0
    n_const = 0
    for j in range(a, b):
        s = np.int64(nsid[j])
        if s == 128:
            n_const += 1
            continue
        if ns_mode[s] == IGNORE:
            continue
        if cnt[s] == 0:
            order[n_ns] = s
            n_ns += 1
        cnt[s] += 1
    scratch = 0
    total = n_const
    for q in range(n_ns):
        s = order[q]
        g = _group_size(cnt[s], s, pat_range, pat_stats, pat_off, pat_len)
        scratch = min(scratch + g, limit + 1)
        if ns_mode[s] != IGNORE_LINEAR:
            total = min(total + g, limit + 1)
    for t in range(terms.shape[0]):
        prod = 1
        r = 0
        while r < term_len[t]:
            s = terms[t, r]
            run = 1
            while r + run < term_len[t] and terms[t, r + run] == s:
                run += 1
            if cnt[s] == 0:
                prod = 0
                break
            g = _group_size(cnt[s], s, pat_range, pat_stats, pat_off, pat_len)
            prod = _sat_mul(prod, _multisets(min(g, limit + 1), run, limit), limit)
            r += run
        total = min(total + prod, limit + 1)
    return n_ns, n_const, scratch, total


@jit(nogil=True)
def count_features(indptr, nsid, ns_mode, pat_range, pat_stats, pat_off, pat_len, terms, term_len, limit):
    """int64 (n, 2): per example, the features ``expand_features`` holds while expanding it
    (every namespace's group with its grams) and the features it writes, each exact or
    ``limit + 1`` when larger (the products never wrap). Runs of one namespace in a term count
    its multisets, as the expansion skips repeated pairs."""
    n = indptr.shape[0] - 1
    out = np.empty((n, 2), np.int64)
    cnt = np.zeros(256, np.int64)
    order = np.empty(256, np.int64)
    for i in range(n):
        n_ns, _, scratch, total = _example_size(indptr[i], indptr[i + 1], nsid, ns_mode, pat_range, pat_stats,
                                                pat_off, pat_len, terms, term_len, limit, cnt, order)
        for q in range(n_ns):
            cnt[order[q]] = 0
        out[i, 0] = scratch
        out[i, 1] = total
    return out


@jit(nogil=True)
def expand_features(indptr, indices, values, nsid, mask, ns_mode, pat_range, pat_stats, pat_off, pat_len, terms,
                    term_len, size):
    """The generated chunk: ``(indptr, indices, values)`` (int64, int64, float32).

    Parameters
    ----------
    indptr, indices, values, nsid : the parsed chunk (``nsid`` uint8, one per feature)
    mask : int64, ``2**bits - 1``
    ns_mode : int64 (256,), KEEP / IGNORE / IGNORE_LINEAR per namespace index
    pat_range : int64 (256, 2), the namespace's n-gram patterns are rows ``[lo, hi)`` of ``pat_off``
    pat_stats : int64 (256, 3), per namespace: patterns, sum of their last offsets, the largest
    pat_off : int64 (P, W), pattern offsets (``pat_off[p, 0] == 0``); ``pat_len`` (P,) their lengths
    terms : int64 (T, W2), interaction terms (namespace indices); ``term_len`` (T,) their lengths
    size : int64, the chunk's total of ``count_features`` (the caller refused larger examples):
        the output buffers are allocated once at this size
    """
    n = indptr.shape[0] - 1
    umask = np.uint64(mask)
    out_ptr = np.empty(n + 1, np.int64)
    out_ptr[0] = 0
    cap = max(16, size)
    out_idx = np.empty(cap, np.int64)
    out_val = np.empty(cap, np.float32)
    cnt = np.zeros(256, np.int64)
    gstart = np.zeros(256, np.int64)
    gend = np.zeros(256, np.int64)
    order = np.empty(256, np.int64)
    sidx = np.empty(64, np.uint64)
    sval = np.empty(64, np.float32)
    max_tl = 1
    for t in range(terms.shape[0]):
        max_tl = max(max_tl, term_len[t])
    pos = np.zeros(max_tl, np.int64)
    hh = np.zeros(max_tl, np.uint64)
    vv = np.zeros(max_tl, np.float32)
    big = np.int64(1) << 62
    nnz = 0
    for i in range(n):
        a = indptr[i]
        b = indptr[i + 1]
        # 1-2: group by namespace (order of first appearance), room for the grams
        n_ns, n_const, room, need = _example_size(a, b, nsid, ns_mode, pat_range, pat_stats, pat_off, pat_len,
                                                  terms, term_len, big, cnt, order)
        if room > sidx.shape[0]:
            sidx = _grow(sidx, room)
            sval = _grow(sval, room)
        room = 0
        for q in range(n_ns):
            s = order[q]
            gstart[s] = room
            gend[s] = room
            room += _group_size(cnt[s], s, pat_range, pat_stats, pat_off, pat_len)
        for j in range(a, b):
            s = np.int64(nsid[j])
            if s == 128 or ns_mode[s] == IGNORE:
                continue
            g = gend[s]
            sidx[g] = np.uint64(indices[j])
            sval[g] = values[j]
            gend[s] = g + 1
        # 3: n-grams and skip-grams within each namespace
        for q in range(n_ns):
            s = order[q]
            L = cnt[s]
            base = gstart[s]
            g = gend[s]
            for p in range(pat_range[s, 0], pat_range[s, 1]):
                w = pat_len[p]
                last = pat_off[p, w - 1]
                for st in range(0, L - last):
                    h = sidx[base + st]
                    for r in range(1, w):
                        h = h * QUADRATIC_CONSTANT + sidx[base + st + pat_off[p, r]]
                    sidx[g] = h
                    sval[g] = np.float32(1.0)
                    g += 1
            gend[s] = g
        if nnz + need > out_idx.shape[0]:  # only when the caller's size was short
            out_idx = _grow(out_idx, nnz + need)
            out_val = _grow(out_val, nnz + need)
        # 4: linear features
        for q in range(n_ns):
            s = order[q]
            if ns_mode[s] == IGNORE_LINEAR:
                continue
            for g in range(gstart[s], gend[s]):
                out_idx[nnz] = np.int64(sidx[g] & umask)
                out_val[nnz] = sval[g]
                nnz += 1
        # 5: interactions (an odometer over the term's positions)
        for t in range(terms.shape[0]):
            tl = term_len[t]
            present = True
            for r in range(tl):
                if cnt[terms[t, r]] == 0:
                    present = False
            if not present:
                continue
            d = 0
            pos[0] = gstart[terms[t, 0]]
            while d >= 0:
                s = terms[t, d]
                if pos[d] >= gend[s]:
                    d -= 1
                    if d >= 0:
                        pos[d] += 1
                    continue
                if d == 0:
                    hh[0] = sidx[pos[0]]
                    vv[0] = sval[pos[0]]
                else:
                    hh[d] = (FNV_PRIME * hh[d - 1]) ^ sidx[pos[d]]
                    vv[d] = vv[d - 1] * sval[pos[d]]
                if d == tl - 1:
                    if vv[d] != 0:
                        out_idx[nnz] = np.int64(hh[d] & umask)
                        out_val[nnz] = vv[d]
                        nnz += 1
                    pos[d] += 1
                else:
                    nxt = terms[t, d + 1]
                    pos[d + 1] = pos[d] if nxt == s else gstart[nxt]
                    d += 1
        # 6: the constant
        for j in range(a, b):
            if nsid[j] == 128:
                out_idx[nnz] = indices[j]
                out_val[nnz] = values[j]
                nnz += 1
        for q in range(n_ns):
            cnt[order[q]] = 0
        out_ptr[i + 1] = nnz
    return out_ptr, out_idx[:nnz], out_val[:nnz]


@jit(nogil=True)
def namespaces_present(nsid):
    """bool (256,): the namespace indices that occur in ``nsid`` (the constant's 128 excluded)."""
    seen = np.zeros(256, np.bool_)
    for j in range(nsid.shape[0]):
        seen[nsid[j]] = True
    seen[128] = False
    return seen
