"""Test error and the three entropy criteria of LOMtree against its node budget.

    python -m data_scripts.entropy_curve [--task sector --task synth_k1000] [--out bench/entropy_curve]

The criteria paper's Appendix A experiment (Choromanska & Jain, Computation 2019): LOMtree grown
with an increasing number of internal nodes T (``--max-internal-nodes``: 1, 2, 4, ... and k - 1),
one pass over ``bench/data/TASK.train.vw``; for each T the test error on ``TASK.test.vw`` and the
Shannon, Gini and modified Gini (C = 1) entropies of the leaves (``lomtree inspect --json``, from
the leaves' class records of the training stream). Writes ``OUT.json`` (rows and, per task, the
Pearson correlation of each criterion with the test error) and, when matplotlib is installed,
``OUT.png``. Runs the CLI, one process at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "data")
K = {"sector": 105, "synth_k1000": 1000, "kjv_book": 66}
CRITERIA = ("shannon", "gini", "modified_gini")


def budgets(k: int) -> list:
    out, t = [], 1
    while t < k - 1:
        out.append(t)
        t *= 2
    return out + [k - 1]


def run(task: str, T: int, work: str) -> dict:
    lt = [sys.executable, "-m", "lomtree_cli.launch"]
    model, rep = os.path.join(work, f"{task}.{T}.lt"), os.path.join(work, f"{task}.{T}.json")
    subprocess.run(lt + ["train", "-r", "lomtree", "-k", str(K[task]), "--max-internal-nodes", str(T),
                         os.path.join(DATA, f"{task}.train.vw"), "-f", model, "--quiet"], check=True)
    subprocess.run(lt + ["predict", "-i", model, os.path.join(DATA, f"{task}.test.vw"), "-p", os.devnull, "--quiet",
                         "--report", rep], check=True)
    info = json.loads(subprocess.run(lt + ["inspect", model, "--json"], check=True, capture_output=True).stdout)
    row = {"task": task, "T": T, "test_error": json.load(open(rep))["average_loss"]}
    row.update(info["entropy"]["tree"])
    return row


def correlations(rows: list) -> dict:
    err = np.array([r["test_error"] for r in rows])
    out = {}
    for c in CRITERIA:
        v = np.array([r[c] for r in rows])
        out[c] = float(np.corrcoef(err, v)[0, 1]) if err.std() > 0 and v.std() > 0 else None
    return out


def plot(rows: list, path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        rs = [r for r in rows if r["task"] == task]
        x = [r["T"] for r in rs]
        ax.plot(x, [r["test_error"] for r in rs], "k-o", label="test error")
        for c in CRITERIA:
            v = np.array([r[c] for r in rs])
            ax.plot(x, v / v.max() if v.max() > 0 else v, "--", label=f"{c} (scaled)")
        ax.set_xscale("log")
        ax.set_xlabel("internal nodes T")
        ax.set_title(task)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", action="append", choices=sorted(K))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "entropy_curve"))
    ap.add_argument("--data-dir", default=DATA, help="the prepared files (default bench/data)")
    a = ap.parse_args(argv)
    globals()["DATA"] = a.data_dir
    tasks = a.task or ["sector", "synth_k1000"]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for task in tasks:
            for T in budgets(K[task]):
                rows.append(run(task, T, work))
                print(json.dumps(rows[-1]), flush=True)
    result = {"rows": rows, "correlation_with_test_error": {t: correlations([r for r in rows if r["task"] == t])
                                                            for t in tasks}}
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result["correlation_with_test_error"]))
    if plot(rows, a.out + ".png"):
        print(f"wrote {a.out}.png")


if __name__ == "__main__":
    main()
