"""Grid search for LOMtree on Sector: T x learning rate x swap resistance x loss, multi-pass.

Every setting trains ``lomtree train -r lomtree`` for ``--passes`` passes over a cache, keeping
the pass with the best holdout loss (every 10th example held out, early termination off by
default), then predicts the test file. Settings are ranked by **holdout** loss (what a user can
select on); the test error is reported beside it, never used to choose.

Usage::

    python -m data_scripts.tune_lomtree [--T 1000 4000 16000 65535] [--lr 1 2 4] [--rs 1 4 16]
        [--loss squared quantile] [--passes 20] [-j 2] [--out bench/lomtree_tuning.md]

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


def run_one(setting: tuple, args, work: Path) -> dict:
    T, lr, rs, loss = setting
    tag = f"{T}_{lr}_{rs}_{loss}"
    m, c = work / f"{tag}.lt", work / f"{tag}.cache"
    tr, te = work / f"{tag}.train.json", work / f"{tag}.test.json"
    train = B.lomtree_exe() + ["train", "-r", "lomtree", "-k", str(args.k), "-b", str(args.bits),
                               str(args.train), "-f", str(m), "--quiet", "--max-internal-nodes", str(T),
                               "-l", str(lr), "--swap-resistance", str(rs), "--loss-function", loss,
                               "--passes", str(args.passes), "--early-terminate", str(args.passes),
                               "-c", str(c), "--report", str(tr)]
    pred = B.lomtree_exe() + ["predict", "-i", str(m), str(args.test), "-p", "/dev/null", "--quiet",
                              "--report", str(te)]
    out = {"T": T, "learning_rate": lr, "swap_resistance": rs, "loss": loss}
    for cmd in (train, pred):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            out["error"] = p.stderr.strip()[-300:]
            return out
    a, b = json.loads(tr.read_text()), json.loads(te.read_text())
    out.update(holdout_loss=a.get("holdout_loss"), test_error=b["average_loss"], passes=a.get("passes"))
    for f in (m, c, tr, te):
        f.unlink(missing_ok=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=Path, default=B.DATA_DIR / "sector.train.vw")
    ap.add_argument("--test", type=Path, default=B.DATA_DIR / "sector.test.vw")
    ap.add_argument("-k", type=int, default=105)
    ap.add_argument("-b", "--bits", type=int, default=24)
    ap.add_argument("--T", type=int, nargs="+", default=[1000, 4000, 16000, 65535])
    ap.add_argument("--lr", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    ap.add_argument("--rs", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--loss", nargs="+", default=["squared", "quantile"])
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=B.BENCH_DIR / "lomtree_tuning.md")
    args = ap.parse_args(argv)
    grid = list(itertools.product(args.T, args.lr, args.rs, args.loss))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda s: run_one(s, args, Path(tmp)), grid))
    ok = sorted((r for r in rows if "error" not in r), key=lambda r: (r["holdout_loss"], r["test_error"]))
    lines = [f"LOMtree on Sector, {len(grid)} settings, {args.passes} passes (best holdout pass kept), -b {args.bits}; "
             f"ranked by holdout loss (`python -m data_scripts.tune_lomtree`).", "",
             "| T | learning rate | swap resistance | loss | holdout loss | test error % |",
             "| ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in ok:
        lines.append(f"| {r['T']} | {r['learning_rate']:g} | {r['swap_resistance']} | {r['loss']} | "
                     f"{r['holdout_loss']:.4f} | {100 * r['test_error']:.2f} |")
    for r in rows:
        if "error" in r:
            lines.append(f"\nfailed: {r}")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
