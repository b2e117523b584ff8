"""Two multiclass tasks built from the King James Bible (``kjv/kjv.txt.xz``, one verse a line).

Input format: ``Ref text``, e.g. ``Ge1:1 In the beginning God created ...``; ``Ref`` is
``<book><chapter>:<verse>`` where the book abbreviation may start with a digit (``1Sm``, ``2Ki``).

Tokenisation (both tasks)
    ``tokenize(text)``: lowercase the verse text (the ``Ref`` is not part of it), take the
    runs of ``[a-z']`` (``re.findall(r"[a-z']+", text.lower())``), strip apostrophes at both
    ends of each run and drop runs that become empty.  So ``LORD's`` -> ``lord's``,
    ``fathers'`` -> ``fathers``, ``Let there be light: and`` -> ``let there be light and``;
    digits, hyphens and other punctuation separate words.  Tokens therefore contain only
    ``a-z`` and inner apostrophes: never a space, ``:`` or ``|``, so they are safe VW feature
    names.  With this rule the whole file has 789,684 words and 12,762 distinct ones (12,824 if
    end apostrophes were kept: `fathers'` would then differ from `fathers`).

Next-word task (``build_next_word``)
    Every word position of every verse is one example.  The label is the word's rank among the
    ``vocab`` (default 5,000) most frequent words of the *training* verses (rank 1 = most
    frequent; ties broken alphabetically), and ``vocab + 1`` ("other") for every other word.
    Features, in three namespaces: ``|p1 <previous word> |p2 <word before it>
    |pair <p2>_<p1>``; at the start of a verse a missing word is ``<s>``.  So every line has
    exactly 3 features (4 with lomtree's constant), and context words keep their spelling
    even when they are out of the vocabulary.  Verse ``i`` (0-based, file order) is a test
    verse when ``i % 10 == 9``, a training verse otherwise.  Outputs (in ``out_dir``):
    ``kjv_nextword.train.vw``, ``kjv_nextword.test.vw`` and ``kjv_nextword.vocab.tsv``
    (``rank<TAB>word<TAB>count`` with a header line, counts over training verses, plus a last
    row for the "other" class with the number of training tokens it covers).  No tags.

Verse -> book task (``build_book``)
    The label is the book number 1..66 in canonical order, i.e. the order in which the book
    abbreviations first appear in the file (``Ge`` = 1 ... ``Rev`` = 66).  Features: the verse's
    words as a bag of words in namespace ``w`` (``17 |w in the beginning god ...``; repeated
    words are kept, so they count twice).  The verses are shuffled with
    ``numpy.random.default_rng(seed).permutation``; position ``j`` of the shuffled order goes
    to the test file when ``j % 5 == 4`` (1 in 5), to the training file otherwise.  Outputs:
    ``kjv_book.train.vw``, ``kjv_book.test.vw`` and ``kjv_book.books.tsv``
    (``label<TAB>abbreviation<TAB>verses``).

Command line::

    python -m data_scripts.kjv_tasks [--task next-word|book|both] [--kjv PATH] [--out-dir DIR]
                                     [--vocab 5000] [--seed 0]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .common import DEFAULT_OUT_DIR, add_data_dir_argument, atomic_write, iter_lines

#: the KJV file inside the shared data dir
KJV_RELPATH = "kjv/kjv.txt.xz"
#: padding token for missing context words at the start of a verse
PAD = "<s>"
NEXT_WORD_PREFIX = "kjv_nextword"
BOOK_PREFIX = "kjv_book"

_WORD_RE = re.compile(r"[a-z']+")
_REF_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)$")


class Verse(NamedTuple):
    """One verse: ``ref`` ('Ge1:1'), ``book`` abbreviation ('Ge'), chapter, verse number, words."""

    ref: str
    book: str
    chapter: int
    number: int
    words: list[str]


def tokenize(text: str) -> list[str]:
    """Lowercase, take runs of ``[a-z']``, strip apostrophes at their ends, drop empties.

    >>> tokenize("And God said, Let there be light: and the LORD's 'house' of fathers'.")
    ['and', 'god', 'said', 'let', 'there', 'be', 'light', 'and', 'the', "lord's", 'house', 'of', 'fathers']
    >>> tokenize("' -- 12 ''")
    []
    """
    out = []
    for w in _WORD_RE.findall(text.lower()):
        w = w.strip("'")
        if w:
            out.append(w)
    return out


def parse_verse(line: str, line_no: int = 0) -> Verse:
    """Split ``'Ge1:1 In the beginning'`` into a ``Verse``; raises ValueError on a bad reference."""
    ref, _, text = line.strip().partition(" ")
    m = _REF_RE.match(ref)
    if m is None:
        raise ValueError(f"line {line_no}: bad verse reference {ref!r}")
    return Verse(ref, m.group(1), int(m.group(2)), int(m.group(3)), tokenize(text))


def read_verses(kjv_path) -> list[Verse]:
    """All verses of the file in file order (blank lines skipped)."""
    verses = []
    for line_no, line in enumerate(iter_lines(kjv_path), 1):
        if line.strip():
            verses.append(parse_verse(line, line_no))
    return verses


def is_next_word_test(verse_index: int) -> bool:
    """The held-out rule of the next-word task: verse index (0-based) ``% 10 == 9``."""
    return verse_index % 10 == 9


def build_vocab(word_lists, size: int) -> list[tuple[str, int]]:
    """The ``size`` most frequent words as ``[(word, count)]``, by count desc then word asc."""
    counts = Counter()
    for words in word_lists:
        counts.update(words)
    ranked = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))
    return ranked[:size]


def next_word_lines(words: list[str], rank: dict[str, int], other: int) -> list[str]:
    """The VW lines of one verse for the next-word task (one per word position).

    >>> next_word_lines(["in", "the", "beginning"], {"the": 1, "in": 2}, 3)
    ['2 |p1 <s> |p2 <s> |pair <s>_<s>', '1 |p1 in |p2 <s> |pair <s>_in', '3 |p1 the |p2 in |pair in_the']
    """
    lines = []
    p2 = p1 = PAD
    for w in words:
        lines.append(f"{rank.get(w, other)} |p1 {p1} |p2 {p2} |pair {p2}_{p1}")
        p2, p1 = p1, w
    return lines


def build_next_word(kjv_path, out_dir, vocab: int = 5000, prefix: str = NEXT_WORD_PREFIX) -> dict:
    """Write the next-word task (see the module docstring) into ``out_dir``.

    Returns the dict of ``write_next_word`` with the verse counts as ``n_train_verses`` /
    ``n_test_verses``.
    """
    verses = read_verses(kjv_path)
    info = write_next_word([v.words for v in verses], out_dir, vocab, prefix)
    info["n_train_verses"] = info.pop("n_train_docs")
    info["n_test_verses"] = info.pop("n_test_docs")
    return info


def write_next_word(docs: list[list[str]], out_dir, vocab: int, prefix: str) -> dict:
    """Write a next-word task over ``docs`` (word lists; doc ``i`` is held out when ``i % 10 == 9``).

    Returns a dict with the output paths (``train``, ``test``, ``vocab``), the line counts
    ``n_train``/``n_test``, the document counts ``n_train_docs``/``n_test_docs``,
    ``n_classes`` (= ``vocab + 1``; the label range is 1..n_classes), ``n_vocab`` (words
    actually in the vocabulary, < ``vocab`` only for tiny corpora) and the fractions of
    "other" labels ``other_rate_train``/``other_rate_test``.
    """
    if vocab < 1:
        raise ValueError("vocab must be >= 1")
    out_dir = Path(out_dir)
    train_words = [w for i, w in enumerate(docs) if not is_next_word_test(i)]
    ranked = build_vocab(train_words, vocab)
    rank = {w: r for r, (w, _) in enumerate(ranked, 1)}
    other = vocab + 1
    paths = {
        "train": out_dir / f"{prefix}.train.vw",
        "test": out_dir / f"{prefix}.test.vw",
        "vocab": out_dir / f"{prefix}.vocab.tsv",
    }
    counts = {"train": 0, "test": 0}
    n_other = {"train": 0, "test": 0}
    n_docs = {"train": 0, "test": 0}
    with atomic_write(paths["train"]) as ftrain, atomic_write(paths["test"]) as ftest:
        for i, words in enumerate(docs):
            split = "test" if is_next_word_test(i) else "train"
            lines = next_word_lines(words, rank, other)
            n_docs[split] += 1
            counts[split] += len(lines)
            n_other[split] += sum(1 for w in words if w not in rank)
            if lines:
                (ftest if split == "test" else ftrain).write("\n".join(lines) + "\n")
    with atomic_write(paths["vocab"]) as fv:
        fv.write("rank\tword\tcount\n")
        for r, (w, c) in enumerate(ranked, 1):
            fv.write(f"{r}\t{w}\t{c}\n")
        fv.write(f"{other}\t<other>\t{n_other['train']}\n")
    return {
        **{k: str(p) for k, p in paths.items()},
        "n_train": counts["train"],
        "n_test": counts["test"],
        "n_train_docs": n_docs["train"],
        "n_test_docs": n_docs["test"],
        "n_classes": other,
        "n_vocab": len(ranked),
        "other_rate_train": n_other["train"] / max(counts["train"], 1),
        "other_rate_test": n_other["test"] / max(counts["test"], 1),
    }


def book_numbers(verses) -> dict[str, int]:
    """Book abbreviation -> number 1..B in order of first appearance."""
    order: dict[str, int] = {}
    for v in verses:
        if v.book not in order:
            order[v.book] = len(order) + 1
    return order


def book_line(label: int, words: list[str]) -> str:
    """``book_line(1, ['in', 'the']) == '1 |w in the'``; a verse without words gives ``'1 |w'``."""
    return f"{label} |w " + " ".join(words) if words else f"{label} |w"


def build_book(kjv_path, out_dir, seed: int = 0, prefix: str = BOOK_PREFIX) -> dict:
    """Write the verse -> book task (see the module docstring) into ``out_dir``.

    Returns a dict with the output paths (``train``, ``test``, ``books``), ``n_train``,
    ``n_test``, ``n_classes`` (number of books) and ``seed``.
    """
    out_dir = Path(out_dir)
    verses = read_verses(kjv_path)
    books = book_numbers(verses)
    order = np.random.default_rng(seed).permutation(len(verses))
    paths = {
        "train": out_dir / f"{prefix}.train.vw",
        "test": out_dir / f"{prefix}.test.vw",
        "books": out_dir / f"{prefix}.books.tsv",
    }
    train, test = [], []
    for j, i in enumerate(order.tolist()):
        v = verses[i]
        (test if j % 5 == 4 else train).append(book_line(books[v.book], v.words))
    for key, lines in (("train", train), ("test", test)):
        with atomic_write(paths[key]) as fh:
            if lines:
                fh.write("\n".join(lines) + "\n")
    per_book = Counter(v.book for v in verses)
    with atomic_write(paths["books"]) as fb:
        fb.write("label\tbook\tverses\n")
        for name, num in books.items():
            fb.write(f"{num}\t{name}\t{per_book[name]}\n")
    return {
        **{k: str(p) for k, p in paths.items()},
        "n_train": len(train),
        "n_test": len(test),
        "n_classes": len(books),
        "seed": seed,
    }


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m data_scripts.kjv_tasks",
        description="Build the KJV next-word and verse->book multiclass tasks (VW text).",
    )
    ap.add_argument("--task", choices=("next-word", "book", "both"), default="both")
    ap.add_argument("--kjv", default=None,
                    help=f"KJV text (default: <data-dir>/{KJV_RELPATH})")
    add_data_dir_argument(ap)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR), help="output dir (default: %(default)s)")
    ap.add_argument("--vocab", type=int, default=5000, help="next-word vocabulary size; label vocab+1 = other (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed of the book task (default: %(default)s)")
    args = ap.parse_args(argv)
    kjv = args.kjv or str(Path(args.data_dir) / KJV_RELPATH)
    if args.task in ("next-word", "both"):
        t0 = time.perf_counter()
        info = build_next_word(kjv, args.out_dir, vocab=args.vocab)
        print(f"next-word: {info['n_train']} train / {info['n_test']} test lines, "
              f"{info['n_classes']} classes ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    if args.task in ("book", "both"):
        t0 = time.perf_counter()
        info = build_book(kjv, args.out_dir, seed=args.seed)
        print(f"book: {info['n_train']} train / {info['n_test']} test lines, "
              f"{info['n_classes']} classes ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
