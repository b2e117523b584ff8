"""Parse kernels: a uint8 buffer of complete lines → CSR arrays, one compiled call per chunk.

Grammar implemented (docs/ALGORITHMS.md §1.1, §1.4)::

    vw_line     := label_section ( "|" namespace )+
    label_sec   := [ ignored "\\t" ] { token }            tokens split on runs of ' ', '\\t'
    namespace   := [ ns_name [ ":" float ] ] { ws feature }
    feature     := name [ ":" float ]  |  ":" float
    name        := 1+ bytes, none of ' ', '\\t', ':', '|', '\\r'
    float       := [+-]? ( digits [ "." digits? ] | "." digits ) ( [eE] [+-]? digits )?

    libsvm_line := label { ws index ":" float } [ ws ] [ "#" comment ]

Speed: every byte read is ``buf[np.uint64(i)]``. numba adds a negative-index wrap-around fix-up
to an index it cannot prove non-negative (a position advanced in a ``while`` loop); an unsigned
index has none, which made the VW-format kernel about 1.4x faster on Sector's lines.

Choices (the spec leaves them open; the reference parser ``tests/reference/parser_ref.py``
implements the same ones):

* The line end ``\\n`` and any number of trailing ``\\r`` are removed. Inside a line, ``\\r`` is
  whitespace (like ' ' and '\\t'), both in the label and in the feature section. An empty line
  is blank: skipped, but it counts for line numbers. VW format: a line of whitespace only is an
  unlabeled example without features (VW reads it so and writes a prediction for it); LIBSVM:
  such a line is blank.
* A line of more than ``max_line`` bytes before its ``\\n`` is ``line_too_long`` (the reader,
  ``parsing._chunks``, finds longer lines than a buffer holds without buffering them whole).
* Labels: ``[+-]?digits`` (LIBSVM: also followed by ``.`` and zeros only), plus
  ``label_offset``; the sum must be in ``[1, 2**31)``; with ``low_unlabeled`` (predict) a sum
  below 1 is read as the label -1 (given but unlabeled, counted by the driver).
* VW feature values as VW 9 reads them: ``name:`` (empty) is value 1; ``name:word`` where
  ``word`` is not a number is the feature ``name^word``, value 1, index
  ``H(word, H(name, nh))``; but NaN/inf spellings (``nan``, ``inf``, ``infinity``) are
  ``feat_value`` errors (VW reads them as numbers: NaN -> 0, inf kept; lomtree keeps its
  weights finite).
* An all-digit feature or namespace name (VW) or LIBSVM index of value >= 2**64 is an error
  (``index_range`` / ``libsvm_index``): it would wrap around to a small index.
* Label section: the last token is the tag if it starts with ``'`` (stripped) or ends right
  before the first ``|``. A bare ``'`` gives the empty tag ``''``. Errors are checked in this
  order: ``label_tokens`` (after tag removal), ``label_int``, ``weight``.
* Values: the final value is ``float32(float64(value) * float64(ns_weight))``; a value that
  parses but is not finite in float64 is ``feat_value`` (also ``ns_weight``, ``weight``); a
  finite value that overflows float32 is also ``feat_value`` (kind 3 = out of range). A final
  value equal to 0 (including float32 underflow) is dropped.
* Anonymous features (``:v``) get index ``(nh + c) & mask``; ``c`` counts every anonymous
  feature of the namespace occurrence, including dropped zero-valued ones (VW increments its
  counter before the zero test).
* ``ns_name`` and ``feat_value``/``ns_weight`` columns point at the offending byte/token; the
  reported token runs to the next whitespace or ``|``. ``no_bar`` has column 0.
* LIBSVM: ``#`` anywhere starts a comment (the rest of the line is ignored); a line that is
  empty after that is blank. The label is a ``float`` that must be integral, and
  ``label + label_offset`` must be in ``[1, 2**31)``. A label token containing ``,`` is
  ``libsvm_multilabel``. The index hash is ``index & mask`` (seed 0, hash_seed is not added),
  computed with wrapping uint64 arithmetic. Index 0 is allowed.

Float parsing is done here (no Python): up to 19 significant digits are kept in a uint64
(further digits are truncated), then ``m * 10**e`` is computed exactly-rounded by the Clinger fast
path when ``m < 2**53`` and ``|e| <= 22``, otherwise in double-double arithmetic against a table of
double-double powers of ten (error far below 1 ulp; results equal ``float(token)`` except possibly
in near-halfway cases of > 19 digits).

Outputs of ``parse_vw_chunk`` / ``parse_libsvm_chunk`` (n examples, nnz features, m errors):

    labels : int64 (n,)         0 = unlabeled
    weights : float64 (n,)
    indptr : int64 (n + 1,)
    indices : int64 (nnz,)      masked
    values : float32 (nnz,)
    line_numbers : int64 (n,)
    tags : int64 (n, 2)         byte span [start, end) of the tag in ``buf``, or (-1, -1)
    errors : int64 (m, 6)       rows (line, column, reason code, tok_start, tok_end, kind)
    newlines : int              number of ``\n`` bytes in ``buf`` (where the next chunk's lines start)

In strict mode (``skip_invalid`` False) the kernel stops at the first bad line: ``errors`` has one
row and the outputs hold the examples before it. ``kind``: 0 not a number / malformed, 1 not
finite, 2 negative, 3 out of range.
"""

from __future__ import annotations

import numpy as np

from . import jit, kernel, load_u64
from . import pow10_table as _pow10

from .hashing import hash_bytes_xxh32

# reason codes (docs/ALGORITHMS.md §1.2); index into REASONS
REASONS = (
    "",
    "no_bar",
    "label_int",
    "label_tokens",
    "weight",
    "ns_name",
    "ns_weight",
    "feat_value",
    "libsvm_label",
    "libsvm_pair",
    "libsvm_index",
    "libsvm_value",
    "libsvm_multilabel",
    "line_too_long",
    "index_range",
    "label_set",
    "xmc_label",
    "xmc_index",
)
NO_BAR, LABEL_INT, LABEL_TOKENS, WEIGHT, NS_NAME, NS_WEIGHT, FEAT_VALUE = 1, 2, 3, 4, 5, 6, 7
LIBSVM_LABEL, LIBSVM_PAIR, LIBSVM_INDEX, LIBSVM_VALUE, LIBSVM_MULTILABEL = 8, 9, 10, 11, 12
LINE_TOO_LONG, INDEX_RANGE = 13, 14
LABEL_SET, XMC_LABEL, XMC_INDEX = 15, 16, 17
BLANK = -1
KIND_NAN, KIND_INF, KIND_NEG, KIND_RANGE = 0, 1, 2, 3

