"""Grid search for LOMtree on Sector: T x learning rate x decay x swap resistance x loss x power_t, multi-pass.

Stage 1 (selection): every setting trains ``lomtree train -r lomtree`` for ``--passes`` passes over
a cache with every 10th example held out (early termination off), keeping the pass with the best
holdout loss; settings are ranked by that **holdout** loss, never by the test file.

Stage 2 (refit, ``--refit N``): the N settings ranked first are trained again on **all** training
examples (``--holdout-off``) for the number of passes their holdout run chose (its best pass), the
usual "select on held-out data, then refit on everything" step; then the test file is predicted.
The test error is reported beside both stages, never used to choose.

Usage::

    python -m data_scripts.tune_lomtree [--T 104 150 200] [--lr 0.5 1] [--decay 1 0.8] [--rs 4]
        [--loss squared] [--power-t 0.5] [--passes 15] [--refit 3] [-j 2] [--out bench/lomtree_tuning.md]

Reads ``bench/data/sector.{train,test}.vw`` (``make data``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import bench as B


def run_one(setting: tuple, args, work: Path, passes: int, holdout: bool, train_file: Path | None = None,
            period: int = 10, fold: int | None = None) -> dict:
    """Train one setting (holdout: every ``period``-th example held out) and predict the test file;
    with ``fold`` set (a cross-validation fold), train on ``train_file`` only, no prediction."""
    T, lr, decay, rs, loss, pt = setting
    tag = f"{T}_{lr}_{decay}_{rs}_{loss}_{pt}_{'h' if holdout else 'all'}_{fold}"
    m, c = work / f"{tag}.lt", work / f"{tag}.cache"
    tr, te = work / f"{tag}.train.json", work / f"{tag}.test.json"
    opts = {"bits": args.bits, "max_internal_nodes": T, "learning_rate": lr, "decay_learning_rate": decay,
            "swap_resistance": rs, "loss_function": loss, "power_t": pt, "passes": passes, "early_terminate": passes,
            "holdout_off": not holdout, "holdout_period": period}
    train = B.lomtree_train_cmd("lomtree", args.k, opts, str(train_file or args.train), str(m), str(tr), str(c))
    cmds = [train] if fold is not None else [train, B.lomtree_predict_cmd(str(m), str(args.test), str(te))]
    out = {"T": T, "learning_rate": lr, "decay": decay, "swap_resistance": rs, "loss": loss, "power_t": pt}
    for cmd in cmds:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            out["error"] = p.stderr.strip()[-300:]
            return out
    a = json.loads(tr.read_text())
    out.update(holdout_loss=a.get("holdout_loss"), best_pass=a.get("best_pass", passes), passes=passes,
               holdout_losses=a.get("holdout_losses"))
    if fold is None:
        out["test_error"] = json.loads(te.read_text())["average_loss"]
    for f in (m, c, tr, te):
        f.unlink(missing_ok=True)
    return out


def fold_rotations(lines: list, k: int) -> list[list]:
    """The K rotations of ``lines`` used as folds: rotation f starts at line f, so with
    ``--holdout-period K`` (positions K, 2K, ... held out) fold f holds out the lines whose index
    is ``K - 1 - f`` modulo K (of a file whose length is a multiple of K; otherwise also one
    line across the wrap)."""
    return [lines[f:] + lines[:f] for f in range(k)]


def cross_validate(grid, args, work: Path, pool) -> list[dict]:
    """K-fold selection (``--cv K``): fold f trains on the training file rotated by f lines with
    every K-th example held out, so over the K folds every training example is held out exactly
    once per pass. A setting's score is the mean over folds of each pass's holdout loss; it keeps
    its best pass. (A single every-10th-example holdout is 641 Sector examples: one example is
    0.0016 of loss, below the differences between good settings.)"""
    lines = args.train.read_bytes().splitlines(keepends=True)
    folds = []
    for f, fold_lines in enumerate(fold_rotations(lines, args.cv)):
        path = work / f"fold{f}.vw"
        path.write_bytes(b"".join(fold_lines))
        folds.append(path)
    jobs = [(s, f) for s in grid for f in range(args.cv)]
    runs = list(pool.map(lambda j: run_one(j[0], args, work, args.passes, True, folds[j[1]], args.cv, j[1]), jobs))
    out = []
    for i, setting in enumerate(grid):
        rs = runs[i * args.cv:(i + 1) * args.cv]
        bad = [r for r in rs if "error" in r or not r.get("holdout_losses")]
        if bad:
            out.append({**bad[0], "error": bad[0].get("error", "no holdout losses")})
            continue
        mean = [sum(r["holdout_losses"][p] for r in rs) / len(rs) for p in range(min(len(r["holdout_losses"]) for r in rs))]
        best = min(range(len(mean)), key=lambda p: (mean[p], p))
        out.append({**{k: v for k, v in rs[0].items() if k not in ("holdout_losses", "holdout_loss", "best_pass")},
                    "holdout_loss": mean[best], "best_pass": best + 1, "test_error": None})
    return out


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:.2f}"


def _setting(r: dict) -> tuple:
    return r["T"], r["learning_rate"], r["decay"], r["swap_resistance"], r["loss"], r["power_t"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=Path, default=B.DATA_DIR / "sector.train.vw")
    ap.add_argument("--test", type=Path, default=B.DATA_DIR / "sector.test.vw")
    ap.add_argument("-k", type=int, default=105)
    ap.add_argument("-b", "--bits", type=int, default=24)
    ap.add_argument("--T", type=int, nargs="+", default=[104, 150, 200])
    ap.add_argument("--lr", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--decay", type=float, nargs="+", default=[1.0, 0.8])
    ap.add_argument("--rs", type=int, nargs="+", default=[4])
    ap.add_argument("--loss", nargs="+", default=["squared"])
    ap.add_argument("--power-t", type=float, nargs="+", default=[0.5], help="learning-rate decay exponent")
    ap.add_argument("--passes", type=int, default=15)
    ap.add_argument("--refit", type=int, default=3, help="refit the N best settings on all data")
    ap.add_argument("--cv", type=int, default=0, metavar="K",
                    help="rank settings by K-fold cross-validation on the training file (see cross_validate) "
                         "instead of one every-10th-example holdout")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=B.BENCH_DIR / "lomtree_tuning.md")
    args = ap.parse_args(argv)
    grid = list(itertools.product(args.T, args.lr, args.decay, args.rs, args.loss, args.power_t))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        if args.cv > 1:
            rows = cross_validate(grid, args, Path(tmp), pool)
        else:
            rows = list(pool.map(lambda s: run_one(s, args, Path(tmp), args.passes, True), grid))
        ok = sorted((r for r in rows if "error" not in r), key=lambda r: (r["holdout_loss"], r["test_error"] or 0))
        refit = list(pool.map(lambda r: run_one(_setting(r), args, Path(tmp), r["best_pass"], False),
                              ok[:args.refit]))
    head = "| T | learning rate | decay | swap resistance | loss | power_t |"
    rule = "| ---: | ---: | ---: | ---: | --- | ---: |"
    lines = [f"LOMtree on Sector (`python -m data_scripts.tune_lomtree`), -b {args.bits}, {len(grid)} settings.", "",
             f"Stage 2: the {len(refit)} settings with the best holdout loss, refit on all {args.train.name} "
             "examples (`--holdout-off`) for their best holdout pass count:", "",
             head + " passes | test error % |", rule + " ---: | ---: |"]
    for r in refit:
        if "error" in r:
            lines.append(f"| failed: {r['error']} |")
            continue
        lines.append(f"| {r['T']} | {r['learning_rate']:g} | {r['decay']:g} | {r['swap_resistance']} | {r['loss']} | {r['power_t']:g} | "
                     f"{r['passes']} | {100 * r['test_error']:.2f} |")
    how = (f"{args.cv}-fold cross-validation on the training file (mean holdout loss over the folds)"
           if args.cv > 1 else "every 10th example held out")
    lines += ["", f"Stage 1: {args.passes} passes, {how}, the best pass kept; ranked by holdout loss:", "",
              head + " holdout loss | best pass | test error % |", rule + " ---: | ---: | ---: |"]
    for r in ok:
        lines.append(f"| {r['T']} | {r['learning_rate']:g} | {r['decay']:g} | {r['swap_resistance']} | {r['loss']} | {r['power_t']:g} | "
                     f"{r['holdout_loss']:.4f} | {r['best_pass']} | {_pct(r['test_error'])} |")
    for r in rows:
        if "error" in r:
            lines.append(f"\nfailed: {r}")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
