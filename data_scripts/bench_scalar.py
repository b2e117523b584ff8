"""-r regression / -r binary against Vowpal Wabbit (``vowpalwabbit``, in-process) at the same options.

Tasks: two synthetic streams shaped like VW's own test files (``0001.dat``: sparse tf-idf text
features, 0/1 labels, squared loss; ``0002.dat``: a dozen real features and real labels near
0.5), and a real binary task, Sector (105 classes, ``../shared/datasets/sector``) split in two
halves (classes 1-52 against 53-105, labels -1/1) trained on its training file and tested on
its test file. For each task and option set: the progressive average loss of both (and Sector's
test error with ``-t``), the ratio lomtree / VW. Then the speed: CPU seconds per example of one
pass over a synthetic file of ``--speed-examples`` (10^6) examples, VW as
``vowpalwabbit.Workspace("-d FILE ...")`` in this process (``time.process_time``), lomtree as
``lomtree train FILE`` in a child (its CPU time, parser thread included).

    python -m data_scripts.bench_scalar [--data-dir DIR] [--speed-examples N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .common import DEFAULT_DATA_DIR, DEFAULT_OUT_DIR, children_cpu_seconds, open_text

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch", "train"]

#: (task, options) pairs compared; the options are VW's spellings, which lomtree takes as they are
OPTIONS = {
    "0001-like": ["", "--invariant", "--adaptive --invariant", "--loss_function classic",
                  "--loss_function quantile --quantile_tau 0.3", "--passes 3 -c --holdout_off"],
    "0002-like": ["", "--normalized --invariant", "--power_t 0.45", "--sgd -l 1",
                  "--loss_function poisson --link poisson"],
    "sector-halves": ["--binary --loss_function logistic", "--loss_function hinge --binary",
                      "--binary", "--binary --loss_function logistic --passes 3 -c --holdout_off"],
}


def write_0001_like(path: Path, n: int, seed: int = 1, vocab: int = 20000, length: int = 40) -> None:
    """Sparse text-like examples: ``length`` distinct words of a Zipf vocabulary, tf-idf-like
    values, a ``const`` feature; label 1 when a hidden linear score is positive (0 otherwise)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=vocab) * (rng.random(vocab) < 0.1)
    with open(path, "w") as f:
        for start in range(0, n, 10000):
            m = min(10000, n - start)
            ids = np.minimum(rng.zipf(1.3, size=(m, length)), vocab) - 1
            vals = rng.uniform(0.01, 0.3, size=(m, length))
            score = (w[ids] * vals).sum(axis=1) + 0.1 * rng.normal(size=m)
            lines = []
            for i in range(m):
                u, first = np.unique(ids[i], return_index=True)
                feats = " ".join(f"{a}:{v:.6e}" for a, v in zip(u.tolist(), vals[i, first].tolist()))
                lines.append(f"{int(score[i] > 0)} |features {feats} const:.01")
            f.write("\n".join(lines) + "\n")


def write_0002_like(path: Path, n: int, seed: int = 2) -> None:
    """Dense real features (VW's ``0002.dat``: namespaces T and f) and a real label near 0.5."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=12) * 0.05
    with open(path, "w") as f:
        for _ in range(n):
            x = rng.normal(size=12) * 0.1
            y = 0.5 + float(x @ w) + 0.005 * rng.normal()
            names = [f"t{i}" for i in range(6)] + [f"r{i}" for i in range(6)]
            feats = " ".join(f"{a}:{v:.6g}" for a, v in zip(names, x))
            f.write(f"{y:.6f} |T PFF |f {feats}\n")


def write_sector_halves(data_dir: Path, out_dir: Path) -> tuple[Path, Path] | None:
    """Sector's LIBSVM files as VW lines, labels 1 (classes 1-52) and -1 (53-105); None if absent."""
    out = []
    for name in ("sector.scale", "sector.t.scale"):
        src = next((p for p in (data_dir / "sector").glob(name + "*")), None)
        if src is None:
            return None
        dst = out_dir / (name.replace(".", "_") + "_halves.vw")
        if not dst.exists():
            with open_text(src) as f, open(dst, "w") as g:
                for line in f:
                    parts = line.split()
                    if not parts:
                        continue
                    lab = "1" if int(parts[0]) <= 52 else "-1"
                    g.write(lab + " | " + " ".join(parts[1:]) + "\n")
        out.append(dst)
    return out[0], out[1]


