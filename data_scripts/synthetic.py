"""Synthetic multiclass streams in VW text, from 10^2 to 10^6 classes, with tunable difficulty.

Model
    Every class ``c`` in ``1..k`` has a fixed *prototype*: ``proto_features`` (default 8) feature
    ids drawn from a feature space of ``vocab`` (default 1,000,000) ids.  Prototype ids are a
    hash of ``(seed, c, j)`` (``splitmix64`` over numpy ``uint64`` arrays), so nothing of size
    ``k x proto_features`` is ever stored: memory does not grow with ``k`` (except the ``k``
    float64 cumulative weights needed for Zipf sampling, 8 MB at ``k = 10^6``).
    An example of class ``c`` keeps each prototype feature independently with probability
    ``1 - noise`` and adds ``noise_features`` (default 4) ids drawn uniformly from the
    feature space.  Classes are drawn uniformly, or with ``zipf = s`` with probability
    proportional to ``c ** -s`` (class 1 the most frequent).

    Prototype ids are class-specific as long as ``k * proto_features`` is small against
    ``vocab`` (at k = 1,000 about 0.8 % of prototype ids are shared with another class), so a
    linear one-against-all model can learn the task; difficulty grows with ``noise`` (a feature
    is dropped more often, and an example loses all prototype features with probability
    ``noise ** proto_features``), with ``noise_features`` and with ``k * proto_features / vocab``.

Output
    One line per example: ``c | f<id> f<id> ...`` (string feature names, default namespace):
    first the kept prototype features in prototype order, then the noise features.  Lines are
    formatted with numpy byte arithmetic, a chunk at a time (about 10^6 lines a second).

Determinism
    Every random choice of example ``i`` of a stream is a hash of ``(seed, stream, i, slot)``
    (counter-based), so the bytes depend only on the parameters and ``seed``, not on the
    chunk size, and the test stream (``stream = 1``) is independent of the training stream
    (``stream = 0``) while sharing its prototypes.

Command line::

    python -m data_scripts.synthetic -k 1000 -n 100000 [--seed 0] [--noise 0.1] [--zipf 1.0]
        [--proto-features 8] [--noise-features 4] [--vocab 1000000]
        [--out FILE|-] [--test-out FILE] [--test-n N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from .common import atomic_write

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_MIX1 = _U64(0xBF58476D1CE4E5B9)
_MIX2 = _U64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = _U64(30), _U64(27), _U64(31), _U64(11)

#: stream numbers: training and test examples use independent random streams
TRAIN_STREAM, TEST_STREAM = 0, 1
#: purpose tags mixed into the keys
_PROTO_TAG, _EXAMPLE_TAG = 0x70726F746F, 0x6578616D706C65

DEFAULT_CHUNK = 32768


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser applied elementwise to a ``uint64`` array (wraps mod 2^64).

    >>> hex(int(splitmix64(np.array([0], dtype=np.uint64))[0]))
    '0xe220a8397b1dcdaf'
    """
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