_M32 = np.uint64(0xFFFFFFFF)
_U10 = np.uint64(10)
_U1 = np.uint64(1)
_LABEL_LIMIT = 2**31
#: the largest importance weight: a larger one is a malformed line. One example weighing more than
#: a million others is a typo or an attack, and such weights overflow the adaptive sums (float32)
#: of its features: the run diverged and its model was lost
MAX_WEIGHT = 1e6
_LABEL_CAP = 2**40  # a label's digits stop accumulating here (|label_offset| < 2**31: no overflow)
_U64_DIV10 = np.uint64(1844674407370955161)  # (2**64 - 1) // 10; the remainder is 5
_U5 = np.uint64(5)


def _pow10_table(lo: int, hi: int):
    """Double-double 10**k for k in [lo, hi]: (hi part, lo part, scaled flag), exact to ~2**-106.

    Entries with k < -280 are stored times 2**200 (scaled = 1) to stay clear of subnormals.
    Exact rational arithmetic on Python integers (``int / int`` is correctly rounded): each
    entry is ``p/q``, ``hi = p/q`` rounded, ``lo = (p*b - a*q) / (q*b)`` rounded, where
    ``hi = a/b`` exactly. (``fractions.Fraction`` gave the same table in 12 ms per start.)
    """
    n = hi - lo + 1
    ph = np.empty(n, np.float64)
    pl = np.empty(n, np.float64)
    sc = np.zeros(n, np.int64)
    for j, k in enumerate(range(lo, hi + 1)):
        p, q = (10**k, 1) if k >= 0 else (1, 10**-k)
        if k < -280:
            p <<= 200
            sc[j] = 1
        h = p / q
        a, b = h.as_integer_ratio()
        ph[j] = h
        pl[j] = (p * b - a * q) / (q * b)
    return ph, pl, sc


def _pow10_source(lo: int = -350, hi: int = 308) -> str:
    """The text of ``pow10_table.py``: ``_pow10_table(lo, hi)`` as literals (``repr`` of a float
    reads back exactly). ``tests/test_parsing.py`` checks the file is this text."""
    ph, pl, _ = _pow10_table(lo, hi)

    def block(name, a):
        return f"{name} = (\n" + "".join(f"    {float(x)!r},\n" for x in a) + ")\n"

    return ('"""Double-double powers of ten for ``parse._scale_pow10``: ``H[j] + L[j]`` = 10**(LO + j), entries\n'
            'below 10**-280 times 2**200. Generated by ``parse._pow10_source()`` (do not edit); literals load\n'
            'with the bytecode, where computing the table took ~5 ms of every command\'s start-up."""\n\n'
            f"LO = {lo}\nHI = {hi}\n" + block("H", ph) + block("L", pl))


_P10_LO = _pow10.LO
_P10_HI = _pow10.HI
_P10_H = np.array(_pow10.H, np.float64)
_P10_L = np.array(_pow10.L, np.float64)
_P10_S = (np.arange(_P10_LO, _P10_HI + 1) < -280).astype(np.int64)
_EXACT10 = np.array([10.0**k for k in range(23)], np.float64)
_TWO_M200 = 2.0**-200
_TWO_M60 = 2.0**-60
_TWO_P60 = 2.0**60
_SPLITTER = 134217729.0  # 2**27 + 1
_TWO_P200 = 2.0**200
_MIN_NORMAL = 2.0**-1022
_SUB_ULP = 2.0**-1074  # spacing of the subnormals
_SUB_HALF_SCALED = 2.0**-875  # half of it, times 2**200

# _newline_bits, _find_newline, _count_newlines: eight bytes at a time
_B0A = np.uint64(0x0A0A0A0A0A0A0A0A)
_B7F = np.uint64(0x7F7F7F7F7F7F7F7F)
_B80 = np.uint64(0x8080808080808080)
_B80_1 = np.uint64(0x80)
_U8 = np.uint64(8)

# _digit_run, _digits_value: up to eight digits at once
_U0 = np.uint64(0)
_U7 = np.uint64(7)
_U16 = np.uint64(16)
_U32 = np.uint64(32)
_U56 = np.uint64(56)
_D30 = np.uint64(0x3030303030303030)
_D76 = np.uint64(0x7676767676767676)
_BYTE_INDEX = np.uint64(0x0001020304050607)
_LOW_BYTES = np.uint64(0x000000FF000000FF)
_PAIR_MUL = np.uint64(100 + (1000000 << 32))
_QUAD_MUL = np.uint64(1 + (10000 << 32))
_POW10_U64 = np.array([10**k for k in range(9)], np.uint64)


@kernel(inline="always")
def _is_ws(c):
    return c == 32 or c == 9 or c == 13


@kernel(inline="always")
def _split(a):
    if abs(a) > 1e290:
        a2 = a * _TWO_M60
        t = _SPLITTER * a2
        h = t - (t - a2)
        return h * _TWO_P60, (a2 - h) * _TWO_P60
    t = _SPLITTER * a
    h = t - (t - a)
    return h, a - h


@kernel()
def _scale_pow10(m, e10):
    """Correctly rounded (but for near-ties) float64 of ``m * 10**e10``; m: uint64 > 0."""
    if m < np.uint64(9007199254740992) and -22 <= e10 <= 22:
        fm = np.float64(m)
        if e10 >= 0:
            return fm * _EXACT10[e10]
        return fm / _EXACT10[-e10]
    # m as double-double (m < 1e19 < 2**64)
    mh = np.float64(m)
    um = np.uint64(mh)
    if m >= um:
        ml = np.float64(m - um)
    else:
        ml = -np.float64(um - m)
    j = e10 - _P10_LO
    ph = _P10_H[j]
    pl = _P10_L[j]
    p = mh * ph
    if not np.isfinite(p):
        return p
    ah, al = _split(mh)
    bh, bl = _split(ph)
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    err += mh * pl + ml * ph
    r = p + err
    if _P10_S[j] == 1:
        t = r * _TWO_M200
        if t < _MIN_NORMAL:
            # a subnormal result is rounded twice (r to 53 bits, then t to the subnormal grid, one
            # bit coarser here): when r fell on a midpoint of that grid, the remainder of r
            # decides the side instead of ties-to-even
            d = (r - t * _TWO_P200) + ((p - r) + err)
            if d > _SUB_HALF_SCALED:
                t += _SUB_ULP
            elif d < -_SUB_HALF_SCALED:
                t -= _SUB_ULP
        r = t
    return r


