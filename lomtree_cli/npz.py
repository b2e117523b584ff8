"""Reading the ``.npz`` files ``np.savez`` writes (lomtree model files) without :mod:`zipfile`.

Why: ``numpy.load`` opens an ``.npz`` through :mod:`zipfile`, whose import (pathlib, shutil, bz2,
lzma, urllib.parse, ipaddress come with it) costs 15-20 ms of the start-up of every command that
loads a model (``lomtree predict``, ``train -i``, ``inspect``): more than reading a small model.
Saving still uses ``np.savez`` (and so :mod:`zipfile`); this module only reads.

What it reads: the subset of the zip format (PKWARE APPNOTE.TXT) that ``np.savez`` writes. Anything
else is refused, with the exception types zipfile raised for the same problems where it has one
(mostly ``BadZipFile``):

- the End Of Central Directory record, searched for in the last 64 KiB + 22 bytes (an archive
  comment is at most 64 KiB); it must end the file exactly (comment included; no bytes appended)
  and be on disk 0;
- the Zip64 end of central directory locator (just before that record) and the Zip64 record it
  points to, when present (archives of more than 65535 members or past 2 GiB): their counts, size
  and offset replace the record's;
- the central directory: exactly the announced number of file headers, filling exactly the bytes
  between its offset and the end records (no data before the archive or between the structures);
  sizes and local header offset of 0xFFFFFFFF are read from the Zip64 extra field (header id
  0x0001) in the order uncompressed size, compressed size, local header offset;
- members: named ``<name>.npy``, each name once, stored (method 0, compressed size = size), not
  encrypted, inside the file and not overlapping one another or the central directory;
- a member's local file header (signature, the same name as in the central directory) gives where
  its data starts (30 bytes + name + extra field); its other fields are not used (the central
  directory's sizes are authoritative, as for zipfile).

``read_directory`` raises for the end records and the central directory's framing (where
``zipfile.ZipFile()`` raised); a member that cannot be read (compressed, encrypted, inconsistent
sizes or name, overlapping) raises when ``read_member`` reads it, so a member the caller skips is
not judged (as with ``np.load``).

A member's data is a ``.npy`` (format 1.0 or 2.0, parsed by numpy's own header reader), read with
``readinto`` straight into the array. Object dtypes are refused: nothing is ever unpickled, no code
runs; so are dtypes that are not buffers (datetime64, timedelta64: never in a model). The zip CRC-32 is checked only when asked (``read_member(..., check_crc=True)``: lomtree's
header member); model_io covers every other member by the xxh3 checksums in that header, which
is why their CRC pass (about 1.5 ms per MB) is skipped.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record: 22 bytes + comment
_EOCD64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator: 20 bytes
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record: 56 bytes + extensible data
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # central directory file header: 46 bytes + name, extra, comment
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # local file header: 30 bytes + name, extra
_HALF = struct.Struct("<HH")
_QUAD = struct.Struct("<Q")

_MAX_COMMENT = 0xFFFF
_MAX_EXTRACT_VERSION = 63  # what zipfile reads
_FLAG_ENCRYPTED, _FLAG_PATCHED, _FLAG_STRONG_ENCRYPTION, _FLAG_UTF8 = 0x1, 0x20, 0x40, 0x800
_NPY_MAGIC = b"\x93NUMPY"


class BadZipFile(ValueError):
    """The zip container is not one this reader accepts (named like zipfile's error, which is what
    numpy's loader reported for the same problems)."""


class Member:
    """A ``<name>.npy`` member: where its local header is, its data size and CRC-32, where the next
    structure of the file starts (its data must end before), and ``problem``: the error reading it
    raises (an unsupported or inconsistent directory entry), None when it can be read."""

    __slots__ = ("name", "raw_name", "offset", "size", "crc", "limit", "problem")

    def __init__(self, name: str, raw_name: bytes, offset: int, size: int, crc: int, problem=None):
        self.name, self.raw_name, self.offset, self.size, self.crc = name, raw_name, offset, size, crc
        self.limit = 0
        self.problem = problem


def _zip64_extra(extra: bytes, size: int, csize: int, offset: int):
    """Sizes and offset, their 0xFFFFFFFF placeholders replaced from the Zip64 extra field; the
    extra field's framing is checked (as zipfile does)."""
    p = 0
    while p + 4 <= len(extra):
        kind, length = _HALF.unpack_from(extra, p)
        p += 4
        if p + length > len(extra):
            raise BadZipFile("corrupt extra field")
        if kind == 0x0001:
            q, end, out = p, p + length, []
            for value in (size, csize, offset):
                if value == 0xFFFFFFFF:
                    if q + 8 > end:
                        raise BadZipFile("corrupt zip64 extra field")
                    value = _QUAD.unpack_from(extra, q)[0]
                    q += 8
                out.append(value)
            size, csize, offset = out
        p += length
    if 0xFFFFFFFF in (size, csize, offset):
        raise BadZipFile("0xFFFFFFFF size or offset without a zip64 extra field")
    return size, csize, offset


def _decode_name(raw: bytes, flags: int) -> str:
    if flags & _FLAG_UTF8:
        return raw.decode("utf-8")
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return raw.decode("cp437")  # zip's historical encoding (zipfile's default)


def read_directory(f) -> dict | None:
    """``name -> Member`` (``.npy`` suffix removed, central directory order) of the ``.npz`` open in
    ``f`` (a seekable binary file); None when the file is a single ``.npy`` array (which ``np.load``
    would have returned as an array). ``EOFError`` for an empty file, ``ValueError`` for a file that
    is neither, ``BadZipFile`` (``NotImplementedError`` for a zip version above 6.3) for a problem
    of the end records or of the central directory's framing; an entry that cannot be read is
    reported by ``read_member``."""
    f.seek(0)
    head = f.read(len(_NPY_MAGIC))
    if not head:
        raise EOFError("empty file")
    if head == _NPY_MAGIC:
        return None
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise ValueError("neither a zip archive nor a .npy file")
    size = f.seek(0, 2)

    # End Of Central Directory: the last signature whose record and comment end the file
    tail_len = min(size, _EOCD.size + _MAX_COMMENT)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    if len(tail) != tail_len:
        raise BadZipFile("short read")
    pos = tail_len
    while True:
        pos = tail.rfind(b"PK\x05\x06", 0, pos)
        if pos < 0:
            raise BadZipFile("File is not a zip file")
        if pos + _EOCD.size <= tail_len:
            record = _EOCD.unpack_from(tail, pos)
            if pos + _EOCD.size + record[7] == tail_len:
                break
    eocd = size - tail_len + pos
    _, disk, cd_disk, count_here, count, cd_size, cd_offset, _ = record
    cd_end = eocd

    # Zip64 end of central directory locator and record
    if eocd >= _EOCD64_LOCATOR.size:
        locator_at = eocd - _EOCD64_LOCATOR.size
        f.seek(locator_at)
        locator = f.read(_EOCD64_LOCATOR.size)
        if len(locator) != _EOCD64_LOCATOR.size:
            raise BadZipFile("short read")
        if locator[:4] == b"PK\x06\x07":
            _, record_disk, record_at, disks = _EOCD64_LOCATOR.unpack(locator)
            if record_disk != 0 or disks > 1:
                raise BadZipFile("zip files that span several disks are not supported")
            if record_at + _EOCD64.size > locator_at:
                raise BadZipFile("bad zip64 end of central directory offset")
            f.seek(record_at)
            record64 = f.read(_EOCD64.size)
            if len(record64) != _EOCD64.size:
                raise BadZipFile("short read")
            (sig, record_size, _, _, disk, cd_disk, count_here, count, cd_size,
             cd_offset) = _EOCD64.unpack(record64)
            if sig != b"PK\x06\x06" or record_at + 12 + record_size != locator_at:
                raise BadZipFile("bad zip64 end of central directory record")
            cd_end = record_at
    if disk != 0 or cd_disk != 0 or count_here != count:
        raise BadZipFile("zip files that span several disks are not supported")
    if cd_offset + cd_size != cd_end:
        raise BadZipFile("Bad offset for central directory")

    # central directory. Framing errors raise here (where zipfile's ZipFile() raised); an entry
    # that cannot be read (compressed, encrypted, sizes, name, overlap) raises when it is read
    f.seek(cd_offset)
    cd = f.read(cd_size)
    if len(cd) != cd_size:
        raise BadZipFile("Truncated central directory")
    members = {}
    p = 0
    for _ in range(count):
        if p + _CENTRAL.size > cd_size:
            raise BadZipFile("Truncated central directory")
        (sig, _, _, extract_version, _, flags, method, _, _, crc, csize, usize, name_len, extra_len,
         comment_len, _, _, _, offset) = _CENTRAL.unpack_from(cd, p)
        if sig != b"PK\x01\x02":
            raise BadZipFile("Bad magic number for central directory")
        name_at = p + _CENTRAL.size
        p = name_at + name_len + extra_len + comment_len
        if p > cd_size:
            raise BadZipFile("Truncated central directory")
        if extract_version > _MAX_EXTRACT_VERSION:
            raise NotImplementedError(f"zip file version {extract_version / 10:.1f}")
        raw_name = cd[name_at:name_at + name_len]
        name = _decode_name(raw_name, flags)
        usize, csize, offset = _zip64_extra(cd[name_at + name_len:name_at + name_len + extra_len],
                                            usize, csize, offset)
        problem = None
        if flags & (_FLAG_PATCHED | _FLAG_STRONG_ENCRYPTION) or method != 0:
            problem = NotImplementedError(f"{name}: compression method {method} or flags {flags:#x} "
                                          "(only stored members are read)")
        elif flags & _FLAG_ENCRYPTED:
            problem = RuntimeError(f"{name} is encrypted")
        elif csize != usize:
            problem = BadZipFile(f"{name}: stored member whose compressed size is not its size")
        if name.endswith(".npy"):
            name = name[:-4]
        else:
            problem = BadZipFile(f"{name}: not an .npy member")
        if name in members:
            members[name].problem = BadZipFile(f"{name}: two members of that name")
            continue
        members[name] = Member(name, raw_name, offset, usize, crc, problem)
    if p != cd_size:
        raise BadZipFile("central directory size does not match its entries")

    # each member (at least its local header, name and data) ends before the next one starts, the
    # last one before the central directory
    ordered = sorted(members.values(), key=lambda m: m.offset)
    for m, nxt in zip(ordered, ordered[1:] + [None]):
        m.limit = cd_offset if nxt is None else min(nxt.offset, cd_offset)
        if m.offset + _LOCAL.size + len(m.raw_name) + m.size > m.limit and m.problem is None:
            m.problem = BadZipFile(f"{m.name}: overlaps the next member")
    return members


def read_member(f, m: Member, check_crc: bool = False) -> np.ndarray:
    """The array of member ``m`` of the ``.npz`` open in ``f`` (``read_directory``), its zip CRC-32
    checked with ``check_crc``. Never creates object arrays. Raises ``m.problem`` (an entry this
    reader does not read), ``BadZipFile`` / ``EOFError`` for the local header or the data's place,
    ``ValueError`` for the ``.npy`` (or what numpy's header parser raises for a garbled header)."""
    if m.problem is not None:
        raise m.problem
    f.seek(m.offset)
    want = _LOCAL.size + len(m.raw_name)
    local = f.read(want)
    if len(local) != want:
        raise BadZipFile("Truncated file header")
    sig, _, _, _, _, _, _, _, _, _, name_len, extra_len = _LOCAL.unpack_from(local)
    if sig != b"PK\x03\x04":
        raise BadZipFile("Bad magic number for file header")
    if name_len != len(m.raw_name) or local[_LOCAL.size:] != m.raw_name:
        raise BadZipFile("file name in directory and header differ")
    start = m.offset + _LOCAL.size + name_len + extra_len
    if start + m.size > m.limit:
        raise BadZipFile("member overlaps the next one")
    f.seek(start)
    if check_crc:
        data = f.read(m.size)
        if len(data) != m.size:
            raise EOFError("truncated member")
        if zlib.crc32(data) != m.crc:
            raise BadZipFile(f"Bad CRC-32 for file {m.name}.npy")
        f = io.BytesIO(data)
    return _read_npy(f, m.size)


def _read_npy(f, size: int) -> np.ndarray:
    """The ``.npy`` of ``size`` bytes at ``f``'s position."""
    start = f.tell()
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError("unsupported .npy version")
    if dtype.hasobject:
        raise ValueError("object member")
    if dtype.subdtype is not None:  # np.save folds those into the shape
        raise ValueError("subarray dtype")
    count = 1
    for d in shape:
        if d < 0:
            raise ValueError("negative dimension")
        count *= d
    if f.tell() - start + count * dtype.itemsize != size:
        raise ValueError("member size does not match its header")
    a = np.empty(count, dtype=dtype)
    buf = memoryview(a).cast("B")  # ValueError for dtypes that are not buffers (datetime64, timedelta64)
    if a.nbytes and f.readinto(buf) != a.nbytes:
        raise ValueError("truncated member")
    return a.reshape(shape, order="F" if fortran else "C")


__all__ = ["BadZipFile", "Member", "read_directory", "read_member"]