def _key(*parts: int) -> np.uint64:
    """A 64-bit key hashed from small non-negative integers."""
    h = np.zeros(1, dtype=np.uint64)
    for p in parts:
        h = splitmix64(h ^ np.array([p & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    return h[0]


def _uniform(h: np.ndarray) -> np.ndarray:
    """uint64 hashes -> float64 uniforms in [0, 1) (top 53 bits)."""
    return (h >> _S11).astype(np.float64) * (1.0 / 9007199254740992.0)


def prototypes(classes, seed: int = 0, proto_features: int = 8, vocab: int = 1_000_000) -> np.ndarray:
    """Prototype feature ids of the given classes: int64 array of shape ``(len(classes), proto_features)``.

    Row ``r`` depends only on ``(seed, classes[r], proto_features, vocab)``.
    """
    c = np.asarray(classes, dtype=np.uint64).reshape(-1, 1)
    j = np.arange(proto_features, dtype=np.uint64).reshape(1, -1)
    key = _key(seed, _PROTO_TAG)
    h = splitmix64(key + c * _U64(proto_features) + j)
    return (h % _U64(vocab)).astype(np.int64)


def class_cdf(k: int, zipf: float | None) -> np.ndarray | None:
    """Cumulative class probabilities (float64, shape (k,)) for Zipf exponent ``zipf``; None = uniform."""
    if not zipf:
        return None
    w = np.arange(1, k + 1, dtype=np.float64) ** (-float(zipf))
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    return cdf


def _check(k, n, noise, zipf, proto_features, noise_features, vocab):
    if not 1 <= k < 2**31:
        raise ValueError(f"k must be in 1..2^31-1, got {k}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    if zipf is not None and zipf < 0:
        raise ValueError(f"zipf exponent must be >= 0, got {zipf}")
    if proto_features < 0 or noise_features < 0:
        raise ValueError("feature counts must be >= 0")
    if vocab < 1:
        raise ValueError(f"vocab must be >= 1, got {vocab}")


def _decimal(x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """ASCII digits of non-negative ints ``x`` in ``width`` columns and the mask dropping leading zeros."""
    pows = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    xe = x[..., None]
    digits = (xe // pows % 10 + 48).astype(np.uint8)
    keep = xe >= pows
    keep[..., -1] = True
    return digits, keep


def _format_chunk(labels: np.ndarray, feats: np.ndarray, kept: np.ndarray, dl: int, df: int) -> bytes:
    """Render ``labels`` (m,) and features (m, T) with ``kept`` (m, T) as VW lines."""
    m, t = feats.shape
    tw = 2 + df
    width = dl + 2 + t * tw + 1
    buf = np.empty((m, width), dtype=np.uint8)
    mask = np.ones((m, width), dtype=bool)
    buf[:, :dl], mask[:, :dl] = _decimal(labels, dl)
    buf[:, dl] = ord(" ")
    buf[:, dl + 1] = ord("|")
    if t:
        tok = buf[:, dl + 2:dl + 2 + t * tw].reshape(m, t, tw)
        tmask = mask[:, dl + 2:dl + 2 + t * tw].reshape(m, t, tw)
        tok[:, :, 0] = ord(" ")
        tok[:, :, 1] = ord("f")
        digits, dkeep = _decimal(feats, df)
        tok[:, :, 2:] = digits
        tmask[:, :, :2] = kept[:, :, None]
        tmask[:, :, 2:] = dkeep & kept[:, :, None]
    buf[:, -1] = ord("\n")
    return buf[mask].tobytes()


def generate(k: int, n: int, seed: int = 0, noise: float = 0.1, zipf: float | None = None,
             proto_features: int = 8, noise_features: int = 4, vocab: int = 1_000_000,
             stream: int = TRAIN_STREAM, chunk_size: int = DEFAULT_CHUNK) -> Iterator[bytes]:
    """Yield the ``n`` example lines of a stream as ``bytes`` chunks of up to ``chunk_size`` lines.

    Each chunk holds whole lines (``b"c | f12 f345 ...\\n"``); concatenated they are the same
    for every ``chunk_size``.  ``stream`` 0 is the training stream, 1 the test stream (same
    classes and prototypes, independent examples).  See the module docstring for the model.

    >>> b"".join(generate(k=3, n=2, seed=1, vocab=100, proto_features=2, noise_features=1))
    b'2 | f70 f44\\n3 | f52 f65 f56\\n'
    """
    _check(k, n, noise, zipf, proto_features, noise_features, vocab)
    chunk_size = max(1, int(chunk_size))
    cdf = class_cdf(k, zipf)
    dl = len(str(k))
    df = len(str(vocab - 1))
    p, q = proto_features, noise_features
    slots = 1 + p + q
    ekey = _key(seed, _EXAMPLE_TAG, stream)
    proto_key = _key(seed, _PROTO_TAG)
    jj = np.arange(p, dtype=np.uint64)
    slot_ids = np.arange(slots, dtype=np.uint64)
    for start in range(0, n, chunk_size):
        m = min(chunk_size, n - start)
        idx = np.arange(start, start + m, dtype=np.uint64)
        h = splitmix64(ekey + idx[:, None] * _U64(slots) + slot_ids[None, :])  # (m, slots)
        u = _uniform(h[:, 0])
        if cdf is None:
            labels = np.minimum((u * k).astype(np.int64), k - 1) + 1
        else:
            labels = np.minimum(np.searchsorted(cdf, u, side="right"), k - 1).astype(np.int64) + 1
        proto = splitmix64(proto_key + labels.astype(np.uint64)[:, None] * _U64(p) + jj[None, :])
        proto = (proto % _U64(vocab)).astype(np.int64)
        keep_p = _uniform(h[:, 1:1 + p]) >= noise
        noise_ids = (h[:, 1 + p:] % _U64(vocab)).astype(np.int64)
        feats = np.concatenate([proto, noise_ids], axis=1)
        kept = np.concatenate([keep_p, np.ones((m, q), dtype=bool)], axis=1)
        yield _format_chunk(labels, feats, kept, dl, df)


@contextlib.contextmanager
def _open_out(out):
    if out is None or str(out) == "-":
        yield sys.stdout.buffer
    elif hasattr(out, "write"):
        yield out
    else:
        with atomic_write(out, "wb") as fh:
            yield fh


def write(out, k: int, n: int, seed: int = 0, noise: float = 0.1, zipf: float | None = None,
          proto_features: int = 8, noise_features: int = 4, vocab: int = 1_000_000,
          stream: int = TRAIN_STREAM, chunk_size: int = DEFAULT_CHUNK) -> int:
    """Write a stream (see ``generate``) to ``out``: a path (written atomically), ``'-'``/None
    for stdout, or a binary file object.  Returns the number of lines written."""
    with _open_out(out) as fh:
        for chunk in generate(k, n, seed=seed, noise=noise, zipf=zipf, proto_features=proto_features,
                              noise_features=noise_features, vocab=vocab, stream=stream,
                              chunk_size=chunk_size):
            fh.write(chunk)
        if fh is sys.stdout.buffer:
            fh.flush()
    return n


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m data_scripts.synthetic",
        description="Generate a synthetic k-class stream in VW text ('c | f12 f345 ...').",
    )
    ap.add_argument("-k", "--classes", dest="k", type=int, required=True, help="number of classes (labels 1..k)")
    ap.add_argument("-n", "--examples", dest="n", type=int, required=True, help="number of training examples")
    ap.add_argument("--seed", type=int, default=0, help="seed of prototypes and examples (default: %(default)s)")
    ap.add_argument("--noise", type=float, default=0.1,
                    help="probability of dropping each prototype feature, 0..1 (default: %(default)s)")
    ap.add_argument("--zipf", type=float, default=None, metavar="S",
                    help="Zipf class frequencies p(c) ~ c^-S (default: uniform)")
    ap.add_argument("--proto-features", type=int, default=8, help="prototype features per class (default: %(default)s)")
    ap.add_argument("--noise-features", type=int, default=4, help="random features per example (default: %(default)s)")
    ap.add_argument("--vocab", type=int, default=1_000_000, help="size of the feature-id space (default: %(default)s)")
    ap.add_argument("--out", default="-", help="training output file, '-' = stdout (default)")
    ap.add_argument("--test-out", default=None, help="also write a test stream here (independent examples)")
    ap.add_argument("--test-n", type=int, default=None, help="test examples (default: n // 10)")
    ap.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    common = dict(k=args.k, seed=args.seed, noise=args.noise, zipf=args.zipf,
                  proto_features=args.proto_features, noise_features=args.noise_features,
                  vocab=args.vocab, chunk_size=args.chunk_size)
    try:
        _check(args.k, args.n, args.noise, args.zipf, args.proto_features, args.noise_features, args.vocab)
        if args.test_out is not None and args.test_out == args.out:
            ap.error("--test-out must differ from --out")
        write(args.out, n=args.n, stream=TRAIN_STREAM, **common)
        if args.test_out is not None:
            test_n = args.test_n if args.test_n is not None else args.n // 10
            write(args.test_out, n=test_n, stream=TEST_STREAM, **common)
    except ValueError as exc:
        ap.error(str(exc))
    except BrokenPipeError:
        # `... | head`: exit quietly; keep Python from complaining while flushing stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