@kernel(inline="always")
def _scaled(m, nd, e10):
    """``m * 10**e10`` for ``m > 0`` of ``nd`` significant digits: inf above the float64 range,
    0 below it, else ``_scale_pow10``."""
    if nd + e10 > 309:
        return np.inf
    if nd + e10 < -325:
        return 0.0
    return _scale_pow10(m, e10)


@kernel(inline="always")
def _sign(buf, i, e):
    """(negative, position after it) of an optional ``+``/``-`` at ``buf[i:e]``."""
    if i < e and (buf[np.uint64(i)] == 43 or buf[np.uint64(i)] == 45):
        return buf[np.uint64(i)] == 45, i + 1
    return False, i


@kernel(inline="always")
def _exponent(buf, i, e):
    """(exponent, end) of an exponent part ``[eE][+-]?[0-9]+`` at ``buf[i:e]``; (0, i) when there
    is none (an ``e`` without digits is not part of the float). Values beyond 10**5 saturate."""
    if i < e and (buf[np.uint64(i)] == 101 or buf[np.uint64(i)] == 69):
        j = i + 1
        eneg = False
        if j < e and (buf[np.uint64(j)] == 43 or buf[np.uint64(j)] == 45):
            eneg = buf[np.uint64(j)] == 45
            j += 1
        if j < e and 48 <= buf[np.uint64(j)] <= 57:
            x = 0
            while j < e and 48 <= buf[np.uint64(j)] <= 57:
                if x < 100000:
                    x = x * 10 + (np.int64(buf[np.uint64(j)]) - 48)
                j += 1
            return (-x if eneg else x), j
    return 0, i


@kernel(inline="always")
def _digit_run(buf, i, e):
    """(n, t): ``n`` = how many of the bytes ``buf[i:i+8]`` are digits before the first other byte
    (0..8, at most ``e - i``); ``t`` = those bytes minus ``'0'`` as one little-endian uint64
    (meaningful in its first ``n`` bytes). Needs ``i + 8 <= buf.shape[0]``.

    A byte is a digit iff ``b - '0'`` (``t``'s byte) is below 10: adding 0x76 sets its high bit for
    anything above 9, and a byte below '0' wraps to >= 0xD0. The borrows and carries of these
    eight-bytes-at-once operations only reach bytes after the first non-digit. The first non-digit
    is the lowest high bit ``low``: ``(low >> 7) = 1 << 8n``, times 0x0001020304050607, has ``n``
    in its top byte."""
    t = load_u64(buf, i) - _D30
    m = ((t + _D76) | t) & _B80
    if m == _U0:
        n = 8
    else:
        n = np.int64((((m & (~m + _U1)) >> _U7) * _BYTE_INDEX) >> _U56)
    if n > e - i:
        n = e - i
    return n, t


@kernel(inline="always")
def _digits_value(t, n):
    """The decimal value of the first ``n`` (1..8) digit bytes of ``t`` (``_digit_run``): shifted to
    the top (the digits after them drop out, zero digits come in front), then summed in pairs,
    fours and eights by three multiplications (simdjson's eight-digit conversion)."""
    v = t << np.uint64(8 * (8 - n))
    v = v * _U10 + (v >> _U8)
    return (((v & _LOW_BYTES) * _PAIR_MUL) + (((v >> _U16) & _LOW_BYTES) * _QUAD_MUL)) >> _U32


@kernel(inline="always")
def _mantissa(buf, i, e):
    """(m, nd, nfrac, end) of the digits ``int[.frac]`` at ``buf[i:e]``: ``nd`` digits in all
    (leading zeros included), the first 19 of them in ``m``; ``nfrac`` after the point.

    Up to 7 digits on each side of the point are read eight bytes at a time (``_digit_run``), when
    the buffer has 16 bytes from ``i``; anything else one byte at a time."""
    if i + 16 <= buf.shape[0]:
        n1, t1 = _digit_run(buf, i, e)
        if n1 < 8:
            m = _digits_value(t1, n1) if n1 > 0 else _U0
            j = i + n1
            if j >= e or buf[np.uint64(j)] != 46:
                return m, n1, 0, j
            n2, t2 = _digit_run(buf, j + 1, e)
            if n2 < 8:
                if n2 > 0:
                    m = m * _POW10_U64[n2] + _digits_value(t2, n2)
                return m, n1 + n2, n2, j + 1 + n2
    m = np.uint64(0)
    nd = 0  # digits seen; the first 19 are in m (no overflow, also as plain Python)
    while i < e and 48 <= buf[np.uint64(i)] <= 57:
        if nd < 19:
            m = m * _U10 + np.uint64(buf[np.uint64(i)] - 48)
        nd += 1
        i += 1
    nfrac = 0
    if i < e and buf[np.uint64(i)] == 46:
        i += 1
        fs = i
        while i < e and 48 <= buf[np.uint64(i)] <= 57:
            if nd < 19:
                m = m * _U10 + np.uint64(buf[np.uint64(i)] - 48)
            nd += 1
            i += 1
        nfrac = i - fs
    return m, nd, nfrac, i


@kernel()
def parse_float(buf, i, e):
    """Parse the ``float`` rule at ``buf[i:e]``; stop at the first byte that cannot continue it.

    Returns
    -------
    (value float64, end int64, ok bool): ``ok`` False when no valid float starts at ``i``.

    The common case (at most 19 digits in all, the usual ``0.00456`` or ``-0.4667``) takes one
    pass that accumulates every digit (``_mantissa``); a longer digit string is read again by
    ``_parse_float_long``, which keeps the first 19 significant digits.
    """
    start = i
    neg, i = _sign(buf, i, e)
    m, nd, nfrac, i = _mantissa(buf, i, e)
    if nd == 0:
        return 0.0, start, False
    if nd > 19:
        return _parse_float_long(buf, start, e)
    e10 = -nfrac
    x, i = _exponent(buf, i, e)
    e10 += x
    if m == 0:
        v = 0.0
    elif m < np.uint64(9007199254740992) and -22 <= e10 <= 22:
        fm = np.float64(m)
        v = fm * _EXACT10[e10] if e10 >= 0 else fm / _EXACT10[-e10]
    else:
        # nd: significant digits of m (m < 10**19)
        nd = 1
        t = m
        while t >= _U10:
            t = t // _U10
            nd += 1
        v = _scaled(m, nd, e10)
    return (-v if neg else v), i, True


