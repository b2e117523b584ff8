"""Slow pure-Python reference parser, written from docs/ALGORITHMS.md §1.1–1.4 (not from the kernel).

Plain ``bytes`` operations, a regex for the ``float`` rule, Python ``float()`` and
``xxhash.xxh32_intdigest``. Implements the same documented choices as ``kernels/parse.py``
(``\\r`` inside a line is whitespace; ``#`` anywhere starts a LIBSVM comment; anonymous counter
counts zero-valued features; float32 overflow is ``feat_value``).

``parse_ref(data, fmt, bits, seed, noconstant, label_offset)`` returns a list whose items are
either ``Example`` or ``Bad`` (one per non-blank line, in order).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import xxhash

FLOAT_RE = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
NONFINITE_RE = re.compile(rb"[+-]?(?:nan(?:\(.*)?|inf|infinity)", re.IGNORECASE | re.DOTALL)
INT_RE = re.compile(rb"[+-]?[0-9]+")
LIBSVM_INT_RE = re.compile(rb"([+-]?[0-9]+)(?:\.0*)?")
WS = b" \t\r"
CONSTANT = 11650396


@dataclass
class Example:
    line: int
    label: int
    weight: float
    tag: bytes | None
    indices: list = field(default_factory=list)
    values: list = field(default_factory=list)  # np.float32


@dataclass
class Bad:
    line: int
    reason: str


class _Bad(Exception):
    def __init__(self, reason):
        self.reason = reason


def to_float(tok: bytes) -> float | None:
    """float(tok) when the whole token matches the grammar's ``float`` rule, else None."""
    if FLOAT_RE.fullmatch(tok) is None:
        return None
    return float(tok)


def H(name: bytes, seed: int) -> int:
    if name and all(48 <= c <= 57 for c in name):
        return int(name) + seed
    return xxhash.xxh32_intdigest(name, seed)


def _split_ws(s: bytes) -> list[bytes]:
    out, cur = [], b""
    for c in s:
        if c in WS:
            if cur:
                out.append(cur)
            cur = b""
        else:
            cur += bytes([c])
    if cur:
        out.append(cur)
    return out


def _value(tok: bytes, reason: str) -> float:
    v = to_float(tok)
    if v is None or not math.isfinite(v):
        raise _Bad(reason)
    return v


def _f32(x: float, reason: str):
    with np.errstate(over="ignore"):
        v = np.float32(x)
    if not np.isfinite(v):
        raise _Bad(reason)
    return v


def _label(tok: bytes, label_offset: int, low_unlabeled: bool, reason: str) -> int:
    lab = int(tok) + label_offset
    if lab >= 2**31:
        raise _Bad(reason)
    if lab < 1:
        if low_unlabeled:
            return -1
        raise _Bad(reason)
    return lab


def _numeric_name_ok(name: bytes) -> None:
    if name.isdigit() and int(name) >= 2**64:
        raise _Bad("index_range")


