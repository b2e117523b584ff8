"""Binary example cache: parsed, hashed ``ExampleBatch`` chunks on disk (docs/ALGORITHMS.md §4.3).

The first pass of a run parses and hashes the text and writes every batch here; later passes (and
later runs with the same inputs and options) read the batches back with a few large reads and
``ndarray.view`` — no parsing, no hashing, no pickle.

Usage (the driver)::

    cache = ExampleCache.open(path, input_cfg, paths, err=stream, model_path=final_model)
    if cache.ready:                      # a valid cache for exactly these inputs/options exists
        for batch in cache.read(): ...   # even pass 1 reads it (VW does the same)
    else:
        w = cache.writer()
        for batch in parsed: w.add(batch); ...
        w.close()                        # atomic: temp file + os.replace; now cache.ready
    cache.close()                        # deletes a temporary cache, drops an unfinished one

Where the cache lives (``path``):

- ``None`` (no ``-c``): a temporary file, deleted when the run ends;
- ``""`` (``-c`` without a path): ``MODEL.cache`` next to the ``-f`` model; without ``-f`` a
  temporary file (a note says so);
- anything else: that path, kept after the run for reuse.

Validity. The footer records the key the cache was built with: file format version, package
version, input format, bits, hash seed, constant feature (on/off and slot), label offset,
skip-invalid mode, the string-label dictionary the run starts from (a checksum of its names in
order: a cached label id means the name it had when the cache was written), and for each input its
real path, size and modification time (ns). A cache is reused only when the key is equal; otherwise it is rebuilt with a note on stderr saying what
changed. Standard input cannot be compared without reading it, so with stdin the cache is always
rebuilt by pass 1 (it then records a hash of the parsed content). An existing file is fully
verified before it is trusted (structure, lengths, every checksum); a truncated or corrupt cache
is rebuilt with a note. A block that fails its checksum while being read later (the file changed
under the run) raises ``CacheError`` (exit 2): never a silently wrong run. A file at the cache
path that is not a lomtree cache is never overwritten (``ConfigError``).

File format (little-endian; every array starts at a multiple of 8 bytes)::

    preamble  b"LTCACHE\\0" | u32 format version | u32 0                           16 bytes
    block*    b"LTBK" | u32 meta_len | u64 n | u64 nnz | u64 body_len | u64 xxh3   40 bytes
              body = meta JSON (padded to 8) + arrays, each padded to 8:
                labels int64 (n) | weights float64 (n) | indptr int64 (n+1) |
                indices int64 (nnz) | values float32 (nnz) | line_numbers int64 (n) |
                [tags: present uint8 (n) | offsets int64 (n+1) | UTF-8 bytes]
                [label sets: label_ptr int64 (n+1) | label_ids int64 (m)]
              xxh3 = xxh3_64 of the body; meta = {"source", "tags", "tag_bytes", "skipped",
              "label_ids" (m, present with label sets)}
    footer    JSON: format, version, program_version, key, n_blocks, n_examples, content_xxh3,
              label_names (string labels: the dictionary after the parse, which a run reading the
              cache takes over; a cache of string labels without it is rebuilt)
    trailer   b"LTEND\\0\\0\\0" | u64 footer_offset | u64 footer_len | u64 xxh3(footer) |
              u64 n_blocks | u64 n_examples                                           48 bytes

Batches come back exactly as they were written (same boundaries, dtypes, values, tags, line
numbers, source names and skipped-line errors), so a run over the cache is bit-identical to a
run over the text.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile

import numpy as np
import xxhash

from .version import __version__
from .batch import ExampleBatch
from .config import InputConfig
from .errors import ConfigError, InputError, LomtreeError

MAGIC = b"LTCACHE\x00"
FORMAT_VERSION = 1
_PREAMBLE = struct.Struct("<8sII")
_BLOCK = struct.Struct("<4sIQQQQ")
_BLOCK_MAGIC = b"LTBK"
_TRAILER = struct.Struct("<8sQQQQQ")
_TRAILER_MAGIC = b"LTEND\x00\x00\x00"
_PAD = b"\x00" * 8


class CacheError(LomtreeError):
    """The example cache is unreadable in a way that cannot be repaired during the run."""

    exit_code = 2


class _Invalid(Exception):
    """Internal: why an existing cache file cannot be used (then it is rebuilt)."""


def _pad(n: int) -> int:
    return (-n) & 7


def input_key(input_cfg: InputConfig, paths: list[str], label_dict=None) -> dict:
    """The key a cache is valid for: options that change parsed examples, the label dictionary
    the parse starts from (string labels) + input identities."""
    inputs = []
    for p in paths:
        if p == "-":
            inputs.append({"path": "-"})
            continue
        try:
            st = os.stat(p)
        except OSError:
            inputs.append({"path": os.path.realpath(p), "missing": True})
            continue
        inputs.append({"path": os.path.realpath(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return {
        "format": input_cfg.format,
        "bits": int(input_cfg.bits),
        "hash_seed": int(input_cfg.hash_seed),
        "noconstant": bool(input_cfg.noconstant),
        "constant_index": int(input_cfg.constant_index),
        "label_offset": int(input_cfg.label_offset),
        "skip_invalid": bool(input_cfg.skip_invalid),
        "max_line_bytes": int(input_cfg.max_line_bytes),
        "max_example_features": int(input_cfg.max_example_features),
        "features": [input_cfg.interactions, input_cfg.ngram, input_cfg.skips, input_cfg.ignore, input_cfg.keep,
                     input_cfg.ignore_linear, input_cfg.named_labels, bool(input_cfg.string_labels),
                     bool(input_cfg.multilabel)],
        "inputs": inputs,
        "labels": None if label_dict is None else _names_key(label_dict.names),
        **({"real_labels": True} if input_cfg.real_labels else {}),
    }


def _names_key(names: list[str]) -> dict:
    """The identity of a label dictionary: its size and a checksum of its names in order."""
    h = xxhash.xxh3_64()
    for n in names:
        h.update(n.encode("utf-8", errors="surrogatepass") + b"\n")
    return {"n": len(names), "xxh3": h.hexdigest()}


def _key_differences(old: dict, new: dict) -> list[str]:
    out = []
    for name in ("format", "bits", "hash_seed", "noconstant", "constant_index", "label_offset", "skip_invalid",
                 "max_line_bytes", "max_example_features", "features", "labels"):
        if old.get(name) != new.get(name):
            out.append(f"{name.replace('_', '-')} {old.get(name)} -> {new.get(name)}")
    oi, ni = old.get("inputs", []), new.get("inputs", [])
    if [i.get("path") for i in oi] != [i.get("path") for i in ni]:
        out.append("the input files differ")
    elif oi != ni:
        changed = [n["path"] for o, n in zip(oi, ni) if o != n]
        out.append("input changed since the cache was written: " + ", ".join(changed))
    return out or ["the cache key differs"]


# -- serialisation --------------------------------------------------------------------------------
def _batch_parts(batch: ExampleBatch) -> tuple[int, int, int, list]:
    """(n, nnz, meta_len, byte-like pieces of the block body, each padded to 8 bytes)."""
    n = len(batch)
    arrays = [
        np.ascontiguousarray(batch.labels, dtype=np.int64),
        np.ascontiguousarray(batch.weights, dtype=np.float64),
        np.ascontiguousarray(batch.indptr, dtype=np.int64),
        np.ascontiguousarray(batch.indices, dtype=np.int64),
        np.ascontiguousarray(batch.values, dtype=np.float32),
        np.ascontiguousarray(batch.line_numbers, dtype=np.int64),
    ]
    nnz = int(arrays[3].shape[0])
    if arrays[2].shape[0] != n + 1 or arrays[4].shape[0] != nnz or arrays[1].shape[0] != n \
            or arrays[5].shape[0] != n:
        raise ValueError("inconsistent ExampleBatch array lengths")
    tag_blob = b""
    if batch.tags is not None:
        present = np.array([t is not None for t in batch.tags], dtype=np.uint8)
        encoded = [b"" if t is None else t.encode("utf-8", errors="surrogatepass") for t in batch.tags]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        tag_blob = b"".join(encoded)
        arrays += [present, offsets]
    sets = []
    if batch.label_ptr is not None:
        sets = [np.ascontiguousarray(batch.label_ptr - batch.label_ptr[0], dtype=np.int64),
                np.ascontiguousarray(batch.label_ids, dtype=np.int64)]
    meta = {
        "source": batch.source,
        "tags": batch.tags is not None,
        "tag_bytes": len(tag_blob),
        "skipped": [[e.source, e.line, e.reason, e.detail, e.column] for e in batch.skipped],
    }
    if sets:
        meta["label_ids"] = int(sets[1].shape[0])
    if batch.real is not None:
        meta["real"] = True
        sets.append(np.ascontiguousarray(batch.real, dtype=np.float64))
    meta_b = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    parts = [meta_b, _PAD[: _pad(len(meta_b))]]
    for a in arrays:
        parts.append(memoryview(a).cast("B"))
        parts.append(_PAD[: _pad(a.nbytes)])
    if batch.tags is not None:
        parts += [tag_blob, _PAD[: _pad(len(tag_blob))]]
    for a in sets:
        parts.append(memoryview(a).cast("B"))
        parts.append(_PAD[: _pad(a.nbytes)])
    return n, nnz, len(meta_b), parts


def _decode_block(body: np.ndarray, meta_len: int, n: int, nnz: int) -> ExampleBatch:
    """Inverse of ``_batch_parts``: views into ``body`` (uint8, 8-aligned); raises _Invalid."""
    try:
        meta = json.loads(bytes(body[:meta_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _Invalid(f"bad block metadata ({e})") from None
    off = meta_len + _pad(meta_len)
    total = body.shape[0]

    def take(dtype, count):
        nonlocal off
        nb = count * np.dtype(dtype).itemsize
        if off + nb > total:
            raise _Invalid("block shorter than its arrays")
        a = body[off: off + nb].view(dtype)
        off += nb + _pad(nb)
        return a

    labels = take(np.int64, n)
    weights = take(np.float64, n)
    indptr = take(np.int64, n + 1)
    indices = take(np.int64, nnz)
    values = take(np.float32, nnz)
    line_numbers = take(np.int64, n)
    tags = None
    if meta.get("tags"):
        present = take(np.uint8, n)
        offsets = take(np.int64, n + 1)
        nb = int(meta["tag_bytes"])
        if off + nb > total:
            raise _Invalid("block shorter than its tags")
        blob = bytes(body[off: off + nb])
        off += nb + _pad(nb)
        o = offsets.tolist()
        tags = [blob[o[i]: o[i + 1]].decode("utf-8", errors="surrogatepass") if present[i] else None
                for i in range(n)]
    label_ptr = label_ids = None
    if "label_ids" in meta:
        label_ptr = take(np.int64, n + 1)
        label_ids = take(np.int64, int(meta["label_ids"]))
        if label_ptr[0] != 0 or label_ptr[-1] != label_ids.shape[0] or np.any(np.diff(label_ptr) < 0):
            raise _Invalid("block has an inconsistent label_ptr")
    real = take(np.float64, n) if meta.get("real") else None
    if off != total:
        raise _Invalid("block length does not match its arrays")
    if n and (indptr[0] != 0 or indptr[-1] != nnz):
        raise _Invalid("block has an inconsistent indptr")
    skipped = [InputError(s, line, reason, detail, col) for s, line, reason, detail, col in meta.get("skipped", [])]
    return ExampleBatch(labels=labels, weights=weights, indptr=indptr, indices=indices, values=values,
                        line_numbers=line_numbers, source=meta.get("source", "<cache>"), tags=tags,
                        skipped=skipped, label_ptr=label_ptr, label_ids=label_ids, real=real)


# -- the cache ------------------------------------------------------------------------------------
class ExampleCache:
    """One cache file for one run; see the module docstring. Build with ``ExampleCache.open``."""

    def __init__(self, path: str, key: dict, temporary: bool, err=None, display: str | None = None,
                 label_dict=None):
        self.path = path
        self.key = key
        self.label_dict = label_dict  # string labels: the run's dictionary (grown by the parse)
        self.temporary = temporary
        self.err = err
        self.display = display or path
        self.ready = False
        self.reused = False  # True when ready came from an earlier run
        self.stdin_cached = False  # see ``open``
        self.n_blocks = 0
        self.n_examples = 0
        self.failed: str | None = None  # why writing failed (then later passes must re-parse)
        self._writer: CacheWriter | None = None

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | None, input_cfg: InputConfig, paths: list[str], opts=None, err=None,
             model_path: str | None = None, label_dict=None) -> "ExampleCache":
        """The cache for ``paths`` parsed with ``input_cfg``; ``ready`` if a valid one exists.

        path : None = temporary file; "" = next to ``model_path`` (``MODEL.cache``) or temporary;
               else the file to use. ``opts``: the driver's ``RunOptions``; its ``stdin_cached``
               reuses a cache of standard input (otherwise rebuilt: stdin cannot be compared).
        err : text stream for notes (None = silent).
        label_dict : the run's ``labels.LabelDict`` with string labels: part of the key as it is
            now; a reused cache extends it with the names its ids stand for.
        """
        paths = list(paths) or ["-"]
        key = input_key(input_cfg, paths, label_dict)
        temporary = False
        if path is None or (path == "" and not model_path):
            if path == "" and err is not None:
                err.write("note: -c without a path and without -f: the example cache is a temporary file\n")
            fd, path = tempfile.mkstemp(prefix="lomtree-", suffix=".cache")
            os.close(fd)
            temporary = True
        elif path == "":
            path = model_path + ".cache"
        cache = cls(path, key, temporary, err, label_dict=label_dict)
        # standard input read into this cache earlier in this process (train --trees): its copy
        cache.stdin_cached = bool(getattr(opts, "stdin_cached", False))
        if temporary:
            return cache
        real = os.path.realpath(path)
        for p in paths:
            if p != "-" and os.path.realpath(p) == real:
                raise ConfigError(f"the cache file {path} is also an input")
        if model_path is not None and os.path.realpath(model_path) == real:
            raise ConfigError(f"the cache file {path} is also the model file (-f)")
        cache._check_existing()
        return cache

    def _note(self, msg: str):
        if self.err is not None:
            self.err.write(f"note: {msg}\n")

    def _check_existing(self):
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return  # nothing there: build it
        if os.path.isdir(self.path):
            raise ConfigError(f"the cache path {self.path} is a directory")
        try:
            with open(self.path, "rb") as f:
                head = f.read(len(MAGIC))
        except OSError as e:
            raise ConfigError(f"cannot read the cache {self.path}: {e.strerror}") from None
        if size > 0 and head != MAGIC[: len(head)]:
            raise ConfigError(f"{self.path} exists and is not a lomtree example cache; refusing to overwrite "
                              "it (-c takes an optional PATH: write '--cache=PATH', or put -c after the inputs)")
        stdin = any(i["path"] == "-" for i in self.key["inputs"])
        try:
            footer = self._read_footer(size)
            if footer.get("format_version") != FORMAT_VERSION or footer.get("program_version") != __version__:
                raise _Invalid(f"written by lomtree {footer.get('program_version')} "
                               f"(cache format {footer.get('format_version')})")
            if stdin and not self.stdin_cached:
                self._note(f"example cache {self.path} is rebuilt: the input is standard input")
                return
            if footer.get("key") != self.key:
                self._note(f"example cache {self.path} is rebuilt: "
                           + "; ".join(_key_differences(footer.get("key", {}), self.key)))
                return
            n_ex = 0
            for batch in self._iter_blocks(footer["n_blocks"], footer["footer_offset"], verify_only=True):
                n_ex += batch
            if n_ex != footer["n_examples"]:
                raise _Invalid("example count does not match the footer")
            names = self._label_names(footer)
        except _Invalid as e:
            self._note(f"example cache {self.path} is unusable ({e}); rebuilding it")
            return
        except OSError as e:
            self._note(f"example cache {self.path} cannot be read ({e.strerror or e}); rebuilding it")
            return
        if names is not None:
            self.label_dict.extend(names[len(self.label_dict):])
        self.n_blocks = footer["n_blocks"]
        self.n_examples = footer["n_examples"]
        self.ready = True
        self.reused = True
        self._note(f"reading examples from the cache {self.path} ({self.n_examples} examples)")

    def _label_names(self, footer: dict) -> list | None:
        """The names the cached label ids stand for (None without string labels); raises _Invalid
        unless they begin with the run's dictionary as it is (the key says they do)."""
        if self.label_dict is None:
            return None
        names = footer.get("label_names")
        have = self.label_dict.names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) \
                or names[:len(have)] != have or len(set(names)) != len(names):
            raise _Invalid("its label names are missing or do not match")
        return names

    def _read_footer(self, size: int) -> dict:
        """Check preamble and trailer, return the footer dict (+ footer_offset); raises _Invalid."""
        if size < _PREAMBLE.size + _TRAILER.size:
            raise _Invalid("truncated (too short)")
        with open(self.path, "rb") as f:
            magic, version, _ = _PREAMBLE.unpack(f.read(_PREAMBLE.size))
            if magic != MAGIC:
                raise _Invalid("bad magic")
            if version != FORMAT_VERSION:
                raise _Invalid(f"cache format version {version}, this program reads {FORMAT_VERSION}")
            f.seek(size - _TRAILER.size)
            tmagic, foff, flen, fhash, n_blocks, n_examples = _TRAILER.unpack(f.read(_TRAILER.size))
            if tmagic != _TRAILER_MAGIC:
                raise _Invalid("truncated (no end marker)")
            if foff + flen + _TRAILER.size != size or foff < _PREAMBLE.size:
                raise _Invalid("truncated or padded (lengths do not match the file size)")
            f.seek(foff)
            fb = f.read(flen)
        if xxhash.xxh3_64_intdigest(fb) != fhash:
            raise _Invalid("footer checksum mismatch")
        try:
            footer = json.loads(fb.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _Invalid("bad footer") from None
        if footer.get("n_blocks") != n_blocks or footer.get("n_examples") != n_examples:
            raise _Invalid("footer does not match the end marker")
        footer["footer_offset"] = foff
        return footer

    def _iter_blocks(self, n_blocks: int, end: int, verify_only: bool = False):
        """Yield decoded batches (or, with verify_only, example counts); raises _Invalid."""
        with open(self.path, "rb", buffering=0) as f:
            f.seek(_PREAMBLE.size)
            pos = _PREAMBLE.size
            for i in range(n_blocks):
                hb = f.read(_BLOCK.size)
                if len(hb) != _BLOCK.size:
                    raise _Invalid(f"block {i}: truncated header")
                bmagic, meta_len, n, nnz, body_len, bhash = _BLOCK.unpack(hb)
                if bmagic != _BLOCK_MAGIC or body_len & 7 or pos + _BLOCK.size + body_len > end \
                        or meta_len > body_len:
                    raise _Invalid(f"block {i}: bad header")
                body = np.empty(body_len, dtype=np.uint8)
                if f.readinto(memoryview(body)) != body_len:
                    raise _Invalid(f"block {i}: truncated")
                if xxhash.xxh3_64_intdigest(body) != bhash:
                    raise _Invalid(f"block {i}: checksum mismatch")
                pos += _BLOCK.size + body_len
                batch = _decode_block(body, meta_len, n, nnz)
                yield n if verify_only else batch
            if pos != end:
                raise _Invalid("data after the last block")

    # -- reading -----------------------------------------------------------------------------
    def read(self):
        """Yield the cached batches in order. CacheError if the file went bad since it was checked."""
        if not self.ready:
            raise CacheError(f"example cache {self.path} is not complete")
        try:
            size = os.path.getsize(self.path)
            footer = self._read_footer(size)
            if footer.get("key") != self.key:
                raise _Invalid("it was replaced by a cache of other inputs")
            yield from self._iter_blocks(footer["n_blocks"], footer["footer_offset"])
        except _Invalid as e:
            raise CacheError(f"example cache {self.path} became unreadable during the run ({e}); "
                             "rerun to rebuild it") from None
        except OSError as e:
            raise CacheError(f"cannot read the example cache {self.path}: {e.strerror or e}") from None

    # -- writing -----------------------------------------------------------------------------
    def writer(self) -> "CacheWriter":
        """A writer for a fresh cache (replaces any existing file atomically when closed)."""
        if self._writer is not None:
            self._writer.abort()
        self.ready = False
        self.failed = None
        self._writer = CacheWriter(self)
        return self._writer

    def close(self):
        """End of run: drop an unfinished writer; delete a temporary cache."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        if self.temporary:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.ready = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CacheWriter:
    """Appends batches to ``<cache>.writing.<pid>``; ``close`` renames it into place.

    A write error does not stop the run: the writer gives up, says so once (``cache.failed``), and
    the driver falls back to re-parsing the input (or fails clearly for stdin).
    """

    def __init__(self, cache: ExampleCache):
        self.cache = cache
        from .paths import temporary_name

        self.tmp = temporary_name("-c", cache.path)
        self.n_blocks = 0
        self.n_examples = 0
        self.pos = _PREAMBLE.size
        self.content = xxhash.xxh3_64()
        self.done = False
        try:
            self.f = open(self.tmp, "wb", buffering=1 << 20)
            self.f.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0))
        except OSError as e:
            self.f = None
            self._fail(e)

    def _fail(self, e: OSError):
        self.cache.failed = f"cannot write the example cache {self.cache.path}: {e.strerror or e}"
        self.cache._note(self.cache.failed)
        self.abort()

    def add(self, batch: ExampleBatch):
        if self.f is None:
            return
        n, nnz, meta_len, parts = _batch_parts(batch)
        h = xxhash.xxh3_64()
        body_len = 0
        for p in parts:
            h.update(p)
            body_len += len(p)
        digest = h.intdigest()
        try:
            self.f.write(_BLOCK.pack(_BLOCK_MAGIC, meta_len, n, nnz, body_len, digest))
            for p in parts:
                self.f.write(p)
        except OSError as e:
            self._fail(e)
            return
        self.content.update(struct.pack("<Q", digest))
        self.pos += _BLOCK.size + body_len
        self.n_blocks += 1
        self.n_examples += n

    def close(self):
        """Finish the file and move it into place; the cache becomes ``ready``."""
        if self.f is None or self.done:
            return
        c = self.cache
        footer = {
            "format": "lomtree-example-cache",
            "format_version": FORMAT_VERSION,
            "program_version": __version__,
            "key": c.key,
            "n_blocks": self.n_blocks,
            "n_examples": self.n_examples,
            "content_xxh3": self.content.hexdigest(),
        }
        if c.label_dict is not None:  # after the parse: every name a cached id stands for
            footer["label_names"] = list(c.label_dict.names)
        fb = json.dumps(footer, sort_keys=True).encode("utf-8")
        try:
            self.f.write(fb)
            self.f.write(_TRAILER.pack(_TRAILER_MAGIC, self.pos, len(fb), xxhash.xxh3_64_intdigest(fb),
                                       self.n_blocks, self.n_examples))
            self.f.close()
            self.f = None
            os.replace(self.tmp, c.path)
        except OSError as e:
            self._fail(e)
            return
        self.done = True
        c.n_blocks, c.n_examples = self.n_blocks, self.n_examples
        c.ready = True
        c._writer = None

    def abort(self):
        """Drop the unfinished file."""
        if self.f is not None:
            try:
                self.f.close()
            except OSError:
                pass
            self.f = None
        if not self.done:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
        if self.cache._writer is self:
            self.cache._writer = None


def describe(path: str) -> dict:
    """Footer of a cache file (for debugging / ``data_scripts.bench_cache``); raises CacheError."""
    c = ExampleCache(path, {}, False)
    try:
        return c._read_footer(os.path.getsize(path))
    except (_Invalid, OSError) as e:
        raise CacheError(f"{path}: not a usable example cache ({e})") from None


if __name__ == "__main__":  # pragma: no cover
    json.dump(describe(sys.argv[1]), sys.stdout, indent=2)
    sys.stdout.write("\n")
