"""Python API against the command line: per-example cost of ``learn_one``, ``predict_one`` and
``partial_fit`` next to ``lomtree train`` on the same examples.

Usage: ``python -m data_scripts.bench_api [--bits 24] [--classes 10] [--n 100000] [--reduction oaa,filter,cpt,plt]``

The examples: 10 features each (``f<j>`` for 10 of ``--features`` columns j, random values),
labels 1..K, drawn at random with a fixed seed. ``learn_one``/``predict_one``: feature dicts,
the best of ``--repeats`` timings of ``--one`` calls each, wall clock and this process's CPU time
(100 calls first load the kernels and meet the names; on a machine shared with other work the
CPU time is the steadier figure). A line gives the CPU time of ``sum(range(1000))``, a yardstick
of the machine's Python speed for comparing figures taken on different machines.
``partial_fit``: batches of 1,000 examples as a feature matrix (scipy CSR), timed from a model
already made (by one example: mtree fills its table then) to one ``predict`` after the last
batch (it makes a PLT learn what it buffers for its tree, as the CLI's run does). The command
line: ``lomtree train --format libsvm`` on the same matrix written as LIBSVM, its time measured
inside the process (the summary's ``seconds`` less that of ``lomtree train`` on an empty file,
which makes the model too), so the comparison is per example learned; best of ``--repeats``
for both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def examples(n: int, k: int, d: int, seed: int = 0):
    """(CSR matrix (n, d) with 10 non-zeros per row, labels 1..k, feature dicts of the first rows)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    y = rng.integers(1, k + 1, size=n)
    cols = np.sort(rng.choice(d, size=(n, 10)), axis=1)
    cols[:, 0] = (y - 1) % d  # one feature that tells the class
    cols = np.sort(cols, axis=1)
    vals = rng.random((n, 10)).astype(np.float32) + 0.5
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, 10 * n + 1, 10)), shape=(n, d))
    X.sum_duplicates()
    dicts = [{f"f{c}": float(v) for c, v in zip(cols[i], vals[i])} for i in range(min(n, 5000))]
    return X, y, dicts


def per_call(fn, args, calls: int, repeats: int) -> tuple:
    """(wall, CPU) seconds of one call of ``fn``: the best over ``repeats`` of the mean over
    ``calls`` calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for i in range(calls):
            fn(*args[i % len(args)])
        wall.append((time.perf_counter() - t) / calls)
        cpu.append((time.process_time() - c) / calls)
    return min(wall), min(cpu)


def cli_seconds(path: str, a, reduction: str) -> float:
    """Seconds ``lomtree train`` spends on ``path`` in its own process (the JSON summary's)."""
    with tempfile.TemporaryDirectory() as d:
        rep = os.path.join(d, "r.json")
        exe = os.path.join(os.path.dirname(sys.executable), "lomtree")
        cmd = [exe if os.path.exists(exe) else "lomtree", "train", "-r", reduction, "-k", str(a.classes), "-b", str(a.bits),
               "--format", "libsvm", "--quiet", "--report", rep, path]
        subprocess.run(cmd, check=True)
        with open(rep) as f:
            return float(json.load(f)["seconds"])


def one_reduction(a, reduction: str, X, y, dicts) -> dict:
    """The figures of one reduction (seconds per call or per example)."""
    from lomtree_cli import Classifier

    params = dict(reduction=reduction, classes=a.classes, bits=a.bits)
    clf = Classifier(**params)
    for i in range(100):  # kernels loaded, features seen
        clf.learn_one(dicts[i], int(y[i]))
        clf.predict_one(dicts[i])
    calls = min(a.one, len(dicts))
    pairs = [(dicts[i], int(y[i])) for i in range(calls)]
    learn = per_call(clf.learn_one, pairs, calls, a.repeats)
    pred = per_call(clf.predict_one, [(x,) for x, _ in pairs], calls, a.repeats)

    batches = [(X[i:i + 1000], y[i:i + 1000]) for i in range(0, a.n, 1000)]
    pf = []
    for _ in range(a.repeats):
        c = Classifier(**params)
        c.partial_fit(*batches[0])  # kernels loaded
        c = Classifier(**params)
        c.partial_fit(X[:1], y[:1])  # the model made (mtree fills its table) before the clock, as the CLI's
        t = time.perf_counter()
        for b in batches:
            c.partial_fit(*b)
        c.predict(X[:1])
        pf.append((time.perf_counter() - t) / a.n)

    from sklearn.datasets import dump_svmlight_file

    with tempfile.TemporaryDirectory() as d:
        data, empty = os.path.join(d, "x.libsvm"), os.path.join(d, "e.libsvm")
        dump_svmlight_file(X, y, data, zero_based=False)
        open(empty, "w").close()
        runs = [cli_seconds(data, a, reduction) - cli_seconds(empty, a, reduction) for _ in range(a.repeats)]
    return {"learn_one": learn, "predict_one": pred, "partial_fit": min(pf), "cli": min(runs) / a.n}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bits", type=int, default=24)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--reduction", default="oaa,filter,cpt,plt", help="reductions, comma-separated")
    ap.add_argument("--n", type=int, default=100000, help="examples for partial_fit and the CLI")
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--one", type=int, default=2000, help="calls per learn_one/predict_one timing")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)

    X, y, dicts = examples(a.n, a.classes, a.features)
    ref = per_call(lambda: sum(range(1000)), [()], 2000, a.repeats)[1]
    print(f"k {a.classes}, bits {a.bits}, 10 features per example; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; this machine's speed: sum(range(1000)) takes {ref * 1e6:.1f} us of CPU")
    print("reduction  learn_one us (CPU)  predict_one us (CPU)  partial_fit us/ex  CLI us/ex  partial_fit/CLI")
    for reduction in a.reduction.split(","):
        r = one_reduction(a, reduction, X, y, dicts)
        (lw, lc), (pw, pc) = r["learn_one"], r["predict_one"]
        print(f"{reduction:9s} {lw * 1e6:8.1f} ({lc * 1e6:5.1f}) {pw * 1e6:12.1f} ({pc * 1e6:5.1f}) "
              f"{r['partial_fit'] * 1e6:14.2f} {r['cli'] * 1e6:10.2f} {r['partial_fit'] / r['cli']:12.2f}", flush=True)


if __name__ == "__main__":
    main()
