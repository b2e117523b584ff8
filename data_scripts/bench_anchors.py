"""Accuracy anchors for ``make bench`` : napkinXC and fastText on our files.

What runs (each fit and each prediction in its own subprocess, timed like ours by
``bench.run_timed``: wall clock of the whole command, start-up and file reading included,
peak RSS of the child)

``napkinxc_plt``, ``napkinxc_hsm``, ``napkinxc_bhsm``
    napkinXC's ``PLT()`` and ``HSM()`` with their defaults, and "binary HSM" ``HSM(max_leaves=2)``
    (a pure binary log-time tree), each with ``threads=1`` (lomtree trains on one core; the
    machine is shared).  Input: the same ``.vw`` files, parsed and hashed by lomtree's own
    parser (``lomtree_cli.parsing.iter_batches``, ``-b 24``, no constant feature: napkinXC adds
    its own bias) into a CSR matrix; the hashed columns seen in training are renumbered
    0..d-1 (a feature unseen in training has weight 0 in any model, so test columns outside that
    set are dropped).  Duplicate indices of one example are summed, as lomtree's linear model
    does.  napkinXC is a batch learner (liblinear per node); it has no passes: its rows sit
    among the one-pass rows, marked ``batch``.
``fasttext_hs``, ``fasttext_softmax``
    ``fasttext.train_supervised(input=TXT, loss=..., epoch=E, dim=100, thread=1, verbose=0)``
    (fastText's other defaults: lr 0.1, minCount 1, wordNgrams 1, so no hashing buckets), one
    epoch and the tuned epochs (the passes of the dataset's tuned ``-r plt`` run).  Input:
    fastText text, ``__label__N tok tok ...`` with ``tok`` = feature name, prefixed ``ns^``
    in a named namespace (VW tells ``|p1 in`` from ``|p2 in``); feature values are dropped,
    which is why Sector (TF-IDF values) is left out.  The conversion (``bench/runs/fasttext``,
    cached) is data preparation and is not timed.  Prediction calls ``model.f.predict(line, 1,
    0.0, "strict")`` directly (the wrapper's ``predict`` fails under numpy 2).

Choices (and what they cost)
    * ``threads=1`` / ``thread=1``: lomtree trains on one core, and the machine the suite runs on
      is shared; napkinXC's default (all cores) and fastText's (12 threads) would compare a
      parallel batch learner with a single-threaded stream.
    * One input path: every file goes through lomtree's parser and hashing (``-b 24``), not the
      ``.libsvm`` copies that exist for some datasets, so napkinXC sees exactly the features
      lomtree learns from (for Sector's numeric names hashing is the identity; collisions at
      ``-b 24`` are negligible).  Renumbering the columns seen in training keeps napkinXC's
      per-node weight vectors at the vocabulary size instead of 2^24.
    * fastText on text only: dropping values would change what Sector, Letter and Pendigits
      mean, so those cells say ``skipped`` with the reason; on KJV next word the tuned
      (5-epoch) 5,001-way softmax is left out for time (one epoch is run).
    * The whole subprocess is timed (reading and hashing included), as ``lomtree train`` is;
      napkinXC's own fit time (``fit_seconds``) and read time are in each run's report in
      ``results.json``.

napkinXC 0.7.2 is not reliable on every machine: on this project's VM some of its fits of the
PyPI next-word files (k = 20,001 and 100,001) gave models that raise ``Unknown loss function
type`` in ``predict``/``load`` or predict at 92-95 % error where other fits of the same file give
75-76 % (bench/notes/multipass.md): a napkinXC figure far from its earlier runs is to be refitted,
not believed.

A missing package gives a record with ``status = "not installed"`` (a table cell saying so);
``skipped`` records carry the reason (e.g. fastText on Sector).  ``make test`` never imports
napkinxc, fasttext or scipy: the tests fake the runner.

Subprocess entry points (what ``run_anchor`` starts)::

    python -m data_scripts.bench_anchors fit  --anchor A --train F.vw --model M --report R.json [...]
    python -m data_scripts.bench_anchors test --anchor A --test F.vw --model M --report R.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

#: anchor id -> (package, display name, learner, constructor keyword arguments)
ANCHORS = {
    "napkinxc_plt": ("napkinxc", "napkinXC PLT", "PLT", {}),
    "napkinxc_hsm": ("napkinxc", "napkinXC HSM", "HSM", {}),
    "napkinxc_bhsm": ("napkinxc", "napkinXC binary HSM", "HSM", {"max_leaves": 2}),
    "fasttext_hs": ("fasttext", "fastText hs", "hs", {}),
    "fasttext_softmax": ("fasttext", "fastText softmax", "softmax", {}),
}
#: pip names of the packages (the ``bench`` extra)
PIP_NAMES = {"napkinxc": "napkinxc", "fasttext": "fasttext-wheel", "scipy": "scipy"}
#: what each anchor needs importable
NEEDS = {"napkinxc": ("napkinxc", "scipy"), "fasttext": ("fasttext",)}
#: napkinXC options we set (everything else: napkinXC's defaults)
NAPKIN_COMMON = {"threads": 1}
#: fastText options we set (everything else: fastText's defaults); epoch is per run
FASTTEXT_COMMON = {"dim": 100, "thread": 1, "verbose": 0}


def package_of(anchor: str) -> str:
    return ANCHORS[anchor][0]


def display_name(anchor: str) -> str:
    return ANCHORS[anchor][1]


def missing_packages(anchor: str, find_spec=None) -> list[str]:
    """The pip names of the packages ``anchor`` needs that are not importable (no import done)."""
    find_spec = find_spec or importlib.util.find_spec
    return [PIP_NAMES[m] for m in NEEDS[package_of(anchor)] if find_spec(m) is None]


# ---------------------------------------------------------------------------------------------
# input: lomtree's parser -> CSR (napkinXC)

def read_hashed(path: str, bits: int = 24):
    """``(labels, indptr, indices, values)`` of a VW file, parsed and hashed by lomtree itself
    (``-b bits``, no constant feature); one call of lomtree's chunk parser per 1 MB."""
    from lomtree_cli.config import InputConfig
    from lomtree_cli.parsing import iter_batches

    cfg = InputConfig(format="vw", bits=int(bits), noconstant=True)
    labels, indptrs, indices, values = [], [], [], []
    offset = 0
    for b in iter_batches([str(path)], cfg):
        labels.append(b.labels)
        indptrs.append(b.indptr[1:] + offset)
        indices.append(b.indices)
        values.append(b.values)
        offset += int(b.indptr[-1])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    indptr = np.concatenate([np.zeros(1, np.int64), cat(indptrs, np.int64)])
    return cat(labels, np.int64), indptr, cat(indices, np.int64), cat(values, np.float32)