@kernel()
def _parse_float_long(buf, i, e):
    """``parse_float`` for a float of more than 19 digits: the first 19 significant digits."""
    start = i
    neg, i = _sign(buf, i, e)
    m = np.uint64(0)
    nd = 0
    e10 = 0
    any_digit = False
    while i < e and 48 <= buf[np.uint64(i)] <= 57:
        d = np.int64(buf[np.uint64(i)]) - 48
        any_digit = True
        if m == 0 and d == 0:
            pass
        elif nd < 19:
            m = m * _U10 + np.uint64(d)
            nd += 1
        else:
            e10 += 1
        i += 1
    if i < e and buf[np.uint64(i)] == 46:
        i += 1
        while i < e and 48 <= buf[np.uint64(i)] <= 57:
            d = np.int64(buf[np.uint64(i)]) - 48
            any_digit = True
            if m == 0 and d == 0:
                e10 -= 1
            elif nd < 19:
                m = m * _U10 + np.uint64(d)
                nd += 1
                e10 -= 1
            i += 1
    if not any_digit:
        return 0.0, start, False
    x, i = _exponent(buf, i, e)
    e10 += x
    v = 0.0 if m == 0 else _scaled(m, nd, e10)
    return (-v if neg else v), i, True


@kernel()
def _digits_overflow(buf, s, e):
    """True when the decimal digits ``buf[s:e]`` are a number >= 2**64 (an index that would wrap)."""
    acc = np.uint64(0)
    for j in range(s, e):
        d = np.uint64(buf[np.uint64(j)] - 48)
        if acc > _U64_DIV10 or (acc == _U64_DIV10 and d > _U5):
            return True
        acc = acc * _U10 + d
    return False


@kernel(inline="always")
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@kernel()
def _is_nonfinite_word(buf, s, e):
    """True when ``buf[s:e]`` is what C's ``strtod`` reads as NaN or infinity (``[+-]?`` then
    ``nan``, ``nan(...)``, ``inf`` or ``infinity``, any case): VW reads such a value as a number
    (NaN -> 0 with a warning, inf kept); lomtree refuses it rather than hash it as a string."""
    if s < e and (buf[np.uint64(s)] == 43 or buf[np.uint64(s)] == 45):
        s += 1
    n = e - s
    if n < 3:
        return False
    a = _lower(buf[np.uint64(s)])
    b = _lower(buf[np.uint64(s + 1)])
    c = _lower(buf[np.uint64(s + 2)])
    if a == 110 and b == 97 and c == 110:  # nan
        return n == 3 or buf[np.uint64(s + 3)] == 40
    if a == 105 and b == 110 and c == 102:  # inf
        if n == 3:
            return True
        if n != 8:
            return False
        word = (105, 110, 105, 116, 121)  # "inity"
        for j in range(5):
            if _lower(buf[np.uint64(s + 3 + j)]) != word[j]:
                return False
        return True
    return False


@kernel(inline="always")
def _hash_scanned(buf, s, e, alldig, seed):
    """Rule H for ``buf[s:e]`` (non-empty) when the caller already knows whether it is all digits."""
    if alldig:
        acc = np.uint64(0)
        for j in range(s, e):
            acc = acc * _U10 + np.uint64(buf[np.uint64(j)] - 48)
        return acc + seed
    return np.uint64(hash_bytes_xxh32(buf, s, e, seed))


@kernel(inline="always")
def _token_end(buf, i, e):
    """End of the token starting at ``i``: next ' ', '\\t', '\\r', '|' or ``e``."""
    while i < e and not _is_ws(buf[np.uint64(i)]) and buf[np.uint64(i)] != 124:
        i += 1
    return i


@kernel(inline="always")
def _ends_token(buf, q, e):
    """True when a float that parsed up to ``q`` ends its token there (``q == e``, or ``buf[q]``
    is ' ', '\t', '\r' or '|'). Same as ``q == _token_end(buf, start, e)`` for a float that
    started at ``start``, since no byte of a float ends a token, but without scanning it again."""
    return q >= e or _is_ws(buf[np.uint64(q)]) or buf[np.uint64(q)] == 124


_BAD_LABEL = -(2**62)  # _int_label: not an integer
_RANGE_LABEL = -(2**62) + 1  # _int_label: label + label_offset out of range


@kernel()
def _int_label(buf, s, e, label_offset, low_unlabeled):
    """The class label of the token ``buf[s:e]``: ``[+-]?digits``, plus ``label_offset``; it must
    be in ``[1, 2**31)``. A label below 1 is -1 (given, read as unlabeled) when ``low_unlabeled``
    (``predict``), else ``_RANGE_LABEL``; ``_BAD_LABEL`` when the token is not an integer."""
    neg, i = _sign(buf, s, e)
    if i >= e:
        return _BAD_LABEL
    v = 0
    for j in range(i, e):
        c = buf[np.uint64(j)]
        if c < 48 or c > 57:
            return _BAD_LABEL
        if v < _LABEL_CAP:
            v = v * 10 + (np.int64(c) - 48)
    lab = (-v if neg else v) + label_offset
    if lab >= _LABEL_LIMIT:
        return _RANGE_LABEL
    if lab < 1:
        return -1 if low_unlabeled else _RANGE_LABEL
    return lab


@kernel()
def _label_set(buf, s, e, label_offset, low_unlabeled, string_labels, label_cap, lids, lend, m):
    """The label set ``buf[s:e]`` (labels separated by single commas) written to ``lids[m:]``:
    integer labels plus ``label_offset`` or, with ``string_labels``, each name's byte span
    (``lids`` its start, ``lend`` its end). ``label_cap > 0``: a label as written must be below
    it (the XMC header's L). Returns (m after the set, status, token start, token end): status 0
    ok, 1 an empty or non-integer label (token: the whole set), 2 out of range (token: that
    label), 3 a label below 1 read as unlabeled (``low_unlabeled``)."""
    p = s
    low = False
    while True:
        q = p
        while q < e and buf[np.uint64(q)] != 44:
            q += 1
        if q == p:
            return m, 1, s, e
        if string_labels:
            lids[m] = p
            lend[m] = q
        else:
            lab = _int_label(buf, p, q, label_offset, low_unlabeled)
            if lab == _BAD_LABEL:
                return m, 1, s, e
            if lab == _RANGE_LABEL or (label_cap > 0 and lab > 0 and lab - label_offset >= label_cap):
                return m, 2, p, q
            if lab < 1:
                low = True
            lids[m] = lab
        m += 1
        if q >= e:
            break
        p = q + 1
    return m, 3 if low else 0, s, e


