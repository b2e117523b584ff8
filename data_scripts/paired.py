"""Paired comparison of two systems' predictions on one test file: is a difference of test error
larger than the test set's own noise?

Two systems that differ by a tenth of a point on 40,000 test examples may differ by chance: the
standard error of one error rate there is about 0.2 points. Compared on the same examples, most
of that noise cancels (both are right, or both wrong, on most of them), so this script resamples
the examples (a paired bootstrap: the same draw for both systems) and counts the examples only
one system gets right (McNemar's discordant pairs).

Input: the test file (the label is a line's first token, as in the benchmark's VW files: ``3 |a
x``), and two prediction files with one prediction a line, its first token the label (``lomtree
predict -p``, ``bench_anchors test --predictions``).

Command line::

    python -m data_scripts.paired TEST.vw A.pred B.pred [--names A B] [--draws 2000] [--seed 0]

prints the two errors, B - A in points with its 95% bootstrap interval, and the discordant pairs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def first_tokens(path: str) -> list[str]:
    """The first token of every line (an empty line gives '')."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split("|", 1)[0].split()
            out.append(head[0] if head else "")
    return out


def compare(truth: list[str], a: list[str], b: list[str], draws: int = 2000, seed: int = 0) -> dict:
    """Errors of a and b (%), b - a (points), its 95% paired-bootstrap interval and the
    discordant pairs (only a right, only b right)."""
    if not (len(truth) == len(a) == len(b)):
        raise ValueError(f"lengths differ: test {len(truth)}, a {len(a)}, b {len(b)}")
    t = np.asarray(truth, dtype=object)
    ea = (np.asarray(a, dtype=object) != t).astype(np.int8)
    eb = (np.asarray(b, dtype=object) != t).astype(np.int8)
    n = len(t)
    d = (eb - ea).astype(np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(draws)
    for i in range(draws):
        means[i] = d[rng.integers(0, n, n)].mean()
    lo, hi = np.percentile(means, [2.5, 97.5]) * 100
    return {"examples": n, "error_a": 100 * ea.mean(), "error_b": 100 * eb.mean(), "b_minus_a": 100 * d.mean(),
            "ci95": (float(lo), float(hi)), "only_a_right": int(np.sum((ea == 0) & (eb == 1))),
            "only_b_right": int(np.sum((ea == 1) & (eb == 0)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.paired", description=__doc__.split("\n")[0])
    ap.add_argument("test")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", nargs=2, default=["A", "B"])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        r = compare(first_tokens(args.test), first_tokens(args.a), first_tokens(args.b), args.draws, args.seed)
    except (OSError, ValueError) as exc:
        print(f"paired: {exc}", file=sys.stderr)
        return 1
    na, nb = args.names
    print(f"{r['examples']:,} examples: {na} {r['error_a']:.2f} %, {nb} {r['error_b']:.2f} %; "
          f"{nb} - {na} = {r['b_minus_a']:+.2f} points, 95% interval [{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}]; "
          f"only {na} right: {r['only_a_right']:,}, only {nb} right: {r['only_b_right']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
