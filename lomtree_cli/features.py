"""VW's feature options: -q/--quadratic, --cubic, --interactions, --ngram, --skips,
--ignore, --keep, --ignore_linear, read from ``InputConfig`` into the tables of
``kernels/interactions.py``.

Spellings stored in ``InputConfig`` (JSON in the model header, so ``predict`` needs nothing else):

* ``interactions``: terms joined by ``,``, each a string of namespace characters; ``:`` is any
  namespace seen (VW's wildcard; the constant is never one). ``-q ab`` and ``--cubic abc`` are
  stored as the terms ``ab`` and ``abc``.
* ``ngram`` / ``skips``: specs joined by ``,``: ``N`` (every namespace) or ``aN`` (namespace ``a``).
* ``ignore``, ``keep``, ``ignore_linear``: the namespace characters, concatenated.

Namespace characters are bytes (a namespace's index is the first byte of its name, as in VW).

Interaction terms are normalised as VW 9 does by default (no ``--leave_duplicate_interactions``):
after wildcard expansion, terms equal up to order are kept once; a term that had such a duplicate,
or that names a namespace more than once, is written sorted (so equal namespaces are adjacent and
their pairs are not repeated); other terms keep the order given.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError

WILDCARD = ord(":")
#: the most skip-gram patterns one namespace may generate (each is a feature per position)
MAX_PATTERNS = 4096


def split_specs(text: str) -> list[str]:
    return [t for t in text.split(",") if t] if text else []


def term_bytes(term: str) -> bytes:
    return term.encode("utf-8", errors="surrogateescape")


def parse_gram_specs(specs: list[str], option: str) -> dict:
    """{namespace byte or None (all): N} of ``--ngram`` / ``--skips`` values; ConfigError on a bad one."""
    out: dict = {}
    for spec in specs:
        b = term_bytes(spec)
        if b[:1].isdigit():
            ns, digits = None, spec
        else:
            ns, digits = b[0], b[1:].decode("utf-8", errors="replace")
        if not digits.isdigit():
            raise ConfigError(f"{option} must be N or a namespace letter followed by N (e.g. 2 or a2), got {spec!r}")
        out[ns] = int(digits)
    return out


def gram_patterns(ngram: int, skips: int) -> list[tuple]:
    """The offset patterns of VW's n-grams with skips: for n = 1 .. ngram-1, every (n+1)-gram
    whose gaps add up to at most ``skips`` extra tokens, as VW's recursive generator makes them."""
    out: list = []

    def rec(n, skip_gram, mask, skip):
        if n == 0:
            out.append(tuple(mask))
        if n > 0:
            mask.append(mask[-1] + 1 + skip)
            rec(n - 1, skip_gram, mask, 0)
            mask.pop()
        if skip_gram > 0 and n > 0:
            rec(n, skip_gram - 1, mask, skip + 1)

    for n in range(1, ngram):
        rec(n, skips, [0], 0)
        if len(out) > MAX_PATTERNS:
            raise ConfigError(f"--ngram {ngram} with --skips {skips} makes more than {MAX_PATTERNS} "
                              "n-gram patterns per namespace")
    return out


def normalise_terms(terms: list[bytes]) -> list[bytes]:
    """VW 9's de-duplication of concrete terms (see the module docstring)."""
    first: dict = {}
    count: dict = {}
    for t in terms:
        key = bytes(sorted(t))
        count[key] = count.get(key, 0) + 1
        first.setdefault(key, t)
    out = []
    for key, t in first.items():
        repeats = len(set(t)) < len(t)
        out.append(key if (count[key] > 1 or repeats) else t)
    return out


def expand_wildcards(terms: list[bytes], seen: list[int]) -> list[bytes]:
    """Every term with each ``:`` replaced by each namespace of ``seen`` (in that order)."""
    out = []
    for t in terms:
        partial = [b""]
        for c in t:
            if c == WILDCARD:
                partial = [p + bytes([s]) for p in partial for s in seen]
            else:
                partial = [p + bytes([c]) for p in partial]
        out.extend(partial)
    return out


