"""``lomtree_cli.npz``, the zip reader model files are loaded with (no zipfile import at start-up).

It reads what ``np.savez`` writes exactly as ``np.load`` / zipfile do (member names and order,
dtypes, shapes, bytes), including Zip64 structures and archive comments; any damage of the zip
structures is a ``ModelFormatError`` when a model is loaded (never another exception, never a
hang), and loading a model leaves ``zipfile`` unimported.
"""

from __future__ import annotations

import io
import pathlib
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lomtree_cli import model_io, npz
from lomtree_cli.config import InputConfig, from_dict
from lomtree_cli.errors import ModelFormatError
from tests.robustness_helpers import ALL_REDUCTIONS, ROOT, available, train_api, write_lines

#: what the reader raises for a file it does not accept (besides what numpy's .npy header parser
#: raises for a garbled header); model_io turns every error into ModelFormatError
READER_ERRORS = (npz.BadZipFile, ValueError, EOFError, NotImplementedError, RuntimeError)


def read_all(path, check_crc=True):
    """name -> array of every member, with the reader under test."""
    with open(path, "rb") as f:
        members = npz.read_directory(f)
        return {name: npz.read_member(f, m, check_crc=check_crc) for name, m in members.items()}


def assert_same_as_numpy(path):
    got = read_all(path)
    assert read_all(path, check_crc=False).keys() == got.keys()
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert [n[:-4] for n in names] == list(got)  # same members, same order
    with np.load(path, allow_pickle=False) as ref:
        assert sorted(ref.files) == sorted(got)
        for name in ref.files:
            want = ref[name]
            assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
            assert got[name].flags.f_contiguous == want.flags.f_contiguous, name
            assert got[name].tobytes("A") == want.tobytes("A"), name
    return got


