"""VW text / LIBSVM / XMC input → ``ExampleBatch`` chunks, driving the numba parse kernels.

Public API::

    open_input(path) -> (binary stream, display name)
    iter_batches(paths, cfg, chunk_bytes=1 << 20, flush=False) -> Iterator[ExampleBatch]
    parse_bytes(data, cfg, source="<bytes>") -> ExampleBatch

Python loops over chunks only: each chunk of complete lines is parsed and hashed by one call of
``kernels.parse.parse_vw_chunk`` / ``parse_libsvm_chunk``. Python touches single lines only to
decode tags (when a chunk has any) and to build ``InputError`` messages for bad lines.

Reading: streams are read with ``read1`` (one underlying read, so a pipe yields what is there).
Without ``flush``, data is accumulated up to ``chunk_bytes`` before a chunk is parsed; with
``flush=True`` a batch is yielded as soon as at least one complete line is available (for
``lomtree predict --flush`` as a co-process). Line numbers are per file, 1-based, and count
blank lines. A UTF-8 BOM is stripped at the start of each file; columns are counted after it.
Batches never mix files. In strict mode, the examples of a chunk that precede its first bad line
are yielded as a batch before the ``InputError`` is raised (so a co-process still gets the
predictions of the good lines); ``parse_bytes`` raises directly.

Grammar choices are listed in ``kernels/parse.py``. Label sets (``InputConfig.multilabel``): the
label token is ``l1,l2,...`` in every format (VW's multi-label convention), an example's labels
are sorted and distinct. The XMC format (``--format xmc``, the Extreme Classification
Repository's text files) is LIBSVM with label sets, 0-based labels and feature indices, an empty
label field (the line starts with whitespace) for an example without labels, and a header line
``N F L`` per file that the data must agree with: every label below L, every feature index below
F (both checked by the kernel), N examples (checked at the end of the file, skipped lines
included).
"""

from __future__ import annotations

import os
import sys
from collections import deque
from typing import BinaryIO, Iterator

import numpy as np

from .batch import ExampleBatch
from .config import InputConfig
from .errors import InputError
from .kernels.parse import (
    KIND_INF,
    KIND_NEG,
    KIND_RANGE,
    MAX_WEIGHT,
    REASONS,
    parse_libsvm_chunk,
    parse_libsvm_chunk_ns,
    parse_chunk_multilabel,
    parse_vw_chunk,
    parse_vw_chunk_ns,
)

_SPECS: dict = {}  # feature options -> features.FeatureSpec (its tables are made once)


def feature_spec(cfg: InputConfig):
    key = (cfg.interactions, cfg.ngram, cfg.skips, cfg.ignore, cfg.keep, cfg.ignore_linear, cfg.bits,
           cfg.max_example_features)
    spec = _SPECS.get(key)
    if spec is None:
        from .features import FeatureSpec

        spec = _SPECS[key] = FeatureSpec(cfg)
    return spec

BOM = b"\xef\xbb\xbf"
_MAX_SHOWN = 60  # longest token quoted in an error message


def open_input(path: str) -> tuple[BinaryIO, str]:
    """Open ``path`` for binary reading; ``'-'`` is stdin (display name ``<stdin>``).

    ``.gz``, ``.bz2`` and ``.xz`` files are decompressed on the fly.

    Raises
    ------
    InputError(path, 0, 'open', ...) when the file cannot be opened.
    """
    if path == "-":
        if sys.stdin is None:  # fd 0 closed (``<&-``)
            raise InputError("<stdin>", 0, "open", "cannot read standard input: it is closed")
        return _decompressed(sys.stdin.buffer), "<stdin>"
    module = next((m for ending, m, _ in COMPRESSED if path.endswith(ending)), None)
    try:
        f = open(path, "rb") if module is None else _decompressor(module).open(path, "rb")
    except OSError as exc:
        raise InputError(path, 0, "open", f"cannot open input: {exc.strerror or exc}") from None
    return f, path


#: the compressed files ``open_input`` reads: (file name ending, the module that opens them, their
#: name in messages)
COMPRESSED = ((".gz", "gzip", "gzip"), (".bz2", "bz2", "bz2"), (".xz", "lzma", "xz"))
COMPRESSED_ENDINGS = tuple(ending for ending, _, _ in COMPRESSED)
#: bzip2: "BZh", the block size 1-9, then the first block's magic or the empty stream's end marker
#: (a line may start with "BZh", never with all of this)
_BZ2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")


