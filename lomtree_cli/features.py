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
#: the largest N of ``--ngram N`` and ``--skips N``
MAX_GRAM = 32
#: the most interaction terms wildcards may make for one chunk's namespaces (counted before
#: duplicates are removed: the table costs memory and every example scans it)
MAX_WILDCARD_TERMS = 1 << 16


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
        if int(digits) > MAX_GRAM:
            raise ConfigError(f"{option} {spec}: N must be at most {MAX_GRAM}")
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
    config asks for no feature generation (then the parser's output is used as it is).

    Sizes: ``plan`` counts, before anything is generated, what every example of a chunk makes
    (``count_features``: exact, never wrapping); an example that would hold or write more than
    ``max_example_features`` features is refused (``plan``'s ``bad``), and the rest is expanded
    in pieces of at most that many features, so a chunk's expansion never holds more than about
    twice the limit (scratch and output) whatever its lines."""

    def __init__(self, cfg):
        self.mask = int(cfg.mask)
        self.limit = int(cfg.max_example_features)
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
        stats = np.zeros((256, 3), np.int64)  # patterns, sum of last offsets, largest last offset
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
            lasts = [p[-1] for p in pats]
            stats[ns] = (len(lasts), sum(lasts), max(lasts))
        width = max([len(r) for r in rows] or [1])
        off = np.zeros((max(1, len(rows)), width), np.int64)
        lens = np.ones(max(1, len(rows)), np.int64)
        for i, r in enumerate(rows):
            off[i, : len(r)] = r
            lens[i] = len(r)
        self.pat_range, self.pat_stats, self.pat_off, self.pat_len = rng, stats, off, lens
        self.active = bool(terms) or bool(rows) or bool((mode != 0).any())
        self._fixed = None if self.wild else self._term_tables(normalise_terms(terms))
        self._tables: dict = {}  # namespaces present -> small wildcard term tables

    @staticmethod
    def _term_tables(terms: list[bytes]):
        width = max([len(t) for t in terms] or [1])
        arr = np.zeros((len(terms), width), np.int64)
        lens = np.ones(len(terms), np.int64)
        for i, t in enumerate(terms):
            arr[i, : len(t)] = list(t)
            lens[i] = len(t)
        return arr, lens

    def _wild_terms(self, present: np.ndarray) -> int:
        """How many terms the wildcards make over the namespaces ``present`` (before duplicates go)."""
        m = int(present.sum())
        return sum(m ** t.count(WILDCARD) for t in self.terms)

    def term_tables(self, present: np.ndarray):
        """(terms, lengths) for examples whose namespaces are among ``present`` (bool (256,)):
        wildcards expand over those namespaces (as VW's over every namespace seen: a term
        needing a namespace an example lacks makes nothing for it, so an example's features do
        not depend on the others')."""
        if not self.wild:
            return self._fixed
        key = present.tobytes()
        tables = self._tables.get(key)
        if tables is None:
            names = [int(c) for c in np.flatnonzero(present)]
            tables = self._term_tables(normalise_terms(expand_wildcards(self.terms, names)))
            if len(tables[1]) <= 4096:
                if len(self._tables) >= 64:
                    self._tables.clear()
                self._tables[key] = tables
        return tables

    def _count(self, indptr, nsid, tables):
        from .kernels.interactions import count_features

        return count_features(indptr, nsid, self.ns_mode, self.pat_range, self.pat_stats, self.pat_off,
                              self.pat_len, tables[0], tables[1], np.int64(self.limit))

    def plan(self, indptr, nsid):
        """``(groups, sizes, bad)`` of a chunk: ``groups`` ranges ``(lo, hi, tables)`` of
        examples that share term tables (one for the whole chunk unless wildcards over its
        namespaces make too many terms); ``sizes`` int64 (n,) the features each example writes;
        ``bad`` {example: why} for the examples refused."""
        from .kernels.interactions import namespaces_present

        n = indptr.shape[0] - 1
        bad: dict = {}
        present = namespaces_present(nsid)
        if not self.wild or self._wild_terms(present) <= MAX_WILDCARD_TERMS:
            groups = [(0, n, self.term_tables(present))]
        else:  # examples by themselves, each with the terms of its own namespaces
            groups = []
            for i in range(n):
                own = namespaces_present(nsid[indptr[i]:indptr[i + 1]])
                if self._wild_terms(own) > MAX_WILDCARD_TERMS:
                    bad[i] = (f"the interaction wildcards over its {int(own.sum())} namespaces make more than "
                              f"{MAX_WILDCARD_TERMS} terms")
                else:
                    groups.append((i, i + 1, self.term_tables(own)))
        sizes = np.zeros(n, np.int64)
        for lo, hi, tables in groups:
            counts = self._count(indptr[lo:hi + 1] - indptr[lo], nsid[indptr[lo]:indptr[hi]], tables)
            sizes[lo:hi] = counts[:, 1]
            for j in np.flatnonzero(counts.max(axis=1) > self.limit).tolist():
                bad[lo + j] = (f"the feature options make more than {self.limit} features of this example "
                               "(--max-example-features)")
        return groups, sizes, bad

    def expand(self, indptr, indices, values, nsid, tables, size: int):
        """``expand_features`` of a piece of examples ``plan`` accepted, ``size`` their sizes' sum."""
        from .kernels.interactions import expand_features

        return expand_features(indptr, indices, values, nsid, np.int64(self.mask), self.ns_mode, self.pat_range,
                               self.pat_stats, self.pat_off, self.pat_len, tables[0], tables[1], np.int64(size))


def check_options(interactions: str, ngram: str, skips: str) -> None:
    """ConfigError (exit 2) on a malformed term or n-gram spec."""
    for t in split_specs(interactions):
        if len(term_bytes(t)) < 2:
            raise ConfigError(f"--interactions: an interaction needs at least two namespaces, got {t!r}")
        if len(term_bytes(t)) > 16:
            raise ConfigError(f"--interactions: an interaction has at most 16 namespaces, got {t!r}")
    grams = parse_gram_specs(split_specs(ngram), "--ngram")
    sk = parse_gram_specs(split_specs(skips), "--skips")
    for ns, n in grams.items():
        gram_patterns(n, sk.get(ns, sk.get(None, 0)))
    if sk and not any(n > 1 for n in grams.values()):
        raise ConfigError("--skips needs --ngram N with N > 1")