@kernel()
def _parse_vw_line(buf, s, e, seed, mask, label_offset, low_unlabeled, indices, values, nnz, nsid,
                   string_labels, lab_span, multilabel, lids, lend, m):
    """Parse one VW line ``buf[s:e]`` (no line end); features are written from ``nnz`` on.

    ``nsid[j]`` gets the namespace index of feature ``j`` as VW defines it: the first byte of the
    namespace name, 32 (' ') for the default namespace. With ``string_labels`` the label token is
    not read as an integer: its byte span goes to ``lab_span`` (``(-1, -1)`` without a label) and
    the label returned is 1 (labeled) or 0; ``labels.py`` maps the spans to ids. With
    ``multilabel`` the label token is a set (``_label_set``, written from ``lids[m]`` on) and the
    label returned is 1 (a set given), 0 (none) or -1 (a label below 1 read as unlabeled).

    Returns (nnz, label, weight, tag_s, tag_e, code, err_pos, tok_s, tok_e, kind, m);
    code 0 = ok, BLANK = blank line, else a reason code (err_pos -1 = no column).
    """
    if s == e:
        return nnz, 0, 1.0, -1, -1, BLANK, -1, s, e, 0, m
    blank = True
    for j in range(s, e):
        if not _is_ws(buf[np.uint64(j)]):
            blank = False
            break
    if blank:  # whitespace only: an unlabeled example without features (as VW reads it)
        return nnz, 0, 1.0, -1, -1, 0, -1, 0, 0, 0, m
    bar = s
    while bar < e and buf[np.uint64(bar)] != 124:
        bar += 1
    if bar == e:
        return nnz, 0, 1.0, -1, -1, NO_BAR, -1, s, e, 0, m
    # ---- label section
    ls = s
    for j in range(s, bar):
        if buf[np.uint64(j)] == 9:
            ls = j + 1
            break
    ntok = 0
    t0s = t0e = t1s = t1e = t2s = t2e = ts = te = 0
    j = ls
    while j < bar:
        while j < bar and _is_ws(buf[np.uint64(j)]):
            j += 1
        if j >= bar:
            break
        ts = j
        while j < bar and not _is_ws(buf[np.uint64(j)]):
            j += 1
        te = j
        if ntok == 0:
            t0s, t0e = ts, te
        elif ntok == 1:
            t1s, t1e = ts, te
        elif ntok == 2:
            t2s, t2e = ts, te
        ntok += 1
    tag_s = -1
    tag_e = -1
    if ntok > 0 and (buf[np.uint64(ts)] == 39 or te == bar):
        tag_s = ts + 1 if buf[np.uint64(ts)] == 39 else ts
        tag_e = te
        ntok -= 1
    if ntok > 2:
        return nnz, 0, 1.0, -1, -1, LABEL_TOKENS, t2s, t2s, t2e, 0, m
    label = 0
    weight = 1.0
    lab_span[0] = -1
    lab_span[1] = -1
    if ntok >= 1 and multilabel:
        m, st, bs, be = _label_set(buf, t0s, t0e, label_offset, low_unlabeled, string_labels, 0, lids, lend, m)
        if st == 1:
            return nnz, 0, 1.0, -1, -1, LABEL_SET, t0s, bs, be, KIND_NAN, m
        if st == 2:
            return nnz, 0, 1.0, -1, -1, LABEL_SET, bs, bs, be, KIND_RANGE, m
        label = -1 if st == 3 else 1
    elif ntok >= 1 and string_labels:
        lab_span[0] = t0s
        lab_span[1] = t0e
        label = 1
    elif ntok >= 1:
        label = _int_label(buf, t0s, t0e, label_offset, low_unlabeled)
        if label == _BAD_LABEL:
            return nnz, 0, 1.0, -1, -1, LABEL_INT, t0s, t0s, t0e, 0, m
        if label == _RANGE_LABEL:
            return nnz, 0, 1.0, -1, -1, LABEL_INT, t0s, t0s, t0e, KIND_RANGE, m
    if ntok == 2:
        w, q, ok = parse_float(buf, t1s, t1e)
        if not ok or q != t1e:
            return nnz, 0, 1.0, -1, -1, WEIGHT, t1s, t1s, t1e, KIND_NAN, m
        if not np.isfinite(w):
            return nnz, 0, 1.0, -1, -1, WEIGHT, t1s, t1s, t1e, KIND_INF, m
        if w < 0:
            return nnz, 0, 1.0, -1, -1, WEIGHT, t1s, t1s, t1e, KIND_NEG, m
        if w > MAX_WEIGHT:
            return nnz, 0, 1.0, -1, -1, WEIGHT, t1s, t1s, t1e, KIND_RANGE, m
        weight = w
    # ---- feature section; buf[p] == '|' at the top of the loop
    p = bar
    while p < e:
        p += 1
        nh = np.uint64(seed)
        nsc = np.uint8(32)
        nsw = 1.0
        anon = np.uint64(0)
        if p < e and not _is_ws(buf[np.uint64(p)]) and buf[np.uint64(p)] != 124:
            if buf[np.uint64(p)] == 58:
                return nnz, 0, 1.0, -1, -1, NS_NAME, p, p, _token_end(buf, p, e), 0, m
            ns_s = p
            nsc = buf[np.uint64(p)]
            alldig = True
            while p < e and not _is_ws(buf[np.uint64(p)]) and buf[np.uint64(p)] != 124 and buf[np.uint64(p)] != 58:
                alldig = alldig and 48 <= buf[np.uint64(p)] <= 57
                p += 1
            if alldig and p - ns_s > 19 and _digits_overflow(buf, ns_s, p):
                return nnz, 0, 1.0, -1, -1, INDEX_RANGE, ns_s, ns_s, p, KIND_RANGE, m
            nh = _hash_scanned(buf, ns_s, p, alldig, seed) & _M32
            if p < e and buf[np.uint64(p)] == 58:
                vs = p + 1
                w, q, ok = parse_float(buf, vs, e)
                if not ok or not _ends_token(buf, q, e):
                    return nnz, 0, 1.0, -1, -1, NS_WEIGHT, vs, vs, _token_end(buf, vs, e), KIND_NAN, m
                if not np.isfinite(w):
                    return nnz, 0, 1.0, -1, -1, NS_WEIGHT, vs, vs, _token_end(buf, vs, e), KIND_INF, m
                nsw = w
                p = q
        while True:
            while p < e and _is_ws(buf[np.uint64(p)]):
                p += 1
            if p >= e or buf[np.uint64(p)] == 124:
                break
            fs = p
            # the name; the value of an all-digit name is accumulated on the way (rule H)
            alldig = True
            acc = np.uint64(0)
            while p < e:
                c = buf[np.uint64(p)]
                if 48 <= c <= 57:
                    acc = acc * _U10 + np.uint64(c - 48)
                elif c == 32 or c == 58 or c == 9 or c == 124 or c == 13:
                    break
                else:
                    alldig = False
                p += 1
            fe = p
            # only a name of 20 digits or more can be >= 2**64 (checked again, off the hot path)
            if alldig and fe - fs > 19 and _digits_overflow(buf, fs, fe):
                return nnz, 0, 1.0, -1, -1, INDEX_RANGE, fs, fs, fe, KIND_RANGE, m
            v = 1.0
            vs = fs  # error position for a float32 overflow of ns_weight alone
            str_s = -1  # start of a string value (``name:word``), else -1
            str_e = -1
            if p < e and buf[np.uint64(p)] == 58:
                vs = p + 1
                if _ends_token(buf, vs, e):  # ``name:``: value 1, as VW (not scaled by ns_weight)
                    p = vs
                    fv = np.float32(1.0)
                else:
                    v, q, ok = parse_float(buf, vs, e)
                    if ok and not _ends_token(buf, q, e):
                        return nnz, 0, 1.0, -1, -1, FEAT_VALUE, vs, vs, _token_end(buf, vs, e), KIND_NAN, m
                    if not ok:
                        te = _token_end(buf, vs, e)
                        if _is_nonfinite_word(buf, vs, te):
                            return nnz, 0, 1.0, -1, -1, FEAT_VALUE, vs, vs, te, KIND_INF, m
                        # ``name:word``: the feature ``name^word`` of value 1, hashed as VW
                        # chains it: H(word, H(name, namespace hash))
                        str_s = vs
                        str_e = te
                        p = te
                        fv = np.float32(1.0)
                    else:
                        if not np.isfinite(v):
                            return nnz, 0, 1.0, -1, -1, FEAT_VALUE, vs, vs, _token_end(buf, vs, e), KIND_INF, m
                        p = q
                        fv = np.float32(v * nsw)
            else:
                fv = np.float32(nsw)
            if not np.isfinite(fv):
                return nnz, 0, 1.0, -1, -1, FEAT_VALUE, vs, vs, _token_end(buf, vs, e), KIND_RANGE, m
            if str_s >= 0:
                inner = (acc + nh if alldig and fe > fs else np.uint64(hash_bytes_xxh32(buf, fs, fe, nh))) & _M32
                h = np.uint64(hash_bytes_xxh32(buf, str_s, str_e, inner))
            elif fe == fs:
                h = nh + anon
                anon += np.uint64(1)
            elif fv != 0:
                h = acc + nh if alldig else np.uint64(hash_bytes_xxh32(buf, fs, fe, nh))
            else:
                h = np.uint64(0)
            if fv != 0:
                indices[nnz] = np.int64(h & mask)
                values[nnz] = fv
                nsid[nnz] = nsc
                nnz += 1
    return nnz, label, weight, tag_s, tag_e, 0, -1, 0, 0, 0, m


