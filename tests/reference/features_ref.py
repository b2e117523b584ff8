"""Slow pure-Python reference of VW's feature generation, written from VW's
definitions, independent of ``lomtree_cli/features.py`` and ``kernels/interactions.py``:

* namespace index = first byte of the namespace name (32 for the default namespace);
* n-grams: for n = 2 .. N, every n-gram of a namespace's features (input order) with gaps
  g_1 .. g_{n-1} >= 0 whose sum is at most K (--skips), hash ``h = h * 27942141 + idx``, value 1;
* interactions: every term after wildcard expansion and VW 9's permutation de-duplication; the
  positions of a namespace equal to the previous one start at the previous position; hash
  ``h = (16777619 * h) ^ idx``, value the product; all arithmetic mod 2**64, then ``& mask``.

Lines are simple: ``label |ns[:w] name[:value] ...`` with no string values.
"""

import itertools

import numpy as np

from .parser_ref import H

M64 = (1 << 64) - 1
FNV = 16777619
QC = 27942141


def parse_line(line: str, bits: int, seed: int = 0):
    """[(ns byte, index, value)] of a simple VW line (no constant)."""
    mask = (1 << bits) - 1
    out = []
    for part in line.split("|")[1:]:
        if part[:1] in ("", " "):
            ns, nh, nsw, toks = 32, seed, 1.0, part.split()
        else:
            toks = part.split()
            name, _, w = toks[0].partition(":")
            ns, nh, nsw = name.encode()[0], H(name.encode(), seed) & 0xFFFFFFFF, float(w) if w else 1.0
            toks = toks[1:]
        for t in toks:
            name, _, v = t.partition(":")
            val = float(np.float32(float(v) * nsw if v else nsw))
            if val != 0:
                out.append((ns, H(name.encode(), nh) & mask, val))
    return out


def _patterns(n_max: int, k: int):
    for n in range(2, n_max + 1):
        for gaps in itertools.product(range(k + 1), repeat=n - 1):
            if sum(gaps) <= k:
                offs = [0]
                for g in gaps:
                    offs.append(offs[-1] + 1 + g)
                yield offs


def _terms(terms, seen):
    concrete = []
    for t in terms:
        choices = [seen if c == ord(":") else [c] for c in t]
        concrete.extend(bytes(x) for x in itertools.product(*choices))
    keys = [bytes(sorted(t)) for t in concrete]
    out = []
    for i, (t, key) in enumerate(zip(concrete, keys)):
        if key in keys[:i]:
            continue
        dup = keys.count(key) > 1
        out.append(key if (dup or len(set(t)) < len(t)) else t)
    return out


def generate(feats, bits, terms=(), ngram=None, skips=None, ignore=b"", keep=b"", ignore_linear=b"", seen=None):
    """[(index, value)] of one example. ``ngram``/``skips``: {ns byte or None: N}."""
    mask = (1 << bits) - 1
    ngram, skips = ngram or {}, skips or {}
    groups: dict = {}
    for ns, idx, v in feats:
        if ns in ignore or (keep and ns not in keep):
            continue
        groups.setdefault(ns, []).append((idx, v))
    for ns, g in groups.items():
        n = ngram.get(ns, ngram.get(None, 1))
        k = skips.get(ns, skips.get(None, 0))
        base = list(g)
        for offs in _patterns(n, k):
            for s in range(len(base) - offs[-1]):
                h = base[s][0]
                for o in offs[1:]:
                    h = (h * QC + base[s + o][0]) & M64
                g.append((h, 1.0))
    out = [(i & mask, v) for ns, g in groups.items() if ns not in ignore_linear for i, v in g]
    if seen is None:
        seen = sorted(groups)
    for t in _terms([bytes(x) for x in terms], list(seen)):
        if any(c not in groups for c in t):
            continue
        ranges = [range(len(groups[c])) for c in t]
        for pos in itertools.product(*ranges):
            if any(t[p] == t[p - 1] and pos[p] < pos[p - 1] for p in range(1, len(t))):
                continue
            h, v = 0, np.float32(1.0)
            for p, (c, j) in enumerate(zip(t, pos)):
                idx, val = groups[c][j]
                h = idx if p == 0 else (((FNV * h) & M64) ^ idx)
                v = np.float32(v * np.float32(val))
            if v != 0:
                out.append((h & mask, float(v)))
    return out