def vw_run(args: str) -> tuple[float | None, float]:
    """(average loss, CPU seconds) of VW in this process."""
    import vowpalwabbit

    t0 = time.process_time()
    ws = vowpalwabbit.Workspace(args, enable_logging=True)
    ws.finish()
    cpu = time.process_time() - t0
    m = re.search(r"average loss = ([-0-9.e+]+)", "\n".join(ws.get_log()))
    return (float(m.group(1)) if m else None), cpu


def lomtree_run(args: list) -> tuple[float | None, float]:
    """(average loss, CPU seconds) of ``lomtree train`` in a child process."""
    before = children_cpu_seconds()
    r = subprocess.run(LOMTREE + args, capture_output=True, text=True)
    cpu = children_cpu_seconds() - before
    if r.returncode != 0:
        raise SystemExit(f"lomtree {' '.join(args)}: {r.stderr.strip()}")
    m = re.search(r"average loss = ([-0-9.e+]+)", r.stderr)
    return (float(m.group(1)) if m else None), cpu


def _clean(path: Path) -> None:
    for p in (path, Path(str(path) + ".cache")):
        if p.exists():
            p.unlink()


def compare(task: str, train: Path, test: Path | None, opts: str, work: Path) -> dict:
    row = {"task": task, "options": opts}
    mv, ml = work / "vw.model", work / "lt.model"
    for p in (mv, ml, Path(str(train) + ".cache")):
        _clean(p)
    row["vw_loss"], _ = vw_run(f"-d {train} {opts} -f {mv}")  # VW's -c: TRAIN.cache
    row["lomtree_loss"], _ = lomtree_run([str(train), *opts.split(), "-f", str(ml)])
    row["ratio"] = row["lomtree_loss"] / row["vw_loss"] if row["vw_loss"] else None
    if test is not None:
        row["vw_test"], _ = vw_run(f"-t -i {mv} -d {test}")
        row["lomtree_test"], _ = lomtree_run(["-t", "-i", str(ml), str(test)])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR / "scalar")
    ap.add_argument("--speed-examples", type=int, default=1_000_000)
    ap.add_argument("--json", type=Path, default=Path("bench") / "scalar.json")
    args = ap.parse_args(argv)
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        print("bench_scalar: vowpalwabbit is not installed (make dev installs it); skipped", file=sys.stderr)
        return 0
    work = args.out_dir
    work.mkdir(parents=True, exist_ok=True)
    tasks = {}
    p1, p2 = work / "0001_like.vw", work / "0002_like.vw"
    if not p1.exists():
        write_0001_like(p1, 20000)
    if not p2.exists():
        write_0002_like(p2, 20000)
    tasks["0001-like"] = (p1, None)
    tasks["0002-like"] = (p2, None)
    sector = write_sector_halves(args.data_dir, work)
    if sector is not None:
        tasks["sector-halves"] = sector
    rows = []
    for task, (train, test) in tasks.items():
        for opts in OPTIONS[task]:
            row = compare(task, train, test, opts, work)
            rows.append(row)
            print(json.dumps(row), flush=True)
    big = work / "speed.vw"
    if not big.exists() or sum(1 for _ in open(big)) != args.speed_examples:
        write_0001_like(big, args.speed_examples, seed=7, length=20)
    _, vw_cpu = vw_run(f"-d {big} --quiet")
    _, lt_cpu = lomtree_run([str(big), "--quiet"])
    speed = {"examples": args.speed_examples, "vw_cpu_s": vw_cpu, "lomtree_cpu_s": lt_cpu,
             "vw_us_per_example": 1e6 * vw_cpu / args.speed_examples,
             "lomtree_us_per_example": 1e6 * lt_cpu / args.speed_examples, "ratio": lt_cpu / vw_cpu}
    print(json.dumps(speed), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"quality": rows, "speed": speed}, indent=2) + "\n")
    bad = [r for r in rows if r["ratio"] is not None and abs(r["ratio"] - 1) > 0.01]
    print(f"{len(rows) - len(bad)} of {len(rows)} within 1% of VW's average loss; speed ratio {speed['ratio']:.2f}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