@kernel()
def _libsvm_label(buf, ls, le, label_offset, low_unlabeled):
    """The label of a LIBSVM line's label token ``buf[ls:le]``: an exact integer (``[+-]digits``,
    optionally ``.0...``; 2.9999999999999999999 is not 3) plus ``label_offset``, or -1 (below 1,
    read as unlabeled), or ``-(reason << 8 | kind)`` of the error."""
    for j in range(ls, le):
        if buf[np.uint64(j)] == 44:
            return -(LIBSVM_MULTILABEL << 8)
    ie = le
    j = ls
    while j < le and buf[np.uint64(j)] != 46:
        j += 1
    if j < le:
        ie = j
        for q in range(j + 1, le):
            if buf[np.uint64(q)] != 48:
                return -(LIBSVM_LABEL << 8 | KIND_NAN)
    label = _int_label(buf, ls, ie, label_offset, low_unlabeled)
    if label == _BAD_LABEL:
        return -(LIBSVM_LABEL << 8 | KIND_NAN)
    if label == _RANGE_LABEL:
        return -(LIBSVM_LABEL << 8 | KIND_RANGE)
    return label


@kernel()
def _parse_libsvm_line(buf, s, e, mask, label_offset, low_unlabeled, indices, values, nnz, multilabel, xmc,
                       index_cap, label_cap, lids, lend, m):
    """Parse one LIBSVM line ``buf[s:e]``; same return convention as ``_parse_vw_line``.

    ``multilabel``: the label token is a set (``_label_set``), and a line that starts with
    whitespace has the empty set. ``xmc`` (the Extreme Classification Repository's format):
    feature indices are 0-based and must be below ``index_cap`` (the header's F); index i is
    hashed as the LIBSVM index i + 1, so both formats give one model for one data set."""
    ce = s
    while ce < e and buf[np.uint64(ce)] != 35:
        ce += 1
    p = s
    while p < ce and _is_ws(buf[np.uint64(p)]):
        p += 1
    if p >= ce:
        return nnz, 0, 1.0, -1, -1, BLANK, -1, s, e, 0, m
    ls = p
    if not multilabel or p == s:  # (a multi-label line that starts with whitespace has no labels)
        while p < ce and not _is_ws(buf[np.uint64(p)]):
            p += 1
    le = p
    label = 1
    if multilabel:
        if le > ls:
            m, st, bs, be = _label_set(buf, ls, le, label_offset, low_unlabeled, False, label_cap, lids, lend, m)
            if st == 1:
                return nnz, 0, 1.0, -1, -1, LABEL_SET, ls, bs, be, KIND_NAN, m
            if st == 2:
                return nnz, 0, 1.0, -1, -1, XMC_LABEL if label_cap > 0 else LABEL_SET, bs, bs, be, KIND_RANGE, m
            if st == 3:
                label = -1
    else:
        label = _libsvm_label(buf, ls, le, label_offset, low_unlabeled)
        if label < 0 and label != -1:
            return nnz, 0, 1.0, -1, -1, -label >> 8, ls, ls, le, -label & 255, m
    while True:
        while p < ce and _is_ws(buf[np.uint64(p)]):
            p += 1
        if p >= ce:
            break
        ts = p
        colon = -1
        while p < ce and not _is_ws(buf[np.uint64(p)]):
            if colon < 0 and buf[np.uint64(p)] == 58:
                colon = p
            p += 1
        te = p
        if colon < 0:
            return nnz, 0, 1.0, -1, -1, LIBSVM_PAIR, ts, ts, te, 0, m
        if colon == ts:
            return nnz, 0, 1.0, -1, -1, LIBSVM_INDEX, ts, ts, colon, 0, m
        idx = np.uint64(0)
        for j in range(ts, colon):
            c = buf[np.uint64(j)]
            if c < 48 or c > 57:
                return nnz, 0, 1.0, -1, -1, LIBSVM_INDEX, ts, ts, colon, 0, m
            idx = idx * _U10 + np.uint64(c - 48)
        if colon - ts > 19 and _digits_overflow(buf, ts, colon):  # >= 2**64: it wrapped
            return nnz, 0, 1.0, -1, -1, LIBSVM_INDEX, ts, ts, colon, KIND_RANGE, m
        if xmc:
            if idx >= np.uint64(index_cap):
                return nnz, 0, 1.0, -1, -1, XMC_INDEX, ts, ts, colon, KIND_RANGE, m
            idx += _U1
        v, q, ok = parse_float(buf, colon + 1, te)
        if not ok or q != te:
            return nnz, 0, 1.0, -1, -1, LIBSVM_VALUE, colon + 1, colon + 1, te, KIND_NAN, m
        if not np.isfinite(v):
            return nnz, 0, 1.0, -1, -1, LIBSVM_VALUE, colon + 1, colon + 1, te, KIND_INF, m
        fv = np.float32(v)
        if not np.isfinite(fv):
            return nnz, 0, 1.0, -1, -1, LIBSVM_VALUE, colon + 1, colon + 1, te, KIND_RANGE, m
        if fv != 0:
            indices[nnz] = np.int64(idx & mask)
            values[nnz] = fv
            nnz += 1
    return nnz, label, 1.0, -1, -1, 0, -1, 0, 0, 0, m


