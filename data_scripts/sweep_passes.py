"""Multi-pass settings sweep: one dataset, one reduction, a grid of update settings.

Every setting trains as the benchmark's tuned runs do (``--passes N -c CACHE``, every 10th example
held out, early termination, the best holdout pass kept, unless ``--holdout-off``), then predicts
the test file. Rows are ranked by the **holdout** loss (the selection figure); the test error is
printed beside it, never used to rank. With ``--holdout-off`` there is no holdout figure: the
rows are then ranked by the training run's progressive loss (``average_loss`` over all passes).

Usage::

    python -m data_scripts.sweep_passes DATASET -r plt [--lr 0.5 0.25] [--power-t 0.5 0.25]
        [--decay 1 0.8] [--loss squared hinge] [--l2 0] [--passes 10] [--holdout-off]
        [--extra "--arity 8"] [-j 2] [--out sweep.json]

DATASET is one of ``data_scripts.bench.DATASETS`` (files from ``make data``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import bench as B


def run_setting(ds: str, red: str, setting: dict, extra: list[str], passes: int, holdout_off: bool,
                bits: int, tag: str) -> dict:
    train, test, k = B.DATASETS[ds]
    opts = {"bits": bits, "passes": passes, "holdout_off": holdout_off}
    opts.update({key: v for key, v in setting.items() if key != "l2"})
    ex = list(extra) + (["--l2", str(setting["l2"])] if setting.get("l2") else [])
    B.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    rec = B.run_ours(f"sweep_{ds}_{red}_{tag}", red, k, opts, str(B.DATA_DIR / train), str(B.DATA_DIR / test),
                     extra=ex)
    rep = rec.get("train", {}).get("report", {})
    out = dict(setting, extra=" ".join(ex), status=rec.get("status"), test_error=rec.get("error"),
               holdout_loss=rec.get("holdout_loss"), best_pass=rep.get("best_pass"),
               passes_run=len(rep.get("holdout_losses") or []) or rep.get("passes"),
               progressive=rep.get("average_loss"), train_cpu=rec.get("train", {}).get("cpu_seconds"))
    if rec.get("status") != "ok":
        out["message"] = rec.get("message")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", choices=sorted(B.DATASETS))
    ap.add_argument("-r", "--reduction", default="plt")
    ap.add_argument("--lr", type=float, nargs="+", default=[0.5])
    ap.add_argument("--power-t", type=float, nargs="+", default=[0.5])
    ap.add_argument("--initial-t", type=float, nargs="+", default=[0.0])
    ap.add_argument("--decay", type=float, nargs="+", default=[1.0])
    ap.add_argument("--loss", nargs="+", default=["squared"])
    ap.add_argument("--l2", type=float, nargs="+", default=[0.0])
    ap.add_argument("--extra", nargs="+", default=[""], help="extra train flags, one string per grid value")
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--holdout-off", action="store_true")
    ap.add_argument("-b", "--bits", type=int, default=24)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--out", help="append the rows to this JSON-lines file")
    a = ap.parse_args(argv)
    grid = []
    for lr, pt, it, dec, loss, l2, ex in itertools.product(a.lr, a.power_t, a.initial_t, a.decay, a.loss, a.l2,
                                                           a.extra):
        s = {"learning_rate": lr, "power_t": pt, "decay_learning_rate": dec, "loss_function": loss}
        if it:
            s["initial_t"] = it
        if l2:
            s["l2"] = l2
        grid.append((s, shlex.split(ex)))

    def one(i_s):
        i, (s, ex) = i_s
        return run_setting(a.dataset, a.reduction, s, ex, a.passes, a.holdout_off, a.bits, str(i))

    with ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(one, enumerate(grid)))
    key = "progressive" if a.holdout_off else "holdout_loss"
    rows.sort(key=lambda r: (r.get(key) is None, r.get(key) or 0))
    print(f"{a.dataset} -r {a.reduction}, {a.passes} passes{' (holdout off)' if a.holdout_off else ''}; "
          f"ranked by {key}")
    print("lr    pt    dec   loss     l2       extra            | holdout  best/run | progr.  | test %  | cpu s")
    for r in rows:
        ho = f"{r['holdout_loss']:.4f}" if r.get("holdout_loss") is not None else "   -  "
        te = f"{100 * r['test_error']:.2f}" if r.get("test_error") is not None else "  -  "
        pr = f"{r['progressive']:.4f}" if r.get("progressive") is not None else "  -   "
        print(f"{r['learning_rate']:<5} {r['power_t']:<5} {r['decay_learning_rate']:<5} {r['loss_function']:<8} "
              f"{r.get('l2', 0):<8} {r['extra']:<16} | {ho}  {r.get('best_pass')}/{r.get('passes_run')} "
              f"| {pr} | {te:>6}  | {r.get('train_cpu') or 0:.1f}" + (f"  {r.get('message')}" if r.get("message") else ""))
    if a.out:
        with open(a.out, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, dataset=a.dataset, reduction=a.reduction, passes=a.passes,
                                        holdout_off=a.holdout_off)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
