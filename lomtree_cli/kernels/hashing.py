"""Feature hashing in numba: XXH32 and the name-hash rule H() of docs/ALGORITHMS.md §1.3.

``hash_bytes_xxh32`` is a bit-exact re-implementation of XXH32 (the hash behind
``xxhash.xxh32_intdigest``), so that hashing can happen inside the compiled parse kernels.

Numerics: every intermediate value is a ``np.uint64`` holding a 32-bit quantity, masked with
``0xFFFFFFFF`` after each multiply/add. numba turns ``uint64`` mixed with ``int64`` into
``float64``, so every constant (including shift counts) is an explicit ``np.uint64``.

Rule H (§1.3)::

    H(s, seed) = int(s) + seed        if s is non-empty and every byte is an ASCII digit
               = xxh32(s, seed)        otherwise

The numeric branch is computed with wrapping ``uint64`` arithmetic: the result is exact modulo
2**64, so its low 32 bits (all that survives ``& mask`` for ``bits <= 32``) are exact even for
digit strings longer than 20 digits. A leading ``+`` or ``-`` makes a name non-numeric.
"""

from __future__ import annotations

import numpy as np
from . import kernel

_M32 = np.uint64(0xFFFFFFFF)
_P1 = np.uint64(2654435761)
_P2 = np.uint64(2246822519)
_P3 = np.uint64(3266489917)
_P4 = np.uint64(668265263)
_P5 = np.uint64(374761393)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U7 = np.uint64(7)
_U8 = np.uint64(8)
_U10 = np.uint64(10)
_U11 = np.uint64(11)
_U12 = np.uint64(12)
_U13 = np.uint64(13)
_U15 = np.uint64(15)
_U16 = np.uint64(16)
_U17 = np.uint64(17)
_U18 = np.uint64(18)
_U24 = np.uint64(24)
_U32 = np.uint64(32)
_U48 = np.uint64(48)


@kernel(inline="always")
def _rotl32(x, r):
    """Rotate the 32-bit value ``x`` (held in a uint64) left by ``r`` (uint64) bits."""
    return ((x << r) | (x >> (_U32 - r))) & _M32


@kernel(inline="always")
def _read32(buf, i):
    """Little-endian uint32 at ``buf[i:i+4]``, as uint64."""
    return (
        np.uint64(buf[np.uint64(i)])
        | (np.uint64(buf[np.uint64(i + 1)]) << _U8)
        | (np.uint64(buf[np.uint64(i + 2)]) << _U16)
        | (np.uint64(buf[np.uint64(i + 3)]) << _U24)
    )


@kernel(inline="always")
def _round(v, lane):
    v = (v + lane * _P2) & _M32
    v = _rotl32(v, _U13)
    return (v * _P1) & _M32


@kernel()
def hash_bytes_xxh32(buf, start, end, seed):
    """XXH32 of ``buf[start:end]`` with ``seed``; bit-identical to ``xxhash.xxh32_intdigest``.

    Parameters
    ----------
    buf : uint8, shape (n,)
    start, end : int64, byte range ``[start, end)`` of ``buf``
    seed : uint32 (any integer type; only the low 32 bits are used)

    Returns
    -------
    uint32
    """
    seed = np.uint64(seed) & _M32
    n = end - start
    i = start
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed
        v4 = (seed + (np.uint64(0x100000000) - _P1)) & _M32
        limit = end - 16
        while i <= limit:
            v1 = _round(v1, _read32(buf, i))
            v2 = _round(v2, _read32(buf, i + 4))
            v3 = _round(v3, _read32(buf, i + 8))
            v4 = _round(v4, _read32(buf, i + 12))
            i += 16
        h = (_rotl32(v1, _U1) + _rotl32(v2, _U7) + _rotl32(v3, _U12) + _rotl32(v4, _U18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + (np.uint64(n) & _M32)) & _M32
    while i + 4 <= end:
        h = (h + _read32(buf, i) * _P3) & _M32
        h = (_rotl32(h, _U17) * _P4) & _M32
        i += 4
    while i < end:
        h = (h + np.uint64(buf[np.uint64(i)]) * _P5) & _M32
        h = (_rotl32(h, _U11) * _P1) & _M32
        i += 1
    h ^= h >> _U15
    h = (h * _P2) & _M32
    h ^= h >> _U13
    h = (h * _P3) & _M32
    h ^= h >> _U16
    return np.uint32(h)


@kernel()
def hash_name(buf, start, end, seed):
    """Rule H of §1.3 for the name ``buf[start:end]`` and ``seed``, as a wrapping uint64.

    All-ASCII-digit, non-empty names give ``int(name) + seed`` (mod 2**64); others give
    ``xxh32(name, seed)``. The caller masks the result (``& mask`` or ``& 0xFFFFFFFF``).

    Parameters
    ----------
    buf : uint8, shape (n,)
    start, end : int64
    seed : uint64 (< 2**32)

    Returns
    -------
    uint64
    """
    if end > start:
        numeric = True
        acc = _U0
        for i in range(start, end):
            c = buf[np.uint64(i)]
            if c < 48 or c > 57:
                numeric = False
                break
            acc = acc * _U10 + np.uint64(c - 48)
        if numeric:
            return acc + np.uint64(seed)
    return np.uint64(hash_bytes_xxh32(buf, start, end, seed))
