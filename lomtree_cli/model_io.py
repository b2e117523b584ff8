"""Model files: save, load, inspect (docs/ALGORITHMS.md §5).

Format (``format_version`` 1): an uncompressed ``.npz`` (a zip of ``.npy`` members) holding

- ``header``: uint8 array of UTF-8 JSON: ``format`` = ``"lomtree-model"``, ``format_version``,
  ``program_version``, ``reduction`` (its name), the configs (``input``, ``learner``,
  ``reduction_config``), ``learner_meta`` and ``reduction_meta`` scalars (current learning rate,
  SGD clock, tree counters, RNG state, ...), ``passes_done``, and ``checksums``: the xxh3-128
  checksum of every other member's dtype, shape and bytes;
- ``labels/names`` (string labels) and ``reduction/label_counts`` (multi-label models), when used;
- ``learner/<name>``: the weight table stored sparsely (``nz`` = slots whose w, G or N bit pattern
  is non-zero, then ``w``, ``G``, ``N`` at those slots) plus ``model_S``, ``model_T``;
- ``reduction/<name>``: one member per entry of the reduction's ``state()``.

Predict-only models (``train --predict_only_model``, ``format_version`` 4; full models stay
version 1): header ``predict_only``, ``weight_threshold``; ``learner/w`` holds the weights
prediction uses (averaged under ``--average``) but those below ``--weight-threshold`` in
magnitude, at the slots of ``learner/slot_gaps`` (``learner.gap_code``: 2 bytes a slot) or of a
bitmap ``learner/slot_bits`` when that is smaller, and ``learner/size`` (``2^b``); no ``G``, ``N``
or running sum, so ``-i`` refuses them; header ``narrowed`` lists the reduction's int64 arrays
stored as int32 (values that fit). Version 2 (still read) listed the slots as ``learner/nz``
(uint32), every array at its own type. A new member or meta key needs a default for older files,
or a new ``format_version``.

Files of several trees (``train --trees N``, ``format_version`` 3): member ``tree<i>/<name>`` is
member ``<name>`` of tree i's model file (i = 1..N, each a predict-only model with its own
header ``tree<i>/header`` and checksums); the file's ``header`` holds ``trees`` = N and the
checksums of the trees' headers. ``lomtree predict`` (its daemon too), ``inspect`` and the API's
``Ensemble.load`` read them (``load_models``); what takes one model (``-i`` to train on, Dask,
``Classifier.load``) refuses them with a message naming the file.

Loading reads the file with numpy's own reader, ``np.load(..., allow_pickle=False)``, which never
creates object arrays: no code is ever run. Compressed members (``np.savez_compressed``) are
refused before they are read (a small file must not expand into gigabytes). Magic, version,
member set, dtypes and checksums are verified before anything is used; any problem is a
``ModelFormatError`` (one line, exit code 2). Every model written since format version 1 reads
this way; another version is refused with a message naming it.
Saving iterates ``state_members()`` (``state()`` with its large members as ``streamed.Streamed``,
made a piece at a time) so save and load cannot drift, writes the members one at a time and the
header last into ``.NAME.PID.writing`` in the target directory, fsyncs, then ``os.replace``. A symlink ``path`` is followed (its target is
written; ``paths.check_outputs`` has refused devices and special files before the run), and
such files of processes that no longer run (a save killed by SIGKILL) are removed first. A failed write (disk full) is a ``LomtreeError`` naming the user's path.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import NamedTuple

import numpy as np
import xxhash

from .version import __version__
from .config import InputConfig, LearnerConfig, ReductionConfig, from_dict, to_dict
from .errors import ConfigError, LomtreeError, ModelFormatError
from .streamed import Streamed, materialize

MAGIC = "lomtree-model"
#: the version of a full model (unchanged since version 1); predict-only models are ``PREDICT_ONLY_VERSION``
FORMAT_VERSION = 1
#: the version of a predict-only model (``--predict_only_model``): its weight table is
#: ``learner/w`` at the slots of ``learner/slot_gaps`` or of ``learner/slot_bits`` (a bitmap), with
#: no optimiser state; older readers refuse it with a message naming the version
PREDICT_ONLY_VERSION = 4
#: the predict-only versions read: 2 listed the slots as ``learner/nz`` (uint32)
PREDICT_ONLY_VERSIONS = (2, PREDICT_ONLY_VERSION)
#: the version of a file of several trees (``train --trees N``): members ``tree<i>/...``
ENSEMBLE_VERSION = 3
#: the versions of one model this lomtree reads
READ_VERSIONS = (FORMAT_VERSION, *PREDICT_ONLY_VERSIONS)
#: the most trees a file of several trees holds (a header's claim is bounded by it)
MAX_TREES = 64


class Compact(NamedTuple):
    """How to write a predict-only model: weights with ``|w| < weight_threshold`` become 0 (and
    are not stored)."""

    weight_threshold: float = 0.0


def check_weight_threshold(value) -> float:
    """``--weight-threshold``'s value as a float >= 0 (ConfigError otherwise)."""
    from .errors import ConfigError

    t = float(value)
    if not (t >= 0.0 and np.isfinite(t)):
        raise ConfigError(f"--weight-threshold must be a finite number >= 0, got {value}")
    return t


