"""``-r mtree`` against fastText on the same files, same dim and epochs.

    python -m data_scripts.mtree_vs_fasttext --task kjv_book --dim 50 --epochs 5 [--mtree-args "..."]
    python -m data_scripts.mtree_vs_fasttext --task kjv_book --only fasttext --loss hs

The VW files of ``bench/data`` are converted once to fastText's format (``__label__Y`` then one
word per feature, ``namespace^token``; feature values are dropped: fastText has none). fastText
runs in this process (``fasttext.train_supervised``, ``thread=1``, ``wordNgrams=1``, ``minCount=1``,
``bucket=0``); its test accuracy and perplexity come from ``model.f.predict`` (its ``predict``
fails under numpy 2) with k = all labels, so P(true label) is exact. mtree runs as the CLI
(``lomtree train --passes E --holdout-off``, then ``lomtree predict --report``). One JSON line per
system on stdout: accuracy, perplexity, training seconds (wall and CPU: the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

from .common import children_cpu_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "data")
TASKS = {"kjv_book": 66, "kjv_nextword": 5001, "sector": 105, "synth_k1000": 1000}


def to_fasttext(src: str, dst: str) -> None:
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        return
    with open(src) as f, open(dst + ".tmp", "w") as out:
        for line in f:
            head, _, rest = line.partition("|")
            label = head.split()[0]
            words = []
            ns = ""
            for part in ("|" + rest).split("|")[1:]:
                toks = part.split()
                if part[:1] not in (" ", "\t", "") and toks:
                    ns, toks = toks[0], toks[1:]
                else:
                    ns = ""
                words += [f"{ns}^{t.split(':')[0]}" for t in toks]
            out.write(f"__label__{label} " + " ".join(words) + "\n")
    os.replace(dst + ".tmp", dst)


def run_fasttext(task: str, dim: int, epochs: int, loss: str, lr: float, workdir: str) -> dict:
    import fasttext

    tr, te = (os.path.join(workdir, f"{task}.{s}.ft") for s in ("train", "test"))
    to_fasttext(os.path.join(DATA, f"{task}.train.vw"), tr)
    to_fasttext(os.path.join(DATA, f"{task}.test.vw"), te)
    t0, c0 = time.time(), time.process_time()
    model = fasttext.train_supervised(tr, dim=dim, epoch=epochs, loss=loss, lr=lr, thread=1, wordNgrams=1,
                                      minCount=1, bucket=0, verbose=0)
    train_s, train_cpu = time.time() - t0, time.process_time() - c0
    n = correct = n_ppl = 0
    nll = 0.0
    every = ppl_every(task)
    t0 = time.time()
    with open(te) as f:
        for i, line in enumerate(f):
            label, _, text = line.rstrip("\n").partition(" ")
            best = model.f.predict(text + "\n", 1, 0.0, "strict")
            n += 1
            correct += bool(best) and best[0][1] == label
            if i % every == 0:  # P(true label): fastText only gives it by listing every label (slow)
                probs = {lab: p for p, lab in model.f.predict(text + "\n", -1, 0.0, "strict")}
                nll -= math.log(max(probs.get(label, 0.0), 1e-10))
                n_ppl += 1
    return {"system": f"fasttext-{loss}", "task": task, "dim": dim, "epochs": epochs, "lr": lr,
            "accuracy": correct / n, "perplexity": math.exp(nll / n_ppl), "perplexity_lines": f"every {every}",
            "train_seconds": round(train_s, 2), "train_cpu_seconds": round(train_cpu, 2),
            "test_seconds": round(time.time() - t0, 2)}


def ppl_every(task: str) -> int:
    """Perplexity on every n-th test line (fastText lists all k labels per line to give it)."""
    return 10 if TASKS[task] > 1000 else 1


def subsample(src: str, dst: str, every: int) -> str:
    with open(src) as f, open(dst, "w") as out:
        for i, line in enumerate(f):
            if i % every == 0:
                out.write(line)
    return dst


def run_mtree(task: str, dim: int, epochs: int, extra: str, workdir: str) -> dict:
    k = TASKS[task]
    model = os.path.join(workdir, f"{task}.mtree.{os.getpid()}.lt")
    rep = os.path.join(workdir, f"{task}.mtree.{os.getpid()}.json")
    lt = [sys.executable, "-m", "lomtree_cli.launch"]
    cmd = lt + ["train", "-r", "mtree", "-k", str(k), "--dim", str(dim), "--passes", str(epochs), "--holdout-off",
                os.path.join(DATA, f"{task}.train.vw"), "-f", model, "--quiet"] + shlex.split(extra)
    t0, c0 = time.time(), children_cpu_seconds()
    subprocess.run(cmd, check=True)
    train_s, train_cpu = time.time() - t0, children_cpu_seconds() - c0
    t0 = time.time()
    subprocess.run(lt + ["predict", "-i", model, os.path.join(DATA, f"{task}.test.vw"), "-p", os.devnull,
                         "--quiet", "--report", rep], check=True)
    test_s = time.time() - t0
    r = json.load(open(rep))
    every = ppl_every(task)
    ppl = r["perplexity"]
    if every > 1:  # the perplexity on the lines fastText's is measured on
        sub = subsample(os.path.join(DATA, f"{task}.test.vw"), os.path.join(workdir, f"{task}.sub.{os.getpid()}.vw"),
                        every)
        subprocess.run(lt + ["predict", "-i", model, sub, "-p", os.devnull, "--quiet", "--report", rep], check=True)
        ppl = json.load(open(rep))["perplexity"]
    return {"system": "mtree", "task": task, "dim": dim, "epochs": epochs, "args": extra,
            "accuracy": 1.0 - r["average_zero_one_loss"], "perplexity": ppl, "perplexity_lines": f"every {every}",
            "perplexity_all_lines": r["perplexity"], "train_seconds": round(train_s, 2),
            "train_cpu_seconds": round(train_cpu, 2),
            "test_seconds": round(test_s, 2)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=sorted(TASKS), required=True)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--only", choices=["fasttext", "mtree"])
    ap.add_argument("--loss", default="hs", help="fastText loss (hs, softmax)")
    ap.add_argument("--lr", type=float, default=0.1, help="fastText learning rate")
    ap.add_argument("--mtree-args", default="", help="extra lomtree train options")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mtree-bench"))
    ap.add_argument("--data-dir", default=DATA, help="the prepared files (default bench/data)")
    a = ap.parse_args(argv)
    globals()["DATA"] = a.data_dir
    os.makedirs(a.workdir, exist_ok=True)
    if a.only != "mtree":
        print(json.dumps(run_fasttext(a.task, a.dim, a.epochs, a.loss, a.lr, a.workdir)), flush=True)
    if a.only != "fasttext":
        print(json.dumps(run_mtree(a.task, a.dim, a.epochs, a.mtree_args, a.workdir)), flush=True)


if __name__ == "__main__":
    main()