ARRAYS = {
    "f32": np.linspace(-1, 1, 37, dtype=np.float32),
    "f64_2d": np.arange(24, dtype=np.float64).reshape(4, 6),
    "fortran": np.asfortranarray(np.arange(30, dtype=np.int32).reshape(5, 6)),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "u64": np.array([0, 2**64 - 1], dtype=np.uint64),
    "big_endian": np.arange(7, dtype=">i4"),
    "f16": np.array([1.5, -2.25], dtype=np.float16),
    "c128": np.array([1 + 2j, -3j]),
    "bool": np.array([True, False, True]),
    "bytes": np.array([b"ab", b"cde"]),
    "unicode": np.array(["x", "yz\u00e9"]),
    "record": np.array([(1, 2.5), (3, -1.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
    "zero_d": np.array(3.25),
    "zero_d_int": np.array(7, dtype=np.int64),
    "empty": np.zeros(0, dtype=np.float32),
    "empty_2d": np.zeros((3, 0), dtype=np.int16),
    "empty_3d": np.zeros((0, 2, 5), dtype=np.uint8),
    "large": np.arange(40_000, dtype=np.float64),  # 320 KB member: beyond the 64 KiB tail read
    "nested/name/with/slashes": np.arange(3, dtype=np.int64),
}


@pytest.fixture(scope="module")
def savez_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("npz") / "arrays.npz"
    with open(p, "wb") as f:
        np.savez(f, **ARRAYS)
    return p


def test_reads_what_savez_writes(savez_file):
    got = assert_same_as_numpy(savez_file)
    assert list(got) == list(ARRAYS)
    for name, a in ARRAYS.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape
        np.testing.assert_array_equal(got[name], a)


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_each_member_alone(tmp_path, name):
    p = tmp_path / "one.npz"
    np.savez(p, **{name: ARRAYS[name]})
    assert_same_as_numpy(p)


def test_npy_format_versions(tmp_path):
    """.npy 1.0 and 2.0 members (what np.save writes) are read; 3.0 (np.save writes it only for
    structured dtypes with non-latin-1 field names; never in a model) is refused; a header over
    numpy's safe size (np.save writes those as 2.0) is refused, as np.load refuses it."""
    p = tmp_path / "versions.npz"
    a = np.arange(12, dtype="<f4").reshape(3, 4)
    with zipfile.ZipFile(p, "w") as z:
        for version in ((1, 0), (2, 0), (3, 0)):
            b = io.BytesIO()
            np.lib.format.write_array(b, a, version=version)
            z.writestr(f"v{version[0]}.npy", b.getvalue())
    with open(p, "rb") as f:
        members = npz.read_directory(f)
        for name in ("v1", "v2"):
            np.testing.assert_array_equal(npz.read_member(f, members[name], check_crc=True), a)
        with pytest.raises(ValueError, match="version"):
            npz.read_member(f, members["v3"])
    dt = np.dtype([(f"field_with_a_rather_long_name_{i:05d}", "<i2") for i in range(2000)])
    big = tmp_path / "big_header.npz"
    with pytest.warns(UserWarning, match="format 2.0"):
        np.savez(big, a=np.zeros(3, dt))
    with pytest.raises(ValueError, match="Header info length"):
        np.load(big, allow_pickle=False)["a"]
    with pytest.raises(ValueError, match="Header info length"):
        read_all(big)


def test_empty_archive_and_utf8_names(tmp_path):
    p = tmp_path / "empty.npz"
    np.savez(p)
    assert read_all(p) == {}
    p = tmp_path / "utf8.npz"
    np.savez(p, **{"\u00e9t\u00e9": np.arange(2), "r\u00e9duction/\u4e2d": np.ones(3, np.float32)})
    assert set(assert_same_as_numpy(p)) == {"\u00e9t\u00e9", "r\u00e9duction/\u4e2d"}


def test_cp437_names_without_the_utf8_flag(tmp_path):
    """Names without the UTF-8 flag are zip's historical cp437, as zipfile decodes them."""
    p = tmp_path / "cp437.npz"
    np.savez(p, **{"caf\u00e9": np.arange(2)})
    data = bytearray(p.read_bytes())
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(sig)
        flags = struct.unpack_from("<H", data, at + flag_at)[0]
        assert flags & 0x800
        struct.pack_into("<H", data, at + flag_at, flags & ~0x800)
    p.write_bytes(bytes(data))
    with zipfile.ZipFile(p) as z:
        (zname,) = z.namelist()
    assert list(read_all(p)) == [zname[:-4]] and zname != "caf\u00e9.npy"


# ---------------------------------------------------------------- Zip64 structures and comments


def _central_entries(data: bytes):
    """(start, end) of every central directory entry, the end record's offset, and its fields."""
    eocd = data.rfind(b"PK\x05\x06")
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", data, eocd)
    entries, p = [], cd_offset
    for _ in range(count):
        n, m, k = struct.unpack_from("<3H", data, p + 28)
        entries.append((p, p + 46 + n + m + k))
        p += 46 + n + m + k
    assert p == cd_offset + cd_size == eocd
    return entries, cd_offset, eocd


def zip64ify(data: bytes, fields=("usize", "csize", "offset"), comment: bytes = b"") -> bytes:
    """The same archive with the given central directory fields moved to Zip64 extra fields
    (0xFFFFFFFF in the entry) and Zip64 end records before the end record (which gets the
    0xFFFF/0xFFFFFFFF placeholders), plus an archive comment: what zipfile writes for big archives."""
    entries, cd_offset, eocd = _central_entries(data)
    cd = bytearray()
    for start, end in entries:
        e = bytearray(data[start:end])
        csize, usize = struct.unpack_from("<2L", e, 20)
        n, m = struct.unpack_from("<2H", e, 28)
        offset = struct.unpack_from("<L", e, 42)[0]
        values = []
        for field, at, value in (("usize", 24, usize), ("csize", 20, csize), ("offset", 42, offset)):
            if field in fields:
                struct.pack_into("<L", e, at, 0xFFFFFFFF)
                values.append(value)
        extra = struct.pack("<HH", 0x0001, 8 * len(values)) + struct.pack(f"<{len(values)}Q", *values)
        extra = struct.pack("<HH", 0x5455, 5) + b"\x01\x00\x00\x00\x00" + extra  # another field first
        e[46 + n + m:46 + n + m] = extra
        struct.pack_into("<H", e, 30, m + len(extra))
        cd += e
    record_at = cd_offset + len(cd)
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, len(entries), len(entries), len(cd),
                         cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, record_at, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    return data[:cd_offset] + bytes(cd) + record + locator + end + comment


ZIP64_FIELDS = [(), ("usize",), ("csize",), ("offset",), ("usize", "offset"), ("csize", "offset"),
                ("usize", "csize", "offset")]


@pytest.mark.parametrize("fields", ZIP64_FIELDS, ids=lambda f: "+".join(f) or "none")
def test_zip64_extra_fields_and_end_records(savez_file, tmp_path, fields):
    p = tmp_path / "z64.npz"
    p.write_bytes(zip64ify(savez_file.read_bytes(), fields))
    got = assert_same_as_numpy(p)
    assert list(got) == list(ARRAYS)


@pytest.mark.parametrize("comment", [b"", b"a comment", b"PK\x05\x06 looks like an end record" * 3,
                                     bytes(range(256)) * 255])
@pytest.mark.parametrize("z64", [False, True])
def test_archive_comments(savez_file, tmp_path, comment, z64):
    data = savez_file.read_bytes()
    if z64:
        data = zip64ify(data, comment=comment)
    else:
        data = data[:-2] + struct.pack("<H", len(comment)) + comment
    p = tmp_path / "comment.npz"
    p.write_bytes(data)
    if b"PK\x05\x06" in comment:  # zipfile takes the signature in the comment: compare with the original
        got, want = read_all(p), read_all(savez_file)
        assert list(got) == list(want) and all(got[k].tobytes() == want[k].tobytes() for k in got)
        return
    with zipfile.ZipFile(p) as z:
        assert z.comment == comment
    assert_same_as_numpy(p)


def test_zip64_end_records_written_by_zipfile(tmp_path):
    """More than 65535 members: zipfile itself writes the Zip64 end records."""
    b = io.BytesIO()
    np.save(b, np.int8(1))
    one = b.getvalue()
    p = tmp_path / "many.npz"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        for i in range(65536):
            z.writestr(f"a{i}.npy", one)
        b = io.BytesIO()
        np.save(b, np.arange(100_000, dtype=np.int64))
        z.writestr("last.npy", b.getvalue())
    data = p.read_bytes()
    assert b"PK\x06\x06" in data[-200:] and b"PK\x06\x07" in data[-200:]
    with open(p, "rb") as f:
        members = npz.read_directory(f)
        assert len(members) == 65537 and list(members)[:2] == ["a0", "a1"]
        assert npz.read_member(f, members["a65535"], check_crc=True) == 1
        np.testing.assert_array_equal(npz.read_member(f, members["last"], check_crc=True), np.arange(100_000))


def test_refused_zip_features(savez_file, tmp_path):
    """Compressed, encrypted, patched or non-.npy members, names that differ between the central
    directory and the local header, sizes that disagree: the directory reads, the member raises
    when it is read. Bytes after the end record: the directory is refused."""
    data = savez_file.read_bytes()
    entries, _, _ = _central_entries(data)
    first = entries[0][0]  # f32.npy
    assert data[first + 46:first + 53] == b"f32.npy"

    def variant(edit):
        d = bytearray(data)
        edit(d)
        p = tmp_path / "variant.npz"
        p.write_bytes(bytes(d))
        return p

    def name_to(d, name):
        d[first + 46:first + 53] = name

    cases = [
        (lambda d: struct.pack_into("<H", d, first + 10, 8), NotImplementedError, "method 8"),  # deflate
        (lambda d: struct.pack_into("<H", d, first + 8, 1), RuntimeError, "encrypted"),
        (lambda d: struct.pack_into("<H", d, first + 8, 0x20), NotImplementedError, "flags 0x20"),
        (lambda d: name_to(d, b"f32.npz"), npz.BadZipFile, "not an .npy"),
        (lambda d: name_to(d, b"f33.npy"), npz.BadZipFile, "differ"),
        (lambda d: struct.pack_into("<L", d, first + 20, 10), npz.BadZipFile, "compressed size"),
        (lambda d: struct.pack_into("<2L", d, first + 20, 1 << 20, 1 << 20), npz.BadZipFile, "overlaps"),
    ]
    for edit, exc, match in cases:
        with open(variant(edit), "rb") as f:
            members = npz.read_directory(f)
            assert list(members)[1:] == list(ARRAYS)[1:]
            for name, m in list(members.items())[1:]:
                np.testing.assert_array_equal(npz.read_member(f, m), ARRAYS[name])
            with pytest.raises(exc, match=match):
                npz.read_member(f, list(members.values())[0])
    with pytest.raises(npz.BadZipFile):
        with open(variant(lambda d: d.extend(b"\0")), "rb") as f:
            npz.read_directory(f)
    comp = tmp_path / "compressed.npz"
    np.savez_compressed(comp, a=np.arange(10))
    with open(comp, "rb") as f:
        with pytest.raises(NotImplementedError):
            npz.read_member(f, npz.read_directory(f)["a"])


def test_duplicate_member_names(tmp_path):
    b = io.BytesIO()
    np.save(b, np.arange(3))
    p = tmp_path / "dup.npz"
    with pytest.warns(UserWarning, match="Duplicate name"):
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("a.npy", b.getvalue())
            z.writestr("b.npy", b.getvalue())
            z.writestr("a.npy", b.getvalue())
    with open(p, "rb") as f:
        members = npz.read_directory(f)
        assert list(members) == ["a", "b"]
        np.testing.assert_array_equal(npz.read_member(f, members["b"]), np.arange(3))
        with pytest.raises(npz.BadZipFile, match="two members"):
            npz.read_member(f, members["a"])


def test_object_and_non_buffer_members_are_refused(tmp_path):
    """Object arrays (pickles) always; datetime64 / timedelta64 (not buffers: never in a model, and
    model_io's checksum could not hash them), empty or not."""
    p = tmp_path / "obj.npz"
    np.savez(p, a=np.array([1, "x", None], dtype=object), d=np.array(["2020-01-01"], dtype="datetime64[D]"),
             t=np.zeros(0, dtype="m8[s]"))
    with open(p, "rb") as f:
        members = npz.read_directory(f)
        with pytest.raises(ValueError, match="object"):
            npz.read_member(f, members["a"])
        for name in ("d", "t"):
            with pytest.raises(ValueError, match="buffer"):
                npz.read_member(f, members[name])


# ---------------------------------------------------------------- lomtree models


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    train = write_lines(d / "train.vw", 6, 200, seed=1)
    cache = {}

    def get(name):
        if name not in cache:
            available(name)
            path = d / f"{name}.lt"
            train_api(name, [train], str(path))
            cache[name] = path
        return cache[name]

    return get


@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_models_read_as_numpy_reads_them(model_files, name):
    path = model_files(name)
    got = assert_same_as_numpy(path)
    members = model_io._read_members(str(path))
    assert list(members) == list(got)
    for k, a in got.items():
        assert members[k].dtype == a.dtype and members[k].shape == a.shape
        np.testing.assert_array_equal(members[k], a)
    lazy = model_io._read_members(str(path), model_io.PREDICT_SKIP)
    assert list(lazy) == list(got) and all(lazy[k] is None for k in model_io.PREDICT_SKIP)


def test_zip64_model_loads_the_same(model_files, tmp_path):
    path = model_files("oaa")
    p = tmp_path / "z64.lt"
    p.write_bytes(zip64ify(path.read_bytes(), comment=b"zip64 and a comment"))
    ref, got = model_io.load_model(str(path)), model_io.load_model(str(p))
    np.testing.assert_array_equal(got.learner.arrays.table, ref.learner.arrays.table)
    assert got.header == ref.header and model_io.peek_input_config(str(p)) == ref.input_config


def _structure_offsets(data: bytes):
    """Offsets of every byte of the zip structures: local headers (with name and extra field),
    central directory, end records."""
    out = set()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            n, m = struct.unpack_from("<2H", data, info.header_offset + 26)
            out.update(range(info.header_offset, info.header_offset + 30 + n + m))
        out.update(range(z.start_dir, len(data)))
    return sorted(out)


def _load_outcome(path: pathlib.Path, data: bytes, original_header):
    """'refused' (ModelFormatError), or 'same' (loaded; identical to the original); anything else fails."""
    path.write_bytes(data)
    try:
        m = model_io.load_model(str(path))
    except ModelFormatError as e:
        assert str(e).isprintable() and "\n" not in str(e) and str(path) in str(e)
        outcome = "refused"
    else:
        assert m.header == original_header, "a damaged file loaded a different model"
        outcome = "same"
    peek = model_io.peek_input_config(str(path))  # never raises
    assert peek is None or peek == from_dict(InputConfig, original_header["input"])
    return outcome


@pytest.mark.parametrize("z64", [False, True], ids=["zip", "zip64"])
def test_every_truncation_and_structure_flip_is_refused(model_files, tmp_path, z64):
    """Every truncation, and flips of every byte of the zip structures (a few masks each): a
    ModelFormatError, or (bytes that carry nothing: times, versions, attributes, unused CRCs) the
    same model. Never another exception."""
    path = model_files("oaa")
    original = path.read_bytes()
    if z64:
        original = zip64ify(original, comment=b"c")
    header = model_io.load_model(str(path)).header
    p = tmp_path / "v.lt"
    outcomes = {"refused": 0, "same": 0}
    for cut in range(len(original)):
        assert _load_outcome(p, original[:cut], header) == "refused"
    for pos in _structure_offsets(original):
        for mask in (0x01, 0x10, 0x80, 0xFF):
            d = bytearray(original)
            d[pos] ^= mask
            outcomes[_load_outcome(p, bytes(d), header)] += 1
    assert outcomes["refused"] > outcomes["same"], outcomes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_is_refused_or_harmless(model_files, tmp_path, data):
    """Several random byte changes (biased to the zip structures), optionally a truncation."""
    path = model_files("oaa")
    original = path.read_bytes()
    header = _header_of(path)
    offsets = _structure_offsets(original)
    d = bytearray(original)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.sampled_from(offsets) | st.integers(0, len(d) - 1))
        d[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        d = d[:data.draw(st.integers(0, len(d)))]
    _load_outcome(tmp_path / "h.lt", bytes(d), header)


_HEADERS = {}


def _header_of(path):
    if path not in _HEADERS:
        _HEADERS[path] = model_io.load_model(str(path)).header
    return _HEADERS[path]


def _assert_reader_error(e: BaseException):
    """One of the reader's own errors, or what numpy's .npy header parser raises for a garbled
    header (TokenError, SyntaxError, ...): never e.g. a struct.error or IndexError of the reader."""
    if isinstance(e, READER_ERRORS):
        return
    files, tb = [], e.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    last = max(i for i, f in enumerate(files) if f == npz.__file__)
    assert last + 1 < len(files) and "numpy" in files[last + 1], (repr(e), files)  # raised under numpy's parser


def test_reader_raises_only_its_errors_on_garbage(savez_file, tmp_path):
    """Random damage of a .npz (many bytes changed, often in the last KB where the directory is,
    32-bit fields overwritten, truncations) and zip-shaped garbage: the reader raises only its
    errors, and a model load only ModelFormatError."""
    rng = np.random.default_rng(5)
    original = savez_file.read_bytes()
    originals = [original, zip64ify(original), zip64ify(original, ("offset",), b"comment")]
    p = tmp_path / "g.npz"
    for i in range(1500):
        if i % 5 == 0:  # garbage that starts like a zip, with zip signatures in it
            d = bytearray(b"PK\x03\x04" + rng.integers(0, 256, int(rng.integers(0, 600)), dtype=np.uint8).tobytes())
            for sig in (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07", b"PK\x03\x04"):
                if len(d) > 30 and rng.random() < 0.5:
                    at = int(rng.integers(0, len(d) - 4))
                    d[at:at + 4] = sig
        else:
            d = bytearray(originals[i % 3])
            for _ in range(int(rng.integers(1, 5))):
                near_end = rng.random() < 0.7
                pos = len(d) - 1 - min(len(d) - 1, int(rng.exponential(600))) if near_end \
                    else int(rng.integers(0, len(d)))
                if rng.random() < 0.3 and pos + 4 <= len(d):
                    value = int(rng.choice([0, 0xFFFFFFFF, len(d), max(0, len(d) - 22), rng.integers(0, 1 << 32)]))
                    struct.pack_into("<L", d, pos, value)
                else:
                    d[pos] = int(rng.integers(0, 256))
            if rng.random() < 0.1:
                d = d[:int(rng.integers(1, len(d)))]
        p.write_bytes(bytes(d))
        with open(p, "rb") as f:
            try:
                members = npz.read_directory(f)
                for m in (members or {}).values():
                    npz.read_member(f, m, check_crc=bool(i % 2))
            except Exception as e:  # noqa: BLE001 - checked just below
                _assert_reader_error(e)
        try:
            model_io._read_members(str(p))
        except ModelFormatError:
            pass


# ---------------------------------------------------------------- start-up: no zipfile


_SPY = """
import json, sys, traceback
stacks = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "zipfile":
            stacks.append([f.filename for f in traceback.extract_stack()])
sys.meta_path.insert(0, Spy())
from lomtree_cli import model_io
path = sys.argv[1]
model_io.peek_input_config(path)
model_io._read_members(path)
after_read = "zipfile" in sys.modules
m = model_io.load_model(path, predict_only=True, skip_unused=True)
json.dump({"after_read": after_read, "zipfile": "zipfile" in sys.modules, "numba": "numba" in sys.modules,
           "stacks": stacks, "reduction": m.reduction.name}, sys.stdout)
"""


@pytest.mark.parametrize("name", ["oaa", "lomtree"])
def test_loading_a_model_does_not_import_zipfile(model_files, name):
    """A fresh interpreter: reading a model (peek, every member) and ``lomtree predict``'s load leave
    zipfile unimported. The one exception is numba's own import (llvmlite imports zipfile through
    importlib.resources), which happens only when the compiled (AOT) kernels do not serve: then
    zipfile's import must come from there, never from reading the model."""
    import json

    path = model_files(name)
    out = subprocess.run([sys.executable, "-c", _SPY, str(path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["reduction"] == name and not r["after_read"], r
    if not r["numba"]:
        assert not r["zipfile"] and not r["stacks"], r
    for stack in r["stacks"]:
        assert any("llvmlite" in f or "numba" in f for f in stack), stack
