"""Convert LIBSVM / svmlight multiclass files to Vowpal Wabbit text.

A LIBSVM line ``label idx:value idx:value ... [# comment]`` becomes the VW line
``label | idx:value idx:value ...``: the features go into the *default* namespace and keep the
LIBSVM index as their (numeric) name, so lomtree hashes them exactly as it hashes the original
file read with ``--format libsvm`` (docs/ALGORITHMS.md §1.3/§1.4: a numeric name in the default
namespace with seed 0 gets index ``int(name)``).  Values are copied as written (no float
re-formatting), order and duplicates are kept, comments and blank lines are dropped.

Labels must be integral (``3`` or ``3.0``); ``label + label_offset`` must be >= 1 (use
``--label-offset 1`` for 0-based data such as MNIST).

Command line::

    python -m data_scripts.convert_libsvm SRC DST [--label-offset N]
    python -m data_scripts.convert_libsvm --dataset sector [--data-dir D] [--out-dir O]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from pathlib import Path

from .common import (DEFAULT_DATA_DIR, DEFAULT_OUT_DIR, add_data_dir_argument, atomic_write, count_lines_and_labels,
                     open_text)

#: the LIBSVM datasets shipped in the shared data dir: name -> split -> path relative to it
DATASETS: dict[str, dict[str, str]] = {
    "sector": {"train": "sector/sector.scale.bz2", "test": "sector/sector.t.scale.bz2"},
    "letter": {"train": "letter/letter.scale.xz", "test": "letter/letter.scale.t.xz"},
    "pendigits": {"train": "pendigits/pendigits.xz", "test": "pendigits/pendigits.t.xz"},
}


class LibsvmFormatError(ValueError):
    """A malformed LIBSVM line; the message names the file and line number."""


def _label(tok: str, label_offset: int) -> int:
    if "," in tok:
        raise ValueError(f"multi-label {tok!r} is not supported")
    try:
        lab = int(tok)
    except ValueError:
        val = float(tok)  # raises ValueError on garbage
        if not val.is_integer():
            raise ValueError(f"label {tok!r} is not an integer") from None
        lab = int(val)
    lab += label_offset
    if lab < 1:
        raise ValueError(f"label {tok!r} + offset {label_offset} = {lab} is < 1")
    return lab


_FLOAT = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
#: the feature part of a LIBSVM line (docs/ALGORITHMS.md §1.4 grammar; the float rule of §1.1)
_FEATURES_RE = re.compile(rf"(?:[0-9]+:{_FLOAT}(?:[ \t]+|$))*")
_FLOAT_RE = re.compile(_FLOAT)


def _feature_error(features: str) -> str:
    for t in features.split():
        idx, sep, val = t.partition(":")
        if not sep or not idx.isdigit() or not idx.isascii():
            return f"bad feature {t!r} (want index:value)"
        if _FLOAT_RE.fullmatch(val) is None:
            return f"bad value in feature {t!r}"
    return f"bad features {features!r}"  # pragma: no cover


def libsvm_line_to_vw(line: str, label_offset: int = 0) -> str | None:
    """One LIBSVM line (without newline) -> one VW line (without newline), or None if blank.

    Raises ValueError on a malformed line (bad label, multi-label, ``index:value`` pair with a
    non-numeric index or a value outside the VW float grammar, e.g. ``nan``).

    >>> libsvm_line_to_vw("3 1:0.5 7:-2e-3")
    '3 | 1:0.5 7:-2e-3'
    >>> libsvm_line_to_vw("0 4:1 # comment", label_offset=1)
    '1 | 4:1'
    >>> libsvm_line_to_vw("2.0")
    '2 |'
    >>> libsvm_line_to_vw("   ") is None
    True
    """
    hash_pos = line.find("#")
    if hash_pos >= 0:
        line = line[:hash_pos]
    parts = line.split(None, 1)
    if not parts:
        return None
    lab = _label(parts[0], label_offset)
    if len(parts) == 1:
        return f"{lab} |"
    features = parts[1].strip()
    if _FEATURES_RE.fullmatch(features) is None:
        raise ValueError(_feature_error(features))
    return f"{lab} | " + " ".join(features.split())


def convert(src_path, dst_path, label_offset: int = 0, libsvm_copy=None) -> int:
    """Convert the LIBSVM file ``src_path`` (plain, .xz, .bz2 or .gz) to plain VW text at ``dst_path``.

    If ``libsvm_copy`` is a path, an uncompressed copy of the input is written there in the same
    pass (see ``decompress``).  Outputs are written atomically.  Returns the number of example
    lines written.  Raises ``LibsvmFormatError`` (a ``ValueError``) naming ``src:line`` on a
    malformed line.
    """
    n = 0
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(open_text(src_path))
        dst = stack.enter_context(atomic_write(dst_path))
        copy = stack.enter_context(atomic_write(libsvm_copy)) if libsvm_copy is not None else None
        buf, raw = [], []
        for line_no, line in enumerate(src, 1):
            line = line.rstrip("\r\n")
            try:
                out = libsvm_line_to_vw(line, label_offset)
            except ValueError as exc:
                raise LibsvmFormatError(f"{src_path}:{line_no}: {exc}") from None
            if out is None:
                continue
            buf.append(out)
            raw.append(line)
            n += 1
            if len(buf) >= 4096:
                dst.write("\n".join(buf) + "\n")
                if copy is not None:
                    copy.write("\n".join(raw) + "\n")
                buf.clear()
                raw.clear()
        if buf:
            dst.write("\n".join(buf) + "\n")
            if copy is not None:
                copy.write("\n".join(raw) + "\n")
    return n


def decompress(src_path, dst_path) -> int:
    """Write an uncompressed copy of a (possibly compressed) LIBSVM file; return its line count.

    Lines are copied unchanged except that ``\\r\\n`` becomes ``\\n`` and blank lines
    (including comment-only lines, which are not examples) are dropped, so line counts match
    the VW conversion.  Useful because VW itself cannot read bz2/xz.
    """
    n = 0
    with open_text(src_path) as src, atomic_write(dst_path) as dst:
        for line in src:
            line = line.rstrip("\r\n")
            if not line.partition("#")[0].strip():
                continue
            dst.write(line + "\n")
            n += 1
    return n


def dataset_outputs(name: str, out_dir) -> dict[str, Path]:
    """Output paths for a registered dataset: keys ``train.vw``, ``test.vw``, ``train.libsvm``, ``test.libsvm``."""
    out_dir = Path(out_dir)
    return {f"{split}.{ext}": out_dir / f"{name}.{split}.{ext}"
            for split in DATASETS[name] for ext in ("vw", "libsvm")}


def convert_dataset(name: str, data_dir=DEFAULT_DATA_DIR, out_dir=DEFAULT_OUT_DIR,
                    label_offset: int = 0, libsvm_copies: bool = True) -> dict[str, int]:
    """Convert both splits of a registered dataset; return ``{output path: line count}``."""
    outs = dataset_outputs(name, out_dir)
    counts: dict[str, int] = {}
    for split, rel in DATASETS[name].items():
        src = Path(data_dir) / rel
        copy = outs[f"{split}.libsvm"] if libsvm_copies else None
        n = convert(src, outs[f"{split}.vw"], label_offset, libsvm_copy=copy)
        counts[str(outs[f"{split}.vw"])] = n
        if copy is not None:
            counts[str(copy)] = n
    return counts


def main(argv=None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m data_scripts.convert_libsvm",
        description="Convert LIBSVM multiclass files to VW text ('label | idx:value ...').",
    )
    ap.add_argument("src", nargs="?", help="LIBSVM input (plain, .xz, .bz2, .gz)")
    ap.add_argument("dst", nargs="?", help="VW output (plain text)")
    ap.add_argument("--label-offset", type=int, default=0, help="added to every label (1 for 0-based data)")
    ap.add_argument("--dataset", choices=sorted(DATASETS) + ["all"],
                    help="convert a dataset of the shared data dir (train and test) instead of SRC DST")
    add_data_dir_argument(ap)
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT_DIR), help="output dir for --dataset (default: %(default)s)")
    ap.add_argument("--no-libsvm-copy", action="store_true",
                    help="with --dataset: do not also write uncompressed .libsvm copies")
    args = ap.parse_args(argv)
    if args.dataset:
        if args.src or args.dst:
            ap.error("give either SRC DST or --dataset, not both")
        names = sorted(DATASETS) if args.dataset == "all" else [args.dataset]
        for name in names:
            t0 = time.perf_counter()
            counts = convert_dataset(name, args.data_dir, args.out_dir, args.label_offset,
                                     not args.no_libsvm_copy)
            for path in counts:
                n, k = count_lines_and_labels(path)
                print(f"{path}: {n} lines, {k} classes", file=sys.stderr)
            print(f"{name}: {time.perf_counter() - t0:.2f} s", file=sys.stderr)
        return 0
    if not (args.src and args.dst):
        ap.error("SRC and DST are required (or use --dataset)")
    try:
        n = convert(args.src, args.dst, args.label_offset)
    except (LibsvmFormatError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.dst}: {n} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
