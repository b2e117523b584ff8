"""Output paths, checked before any work: no file the user did not ask to destroy.

``check_outputs(outputs, inputs)`` raises ``ConfigError`` (exit 2) before a command reads a line:

* two outputs (``-f``, ``-p``, ``--report``, ``-c``) that are the same file, or an output that is
  also an input (an input file, ``-i MODEL``, the cache) — ``train --report X -f X`` once
  replaced the model with the JSON report, ``predict -i M -p M`` overwrote the model. The one
  exception: ``train -i M -f M`` (continue a model in place: the model is read whole before
  anything is written, and replaced atomically). Paths are compared after resolving symlinks
  and by device and inode, so hard links and ``./x`` vs ``x`` count as the same file. ``-``
  (standard output) is not a file and is not compared;
* a model or cache path (``-f``, ``-c``) that exists and is not a regular file (``/dev/null``,
  ``/dev/full``, a FIFO, a directory): those are written to a temporary file renamed over the
  path, which would replace the device node. A symlink is followed: its target is written;
* an output whose directory does not exist or cannot be written (``-f nodir/sub/m.lt`` once
  failed only after training, naming the hidden temporary file), or whose name or temporary
  name (``temporary_name``) the file system refuses (too long, read-only): both are created
  and removed again before any work, so a finished run never fails at its end.

``resolve_model_path`` is what ``model_io.save_model`` writes: the symlink's target.
"""

from __future__ import annotations

import os
import stat

from .errors import ConfigError

#: outputs written by temp-file-then-rename: must be regular files (or not exist yet)
RENAMED = ("-f", "-c", "--report")
#: (output, input) pairs that may be the same file
ALLOWED_SAME = {("-f", "-i")}


def resolve_model_path(path: str) -> str:
    """The file a model save writes: ``path`` with symlinks resolved (a symlink is followed,
    never replaced by a regular file)."""
    return os.path.realpath(path)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _identity(path: str):
    """(realpath, (dev, ino) or None)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        return real, (st.st_dev, st.st_ino)
    except OSError:
        return real, None


def _same(a, b) -> bool:
    return a[0] == b[0] or (a[1] is not None and a[1] == b[1])


def temporary_name(flag: str, target: str) -> str:
    """The file an output ``flag`` (``-f``, ``-c``, ``--report``) is written to before it is
    renamed to ``target`` (the resolved path)."""
    if flag == "-f":
        return os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}.writing")
    if flag == "-c":
        return f"{target}.writing.{os.getpid()}"
    return target + ".writing"


def _probe(flag: str, path: str, name: str, what: str) -> None:
    """Create ``name`` (which does not exist) and remove it; ConfigError naming the user's path."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise ConfigError(f"{flag} {path}: {what} cannot be created: {e.strerror or e}") from None
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        pass


def _check_one(flag: str, path: str) -> None:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{flag} {path}: is a directory")
        if flag in RENAMED and flag != "--report" and not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{flag} {path}: exists and is {_kind(st.st_mode)}; lomtree writes this file "
                              f"by replacing it and will not replace a device or special file")
    parent = os.path.dirname(real) or "."
    shown = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise ConfigError(f"{flag} {path}: directory {shown} does not exist")
    renamed = flag in RENAMED and (st is None or stat.S_ISREG(st.st_mode))
    if (st is None or renamed) and not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: directory {shown} is not writable")
    if st is not None and not renamed and not os.access(real, os.W_OK):
        raise ConfigError(f"{flag} {path}: not writable")
    if st is None:
        _probe(flag, path, real, "the file")
    if renamed:
        # a name as long as the temporary file's, in the same directory, but not that name: a
        # watcher of ``*.writing`` files (or a stale-file sweep) must never see the probe
        head, _, tail = temporary_name(flag, real).rpartition("writing")
        _probe(flag, path, head + "probing" + tail, "its temporary file")


def check_outputs(outputs: list, inputs: list) -> None:
    """ConfigError unless every output path can be written and differs from every other output
    and from every input (see the module docstring). ``outputs`` and ``inputs`` are lists of
    ``(flag, path)``; a path that is None or ``-`` is skipped."""
    import sys

    for f, p in outputs:
        if p == "-" and sys.stdout is None:  # fd 1 closed (``>&-``)
            raise ConfigError(f"{f} -: standard output is closed")
    outs = [(f, p, _identity(p)) for f, p in outputs if p not in (None, "", "-")]
    ins = [(f, p, _identity(p)) for f, p in inputs if p not in (None, "", "-")]
    for i, (fa, pa, ia) in enumerate(outs):
        for fb, pb, ib in outs[i + 1:]:
            if _same(ia, ib):
                raise ConfigError(f"{fa} {pa} and {fb} {pb} are the same file: every output needs its own path")
        for fb, pb, ib in ins:
            if _same(ia, ib) and (fa, fb) not in ALLOWED_SAME:
                what = "input" if fb == "input" else f"input ({fb})"
                raise ConfigError(f"{fa} {pa} is also an {what}: it would be overwritten")
    for fa, pa, _ in outs:
        _check_one(fa, pa)


def is_writing_leftover(name: str, base: str) -> int | None:
    """The PID in ``name`` when it is a temporary file ``.BASE.PID.writing`` of a model save (or
    ``.BASE.PID.treeI.writing``, a tree of ``train --trees``)."""
    prefix, suffix = f".{base}.", ".writing"
    if not (name.startswith(prefix) and name.endswith(suffix)):
        return None
    pid, _, tree = name[len(prefix):-len(suffix)].partition(".")
    if tree and not (tree.startswith("tree") and tree[4:].isdigit()):
        return None
    return int(pid) if pid.isdigit() else None


def remove_stale_writing(path: str) -> None:
    """Remove ``.NAME.PID.writing`` files next to ``path`` left by processes that no longer run
    (a save killed by SIGKILL or a power cut; they can be gigabytes). Files of running processes
    (another save in progress) are left alone."""
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        pid = is_writing_leftover(name, base)
        if pid is None or pid == os.getpid():
            continue
        if _alive(pid):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process id we can judge: leave the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
