"""The PyPI-names tagging task: a package's summary -> the tokens of its name (10^4-10^5 labels).

Input: ``pypi/summaries.txt.xz`` (``name<TAB>summary``, one package a line, in file order).

Labels
    The tokens of the name split at ``-``, ``_`` and ``.``, lower-cased (empty tokens dropped,
    repeats counted once), kept when seen in at least ``min_count`` names (``5``: 25,596 labels;
    ``2``: 85,499). Label ids ``1..L`` in sorted token order (``NAME.labels.tsv``: ``id<TAB>token``).
Features
    The summary's words, ``[a-z']+`` of the lower-cased summary, each distinct word once, in one
    namespace. Feature ids ``0..F-1`` in sorted word order over every kept package.
Examples
    Packages with no kept label or no word are dropped; of the rest, in file order, every 10th
    (``i % 10 == 9``) is a test example: 425,560 train / 47,284 test at ``min_count`` 5,
    468,186 / 52,020 at 2.

Outputs in ``--out-dir`` (default ``bench/data/multilabel``), ``NAME`` = ``pypi_names`` (5) or
``pypi_names_min2``:

``NAME.train.txt``, ``NAME.test.txt``
    XMC text (header ``N F L``; a line ``l1,l2 f:v f:v``) with labels ``id - 1`` (0-based, as XMC
    readers expect) and unit-length binary rows (every word ``1/sqrt(words)``), the rows napkinXC
    and Omikuji are given.
``NAME.train.vw``, ``NAME.test.vw`` (with ``--vw``)
    VW text ``id1,id2 | word word ...`` (1-based ids, binary words): the raw stream.

Command line::

    python -m data_scripts.pypi_names [--min-count 5 2] [--vw] [--data-dir DIR] [--out-dir DIR] [--force]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterable

from .common import DEFAULT_OUT_DIR, add_data_dir_argument, atomic_write, is_up_to_date, iter_lines

PYPI_RELPATH = "pypi/summaries.txt.xz"
MIN_COUNTS = (5, 2)
TEST_EVERY = 10

_WORD_RE = re.compile(r"[a-z']+")
_SPLIT_RE = re.compile(r"[-_.]")


def task_name(min_count: int) -> str:
    """``5`` -> ``'pypi_names'`` (the task), other counts -> ``'pypi_names_min<N>'``."""
    return "pypi_names" if min_count == 5 else f"pypi_names_min{min_count}"


def name_tokens(name: str) -> list[str]:
    """The distinct tokens of a package name, in order of first appearance.

    >>> name_tokens("Django-REST_framework.django")
    ['django', 'rest', 'framework']
    >>> name_tokens("--")
    []
    """
    return list(dict.fromkeys(t for t in _SPLIT_RE.split(name.lower()) if t))


def summary_words(summary: str) -> list[str]:
    """The distinct words ``[a-z']+`` of the lower-cased summary, in order of first appearance.

    >>> summary_words("A tool's CLI, a TOOL for 2 tools")
    ['a', "tool's", 'cli', 'tool', 'for', 'tools']
    """
    return list(dict.fromkeys(_WORD_RE.findall(summary.lower())))


def read_packages(lines: Iterable[str], source: str = "<input>") -> list[tuple[list[str], list[str]]]:
    """(name tokens, summary words) per ``name<TAB>summary`` line; a line without a tab is an error
    naming it."""
    out = []
    for line_no, line in enumerate(lines, 1):
        name, tab, summary = line.partition("\t")
        if not tab:
            raise ValueError(f"{source}:{line_no}: expected name<TAB>summary")
        out.append((name_tokens(name), summary_words(summary)))
    return out


def build_task(packages: list[tuple[list[str], list[str]]], min_count: int):
    """The task from parsed packages: ``(labels, words, train, test)`` where ``labels`` and
    ``words`` are the sorted vocabularies and ``train``/``test`` lists of ``(label ids 1.., word
    ids 0..)`` (label ids sorted, words in summary order)."""
    seen = Counter(t for toks, _ in packages for t in toks)
    labels = sorted(t for t, c in seen.items() if c >= min_count)
    label_id = {t: i + 1 for i, t in enumerate(labels)}
    kept = []
    for toks, words in packages:
        ids = sorted(label_id[t] for t in toks if t in label_id)
        if ids and words:
            kept.append((ids, words))
    vocab = sorted({w for _, words in kept for w in words})
    word_id = {w: i for i, w in enumerate(vocab)}
    train, test = [], []
    for i, (ids, words) in enumerate(kept):
        (test if i % TEST_EVERY == TEST_EVERY - 1 else train).append((ids, [word_id[w] for w in words]))
    return labels, vocab, train, test


def xmc_line(ids: list[int], feats: list[int]) -> str:
    """``([1, 4], [7, 2])`` -> ``'0,3 2:0.707107 7:0.707107'``: 0-based labels, unit-length binary row.

    >>> xmc_line([1, 4], [7, 2])
    '0,3 2:0.707107 7:0.707107'
    """
    v = f"{1.0 / math.sqrt(len(feats)):.6g}"
    return ",".join(str(i - 1) for i in ids) + " " + " ".join(f"{f}:{v}" for f in sorted(feats))


def vw_line(ids: list[int], feats: list[int], vocab: list[str]) -> str:
    """``'1,4 | word word'``: 1-based labels, the summary's distinct words (binary)."""
    return ",".join(map(str, ids)) + " | " + " ".join(vocab[f].replace(":", "") for f in feats)


def write_task(out_dir: Path, name: str, labels, vocab, train, test, vw: bool) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(out_dir / f"{name}.labels.tsv") as fh:
        for i, t in enumerate(labels, 1):
            fh.write(f"{i}\t{t}\n")
    for split, rows in (("train", train), ("test", test)):
        with atomic_write(out_dir / f"{name}.{split}.txt") as fh:
            fh.write(f"{len(rows)} {len(vocab)} {len(labels)}\n")
            for ids, feats in rows:
                fh.write(xmc_line(ids, feats) + "\n")
        if vw:
            with atomic_write(out_dir / f"{name}.{split}.vw") as fh:
                for ids, feats in rows:
                    fh.write(vw_line(ids, feats, vocab) + "\n")
    n_lab = sum(len(ids) for ids, _ in train)
    return {"task": name, "labels": len(labels), "features": len(vocab), "n_train": len(train),
            "n_test": len(test), "labels_per_train_example": n_lab / max(1, len(train))}


def outputs(out_dir: Path, name: str, vw: bool) -> list[Path]:
    exts = ["train.txt", "test.txt", "labels.tsv"] + (["train.vw", "test.vw"] if vw else [])
    return [out_dir / f"{name}.{e}" for e in exts]


def build_all(pypi_path, out_dir, min_counts=MIN_COUNTS, vw: bool = False, force: bool = False, log=None) -> list[dict]:
    """Every ``min_count`` of the task (outputs newer than their inputs are kept unless ``force``)."""
    out_dir = Path(out_dir)
    infos, packages = [], None
    for m in min_counts:
        name = task_name(m)
        if not force and is_up_to_date(outputs(out_dir, name, vw), [pypi_path, __file__]):
            infos.append({"task": name, "skipped": True})
            continue
        t0 = time.perf_counter()
        if packages is None:
            packages = read_packages(iter_lines(pypi_path), str(pypi_path))
        info = write_task(out_dir, name, *build_task(packages, m), vw=vw)
        infos.append(info)
        if log:
            log(f"{name}: {info['n_train']:,} train / {info['n_test']:,} test, {info['labels']:,} labels, "
                f"{info['features']:,} features, {info['labels_per_train_example']:.2f} labels per example "
                f"({time.perf_counter() - t0:.1f} s)")
    return infos


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.pypi_names",
                                 description="Build the PyPI-names tagging task (XMC text, optionally VW text).")
    add_data_dir_argument(ap)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR / "multilabel"), help="output dir (default: %(default)s)")
    ap.add_argument("--min-count", type=int, nargs="+", default=list(MIN_COUNTS),
                    help="keep name tokens seen in at least N names (default: %(default)s)")
    ap.add_argument("--vw", action="store_true", help="also write VW text (words as features)")
    ap.add_argument("--force", action="store_true", help="rebuild files that are up to date")
    args = ap.parse_args(argv)
    path = Path(args.data_dir) / PYPI_RELPATH
    if not path.exists():
        print(f"error: {path}: not found (give --data-dir)", file=sys.stderr)
        return 1
    try:
        build_all(path, args.out_dir, args.min_count, args.vw, args.force, log=lambda m: print(m, file=sys.stderr))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