@kernel(inline="always")
def _newline_bits(buf, i):
    """Bit 7 set in exactly the bytes of ``buf[i:i+8]`` that are ``\n`` (the caller guarantees the
    8 bytes): in ``t = x ^ 0x0A..0A`` a byte is zero iff it was ``\n``, and bit 7 of
    ``((t & 0x7F..7F) + 0x7F..7F) | t`` is set exactly in the non-zero bytes (no carry crosses a
    byte; nothing overflows, so the code also runs as plain Python)."""
    t = load_u64(buf, i) ^ _B0A
    return ~(((t & _B7F) + _B7F) | t) & _B80


@kernel(inline="always")
def _find_newline(buf, i, n):
    """Position of the first ``\n`` in ``buf[i:n]``, or ``n`` (``n == buf.shape[0]``), eight bytes
    at a time (``_newline_bits``)."""
    while i + 8 <= n:
        z = _newline_bits(buf, i)
        if z != 0:
            while (z & _B80_1) == 0:
                z >>= _U8
                i += 1
            return i
        i += 8
    while i < n and buf[np.uint64(i)] != 10:
        i += 1
    return i


@kernel(inline="always")
def _count_newlines(buf, n):
    """The number of ``\n`` in ``buf[:n]``, eight bytes at a time (``_newline_bits``)."""
    c = 0
    i = 0
    while i + 8 <= n:
        z = _newline_bits(buf, i)
        while z != 0:
            z &= z - _U1
            c += 1
        i += 8
    while i < n:
        if buf[np.uint64(i)] == 10:
            c += 1
        i += 1
    return c


