"""Throughput against Vowpal Wabbit, robust to a noisy machine.

For every case (a reduction, its VW counterpart, a train file and a test file) the four commands
``lomtree train``, ``vw train``, ``lomtree predict``, ``vw -t`` run ``repeats`` times, ours and VW
alternating, and the **median** wall time of each is kept. Each command also runs on the first
10 lines of its file (same model options; predict with the full model), which measures the fixed
cost of a command: interpreter, imports, model load and save. Two rates per command:

* **whole command**: examples / median wall time, start-up included (what a user waits for);
* **steady state**: (examples - 10) / (median wall - median 10-line wall): the rate at which a
  command goes through examples once it runs; start-up removed for both programs alike.

The ratios are ours / VW (> 1: lomtree is faster). Both prediction commands write their predictions
(to /dev/null: ``-p``); VW's test also runs a fourth time in each round without ``-p`` (computing the
loss only, the cheapest way VW evaluates a model), reported as ``ratio_whole_vw_nop`` /
``ratio_paired_vw_nop``. On small files (Sector: 6,412 training and
3,207 test lines; here repeated 5 times) the whole-command ratio is bounded by start-up: with the
ahead-of-time kernels (``make aot``) a lomtree command spends about 0.2 s (Python, numpy, click,
the model file) before it reads a line, 0.5-0.8 s when the kernels come from numba's cache; VW
starts in about 0.1-0.15 s. So each predict row also has the rate **through the prediction
daemon** (``lomtree predict --daemon`` on the case's model, started once; the test file sent by 1
and by 8 concurrent clients: ``daemon_1_ex_s``, ``daemon_8_ex_s``; ``data_scripts.bench_daemon``).
``--no-daemon`` leaves it out.

Usage::

    python -m data_scripts.bench_throughput [--repeats 3] [--short-repeats 7] [--cases sector_oaa_x5 ...]
        [--out bench/throughput.json]

``make bench`` runs it through ``data_scripts.bench`` (``[full.throughput]`` in configs/suite.toml).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import bench as B
# the runner lives in bench (which `make bench` calls); this module is its command line
from .bench import CASES, HEAD, case_repeats, paired_ratio, run_case, run_throughput  # noqa: F401


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--short-repeats", type=int, default=None,
                    help="rounds for the repeated small files (Sector, Letter); default: --repeats")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--no-vw", action="store_true")
    ap.add_argument("--no-daemon", action="store_true", help="no predictions through lomtree predict --daemon")
    ap.add_argument("--out", default=str(B.BENCH_DIR / "throughput.json"))
    args = ap.parse_args(argv)
    cfg = {"cases": args.cases, "repeats": args.repeats, "daemon": not args.no_daemon}
    if args.short_repeats is not None:
        cfg["short_repeats"] = args.short_repeats
    rows = run_throughput(cfg,
                          not args.no_vw and B.have_vw())
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    from .bench_report import throughput_table

    print(throughput_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