def _hasher(dtype: np.dtype, shape: tuple):
    """The running checksum of a member of this dtype and shape, before its bytes."""
    h = xxhash.xxh3_128()
    h.update(str(dtype.str).encode())
    h.update(repr(shape).encode())
    return h


def _raw(a: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B")  # 1-D: (0, M) cannot be cast


def _digest(a: np.ndarray) -> str:
    """Checksum of an array member: xxh3-128 of its dtype, shape and bytes (fast; not for security)."""
    h = _hasher(a.dtype, a.shape)
    h.update(_raw(a))
    return h.hexdigest()


def _non_finite(arrays: dict) -> str | None:
    """The name of the first floating-point member holding a NaN or an infinity, else None
    (checked a million numbers at a time: no copy of a large weight table)."""
    for name, a in arrays.items():
        if a is None or a.dtype.kind not in "fc":
            continue
        flat = a.reshape(-1)
        for i in range(0, flat.shape[0], 1 << 20):
            if not np.isfinite(flat[i:i + (1 << 20)]).all():
                return name
    return None


def _check_types(header: dict) -> None:
    """ValueError naming the first header field whose JSON type is wrong: the configs' fields
    as their dataclasses declare them (``int``, ``float``, ``bool``, ``str``, optional), the
    other sections as dicts."""
    from dataclasses import fields

    for key in ("input", "learner", "reduction_config", "learner_meta", "reduction_meta", "checksums"):
        if key in header and not isinstance(header[key], dict):
            raise ValueError(f"header field {key} is not an object")
    if not isinstance(header.get("passes_done", 0), int) or isinstance(header.get("passes_done", 0), bool):
        raise ValueError("header field passes_done is not an integer")
    kinds = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
    for key, cls in (("input", InputConfig), ("learner", LearnerConfig), ("reduction_config", ReductionConfig)):
        for f in fields(cls):
            if f.name not in header.get(key, {}):
                continue
            v = header[key][f.name]
            kind = str(f.type).split(" | ")
            if v is None and "None" in kind:
                continue
            ok = kinds[kind[0]]
            if not isinstance(v, ok) or (isinstance(v, bool) and kind[0] != "bool"):
                raise ValueError(f"header field {key}.{f.name} must be {kind[0]}, got {type(v).__name__} {v!r}")


def model_members(learner, reduction, compact: "Compact | None" = None) -> dict:
    """The members of a model file (without ``header``): arrays, the weight table's as ``Streamed``;
    with ``compact``, a predict-only model's (``LinearLearner.predict_state_members``)."""
    # the reduction's first: its state may finish pending learning (plt trains the examples it
    # held for its tree), which the weight table's members must then include; the members keep
    # their order in the file
    learner.for_learning()  # (pending learning updates the online weights)
    reduction_state = {**reduction.state_members(), **reduction.label_set_state()}
    table = (learner.state_members() if compact is None
             else learner.predict_state_members(compact.weight_threshold))
    members = {f"learner/{name}": a for name, a in table.items()}
    for name, a in reduction_state.items():
        members[f"reduction/{name}"] = a if isinstance(a, Streamed) else np.asarray(a)
    return members


def model_arrays(learner, reduction) -> dict:
    return materialize(model_members(learner, reduction))


def model_header(input_cfg: InputConfig, learner, reduction, checksums: dict, passes_done: int = 0,
                 extra: dict | None = None, compact: Compact | None = None) -> dict:
    """The header of a model whose members have these ``checksums`` (name -> ``_digest``);
    ``extra``: more top-level keys (the API's label dictionary kind); ``compact``: a predict-only
    model's (``predict_only``, ``weight_threshold``)."""
    header = {
        "format": MAGIC,
        "format_version": FORMAT_VERSION if compact is None else PREDICT_ONLY_VERSION,
        "program_version": __version__,
        "reduction": reduction.name,
        "input": to_dict(input_cfg),
        "learner": to_dict(learner.config),
        "reduction_config": to_dict(reduction.config),
        "learner_meta": learner.meta(),
        "reduction_meta": reduction.meta(),
        "passes_done": int(passes_done),
        "checksums": checksums,
    }
    if compact is not None:
        header["predict_only"] = True
        header["weight_threshold"] = float(compact.weight_threshold)
    if extra:
        header.update(extra)
    return header


def _header_blob(header: dict) -> np.ndarray:
    try:
        text = json.dumps(header, sort_keys=True, allow_nan=False)
    except ValueError:
        raise LomtreeError("the model's settings hold NaN or infinite numbers: not written") from None
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _write_member(zf, name: str, m) -> str:
    """Write member ``name`` (an array or a ``Streamed``) into the open zip ``zf`` as ``np.savez``
    does (the same bytes); its checksum. LomtreeError if it holds a NaN or an infinity."""
    from numpy.lib import format as npy

    if isinstance(m, Streamed):
        from .workers import prefetch

        h = _hasher(m.dtype, m.shape)
        pieces = prefetch(m.chunks(), name="lomtree-save")  # the next piece is made while this one is written
    else:
        a = np.asarray(m)
        h = None
        pieces = (a,)
    try:
        with zf.open(name + ".npy", "w", force_zip64=True) as fid:
            if h is not None:
                npy.write_array_header_1_0(fid, {"descr": npy.dtype_to_descr(m.dtype), "fortran_order": False,
                                                 "shape": m.shape})
            for p in pieces:
                if _non_finite({name: p}) is not None:  # a diverged run: say so rather than write a model that predicts nothing
                    raise LomtreeError(f"the model holds NaN or infinite numbers ({name}): not written (lower the "
                                       "learning rate or scale the feature values)")
                if h is None:
                    npy.write_array(fid, p, allow_pickle=False)
                else:
                    fid.write(_raw(p))
                    h.update(_raw(p))
    finally:
        if h is not None:
            pieces.close()  # stops the thread making the pieces when the write failed
    return _digest(a) if h is None else h.hexdigest()


def write_model(f, input_cfg: InputConfig, learner, reduction, passes_done: int = 0,
                extra_arrays: dict | None = None, extra_header: dict | None = None, label_dict=None,
                compact: Compact | None = None) -> None:
    """Write the model file's bytes to the binary file object ``f`` (``save_model``'s format; with
    string labels, their dictionary: ``labels.MEMBER``). The members are written one at a time,
    the weight table's a piece at a time, and the header (which holds their checksums) last, so
    the peak memory of a save is one member, not all of them (readers find members by name). On
    an error ``f`` holds an incomplete file (``save_model`` removes it)."""
    import zipfile

    members = model_members(learner, reduction, compact)
    members.update(extra_arrays or {})
    if label_dict is not None:
        from .labels import MEMBER

        members[MEMBER] = label_dict.to_array()
    header = model_header(input_cfg, learner, reduction, {}, passes_done, extra_header, compact)
    if compact is not None:
        header["narrowed"] = _narrow(members)
    _header_blob(header)  # settings that cannot be written are refused before any member is
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name in list(members):
            header["checksums"][name] = _write_member(zf, name, members.pop(name))  # freed once written
        _write_member(zf, "header", _header_blob(header))


def _narrow(members: dict) -> list:
    """A predict-only model's reduction arrays of int64 whose values fit int32 become int32 in
    ``members`` (plt's tree arrays: half their bytes); their names, which the header lists
    (``narrowed``) and loading widens back (``_widen``)."""
    names = []
    for name, a in members.items():
        if (name.startswith("reduction/") and isinstance(a, np.ndarray) and a.dtype == np.int64 and a.size
                and a.min() >= -2**31 and a.max() < 2**31):
            members[name] = a.astype(np.int32)
            names.append(name)
    return names


def _widen(header: dict, data: dict) -> None:
    """The members a predict-only header lists as ``narrowed`` back to int64 (ValueError when the
    list is not of int32 reduction members)."""
    names = header.get("narrowed", [])
    if not isinstance(names, list) or (names and not header.get("predict_only")):
        raise ValueError("bad narrowed list")
    for name in names:
        a = data.get(name) if isinstance(name, str) and name.startswith("reduction/") else None
        if a is None or a.dtype != np.int32:
            raise ValueError(f"narrowed member {name!r} is not an int32 reduction array")
        data[name] = a.astype(np.int64)


def model_bytes(input_cfg: InputConfig, learner, reduction, passes_done: int = 0,
                extra_arrays: dict | None = None, extra_header: dict | None = None) -> bytes:
    """The bytes of the model file ``save_model`` would write (``load_model(io.BytesIO(b))`` reads them)."""
    import io

    buf = io.BytesIO()
    write_model(buf, input_cfg, learner, reduction, passes_done, extra_arrays, extra_header)
    return buf.getvalue()


@contextlib.contextmanager
def _flushing_behind(fd: int, every: float = 0.2):
    """While the block runs, a thread hands the file's written bytes to the disk every ``every``
    seconds, so the fsync that ends a save waits for the last of them only, not for a whole
    model (a second of a 0.8 GB file's save)."""
    import threading

    sync = getattr(os, "fdatasync", os.fsync)
    done = threading.Event()

    def run():
        while not done.wait(every):
            try:
                sync(fd)
            except OSError:  # the save's own write or fsync reports the problem
                return

    t = threading.Thread(target=run, name="lomtree-flush", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


def save_model(path: str, input_cfg: InputConfig, learner, reduction, passes_done: int = 0,
               label_dict=None, extra_arrays: dict | None = None, extra_header: dict | None = None,
               compact: Compact | None = None) -> None:
    """Write the model atomically to ``path``. ``label_dict``: the string labels' dictionary
    (``labels.LabelDict``); ``extra_arrays``: more members (e.g. the API's ``labels/names``),
    verified on load like every member and ignored by readers that do not use them;
    ``extra_header``: more header keys; ``compact``: write a predict-only model."""
    _write_atomically(path, lambda f: write_model(f, input_cfg, learner, reduction, passes_done, extra_arrays,
                                                  extra_header, label_dict, compact))


def save_trees(path: str, tree_paths: list) -> None:
    """Write the model files ``tree_paths`` (written by this process, each one tree) as one file of
    several trees at ``path`` (atomically, ``ENSEMBLE_VERSION``): their members are copied a
    megabyte at a time, so the peak memory is one tree's header."""
    import shutil
    import zipfile

    from numpy.lib import format as npy

    def write(f):
        header = {"format": MAGIC, "format_version": ENSEMBLE_VERSION, "program_version": __version__,
                  "trees": len(tree_paths), "checksums": {}}
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as out:
            for i, src in enumerate(tree_paths, 1):
                with zipfile.ZipFile(src) as zin:
                    for info in zin.infolist():
                        with zin.open(info) as a, out.open(f"tree{i}/{info.filename}", "w", force_zip64=True) as b:
                            shutil.copyfileobj(a, b, 1 << 20)
                    with zin.open("header.npy") as h:
                        header["checksums"][f"tree{i}/header"] = _digest(npy.read_array(h, allow_pickle=False))
            _write_member(out, "header", _header_blob(header))

    _write_atomically(path, write)


def _write_atomically(path: str, write) -> None:
    """``write(f)`` into ``.NAME.PID.writing`` beside ``path`` (a symlink's target), fsync, then
    rename it to ``path``; a failure removes the temporary file and names the user's path."""
    from .paths import remove_stale_writing, resolve_model_path, temporary_name

    target = resolve_model_path(path)
    try:
        mode = os.stat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # the rename below would replace it
        from .paths import _kind

        raise LomtreeError(f"cannot write the model to {path}: it exists and is {_kind(mode)} (left alone; "
                           "a model is written by replacing a regular file)")
    remove_stale_writing(target)
    tmp = temporary_name("-f", target)
    try:
        with open(tmp, "wb") as f:
            with _flushing_behind(f.fileno()):
                write(f)
                f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise LomtreeError(f"cannot write the model to {path}: {e.strerror or e}") from None
        raise


class LoadedModel:
    """What ``load_model`` returns: configs, the learner, the reduction and the header."""

    def __init__(self, header, input_cfg, learner, reduction, label_dict=None):
        self.label_dict = label_dict  # labels.LabelDict of a model with string labels
        self.header = header
        self.input_config = input_cfg
        self.learner = learner
        self.reduction = reduction
        self.extra = {}  # members besides learner/ and reduction/ (the API's labels/names)

    @property
    def passes_done(self) -> int:
        return int(self.header.get("passes_done", 0))


def _open_model(path):
    """``path`` opened for reading (a binary file object, e.g. ``io.BytesIO`` of a model's bytes,
    is used as it is); ModelFormatError when it cannot be."""
    if hasattr(path, "read"):
        import contextlib

        return contextlib.nullcontext(path)
    try:
        return _open_regular(path)
    except ModelFormatError:
        raise
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: model file not found") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{path}: is a directory, not a model file") from None
    except PermissionError:
        raise ModelFormatError(f"{path}: permission denied") from None
    except Exception as e:  # noqa: BLE001 - any failure to open is a format problem
        raise ModelFormatError(f"{path}: not a lomtree model file ({type(e).__name__})") from None


def _open_regular(path: str):
    """``path`` opened for binary reading if it is a regular file; ModelFormatError if it is
    anything else. Opened without blocking first, so a FIFO with no writer is refused at once
    instead of waiting forever."""
    from .paths import _kind

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError
        if not stat.S_ISREG(mode):
            raise ModelFormatError(f"{path}: is {_kind(mode)}, not a model file (models are read from regular files)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _open_npz(path: str, f):
    """``np.load`` of the open model file ``f``: its ``NpzFile``; ModelFormatError when it is not an
    uncompressed .npz."""
    import zipfile

    try:
        z = np.load(f, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - not an .npz (a pickle is refused, never loaded)
        raise ModelFormatError(f"{path}: not a lomtree model file ({type(e).__name__})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):  # a single .npy array
        raise ModelFormatError(f"{path}: not a lomtree model file")
    if any(i.compress_type != zipfile.ZIP_STORED for i in z.zip.infolist()):
        z.close()
        raise ModelFormatError(f"{path}: a compressed .npz (as np.savez_compressed writes), not a lomtree model "
                               f"file: lomtree writes and reads uncompressed .npz only")
    return z


def _read_members(path: str, skip: frozenset = frozenset(), trees_ok: bool = False):
    """(header dict, name -> array of every other member); members in ``skip`` (unused by the
    caller; for a file of trees, a tree's ``tree<i>/`` names them) -> None, unread. The header is
    decoded first: a file of several trees is refused unless ``trees_ok``, before any weight is
    read."""
    with _open_model(path) as f:
        with _open_npz(path, f) as z:
            if "header" not in z.files:
                raise ModelFormatError(f"{path}: not a lomtree model file (no header)")
            try:
                header = _decode_header(path, z["header"], trees_ok=True)
                if header["format_version"] == ENSEMBLE_VERSION and not trees_ok:
                    raise ConfigError(f"{path}: holds {header['trees']} trees (train --trees): `lomtree predict` "
                                      f"(not with --dask), `lomtree inspect` and the API's Ensemble.load read it")

                def skipped(name):
                    return name.split("/", 1)[1] in skip if name.startswith("tree") and "/" in name else name in skip

                return header, {name: None if skipped(name) else z[name] for name in z.files if name != "header"}
            except (ConfigError, ModelFormatError):
                raise
            except Exception as e:  # noqa: BLE001 - truncated or corrupt members, object arrays
                raise ModelFormatError(f"{path}: corrupt or truncated model file ({type(e).__name__})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} in the header")


def _decode_header(path: str, raw, trees_ok: bool = False) -> dict:
    """The header member as a dict, checked for magic and format version (ModelFormatError); a
    file of several trees' (``trees_ok``) for its tree count."""
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError
        header = json.loads(raw.tobytes().decode("utf-8"), parse_constant=_no_constant)
        if not isinstance(header, dict):
            raise ValueError
    except Exception:  # noqa: BLE001
        raise ModelFormatError(f"{path}: corrupt model header") from None
    if header.get("format") != MAGIC:
        raise ModelFormatError(f"{path}: not a lomtree model file (format {header.get('format')!r})")
    version = header.get("format_version")
    if trees_ok and version == ENSEMBLE_VERSION:
        n = header.get("trees")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TREES:
            raise ModelFormatError(f"{path}: corrupt model header (trees {n!r}: 1..{MAX_TREES})")
        return header
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise ModelFormatError(
            f"{path}: model format version {version!r} is not supported (this lomtree reads "
            f"{', '.join(map(str, sorted(READ_VERSIONS + (ENSEMBLE_VERSION,))))})"
        )
    if (version in PREDICT_ONLY_VERSIONS) != (header.get("predict_only") is True):
        raise ModelFormatError(f"{path}: corrupt model header (format version and predict_only disagree)")
    thr = header.get("weight_threshold", 0.0)
    if isinstance(thr, bool) or not isinstance(thr, (int, float)) or not thr >= 0:
        raise ModelFormatError(f"{path}: corrupt model header (weight_threshold {thr!r})")
    return header


def peek_input_config(path: str) -> InputConfig | None:
    """The input options of the model at ``path`` from its header alone (a few KB read), or None
    when that fails (``load_model`` then reports the problem properly)."""
    try:
        with _open_regular(path) as f, _open_npz(path, f) as z:
            header = _decode_header(path, z["header"], trees_ok=True)
            if header["format_version"] == ENSEMBLE_VERSION:  # the trees read examples alike
                header = _decode_header(path, z["tree1/header"])
            return from_dict(InputConfig, header["input"])
    except Exception:  # noqa: BLE001 - any problem: the full load reports it
        return None


#: members ``lomtree predict`` never uses (the optimiser state): not read, not verified
PREDICT_SKIP = frozenset({"learner/G", "learner/N"})


def load_model(path: str, predict_only: bool = False, skip_unused: bool = False) -> LoadedModel:
    """Load and verify a model file; ModelFormatError on any problem (ConfigError for a file of
    several trees: ``load_models`` reads those).

    ``predict_only`` keeps only the weights (no optimiser state); with ``skip_unused`` too (``lomtree
    predict``) the optimiser-state members are not even read (``PREDICT_SKIP``; any load that uses
    them verifies them; ``inspect`` verifies every member).
    """
    header, data = _read_members(path, PREDICT_SKIP if (predict_only and skip_unused) else frozenset())
    return _verified(path, header, data, predict_only)


def load_models(path: str, predict_only: bool = False, skip_unused: bool = False) -> list:
    """The models of a file: one (``load_model``'s), or each tree of a file of several trees
    (``save_trees``), verified alike; a tree's problems name it (``PATH (tree 2)``)."""
    return _load_trees(path, predict_only, skip_unused)[1]


def _load_trees(path: str, predict_only: bool = False, skip_unused: bool = False) -> tuple:
    """(whether the file holds several trees, its models): ``load_models``."""
    header, data = _read_members(path, PREDICT_SKIP if (predict_only and skip_unused) else frozenset(),
                                 trees_ok=True)
    if header["format_version"] != ENSEMBLE_VERSION:
        return False, [_verified(path, header, data, predict_only)]
    n = header["trees"]
    checks = header.get("checksums")
    if not isinstance(checks, dict) or set(checks) != {f"tree{i}/header" for i in range(1, n + 1)}:
        raise ModelFormatError(f"{path}: corrupt model file (the tree list does not match the header)")
    trees = [{} for _ in range(n)]
    for name, a in data.items():
        tree, _, rest = name.partition("/")
        i = int(tree[4:]) if tree.startswith("tree") and tree[4:].isdigit() else 0
        if not 1 <= i <= n or not rest:
            raise ModelFormatError(f"{path}: corrupt model file (member {name} belongs to no tree)")
        trees[i - 1][rest] = a
    out = []
    for i, tree in enumerate(trees, 1):
        raw = tree.pop("header", None)
        if raw is None:
            raise ModelFormatError(f"{path}: corrupt model file (tree{i}/header is missing)")
        if raw.dtype.hasobject or _digest(raw) != checks[f"tree{i}/header"]:
            raise ModelFormatError(f"{path}: corrupt model file (checksum mismatch in tree{i}/header)")
        where = f"{path} (tree {i})"
        out.append(_verified(where, _decode_header(where, raw), tree, predict_only))
    return True, out


def _verified(path: str, header: dict, data: dict, predict_only: bool) -> LoadedModel:
    """The model of a decoded ``header`` and its members ``data`` after every check (checksums,
    finite numbers, header types, consistent content); ``path`` names it in the errors."""
    if header.get("predict_only") and not predict_only:
        raise ConfigError(f"{path}: a predict-only model (written with --predict_only_model) has no optimiser "
                           "state to train on: continue from the full model")
    checks = header.get("checksums")
    if not isinstance(checks, dict) or set(checks) != set(data):
        raise ModelFormatError(f"{path}: corrupt model file (member list does not match the header)")
    for name, a in data.items():
        if a is None:
            continue
        if a.dtype.hasobject or _digest(a) != checks[name]:
            raise ModelFormatError(f"{path}: corrupt model file (checksum mismatch in {name})")
    bad = _non_finite(data)
    if bad is not None:
        raise ModelFormatError(f"{path}: corrupt model file ({bad} holds NaN or infinite numbers)")
    try:
        _check_types(header)
        _widen(header, data)
    except ValueError as e:
        raise ModelFormatError(f"{path}: corrupt model file ({e})") from None
    try:
        loaded = _build(header, data, predict_only)
    except LomtreeError as e:
        raise ModelFormatError(f"{path}: corrupt model file ({e})") from None
    except Exception as e:  # noqa: BLE001 - inconsistent but checksum-valid content
        raise ModelFormatError(f"{path}: corrupt model file ({type(e).__name__}: {e})") from None
    loaded.extra = {name: a for name, a in data.items()
                    if not name.startswith(("learner/", "reduction/")) and a is not None}
    return loaded


def _build(header: dict, data: dict, predict_only: bool = False) -> LoadedModel:
    from .learner import LinearLearner
    from .reductions.classes import get_reduction_class

    input_cfg = from_dict(InputConfig, header["input"])
    lcfg = from_dict(LearnerConfig, header["learner"])
    rcfg = from_dict(ReductionConfig, header["reduction_config"])
    if rcfg.name != header["reduction"]:
        raise ValueError("reduction name mismatch")
    cls = get_reduction_class(rcfg.name)
    S = data["learner/model_S"]
    if S.ndim != 1:
        raise ValueError("bad model_S")
    learner = LinearLearner(lcfg, input_cfg.bits, max(1, S.shape[0]), cls.slot_mode, predict_only=predict_only)
    if cls.needs_k and cls.fixed_models and learner.n_models != cls.n_models_for(rcfg):
        raise ValueError("regressor count does not match the reduction")
    learner.load_state({name[len("learner/"):]: a for name, a in data.items() if name.startswith("learner/")},
                       header["learner_meta"], weights_only=bool(header.get("predict_only")))
    reduction = cls(rcfg, learner)
    red_arrays = {name[len("reduction/"):]: a for name, a in data.items() if name.startswith("reduction/")}
    if input_cfg.multilabel:
        reduction.set_multilabel()
        reduction.load_label_set_state(red_arrays)
        red_arrays.pop("label_counts")
    reduction.load_state(red_arrays, header.get("reduction_meta", {}))
    label_dict = None
    if input_cfg.has_string_labels:
        from .labels import MEMBER, LabelDict

        if MEMBER not in data:
            raise ValueError("the label dictionary is missing")
        label_dict = LabelDict.from_array(data[MEMBER], fixed=bool(input_cfg.named_labels))
    return LoadedModel(header, input_cfg, learner, reduction, label_dict)


def inspect_model(path: str, gini_c: float = 1.0) -> dict:
    """A JSON-able description of the model at ``path``; for trees that store label counts, the
    entropy criteria of their leaves with modified-Gini constant ``gini_c`` (``entropy.py``)."""
    trees, models = _load_trees(path, predict_only=True)
    head = {"file": path, "file_bytes": os.path.getsize(path)}
    if not trees:
        return {**head, **_describe(models[0], gini_c)}
    return {**head, "format_version": ENSEMBLE_VERSION, "trees": [_describe(m, gini_c) for m in models]}


def _describe(m: LoadedModel, gini_c: float) -> dict:
    """``inspect_model``'s description of one model."""
    from . import entropy

    dual = m.learner.config.solver == "dual"
    info = {
        "format_version": m.header["format_version"],
        "program_version": m.header.get("program_version"),
        "reduction": m.reduction.name,
        "k": m.reduction.config.k,
        "bits": m.input_config.bits,
        "format": m.input_config.format,
        "noconstant": m.input_config.noconstant,
        "hash_seed": m.input_config.hash_seed,
        "loss": m.learner.config.loss,
        "update": ("dual" if dual else "sgd" if m.learner.config.sgd else "adaptive,normalized,invariant") +
                  (",averaged" if m.learner.config.average else ""),
        **({"cost": m.learner.config.cost} if dual else {"learning_rate": m.learner.eta}),
        **{name: getattr(m.learner.config, name) for name in ("l1", "l2") if getattr(m.learner.config, name)},
        "passes_done": m.passes_done,
        "regressors": m.learner.n_models,
        "nonzero_weights": int(np.count_nonzero(m.learner.arrays.table[:, 0])),
        "predict_only": bool(m.header.get("predict_only", False)),
    }
    if m.header.get("predict_only"):
        info["weight_threshold"] = m.header.get("weight_threshold", 0.0)
    for name in ("interactions", "ngram", "skips", "ignore", "keep", "ignore_linear"):
        if getattr(m.input_config, name):
            info[name] = getattr(m.input_config, name)
    if m.label_dict is not None:
        info["label_names"] = {i + 1: n for i, n in enumerate(m.label_dict.names)}
    if m.reduction.multilabel:
        counts = m.reduction.label_counts
        info["multilabel"] = True
        info["trained_examples"] = int(counts[0])
        info["labels_per_example"] = round(float(counts[1:].sum() / counts[0]), 4) if counts[0] else 0.0
    info.update(m.reduction.inspect())
    crit = entropy.report(m.reduction, gini_c)
    if crit is not None:
        info["entropy"] = crit
    return info


__all__ = ["save_model", "write_model", "Streamed", "materialize", "model_bytes", "load_model", "load_models", "save_trees", "inspect_model", "LoadedModel", "MAGIC", "FORMAT_VERSION"]