def column_map(train_indices: np.ndarray) -> np.ndarray:
    """The sorted distinct hashed indices of the training file: column j of the CSR is ``cols[j]``."""
    return np.unique(train_indices)


def remap(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, cols: np.ndarray):
    """Hashed indices -> columns ``0..len(cols)-1``; features outside ``cols`` are dropped.
    Returns ``(indptr, columns, values)`` (rows keep their order)."""
    pos = np.searchsorted(cols, indices)
    pos_c = np.minimum(pos, max(len(cols) - 1, 0))
    keep = (pos < len(cols)) & (cols[pos_c] == indices) if len(cols) else np.zeros(len(indices), bool)
    row = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    counts = np.bincount(row[keep], minlength=len(indptr) - 1)
    new_ptr = np.zeros(len(indptr), np.int64)
    np.cumsum(counts, out=new_ptr[1:])
    return new_ptr, pos[keep].astype(np.int64), values[keep]


def to_csr(indptr, columns, values, n_cols: int):
    """A ``scipy.sparse.csr_matrix`` (float64), duplicate columns of a row summed."""
    from scipy.sparse import csr_matrix

    m = csr_matrix((values.astype(np.float64), columns, indptr), shape=(len(indptr) - 1, n_cols))
    m.sum_duplicates()
    return m


# ---------------------------------------------------------------------------------------------
# input: VW text -> fastText text

def fasttext_line(line: str) -> str | None:
    """One VW line as fastText's ``__label__N tok ...`` (None for a blank line).

    Tokens are the feature names in order, ``ns^name`` in a named namespace, bare in the default
    one; values, importance weights, tags and namespace weights are dropped.

    >>> fasttext_line("3 1.0 'tag |w the:2 cat |p1 in")
    '__label__3 w^the w^cat p1^in'
    """
    line = line.strip()
    if not line:
        return None
    head, _, rest = line.partition("|")
    label = head.split()[0] if head.split() else ""
    toks = [f"__label__{label}"] if label else []
    for seg in ("|" + rest).split("|")[1:]:
        ns = ""
        if seg and seg[0] not in " \t":
            first, *more = seg.split(None, 1)
            ns, seg = first.split(":")[0], (more[0] if more else "")
        for tok in seg.split():
            name = tok.split(":")[0]
            if name:
                toks.append(f"{ns}^{name}" if ns else name)
    return " ".join(toks)


def fasttext_file(src: Path, dst: Path) -> Path:
    """``src`` (VW) converted by ``fasttext_line`` into ``dst`` (cached: rebuilt when older)."""
    src, dst = Path(src), Path(dst)
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(dst.suffix + ".writing")
    with open(src, encoding="utf-8", errors="replace") as fi, open(tmp, "w", encoding="utf-8") as fo:
        for line in fi:
            out = fasttext_line(line)
            if out is not None:
                fo.write(out + "\n")
    os.replace(tmp, dst)
    return dst


# ---------------------------------------------------------------------------------------------
# command lines and options (what the parent runs)

def napkin_kwargs(anchor: str) -> dict:
    """The constructor keyword arguments of a napkinXC anchor (besides the model directory)."""
    return {**NAPKIN_COMMON, **ANCHORS[anchor][3]}


def fasttext_kwargs(anchor: str, epochs: int, threads: int = 1) -> dict:
    """``train_supervised``'s keyword arguments (besides ``input``)."""
    return {"loss": ANCHORS[anchor][2], "epoch": int(epochs), **FASTTEXT_COMMON, "thread": int(threads)}


