"""Multi-label benchmark: lomtree's multi-label learners beside the anchors, same files, one run.

::

    python -m data_scripts.bench_multilabel                 # everything -> bench/multilabel.{md,json}
    python -m data_scripts.bench_multilabel --quick         # bibtex only, one-pass rows, no synthetic
    python -m data_scripts.bench_multilabel --only napkinxc omikuji --datasets yeast
    python -m data_scripts.bench_multilabel --skip-anchors --synthetic-k 1000 10000

Data (``--data-dir``, default ``../shared/datasets`` next to the repository; see its README.md)

``bibtex``, ``delicious``
    XMC text (``N F L`` header, then ``l1,l2,... f:v ...``, 0-based) with the train / test split
    given as 1-based row numbers (the header is not counted).
``yeast``
    LIBSVM multi-label (labels 0-based, features 1-based): features are moved to 0-based and the
    header ``N F L`` is taken from the data (F, L = largest index + 1 over train and test).

Preparation writes ``NAME.train.txt`` / ``NAME.test.txt`` (XMC text, correct header, the same
F and L in both) under ``bench/data/multilabel/`` (git-ignored) and skips the work when the
outputs are newer than the inputs.

Systems (ids for ``--only``; a prefix that is no id selects several, e.g. ``--only vw lomtree``)

``napkinxc_plt``, ``napkinxc_br``
    ``napkinxc.models.PLT`` / ``BR`` with napkinXC's defaults (``threads=0``: all cores), fitted
    on a scipy CSR matrix read from the XMC file; ``predict(X, top_k=5)``.
``omikuji``
    ``omikuji.Model.default_hyper_param()``, ``Model.train_on_data(TRAIN, hp, n_threads=2)``
    (Omikuji reads the XMC file itself), ``model.predict(pairs, top_k=5)``: Parabel's 3 trees.
``omikuji_1``
    The same with ``n_trees = 1``: one tree, the counterpart of one lomtree model.
``vw_plt_1``, ``vw_plt_5``
    Vowpal Wabbit ``--plt L --loss_function logistic -b B`` (B = ``bits_for(L)``: 24, from 4,096
    labels 26; in-process ``vowpalwabbit``
    Workspace on a VW-format copy ``l1,l2 | f:v ...``, 0-based labels as ``--plt`` wants), one
    pass, and ``--passes 5 -c --holdout_off`` with the cache in a temporary directory;
    predictions with ``-t --top_k 5 -p FILE``.
``lomtree_*``
    The ``lomtree`` CLI (``--lomtree``, default: the repository's ``.venv/bin/lomtree`` or the
    one on PATH), rows from ``LOMTREE_ROWS`` (reduction, passes, extra flags): ``lomtree train
    -r R --multilabel --format xmc TRAIN -k L -b B -f MODEL [--passes N -c --holdout-off]
    --quiet --report train.json --predict_only_model`` (from 4,096 labels also
    ``--weight-threshold 0.03``, the 3-tree row 0.12), then ``lomtree predict -i MODEL TEST
    --top-k 5 -p /dev/null --report test.json --quiet``; the metrics are read from test.json. A
    row of ``trees`` N adds ``--trees N`` (one file of N models, seeds 0..N-1). A CLI without
    ``--multilabel`` gives rows marked "not yet".

Timing
    Anchors run in a child process (``python -m data_scripts.bench_multilabel _worker ...``)
    that times the fit alone with ``time.process_time`` (CPU of all threads) and
    ``time.perf_counter`` (wall); reading the data and the VW-format conversion are not timed
    (VW's own parsing is, as it is part of ``run_parser``).  lomtree is timed from outside:
    the CPU (user + system) of the ``lomtree train`` process from ``os.wait4``, start-up and
    parsing included, and its wall time.  napkinXC (all cores) and Omikuji (2 threads) are
    parallel: their CPU is the sum over threads, their wall time is shorter.

Metrics
    P@k (k = 1, 3, 5) over every test example (an example without labels scores 0), and
    nDCG@k, in the JSON as fractions, in the table in %.

Synthetic cost sweep (``--synthetic-k``, default 1,000 10,000 100,000; ``-n`` examples)
    ``generate_synthetic``: every label has a sparse prototype over a shared vocabulary; an
    example has 1-5 labels drawn Zipf-like and features drawn from their prototypes plus noise.
    lomtree ``-r plt --multilabel`` and ``-r oaa --multilabel``: training CPU per example (µs,
    start-up included) and prediction CPU per test example, plot ``bench/ml_cost_vs_k.png``.
    Each run is first probed on ``PROBE_N`` examples; if the full run is projected to take more
    than ``--max-run-seconds`` (600) the probe's figure is kept and the table says so.

Outputs (``--out-dir``, default ``bench``): ``multilabel.md`` (command and date on top) and
``multilabel.json`` (every raw figure).  Anchors that are not installed are skipped with a note.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from data_scripts.common import (DEFAULT_DATA_DIR, REPO_ROOT, Timed, atomic_write, is_up_to_date, iter_lines,
                                 run_timed, sanitize_command)

KS = (1, 3, 5)
TOP_K = 5
BITS = 24
#: hash bits from LARGE_LABELS labels on (lomtree and VW): at 25,596 labels -b 24 loses 1.5 points
#: of P@1 to collisions against -b 26 (bench/notes/xmc-at-scale.md); the predict-only model at
#: -b 26 stays below napkinXC's
LARGE_BITS = 26
LARGE_LABELS = 4096
#: lomtree writes predict-only models (the same predictions); from LARGE_LABELS labels, weights
#: below this are dropped as napkinXC and Omikuji drop theirs below 0.1 (0.03 costs PyPI names
#: 0.03 points, 0.1 costs 0.3-0.5; on Bibtex 0.03 costs 1.35, hence not below LARGE_LABELS)
LARGE_WEIGHT_THRESHOLD = 0.03


def bits_for(n_labels: int) -> int:
    """Hash bits the hashed systems get for a dataset of ``n_labels`` labels."""
    return LARGE_BITS if n_labels >= LARGE_LABELS else BITS
PROBE_N = 1000

#: dataset name -> (display name, kind, files relative to the data dir)
DATASETS: dict[str, dict] = {
    "bibtex": {"title": "Bibtex", "kind": "xmc_split", "data": "bibtex/Bibtex_data.txt.xz",
               "train_rows": "bibtex/bibtex_train_rows.txt.xz", "test_rows": "bibtex/bibtex_test_rows.txt.xz"},
    "delicious": {"title": "Delicious", "kind": "xmc_split", "data": "delicious/Delicious_data.txt.xz",
                  "train_rows": "delicious/delicious_train_rows.txt.xz",
                  "test_rows": "delicious/delicious_test_rows.txt.xz"},
    "yeast": {"title": "Yeast", "kind": "libsvm_ml", "train": "yeast/yeast_train.svm.xz",
              "test": "yeast/yeast_test.svm.xz"},
    # built by data_scripts.pypi_names (10^4 and 10^5 labels); O(k) rows are left out. The anchors
    # read its XMC text (unit-length binary rows, as liblinear wants them), lomtree the same words
    # as VW text (binary rows: 2 points of P@1 better than unit-length ones in one pass)
    "pypi_names": {"title": "PyPI names", "kind": "pypi_names", "min_count": 5, "skip": ("lomtree_oaa", "napkinxc_br")},
    "pypi_names_min2": {"title": "PyPI names >= 2", "kind": "pypi_names", "min_count": 2,
                        "skip": ("lomtree_oaa", "napkinxc_br", "vw_plt_5")},
    # the same labels and test set, every 10th training example (42,556): 10^4 labels with about
    # 4 examples each, so that a default chosen at 425,560 examples is checked where data is scarce
    "pypi_names_small": {"title": "PyPI names, 10% train", "kind": "pypi_names", "min_count": 5, "train_every": 10,
                         "skip": ("lomtree_oaa", "napkinxc_br")},
    # between the two: tokens of at least 12 names (10,911 labels), every 3rd training example
    # (135,783, about 27 a label), the test set of those labels (45,261)
    "pypi_names_third": {"title": "PyPI names >= 12, a third", "kind": "pypi_names", "min_count": 12,
                         "train_every": 3, "skip": ("lomtree_oaa", "napkinxc_br")},
}

#: data sets run unless --datasets names them (the large ones are run with --datasets)
DEFAULT_DATASETS = ("bibtex", "delicious", "yeast", "pypi_names", "pypi_names_third", "pypi_names_small")

#: anchor id -> (display name, python packages it needs, worker kind, options)
ANCHORS: dict[str, tuple[str, tuple[str, ...], str, dict]] = {
    "napkinxc_plt": ("napkinXC PLT", ("napkinxc", "scipy", "numpy"), "napkinxc", {"model": "PLT"}),
    "napkinxc_br": ("napkinXC BR", ("napkinxc", "scipy", "numpy"), "napkinxc", {"model": "BR"}),
    "omikuji": ("Omikuji", ("omikuji",), "omikuji", {"n_threads": 2}),
    # its defaults grow 3 trees (Parabel's); one tree is the counterpart of one lomtree model
    "omikuji_1": ("Omikuji, 1 tree", ("omikuji",), "omikuji", {"n_threads": 2, "n_trees": 1}),
    "vw_plt_1": ("VW --plt, 1 pass", ("vowpalwabbit",), "vw", {"passes": 1}),
    "vw_plt_5": ("VW --plt, 5 passes", ("vowpalwabbit",), "vw", {"passes": 5}),
}


@dataclass
class LomtreeRow:
    """One lomtree row: ``lomtree train -r REDUCTION --multilabel ... [--passes N -c --holdout-off] FLAGS``,
    with ``--trees N`` when ``trees`` > 1 (N models of seeds 0..N-1 in one file, as the ensembles
    of Parabel and Omikuji)."""

    id: str
    name: str
    reduction: str
    passes: int = 1
    flags: list[str] = field(default_factory=list)
    trees: int = 1
    #: from LARGE_LABELS labels, weights below this are dropped from the (predict-only) models
    weight_threshold: float = LARGE_WEIGHT_THRESHOLD

    def train_args(self) -> list[str]:
        args = ["-r", self.reduction, "--multilabel"]
        if self.passes > 1:
            args += ["--passes", str(self.passes), "-c", "--holdout-off"]
        return args + list(self.flags)


#: the lomtree rows (add a row, or flags to one, here)
LOMTREE_ROWS: list[LomtreeRow] = [
    LomtreeRow("lomtree_plt_1", "lomtree plt, 1 pass", "plt", 1),
    LomtreeRow("lomtree_plt_10", "lomtree plt, 10 passes", "plt", 10),
    # three trees in about napkinXC's bytes: the largest threshold before precision drops (PyPI
    # names at 0.03 / 0.1 / 0.12 / 0.15: 343 / 163 / 124 / 85 MB, P@5 26.95 / 26.97 / 26.92 / 26.72;
    # its 10%: P@5 20.01 / 20.00 / 19.89 / 19.54); napkinXC's one tree: 131 MB
    LomtreeRow("lomtree_plt_1x3", "lomtree plt --trees 3, 1 pass", "plt", 1, trees=3, weight_threshold=0.12),
    LomtreeRow("lomtree_oaa_1", "lomtree oaa --multilabel, 1 pass", "oaa", 1),
    LomtreeRow("lomtree_oaa_10", "lomtree oaa --multilabel, 10 passes", "oaa", 10),
]

PIP_NAMES = {"napkinxc": "napkinxc", "omikuji": "omikuji", "vowpalwabbit": "vowpalwabbit",
             "scipy": "scipy", "numpy": "numpy", "matplotlib": "matplotlib"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- data: XMC text


def parse_xmc_line(line: str) -> tuple[list[int], list[tuple[int, float]]]:
    """``"3,7 0:1 5:0.5"`` -> ``([3, 7], [(0, 1.0), (5, 0.5)])``; a line starting with a blank has no labels.

    >>> parse_xmc_line(" 2:1")
    ([], [(2, 1.0)])
    """
    line = line.rstrip("\r\n")
    if not line or line[0].isspace():
        head, rest = "", line
    else:
        head, _, rest = line.partition(" ")
        if ":" in head:  # no label field at all: "f:v ..."
            head, rest = "", line
    labels = [int(t) for t in head.split(",") if t != ""]
    feats = []
    for tok in rest.split():
        f, _, v = tok.partition(":")
        feats.append((int(f), float(v) if v else 1.0))
    return labels, feats


def format_xmc_line(labels: Sequence[int], feats: Sequence[tuple[int, float]]) -> str:
    """Inverse of ``parse_xmc_line`` (values printed with ``%g``; ``1`` for 1.0)."""
    return ",".join(str(l) for l in labels) + " " + " ".join(f"{f}:{v:g}" for f, v in feats)


def parse_header(line: str) -> tuple[int, int, int]:
    parts = line.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not an XMC header (N F L): {line[:80]!r}")
    n, f, l = (int(p) for p in parts)
    return n, f, l


def read_xmc(path: str | os.PathLike) -> tuple[tuple[int, int, int], list[list[int]], list[list[tuple[int, float]]]]:
    """(header, label lists, feature lists) of an XMC text file."""
    it = iter_lines(path)
    header = parse_header(next(it))
    labels, feats = [], []
    for line in it:
        if not line.strip() and not line:
            continue
        y, x = parse_xmc_line(line)
        labels.append(y)
        feats.append(x)
    if len(labels) != header[0]:
        raise ValueError(f"{path}: header says {header[0]} examples, found {len(labels)}")
    return header, labels, feats


def read_rows(path: str | os.PathLike) -> list[int]:
    """1-based row numbers, one a line (blank lines ignored)."""
    return [int(t) for t in (l.strip() for l in iter_lines(path)) if t]


def select_rows(data_lines: Sequence[str], rows: Iterable[int]) -> list[str]:
    """The rows (1-based, header not counted) of ``data_lines`` (which excludes the header)."""
    out = []
    for r in rows:
        if not 1 <= r <= len(data_lines):
            raise ValueError(f"row {r} outside 1..{len(data_lines)}")
        out.append(data_lines[r - 1])
    return out


def libsvm_ml_to_xmc(line: str) -> tuple[list[int], list[tuple[int, float]]]:
    """A LIBSVM multi-label line (labels 0-based, features 1-based) -> (labels, 0-based features).

    >>> libsvm_ml_to_xmc("2,3 1:0.5 4:-1")
    ([2, 3], [(0, 0.5), (3, -1.0)])
    """
    labels, feats = parse_xmc_line(line)
    for f, _ in feats:
        if f < 1:
            raise ValueError(f"LIBSVM feature index {f} < 1")
    return labels, [(f - 1, v) for f, v in feats]


def write_xmc(path: str | os.PathLike, examples: Sequence[tuple[Sequence[int], Sequence[tuple[int, float]]]],
              n_features: int, n_labels: int) -> None:
    with atomic_write(path) as fh:
        fh.write(f"{len(examples)} {n_features} {n_labels}\n")
        for y, x in examples:
            fh.write(format_xmc_line(y, x) + "\n")


def write_xmc_lines(path: str | os.PathLike, lines: Sequence[str], n_features: int, n_labels: int) -> None:
    with atomic_write(path) as fh:
        fh.write(f"{len(lines)} {n_features} {n_labels}\n")
        for line in lines:
            fh.write(line + "\n")


def convert_libsvm_ml(train_lines: Iterable[str], test_lines: Iterable[str]):
    """Both sides of a LIBSVM multi-label split -> (train examples, test examples, F, L), F and L from the data."""
    train = [libsvm_ml_to_xmc(l) for l in train_lines if l.strip()]
    test = [libsvm_ml_to_xmc(l) for l in test_lines if l.strip()]
    max_f, max_l = -1, -1
    for y, x in train + test:
        if x:
            max_f = max(max_f, max(f for f, _ in x))
        if y:
            max_l = max(max_l, max(y))
    return train, test, max_f + 1, max_l + 1


def _subsample_task(out_dir: Path, base: str, name: str, every: int) -> None:
    """``NAME``'s files from ``BASE``'s: every ``every``-th training line (XMC text and VW text
    alike, so both sides see the same examples), the test files as they are."""
    for part, ext in (("train", ".txt"), ("train", ".vw"), ("test", ".txt"), ("test", ".vw")):
        src, dst = out_dir / f"{base}.{part}{ext}", out_dir / f"{name}.{part}{ext}"
        if is_up_to_date([dst], [src]):
            continue
        if part == "test":
            shutil.copyfile(src, dst)
            continue
        it = iter_lines(src)
        if ext == ".txt":
            _, f, l = parse_header(next(it))
        kept = [line for i, line in enumerate(it) if i % every == every - 1 and line]
        if ext == ".txt":
            write_xmc_lines(dst, kept, f, l)
        else:
            with atomic_write(dst) as fh:
                fh.writelines(line + "\n" for line in kept)


def prepare_dataset(name: str, data_dir: Path, out_dir: Path) -> tuple[Path, Path]:
    """Write ``out_dir/NAME.train.txt`` and ``NAME.test.txt`` (XMC text) unless they are up to date."""
    spec = DATASETS[name]
    train_out, test_out = out_dir / f"{name}.train.txt", out_dir / f"{name}.test.txt"
    if spec["kind"] == "pypi_names":
        from data_scripts import pypi_names

        src = data_dir / pypi_names.PYPI_RELPATH
        if not src.exists():
            raise FileNotFoundError(f"missing input: {src}")
        pypi_names.build_all(src, out_dir, [spec["min_count"]], vw=True, log=log)
        every = spec.get("train_every")
        if every:
            _subsample_task(out_dir, pypi_names.task_name(spec["min_count"]), name, every)
        return train_out, test_out
    if spec["kind"] == "xmc_split":
        inputs = [data_dir / spec[k] for k in ("data", "train_rows", "test_rows")]
    else:
        inputs = [data_dir / spec[k] for k in ("train", "test")]
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise FileNotFoundError("missing input: " + ", ".join(missing))
    if is_up_to_date([train_out, test_out], inputs):
        return train_out, test_out
    log(f"preparing {name} -> {out_dir}")
    if spec["kind"] == "xmc_split":
        it = iter_lines(inputs[0])
        n, f, l = parse_header(next(it))
        lines = list(it)
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) != n:
            raise ValueError(f"{inputs[0]}: header says {n} rows, found {len(lines)}")
        write_xmc_lines(train_out, select_rows(lines, read_rows(inputs[1])), f, l)
        write_xmc_lines(test_out, select_rows(lines, read_rows(inputs[2])), f, l)
    else:
        train, test, f, l = convert_libsvm_ml(iter_lines(inputs[0]), iter_lines(inputs[1]))
        write_xmc(train_out, train, f, l)
        write_xmc(test_out, test, f, l)
    return train_out, test_out


def xmc_to_vw(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """XMC text -> VW multi-label text ``l1,l2 | f:v ...`` (0-based labels, as VW's ``--plt`` wants)."""
    it = iter_lines(src)
    parse_header(next(it))
    with atomic_write(dst) as fh:
        for line in it:
            if not line:
                continue
            y, x = parse_xmc_line(line)
            fh.write(",".join(map(str, y)) + " | " + " ".join(f"{f}:{v:g}" for f, v in x) + "\n")


# --------------------------------------------------------------------------- metrics


def precision_at_k(predictions: Sequence[Sequence[int]], truths: Sequence[Iterable[int]], ks=KS) -> dict[str, float]:
    """P@k and nDCG@k (fractions) over every example; fewer than k predictions count as misses.

    >>> r = precision_at_k([[1, 2, 3]], [[2]], ks=(1, 3))
    >>> r["p@1"], round(r["p@3"], 4), round(r["ndcg@3"], 4)
    (0.0, 0.3333, 0.6309)
    """
    n = len(truths)
    if len(predictions) != n:
        raise ValueError(f"{len(predictions)} predictions for {n} examples")
    out = {}
    for k in ks:
        p_sum = ndcg_sum = 0.0
        for pred, truth in zip(predictions, truths):
            t = set(truth)
            hits = [1.0 if lab in t else 0.0 for lab in list(pred)[:k]]
            p_sum += sum(hits) / k
            dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits))
            idcg = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(t))))
            ndcg_sum += dcg / idcg if idcg else 0.0
        out[f"p@{k}"] = p_sum / n if n else float("nan")
        out[f"ndcg@{k}"] = ndcg_sum / n if n else float("nan")
    return out


