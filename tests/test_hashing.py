"""numba XXH32 and rule H against xxhash and the §9 test vectors."""

from __future__ import annotations

import os

import numpy as np
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.config import InputConfig
from lomtree_cli.kernels.hashing import hash_bytes_xxh32, hash_name
from lomtree_cli.parsing import parse_bytes


def _h(data: bytes, seed: int) -> int:
    buf = np.frombuffer(data, np.uint8)
    return int(hash_bytes_xxh32(buf, 0, len(data), np.uint64(seed)))


def test_xxh32_empty_vector():
    assert _h(b"", 0) == 46947589 == xxhash.xxh32_intdigest(b"", 0)


def test_xxh32_random_bulk():
    rng = np.random.default_rng(1)
    for _ in range(3000):
        n = int(rng.integers(0, 101))
        data = os.urandom(n)
        seed = int(rng.integers(0, 2**32))
        assert _h(data, seed) == xxhash.xxh32_intdigest(data, seed), (data, seed)


def test_xxh32_subrange():
    data = b"xx" + b"hello world, this is a longer string" + b"yy"
    buf = np.frombuffer(data, np.uint8)
    assert int(hash_bytes_xxh32(buf, 2, len(data) - 2, np.uint64(7))) == xxhash.xxh32_intdigest(data[2:-2], 7)


@settings(deadline=None, max_examples=500)
@given(st.binary(min_size=0, max_size=100), st.integers(0, 2**32 - 1))
def test_xxh32_hypothesis(data, seed):
    assert _h(data, seed) == xxhash.xxh32_intdigest(data, seed)


@settings(deadline=None, max_examples=300)
@given(st.text("0123456789", min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_hash_name_numeric_wraps_exactly(digits, seed):
    buf = np.frombuffer(digits.encode(), np.uint8)
    h = int(hash_name(buf, 0, len(digits), np.uint64(seed)))
    assert h & 0xFFFFFFFF == (int(digits) + seed) & 0xFFFFFFFF


def test_hash_name_non_numeric():
    for name in (b"a", b"+7", b"-7", b"7a", b"\xff\x00"):
        buf = np.frombuffer(name, np.uint8)
        assert int(hash_name(buf, 0, len(name), np.uint64(3))) == xxhash.xxh32_intdigest(name, 3)


def _indices(line: bytes, **kw):
    b = parse_bytes(line, InputConfig(**kw))
    return b.indices.tolist()


def test_section9_vectors():
    assert _h(b"ns", 0) == 2118197159
    assert _indices(b"| 7:0.5", noconstant=True) == [7]
    assert _indices(b"|ns a", noconstant=True) == [26259]
    assert _indices(b"|ns 7", noconstant=True) == [73646]
    assert _indices(b"| a", noconstant=True) == [95318]
    assert _indices(b"| price", noconstant=True) == [82627]
    assert _indices(b"| a") == [95318, 116060]
    assert InputConfig(bits=18).constant_index == 116060
