"""Small shared helpers for tests: tiny generated datasets, batch builders, the command line in-process."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from lomtree_cli.batch import ExampleBatch


def separable_lines(k: int, n: int, seed: int = 0, noise_feats: int = 0, vocab: int = 50,
                    noise_value: float | None = None, noise_name: str = "n") -> list[str]:
    """VW lines where class c always has the feature `c<c>` (linearly separable), plus
    ``noise_feats`` features ``<noise_name><i>`` drawn from a ``vocab``-word vocabulary (with
    ``:noise_value`` when given)."""
    rng = np.random.default_rng(seed)
    suffix = "" if noise_value is None else f":{noise_value}"
    out = []
    for _ in range(n):
        c = int(rng.integers(1, k + 1))
        extra = " ".join(f"{noise_name}{int(rng.integers(0, vocab))}{suffix}" for _ in range(noise_feats))
        out.append(f"{c} | c{c} {extra}".rstrip())
    return out


def label_set_lines(n: int, seed: int = 0, k: int = 12, noise: int = 4, vocab: int = 40,
                    group: int = 0) -> list[str]:
    """VW lines of one to three labels of 1..k: a word ``w<l>`` per label (and ``g<l // group>``,
    shared by neighbouring labels, when ``group``), then ``noise`` words of a ``vocab``-word
    vocabulary."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        labs = sorted(set(rng.integers(1, k + 1, size=int(rng.integers(1, 4))).tolist()))
        words = [f"w{l}" for l in labs] + ([f"g{l // group}" for l in labs] if group else [])
        words += [f"n{x}" for x in rng.integers(0, vocab, noise)]
        out.append(",".join(map(str, labs)) + " | " + " ".join(words))
    return out


def make_batch(rows, labels, weights=None, bits=18) -> ExampleBatch:
    """Batch from rows of (index, value) pairs (indices masked to bits)."""
    mask = (1 << bits) - 1
    indptr = np.zeros(len(rows) + 1, np.int64)
    idx, val = [], []
    for i, r in enumerate(rows):
        for h, v in r:
            idx.append(h & mask)
            val.append(v)
        indptr[i + 1] = len(idx)
    n = len(rows)
    return ExampleBatch(
        labels=np.asarray(labels, np.int64),
        weights=np.ones(n) if weights is None else np.asarray(weights, np.float64),
        indptr=indptr,
        indices=np.asarray(idx, np.int64),
        values=np.asarray(val, np.float32),
        line_numbers=np.arange(1, n + 1, dtype=np.int64),
    )


def cli(*args):
    """``lomtree ARGS`` in this process: (exit code, stdout, stderr)."""
    from lomtree_cli.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args=[str(a) for a in args], prog_name="lomtree", standalone_mode=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def one_error(code, err, want_code):
    """The one ``error: ...`` line of a failed command, after checking its exit code."""
    assert code == want_code, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len([ln for ln in lines if ln.startswith("error: ")]) == 1, err
    assert lines[-1].startswith("error: "), err
    return lines[-1]
