"""Benchmark: lomtree ``-r lomtree`` against VW ``--log_multi`` on the same files.

Both sides run as whole commands (start-up, parsing, model writing included), one after the
other on the same machine; for each we record wall seconds, CPU seconds (user + sys of the
child) and the test error. lomtree reads ``--format libsvm|vw``; VW reads the VW-format twin.

Example::

    python -m data_scripts.bench_lomtree --name sector -k 105 \\
        --train bench/data/sector.train.libsvm --test bench/data/sector.test.libsvm --format libsvm \\
        --vw-train bench/data/sector.train.vw --vw-test bench/data/sector.test.vw -b 24 [--passes 10]
        [--lt-args "--max-internal-nodes 1000 -l 1"] [--no-vw] [--repeat 3] [--out bench/lomtree.json]

With ``--passes > 1`` both sides use a cache and ``--holdout_off`` (VW: ``-c --holdout_off``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from .common import children_cpu_seconds

PY = sys.executable


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = children_cpu_seconds()
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    cpu = children_cpu_seconds() - before
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stderr[-2000:]}")
    return wall, cpu, proc


def timed_pair(train_cmd: list[str], test_cmd: list[str], repeat: int) -> dict:
    """Run train then test ``repeat`` times; the commands and their wall/CPU times."""
    res = {"train_cmd": shlex.join(train_cmd), "test_cmd": shlex.join(test_cmd), "train_wall": [],
           "train_cpu": [], "test_wall": [], "test_cpu": []}
    for _ in range(repeat):
        for phase, cmd in (("train", train_cmd), ("test", test_cmd)):
            w, c, _ = timed(cmd)
            res[f"{phase}_wall"].append(w)
            res[f"{phase}_cpu"].append(c)
    return res


def labels_of(path: str) -> list[int]:
    out = []
    with open(path, "rb") as f:
        for line in f:
            head = line.split(b"|", 1)[0].split()
            out.append(int(head[0]) if head else 0)
    return out


def count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def run_lomtree(a, tmp: str) -> dict:
    model = os.path.join(tmp, "lt.model")
    rep_tr, rep_te = os.path.join(tmp, "tr.json"), os.path.join(tmp, "te.json")
    extra = shlex.split(a.lt_args)
    tr = [PY, "-m", "lomtree_cli.cli", "train", "--format", a.format, a.train, "-r", "lomtree", "-k", str(a.k),
          "-b", str(a.bits), "-f", model, "--quiet", "--report", rep_tr, *extra]
    if a.passes > 1:
        tr += ["--passes", str(a.passes), "-c", os.path.join(tmp, "lt.cache"), "--holdout-off"]
    te = [PY, "-m", "lomtree_cli.cli", "predict", "-i", model, a.test, "-p", os.devnull, "--quiet",
          "--report", rep_te]
    res = timed_pair(tr, te, a.repeat)
    rt = json.load(open(rep_te))
    res["test_error"] = rt["average_loss"]
    train_report = json.load(open(rep_tr))
    res["train_progressive_loss"] = train_report["average_loss"]
    res["swaps"] = train_report.get("number_of_swaps")
    return res


def run_vw(a, tmp: str) -> dict:
    model, preds = os.path.join(tmp, "vw.model"), os.path.join(tmp, "vw.pred")
    tr = [PY, "-m", "vowpalwabbit", "-d", a.vw_train, "--log_multi", str(a.k), "-b", str(a.bits), "-f", model,
          "--quiet", *shlex.split(a.vw_args)]
    if a.passes > 1:
        tr += ["--passes", str(a.passes), "-c", "--cache_file", os.path.join(tmp, "vw.cache"), "--holdout_off",
               "-k"]
    te = [PY, "-m", "vowpalwabbit", "-t", "-i", model, "-d", a.vw_test, "-p", preds, "--quiet"]
    res = timed_pair(tr, te, a.repeat)
    gold = labels_of(a.vw_test)
    got = [int(float(line.split()[0])) for line in open(preds) if line.strip()]
    res["test_error"] = sum(g != p for g, p in zip(gold, got)) / len(gold)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("-k", type=int, required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--format", default="vw", choices=["vw", "libsvm"])
    ap.add_argument("--vw-train")
    ap.add_argument("--vw-test")
    ap.add_argument("-b", "--bits", type=int, default=24)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--lt-args", default="")
    ap.add_argument("--vw-args", default="")
    ap.add_argument("--no-vw", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    a.vw_train = a.vw_train or a.train
    a.vw_test = a.vw_test or a.test
    n_train, n_test = count_lines(a.train), count_lines(a.test)
    out = {"name": a.name, "k": a.k, "bits": a.bits, "passes": a.passes, "n_train": n_train, "n_test": n_test,
           "lt_args": a.lt_args}
    with tempfile.TemporaryDirectory(prefix="bench_lt_") as tmp:
        out["lomtree"] = run_lomtree(a, tmp)
        if not a.no_vw:
            out["vw"] = run_vw(a, tmp)
    for side in ("lomtree", "vw"):
        if side in out:
            r = out[side]
            r["train_ex_per_s"] = n_train * a.passes / min(r["train_wall"])
            r["test_ex_per_s"] = n_test / min(r["test_wall"])
    if "vw" in out:
        for ph in ("train", "test"):
            out[f"{ph}_speed_ratio_wall"] = min(out["vw"][f"{ph}_wall"]) / min(out["lomtree"][f"{ph}_wall"])
            out[f"{ph}_speed_ratio_cpu"] = min(out["vw"][f"{ph}_cpu"]) / min(out["lomtree"][f"{ph}_cpu"])
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
