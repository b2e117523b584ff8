"""Shared helpers for the data scripts: default paths, compressed input, atomic output, timed
child processes, progress lines, the ``--data-dir`` option.

Nothing here knows about a particular dataset. The scripts read the read-only datasets from
``DEFAULT_DATA_DIR`` (``../shared/datasets`` relative to the repository, overridable with the
``LOMTREE_DATA_DIR`` environment variable or ``--data-dir``) and write into ``DEFAULT_OUT_DIR``
(``bench/data/`` in the repository, overridable with ``LOMTREE_BENCH_DATA`` or ``--out-dir``).
"""

from __future__ import annotations

import bz2
import contextlib
import shlex
import subprocess
import time
from dataclasses import dataclass
import gzip
import io
import lzma
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Iterable, Iterator, Sequence

#: the repository root (the directory holding ``data_scripts/``)
REPO_ROOT = Path(__file__).resolve().parent.parent

#: where the datasets live: ``<repo>/../shared/datasets`` unless ``LOMTREE_DATA_DIR`` is set
DEFAULT_DATA_DIR = Path(
    os.environ.get("LOMTREE_DATA_DIR", str(REPO_ROOT.parent / "shared" / "datasets"))
)

#: where generated benchmark inputs go: ``<repo>/bench/data`` unless ``LOMTREE_BENCH_DATA`` is set
DEFAULT_OUT_DIR = Path(os.environ.get("LOMTREE_BENCH_DATA", str(REPO_ROOT / "bench" / "data")))

_OPENERS = {".xz": lzma.open, ".lzma": lzma.open, ".bz2": bz2.open, ".gz": gzip.open}


def open_text(path: str | os.PathLike, encoding: str = "utf-8") -> IO[str]:
    """Open ``path`` for reading as text, decompressing ``.xz``/``.lzma``/``.bz2``/``.gz`` by suffix.

    Newlines are not translated (``newline=""`` semantics are *not* used: universal newlines
    apply, so ``\\r\\n`` files read as ``\\n``).  ``"-"`` means standard input.
    """
    if str(path) == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding=encoding)
    opener = _OPENERS.get(Path(path).suffix.lower())
    if opener is None:
        return open(path, "rt", encoding=encoding)
    return opener(path, "rt", encoding=encoding)


def iter_lines(path: str | os.PathLike) -> Iterator[str]:
    """Yield the lines of a (possibly compressed) text file without their trailing newline."""
    with open_text(path) as fh:
        for line in fh:
            yield line.rstrip("\r\n")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Context manager writing to a temporary file next to ``path``, renamed over it on success.

    On an exception the temporary file is removed and ``path`` is left untouched, so a half-written
    output never looks finished (and never looks up to date to ``prepare_all``).  Parent
    directories are created.  ``mode`` is ``"w"`` (text) or ``"wb"`` (binary).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    binary = "b" in mode
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding,
                       newline=None if binary else "\n") as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_up_to_date(outputs: Iterable[str | os.PathLike], inputs: Iterable[str | os.PathLike]) -> bool:
    """True if every output exists and is at least as new as every existing input (make's rule)."""
    outs = [Path(p) for p in outputs]
    if not outs or not all(p.exists() for p in outs):
        return False
    ins = [Path(p) for p in inputs if Path(p).exists()]
    if not ins:
        return True
    newest_in = max(p.stat().st_mtime for p in ins)
    return min(p.stat().st_mtime for p in outs) >= newest_in


def count_lines_and_labels(path: str | os.PathLike) -> tuple[int, int]:
    """(number of non-empty lines, number of distinct labels) of a VW or LIBSVM text file.

    The label is the first whitespace-separated token of the line (for VW files written by these
    scripts this is the class; ``|`` is never part of it).
    """
    n = 0
    labels: set[bytes] = set()
    with open(path, "rb") as fh:
        for line in fh:
            tok = line.split(None, 1)
            if not tok:
                continue
            n += 1
            lab = tok[0]
            if lab != b"|":
                labels.add(lab)
    return n, len(labels)


def human_size(n_bytes: int) -> str:
    """``1536 -> '1.5 KB'`` (powers of 1024)."""
    size = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


@dataclass
class Timed:
    """One finished child process: exit code, wall and CPU seconds, peak RSS (KB), its output."""

    rc: int
    wall: float
    cpu: float
    maxrss_kb: int
    stdout: str
    stderr: str


def run_timed(cmd: list[str], env_extra: dict | None = None, timeout: float | None = None) -> Timed:
    """Run ``cmd``; wall time, CPU (user + system) and peak RSS of the child from ``os.wait4``.

    The child starts as a copy of this process, and Linux carries that copy's resident size into
    its ``ru_maxrss`` across ``exec``: the peak reported is at least this process's RSS at the
    call, so a caller that measures memory must stay small (``bench_pypi`` builds its files in a
    child process for that reason)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG if timeout else 0)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timed(proc.returncode, wall, ru.ru_utime + ru.ru_stime, int(ru.ru_maxrss),
                     out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


def log(msg: str) -> None:
    """A progress line on stderr, flushed (stdout is left to results)."""
    print(msg, file=sys.stderr, flush=True)


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished children so far (``RUSAGE_CHILDREN``);
    the difference around ``subprocess.run`` is that command's CPU, start-up included."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def add_data_dir_argument(ap) -> None:
    """``--data-dir``: where the shared datasets are read (``DEFAULT_DATA_DIR`` unless given)."""
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR), help="shared datasets dir (default: %(default)s)")


def sanitize_command(argv: Sequence[str]) -> str:
    """The command line without machine paths: absolute paths inside the repository become relative,
    others keep only their last component (``<…>/name``)."""
    out = []
    for a in argv:
        if os.path.isabs(a):
            p = Path(a)
            try:
                a = str(p.resolve().relative_to(REPO_ROOT.resolve()))
            except ValueError:
                a = f"<…>/{p.name}"
        out.append(a)
    return " ".join(shlex.quote(a) if a and not a.startswith("<…>") else a for a in out)
