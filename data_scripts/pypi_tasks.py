"""The large-k next-word task over the Python Package Index's summaries (``pypi/summaries.txt.xz``).

Input: one package a line, ``name<TAB>summary``, in name order (841,708 lines). Only the summary is
used. It is tokenised as the KJV verses are (``kjv_tasks.tokenize``: lowercase, runs of ``[a-z']``,
apostrophes stripped at the ends), and the task is the KJV next-word task
(``kjv_tasks.write_next_word``): every word position is one example, the label is the word's rank
among the ``vocab`` most frequent words of the training summaries (``vocab + 1`` = "other"), the
features are ``|p1 <previous word> |p2 <word before it> |pair <p2>_<p1>``, and summary ``i`` of the
first ``n`` is held out when ``i % 10 == 9``.

Sizes: ``--summaries 40000`` (~331 thousand training examples), ``300000`` (~2.4 million) and
``0`` = all (~6.5 million). Outputs in ``out_dir``: ``pypi_<size>_v<vocab>.{train,test}.vw`` and
``.vocab.tsv``, where ``<size>`` is ``40k``, ``300k`` or ``all``.

Command line::

    python -m data_scripts.pypi_tasks [--summaries 40000 300000 0] [--vocab 20000 100000]
                                      [--data-dir DIR] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .common import DEFAULT_OUT_DIR, add_data_dir_argument, is_up_to_date, iter_lines
from .kjv_tasks import tokenize, write_next_word

PYPI_RELPATH = "pypi/summaries.txt.xz"
SIZES = (40_000, 300_000, 0)
VOCABS = (20_000, 100_000)


def size_name(n_summaries: int) -> str:
    """``40000`` -> ``'40k'``, ``300000`` -> ``'300k'``, ``0`` -> ``'all'``.

    >>> [size_name(n) for n in (40000, 300000, 0, 1234)]
    ['40k', '300k', 'all', '1234']
    """
    if n_summaries == 0:
        return "all"
    return f"{n_summaries // 1000}k" if n_summaries % 1000 == 0 else str(n_summaries)


def task_name(n_summaries: int, vocab: int) -> str:
    """``task_name(300000, 20000) == 'pypi_300k_v20000'``: the prefix of the task's files."""
    return f"pypi_{size_name(n_summaries)}_v{vocab}"


def read_summaries(path, n_summaries: int = 0) -> list[list[str]]:
    """The tokenised summaries of the first ``n_summaries`` lines (0: all); a line without a tab is
    an error naming it, as the file is expected to be ``name<TAB>summary``."""
    docs = []
    for line_no, line in enumerate(iter_lines(path), 1):
        if n_summaries and len(docs) >= n_summaries:
            break
        name, tab, summary = line.partition("\t")
        if not tab:
            raise ValueError(f"{path}:{line_no}: expected name<TAB>summary")
        docs.append(tokenize(summary))
    return docs


def build(pypi_path, out_dir, n_summaries: int, vocab: int, docs: list[list[str]] | None = None) -> dict:
    """Write one size and vocabulary of the task; ``docs`` may be given to skip re-reading."""
    if docs is None:
        docs = read_summaries(pypi_path, n_summaries)
    info = write_next_word(docs, out_dir, vocab, task_name(n_summaries, vocab))
    info["n_summaries"] = len(docs)
    return info


def build_all(pypi_path, out_dir, sizes=SIZES, vocabs=VOCABS, force: bool = False, log=None) -> list[dict]:
    """Every size x vocabulary (files already newer than their inputs are kept unless ``force``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    infos = []
    for n in sizes:
        docs = None
        for v in vocabs:
            prefix = out_dir / task_name(n, v)
            outs = [f"{prefix}.train.vw", f"{prefix}.test.vw", f"{prefix}.vocab.tsv"]
            if not force and is_up_to_date(outs, [pypi_path, __file__]):
                infos.append({"task": task_name(n, v), "train": outs[0], "test": outs[1], "skipped": True})
                continue
            t0 = time.perf_counter()
            if docs is None:
                docs = read_summaries(pypi_path, n)
            info = build(pypi_path, out_dir, n, v, docs)
            info["task"] = task_name(n, v)
            infos.append(info)
            if log:
                log(f"{info['task']}: {info['n_train']:,} train / {info['n_test']:,} test examples, "
                    f"{info['n_classes']:,} classes ({time.perf_counter() - t0:.1f} s)")
    return infos


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m data_scripts.pypi_tasks",
                                 description="Build the PyPI-summaries next-word tasks (VW text).")
    add_data_dir_argument(ap)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR), help="output dir (default: %(default)s)")
    ap.add_argument("--summaries", type=int, nargs="+", default=list(SIZES),
                    help="first N summaries, 0 = all (default: %(default)s)")
    ap.add_argument("--vocab", type=int, nargs="+", default=list(VOCABS), help="vocabulary sizes (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild files that are up to date")
    args = ap.parse_args(argv)
    path = Path(args.data_dir) / PYPI_RELPATH
    if not path.exists():
        print(f"error: {path}: not found (give --data-dir)", file=sys.stderr)
        return 1
    build_all(path, args.out_dir, args.summaries, args.vocab, args.force,
              log=lambda m: print(m, file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
