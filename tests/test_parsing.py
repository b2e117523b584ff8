"""Parser: VW text and LIBSVM → ExampleBatch (docs/ALGORITHMS.md §1.1–1.4), against the reference."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import math
import sys

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from fuzz.fuzz_parsers import batch_lists
from lomtree_cli.config import InputConfig
from lomtree_cli.errors import InputError
from lomtree_cli.kernels.parse import _count_newlines, _find_newline, _parse_float_long, parse_float
from lomtree_cli import parsing
from lomtree_cli.parsing import iter_batches, open_input, parse_bytes
from tests.reference.parser_ref import Bad, parse_ref

MASK = (1 << 18) - 1
CONST = 116060
HYP = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def cfg(**kw) -> InputConfig:
    return InputConfig(**kw)


def one(line: bytes, **kw):
    b = parse_bytes(line, cfg(**kw))
    assert len(b) == 1
    return b


def feats(line: bytes, **kw):
    b = one(line, noconstant=True, **kw)
    return list(zip(b.indices.tolist(), b.values.tolist()))


def xh(name: bytes, seed: int = 0) -> int:
    return xxhash.xxh32_intdigest(name, seed)


def check_batch_invariants(b):
    n = len(b)
    assert b.labels.dtype == np.int64 and b.labels.shape == (n,)
    assert b.weights.dtype == np.float64 and b.weights.shape == (n,)
    assert b.indptr.dtype == np.int64 and b.indptr.shape == (n + 1,) and b.indptr[0] == 0
    assert b.indices.dtype == np.int64 and b.values.dtype == np.float32
    assert b.indices.shape == b.values.shape == (b.indptr[-1],)
    assert b.line_numbers.dtype == np.int64
    assert np.all(np.diff(b.indptr) >= 0)
    assert np.all(b.values != 0)
    assert b.tags is None or len(b.tags) == n


# ---------------------------------------------------------------------------- labels, weights, tags


def test_labels_weights_unlabeled():
    b = parse_bytes(b"3 | a\n5 0.25 | a\n| a\n7 0 | a\n", cfg())
    assert b.labels.tolist() == [3, 5, 0, 7]
    assert b.weights.tolist() == [1.0, 0.25, 1.0, 0.0]
    assert b.line_numbers.tolist() == [1, 2, 3, 4]
    assert b.tags is None
    check_batch_invariants(b)


def test_tags():
    b = parse_bytes(b"3 'abc | a\n3 2 'x| a\n3| a\n'| a\n1 2 t| a\n4 | a\n", cfg())
    assert b.labels.tolist() == [3, 3, 0, 0, 1, 4]
    assert b.weights.tolist() == [1.0, 2.0, 1.0, 1.0, 2.0, 1.0]
    assert b.tags == ["abc", "x", "3", "", "t", None]


def test_tag_invalid_utf8_is_replaced():
    b = one(b"1 '\xff\xfe| a")
    assert b.tags == ["\ufffd\ufffd"]


def test_tab_rule():
    b = parse_bytes(b"ignored stuff here\t4 | a\nx y\t'tg | a\nz\t|a\n", cfg())
    assert b.labels.tolist() == [4, 0, 0]
    assert b.tags == [None, "tg", None]


# ---------------------------------------------------------------------------- features and namespaces


def test_default_namespace_and_numeric_names():
    assert feats(b"1 | a b:2 7:0.5 0:3") == [(xh(b"a") & MASK, 1.0), (xh(b"b") & MASK, 2.0), (7, 0.5), (0, 3.0)]
    assert feats(b"1 | +7 -7") == [(xh(b"+7") & MASK, 1.0), (xh(b"-7") & MASK, 1.0)]


def test_hash_seed_default_namespace():
    assert feats(b"| 7 a", hash_seed=5) == [(12, 1.0), (xh(b"a", 5) & MASK, 1.0)]


def test_named_namespaces_with_weights():
    nh = xh(b"ns")
    assert feats(b"1 |ns a 7 |ns:0.5 a:4 |other b") == [
        (xh(b"a", nh) & MASK, 1.0),
        ((7 + nh) & MASK, 1.0),
        (xh(b"a", nh) & MASK, 2.0),
        (xh(b"b", xh(b"other")) & MASK, 1.0),
    ]
    # numeric namespace name: nh = int(name) + seed
    assert feats(b"|12 a") == [(xh(b"a", 12) & MASK, 1.0)]
    assert feats(b"|12 5") == [(17, 1.0)]


def test_anonymous_features():
    nh = xh(b"ns")
    assert feats(b"|ns :2 :0 :3 b |ns :5") == [
        (nh & MASK, 2.0),
        ((nh + 2) & MASK, 3.0),
        (xh(b"b", nh) & MASK, 1.0),
        (nh & MASK, 5.0),
    ]
    assert feats(b"| :1 :2") == [(0, 1.0), (1, 2.0)]


def test_zero_dropped_duplicates_kept_constant_last():
    b = one(b"1 | a:0 a a |z:0 b c")
    a = xh(b"a") & MASK
    assert b.indices.tolist() == [a, a, CONST]
    assert b.values.tolist() == [1.0, 1.0, 1.0]
    b = one(b"1 | a:1e-50")  # float32 underflow is zero
    assert b.indices.tolist() == [CONST]


def test_noconstant_and_empty_examples():
    b = parse_bytes(b"1 |\n2 | a:0\n| \n", cfg(noconstant=True))
    assert b.labels.tolist() == [1, 2, 0]
    assert b.indptr.tolist() == [0, 0, 0, 0]
    b = parse_bytes(b"1 |\n", cfg())
    assert b.indices.tolist() == [CONST]


def test_bits_and_constant():
    b = one(b"1 | a", bits=4)
    assert b.indices.tolist() == [xh(b"a") & 15, 11650396 & 15]
    b = one(b"1 | a", bits=32)
    assert b.indices.tolist() == [xh(b"a"), 11650396]


def test_values_exact_float32():
    for tok in ["0.123456", "1e-3", "-2.5E+2", "3", ".5", "5.", "+1.25e2", "1E0", "123456.789e-10",
                "0.1", "0.3333333333333333333333", "6.02214076e23"]:
        b = one(b"1 | a:" + tok.encode(), noconstant=True)
        assert b.values[0] == np.float32(float(tok)), tok


def test_whitespace_crlf_bom_blank_lines():
    data = b"\xef\xbb\xbf1 | a\r\n\r\n   \t \n2 |  a\t\tb  \r\n\n3 | c"
    b = parse_bytes(data, cfg())
    # line 3 is whitespace only: an unlabeled example with the constant alone (as VW reads it);
    # lines 2 and 5 are empty (blank, skipped)
    assert b.labels.tolist() == [1, 0, 2, 3]
    assert b.line_numbers.tolist() == [1, 3, 4, 6]
    assert b.indptr.tolist() == [0, 2, 3, 6, 8]
    assert parse_bytes(b"", cfg()).labels.shape == (0,)


def test_interior_cr_is_whitespace():
    assert feats(b"1 | a\rb") == feats(b"1 | a b")


def test_nul_and_garbage_do_not_crash():
    b = parse_bytes(b"1 | a\x00b \xff\xfe:1\n", cfg())
    assert b.indices.tolist() == [xh(b"a\x00b") & MASK, xh(b"\xff\xfe") & MASK, CONST]
    for data in [b"\x00", b"|\x00:", b"\x00|\x00", b":|:", b"||||", b"'|'", b"\t|\t", b"1\t\t|"]:
        parse_bytes(data, cfg(skip_invalid=True))


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "bad, reason, column",
    [
        (b"1 a b", "no_bar", 0),
        (b"x | a", "label_int", 1),
        (b"0 | a", "label_int", 1),
        (b"2147483648 | a", "label_int", 1),
        (b"-1 | a", "label_int", 1),
        (b"1.0 | a", "label_int", 1),
        (b"1 2 3 | a", "label_tokens", 5),
        (b"1 2 3 'tag | a", "label_tokens", 5),
        (b"1 -1 | a", "weight", 3),
        (b"1 abc | a", "weight", 3),
        (b"1 1e999 | a", "weight", 3),
        (b"1 |:2 a", "ns_name", 4),
        (b"1 |ns: a", "ns_weight", 7),
        (b"1 |ns:x a", "ns_weight", 7),
        (b"1 |ns:2x a", "ns_weight", 7),
        (b"1 |ns:1e400 a", "ns_weight", 7),
        (b"1 | a:1abc", "feat_value", 7),
        (b"1 | a:1:2", "feat_value", 7),
        (b"1 | a:-.5x", "feat_value", 7),
        (b"1 | a:NaN", "feat_value", 7),
        (b"1 | a:-Infinity", "feat_value", 7),
        (b"1 | a:nan", "feat_value", 7),
        (b"1 | a:inf", "feat_value", 7),
        (b"1 | a:1e999", "feat_value", 7),
        (b"1 | a:1e39", "feat_value", 7),
        (b"1 | a:1.5.2", "feat_value", 7),
    ],
)
def test_vw_errors(bad, reason, column):
    data = b"1 | a\n\n" + bad + b"\n2 | b\n"
    with pytest.raises(InputError) as ei:
        parse_bytes(data, cfg(), source="f.vw")
    e = ei.value
    assert (e.source, e.line, e.reason, e.column) == ("f.vw", 3, reason, column)
    assert e.detail and e.detail != reason
    assert str(e).startswith("f.vw:3: ")
    # the reference agrees
    assert [x.reason for x in parse_ref(data) if isinstance(x, Bad)] == [reason]


def test_error_details():
    def detail(data, **kw):
        with pytest.raises(InputError) as ei:
            parse_bytes(data, cfg(**kw))
        return ei.value.detail

    assert detail(b"x | a") == "bad label 'x' (must be an integer >= 1)"
    assert detail(b"1 | a:1abc").startswith("feature value '1abc' is not a number")
    assert "refuses NaN" in detail(b"1 | a:nan")
    assert detail(b"1 a") == "no '|' in line"
    assert detail(b"1 2 3 | a").startswith("more than two tokens in label section")
    assert "1,2" in detail(b"1,2 3:1", format="libsvm")


@pytest.mark.parametrize(
    "bad, reason",
    [
        (b"x 1:2", "libsvm_label"),
        (b"2.5 1:2", "libsvm_label"),
        (b"0 1:2", "libsvm_label"),
        (b"1,2 1:2", "libsvm_multilabel"),
        (b"1 2", "libsvm_pair"),
        (b"1 a:2", "libsvm_index"),
        (b"1 :2", "libsvm_index"),
        (b"1 -1:2", "libsvm_index"),
        (b"1 1:x", "libsvm_value"),
        (b"1 1:", "libsvm_value"),
        (b"1 1:1e999", "libsvm_value"),
    ],
)
def test_libsvm_errors(bad, reason):
    data = b"1 1:1\n\n" + bad + b"\n"
    with pytest.raises(InputError) as ei:
        parse_bytes(data, cfg(format="libsvm"))
    assert (ei.value.line, ei.value.reason) == (3, reason)
    assert [x.reason for x in parse_ref(data, fmt="libsvm") if isinstance(x, Bad)] == [reason]


def test_skip_invalid():
    data = b"1 | a\nx | a\n\n2 | b\n1 a\n3 | c:1q\n4 | d"
    b = parse_bytes(data, cfg(skip_invalid=True))
    assert b.labels.tolist() == [1, 2, 4]
    assert b.line_numbers.tolist() == [1, 4, 7]
    assert [(e.line, e.reason) for e in b.skipped] == [(2, "label_int"), (5, "no_bar"), (6, "feat_value")]
    # a batch with no examples but skipped lines is still yielded
    out = list(iter_batches_bytes(b"x | a\n", cfg(skip_invalid=True)))
    assert len(out) == 1 and len(out[0]) == 0 and out[0].skipped[0].reason == "label_int"


# ---------------------------------------------------------------------------- LIBSVM


def test_libsvm_basic():
    data = b"3 1:0.5 7:2 # comment\n3.0 2:0 2:1 2:1\n# only a comment\n\n1\n-1 5:1\n"
    b = parse_bytes(data, cfg(format="libsvm", label_offset=2))
    assert b.labels.tolist() == [5, 5, 3, 1]
    assert b.line_numbers.tolist() == [1, 2, 5, 6]
    assert b.indices.tolist() == [1, 7, CONST, 2, 2, CONST, CONST, 5, CONST]
    assert b.values.tolist() == [0.5, 2, 1, 1, 1, 1, 1, 1, 1]
    assert b.tags is None and b.weights.tolist() == [1.0] * 4


def test_libsvm_equals_vw():
    lib = parse_bytes(b"3 1:0.5 7:2 300000:1\n", cfg(format="libsvm"))
    vw = parse_bytes(b"3 | 1:0.5 7:2 300000:1\n", cfg())
    assert lib.indices.tolist() == vw.indices.tolist()
    assert lib.values.tolist() == vw.values.tolist()


# ---------------------------------------------------------------------------- streams and files


def iter_batches_bytes(data: bytes, c: InputConfig, chunk_bytes: int = 1 << 20, flush: bool = False):
    class Stdin:
        buffer = io.BufferedReader(io.BytesIO(data))

    old = sys.stdin
    sys.stdin = Stdin()
    try:
        yield from iter_batches(None, c, chunk_bytes=chunk_bytes, flush=flush)
    finally:
        sys.stdin = old


MIXED = (
    b"\xef\xbb\xbf1 'first| a b:2\r\n\n"
    + b"".join(b"%d %s|ns:0.5 w%d :%d x:1e-3 | %d:0.25\n" % (i % 7 + 1, b"'t%d" % i if i % 3 else b"", i, i, i)
               for i in range(40))
    + b"bad line\n  \t\n| :1 :0 :2\n2 'tag\xff|x y\n3 | last"
)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_chunk_boundaries(tmp_path, chunk, workers):
    c = cfg(skip_invalid=True)
    whole = parse_bytes(MIXED, c, source=str(tmp_path / "f.vw"))
    p = tmp_path / "f.vw"
    p.write_bytes(MIXED)
    batches = list(iter_batches([str(p)], c, chunk_bytes=chunk, workers=workers))
    for b in batches:
        check_batch_invariants(b)
        assert b.source == str(p)
    assert batch_lists(batches) == batch_lists([whole])
    assert [(e.line, e.reason) for b in batches for e in b.skipped] == [(e.line, e.reason) for e in whole.skipped]
    assert len(whole) == 45 and whole.skipped[0].line == 43  # line 44 (whitespace) is an example
    # strict: the first bad line is reported with its line number, after every example before it
    with pytest.raises(InputError) as ei:
        got = []
        for b in iter_batches([str(p)], cfg(), chunk_bytes=chunk, workers=workers):
            got += b.line_numbers.tolist()
    assert ei.value.line == 43 and ei.value.source == str(p)
    assert got == [ln for ln in whole.line_numbers.tolist() if ln < 43]


def test_stdin_and_flush():
    c = cfg()
    assert batch_lists(iter_batches_bytes(MIXED, cfg(skip_invalid=True), chunk_bytes=5)) == \
        batch_lists([parse_bytes(MIXED, cfg(skip_invalid=True))])
    b = list(iter_batches_bytes(b"1 | a\n2 | b", c))
    assert b[0].source == "<stdin>" and b[0].labels.tolist() == [1, 2]

    class Pipe:
        """readinto1 gives one scripted piece per call (as a pipe's buffered reader does);
        records how many calls were made."""

        def __init__(self, pieces):
            self.pieces, self.calls = list(pieces), 0

        def readinto1(self, b):
            self.calls += 1
            piece = self.pieces.pop(0) if self.pieces else b""
            b[:len(piece)] = piece
            return len(piece)

    pipe = Pipe([b"1 | a\n2 |", b" b\n", b"3 | c\n"])

    class Stdin:
        buffer = pipe

    old = sys.stdin
    sys.stdin = Stdin()
    try:
        seen = []
        for batch in iter_batches(["-"], c, chunk_bytes=1 << 20, flush=True):
            seen.append((batch.labels.tolist(), pipe.calls))
    finally:
        sys.stdin = old
    assert seen == [([1], 1), ([2], 2), ([3], 3)]


def test_stdin_subprocess():
    import subprocess

    code = ("from lomtree_cli.parsing import iter_batches; from lomtree_cli.config import InputConfig;"
            "print(sum(len(b) for b in iter_batches(None, InputConfig())))")
    r = subprocess.run([sys.executable, "-c", code], input=b"1 | a\n2 | b\n3 | c", capture_output=True,
                       check=True)
    assert r.stdout.strip() == b"3"


@pytest.mark.parametrize("ext, opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed(tmp_path, ext, opener):
    p = tmp_path / ("data.vw" + ext)
    with opener(p, "wb") as f:
        f.write(MIXED)
    c = cfg(skip_invalid=True)
    assert batch_lists(iter_batches([str(p)], c, chunk_bytes=100)) == batch_lists([parse_bytes(MIXED, c)])
    f, name = open_input(str(p))
    assert name == str(p) and f.read().startswith(b"\xef\xbb\xbf1")
    f.close()


def test_multiple_files_and_strict_prefix(tmp_path):
    a, b = tmp_path / "a.vw", tmp_path / "b.vw"
    a.write_bytes(b"1 | a\n2 | b\n")
    b.write_bytes(b"3 | c\nx | d\n4 | e\n")
    out = []
    with pytest.raises(InputError) as ei:
        for batch in iter_batches([str(a), str(b)], cfg()):
            out.append((batch.source, batch.line_numbers.tolist()))
    assert out == [(str(a), [1, 2]), (str(b), [1])]
    assert (ei.value.source, ei.value.line, ei.value.reason) == (str(b), 2, "label_int")


def test_missing_file():
    with pytest.raises(InputError) as ei:
        list(iter_batches(["/nonexistent/x.vw"], cfg()))
    assert ei.value.reason == "open" and ei.value.line == 0
    assert ei.value.detail.startswith("cannot open input")


# ---------------------------------------------------------------------------- line ends


@HYP
@given(st.lists(st.sampled_from([0x0A, 0x0B, 0x09, 0x00, 0x01, 0x8A, 0x80, 0xFF, 0x7F, 0x30, 0xA0]),
                max_size=40), st.integers(0, 45))
def test_find_newline_is_bytes_find(seq, start):
    data = bytes(seq)
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    start = min(start, len(data))
    want = data.find(b"\n", start)
    assert _find_newline(buf, start, len(data)) == (len(data) if want < 0 else want)


@HYP
@given(st.lists(st.sampled_from([10, 10, 0, 9, 11, 0x0A ^ 0x80, 0x8A, 0xFF, 32, 49]), max_size=70))
def test_count_newlines_is_bytes_count(seq):
    data = bytes(seq)
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    for n in range(len(data) + 1):
        assert _count_newlines(buf, n) == data[:n].count(b"\n")


def test_find_newline_every_position():
    for n in range(0, 20):
        for k in range(n):
            data = bytearray(b"\x8a" * n)  # 0x8A ^ 0x0A = 0x80: only bit 7 set
            data[k] = 10
            buf = np.frombuffer(bytes(data), np.uint8)
            for start in range(n + 1):
                want = k if start <= k else n
                assert _find_newline(buf, start, n) == want


# ---------------------------------------------------------------------------- float parser


@HYP
@given(st.floats(allow_nan=False, allow_infinity=False))
@example(1.794587694397559e-308)  # subnormal whose 53-bit rounding fell on a midpoint of the subnormal grid
@example(-2.5e-323)
def test_parse_float_repr_exact(x):
    for s in (repr(x), "%.6e" % x, "%.9g" % x):
        buf = np.frombuffer(s.encode(), np.uint8)
        v, end, ok = parse_float(buf, 0, len(s))
        assert ok and end == len(s)
        assert v == float(s), s


@HYP
@given(st.text("0123456789", min_size=1, max_size=30), st.text("0123456789", max_size=30),
       st.integers(-330, 320))
def test_parse_float_long_digits_within_one_ulp(ip, fp, ex):
    s = f"{ip}.{fp}e{ex}"
    buf = np.frombuffer(s.encode(), np.uint8)
    v, end, ok = parse_float(buf, 0, len(s))
    ref = float(s)
    assert ok and end == len(s)
    if math.isinf(ref) or ref == 0 or abs(ref) < 2.3e-308:
        assert v == ref or abs(v - ref) <= 5e-324 * 2
    else:
        assert abs(v - ref) <= math.ulp(ref), s


@HYP
@given(st.text("0123456789.+-eE", max_size=28), st.text("0123456789", min_size=15, max_size=24))
@example("0.", "0000000000000000000123")
@example("-", "1234567890123456789")  # 19 digits: the one-pass path
@example("-", "12345678901234567890")  # 20: read again
def test_parse_float_one_pass_equals_the_careful_reading(junk, digits):
    """The one-pass reading (<= 19 digits) gives what the digit-by-digit reading that keeps 19
    significant digits gives, on any bytes (valid or not, at every start)."""
    for s in (junk, digits, junk + digits, digits[:9] + "." + digits[9:], "0." + digits, digits + "e-7" + junk):
        buf = np.frombuffer(s.encode(), np.uint8)
        for start in range(len(s) + 1):
            assert parse_float(buf, start, len(s)) == _parse_float_long(buf, start, len(s)), (s, start)


@HYP
@given(st.text("0123456789.-e", max_size=20), st.text("0123456789", min_size=0, max_size=20),
       st.text("0123456789. |\n", min_size=0, max_size=20))
@example("-0.", "466667", "9999999999999999")
@example("", "1234567.1234567", "0")  # 7 + 7 digits: both sides read eight bytes at a time
@example("", "12345678.5", "")  # 8 integer digits: read one at a time
def test_parse_float_stops_at_the_end_it_is_given(pre, digits, after):
    """Eight-bytes-at-once reading (``_mantissa``, used when 16 bytes follow the start): the same
    value and end as the digit-by-digit reading and as a buffer cut at ``e``, even when digits
    follow ``e`` in the buffer, at every start."""
    s = pre + digits
    e = len(s)
    full = np.frombuffer((s + after + " " * 16).encode(), np.uint8)
    cut = np.frombuffer(s.encode(), np.uint8)
    for start in range(e + 1):
        got = parse_float(full, start, e)
        assert got == _parse_float_long(full, start, e) == parse_float(cut, start, e), (s, after, start)


# ---------------------------------------------------------------------------- grammar round trip vs reference

NAME_CH = st.sampled_from(list("abcxyz_019") + ["é", "\x00", "'", "#"])
name_st = st.text(NAME_CH, min_size=1, max_size=6)
num_st = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: "%.6g" % x),
    st.floats(1e-30, 1e20).map(lambda x: "%e" % x),
    st.sampled_from(["0", "0.0", "-0", ".5", "5.", "1E-3", "-2.5E+2", "0.123456", "+3"]),
)
ws_st = st.sampled_from([" ", "  ", "\t", " \t "])


@st.composite
def vw_line(draw):
    parts = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["junk\t", "a b\t", "\t"])))
    lab = []
    if draw(st.booleans()):
        lab.append(str(draw(st.integers(1, 2**31 - 1))))
        if draw(st.booleans()):
            lab.append(draw(st.sampled_from(["0", "1", "2.5", "0.001", "1e2", "3."])))
    tag = draw(st.sampled_from(["", "'t", "'", "touch"]))
    if tag == "'t" or tag == "'":
        lab.append(tag)
    parts.append(" ".join(lab))
    if tag == "touch":
        parts.append(("" if not lab else " ") + draw(name_st).replace("'", "q"))
    elif lab:
        parts.append(" ")
    for _ in range(draw(st.integers(1, 3))):
        parts.append("|")
        if draw(st.booleans()):
            ns = draw(name_st)
            if draw(st.booleans()):
                ns += ":" + draw(st.sampled_from(["0.5", "2", "0", "1e-3", "-1", "3.25"]))
            parts.append(ns)
        for _ in range(draw(st.integers(0, 4))):
            parts.append(draw(ws_st))
            kind = draw(st.integers(0, 2))
            if kind == 0:
                parts.append(draw(name_st))
            elif kind == 1:
                parts.append(draw(name_st) + ":" + draw(num_st))
            else:
                parts.append(":" + draw(num_st))
        if draw(st.booleans()):
            parts.append(draw(ws_st))
    return "".join(parts)


def compare_to_ref(data: bytes, **kw):
    c = cfg(skip_invalid=True, **kw)
    got = parse_bytes(data, c)
    check_batch_invariants(got)
    ref = parse_ref(data, fmt=c.format, bits=c.bits, seed=c.hash_seed, noconstant=c.noconstant,
                    label_offset=c.label_offset)
    ex = [r for r in ref if not isinstance(r, Bad)]
    assert [(e.line, e.reason) for e in got.skipped] == [(r.line, r.reason) for r in ref if isinstance(r, Bad)]
    assert got.labels.tolist() == [e.label for e in ex]
    assert got.weights.tolist() == [e.weight for e in ex]
    assert got.line_numbers.tolist() == [e.line for e in ex]
    tags = got.tags if got.tags is not None else [None] * len(got)
    assert tags == [None if e.tag is None else e.tag.decode("utf-8", "replace") for e in ex]
    for i, e in enumerate(ex):
        s, t = got.indptr[i], got.indptr[i + 1]
        assert got.indices[s:t].tolist() == e.indices
        assert got.values[s:t].tolist() == [float(v) for v in e.values]
    return got


@HYP
@given(st.lists(vw_line(), min_size=1, max_size=6), st.integers(0, 2**32 - 1), st.sampled_from([18, 5, 32]),
       st.booleans())
def test_roundtrip_vw_grammar(lines, seed, bits, noconstant):
    data = "\n".join(lines).encode()
    got = compare_to_ref(data, hash_seed=seed, bits=bits, noconstant=noconstant)
    assert not [e for e in got.skipped if e.reason != "feat_value"]  # only float32 overflow possible


SOUP = st.binary().map(bytes) | st.text(st.sampled_from(list("0123456789 \t\r\n|:'.-+eE#,ab\x00") + ["é", "\xff"])).map(
    lambda s: s.encode("utf-8", "surrogatepass"))


@HYP
@given(SOUP, st.sampled_from(["vw", "libsvm"]))
def test_soup_vs_reference(data, fmt):
    compare_to_ref(data, format=fmt, label_offset=1 if fmt == "libsvm" else 0)


@settings(deadline=None, max_examples=60)
@given(SOUP, st.integers(1, 9))
def test_soup_chunking(data, chunk):
    """Chunk boundaries are invisible in a text stream (bytes that start as a gzip, bzip2 or xz
    header are read as that, by design: tested with the compressed inputs)."""
    assume(parsing._stream_compressor(data[:10]) is None)
    c = cfg(skip_invalid=True)
    assert batch_lists(iter_batches_bytes(data, c, chunk_bytes=chunk)) == batch_lists([parse_bytes(data, c)])


@st.composite
def libsvm_line(draw):
    lab = str(draw(st.integers(-3, 50))) + draw(st.sampled_from(["", ".0"]))
    pairs = [f"{draw(st.integers(0, 10**12))}:{draw(num_st)}" for _ in range(draw(st.integers(0, 5)))]
    tail = draw(st.sampled_from(["", " ", " # c", "#x"]))
    return " ".join([lab] + pairs) + tail


@HYP
@given(st.lists(libsvm_line(), min_size=1, max_size=6), st.integers(0, 4))
def test_roundtrip_libsvm(lines, offset):
    compare_to_ref("\n".join(lines).encode(), format="libsvm", label_offset=offset)


@pytest.mark.parametrize("skip", [False, True])
def test_parallel_chunk_parsing_matches_sequential(tmp_path, skip):
    """``iter_batches(workers=3)`` parses several chunks at once: the same batches in the same
    order, the same line numbers (counted from the newlines of earlier chunks), the same first
    error in strict mode and the same skipped lines with ``skip_invalid``."""
    from lomtree_cli.config import InputConfig
    from lomtree_cli.errors import InputError
    from lomtree_cli.parsing import iter_batches

    rng = np.random.default_rng(7)
    lines = []
    for i in range(3000):
        if i in (1234, 2500):
            lines.append("7 | a:1notanumber")
        elif i % 97 == 0:
            lines.append("")
        else:
            lines.append(f"{rng.integers(1, 9)} 'tag{i} |ns x{rng.integers(0, 99)}:{rng.random():.4f} y\r")
    path = tmp_path / "d.vw"
    path.write_text("\n".join(lines) + "\n")
    cfg = InputConfig(bits=18, skip_invalid=skip)

    def collect(workers):
        out, err = [], None
        try:
            for b in iter_batches([str(path)], cfg, chunk_bytes=2048, workers=workers):
                out.append(b)
        except InputError as e:
            err = str(e)
        return out, err

    (seq, e1), (par, e2) = collect(1), collect(3)
    assert e1 == e2 and (e1 is None) == skip
    assert len(seq) == len(par) > 10
    for a, b in zip(seq, par):
        for f in ("labels", "weights", "indptr", "indices", "values", "line_numbers"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert a.tags == b.tags
        assert [str(x) for x in a.skipped] == [str(x) for x in b.skipped]
    if skip:
        assert sum(len(b.skipped) for b in par) == 2


def test_pow10_table_is_exact():
    """The double-double powers of ten equal an exact rational computation (fractions.Fraction)."""
    from fractions import Fraction

    from lomtree_cli.kernels import parse as P

    for j, k in enumerate(range(P._P10_LO, P._P10_HI + 1)):
        f = Fraction(10) ** k * (Fraction(2) ** 200 if k < -280 else 1)
        assert P._P10_S[j] == (k < -280)
        assert P._P10_H[j] == float(f) and P._P10_L[j] == float(f - Fraction(P._P10_H[j])), k


def test_pow10_module_is_generated():
    """``pow10_table.py`` holds what ``_pow10_source`` writes (regenerate it there after a change)."""
    import inspect

    from lomtree_cli.kernels import parse as P
    from lomtree_cli.kernels import pow10_table

    assert inspect.getsource(pow10_table) == P._pow10_source()
    assert (P._P10_LO, P._P10_HI, P._P10_H.shape) == (-350, 308, (659,))
