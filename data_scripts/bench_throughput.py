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
import os
import statistics
import subprocess
import sys
from pathlib import Path

from . import bench as B

#: case name -> (reduction, dataset config name for options, train file, test file (None: the
#: training file), times each file is repeated). Sector is small (6,412 / 3,207 lines), so it is
#: repeated 5 times for OAA: the steady-state rate of a 3,207-line file is the
#: difference of two noisy sub-second times.
CASES = {
    "sector_oaa_x5": ("oaa", "sector_oaa", "sector.train.vw", None, 5),
    "sector_lomtree_x5": ("lomtree", "sector_lomtree", "sector.train.vw", "sector.test.vw", 5),
    "sector_filter_x5": ("filter", "sector_filter", "sector.train.vw", "sector.test.vw", 5),
    "letter_filter_x5": ("filter", "letter_filter", "letter.train.vw", "letter.test.vw", 5),
    "kjv_lomtree": ("lomtree", "kjv_nextword_lomtree", "kjv_nextword.train.vw", "kjv_nextword.test.vw", 1),
    "kjv_filter": ("filter", "kjv_nextword_filter", "kjv_nextword.train.vw", "kjv_nextword.test.vw", 1),
}
HEAD = 10


def _median(ts: list[B.Timed]) -> float | None:
    ok = [t.seconds for t in ts if t.rc == 0]
    return statistics.median(ok) if ok else None


def _rates(n: int, whole: float | None, fixed: float | None) -> tuple[float | None, float | None]:
    r_whole = n / whole if whole else None
    r_steady = (n - HEAD) / (whole - fixed) if whole and fixed is not None and whole > fixed else None
    return r_whole, r_steady


