"""Parser throughput: ``iter_batches`` over a generated KJV-like VW file and over LIBSVM sector.

Usage: ``python -m data_scripts.bench_parse [--lines 700000] [--sector PATH]``

The VW file resembles the KJV next-word task: ``label |p1 w1 |p2 w2 |pair w2_w1``. The first
pass warms the numba cache (and the OS file cache); the best of 3 timed passes is reported.
"""

from __future__ import annotations

import argparse
import bz2
import os
import tempfile
import time

import numpy as np

from data_scripts.common import DEFAULT_DATA_DIR
from lomtree_cli.config import InputConfig
from lomtree_cli.parsing import iter_batches, parse_bytes

SECTOR = os.path.join(DEFAULT_DATA_DIR, "sector", "sector.scale.bz2")


def make_vw(path: str, n_lines: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12000)]
    vocab[:8] = ["and", "said", "the", "of", "unto", "lord", "he", "shall"]
    # Zipf-like word draws
    ranks = np.minimum(rng.zipf(1.3, size=(n_lines + 2,)), len(vocab)) - 1
    labels = rng.integers(1, 12001, size=n_lines)
    with open(path, "w") as f:
        for i in range(n_lines):
            w1, w2 = vocab[ranks[i]], vocab[ranks[i + 1]]
            f.write(f"{labels[i]} |p1 {w1} |p2 {w2} |pair {w2}_{w1}\n")


def time_iter(paths, cfg, repeats=3):
    best, n, nnz = float("inf"), 0, 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = nnz = 0
        for b in iter_batches(paths, cfg):
            n += len(b)
            nnz += b.indices.shape[0]
        best = min(best, time.perf_counter() - t0)
    return best, n, nnz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=700_000)
    ap.add_argument("--sector", default=SECTOR)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kjv_like.vw")
        make_vw(path, args.lines)
        size = os.path.getsize(path)
        cfg = InputConfig()
        time_iter([path], cfg, repeats=1)  # warm the numba cache
        t, n, nnz = time_iter([path], cfg)
        print(f"VW  {n} lines, {size / 1e6:.1f} MB, {nnz} features: {t:.3f} s, "
              f"{n / t / 1e6:.2f} M lines/s, {size / t / 1e6:.0f} MB/s")

    if os.path.exists(args.sector):
        cfg = InputConfig(format="libsvm")
        parse_bytes(b"1 1:1\n", cfg)  # warm the numba cache
        t, n, nnz = time_iter([args.sector], cfg, repeats=1)
        t0 = time.perf_counter()
        raw = bz2.open(args.sector, "rb").read()
        t_bz = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            plain = os.path.join(d, "sector.scale")
            with open(plain, "wb") as f:
                f.write(raw)
            t2, _, _ = time_iter([plain], cfg)
        print(f"LIBSVM sector.scale.bz2: {n} lines, {nnz} features, {len(raw) / 1e6:.1f} MB text: "
              f"{t:.3f} s total ({n / t:.0f} lines/s); bz2 decompression alone {t_bz:.3f} s; "
              f"same file uncompressed {t2:.3f} s ({n / t2:.0f} lines/s, {len(raw) / t2 / 1e6:.0f} MB/s)")


if __name__ == "__main__":
    main()