class FeatureSpec:
    """The tables of ``expand_features`` for one ``InputConfig``; ``active`` is False when the
    config asks for no feature generation (then the parser's output is used as it is)."""

    def __init__(self, cfg):
        self.mask = int(cfg.mask)
        terms = [term_bytes(t) for t in split_specs(cfg.interactions)]
        self.terms = terms
        self.wild = any(WILDCARD in t for t in terms)
        mode = np.zeros(256, np.int64)
        if cfg.keep:
            mode[:] = 1
            for c in term_bytes(cfg.keep):
                mode[c] = 0
        for c in term_bytes(cfg.ignore):
            mode[c] = 1
        for c in term_bytes(cfg.ignore_linear):
            if mode[c] == 0:
                mode[c] = 2
        mode[128] = 0
        self.ns_mode = mode
        grams = parse_gram_specs(split_specs(cfg.ngram), "--ngram")
        skips = parse_gram_specs(split_specs(cfg.skips), "--skips")
        rows: list = []
        rng = np.zeros((256, 2), np.int64)
        cache: dict = {}
        for ns in range(256):
            if ns == 128:
                continue
            n = grams.get(ns, grams.get(None, 1))
            k = skips.get(ns, skips.get(None, 0))
            if n <= 1:
                continue
            if (n, k) not in cache:
                cache[(n, k)] = (len(rows), gram_patterns(n, k))
                rows.extend(cache[(n, k)][1])
            lo, pats = cache[(n, k)]
            rng[ns] = (lo, lo + len(pats))
        width = max([len(r) for r in rows] or [1])
        off = np.zeros((max(1, len(rows)), width), np.int64)
        lens = np.ones(max(1, len(rows)), np.int64)
        for i, r in enumerate(rows):
            off[i, : len(r)] = r
            lens[i] = len(r)
        self.pat_range, self.pat_off, self.pat_len = rng, off, lens
        self.active = bool(terms) or bool(rows) or bool((mode != 0).any())
        # (namespaces seen, term tables for them): replaced as a whole, so parse threads never
        # pair a newer seen-set with older tables
        self._state = (np.zeros(256, bool), None if self.wild else self._term_tables(normalise_terms(terms)))
        self._ratio = 2.0  # generated / parsed features of the last chunk

    @staticmethod
    def _term_tables(terms: list[bytes]):
        width = max([len(t) for t in terms] or [1])
        arr = np.zeros((len(terms), width), np.int64)
        lens = np.ones(len(terms), np.int64)
        for i, t in enumerate(terms):
            arr[i, : len(t)] = list(t)
            lens[i] = len(t)
        return arr, lens

    def term_tables(self, nsid: np.ndarray):
        """(terms, lengths) for a chunk with namespace indices ``nsid``: wildcards expand over
        every namespace seen so far in the run (as VW does; a term needing a namespace an
        example lacks makes nothing for it, so the result per example does not depend on when a
        namespace was first seen)."""
        seen, tables = self._state
        if not self.wild:
            return tables
        from .kernels.interactions import namespaces_present

        now = seen | namespaces_present(nsid)
        if tables is None or (now != seen).any():
            names = [int(c) for c in np.flatnonzero(now)]
            tables = self._term_tables(normalise_terms(expand_wildcards(self.terms, names)))
            self._state = (now, tables)
        return tables

    def expand(self, indptr, indices, values, nsid):
        from .kernels.interactions import expand_features

        terms, lens = self.term_tables(nsid)
        n_in = int(indices.shape[0])
        hint = int(n_in * self._ratio * 1.1) + 16
        out = expand_features(indptr, indices, values, nsid, np.int64(self.mask), self.ns_mode,
                              self.pat_range, self.pat_off, self.pat_len, terms, lens, np.int64(hint))
        if n_in:
            self._ratio = max(1.0, out[1].shape[0] / n_in)  # the next chunk's buffers are sized by it
        return out


def check_options(interactions: str, ngram: str, skips: str) -> None:
    """ConfigError (exit 2) on a malformed term or n-gram spec."""
    for t in split_specs(interactions):
        if len(term_bytes(t)) < 2:
            raise ConfigError(f"an interaction needs at least two namespaces, got {t!r}")
        if len(term_bytes(t)) > 16:
            raise ConfigError(f"an interaction has at most 16 namespaces, got {t!r}")
    grams = parse_gram_specs(split_specs(ngram), "--ngram")
    sk = parse_gram_specs(split_specs(skips), "--skips")
    for ns, n in grams.items():
        gram_patterns(n, sk.get(ns, sk.get(None, 0)))
    if sk and not any(n > 1 for n in grams.values()):
        raise ConfigError("--skips needs --ngram N with N > 1")