def run_case(name: str, repeats: int, use_vw: bool, config_dir=B.CONFIG_DIR, daemon: bool = False) -> list[dict]:
    red, cfg_name, train_name, test_name, rep = CASES[name]
    exp = B.load_experiment(Path(config_dir) / f"{cfg_name}.toml")
    opts = dict(exp.variants["1pass"])
    opts["passes"] = 1
    train = B.DATA_DIR / train_name
    if not train.exists():
        B.log(f"  {name}: {train} missing (make data)")
        return []
    test = train if test_name is None else B.DATA_DIR / test_name
    if rep > 1:
        train = B.repeat_file(train, rep, B.RUNS_DIR / f"{train.stem}.x{rep}.vw")
        test = train if test_name is None else B.repeat_file(test, rep, B.RUNS_DIR / f"{test.stem}.x{rep}.vw")
    files = {"train": train, "predict": test}
    heads = {p: B.head_file(f, HEAD, B.RUNS_DIR / f"{f.stem}.head{HEAD}.vw") for p, f in files.items()}
    counts = {p: B.count_lines(f) for p, f in files.items()}
    m, hm = str(B.RUNS_DIR / f"tp_{name}.model"), str(B.RUNS_DIR / f"tp_{name}.head.model")
    vm, vhm = m + ".vw", hm + ".vw"
    rep_json = str(B.RUNS_DIR / f"tp_{name}.json")
    k, vw_red = exp.k, exp.vw
    cmds = {
        ("ours", "train"): B.lomtree_train_cmd(red, k, opts, str(train), m, rep_json, extra=exp.extra_args),
        ("ours", "train_head"): B.lomtree_train_cmd(red, k, opts, str(heads["train"]), hm, rep_json,
                                                     extra=exp.extra_args),
        ("ours", "predict"): B.lomtree_predict_cmd(m, str(test), rep_json),
        ("ours", "predict_head"): B.lomtree_predict_cmd(m, str(heads["predict"]), rep_json),
    }
    if use_vw and vw_red:
        cmds.update({
            ("vw", "train"): B.vw_train_cmd(vw_red, k, opts, str(train), vm, extra=exp.vw_args),
            ("vw", "train_head"): B.vw_train_cmd(vw_red, k, opts, str(heads["train"]), vhm, extra=exp.vw_args),
            ("vw", "predict"): B.vw_test_cmd(vm, str(test)),
            ("vw", "predict_head"): B.vw_test_cmd(vm, str(heads["predict"])),
            # VW's test as often run to evaluate: the loss only, no predictions written
            ("vw_nop", "predict"): B.vw_test_cmd(vm, str(test), None),
        })
    times: dict[tuple, list[B.Timed]] = {key: [] for key in cmds}
    order = ["train", "train_head", "predict", "predict_head"]
    for r in range(repeats):
        for what in order:
            for who in ("ours", "vw", "vw_nop"):
                if (who, what) in cmds:
                    t = B.run_timed(cmds[(who, what)])
                    if t.rc != 0:
                        B.log(f"    {who} {what} failed: {B._tail(t.stderr)}")
                    times[(who, what)].append(t)
    rows = []
    for part in ("train", "predict"):
        n = counts[part]
        row = {"case": name, "reduction": red, "vw_reduction": vw_red, "part": part,
               "file": files[part].name,
               "examples": n, "repeats": repeats, "bits": opts.get("bits")}
        for who in ("ours", "vw", "vw_nop"):
            whole = _median(times.get((who, part), []))
            fixed = _median(times.get((who, part + "_head"), []))
            rw, rs = _rates(n, whole, fixed)
            row[f"{who}_seconds"] = whole
            row[f"{who}_fixed_seconds"] = fixed
            row[f"{who}_whole_ex_s"] = rw
            row[f"{who}_steady_ex_s"] = rs
            row[f"{who}_all_seconds"] = [round(t.seconds, 3) for t in times.get((who, part), [])]
        row["ratio_whole"] = B._ratio(row["ours_whole_ex_s"], row["vw_whole_ex_s"])
        row["ratio_paired"] = paired_ratio(times.get(("ours", part), []), times.get(("vw", part), []))
        row["ratio_steady"] = B._ratio(row["ours_steady_ex_s"], row["vw_steady_ex_s"])
        if daemon and part == "predict" and os.path.exists(m):
            from .bench_daemon import daemon_rates

            try:
                row.update(daemon_rates(m, str(test), (1, 8), repeats))
            except (RuntimeError, OSError) as e:
                B.log(f"    daemon failed: {e}")
        if times.get(("vw_nop", part)):
            row["ratio_whole_vw_nop"] = B._ratio(row["ours_whole_ex_s"], row["vw_nop_whole_ex_s"])
            row["ratio_paired_vw_nop"] = paired_ratio(times.get(("ours", part), []), times[("vw_nop", part)])
        rows.append(row)
        B.log(f"  {name:16s} {part:7s} ours {row['ours_seconds']} vw {row['vw_seconds']} "
              f"ratio whole {row['ratio_whole']} paired {row['ratio_paired']} steady {row['ratio_steady']} "
              f"daemon 1/8 clients {row.get('daemon_1_ex_s')} / {row.get('daemon_8_ex_s')} ex/s")
    B._cleanup(m, hm, vm, vhm, rep_json)
    return rows


def paired_ratio(ours: list[B.Timed], vw: list[B.Timed]) -> float | None:
    """Median over the rounds of VW's time / ours in that round (the two ran back to back).

    The ratio of the two medians compares commands that ran minutes apart, and this VM's speed
    drifts within minutes (the same 0.2 s Letter prediction had medians of 0.21 and 0.83 s in
    sets of 7 runs half an hour apart, with 13-17% of the CPU stolen by the host in the slow one).
    Within a round both commands see the same machine, so a slow spell spoils that round's ratio
    only, where it can move both medians."""
    pairs = [v.seconds / o.seconds for o, v in zip(ours, vw) if o.rc == 0 and v.rc == 0 and o.seconds > 0]
    return statistics.median(pairs) if pairs else None


def case_repeats(name: str, cfg: dict) -> int:
    """Rounds for a case: ``short_repeats`` for the repeated small files (Sector, Letter: commands
    of 0.15-1.2 s whose times swing by +-20% on this VM, so a median of 3 can land on either
    side of VW's), ``repeats`` for the large ones."""
    repeats = int(cfg.get("repeats", 3))
    return int(cfg.get("short_repeats", repeats)) if CASES[name][4] > 1 else repeats


def run_throughput(cfg: dict, use_vw: bool) -> list[dict]:
    rows = []
    for name in cfg.get("cases", list(CASES)):
        rows += run_case(name, case_repeats(name, cfg), use_vw, daemon=cfg.get("daemon", True))
    return rows


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
