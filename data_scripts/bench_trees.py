"""Benchmark the tree reductions against OAA and VW: test error and time per example.

For every dataset, trains each lomtree reduction for one pass (``lomtree train -r R -k K -b B``),
tests it (``lomtree predict``), and does the same with Vowpal Wabbit's ``--ect K`` (the Filter
tree's reference; ``python -m vowpalwabbit``). Every command is timed whole (wall clock, start-up
included), one after the other, so the throughput ratio compares runs made on the same machine
state. Both programs read the same VW-format files.

Usage::

    python -m data_scripts.bench_trees [--datasets sector letter kjv_nextword]
        [--reductions filter rtree oaa lomtree] [--bits 24] [--workdir DIR] [--out r.json]

Datasets are ``bench/data/<name>.{train,test}.vw`` (written by ``data_scripts.prepare_all``);
``k`` is the largest label of the train and test files. OAA is skipped when ``k > --oaa-max-k``
(default 1000; its cost is O(k) per example).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOMTREE = [PY, "-m", "lomtree_cli.cli"] if not (Path(PY).parent / "lomtree").exists() else [str(Path(PY).parent / "lomtree")]


def labels_of(path: Path) -> list[int]:
    out = []
    with open(path, "rb") as f:
        for line in f:
            tok = line.split(None, 1)
            if tok and tok[0] not in (b"|",):
                out.append(int(float(tok[0])))
    return out


def run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return dt


def bench_lomtree(red, k, train, test, bits, work: Path, extra=()) -> dict:
    model = work / f"{train.stem}.{red}.lt"
    rep_tr, rep_te = work / f"{train.stem}.{red}.train.json", work / f"{train.stem}.{red}.test.json"
    cmd_tr = LOMTREE + ["train", "-r", red, "-k", str(k), "-b", str(bits), str(train), "-f", str(model),
                        "--quiet", "--report", str(rep_tr), *extra]
    cmd_te = LOMTREE + ["predict", "-i", str(model), str(test), "-p", "/dev/null", "--quiet", "--report", str(rep_te)]
    t_tr = run(cmd_tr)
    t_te = run(cmd_te)
    rtr, rte = json.loads(rep_tr.read_text()), json.loads(rep_te.read_text())
    return {"program": "lomtree", "reduction": red, "train_cmd": " ".join(cmd_tr), "test_cmd": " ".join(cmd_te),
            "train_seconds": t_tr, "test_seconds": t_te, "n_train": rtr["examples"], "n_test": rte["examples"],
            "progressive_error": rtr["average_loss"], "test_error": rte["average_loss"]}


def bench_vw(k, train, test, bits, work: Path) -> dict:
    model = work / f"{train.stem}.vw_ect.model"
    preds = work / f"{train.stem}.vw_ect.pred"
    cmd_tr = [PY, "-m", "vowpalwabbit", "-d", str(train), "--ect", str(k), "-b", str(bits), "-f", str(model), "--quiet"]
    cmd_te = [PY, "-m", "vowpalwabbit", "-d", str(test), "-t", "-i", str(model), "-p", str(preds), "--quiet"]
    t_tr = run(cmd_tr)
    t_te = run(cmd_te)
    truth = labels_of(test)
    got = [int(float(line.split()[0])) for line in preds.read_text().splitlines() if line.strip()]
    if len(got) != len(truth):
        raise RuntimeError(f"VW wrote {len(got)} predictions for {len(truth)} examples")
    err = sum(a != b for a, b in zip(got, truth)) / len(truth)
    return {"program": "vw", "reduction": "ect", "train_cmd": " ".join(cmd_tr), "test_cmd": " ".join(cmd_te),
            "train_seconds": t_tr, "test_seconds": t_te, "n_train": len(labels_of(train)), "n_test": len(truth),
            "test_error": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["sector", "letter", "kjv_nextword"])
    ap.add_argument("--reductions", nargs="+", default=["filter", "rtree", "oaa", "lomtree"])
    ap.add_argument("--bits", type=int, default=24)
    ap.add_argument("--data-dir", default=str(ROOT / "bench" / "data"))
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bench_trees"))
    ap.add_argument("--oaa-max-k", type=int, default=1000)
    ap.add_argument("--no-vw", action="store_true")
    ap.add_argument("--out", default=None, help="write all rows as JSON here")
    a = ap.parse_args(argv)
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.datasets:
        train = Path(a.data_dir) / f"{name}.train.vw"
        test = Path(a.data_dir) / f"{name}.test.vw"
        k = max(max(labels_of(train)), max(labels_of(test)))
        runs = []
        if not a.no_vw:
            runs.append(lambda: bench_vw(k, train, test, a.bits, work))
        for red in a.reductions:
            if red == "oaa" and k > a.oaa_max_k:
                continue
            runs.append(lambda red=red: bench_lomtree(red, k, train, test, a.bits, work))
        for fn in runs:
            try:
                row = fn()
            except RuntimeError as e:
                print(f"{name}: {e}", file=sys.stderr)
                continue
            row.update(dataset=name, k=k, bits=a.bits)
            row["train_us_per_example"] = 1e6 * row["train_seconds"] / max(1, row["n_train"])
            row["test_us_per_example"] = 1e6 * row["test_seconds"] / max(1, row["n_test"])
            rows.append(row)
            print(f"{name:14s} k={k:<5d} {row['program']:7s} {row['reduction']:8s} test_err={row['test_error']:.4f} "
                  f"train={row['train_seconds']:.2f}s ({row['train_us_per_example']:.1f} us/ex) "
                  f"test={row['test_seconds']:.2f}s ({row['test_us_per_example']:.1f} us/ex)", flush=True)
        vw = [r for r in rows if r["dataset"] == name and r["program"] == "vw"]
        ft = [r for r in rows if r["dataset"] == name and r["reduction"] == "filter"]
        if vw and ft:
            print(f"{name}: filter/vw-ect train throughput ratio = {vw[0]['train_seconds'] / ft[0]['train_seconds']:.2f}, "
                  f"test ratio = {vw[0]['test_seconds'] / ft[0]['test_seconds']:.2f}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
