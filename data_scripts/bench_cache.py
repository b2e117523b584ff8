"""Benchmark of the example cache and of multi-pass training.

Two parts, each optional:

``--reading`` (default on): on a VW text file (default ``bench/data/kjv_nextword.train.vw``; a
~700,000-line file of the same shape is generated when it is absent):
  * reading alone: iterate all batches parsed from text vs read from the cache (best of R);
  * writing: parse + write the cache vs parse alone;
  * whole passes with ``driver.train`` (``--pass-reductions``, default ``table`` — the label-frequency
    baseline, i.e. the pipeline without learning cost — and ``filter``; ``--passes 3
    --holdout-off``): wall time of passes 2–3 read from the cache vs re-parsed from the text.

``--sector DIR`` : multi-pass test error of OAA on Sector (``DIR/sector.train``, ``sector.test``
LIBSVM, ``sector.train.vw``/``sector.test.vw`` for VW) at the given passes with holdout choosing
the best pass, next to VW (``python -m vowpalwabbit``) with the same passes.

\b
Examples:
  python -m data_scripts.bench_cache
  python -m data_scripts.bench_cache --no-reading --sector DIR --passes 1,5,10,20
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TEXT = os.path.join(ROOT, "bench", "data", "kjv_nextword.train.vw")


def generate(path: str, n: int = 700_000, seed: int = 1):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(5000)]
    idx = rng.integers(0, 5000, size=(n, 2))
    with open(path, "w") as f:
        for (a, b) in idx.tolist():
            f.write(f"{(a * 7 + b) % 5000 + 1} |p1 {words[a]} |p2 {words[b]} |pair {words[b]}_{words[a]}\n")


def time_reading(path: str, repeats: int, bits: int) -> dict:
    from lomtree_cli.cache import ExampleCache
    from lomtree_cli.config import InputConfig
    from lomtree_cli.parsing import iter_batches

    cfg = InputConfig(bits=bits)
    n_ex = sum(len(b) for b in iter_batches([path], cfg))  # warm-up (JIT, page cache)
    with tempfile.TemporaryDirectory() as tmp:
        cpath = os.path.join(tmp, "bench.cache")
        wall = {"write": [], "parse": [], "read": []}
        cpu = {"write": [], "parse": [], "read": []}

        def clock(name, fn):
            t, c = time.perf_counter(), time.process_time()
            r = fn()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            return r

        for _ in range(repeats):
            if os.path.exists(cpath):
                os.unlink(cpath)
            c = ExampleCache.open(cpath, cfg, [path])

            def write():
                w = c.writer()
                for b in iter_batches([path], cfg):
                    w.add(b)
                w.close()

            clock("write", write)
            n1 = clock("parse", lambda: sum(len(b) for b in iter_batches([path], cfg)))
            n2 = clock("read", lambda: sum(len(b) for b in c.read()))
            assert n1 == n2 == n_ex
        size = os.path.getsize(cpath)
    best = {k: min(v) for k, v in wall.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    return {"file": path, "examples": n_ex, "text_bytes": os.path.getsize(path), "cache_bytes": size,
            "parse_s": best["parse"], "cache_read_s": best["read"], "parse_and_write_s": best["write"],
            "parse_cpu_s": best_cpu["parse"], "cache_read_cpu_s": best_cpu["read"],
            "parse_and_write_cpu_s": best_cpu["write"],
            "parse_ex_per_s": n_ex / best["parse"], "cache_ex_per_s": n_ex / best["read"],
            "read_ratio_wall": best["parse"] / best["read"], "read_ratio_cpu": best_cpu["parse"] / best_cpu["read"]}


def time_passes(path: str, reduction: str, k: int, bits: int, passes: int) -> dict:
    """Per-pass wall times of driver.train with the cache and with re-parsing the text."""
    from lomtree_cli import driver
    from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
    from lomtree_cli.reductions import get_reduction_class

    cls = get_reduction_class(reduction)
    out = {}
    orig_batches = driver._batches_for_pass
    orig_open = driver._open_cache
    for mode in ("cache", "text"):
        times = []

        def timed(*a, **kw):
            t = time.perf_counter()
            yield from orig_batches(*a, **kw)
            times.append(time.perf_counter() - t)

        driver._batches_for_pass = timed
        if mode == "text":
            driver._open_cache = lambda *a, **kw: None
        try:
            opts = driver.RunOptions(inputs=[path], passes=passes, holdout_off=True, quiet=True,
                                     err=io.StringIO())
            driver.train(InputConfig(bits=bits), LearnerConfig(loss=cls.default_loss),
                         ReductionConfig(name=reduction, k=k), opts)
        finally:
            driver._batches_for_pass = orig_batches
            driver._open_cache = orig_open
        out[mode] = times
    later_cache = float(np.mean(out["cache"][1:]))
    later_text = float(np.mean(out["text"][1:]))
    return {"reduction": reduction, "k": k, "bits": bits, "passes": passes,
            "pass_seconds_cache": out["cache"], "pass_seconds_text": out["text"],
            "later_pass_ratio": later_text / later_cache}


def sector(dirname: str, passes_list: list[int], bits: int) -> list[dict]:
    from lomtree_cli import driver
    from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig

    rows = []
    train, test = os.path.join(dirname, "sector.train"), os.path.join(dirname, "sector.test")
    with tempfile.TemporaryDirectory() as tmp:
        for p in passes_list:
            model = os.path.join(tmp, f"lt{p}.lt")
            icfg = InputConfig(format="libsvm", bits=bits)
            t = time.perf_counter()
            s = driver.train(icfg, LearnerConfig(), ReductionConfig(name="oaa", k=105),
                             driver.RunOptions(inputs=[train], passes=p, quiet=True, err=io.StringIO()),
                             final_model=model)
            t_train = time.perf_counter() - t
            r = driver.predict(model, driver.RunOptions(inputs=[test], quiet=True, err=io.StringIO()))
            row = {"passes": p, "lomtree_test_error": r["average_loss"], "lomtree_passes_used": s["passes"],
                   "lomtree_best_pass": s.get("best_pass"), "lomtree_holdout_loss": s["holdout_loss"],
                   "lomtree_train_s": t_train}
            vm = os.path.join(tmp, f"vw{p}.model")
            vc = os.path.join(tmp, f"vw{p}.cache")
            cmd = [sys.executable, "-m", "vowpalwabbit", "-d", train + ".vw", "--oaa", "105", "-b", str(bits),
                   "-f", vm, "--quiet"]
            if p > 1:
                cmd += ["--passes", str(p), "--cache_file", vc, "-k"]
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            row["vw_train_s"] = time.perf_counter() - t
            res = subprocess.run([sys.executable, "-m", "vowpalwabbit", "-t", "-i", vm, "-d", test + ".vw"],
                                 check=True, capture_output=True, text=True)
            m = re.search(r"average loss = ([0-9.]+)", res.stderr)
            row["vw_test_error"] = float(m.group(1)) if m else None
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default=DEFAULT_TEXT, help="VW text file for the reading benchmark")
    ap.add_argument("--no-reading", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--pass-reductions", default="table,filter",
                    help="reductions timed over whole passes (those not present are skipped)")
    ap.add_argument("--pass-k", type=int, default=5001)
    ap.add_argument("--sector", default=None, help="directory with sector.train/.test (+ .vw)")
    ap.add_argument("--passes", default="1,5,10,20")
    ap.add_argument("--sector-bits", type=int, default=24)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    res = {}
    if not a.no_reading:
        path = a.text
        ctx = tempfile.TemporaryDirectory() if not os.path.exists(path) else contextlib.nullcontext()
        with ctx as tmp:
            if tmp is not None:
                path = os.path.join(tmp, "generated.vw")
                generate(path)
            res["reading"] = time_reading(path, a.repeats, a.bits)
            print(json.dumps(res["reading"]), file=sys.stderr)
            from lomtree_cli.errors import ConfigError
            from lomtree_cli.reductions import get_reduction_class

            res["passes"] = []
            for red in a.pass_reductions.split(","):
                try:
                    get_reduction_class(red)
                except ConfigError:
                    continue
                row = time_passes(path, red, a.pass_k, a.bits, 3)
                res["passes"].append(row)
                print(json.dumps(row), file=sys.stderr)
    if a.sector:
        res["sector"] = sector(a.sector, [int(x) for x in a.passes.split(",")], a.sector_bits)
    text = json.dumps(res, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