def _decompressor(module: str):
    """The module (gzip, bz2, lzma), imported only when used: a few ms of every start otherwise."""
    import importlib

    return importlib.import_module(module)


def _stream_compressor(head: bytes) -> str | None:
    """The module of ``COMPRESSED`` that reads a stream starting with ``head``; None for text."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "lzma"
    if head[:3] == b"BZh" and len(head) >= 10 and 0x31 <= head[3] <= 0x39 and head[4:10] in _BZ2_BLOCKS:
        return "bz2"
    return None


def _decompressed(stream):
    """Standard input, decompressed when its first bytes are a gzip, bzip2 or xz header (a
    ``.gz`` file piped in is read as the file would be; text never starts with these bytes)."""
    peek = getattr(stream, "peek", None)
    module = _stream_compressor(peek(10)[:10] if peek is not None else b"")
    return stream if module is None else _decompressor(module).open(stream, "rb")


def check_inputs(paths) -> None:
    """InputError, as ``open_input`` gives it, for the first named input that cannot be read,
    checked before a command reads any: a typo in the last of several files must not end a run
    after it has trained on the others (and saved nothing)."""
    import stat

    for path in paths:
        if path == "-":
            continue
        try:
            st = os.stat(path)
        except OSError as exc:
            raise InputError(path, 0, "open", f"cannot open input: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(path, 0, "open", "cannot open input: Is a directory")
        if not os.access(path, os.R_OK):
            raise InputError(path, 0, "open", "cannot open input: Permission denied")


def _quote(tok: bytes) -> str:
    s = tok.decode("utf-8", errors="replace")
    if not s.isprintable():  # control bytes (ESC, form feed, U+2028, ...) are shown escaped
        s = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)
    if len(s) > _MAX_SHOWN:
        s = s[: _MAX_SHOWN - 3] + "..."
    return "'" + s + "'"


def _detail(reason: str, tok: bytes, kind: int, cfg: InputConfig | None = None, header=None) -> str:
    """Human text of one error; ``tok`` is the offending token's bytes; ``header`` the XMC
    file's (N, F, L)."""
    q = _quote(tok)
    offset = int(cfg.label_offset) if cfg is not None else 0
    if reason == "label_set":
        if kind == KIND_RANGE:
            return f"bad label {q} in the label set (label + label_offset ({cfg.offset if cfg else 0}) " \
                   "must be >= 1 and < 2^31)"
        return f"bad label set {q} (integer labels separated by single commas, e.g. 1,5,7)"
    if reason == "xmc_label":
        return f"label {q} is out of range: the header says {header[2] if header else 'L'} labels (0..L-1)"
    if reason == "xmc_index":
        return f"feature index {q} is out of range: the header says {header[1] if header else 'F'} features (0..F-1)"
    if reason == "no_bar":
        return "no '|' in line"
    if reason == "line_too_long":
        limit = cfg.max_line_bytes if cfg is not None else "the limit"
        return f"line longer than {limit} bytes (--max-line-bytes) starting {q}"
    if reason == "index_range":
        return f"numeric feature or namespace name {q} is out of range (must be < 2^64)"
    if reason == "label_int":
        if offset:
            return f"bad label {q} (must be an integer; label + label_offset ({offset}) must be >= 1 and < 2^31)"
        if kind == KIND_RANGE:
            return f"bad label {q} (must be an integer >= 1 and < 2^31)"
        return f"bad label {q} (must be an integer >= 1)"
    if reason == "label_tokens":
        return f"more than two tokens in label section (extra token {q})"
    if reason == "weight":
        if kind == KIND_NEG:
            return f"bad importance weight {q} (must be >= 0)"
        if kind == KIND_INF:
            return f"bad importance weight {q} (not finite)"
        if kind == KIND_RANGE:
            return f"bad importance weight {q} (must be at most {MAX_WEIGHT:g})"
        return f"bad importance weight {q} (must be a number >= 0)"
    if reason == "ns_name":
        return f"empty namespace name before ':' in {q}"
    if reason == "ns_weight":
        if kind == KIND_INF:
            return f"namespace weight {q} is not finite"
        return f"namespace weight {q} is not a number"
    if reason in ("feat_value", "libsvm_value"):
        if kind == KIND_INF:
            return f"feature value {q} is not finite (lomtree refuses NaN and infinite values: they would make the weights NaN)"
        if kind == KIND_RANGE:
            return f"feature value {q} is out of float32 range"
        if reason == "feat_value":
            return f"feature value {q} is not a number (a word value must not start like a number)"
        return f"feature value {q} is not a number"
    if reason == "libsvm_label":
        if kind == KIND_RANGE:
            return f"bad label {q} (label + label_offset must be >= 1 and < 2^31)"
        return f"bad label {q} (must be an exact integer)"
    if reason == "libsvm_pair":
        return f"feature {q} is not index:value"
    if reason == "libsvm_index":
        if kind == KIND_RANGE:
            return f"bad feature index {q} (out of range: must be < 2^64)"
        return f"bad feature index {q} (must be digits 0-9)"
    if reason == "unknown_label":
        return f"label {q} is not one of the --named-labels"
    if reason == "libsvm_multilabel":
        return f"label set {q} given, but the model is single-label (train with --multilabel)"
    return reason


