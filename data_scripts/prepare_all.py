"""Build every benchmark input into ``bench/data/`` with one command.

Outputs (``--out-dir``, default ``<repo>/bench/data``):

* ``{sector,letter,pendigits}.{train,test}.vw``: LIBSVM converted to VW (``convert_libsvm``);
* ``{sector,letter,pendigits}.{train,test}.libsvm``: uncompressed LIBSVM copies (lomtree reads
  the ``.bz2``/``.xz`` originals directly with ``--format libsvm``, but VW cannot read bz2/xz);
* ``kjv_nextword.{train,test}.vw`` + ``kjv_nextword.vocab.tsv`` and
  ``kjv_book.{train,test}.vw`` + ``kjv_book.books.tsv`` (``kjv_tasks``);
* ``synth_k<K>.{train,test}.vw`` (``synthetic``; by default K = 1000, 100,000 + 10,000 lines);
* ``manifest.json``: lines, classes and bytes of every file above.

A task is skipped when all its outputs exist and are newer than its inputs (the dataset files
and the script modules that build them; for synthetic streams also the parameters, kept in
``synth_k<K>.params.json``), unless ``--force``.  One line per output file is printed:
name, lines, classes, size, and whether it was built (with the task's wall time) or up to date.

Command line::

    python -m data_scripts.prepare_all [--data-dir D] [--out-dir O] [--force] [-j 2]
        [--only sector letter ...] [--synthetic-k 1000 [10000 ...]] [--synthetic-n 100000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import common, convert_libsvm, kjv_tasks, synthetic
from .common import (DEFAULT_DATA_DIR, DEFAULT_OUT_DIR, add_data_dir_argument, atomic_write, count_lines_and_labels,
                     human_size, is_up_to_date)


@dataclass
class Task:
    """One unit of work: ``run()`` writes ``outputs`` from ``inputs``."""

    name: str
    inputs: list[Path]
    outputs: list[Path]
    run: Callable[[], object]
    params: dict | None = None  # recorded next to the outputs; a change makes the task stale
    params_path: Path | None = None
    extra: list[Path] = field(default_factory=list)  # side outputs (vocab, books) listed but not counted

    def up_to_date(self) -> bool:
        """All outputs exist, are newer than the inputs, and the recorded parameters match."""
        if not is_up_to_date(self.outputs + self.extra, self.inputs):
            return False
        if self.params is not None:
            try:
                return json.loads(self.params_path.read_text()) == self.params
            except (OSError, ValueError):
                return False
        return True


def _src(module) -> list[Path]:
    return [Path(module.__file__), Path(common.__file__)]


def _run_task(task: Task) -> float:
    t0 = time.perf_counter()
    task.run()
    if task.params is not None:
        with atomic_write(task.params_path) as fh:
            json.dump(task.params, fh, sort_keys=True)
    return time.perf_counter() - t0


def _convert(name, data_dir, out_dir):
    return convert_libsvm.convert_dataset(name, data_dir, out_dir)


def _next_word(kjv, out_dir, vocab):
    return kjv_tasks.build_next_word(kjv, out_dir, vocab=vocab)


def _book(kjv, out_dir, seed):
    return kjv_tasks.build_book(kjv, out_dir, seed=seed)


def _synth(train, test, params):
    p = dict(params)
    n, test_n = p.pop("n"), p.pop("test_n")
    synthetic.write(train, n=n, stream=synthetic.TRAIN_STREAM, **p)
    synthetic.write(test, n=test_n, stream=synthetic.TEST_STREAM, **p)


class _Call:
    """Picklable ``functools.partial`` stand-in (keeps ``Task.run`` usable in a process pool)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __call__(self):
        return self.fn(*self.args)


