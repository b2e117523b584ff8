"""Peak memory (max RSS) of ``lomtree train`` with 10^6 classes.

Usage::

    python -m data_scripts.scale_memory [-k 1000000] [-n 200000 20000] [-b 20]
        [--reductions lomtree filter rtree cpt] [--out-dir bench/scale] [--json out.json]

For each ``n`` a stream of ``n`` examples over ``k`` classes is generated once with
``data_scripts.synthetic`` (uniform classes: about ``k (1 - e^{-n/k})`` distinct labels are
seen), then every reduction trains on it in its own process (``lomtree train -r R -k K -b B
-f MODEL --quiet --report``); the peak resident set size of that process comes from
``os.wait4``. A baseline run (OAA-free: ``table`` on 1,000 lines, or ``lomtree -k 2``) gives the
fixed cost of the interpreter, numpy and numba; the table shows the growth above it, the
distinct labels seen, the tree size from ``lomtree inspect --json`` and the model-file size.

What it demonstrates: memory follows the nodes and labels actually used plus the ``2^b``
weight table, never ``k x k`` or ``k x 2^b`` (at k = 10^6 a dense k x 2^20 float32 table would
be 4 TB; a k x k bit matrix 125 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from data_scripts.common import REPO_ROOT

LOMTREE = [sys.executable, "-m", "lomtree_cli.cli"]


def run_measured(cmd) -> tuple[int, float, float, str]:
    """Run ``cmd``; returns (exit code, max RSS in MB, seconds, stderr)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(REPO_ROOT))
    err_chunks = []
    # read stderr before waiting (no deadlock), then reap with wait4 to get this child's rusage
    for chunk in iter(lambda: p.stderr.read(65536), b""):
        err_chunks.append(chunk)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_maxrss / 1024.0, time.time() - t0, b"".join(err_chunks).decode("utf-8", "replace")


def generate(path: Path, k: int, n: int, seed: int) -> None:
    if path.exists():
        return
    subprocess.run([sys.executable, "-m", "data_scripts.synthetic", "-k", str(k), "-n", str(n), "--seed", str(seed),
                    "--out", str(path)], check=True, cwd=str(REPO_ROOT))


def distinct_labels(path: Path) -> int:
    seen = set()
    with open(path, "rb") as f:
        for line in f:
            seen.add(line.split(b" ", 1)[0])
    return len(seen)


def inspect(model: Path) -> dict:
    r = subprocess.run(LOMTREE + ["inspect", str(model), "--json"], capture_output=True, text=True,
                       cwd=str(REPO_ROOT))
    if r.returncode != 0:
        return {}
    info = json.loads(r.stdout)
    keep = ("nodes", "n_nodes", "internal_nodes", "leaves", "n_leaves", "depth", "max_depth", "regressors",
            "labels_seen", "nonzero_weights")
    return {k: v for k, v in info.items() if k in keep}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", type=int, default=1_000_000)
    ap.add_argument("-n", type=int, nargs="+", default=[200_000])
    ap.add_argument("-b", "--bits", type=int, default=20)
    ap.add_argument("--reductions", nargs="+", default=["lomtree", "filter", "rtree", "cpt"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", default=str(REPO_ROOT / "bench" / "scale"))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    base_in = out / "baseline.vw"
    generate(base_in, 10, 1000, args.seed)
    rc, base_rss, _, err = run_measured(LOMTREE + ["train", "-r", "lomtree", "-k", "10", "-b", str(args.bits),
                                                  str(base_in), "--quiet"])
    if rc != 0:
        print(err, file=sys.stderr)
        return 1
    print(f"baseline (lomtree -k 10, 1000 lines, -b {args.bits}): max RSS {base_rss:.0f} MB", flush=True)
    rows = []
    for n in args.n:
        data = out / f"k{args.k}_n{n}_s{args.seed}.vw"
        generate(data, args.k, n, args.seed)
        used = distinct_labels(data)
        for red in args.reductions:
            model = out / f"{red}_k{args.k}_n{n}.lt"
            report = out / f"{red}_k{args.k}_n{n}.json"
            cmd = LOMTREE + ["train", "-r", red, "-b", str(args.bits), str(data), "-f", str(model), "--quiet",
                             "--report", str(report)]
            if red != "cpt" and red != "table":
                cmd[4:4] = ["-k", str(args.k)]
            rc, rss, secs, err = run_measured(cmd)
            row = {"reduction": red, "k": args.k, "n": n, "labels_seen": used, "bits": args.bits, "exit": rc,
                   "max_rss_mb": round(rss, 1), "above_baseline_mb": round(rss - base_rss, 1),
                   "seconds": round(secs, 1)}
            if rc == 0:
                row["model_mb"] = round(model.stat().st_size / 2**20, 2)
                row["average_loss"] = json.loads(report.read_text()).get("average_loss")
                row.update(inspect(model))
            else:
                row["error"] = err.strip().splitlines()[-1:] if err.strip() else []
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(f"{'reduction':10} {'n':>8} {'labels':>8} {'maxRSS MB':>10} {'+base MB':>9} {'model MB':>9} {'s':>7}")
    for r in rows:
        print(f"{r['reduction']:10} {r['n']:>8} {r['labels_seen']:>8} {r['max_rss_mb']:>10.0f} "
              f"{r['above_baseline_mb']:>9.0f} {r.get('model_mb', float('nan')):>9.2f} {r['seconds']:>7.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"baseline_mb": base_rss, "rows": rows}, f, indent=2)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