def _make_error(data: bytes, row: np.ndarray, source: str, cfg: InputConfig | None = None,
                header=None) -> InputError:
    line, col, code, ts, te, kind = (int(x) for x in row)
    reason = REASONS[code]
    if reason == "label_int" and cfg is not None and not cfg.multilabel and b"," in bytes(data[ts:te]):
        reason = "libsvm_multilabel"  # a VW label set given to a single-label model
    return InputError(source, line, reason, _detail(reason, bytes(data[ts:te]), kind, cfg, header), col)


#: XMC lines without their file's header (the daemon's, the Python API's): no bound on the
#: feature indices (the kernel compares them with the header's F; labels have 0 for none)
XMC_NO_CAP = 2**63 - 1


def _parse_chunk(data: bytes, cfg: InputConfig, first_line: int, header=None):
    """One kernel call on ``data`` (complete lines). Returns the kernel's 9-tuple (more with
    feature generation, string labels or label sets). ``header``: the XMC file's (N, F, L)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    buf.flags.writeable = False  # as from bytes, whatever ``data`` is: the kernels' compiled signature
    # integers go as Python ints: numba types them int64, as np.int64 (the same compiled
    # signature), and they are quicker to convert and to check against it (one example's
    # parse, the Python API's ``learn_one``, is a few microseconds)
    first_line = int(first_line)
    if cfg.multilabel:
        xmc = cfg.format == "xmc"
        return parse_chunk_multilabel(
            buf, first_line, cfg.format != "vw", cfg.mask, int(cfg.hash_seed), cfg.offset, cfg.constant_index,
            not cfg.noconstant, bool(cfg.skip_invalid), int(cfg.max_line_bytes), bool(cfg.low_labels_unlabeled),
            bool(cfg.has_string_labels), xmc, int(header[1]) if xmc and header else XMC_NO_CAP,
            int(header[2] if xmc and header else 0))
    # + namespace ids and label spans (real labels are read from their spans: ``scalar_kernels``)
    ns = cfg.generates_features or cfg.has_string_labels or cfg.real_labels
    if cfg.format == "libsvm":
        args = (buf, first_line, cfg.mask, int(cfg.label_offset), cfg.constant_index, not cfg.noconstant,
                bool(cfg.skip_invalid), int(cfg.max_line_bytes), bool(cfg.low_labels_unlabeled))
        return parse_libsvm_chunk_ns(*args) if ns else parse_libsvm_chunk(*args)
    args = (buf, first_line, cfg.mask, int(cfg.hash_seed), int(cfg.label_offset), cfg.constant_index,
            not cfg.noconstant, bool(cfg.skip_invalid), int(cfg.max_line_bytes), bool(cfg.low_labels_unlabeled))
    return parse_vw_chunk_ns(*args, bool(cfg.has_string_labels or cfg.real_labels)) if ns else parse_vw_chunk(*args)


def _prepare(data: bytes, res, source: str, cfg: InputConfig | None = None, label_dict=None,
             header=None) -> tuple[ExampleBatch, list[InputError], np.ndarray | None]:
    """(batch, errors, nsid) of one parsed chunk, its features as parsed: everything that reads
    ``data`` (tags, string labels) is done here. ``nsid``: each feature's namespace when the
    features are still to be generated (``_pieces``), else None."""
    labels, weights, indptr, indices, values, line_numbers, tag_spans, errors, _ = res[:9]
    tags = None
    if tag_spans.shape[0] and tag_spans[:, 0].max() >= 0:
        tags = [
            None if s < 0 else bytes(data[s:e]).decode("utf-8", errors="replace")
            for s, e in tag_spans.tolist()
        ]
    errs = [_make_error(data, row, source, cfg, header) for row in errors] if errors.shape[0] else []
    batch = ExampleBatch(
        labels=labels,
        weights=weights,
        indptr=indptr,
        indices=indices,
        values=values,
        line_numbers=line_numbers,
        source=source,
        tags=tags,
    )
    if cfg is not None and cfg.multilabel:
        batch.label_ptr, batch.label_ids = res[11], res[12]
    if len(res) > 9 and cfg is not None and cfg.real_labels:
        from .kernels.scalar_kernels import apply_real_labels

        batch, lerrs = apply_real_labels(batch, data, res[10], bool(cfg.skip_invalid))
        if lerrs:
            errs = sorted(errs + lerrs, key=lambda e: e.line)
    elif len(res) > 9 and cfg is not None and cfg.has_string_labels:
        from . import labels as L

        if label_dict is None:
            label_dict = L.LabelDict.from_config(cfg)
        if cfg.multilabel:
            batch, lerrs = L.apply_sets(batch, data, res[12], res[13], label_dict, bool(cfg.skip_invalid))
        else:
            batch, lerrs = L.apply(batch, data, res[10], label_dict, bool(cfg.skip_invalid))
        if lerrs:
            errs = sorted(errs + lerrs, key=lambda e: e.line)
    nsid = None
    if len(res) > 9 and cfg is not None and cfg.generates_features:
        nsid = res[9]
        if len(batch) != len(labels):  # the labels refused some examples: their features go too
            keep = np.isin(line_numbers, batch.line_numbers)
            nsid = nsid[np.repeat(keep, np.diff(indptr))]
    return batch, errs, nsid


def parse_chunk(data: bytes, cfg: InputConfig, source: str, first_line: int = 1,
                label_dict=None) -> tuple[ExampleBatch, list[InputError]]:
    """(batch, errors) of ``data``, complete lines (no BOM, no XMC header) whose first is line
    ``first_line`` of ``source``: every good line in the batch, every bad one an ``InputError``
    in ``errors`` (in strict mode the caller raises the first)."""
    return _build(data, _parse_chunk(data, cfg, first_line), source, cfg, label_dict)


def _pieces(batch: ExampleBatch, nsid, errs: list, cfg: InputConfig) -> Iterator[tuple[ExampleBatch, list]]:
    """``(batch, errors)`` pieces of a prepared chunk, in order, the errors with the last. With
    feature generation each piece holds at most ``--max-example-features`` generated features
    (or one example), and an example that would make more is a malformed line; it is counted
    before anything is generated (``FeatureSpec.plan``)."""
    if nsid is None:
        yield batch, errs
        return
    spec = feature_spec(cfg)
    groups, sizes, bad = spec.plan(batch.indptr, nsid)
    n = len(batch)
    ok = np.ones(n, bool)
    stop = n
    if bad:
        new = [InputError(batch.source, int(batch.line_numbers[i]), "too_many_features", why)
               for i, why in sorted(bad.items())]
        if not cfg.skip_invalid:
            new, stop = new[:1], min(bad)
        errs = sorted(errs + new, key=lambda e: e.line)
        ok[list(bad)] = False
    sizes = np.where(ok, sizes, 0)
    counts = np.diff(batch.indptr)
    out = []
    for lo, hi, tables in groups:
        hi = min(hi, stop)
        ends = np.cumsum(sizes[lo:hi])
        i = lo
        while i < hi:
            base = ends[i - lo - 1] if i > lo else 0
            j = max(i + 1, lo + int(np.searchsorted(ends, base + spec.limit, side="right")))
            keep = ok[i:j]
            if keep.any():
                a, b = int(batch.indptr[i]), int(batch.indptr[j])
                piece, ns = batch.slice(i, j), nsid[a:b]
                if not keep.all():
                    piece, ns = piece.subset(keep), ns[np.repeat(keep, counts[i:j])]
                piece.indptr, piece.indices, piece.values = spec.expand(
                    piece.indptr, piece.indices, piece.values, ns, tables, int(ends[j - lo - 1] - base))
                if out:
                    yield out.pop(), []
                out.append(piece)
            i = j
    yield (out.pop() if out else ExampleBatch.empty(batch.source)), errs


def generate_features(batch: ExampleBatch, nsid: np.ndarray, cfg: InputConfig) -> tuple[ExampleBatch, list]:
    """(batch, errors): ``batch`` (features as a parser gives them, ``nsid`` each one's namespace
    index) with the feature options of ``cfg`` applied, as to a parsed chunk (``_pieces``): the
    Python API's arrays get a model's crosses and n-grams by the same code as its text."""
    return _joined(list(_pieces(batch, nsid, [], cfg)))


def _build(data: bytes, res, source: str, cfg: InputConfig | None = None,
           label_dict=None, header=None) -> tuple[ExampleBatch, list[InputError]]:
    """The chunk as one batch and its errors (the pieces of ``_pieces`` joined)."""
    batch, errs, nsid = _prepare(data, res, source, cfg, label_dict, header)
    return _joined(list(_pieces(batch, nsid, errs, cfg)))


def _joined(parts: list) -> tuple[ExampleBatch, list]:
    if len(parts) == 1:
        return parts[0]
    bs = [b for b, _ in parts]
    ends = np.cumsum([0] + [len(b.indices) for b in bs])
    first = bs[0]
    out = ExampleBatch(
        labels=np.concatenate([b.labels for b in bs]),
        weights=np.concatenate([b.weights for b in bs]),
        indptr=np.concatenate([first.indptr[:1]] + [b.indptr[1:] + e for b, e in zip(bs, ends)]),
        indices=np.concatenate([b.indices for b in bs]),
        values=np.concatenate([b.values for b in bs]),
        line_numbers=np.concatenate([b.line_numbers for b in bs]),
        source=first.source,
        tags=None if all(b.tags is None for b in bs) else
        [t for b in bs for t in (b.tags if b.tags is not None else [None] * len(b))],
    )
    if first.label_ptr is not None:
        lends = np.cumsum([0] + [len(b.label_ids) for b in bs])
        out.label_ptr = np.concatenate([first.label_ptr[:1]] + [b.label_ptr[1:] + e for b, e in zip(bs, lends)])
        out.label_ids = np.concatenate([b.label_ids for b in bs])
    if first.real is not None:
        out.real = np.concatenate([b.real for b in bs])
    return out, parts[-1][1]


def iter_bytes(data: bytes, cfg: InputConfig, source: str = "<bytes>", label_dict=None,
               xmc_header: bool = True) -> Iterator[ExampleBatch]:
    """``parse_bytes`` in pieces (each piece's ``skipped`` its share of the errors), so feature
    generation holds at most one piece at a time (``_pieces``)."""
    data = bytes(data)
    if data.startswith(BOM):
        data = data[3:]
    header, first = None, 1
    if cfg.format == "xmc" and xmc_header:
        import io

        stream = io.BytesIO(data)
        header, first = read_xmc_header(stream, source), 2
        data = data[stream.tell():]
    batch, errs, nsid = _prepare(data, _parse_chunk(data, cfg, first, header), source, cfg, label_dict, header)
    if header is not None and (cfg.skip_invalid or not errs) and len(batch) + len(errs) != header[0]:
        raise InputError(source, 1, "xmc_header", f"the header says {header[0]} examples, the data has "
                         f"{len(batch) + len(errs)}")
    for piece, errs in _pieces(batch, nsid, errs, cfg):
        if errs and not cfg.skip_invalid:
            raise errs[0]
        piece.skipped = errs
        yield piece


def parse_bytes(data: bytes, cfg: InputConfig, source: str = "<bytes>", label_dict=None,
                xmc_header: bool = True) -> ExampleBatch:
    """Parse a whole buffer (one file's content) into one batch.

    A leading UTF-8 BOM is ignored. Raises ``InputError`` on the first bad line unless
    ``cfg.skip_invalid`` (then the errors are in ``batch.skipped``). ``xmc_header``: XMC data
    starts with its header line (a file); without, lines alone (the daemon's, the API's).
    """
    batch, errs = _joined([(b, b.skipped) for b in iter_bytes(data, cfg, source, label_dict, xmc_header)])
    batch.skipped = errs
    return batch


def _iter_stream(stream, name: str, cfg: InputConfig, chunk_bytes: int, flush: bool,
                 workers: int = 1, label_dict=None) -> Iterator[ExampleBatch]:
    """Chunks of complete lines, parsed in order; with ``workers > 1`` (and not ``flush``) up to
    ``workers`` chunks are parsed at once in a thread pool (the kernel releases the GIL). Each
    chunk is parsed as if it started at line 1 and placed in the input when its turn comes, after
    the newlines the kernel counted in the chunks before it (``bytes.count`` in the reading
    thread held the GIL: 4% of a Sector prediction's CPU)."""
    pool = None
    pending_jobs: deque = deque()
    if workers > 1 and not flush:
        from .workers import Pool

        pool = Pool(workers, "lomtree-parse")
    line_no = 1
    spare: list = []  # buffers _chunks may fill again
    header = None
    seen = 0  # examples and skipped lines of an XMC file, checked against its header
    if cfg.format == "xmc":
        header = read_xmc_header(stream, name)
        line_no = 2

    def place(chunk, buf, res):
        """``_build`` for a chunk parsed as if it started at line 1; its lines start at ``line_no``."""
        nonlocal line_no
        if line_no != 1:
            res[5][:] += line_no - 1  # line_numbers (this chunk's own array)
            res[7][:, 0] += line_no - 1  # the errors' lines
        nonlocal seen
        batch, errs, nsid = _prepare(chunk, res, name, cfg, label_dict, header)
        spare.append(buf)  # the batch holds no view of it
        line_no += int(res[8])
        seen += len(batch) + len(errs)
        for piece, perrs in _pieces(batch, nsid, errs, cfg):
            yield from _emit(piece, perrs, cfg)

    def too_long():
        """The batch (or error) of a line longer than a buffer holds, which ``_chunks`` dropped."""
        nonlocal line_no
        err = InputError(name, line_no, "line_too_long",
                         f"line longer than {cfg.max_line_bytes} bytes (--max-line-bytes)")
        line_no += 1
        if not cfg.skip_invalid:
            raise err
        batch = ExampleBatch.empty(name)
        batch.skipped = [err]
        return batch

    try:
        for chunk, buf in _chunks(stream, chunk_bytes, flush, spare, cfg.max_line_bytes, name):
            if chunk is None:  # an over-long line: after every chunk before it
                while pending_jobs:
                    done, dbuf, job = pending_jobs.popleft()
                    yield from place(done, dbuf, job.result())
                yield too_long()
                continue
            if pool is None:
                yield from place(chunk, buf, _parse_chunk(chunk, cfg, 1, header))
                continue
            pending_jobs.append((chunk, buf, pool.submit(_parse_chunk, chunk, cfg, 1, header)))
            while len(pending_jobs) > workers:
                done, dbuf, job = pending_jobs.popleft()
                yield from place(done, dbuf, job.result())
        while pending_jobs:
            done, dbuf, job = pending_jobs.popleft()
            yield from place(done, dbuf, job.result())
        if header is not None and seen != header[0]:
            raise InputError(name, 1, "xmc_header", f"the header says {header[0]} examples, the data has {seen}")
    finally:
        if pool is not None:
            for _, _, f in pending_jobs:
                f.cancel()
            pool.shutdown()


def read_xmc_header(stream, name: str) -> tuple[int, int, int]:
    """The header line ``N F L`` of an XMC file (examples, features, labels), read from
    ``stream``, which is left at the first example; InputError unless it is three integers below
    2^63 (the kernels compare indices and labels with them as int64)."""
    try:
        raw = stream.readline(4096)
    except (OSError, EOFError, ValueError) as e:
        raise InputError(name, 0, "read", f"cannot read input: {e}") from None
    if raw.startswith(BOM):
        raw = raw[3:]
    parts = raw.split()
    ok = len(parts) == 3 and all(p.isdigit() for p in parts) and (raw.endswith(b"\n") or len(raw) < 4096)
    if not ok:
        got = _quote(raw.rstrip(b"\r\n"))
        raise InputError(name, 1, "xmc_header", "the first line must be the header 'N F L' (examples, features, "
                         f"labels: three integers), got {got}")
    nums = tuple(int(p) for p in parts)
    for what, v in zip(("N (examples)", "F (features)", "L (labels)"), nums):
        if v >= 1 << 63:
            raise InputError(name, 1, "xmc_header", f"the header's {what} = {v} is too large (at most 2^63-1)")
    return nums


def xmc_label_bound(paths: list) -> int:
    """The most distinct labels ``paths`` can name: a label takes at least two bytes (a digit and
    a separator), a compressed file holds at most 1,032 times its size (deflate's largest ratio; a
    denser bzip2 or xz file needs -k). The XMC header's L is a claim: ``-k`` taken from it is
    bounded by this, so that a short file cannot make the model gigabytes."""
    total = 0
    for p in paths:
        size = os.path.getsize(p)
        total += size * 1032 if p.endswith(COMPRESSED_ENDINGS) else size
    return total // 2 + 1


def _emit(batch: ExampleBatch, errs: list, cfg: InputConfig) -> Iterator[ExampleBatch]:
    if errs and not cfg.skip_invalid:
        if len(batch):
            yield batch
        raise errs[0]
    batch.skipped = errs
    if len(batch) or errs:
        yield batch


def _chunks(stream, chunk_bytes: int, flush: bool, spare: list, max_line: int = 1 << 62,
            name: str = "<input>") -> Iterator[tuple[memoryview, bytearray]]:
    """Chunks of complete lines (the last may lack its newline), a leading BOM dropped, as
    ``(view, buffer)``: ``view`` is the chunk, the start of ``buffer``, and the caller puts
    ``buffer`` in ``spare`` once it no longer needs ``view`` (``_build`` copies what it keeps).

    Bounded memory: a line of more than ``max_line`` bytes (before its newline) that does not
    fit the buffer is not buffered whole: ``(None, None)`` is yielded in its place and its
    bytes are read and dropped up to its newline, so a buffer grows to at most about
    ``2 * max(chunk_bytes, max_line)`` bytes whatever the input (``/dev/zero``). The parse
    kernel reports the over-long lines that fit in a chunk the same way (``line_too_long``).
    A corrupt or truncated compressed stream raises ``InputError(name, 0, 'compressed', ...)``.

    The input is read straight into reused buffers (``readinto``): a chunk is at most one
    buffer, and the part of the last line that a read cut off is copied to the start of the next
    buffer. Fresh memory for every read and a copy joining each line tail to the next read (the
    earlier way) cost a quarter of a million page faults per GB of input.
    A line longer than a buffer doubles the buffer. With ``flush`` a chunk is yielded as soon as
    a read completes a line."""
    readinto = getattr(stream, "readinto1", None) or stream.readinto
    size = max(int(chunk_bytes), 64)

    def take(need: int) -> bytearray:
        while spare:
            b = spare.pop()
            if len(b) >= need:
                return b
        return bytearray(max(size, need))

    buf = take(size)
    filled = 0
    bom_checked = False
    eof = False
    while not eof:
        if filled == len(buf):  # a line longer than the buffer
            bigger = bytearray(min(2 * len(buf), max(len(buf), max_line + 1)))
            bigger[:filled] = buf
            buf = bigger
        with memoryview(buf) as view:
            n = _read(readinto, view[filled:], name)
        if not n:
            eof = True
        else:
            filled += n
        if not bom_checked:
            if filled >= 3 or eof or not BOM.startswith(bytes(buf[:filled])):
                if buf[:3] == BOM:
                    buf[:filled - 3] = buf[3:filled]
                    filled -= 3
                bom_checked = True
            else:
                continue
        if eof:
            cut = filled
        else:
            if not flush and filled < min(size, len(buf)):
                continue
            cut = buf.rfind(b"\n", 0, filled) + 1
        if cut == 0:
            if filled > max_line:  # no newline yet: a line over the limit, dropped unbuffered
                yield None, None
                filled, eof = _drop_line(readinto, buf, filled, name)
            continue
        nxt = take(filled - cut)
        nxt[:filled - cut] = buf[cut:filled]
        yield memoryview(buf)[:cut], buf
        buf, filled = nxt, filled - cut


def _read(readinto, view, name: str) -> int:
    """``readinto(view)``; a corrupt or truncated compressed stream (or a read error) is an
    ``InputError`` naming the file, never a traceback."""
    try:
        return readinto(view)
    except EOFError:
        raise InputError(name, 0, "compressed", f"truncated or corrupt compressed stream{_compression(name)}: "
                         "it ends before its end marker") from None
    except OSError as e:  # gzip.BadGzipFile, an I/O error, ...
        if e.errno is None:
            raise InputError(name, 0, "compressed",
                             f"truncated or corrupt compressed stream{_compression(name)}: {e}") from None
        raise InputError(name, 0, "read", f"cannot read input: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - lzma.LZMAError, zlib.error, ValueError of bz2, ...
        raise InputError(name, 0, "compressed",
                         f"truncated or corrupt compressed stream{_compression(name)}: {e}") from None


def count_lines(paths) -> int:
    """Lines of the input files (the examples of a pass, blank lines included), or 0 when one is
    not a readable plain regular file (standard input, a pipe, a compressed file)."""
    import os

    n = 0
    for path in paths:
        if path == "-" or path.endswith(COMPRESSED_ENDINGS) or not os.path.isfile(path):
            return 0
        last = b"\n"
        try:
            with open(path, "rb") as f:
                while True:
                    buf = f.read(1 << 22)
                    if not buf:
                        break
                    n += buf.count(b"\n")
                    last = buf[-1:]
        except OSError:  # unreadable: the driver reports it when it opens the input
            return 0
        n += last != b"\n"
    return n


def _compression(name: str) -> str:
    """`` (gzip)`` etc. by the file's name; empty for standard input (known by its first bytes)."""
    return next((f" ({kind})" for ending, _, kind in COMPRESSED if name.endswith(ending)), "")


def _drop_line(readinto, buf: bytearray, filled: int, name: str) -> tuple[int, bool]:
    """Read and drop the rest of an over-long line (``buf[:filled]`` holds its start and no
    newline), reusing ``buf``. Returns ``(filled, eof)``: the bytes after the line's newline
    moved to the start of ``buf``."""
    while True:
        with memoryview(buf) as view:
            n = _read(readinto, view, name)
        if not n:
            return 0, True
        nl = buf.find(b"\n", 0, n)
        if nl >= 0:
            rest = n - nl - 1
            buf[:rest] = buf[nl + 1:n]
            return rest, False


def iter_batches(paths: list[str] | None, cfg: InputConfig, chunk_bytes: int = 1 << 20,
                 flush: bool = False, workers: int = 1, label_dict=None) -> Iterator[ExampleBatch]:
    """Yield ``ExampleBatch`` chunks of the inputs ``paths`` in order (None or [] = stdin).

    Parameters
    ----------
    paths : file paths (``'-'`` = stdin; ``.gz``/``.bz2``/``.xz`` decompressed), or None
    cfg : InputConfig (format, bits, hash_seed, noconstant, label_offset, skip_invalid)
    chunk_bytes : read size; a batch holds about this many bytes of complete lines
    flush : yield as soon as one complete line is available (interactive / co-process use)
    workers : chunks parsed at once (threads; batches still come in input order)
    label_dict : ``labels.LabelDict`` for string labels (None: a fresh one per call)

    Raises
    ------
    InputError on a file that cannot be opened, or on the first bad line (strict mode).
    """
    chunk_bytes = max(1, int(chunk_bytes))
    if label_dict is None and cfg.has_string_labels:
        from .labels import LabelDict

        label_dict = LabelDict.from_config(cfg)
    for path in (paths or ["-"]):
        stream, name = open_input(path)
        try:
            yield from _iter_stream(stream, name, cfg, chunk_bytes, flush, workers, label_dict)
        finally:
            if path != "-":
                stream.close()