# --------------------------------------------------------------------------- result table


def _pct(x) -> str:
    return "—" if x is None else f"{100.0 * x:.2f}"


def _secs(x) -> str:
    if x is None:
        return "—"
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def format_table(runs: Sequence[dict], datasets: Sequence[str], systems: Sequence[tuple[str, str]]) -> str:
    """Markdown: one row per system, P@1/3/5 (%) per dataset, then training CPU seconds per dataset.

    ``runs``: dicts with ``system``, ``dataset``, ``status`` (``"ok"`` or a note) and, when ok,
    ``p@1``/``p@3``/``p@5`` (fractions) and ``train_cpu_s``.  ``systems``: (id, display name) in
    row order.  A cell without an ok run shows its status (e.g. ``not installed``).
    """
    by = {(r["system"], r["dataset"]): r for r in runs}
    titles = [DATASETS.get(d, {}).get("title", d) for d in datasets]
    head = ["system"] + [f"{t} P@{k}" for t in titles for k in KS] + [f"{t} train CPU s" for t in titles]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sid, sname in systems:
        cells = [sname]
        for d in datasets:
            r = by.get((sid, d))
            if r is None:
                cells += ["—"] * len(KS)
            elif r.get("status") != "ok":
                cells += [r.get("status", "failed")] + ["—"] * (len(KS) - 1)
            else:
                cells += [_pct(r.get(f"p@{k}")) for k in KS]
        for d in datasets:
            r = by.get((sid, d))
            cells.append(_secs(r.get("train_cpu_s")) if r and r.get("status") == "ok" else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_resources(runs: Sequence[dict], datasets: Sequence[str], systems: Sequence[tuple[str, str]]) -> str:
    """Markdown: one row per system, ``CPU s / model MB / peak MB`` per dataset (— when not known)."""
    by = {(r["system"], r["dataset"]): r for r in runs}
    titles = [DATASETS.get(d, {}).get("title", d) for d in datasets]
    lines = ["| system | " + " | ".join(titles) + " |", "|" + "---|" * (len(titles) + 1)]
    for sid, sname in systems:
        cells = [sname]
        for d in datasets:
            r = by.get((sid, d))
            if not r or r.get("status") != "ok":
                cells.append("—")
                continue
            mb = r.get("model_bytes")
            rss = r.get("train_maxrss_kb") or r.get("maxrss_kb")
            cells.append(f"{_secs(r.get('train_cpu_s'))} / {'—' if mb is None else f'{mb / 1e6:.1f}'} / "
                         f"{'—' if rss is None else f'{rss / 1024:.0f}'}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_synthetic_table(rows: Sequence[dict]) -> str:
    """Markdown for the synthetic sweep: k, reduction, train µs/example, predict µs/example, P@1, note."""
    lines = ["| k | reduction | train examples | train CPU µs/example (whole run) | train µs/example (marginal) "
             "| predict CPU µs/example | P@1 % | note |",
             "|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = r.get("status") == "ok"
        tr = r.get("train_us_per_example")
        tm = r.get("train_us_per_example_marginal")
        pr = r.get("predict_us_per_example")
        lines.append("| {:,} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["k"], r["reduction"], f"{r['train_examples']:,}" if r.get("train_examples") else "—",
            f"{tr:.1f}" if ok and tr is not None else "—", f"{tm:.1f}" if ok and tm is not None else "—",
            f"{pr:.1f}" if ok and pr is not None else "—",
            _pct(r.get("p@1")) if ok else "—", r.get("note", "") if ok else r.get("status", "")))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- synthetic stream

#: label counts of the synthetic cost sweep (``--synthetic-k``)
SYNTHETIC_KS = (1000, 10000, 100000)


def generate_synthetic(k: int, n: int, seed: int = 1, vocab: int | None = None, proto_size: int = 16,
                       keep: float = 0.5, noise_features: int = 4, max_labels: int = 5, zipf: float = 1.0):
    """Multi-label examples ``(labels, [(feature, 1.0), ...])`` over ``k`` labels.

    Every label has a prototype of ``proto_size`` features from a shared vocabulary (default
    ``max(4000, 2 * k)`` features); an example has 1..``max_labels`` distinct labels drawn with
    probability ∝ rank^-``zipf`` (labels shuffled so that rank is not the id), and for each label
    about ``keep`` of its prototype's features, plus ``noise_features`` uniform ones.
    Deterministic for a given seed.  Returns (examples, vocabulary size).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = vocab or max(4000, 2 * k)
    protos = rng.integers(0, vocab, size=(k, proto_size), dtype=np.int64)
    perm = rng.permutation(k)
    w = 1.0 / np.arange(1, k + 1, dtype=np.float64) ** zipf
    cdf = np.cumsum(w / w.sum())
    counts = rng.integers(1, max_labels + 1, size=n)
    examples = []
    for c in counts:
        labs: list[int] = []
        while len(labs) < c:
            lab = int(perm[min(int(np.searchsorted(cdf, rng.random())), k - 1)])
            if lab not in labs:
                labs.append(lab)
        feats = set()
        for lab in labs:
            proto = protos[lab]
            feats.update(int(f) for f in proto[rng.random(proto_size) < keep])
        feats.update(int(f) for f in rng.integers(0, vocab, size=noise_features))
        examples.append((sorted(labs), [(f, 1.0) for f in sorted(feats)]))
    return examples, vocab


# --------------------------------------------------------------------------- anchors (worker side)


def _csr(feats: Sequence[Sequence[tuple[int, float]]], n_features: int):
    import numpy as np
    import scipy.sparse as sp

    indptr = np.zeros(len(feats) + 1, dtype=np.int64)
    for i, x in enumerate(feats):
        indptr[i + 1] = indptr[i] + len(x)
    indices = np.fromiter((f for x in feats for f, _ in x), dtype=np.int32, count=int(indptr[-1]))
    data = np.fromiter((v for x in feats for _, v in x), dtype=np.float64, count=int(indptr[-1]))
    m = sp.csr_matrix((data, indices, indptr), shape=(len(feats), n_features))
    m.sum_duplicates()
    return m


def _tree_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a directory (napkinXC and Omikuji save directories)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def worker(args: argparse.Namespace) -> dict:
    """Fit one anchor on ``args.train``, predict ``args.test``; the report (written to ``args.out``)."""
    name, _, kind, opts = ANCHORS[args.system]
    (_, n_feat, n_lab), ytr, xtr = read_xmc(args.train)
    _, yte, xte = read_xmc(args.test)
    tmp = Path(args.tmp)
    rep: dict = {"system": args.system, "options": dict(opts)}
    if kind == "napkinxc":
        import napkinxc
        from napkinxc import models

        Xtr, Xte = _csr(xtr, n_feat), _csr(xte, n_feat)
        model = getattr(models, opts["model"])(str(tmp / "model"))
        c0, w0 = time.process_time(), time.perf_counter()
        model.fit(Xtr, ytr)
        c1, w1 = time.process_time(), time.perf_counter()
        preds = model.predict(Xte, top_k=TOP_K)
        c2, w2 = time.process_time(), time.perf_counter()
        preds = [[int(p) for p in row] for row in preds]
        rep["version"] = getattr(napkinxc, "__version__", None)
        rep["model_bytes"] = _tree_bytes(tmp / "model")
    elif kind == "omikuji":
        import omikuji

        hp = omikuji.Model.default_hyper_param()
        if "n_trees" in opts:
            hp.n_trees = opts["n_trees"]
        c0, w0 = time.process_time(), time.perf_counter()
        model = omikuji.Model.train_on_data(str(args.train), hp, n_threads=opts["n_threads"])
        c1, w1 = time.process_time(), time.perf_counter()
        preds = [[int(l) for l, _ in model.predict(x, top_k=TOP_K)] for x in xte]
        c2, w2 = time.process_time(), time.perf_counter()
        model.save(str(tmp / "omikuji_model"))
        rep["model_bytes"] = _tree_bytes(tmp / "omikuji_model")
    elif kind == "vw":
        import vowpalwabbit

        train_vw, test_vw = tmp / "train.vw", tmp / "test.vw"
        xmc_to_vw(args.train, train_vw)
        xmc_to_vw(args.test, test_vw)
        base = f"--plt {n_lab} --loss_function logistic -b {bits_for(n_lab)} --quiet"
        passes = opts["passes"]
        extra = f" --passes {passes} -c --cache_file {tmp / 'train.cache'} --holdout_off" if passes > 1 else ""
        c0, w0 = time.process_time(), time.perf_counter()
        ws = vowpalwabbit.Workspace(f"{base} -d {train_vw} -f {tmp / 'model.vw'}{extra}")
        ws.run_parser()
        ws.finish()
        c1, w1 = time.process_time(), time.perf_counter()
        ws = vowpalwabbit.Workspace(f"--loss_function logistic -i {tmp / 'model.vw'} -t --top_k {TOP_K} "
                                    f"-d {test_vw} -p {tmp / 'preds.txt'} --quiet")
        ws.run_parser()
        ws.finish()
        c2, w2 = time.process_time(), time.perf_counter()
        preds = [[int(t.split(":")[0]) for t in l.strip().split(",") if t.strip()]
                 for l in (tmp / "preds.txt").read_text().splitlines()]
        rep["command"] = f"{base}{' --passes %d -c --holdout_off' % passes if passes > 1 else ''}"
        rep["version"] = getattr(vowpalwabbit, "__version__", None)
        rep["model_bytes"] = _tree_bytes(tmp / "model.vw")
    else:  # pragma: no cover
        raise ValueError(kind)
    rep.update(precision_at_k(preds, yte))
    rep.update(train_cpu_s=c1 - c0, train_wall_s=w1 - w0, predict_cpu_s=c2 - c1, predict_wall_s=w2 - w1,
               train_examples=len(ytr), test_examples=len(yte), status="ok")
    return rep


# --------------------------------------------------------------------------- running children


def missing_packages(system: str) -> list[str]:
    return [p for p in ANCHORS[system][1] if importlib.util.find_spec(p) is None]


def run_anchor(system: str, train: Path, test: Path) -> dict:
    miss = missing_packages(system)
    if miss:
        return {"status": "not installed", "note": "pip install " + " ".join(PIP_NAMES.get(p, p) for p in miss)}
    with tempfile.TemporaryDirectory(prefix="lt-ml-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "data_scripts.bench_multilabel", "_worker", "--system", system,
               "--train", str(train), "--test", str(test), "--tmp", tmp, "--out", str(out)]
        t = run_timed(cmd, env_extra={"PYTHONPATH": str(REPO_ROOT)})
        if t.rc != 0 or not out.exists():
            return {"status": "failed", "note": t.stderr.strip().splitlines()[-1:] or [f"exit {t.rc}"],
                    "rc": t.rc}
        rep = json.loads(out.read_text())
    rep.update(process_cpu_s=t.cpu, process_wall_s=t.wall, maxrss_kb=t.maxrss_kb)
    return rep


# --------------------------------------------------------------------------- lomtree


COMPILE_MARK = "data saved to"
LOMTREE_STATUS_NOTES = {"not yet": "the lomtree CLI has no --multilabel / --format xmc yet",
                        "not installed": "no lomtree CLI found (--lomtree, $LOMTREE_BIN, .venv/bin/lomtree, PATH)"}


def find_lomtree(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if os.environ.get("LOMTREE_BIN"):
        return os.environ["LOMTREE_BIN"]
    local = REPO_ROOT / ".venv" / "bin" / "lomtree"
    if local.exists():
        return str(local)
    return shutil.which("lomtree")


def lomtree_status(exe: str | None) -> str:
    """``"ok"``, or why lomtree rows cannot run (no CLI; CLI without ``--multilabel`` / ``--format xmc``)."""
    if not exe or not (os.path.exists(exe) or shutil.which(exe)):
        return "not installed"
    try:
        h = subprocess.run([exe, "train", "--help"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    if "--multilabel" not in h or "xmc" not in h:
        return "not yet"
    return "ok"


def _lomtree_run(cmd: list[str], retries: int = 2) -> tuple[Timed, int]:
    """Run a lomtree command; a run during which numba compiled (and saved) a kernel is run again."""
    again = 0
    while True:
        t = run_timed(cmd, env_extra={"NUMBA_DEBUG_CACHE": "1"})
        if t.rc != 0 or COMPILE_MARK not in t.stdout or again >= retries:
            return t, again
        again += 1


def run_lomtree(exe: str, row: LomtreeRow, train: Path, test: Path, n_labels: int,
                train_limit_lines: int | None = None) -> dict:
    """Train and test one lomtree row; CPU and wall from ``os.wait4``, metrics from test.json.
    Given a VW text pair (``.vw``: the PyPI-names words), lomtree reads that instead of XMC."""
    fmt = "vw" if train.suffix == ".vw" else "xmc"
    with tempfile.TemporaryDirectory(prefix="lt-ml-") as tmp:
        tmp_p = Path(tmp)
        model = tmp_p / "model.lt"
        trep, prep = tmp_p / "train.json", tmp_p / "test.json"
        member = ["--predict_only_model"] + (["--trees", str(row.trees)] if row.trees > 1 else [])
        if n_labels >= LARGE_LABELS:
            member += ["--weight-threshold", str(row.weight_threshold)]
        rep: dict = {"command": "lomtree train " + " ".join(row.train_args())
                     + f" --format {fmt} TRAIN -k {n_labels} -b {bits_for(n_labels)} -f MODEL --quiet --report train.json "
                     + " ".join(member)}
        tcmd = [exe, "train", *row.train_args(), *member, "--format", fmt, str(train), "-k", str(n_labels),
                "-b", str(bits_for(n_labels)), "-f", str(model), "--quiet", "--report", str(trep)]
        t, again = _lomtree_run(tcmd)
        if t.rc != 0:
            return {**rep, "status": "failed", "note": t.stderr.strip().splitlines()[-3:], "rc": t.rc}
        cpu, wall, maxrss = t.cpu, t.wall, t.maxrss_kb
        pcmd = [exe, "predict", "-i", str(model), str(test), "--top-k", str(TOP_K),
                "-p", "/dev/null", "--report", str(prep), "--quiet"]
        p, again_p = _lomtree_run(pcmd)
        if p.rc != 0 or not prep.exists():
            return {**rep, "status": "failed", "note": p.stderr.strip().splitlines()[-3:], "rc": p.rc}
        test_json = json.loads(prep.read_text())
        train_json = json.loads(trep.read_text()) if trep.exists() else {}
        rep["model_bytes"] = model.stat().st_size
    rep.update(status="ok", train_cpu_s=cpu, train_wall_s=wall, train_maxrss_kb=maxrss,
               predict_cpu_s=p.cpu, predict_wall_s=p.wall, recompiled_runs=again + again_p,
               train_report=train_json, test_report=test_json)
    for key in ("p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5", "psp@1", "psp@3", "psp@5"):
        if key in test_json:
            rep[key] = test_json[key]
    return rep


# --------------------------------------------------------------------------- synthetic sweep


def _duration(seconds: float) -> str:
    """``90 -> '90 s'``, ``4000 -> '67 min'``, ``20000 -> '5.6 h'``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _head_xmc(src: Path, dst: Path, n: int) -> None:
    it = iter_lines(src)
    _, f, l = parse_header(next(it))
    lines = []
    for line in it:
        if len(lines) >= n:
            break
        lines.append(line)
    write_xmc_lines(dst, lines, f, l)


def run_synthetic(exe: str, ks: Sequence[int], n: int, n_test: int, out_dir: Path, seed: int,
                  max_seconds: float, reductions=("plt", "oaa")) -> list[dict]:
    rows = []
    for k in ks:
        train, test = out_dir / f"synthetic_k{k}_n{n}.train.txt", out_dir / f"synthetic_k{k}_n{n}.test.txt"
        if not (train.exists() and test.exists()):
            log(f"synthetic k={k}: generating {n} + {n_test} examples")
            examples, vocab = generate_synthetic(k, n + n_test, seed=seed)
            write_xmc(train, examples[:n], vocab, k)
            write_xmc(test, examples[n:], vocab, k)
        for red in reductions:
            row = LomtreeRow(f"synthetic_{red}", red, red, 1)
            probe_train = out_dir / f"synthetic_k{k}_n{PROBE_N}.probe.txt"
            if not probe_train.exists():
                _head_xmc(train, probe_train, min(PROBE_N, n))
            probe_n = min(PROBE_N, n)
            log(f"synthetic k={k} {red}: probe on {probe_n} examples")
            r = run_lomtree(exe, row, probe_train, test, k)
            rec = {"k": k, "reduction": red, "status": r["status"], "probe": r}
            if r["status"] == "ok" and n > probe_n:
                projected = r["train_cpu_s"] / probe_n * n
                rec["projected_train_cpu_s"] = projected
                if projected > max_seconds:
                    rec["note"] = (f"measured on the first {probe_n:,} examples: the full {n:,} "
                                   f"would take about {_duration(projected)} of CPU")
                else:
                    log(f"synthetic k={k} {red}: full run on {n} examples")
                    probe = r
                    r = run_lomtree(exe, row, train, test, k)
                    rec["status"] = r["status"]
                    if r["status"] == "ok":
                        # the cost of one more example: start-up, the table's allocation and the model's
                        # writing are the same in both runs and cancel
                        rec["train_us_per_example_marginal"] = \
                            1e6 * (r["train_cpu_s"] - probe["train_cpu_s"]) / (n - probe_n)
                    probe_n = n
            if r["status"] == "ok":
                rec.update(train_examples=probe_n, train_cpu_s=r["train_cpu_s"], predict_cpu_s=r["predict_cpu_s"],
                           train_us_per_example=1e6 * r["train_cpu_s"] / probe_n,
                           predict_us_per_example=1e6 * r["predict_cpu_s"] / n_test,
                           test_examples=n_test, **{m: r.get(m) for m in ("p@1", "p@3", "p@5")})
                rec.setdefault("note", "")
            else:
                rec["note_failed"] = r.get("note")
            rec["run"] = r
            rows.append(rec)
    return rows


def plot_synthetic(rows: Sequence[dict], path: Path) -> bool:
    if importlib.util.find_spec("matplotlib") is None:
        log("matplotlib not installed: no plot")
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for red, colour in (("plt", "tab:blue"), ("oaa", "tab:red")):
        ok = [r for r in rows if r["reduction"] == red and r["status"] == "ok"]
        if not ok:
            continue
        ks = [r["k"] for r in ok]
        ax.plot(ks, [r.get("train_us_per_example_marginal") or r["train_us_per_example"] for r in ok], "o-",
                color=colour, label=f"{red} train (marginal)")
        ax.plot(ks, [r["predict_us_per_example"] for r in ok], "s--", color=colour, label=f"{red} predict (top 5)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("labels k")
    ax.set_ylabel("CPU µs per example (start-up included)")
    ax.set_title("lomtree multi-label: cost per example vs k (synthetic)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- main


def all_systems() -> list[tuple[str, str]]:
    return [(s, ANCHORS[s][0]) for s in ANCHORS] + [(r.id, r.name) for r in LOMTREE_ROWS]


def select_systems(only: Sequence[str] | None, skip_anchors: bool, quick: bool) -> list[str]:
    """System ids in table order: ``only`` entries match ids exactly or, when no id is the entry
    itself, as prefixes (``lomtree_plt_1`` is that row, not ``lomtree_plt_10`` too)."""
    ids = [s for s, _ in all_systems()]
    if only:
        unknown = [o for o in only if not any(i == o or i.startswith(o) for i in ids)]
        if unknown:
            raise SystemExit(f"unknown system(s) {unknown}; known: {', '.join(ids)}")
        ids = [i for i in ids if any(i == o or (o not in ids and i.startswith(o)) for o in only)]
    if skip_anchors:
        ids = [i for i in ids if i not in ANCHORS]
    if quick:
        multi = {s for s, (_, _, _, o) in ANCHORS.items() if o.get("passes", 1) > 1}
        multi |= {r.id for r in LOMTREE_ROWS if r.passes > 1 or r.trees > 1}
        ids = [i for i in ids if i not in multi]
    return ids


def versions() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "scipy", "napkinxc", "omikuji", "vowpalwabbit", "matplotlib"):
        try:
            from importlib.metadata import version

            out[mod] = version(PIP_NAMES.get(mod, mod))
        except Exception:
            out[mod] = None
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.bench_multilabel", description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--prep-dir", type=Path, default=REPO_ROOT / "bench" / "data" / "multilabel",
                    help="where the prepared XMC files go (git-ignored)")
    ap.add_argument("--out-dir", type=Path, default=REPO_ROOT / "bench", help="multilabel.md/json and the plot")
    ap.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=None)
    ap.add_argument("--only", nargs="+", metavar="SYSTEM", help="system ids or prefixes: " +
                    ", ".join(s for s, _ in all_systems()))
    ap.add_argument("--skip-anchors", action="store_true")
    ap.add_argument("--quick", action="store_true", help="bibtex only, one-pass rows, no synthetic sweep")
    ap.add_argument("--lomtree", help="the lomtree CLI (default: $LOMTREE_BIN, .venv/bin/lomtree, PATH)")
    ap.add_argument("--synthetic-k", nargs="*", type=int, default=None,
                    help=f"label counts of the synthetic sweep (default {' '.join(map(str, SYNTHETIC_KS))}; "
                         f"none: skip)")
    ap.add_argument("-n", "--synthetic-n", type=int, default=20000)
    ap.add_argument("--synthetic-test-n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-run-seconds", type=float, default=600.0)
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--synthetic-only", action="store_true",
                    help="run only the synthetic sweep and put it into --out-dir's multilabel.json (the data "
                         "sets' rows kept), then re-render multilabel.md")
    ap.add_argument("--merge", action="store_true",
                    help="keep the runs already in --out-dir's multilabel.json that this run does not redo")
    ap.add_argument("--note", help="a sentence for the top of multilabel.md (e.g. how loaded the machine was)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        wp = argparse.ArgumentParser()
        for opt in ("--system", "--train", "--test", "--tmp", "--out"):
            wp.add_argument(opt, required=True)
        wa = wp.parse_args(argv[1:])
        rep = worker(wa)
        Path(wa.out).write_text(json.dumps(rep))
        return 0
    args = build_parser().parse_args(argv)
    if args.synthetic_only:
        return synthetic_only(args, argv)
    datasets = args.datasets or (["bibtex"] if args.quick else list(DEFAULT_DATASETS))
    systems = select_systems(args.only, args.skip_anchors, args.quick)
    exe = find_lomtree(args.lomtree)
    lt_status = lomtree_status(exe) if any(s.startswith("lomtree") for s in systems) or not args.no_synthetic else None
    if lt_status and lt_status != "ok":
        log(f"lomtree: {lt_status} ({LOMTREE_STATUS_NOTES.get(lt_status, '')})")
    started = _dt.datetime.now().astimezone()
    result: dict = {"command": "python -m data_scripts.bench_multilabel " + sanitize_command(argv),
                    "date": started.isoformat(timespec="seconds"), "versions": versions(),
                    "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                    "note": args.note, "datasets": {}, "runs": [], "synthetic": []}
    if exe and lt_status == "ok":
        git = subprocess.run(["git", "-C", str(Path(exe).resolve().parent), "log", "-1", "--format=%h %s"],
                             capture_output=True, text=True)
        result["lomtree_commit"] = git.stdout.strip()[:120] or None
    for d in datasets:
        try:
            train, test = prepare_dataset(d, args.data_dir, args.prep_dir)
        except (OSError, ValueError) as e:
            log(f"{d}: {e}")
            result["datasets"][d] = {"status": f"unavailable: {e}"}
            continue
        with open(train) as fh:
            n_tr, n_f, n_l = parse_header(fh.readline())
        with open(test) as fh:
            n_te = parse_header(fh.readline())[0]
        result["datasets"][d] = {"train_examples": n_tr, "test_examples": n_te, "features": n_f, "labels": n_l,
                                 "train_file": f"{args.prep_dir.name}/{train.name}"}
        for s in systems:
            if s.startswith(DATASETS[d].get("skip", ())):
                continue
            log(f"{d}: {s} ...")
            if s in ANCHORS:
                rep = run_anchor(s, train, test)
            else:
                row = next(r for r in LOMTREE_ROWS if r.id == s)
                lt_files = (train, test)
                if DATASETS[d]["kind"] == "pypi_names":  # the words themselves, binary (see DATASETS)
                    lt_files = (train.with_suffix(".vw"), test.with_suffix(".vw"))
                rep = (run_lomtree(exe, row, *lt_files, n_l) if lt_status == "ok"
                       else {"status": lt_status, "note": LOMTREE_STATUS_NOTES.get(lt_status, "")})
            rep.update(system=s, dataset=d)
            result["runs"].append(rep)
            if rep["status"] == "ok":
                log(f"    P@1/3/5 {100 * rep['p@1']:.2f}/{100 * rep['p@3']:.2f}/{100 * rep['p@5']:.2f}"
                    f"  train CPU {rep['train_cpu_s']:.2f} s, wall {rep['train_wall_s']:.2f} s")
            else:
                log(f"    {rep['status']} {rep.get('note', '')}")
    syn_ks = args.synthetic_k
    if syn_ks is None:
        syn_ks = [] if (args.quick or args.no_synthetic) else list(SYNTHETIC_KS)
    if args.no_synthetic:
        syn_ks = []
    if syn_ks:
        if lt_status == "ok":
            result["synthetic"] = run_synthetic(exe, syn_ks, args.synthetic_n, args.synthetic_test_n,
                                                args.prep_dir, args.seed, args.max_run_seconds)
            plot_synthetic(result["synthetic"], args.out_dir / "ml_cost_vs_k.png")
        else:
            result["synthetic"] = [{"k": k, "reduction": r, "status": lt_status,
                                    "note": LOMTREE_STATUS_NOTES.get(lt_status, "")}
                                   for k in syn_ks for r in ("plt", "oaa")]
    result["finished"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.merge:
        datasets, systems = merge_previous(args.out_dir / "multilabel.json", result, datasets, systems)
    write_results(args.out_dir, result, datasets, systems)
    return 0


def merge_previous(path: Path, result: dict, datasets: Sequence[str], systems: Sequence[str]):
    """``--merge``: keep the runs of ``path`` that this run did not redo (slow anchors run once);
    returns the data sets and systems of the merged table."""
    if not path.exists():
        return datasets, systems
    old = json.loads(path.read_text())
    redone = {(r["system"], r["dataset"]) for r in result["runs"]}
    kept = [r for r in old.get("runs", []) if (r["system"], r["dataset"]) not in redone]
    for r in kept:
        r.setdefault("from_command", old.get("command"))
        r.setdefault("from_date", old.get("date"))
    result["runs"] = kept + result["runs"]
    for d, info in old.get("datasets", {}).items():
        result["datasets"].setdefault(d, info)
    if not result.get("synthetic") and old.get("synthetic"):
        for key in ("synthetic", "synthetic_command", "synthetic_date", "synthetic_loadavg"):
            if key in old:
                result[key] = old[key]
    present = {r["dataset"] for r in result["runs"]} | set(datasets)
    order = [s for s, _ in all_systems()]
    return ([d for d in DATASETS if d in present],
            [s for s in order if s in systems or any(r["system"] == s for r in result["runs"])])


def synthetic_only(args, argv) -> int:
    """``--synthetic-only``: a new synthetic sweep in place of the one in ``multilabel.json``, the
    data sets' rows as they were (their command and date stay on top; the sweep's own below)."""
    path = args.out_dir / "multilabel.json"
    if not path.exists():
        log(f"{path}: not found (run the whole benchmark first)")
        return 1
    result = json.loads(path.read_text())
    exe = find_lomtree(args.lomtree)
    status = lomtree_status(exe)
    if status != "ok":
        log(f"lomtree: {status} ({LOMTREE_STATUS_NOTES.get(status, '')})")
        return 1
    ks = args.synthetic_k or list(SYNTHETIC_KS)
    result["synthetic_command"] = "python -m data_scripts.bench_multilabel " + sanitize_command(argv)
    result["synthetic_date"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    result["synthetic_loadavg"] = round(os.getloadavg()[0], 2)
    result["synthetic"] = run_synthetic(exe, ks, args.synthetic_n, args.synthetic_test_n, args.prep_dir, args.seed,
                                        args.max_run_seconds)
    plot_synthetic(result["synthetic"], args.out_dir / "ml_cost_vs_k.png")
    datasets = [d for d in DATASETS if d in result["datasets"]]
    systems = list(dict.fromkeys(r["system"] for r in result["runs"]))
    write_results(args.out_dir, result, datasets, systems)
    return 0


def write_results(out_dir: Path, result: dict, datasets: Sequence[str], systems: Sequence[str]) -> None:
    """``multilabel.json`` (every raw figure) and ``multilabel.md`` in ``out_dir``."""
    with atomic_write(out_dir / "multilabel.json") as fh:
        json.dump(result, fh, indent=1, sort_keys=False)
        fh.write("\n")
    with atomic_write(out_dir / "multilabel.md") as fh:
        fh.write(render_markdown(result, datasets, systems))
    log(f"wrote {out_dir / 'multilabel.md'} and multilabel.json")


def render_markdown(result: dict, datasets: Sequence[str], systems: Sequence[str]) -> str:
    names = dict(all_systems())
    ok_ds = [d for d in datasets if "status" not in result["datasets"].get(d, {})]
    parts = [
        "# Multi-label benchmark: lomtree beside napkinXC, Omikuji and VW --plt\n",
        f"Command: `{result['command']}`  \nDate: {result['date']}  \n"
        f"Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v) + "  \n"
        + (f"lomtree: {result['lomtree_commit']}  \n" if result.get("lomtree_commit") else "")
        + (f"Note: {result['note']}  \n" if result.get("note") else ""),
        "P@k in % on the test split (every test example counts; one without labels scores 0). "
        "Training CPU: seconds of CPU of the fit (all threads summed: napkinXC uses all cores, "
        "Omikuji 2 threads; lomtree: the whole `lomtree train` process, start-up and parsing "
        "included). Raw figures (wall times, prediction times, nDCG) in `multilabel.json`.\n",
    ]
    for d in ok_ds:
        info = result["datasets"][d]
        parts.append(f"- {DATASETS[d]['title']}: {info['train_examples']:,} train / {info['test_examples']:,} test, "
                     f"{info['features']:,} features, {info['labels']:,} labels")
    parts.append("")
    parts.append(format_table(result["runs"], ok_ds, [(s, names[s]) for s in systems]))
    parts.append("Training CPU s / model MB / peak resident MB (anchors: the whole worker process, "
                 "data reading included; lomtree: `lomtree train`):\n")
    parts.append(format_resources(result["runs"], ok_ds, [(s, names[s]) for s in systems]))
    notes = sorted({f"{names[r['system']]}: {r['status']}" + (f" ({r['note']})" if r.get("note") else "")
                    for r in result["runs"] if r["status"] != "ok"})
    if notes:
        parts.append("Not run:\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    if result.get("synthetic"):
        parts.append("## Synthetic stream: cost per example against k\n")
        if result.get("synthetic_command"):
            parts.append(f"Command: `{result['synthetic_command']}`  \nDate: {result['synthetic_date']} "
                         f"(1-minute load {result.get('synthetic_loadavg')})\n")
        parts.append("lomtree `-r plt --multilabel` and `-r oaa --multilabel`, one pass, `-b 24`; "
                     "train: the CPU of the whole process divided by the examples (start-up, the 2^24-slot "
                     "table and the model's writing included), and the marginal cost of an example: "
                     "(CPU of the full run - CPU of the 1,000-example probe) / (examples - 1,000); "
                     "predict: top 5 on the test stream, the whole process (model loading included). "
                     "Plot: `ml_cost_vs_k.png`.\n")
        parts.append(format_synthetic_table(result["synthetic"]))
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
