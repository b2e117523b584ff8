"""Grid search for LOMtree on Sector: T x learning rate x decay x swap resistance x loss, multi-pass.

Stage 1 (selection): every setting trains ``lomtree train -r lomtree`` for ``--passes`` passes over
a cache with every 10th example held out (early termination off), keeping the pass with the best
holdout loss; settings are ranked by that **holdout** loss, never by the test file.

Stage 2 (refit, ``--refit N``): the N settings ranked first are trained again on **all** training
examples (``--holdout-off``) for the number of passes their holdout run chose (its best pass), the
usual "select on held-out data, then refit on everything" step; then the test file is predicted.
The test error is reported beside both stages, never used to choose.

Usage::

    python -m data_scripts.tune_lomtree [--T 104 150 200] [--lr 0.5 1] [--decay 1 0.8] [--rs 4]
        [--loss squared] [--passes 15] [--refit 3] [-j 2] [--out bench/lomtree_tuning.md]

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


def run_one(setting: tuple, args, work: Path, passes: int, holdout: bool) -> dict:
    T, lr, decay, rs, loss = setting
    tag = f"{T}_{lr}_{decay}_{rs}_{loss}_{'h' if holdout else 'all'}"
    m, c = work / f"{tag}.lt", work / f"{tag}.cache"
    tr, te = work / f"{tag}.train.json", work / f"{tag}.test.json"
    opts = {"bits": args.bits, "max_internal_nodes": T, "learning_rate": lr, "decay_learning_rate": decay,
            "swap_resistance": rs, "loss_function": loss, "passes": passes, "early_terminate": passes,
            "holdout_off": not holdout}
    train = B.lomtree_train_cmd("lomtree", args.k, opts, str(args.train), str(m), str(tr), str(c))
    pred = B.lomtree_predict_cmd(str(m), str(args.test), str(te))
    out = {"T": T, "learning_rate": lr, "decay": decay, "swap_resistance": rs, "loss": loss}
    for cmd in (train, pred):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            out["error"] = p.stderr.strip()[-300:]
            return out
    a, b = json.loads(tr.read_text()), json.loads(te.read_text())
    out.update(holdout_loss=a.get("holdout_loss"), best_pass=a.get("best_pass", passes),
               test_error=b["average_loss"], passes=passes)
    for f in (m, c, tr, te):
        f.unlink(missing_ok=True)
    return out


def _setting(r: dict) -> tuple:
    return r["T"], r["learning_rate"], r["decay"], r["swap_resistance"], r["loss"]


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
    ap.add_argument("--passes", type=int, default=15)
    ap.add_argument("--refit", type=int, default=3, help="refit the N best settings on all data")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=B.BENCH_DIR / "lomtree_tuning.md")
    args = ap.parse_args(argv)
    grid = list(itertools.product(args.T, args.lr, args.decay, args.rs, args.loss))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda s: run_one(s, args, Path(tmp), args.passes, True), grid))
        ok = sorted((r for r in rows if "error" not in r), key=lambda r: (r["holdout_loss"], r["test_error"]))
        refit = list(pool.map(lambda r: run_one(_setting(r), args, Path(tmp), r["best_pass"], False),
                              ok[:args.refit]))
    head = "| T | learning rate | decay | swap resistance | loss |"
    rule = "| ---: | ---: | ---: | ---: | --- |"
    lines = [f"LOMtree on Sector (`python -m data_scripts.tune_lomtree`), -b {args.bits}, {len(grid)} settings.", "",
             f"Stage 2: the {len(refit)} settings with the best holdout loss, refit on all {args.train.name} "
             "examples (`--holdout-off`) for their best holdout pass count:", "",
             head + " passes | test error % |", rule + " ---: | ---: |"]
    for r in refit:
        if "error" in r:
            lines.append(f"| failed: {r['error']} |")
            continue
        lines.append(f"| {r['T']} | {r['learning_rate']:g} | {r['decay']:g} | {r['swap_resistance']} | {r['loss']} | "
                     f"{r['passes']} | {100 * r['test_error']:.2f} |")
    lines += ["", f"Stage 1: {args.passes} passes, every 10th example held out, the best holdout pass kept; "
              "ranked by holdout loss:", "",
              head + " holdout loss | best pass | test error % |", rule + " ---: | ---: | ---: |"]
    for r in ok:
        lines.append(f"| {r['T']} | {r['learning_rate']:g} | {r['decay']:g} | {r['swap_resistance']} | {r['loss']} | "
                     f"{r['holdout_loss']:.4f} | {r['best_pass']} | {100 * r['test_error']:.2f} |")
    for r in rows:
        if "error" in r:
            lines.append(f"\nfailed: {r}")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