def plan(data_dir=DEFAULT_DATA_DIR, out_dir=DEFAULT_OUT_DIR, vocab: int = 5000, book_seed: int = 0,
         synthetic_k=(1000,), synthetic_n: int = 100_000, synthetic_test_n: int | None = None,
         synthetic_seed: int = 0) -> list[Task]:
    """The list of tasks ``prepare_all`` runs, in order."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    tasks = []
    for name, splits in convert_libsvm.DATASETS.items():
        outs = convert_libsvm.dataset_outputs(name, out_dir)
        tasks.append(Task(name, [data_dir / rel for rel in splits.values()] + _src(convert_libsvm),
                          [outs["train.vw"], outs["test.vw"], outs["train.libsvm"], outs["test.libsvm"]],
                          _Call(_convert, name, data_dir, out_dir)))
    kjv = data_dir / kjv_tasks.KJV_RELPATH
    nw = kjv_tasks.NEXT_WORD_PREFIX
    tasks.append(Task("kjv_nextword", [kjv] + _src(kjv_tasks),
                      [out_dir / f"{nw}.train.vw", out_dir / f"{nw}.test.vw"],
                      _Call(_next_word, kjv, out_dir, vocab),
                      params={"vocab": vocab}, params_path=out_dir / f"{nw}.params.json",
                      extra=[out_dir / f"{nw}.vocab.tsv"]))
    bk = kjv_tasks.BOOK_PREFIX
    tasks.append(Task("kjv_book", [kjv] + _src(kjv_tasks),
                      [out_dir / f"{bk}.train.vw", out_dir / f"{bk}.test.vw"],
                      _Call(_book, kjv, out_dir, book_seed),
                      params={"seed": book_seed}, params_path=out_dir / f"{bk}.params.json",
                      extra=[out_dir / f"{bk}.books.tsv"]))
    for k in synthetic_k:
        params = {"k": int(k), "n": int(synthetic_n),
                  "test_n": int(synthetic_test_n if synthetic_test_n is not None else synthetic_n // 10),
                  # the demo's stream (Makefile): classes share a vocabulary of 4 features per class
                  # (at least 4,000), half of each prototype dropped, Zipf(0.7) class frequencies
                  "seed": int(synthetic_seed), "noise": 0.5, "zipf": 0.7, "proto_features": 8,
                  "noise_features": 6, "vocab": max(4000, 4 * int(k))}
        train, test = out_dir / f"synth_k{k}.train.vw", out_dir / f"synth_k{k}.test.vw"
        tasks.append(Task(f"synth_k{k}", _src(synthetic), [train, test], _Call(_synth, train, test, params),
                          params=params, params_path=out_dir / f"synth_k{k}.params.json"))
    return tasks


def _report(task: Task, seconds: float | None, manifest: dict, out=sys.stdout) -> None:
    status = "up to date" if seconds is None else f"built in {seconds:.1f} s"
    for path in task.outputs:
        n, k = count_lines_and_labels(path)
        size = path.stat().st_size
        manifest[path.name] = {"task": task.name, "lines": n, "classes": k, "bytes": size}
        print(f"{path.name:28s} {n:>9,} lines {k:>6,} classes {human_size(size):>9s}  {status}", file=out)
    for path in task.extra:
        manifest[path.name] = {"task": task.name, "bytes": path.stat().st_size}


def prepare_all(data_dir=DEFAULT_DATA_DIR, out_dir=DEFAULT_OUT_DIR, force: bool = False, jobs: int = 1,
                only=None, out=sys.stdout, **plan_kwargs) -> dict:
    """Run (or skip) every task of ``plan``; print one summary line per file; return the manifest.

    ``only``: a collection of task names (``sector``, ``letter``, ``pendigits``,
    ``kjv_nextword``, ``kjv_book``, ``synth_k<K>``) to restrict the run to.
    The manifest (``{file name: {task, lines, classes, bytes}}``) is also written to
    ``<out_dir>/manifest.json``, merged with the entries already there.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = plan(data_dir, out_dir, **plan_kwargs)
    if only:
        known = {t.name for t in tasks}
        unknown = set(only) - known
        if unknown:
            raise ValueError(f"unknown task(s) {sorted(unknown)}; known: {sorted(known)}")
        tasks = [t for t in tasks if t.name in set(only)]
    for t in tasks:
        missing = [p for p in t.inputs if not p.exists()]
        if missing:
            raise FileNotFoundError(f"{t.name}: missing input {missing[0]} (use --data-dir?)")
    todo = [t for t in tasks if force or not t.up_to_date()]
    t_start = time.perf_counter()
    seconds: dict[str, float] = {}
    if jobs > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {t.name: pool.submit(_run_task, t) for t in todo}
            for name, fut in futures.items():
                seconds[name] = fut.result()
    else:
        for t in todo:
            seconds[t.name] = _run_task(t)
    manifest_path = out_dir / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    for t in tasks:
        _report(t, seconds.get(t.name), manifest, out)
    with atomic_write(manifest_path) as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"{len(todo)} of {len(tasks)} tasks built in {time.perf_counter() - t_start:.1f} s -> {out_dir}", file=out)
    return manifest


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m data_scripts.prepare_all",
        description="Build all benchmark inputs (LIBSVM->VW conversions, KJV tasks, synthetic streams).",
    )
    add_data_dir_argument(ap)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR), help="output dir (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the outputs are up to date")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="tasks run in parallel processes (default: %(default)s)")
    ap.add_argument("--only", nargs="+", metavar="TASK", help="only these tasks (e.g. sector kjv_book synth_k1000)")
    ap.add_argument("--vocab", type=int, default=5000, help="KJV next-word vocabulary (default: %(default)s)")
    ap.add_argument("--book-seed", type=int, default=0, help="KJV book task shuffle seed (default: %(default)s)")
    ap.add_argument("--synthetic-k", type=int, nargs="*", default=[1000],
                    help="class counts of the synthetic streams; none = no synthetic data (default: 1000)")
    ap.add_argument("--synthetic-n", type=int, default=100_000, help="synthetic training lines (default: %(default)s)")
    ap.add_argument("--synthetic-test-n", type=int, default=None, help="synthetic test lines (default: n // 10)")
    ap.add_argument("--synthetic-seed", type=int, default=0, help="synthetic seed (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        prepare_all(args.data_dir, args.out_dir, force=args.force, jobs=args.jobs, only=args.only,
                    vocab=args.vocab, book_seed=args.book_seed, synthetic_k=args.synthetic_k,
                    synthetic_n=args.synthetic_n, synthetic_test_n=args.synthetic_test_n,
                    synthetic_seed=args.synthetic_seed)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