def fit_cmd(anchor: str, train: str, model: str, report: str, bits: int = 24, epochs: int = 1,
            threads: int = 1) -> list[str]:
    cmd = [sys.executable, "-m", "data_scripts.bench_anchors", "fit", "--anchor", anchor, "--train", str(train),
           "--model", str(model), "--report", str(report)]
    if package_of(anchor) == "napkinxc":
        cmd += ["--bits", str(bits)]
    else:
        cmd += ["--epochs", str(epochs), "--threads", str(threads)]
    return cmd


def test_cmd(anchor: str, test: str, model: str, report: str, bits: int = 24) -> list[str]:
    cmd = [sys.executable, "-m", "data_scripts.bench_anchors", "test", "--anchor", anchor, "--test", str(test),
           "--model", str(model), "--report", str(report)]
    return cmd + (["--bits", str(bits)] if package_of(anchor) == "napkinxc" else [])


# ---------------------------------------------------------------------------------------------
# the subprocesses

def _napkin_model(anchor: str, model_dir: str):
    from napkinxc import models

    return getattr(models, ANCHORS[anchor][2])(str(model_dir), **napkin_kwargs(anchor))


def fit_napkinxc(anchor: str, train: str, model_dir: str, bits: int) -> dict:
    t0 = time.perf_counter()
    labels, indptr, indices, values = read_hashed(train, bits)
    cols = column_map(indices)
    x = to_csr(*remap(indptr, indices, values, cols), len(cols))
    t1 = time.perf_counter()
    Path(model_dir).mkdir(parents=True, exist_ok=True)
    np.save(Path(model_dir) / "lomtree_columns.npy", cols)
    model = _napkin_model(anchor, model_dir)
    model.fit(x, [[int(y)] for y in labels])
    t2 = time.perf_counter()
    return {"examples": int(len(labels)), "features": int(len(cols)), "read_seconds": t1 - t0,
            "fit_seconds": t2 - t1, "options": napkin_kwargs(anchor)}


def test_napkinxc(anchor: str, test: str, model_dir: str, bits: int, predictions: str | None = None) -> dict:
    t0 = time.perf_counter()
    cols = np.load(Path(model_dir) / "lomtree_columns.npy")
    model = _napkin_model(anchor, model_dir)
    model.load()
    labels, indptr, indices, values = read_hashed(test, bits)
    x = to_csr(*remap(indptr, indices, values, cols), len(cols))
    t1 = time.perf_counter()
    pred = model.predict(x, top_k=1)
    t2 = time.perf_counter()
    top = [int(p[0][0] if isinstance(p[0], (tuple, list)) else p[0]) if len(p) else -1 for p in pred]
    errors = int(np.sum(np.asarray(top, np.int64) != labels))
    if predictions:  # one top label a line, for a paired comparison (data_scripts.paired)
        Path(predictions).write_text("".join(f"{t}\n" for t in top))
    return {"examples": int(len(labels)), "errors": errors, "read_seconds": t1 - t0, "predict_seconds": t2 - t1}


def fit_fasttext(anchor: str, train_txt: str, model: str, epochs: int, threads: int = 1) -> dict:
    import fasttext

    t0 = time.perf_counter()
    m = fasttext.train_supervised(input=str(train_txt), **fasttext_kwargs(anchor, epochs, threads))
    m.save_model(str(model))
    return {"fit_seconds": time.perf_counter() - t0, "options": fasttext_kwargs(anchor, epochs, threads),
            "labels": len(m.labels)}


def fasttext_top1(f, text: str) -> str | None:
    """The top label of one line (without its label) through fastText's C++ object ``f``."""
    pred = f.predict(text + "\n", 1, 0.0, "strict")
    return pred[0][1] if pred else None


def test_fasttext(test_txt: str, model: str) -> dict:
    import fasttext

    m = fasttext.load_model(str(model))
    n = errors = 0
    with open(test_txt, encoding="utf-8") as fh:
        for line in fh:
            label, _, text = line.rstrip("\n").partition(" ")
            n += 1
            errors += fasttext_top1(m.f, text) != label
    return {"examples": n, "errors": errors}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.bench_anchors", description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["fit", "test"])
    ap.add_argument("--anchor", required=True, choices=sorted(ANCHORS))
    ap.add_argument("--train")
    ap.add_argument("--test")
    ap.add_argument("--model", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--bits", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="fastText's threads (default: %(default)s)")
    ap.add_argument("--predictions", help="napkinXC test: write the top label of every example here")
    a = ap.parse_args(argv)
    napkin = package_of(a.anchor) == "napkinxc"
    if a.what == "fit":
        rep = fit_napkinxc(a.anchor, a.train, a.model, a.bits) if napkin else \
            fit_fasttext(a.anchor, a.train, a.model, a.epochs, a.threads)
    else:
        rep = test_napkinxc(a.anchor, a.test, a.model, a.bits, a.predictions) if napkin else test_fasttext(a.test, a.model)
    Path(a.report).write_text(json.dumps(rep, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
