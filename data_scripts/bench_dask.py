"""Dask figures (a benchmark, not a test): Dask prediction and training against one process.

    python -m data_scripts.bench_dask --data bench/data --out OUT_DIR --json bench/dask_results.json

1. prediction: a Filter-tree model of KJV next word (-b 24), the test file x10, ``lomtree predict``
   (default threads, and --threads 1) against ``--dask local:1`` and ``--dask local:2``: wall time
   (cluster start-up included), examples/s, identical output bytes;
2. training with 2 local workers against one process at the same passes: Sector (oaa, libsvm) and
   KJV next word (filter), with the default syncs (--sync-first 100: intervals growing by
   --sync-growth in the first pass, then after each pass), after each pass only (--sync-first 0) and every N examples: test
   error, wall time;
3. ``--only shards``: error against shard count, N = 1..64 shards on ``--dask local:2 --shards N``
   (N machines simulated by N shards run two at a time, averaged by the same code as N workers),
   synced after every pass, 1 and 3 passes;
4. ``--only matrix``: every reduction ``train --dask`` supports (registry ``dask``) x {2 workers
   (``--dask local:2``), 4 (``--dask local:2 --shards 4``)} x {Sector, KJV book} x {1, 3 passes},
   default syncs, against one process at the same passes, ``-b 24``: test error and the points
   behind one process (``behind``; the target is <= 1). ``--reductions`` and ``--tasks`` re-run some
   cells and keep the other rows.

``--only`` runs some sections and keeps the others' results already in ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

LT = [sys.executable, "-m", "lomtree_cli.launch"]


def run(args) -> float:
    t = time.time()
    p = subprocess.run(LT + args, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"failed: lomtree {' '.join(args)}\n{p.stderr}")
    return time.time() - t


def test_error(model, test, out, fmt_args=()) -> float:
    rep = os.path.join(out, "test.json")
    run(["predict", "-i", model, test, "-p", "/dev/null", "--quiet", "--report", rep, *fmt_args])
    return json.load(open(rep))["average_loss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="bench/data")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "lomtree_dask"))
    ap.add_argument("--json", default="bench/dask_results.json")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--reductions", nargs="+", default=None, help="matrix: these reductions only")
    ap.add_argument("--tasks", nargs="+", default=None, help="matrix: these tasks only (sector, kjv_book)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {}
    if set(a.only) != set(SECTIONS) and os.path.exists(a.json):
        res = json.load(open(a.json))
    res["machine"] = f"{os.cpu_count()} CPUs"
    kjv_tr = os.path.join(a.data, "kjv_nextword.train.vw")
    kjv_te = os.path.join(a.data, "kjv_nextword.test.vw")
    tasks = [("sector", "oaa", "105", os.path.join(a.data, "sector.train.libsvm"),
              os.path.join(a.data, "sector.test.libsvm"), ["--format", "libsvm"], 1000),
             ("kjv_nextword", "filter", "5001", kjv_tr, kjv_te, [], 50000)]
    if "predict" in a.only:
        bench_predict(a, res, kjv_tr, kjv_te)
    if "train" in a.only:
        bench_train(a, res, tasks)
    if "shards" in a.only:
        bench_shards(a, res, tasks)
    if "matrix" in a.only:
        bench_matrix(a, res)


SECTIONS = ("predict", "train", "shards", "matrix")

#: the matrix's runs: name -> extra options (one process first: the others are measured against it)
MATRIX_RUNS = (("one process", []), ("--dask local:2", ["--dask", "local:2"]),
               ("--dask local:2 --shards 4", ["--dask", "local:2", "--shards", "4"]))


def bench_matrix(a, res):
    from lomtree_cli.reductions.registry import REGISTRY

    reds = [n for n, spec in REGISTRY.items() if spec.dask is not None]
    if a.reductions:
        reds = [n for n in reds if n in a.reductions]
    tasks = [("sector", "105", os.path.join(a.data, "sector.train.libsvm"),
              os.path.join(a.data, "sector.test.libsvm"), ["--format", "libsvm"]),
             ("kjv_book", "66", os.path.join(a.data, "kjv_book.train.vw"),
              os.path.join(a.data, "kjv_book.test.vw"), [])]
    if a.tasks:
        tasks = [t for t in tasks if t[0] in a.tasks]
    rows = res.get("matrix", [])
    for task, k, tr, te, fmt in tasks:
        for red in reds:
            for passes in (1, 3):
                one = None
                for name, extra in MATRIX_RUNS:
                    s, err = train_and_test(a, red, k, tr, te, fmt, passes, extra)
                    row = {"task": task, "reduction": red, "passes": passes, "run": name,
                           "seconds": s, "test_error": err}
                    if one is None:
                        one = err
                    else:
                        row["behind"] = round(err - one, 2)
                    rows = [r for r in rows if (r["task"], r["reduction"], r["passes"], r["run"])
                            != (task, red, passes, name)] + [row]
                    res["matrix"] = rows
                    print(row, flush=True)
                    save(a, res)


def save(a, res):
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)


def train_and_test(a, red, k, tr, te, fmt, passes, extra) -> tuple:
    """(wall seconds of ``lomtree train``, test error %)."""
    m = os.path.join(a.out, "m.lt")
    s = run(["train", "-r", red, "-k", k, "-b", "24", tr, "-f", m, "--quiet", "--passes", str(passes), *fmt, *extra])
    return round(s, 2), round(100 * test_error(m, te, a.out), 2)


def bench_shards(a, res, tasks):
    res["shards"] = []
    for task, red, k, tr, te, fmt, _ in tasks:
        for passes in (1, 3):
            for n in a.shards:
                extra = [] if n == 1 else ["--dask", "local:2", "--shards", str(n)]
                s, err = train_and_test(a, red, k, tr, te, fmt, passes, extra)
                res["shards"].append({"task": task, "reduction": red, "passes": passes, "shards": n,
                                      "run": "one process" if n == 1 else f"--dask local:2 --shards {n}",
                                      "seconds": s, "test_error": err})
                print(res["shards"][-1], flush=True)
                save(a, res)


def bench_predict(a, res, kjv_tr, kjv_te):
    res["predict"] = []
    ft = os.path.join(a.out, "ft.lt")
    run(["train", "-r", "filter", "-k", "5001", "-b", "24", kjv_tr, "-f", ft, "--quiet"])
    big = os.path.join(a.out, f"kjv_nextword.test.x{a.copies}.vw")
    with open(kjv_te, "rb") as f:
        raw = f.read()
    with open(big, "wb") as f:
        for _ in range(a.copies):
            f.write(raw)
    n = raw.count(b"\n") * a.copies
    ref = os.path.join(a.out, "plain.txt")
    for name, extra in (("plain (default threads)", []), ("plain --threads 1", ["--threads", "1"]),
                        ("--dask local:1", ["--dask", "local:1"]), ("--dask local:2", ["--dask", "local:2"])):
        out = ref if name.startswith("plain (") else os.path.join(a.out, "p.txt")
        s = run(["predict", "-i", ft, big, "-p", out, "--quiet", *extra])
        same = open(out, "rb").read() == open(ref, "rb").read()
        res["predict"].append({"run": name, "seconds": round(s, 2), "examples": n,
                               "examples_per_second": round(n / s), "identical_output": same})
        print(res["predict"][-1], flush=True)
    save(a, res)


def bench_train(a, res, tasks):
    res["train"] = []
    for task, red, k, tr, te, fmt, sync in tasks:
        for passes in (1, 3):
            for name, extra in (("one process", []), ("--dask local:2", ["--dask", "local:2"]),
                                ("--dask local:2 --sync-first 0", ["--dask", "local:2", "--sync-first", "0"]),
                                (f"--dask local:2 --sync-every {sync}",
                                 ["--dask", "local:2", "--sync-every", str(sync)])):
                s, err = train_and_test(a, red, k, tr, te, fmt, passes, extra)
                res["train"].append({"task": task, "reduction": red, "passes": passes, "run": name,
                                     "seconds": s, "test_error": err})
                print(res["train"][-1], flush=True)
    save(a, res)


if __name__ == "__main__":
    main()