@jit()
def _parse_chunk(buf, first_line, is_libsvm, mask, seed, label_offset, constant_index, add_constant,
                 skip_invalid, max_line, low_unlabeled, string_labels=False, multilabel=False, xmc=False,
                 index_cap=0, label_cap=0):
    """Shared driver of both formats; see the module docstring for the outputs. The outputs are
    the used parts of arrays sized for the worst case (views: pages never written are never
    touched, and a copy would fault in fresh pages for every chunk). With ``multilabel`` three
    more: ``label_ptr`` (n + 1), ``label_ids`` (m) and ``label_ends`` (m): example i's labels are
    ``label_ids[label_ptr[i]:label_ptr[i+1]]``, sorted and distinct (a repeated label counts
    once), or with ``string_labels`` the byte spans ``[label_ids, label_ends)`` of its names."""
    n = buf.shape[0]
    n_lines = 1 + _count_newlines(buf, n)
    labels = np.empty(n_lines, np.int64)
    weights = np.empty(n_lines, np.float64)
    indptr = np.empty(n_lines + 1, np.int64)
    line_numbers = np.empty(n_lines, np.int64)
    tags = np.empty((n_lines, 2), np.int64)
    errors = np.empty((n_lines, 6), np.int64)
    cap = (n + n_lines) // 2 + n_lines + 16
    indices = np.empty(cap, np.int64)
    values = np.empty(cap, np.float32)
    nsid = np.empty(cap, np.uint8)
    lab_spans = np.empty((n_lines, 2), np.int64)
    lab_span = np.empty(2, np.int64)
    lab_span[0] = -1
    lab_span[1] = -1
    mcap = (n + 3) // 2 + 1 if multilabel else 0  # a label takes at least 2 bytes ('1,') but the last
    lptr = np.empty(n_lines + 1 if multilabel else 1, np.int64)
    lids = np.empty(mcap, np.int64)
    lend = np.empty(mcap if string_labels else 0, np.int64)
    lptr[0] = 0
    m = 0
    umask = np.uint64(mask)
    useed = np.uint64(seed)
    indptr[0] = 0
    n_ex = 0
    n_err = 0
    nnz = 0
    line = first_line
    pos = 0
    while pos < n:
        e = _find_newline(buf, pos, n)
        nxt = e + 1
        le = e
        while le > pos and buf[np.uint64(le - 1)] == 13:
            le -= 1
        if e - pos > max_line:
            r = (nnz, 0, 1.0, -1, -1, LINE_TOO_LONG, -1, pos, pos + 64, 0, m)
        elif is_libsvm:
            lab_span[0] = -1
            lab_span[1] = -1
            r = _parse_libsvm_line(buf, pos, le, umask, label_offset, low_unlabeled, indices, values, nnz,
                                   multilabel, xmc, index_cap, label_cap, lids, lend, m)
            for j in range(nnz, r[0]):
                nsid[j] = 32
        else:
            lab_span[0] = -1
            lab_span[1] = -1
            r = _parse_vw_line(buf, pos, le, useed, umask, label_offset, low_unlabeled, indices, values, nnz,
                               nsid, string_labels, lab_span, multilabel, lids, lend, m)
        code = r[5]
        if code == 0:
            nnz = r[0]
            if add_constant:
                indices[nnz] = constant_index
                values[nnz] = 1.0
                nsid[nnz] = 128  # VW's constant namespace
                nnz += 1
            labels[n_ex] = r[1]
            weights[n_ex] = r[2]
            tags[n_ex, 0] = r[3]
            tags[n_ex, 1] = r[4]
            lab_spans[n_ex, 0] = lab_span[0]
            lab_spans[n_ex, 1] = lab_span[1]
            line_numbers[n_ex] = line
            n_ex += 1
            indptr[n_ex] = nnz
            if multilabel:
                m1 = r[10]
                if not string_labels and m1 - m > 1:
                    seg = lids[m:m1]
                    seg.sort()
                    w = m + 1
                    for j in range(m + 1, m1):
                        if lids[j] != lids[w - 1]:
                            lids[w] = lids[j]
                            w += 1
                    m1 = w
                m = m1
                lptr[n_ex] = m
        elif code != BLANK:
            errors[n_err, 0] = line
            errors[n_err, 1] = r[6] - pos + 1 if r[6] >= 0 else 0
            errors[n_err, 2] = code
            errors[n_err, 3] = r[7]
            errors[n_err, 4] = r[8]
            errors[n_err, 5] = r[9]
            n_err += 1
            if not skip_invalid:
                line += 1
                break
        line += 1
        pos = nxt
    return (
        labels[:n_ex],
        weights[:n_ex],
        indptr[: n_ex + 1],
        indices[:nnz],
        values[:nnz],
        line_numbers[:n_ex],
        tags[:n_ex],
        errors[:n_err],
        n_lines - 1,
        nsid[:nnz],
        lab_spans[:n_ex],
        lptr[: n_ex + 1 if multilabel else 1],
        lids[:m],
        lend[:m if string_labels else 0],
    )


@jit(nogil=True)
def parse_vw_chunk(buf, first_line, mask, seed, label_offset, constant_index, add_constant, skip_invalid,
                   max_line, low_unlabeled):
    """Parse VW text lines in ``buf`` (uint8, complete lines; the last may lack ``\\n``).

    Parameters
    ----------
    buf : uint8, shape (nbytes,)
    first_line : int64, line number of the first line of ``buf``
    mask : int64, ``2**bits - 1``
    seed : int64, hash seed S (< 2**32)
    label_offset : int64, added to every label (|label_offset| < 2**31); the sum must be in
        ``[1, 2**31)``
    constant_index : int64, ``11650396 & mask``
    add_constant, skip_invalid : bool
    max_line : int64, a line of more bytes than this (before its ``\n``) is ``line_too_long``
    low_unlabeled : bool, a label below 1 is read as -1 (given, but unlabeled: ``predict``)
        instead of an error

    Returns the 9-tuple described in the module docstring.
    """
    r = _parse_chunk(buf, first_line, False, mask, seed, label_offset, constant_index, add_constant,
                     skip_invalid, max_line, low_unlabeled)
    return r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]


@jit(nogil=True)
def parse_vw_chunk_ns(buf, first_line, mask, seed, label_offset, constant_index, add_constant, skip_invalid,
                      max_line, low_unlabeled, string_labels):
    """``parse_vw_chunk`` plus, for feature generation and string labels, two more outputs:
    ``nsid`` (uint8, (nnz,): each feature's namespace index, VW's first byte of the namespace
    name, 32 for the default namespace, 128 for the constant) and ``label_spans`` (int64, (n, 2):
    the byte span of each example's label token, (-1, -1) without one; filled only with
    ``string_labels``, which also makes the label 1 (labeled) or 0 instead of the integer)."""
    return _parse_chunk(buf, first_line, False, mask, seed, label_offset, constant_index, add_constant,
                        skip_invalid, max_line, low_unlabeled, string_labels)


@jit(nogil=True)
def parse_libsvm_chunk(buf, first_line, mask, label_offset, constant_index, add_constant,
                       skip_invalid, max_line, low_unlabeled):
    """Parse LIBSVM lines in ``buf``; parameters and result as ``parse_vw_chunk``.

    ``label_offset`` : int64, added to every label; the sum must be in ``[1, 2**31)``.
    """
    r = _parse_chunk(buf, first_line, True, mask, 0, label_offset, constant_index,
                     add_constant, skip_invalid, max_line, low_unlabeled)
    return r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]


@jit(nogil=True)
def parse_libsvm_chunk_ns(buf, first_line, mask, label_offset, constant_index, add_constant,
                          skip_invalid, max_line, low_unlabeled):
    """``parse_libsvm_chunk`` with the outputs of ``parse_vw_chunk_ns`` (every feature in the
    default namespace ' ')."""
    return _parse_chunk(buf, first_line, True, mask, 0, label_offset, constant_index,
                        add_constant, skip_invalid, max_line, low_unlabeled, False)


@jit(nogil=True)
def parse_chunk_multilabel(buf, first_line, is_libsvm, mask, seed, label_offset, constant_index, add_constant,
                           skip_invalid, max_line, low_unlabeled, string_labels, xmc, index_cap, label_cap):
    """Either format with label sets (``_parse_chunk`` with ``multilabel``): the 11 outputs of
    ``parse_vw_chunk_ns`` and ``label_ptr``, ``label_ids``, ``label_ends``. ``xmc``: LIBSVM read
    as the Extreme Classification Repository's format, 0-based feature indices below
    ``index_cap`` and labels below ``label_cap`` (the header's F and L; 0 = no cap)."""
    return _parse_chunk(buf, first_line, is_libsvm, mask, seed, label_offset, constant_index, add_constant,
                        skip_invalid, max_line, low_unlabeled, string_labels, True, xmc, index_cap, label_cap)