def _vw_line(line: bytes, mask: int, seed: int, label_offset: int = 0, low_unlabeled: bool = False):
    if line.strip(WS) == b"":  # whitespace only: an unlabeled example without features (VW)
        return 0, 1.0, None, [], []
    if b"|" not in line:
        raise _Bad("no_bar")
    bar = line.index(b"|")
    label_sec, feat_sec = line[:bar], line[bar + 1:]
    if b"\t" in label_sec:
        label_sec = label_sec[label_sec.index(b"\t") + 1:]
    toks = _split_ws(label_sec)
    tag = None
    if toks and (toks[-1].startswith(b"'") or (label_sec and label_sec[-1:] not in (b" ", b"\t", b"\r"))):
        tag = toks.pop()
        if tag.startswith(b"'"):
            tag = tag[1:]
    if len(toks) > 2:
        raise _Bad("label_tokens")
    label, weight = 0, 1.0
    if toks:
        t = toks[0]
        if INT_RE.fullmatch(t) is None:
            # a label set given to a single-label model: the message names --multilabel
            raise _Bad("libsvm_multilabel" if b"," in t else "label_int")
        label = _label(t, label_offset, low_unlabeled, "label_int")
    if len(toks) == 2:
        w = to_float(toks[1])
        if w is None or not math.isfinite(w) or w < 0 or w > 1e6:  # (at most a million examples' worth)
            raise _Bad("weight")
        weight = w
    idx, val = [], []
    for ns in feat_sec.split(b"|"):
        nh, nsw = seed, 1.0
        if ns and ns[0] not in WS:
            head = _split_ws(ns)[0]
            ns = ns[len(head):]
            if head.startswith(b":"):
                raise _Bad("ns_name")
            if b":" in head:
                name, wtok = head.split(b":", 1)
                _numeric_name_ok(name)
                nsw = _value(wtok, "ns_weight")
            else:
                name = head
                _numeric_name_ok(name)
            nh = H(name, seed) & 0xFFFFFFFF
        anon = 0
        for tok in _split_ws(ns):
            word = None
            if b":" in tok:
                name, vtok = tok.split(b":", 1)
                _numeric_name_ok(name)
                if vtok == b"":  # "name:" is value 1, as VW
                    fv = np.float32(1.0)
                elif FLOAT_RE.match(vtok) is not None:
                    v = _value(vtok, "feat_value")
                    fv = _f32(v * nsw, "feat_value")
                elif NONFINITE_RE.fullmatch(vtok) is not None:
                    raise _Bad("feat_value")
                else:  # "name:word": the feature name^word, value 1, VW's chained hash
                    word, fv = vtok, np.float32(1.0)
            else:
                _numeric_name_ok(tok)
                name, fv = tok, _f32(nsw, "feat_value")
            if word is not None:
                h = xxhash.xxh32_intdigest(word, H(name, nh) & 0xFFFFFFFF)
            elif name == b"":
                h = nh + anon
                anon += 1
            else:
                h = H(name, nh)
            if fv != 0:
                idx.append(h & mask)
                val.append(fv)
    return label, weight, tag, idx, val


def _libsvm_line(line: bytes, mask: int, label_offset: int, low_unlabeled: bool = False):
    toks = _split_ws(line)
    lt = toks[0]
    if b"," in lt:
        raise _Bad("libsvm_multilabel")
    m = LIBSVM_INT_RE.fullmatch(lt)  # an exact integer: 2.9999999999999999999 is not 3
    if m is None:
        raise _Bad("libsvm_label")
    label = _label(m.group(1), label_offset, low_unlabeled, "libsvm_label")
    idx, val = [], []
    for t in toks[1:]:
        if b":" not in t:
            raise _Bad("libsvm_pair")
        i, v = t.split(b":", 1)
        if not i or not i.isdigit() or int(i) >= 2**64:
            raise _Bad("libsvm_index")
        fv = _value(v, "libsvm_value")
        fv = _f32(fv, "libsvm_value")
        if fv != 0:
            idx.append(int(i) & mask)
            val.append(fv)
    return label, 1.0, None, idx, val


def parse_ref(data: bytes, fmt: str = "vw", bits: int = 18, seed: int = 0, noconstant: bool = False,
              label_offset: int = 0, max_line: int = 1 << 62, low_unlabeled: bool = False) -> list:
    """Parse a whole file's bytes; see the module docstring."""
    mask = (1 << bits) - 1
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for no, line in enumerate(lines, start=1):
        if len(line) > max_line:
            out.append(Bad(no, "line_too_long"))
            continue
        line = line.rstrip(b"\r")
        if fmt == "libsvm" and b"#" in line:
            line = line[: line.index(b"#")]
        if line == b"" or (fmt == "libsvm" and line.strip(WS) == b""):
            continue
        try:
            if fmt == "libsvm":
                label, weight, tag, idx, val = _libsvm_line(line, mask, label_offset, low_unlabeled)
            else:
                label, weight, tag, idx, val = _vw_line(line, mask, seed, label_offset, low_unlabeled)
        except _Bad as b:
            out.append(Bad(no, b.reason))
            continue
        if not noconstant:
            idx.append(CONSTANT & mask)
            val.append(np.float32(1.0))
        out.append(Example(no, label, weight, tag, idx, val))
    return out
