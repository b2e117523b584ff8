"""Hostile input and hostile environments: one test class per class of problem.

Every test is fast: memory bounds are checked with a small ``--max-line-bytes`` (a few KB) and a
reader that counts what it is asked to hold, never with gigabytes; CLI runs are short
subprocesses (``lomtree_cli.launch``).
docs/ROBUSTNESS.md lists the guarantees these tests hold the code to.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lomtree_cli.config import InputConfig, ReductionConfig
from lomtree_cli.errors import ConfigError, InputError, ModelFormatError
from lomtree_cli.parsing import iter_batches, parse_bytes
from tests.helpers import make_batch, separable_lines
from tests.reference.parser_ref import Bad, parse_ref
from tests.robustness_helpers import ALL_REDUCTIONS, available

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]
HYP = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])


def run(args, stdin=None, env_extra=None, shell_redirect="", cwd=None, timeout=120):
    env = dict(os.environ, **(env_extra or {}))
    if shell_redirect:
        import shlex

        cmd = " ".join(shlex.quote(a) for a in LOMTREE + args) + " " + shell_redirect
        return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=timeout)
    return subprocess.run(LOMTREE + args, input=stdin, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


def one_error_line(p, code: int) -> str:
    """The run exited ``code`` with exactly one ``error: ...`` line and no traceback."""
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], p.stderr  # after the preamble, if any
    return errors[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    (d / "train.vw").write_text("\n".join(separable_lines(5, 200, seed=0, noise_feats=1)) + "\n")
    p = run(["train", "-r", "oaa", "-k", "5", "-b", "10", str(d / "train.vw"), "-f", str(d / "m.lt"), "--quiet"])
    assert p.returncode == 0, p.stderr
    return d


# -- 1. memory bounded by what the user asked for ---------------------------------------------


class CountingReader(io.RawIOBase):
    """A raw stream of ``head`` then ``body`` repeated ``repeat`` times (None: forever) then ``tail``;
    records the largest read it was asked for and the bytes it gave."""

    def __init__(self, head: bytes, body: bytes, repeat, tail: bytes = b""):
        self.parts = [head] if head else []
        self.body, self.repeat, self.tail = body, repeat, tail
        self.largest = 0
        self.given = 0

    def readable(self):
        return True

    def readinto(self, b):
        self.largest = max(self.largest, len(b))
        while not self.parts:
            if self.repeat is None or self.repeat > 0:
                self.parts.append(self.body)
                if self.repeat is not None:
                    self.repeat -= 1
            elif self.tail:
                self.parts.append(self.tail)
                self.tail = None
            else:
                return 0
        part = self.parts.pop(0)
        n = min(len(b), len(part))
        b[:n] = part[:n]
        if n < len(part):
            self.parts.insert(0, part[n:])
        self.given += n
        return n


def _stdin_batches(reader, cfg, chunk):
    old = sys.stdin

    class Stdin:
        buffer = io.BufferedReader(reader, buffer_size=64)

    sys.stdin = Stdin()
    try:
        return list(iter_batches(None, cfg, chunk_bytes=chunk))
    finally:
        sys.stdin = old


def test_endless_line_is_an_error_after_reading_about_the_limit():
    """``/dev/zero`` as input: the first line never ends. With a limit of 4 KB the reader asks
    for at most about 2 x max(chunk, limit) bytes at once and stops after reading about that."""
    limit, chunk = 4096, 1024
    reader = CountingReader(b"", b"\0" * 1000, None)
    with pytest.raises(InputError) as ei:
        _stdin_batches(reader, InputConfig(max_line_bytes=limit), chunk)
    assert (ei.value.line, ei.value.reason) == (1, "line_too_long")
    assert reader.largest <= 2 * (limit + 1) and reader.given <= 4 * limit


def test_endless_line_skipped_with_bounded_buffers():
    """With --skip-invalid a 2 MB line is read and dropped through buffers of a few KB."""
    limit, chunk = 4096, 1024
    reader = CountingReader(b"1 | a\n", b"x" * 1000, 2000, b"\n2 | b\n")
    out = _stdin_batches(reader, InputConfig(max_line_bytes=limit, skip_invalid=True), chunk)
    assert [int(x) for b in out for x in b.labels] == [1, 2]
    assert [(e.line, e.reason) for b in out for e in b.skipped] == [(2, "line_too_long")]
    assert reader.given > 2_000_000 and reader.largest <= 2 * (limit + 1)


@HYP
@given(st.lists(st.integers(0, 300), min_size=1, max_size=12), st.integers(1, 200),
       st.sampled_from([64, 100, 257, 1 << 20]), st.booleans())
def test_line_limit_same_whatever_the_chunks(lengths, limit, chunk, crlf):
    """A line is over the limit (bytes before its newline) exactly as the reference says, whether
    the kernel sees it inside a chunk or the reader drops it for being longer than a buffer."""
    lines = [b"1 |" + b"a" * n + (b"\r" if crlf else b"") for n in lengths]
    data = b"\n".join(lines) + b"\n"
    cfg = InputConfig(max_line_bytes=limit, skip_invalid=True)
    out = _stdin_batches(CountingReader(data, b"", 0), cfg, chunk)
    got_bad = [(e.line, e.reason) for b in out for e in b.skipped]
    got_ok = [int(x) for b in out for x in b.line_numbers]
    ref = parse_ref(data, max_line=limit)
    assert got_bad == [(r.line, r.reason) for r in ref if isinstance(r, Bad)]
    assert got_ok == [r.line for r in ref if not isinstance(r, Bad)]


def test_cli_max_line_bytes(tmp_path):
    f = tmp_path / "long.vw"
    f.write_text("1 | a\n2 | " + "b " * 200 + "\n3 | c\n")
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "--max-line-bytes", "100", "--quiet"])
    assert f"{f}:2: line longer than 100 bytes" in one_error_line(p, 1)
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "--max-line-bytes", "100", "--skip-invalid"])
    assert p.returncode == 0 and "skipped lines = 1" in p.stderr
    # /dev/zero: an error after about the limit, not gigabytes
    p = run(["train", "-r", "oaa", "-k", "3", "/dev/zero", "--max-line-bytes", "10000"], timeout=60)
    assert "/dev/zero:1: line longer than 10000 bytes" in one_error_line(p, 1)


# -- 2. size options checked against what they can mean ------------------------------------------


@pytest.mark.parametrize("args", [
    ["predict", "-i", "M", "--threads", "1099511627776"],
    ["train", "-r", "lomtree", "-k", "26", "--max-internal-nodes", "1000000000"],
    ["train", "-r", "lomtree", "-k", "26", "--max-internal-nodes", str(2**63 - 1)],
    ["train", "-r", "oaa", "-k", "3", "--max-line-bytes", "0"],
    ["train", "-r", "oaa", "-k", "3", "--max-line-bytes", str(2**34 + 1)],
    ["train", "-r", "oaa", "-k", "3", "--label-offset", "9223372036854775808"],
    ["train", "-r", "oaa", "-k", "3", "--format", "libsvm", "--label-offset", "-9223372036854775809"],
    ["train", "-r", "oaa", "-k", str(2**31)],
])
def test_size_options_are_usage_errors(data, args):
    args = [str(data / "m.lt") if a == "M" else a for a in args]
    p = run(args + [str(data / "train.vw"), "--quiet"], timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    # one error line: ours, or click's usage error for a value outside an option's declared range
    assert len([ln for ln in p.stderr.splitlines() if ln.lower().startswith("error")]) == 1, p.stderr


@HYP
@given(st.integers(1, 2000), st.integers(0, 10**6))
def test_max_internal_nodes_bound(k, t):
    if t <= 64 * k:
        assert ReductionConfig(name="lomtree", k=k, max_internal_nodes=t).max_internal_nodes == t
    else:
        with pytest.raises(ConfigError):
            ReductionConfig(name="lomtree", k=k, max_internal_nodes=t)


@given(st.integers(-2**70, 2**70))
def test_label_offset_bound(offset):
    if -2**31 < offset < 2**31:
        assert InputConfig(label_offset=offset).label_offset == offset
    else:
        with pytest.raises(ConfigError):
            InputConfig(label_offset=offset)


def test_threads_and_memory_bounds(monkeypatch):
    from lomtree_cli import driver, learner
    from lomtree_cli.config import LearnerConfig

    cpus = len(os.sched_getaffinity(0))
    assert driver.resolve_threads(4 * cpus) == 4 * cpus
    with pytest.raises(ConfigError):
        driver.resolve_threads(4 * cpus + 1)
    monkeypatch.setattr(learner, "physical_memory", lambda: 1 << 30)  # a 1 GiB machine
    learner.LinearLearner(LearnerConfig(), 18, 1000)
    with pytest.raises(ConfigError, match="GiB"):
        learner.LinearLearner(LearnerConfig(), 18, 100_000_000)  # 1.6 GB of per-regressor state
    with pytest.raises(ConfigError):
        learner.LinearLearner(LearnerConfig(), 32, 1)  # 48 GiB of weights


# -- 3-5. files the user did not ask to destroy ----------------------------------------------------


def test_model_to_a_device_is_refused(data, tmp_path):
    for dev in ("/dev/null", "/dev/full"):
        p = run(["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", dev, "--quiet"])
        assert "not a regular file" in one_error_line(p, 2) or "character device" in p.stderr
        assert stat.S_ISCHR(os.stat(dev).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = run(["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(fifo), "--quiet"])
    assert "FIFO" in one_error_line(p, 2) and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_symlinked_model_writes_its_target(data, tmp_path):
    target = tmp_path / "real.lt"
    link = tmp_path / "link.lt"
    link.symlink_to(target)  # dangling until the save
    p = run(["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(link), "--quiet"])
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and target.is_file()
    assert run(["inspect", str(link)]).returncode == 0


def test_full_disk_predictions_name_the_file(data):
    p = run(["predict", "-i", str(data / "m.lt"), str(data / "train.vw"), "-p", "/dev/full", "--quiet"])
    assert "/dev/full" in one_error_line(p, 1) and "No space left" in p.stderr


def test_full_disk_inspect_names_standard_output(data):
    """inspect's text or JSON that cannot be written is one line naming standard output (it was
    'error: : No space left on device')."""
    for extra in ([], ["--json"]):
        p = run(["inspect", str(data / "m.lt")] + extra, shell_redirect="> /dev/full")
        line = one_error_line(p, 1)
        assert line == "error: cannot write to standard output: No space left on device", line


def test_an_os_error_without_a_file_is_one_plain_line(capsys):
    """The last-resort handler of OS errors names the file when the error has one, and prints no
    empty name ('error: : ...') when it has none."""
    from lomtree_cli.runtime import guarded

    def boom(filename):
        raise OSError(28, "No space left on device", filename)

    for filename, want in ((None, "error: No space left on device\n"),
                           ("/x/y", "error: /x/y: No space left on device\n")):
        with pytest.raises(SystemExit) as e:
            guarded(lambda: boom(filename))
        assert e.value.code == 1 and capsys.readouterr().err == want


FLAGS = ["-f", "-p", "--report", "-c", "input", "-i"]


@HYP
@given(st.lists(st.tuples(st.sampled_from(FLAGS), st.sampled_from(["a", "b", "./a", "sub/../b", "c"])),
                min_size=1, max_size=6, unique_by=lambda t: t[0]))
def test_random_output_collisions(tmp_path_factory, assignment):
    """Whatever paths the flags get: refused (ConfigError) exactly when an output shares its file
    with another output or with an input (``-f`` = ``-i`` excepted), before any work."""
    from lomtree_cli.paths import check_outputs

    d = tmp_path_factory.mktemp("coll")
    (d / "sub").mkdir()
    (d / "c").write_text("x")
    os.link(d / "c", d / "hard")  # not used as a name: c is also reachable as "hard"
    cwd = os.getcwd()
    os.chdir(d)
    try:
        outs = [(f, p) for f, p in assignment if f in ("-f", "-p", "--report", "-c")]
        ins = [(f, p) for f, p in assignment if f in ("input", "-i")]
        norm = {p: os.path.realpath(p) for _, p in assignment}
        clash = any(norm[a[1]] == norm[b[1]] for i, a in enumerate(outs) for b in outs[i + 1:]) or \
            any(norm[o] == norm[i] and (fo, fi) != ("-f", "-i") for fo, o in outs for fi, i in ins)
        if clash:
            with pytest.raises(ConfigError, match="same file|also an input"):
                check_outputs(outs, ins)
        else:
            check_outputs(outs, ins)
        # a hard link is the same file too
        with pytest.raises(ConfigError):
            check_outputs([("-p", "hard")], [("input", "c")])
    finally:
        os.chdir(cwd)


def test_collisions_exit_2_and_leave_files_alone(data, tmp_path):
    model = data / "m.lt"
    before = model.read_bytes()
    cases = [
        ["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(tmp_path / "x"), "--report",
         str(tmp_path / "x")],
        ["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(data / "train.vw")],
        ["predict", "-i", str(model), str(data / "train.vw"), "-p", str(model)],
        ["predict", "-i", str(model), str(data / "train.vw"), "--report", str(data / "train.vw")],
        ["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(tmp_path / "y"), "-c",
         str(tmp_path / "y"), "--passes", "2"],
    ]
    for args in cases:
        one_error_line(run(args + ["--quiet"]), 2)
    assert model.read_bytes() == before and not (tmp_path / "x").exists()
    # -i M -f M continues a model in place
    p = run(["train", "-i", str(model), str(data / "train.vw"), "-f", str(tmp_path / "z"), "--quiet"])
    assert p.returncode == 0


def test_socket_path_never_deletes_a_file(data):
    from lomtree_cli.daemon import _listen_unix

    with pytest.raises(ConfigError, match="not a socket"):
        _listen_unix(str(data / "m.lt"))
    assert (data / "m.lt").is_file()


def test_missing_model_directory_fails_before_training(data, tmp_path):
    p = run(["train", "-r", "oaa", "-k", "5", "/dev/zero", "-f", str(tmp_path / "nodir" / "sub" / "m.lt")],
            timeout=60)
    line = one_error_line(p, 2)  # before reading /dev/zero's endless first line
    assert "nodir/sub/m.lt" in line and ".writing" not in line and "does not exist" in line


def test_stale_writing_files_of_dead_processes_are_removed(data, tmp_path):
    dead = 4_000_000  # above Linux's pid_max: never a running process
    stale = tmp_path / f".m.lt.{dead}.writing"
    live = tmp_path / f".m.lt.{os.getppid()}.writing"
    other = tmp_path / f".n.lt.{dead}.writing"
    for f in (stale, live, other):
        f.write_bytes(b"x" * 100)
    p = run(["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(tmp_path / "m.lt"), "--quiet"])
    assert p.returncode == 0, p.stderr
    assert not stale.exists() and live.exists() and other.exists() and (tmp_path / "m.lt").is_file()


# -- 6. truncated or corrupt compressed input -----------------------------------------------------

COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@HYP
@given(st.sampled_from(sorted(COMPRESSORS)), st.floats(0.0, 1.0), st.integers(0, 255), st.booleans())
def test_random_truncations_of_compressed_input(tmp_path_factory, ext, frac, byte, flip):
    """Cut (or corrupt one byte of) a compressed file anywhere: the examples before the damage,
    then one InputError naming the file, never another exception."""
    text = ("\n".join(separable_lines(5, 300, seed=1)) + "\n").encode()
    blob = bytearray(COMPRESSORS[ext](text))
    at = int(frac * (len(blob) - 1))
    if flip:
        blob[at] ^= byte or 1
    else:
        blob = blob[:at]
    path = str(tmp_path_factory.mktemp("z") / ("in.vw" + ext))
    with open(path, "wb") as f:
        f.write(bytes(blob))
    try:
        got = [int(x) for b in iter_batches([path], InputConfig(), chunk_bytes=256) for x in b.labels]
    except InputError as e:  # the damage found by the decompressor, or garbage it let through
        assert e.source == path, str(e)
        if e.reason == "compressed":
            assert str(e).startswith(path + ": truncated or corrupt compressed stream"), str(e)
        return
    assert flip or at == len(blob)  # a truncated stream never passes as complete
    assert len(got) <= 300


def test_compressed_errors_are_one_line_with_the_file(tmp_path):
    text = ("\n".join(separable_lines(5, 100, seed=1)) + "\n").encode()
    cases = {"t.vw.gz": gzip.compress(text)[:-30], "t.vw.bz2": bz2.compress(text)[:-30],
             "t.vw.xz": lzma.compress(text)[:-30], "plain.vw.xz": text, "plain.vw.gz": text}
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        p = run(["train", "-r", "oaa", "-k", "5", str(tmp_path / name), "--quiet"])
        line = one_error_line(p, 1)
        assert line.startswith(f"error: {tmp_path / name}: truncated or corrupt compressed stream"), line


# -- 8. closed standard streams --------------------------------------------------------------------


def test_closed_standard_streams(data, tmp_path):
    m = tmp_path / "m.lt"
    p = run(["train", "-r", "oaa", "-k", "5", "-f", str(m)], shell_redirect="<&-")
    assert "standard input" in one_error_line(p, 1)
    p = run(["predict", "-i", str(data / "m.lt"), str(data / "train.vw"), "-p", "-"], shell_redirect=">&-")
    assert "standard output" in one_error_line(p, 2)
    for extra in ([], ["--quiet"]):
        if m.exists():
            m.unlink()
        p = run(["train", "-r", "oaa", "-k", "5", str(data / "train.vw"), "-f", str(m)] + extra,
                shell_redirect="2>&-")
        assert p.returncode == 0 and m.is_file()
        assert run(["inspect", str(m)]).returncode == 0  # no message went into the model


# -- 9. a user who cannot write HOME or the install --------------------------------------------------


def test_cache_folders_for_a_user_who_cannot_write(monkeypatch, tmp_path):
    import lomtree_cli as L

    here = os.path.dirname(os.path.abspath(L.__file__))
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(ro))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if str(p).startswith((here, str(ro)))
                        else real_access(p, m, **kw))
    from lomtree_cli import numba_setup

    base = numba_setup.cache_base()
    assert not base.startswith((here, str(ro))) and os.access(base, os.W_OK)
    # the AOT module built by `make` stays readable by everyone
    from lomtree_cli import kernels

    d = kernels.aot_dir()
    if os.path.isdir(d):
        assert stat.S_IMODE(os.stat(d).st_mode) & 0o055 == 0o055


# -- 10. a compressed .npz is said to be one ---------------------------------------------------------


def test_compressed_npz_model_message(data, tmp_path):
    with np.load(data / "m.lt", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez_compressed(tmp_path / "c.lt", **arrays)
    from lomtree_cli.model_io import load_model

    with pytest.raises(ModelFormatError, match="compressed .npz"):
        load_model(str(tmp_path / "c.lt.npz"))


# -- 11 and 14. labels: -k honoured everywhere, checked in every reduction ----------------------------


@pytest.mark.parametrize("name", ["table", "cpt"])
def test_k_is_honoured_by_table_and_cpt(name, tmp_path):
    from lomtree_cli import driver
    from lomtree_cli.config import LearnerConfig

    f = tmp_path / "d.vw"
    f.write_text("1 | a\n2 | b\n26 | z\n")
    opts = driver.RunOptions(inputs=[str(f)], quiet=True)
    with pytest.raises(InputError, match="label 26 is outside 1..3"):
        driver.train(InputConfig(bits=10), LearnerConfig(), ReductionConfig(name=name, k=3), opts)
    s = driver.train(InputConfig(bits=10), LearnerConfig(), ReductionConfig(name=name, k=26), opts)
    assert s["examples"] == 3 and s["k"] == 26


@pytest.mark.parametrize("name", ALL_REDUCTIONS)
def test_reductions_check_labels_from_library_use(name):
    """k = 10: training on label 99, 0 or -1 raises ValueError (the Filter tree's kernel once
    crashed the interpreter); predicting an example labelled 99 works; a negative label never
    reaches a kernel."""
    from lomtree_cli.config import LearnerConfig
    from lomtree_cli.learner import LinearLearner

    cls = available(name)
    rcfg = ReductionConfig(name=name, k=10, tree_buffer=0) if name == "plt" else ReductionConfig(name=name, k=10)
    red = cls(rcfg, LinearLearner(LearnerConfig(loss=cls.default_loss), 10, cls.n_models_for(rcfg), cls.slot_mode))
    rows = [[(1, 1.0), (7, 0.5)], [(2, 1.0)]]
    for bad in (99, 0, 11):
        with pytest.raises(ValueError):
            red.process(make_batch(rows, [3, bad], bits=10), np.array([True, True]))
    with pytest.raises(ValueError):
        red.process(make_batch(rows, [3, -1], bits=10), np.array([False, False]))
    red.process(make_batch(rows, [3, 4], bits=10), np.array([True, True]))
    preds, _ = red.process(make_batch(rows, [99, 0], bits=10), np.array([False, False]))
    assert preds.shape == (2,)


# -- 12. numeric indices that would wrap ----------------------------------------------------------------


@HYP
@given(st.integers(0, 2**66), st.sampled_from(["vw", "vw-ns", "libsvm"]))
def test_index_range(idx, where):
    line = {"vw": b"1 | %d:1" % idx, "vw-ns": b"1 |%d a" % idx, "libsvm": b"1 %d:1" % idx}[where]
    fmt = "libsvm" if where == "libsvm" else "vw"
    ref = parse_ref(line, fmt=fmt)
    if idx >= 2**64:
        with pytest.raises(InputError) as ei:
            parse_bytes(line, InputConfig(format=fmt))
        assert "2^64" in ei.value.detail and isinstance(ref[0], Bad)
    else:
        b = parse_bytes(line, InputConfig(format=fmt))
        assert b.indices.tolist() == ref[0].indices


def test_index_2_64_is_not_index_0():
    with pytest.raises(InputError):
        parse_bytes(b"1 | 18446744073709551616:1", InputConfig())
    assert parse_bytes(b"1 | 18446744073709551615:1", InputConfig()).indices[0] == (2**64 - 1) & (2**18 - 1)


# -- 13. LIBSVM labels that are not exact integers; repeated options ---------------------------------


@pytest.mark.parametrize("tok, label", [(b"3", 3), (b"+3", 3), (b"3.", 3), (b"3.000", 3), (b"-2", None),
                                        (b"2.9999999999999999999", None), (b"3.0000000000000000001", None),
                                        (b"3e0", None), (b"3.5", None)])
def test_libsvm_labels_are_exact_integers(tok, label):
    data = tok + b" 1:1"
    if label is None:
        with pytest.raises(InputError) as ei:
            parse_bytes(data, InputConfig(format="libsvm"))
        assert "2.9999" not in tok.decode() or "exact integer" in ei.value.detail
    else:
        assert parse_bytes(data, InputConfig(format="libsvm")).labels.tolist() == [label]
    assert isinstance(parse_ref(data, fmt="libsvm")[0], Bad) == (label is None)


REPEATABLE_NOT = [("-k", "3"), ("-r", "oaa"), ("-b", "12"), ("--passes", "1"), ("--format", "vw"),
                  ("--seed", "1"), ("--quiet", None), ("-l", "0.5"), ("--max-line-bytes", "1000")]


@settings(deadline=None, max_examples=20)
@given(st.sampled_from(REPEATABLE_NOT), st.sampled_from(REPEATABLE_NOT))
def test_repeated_options_are_refused(first, second):
    from click.testing import CliRunner

    from lomtree_cli.cli import main

    def opt(o):
        return [o[0]] if o[1] is None else [o[0], o[1]]

    args = ["train", "-r", "oaa", "-k", "3"] if first[0] not in ("-r", "-k") else ["train"]
    args = args + opt(first) + opt(second) + ["/nonexistent.vw"]
    res = CliRunner().invoke(main, args)
    names = [a for a in args if a.startswith("-")]
    if len(names) != len(set(names)):
        assert res.exit_code == 2 and "given more than once" in res.output, res.output
    else:
        assert "given more than once" not in res.output


def test_repeated_option_cli(data):
    p = run(["train", "-r", "oaa", "-k", "3", "-k", "5", str(data / "train.vw"), "--quiet"])
    assert "more than once" in p.stderr and p.returncode == 2 and "Traceback" not in p.stderr


# -- 15. VW input that VW reads ---------------------------------------------------------------------------


def xh(name: bytes, seed: int) -> int:
    return xxhash.xxh32_intdigest(name, seed)


def test_vw_string_values_and_empty_values():
    mask = (1 << 18) - 1
    b = parse_bytes(b"1 | happiness:true 7: x:-y :word\n", InputConfig(noconstant=True))
    # happiness^true = H(true, H(happiness, 0)); 7: is feature 7 of value 1; :word has an empty name
    assert b.indices.tolist() == [xh(b"true", xh(b"happiness", 0)) & mask, 7, xh(b"-y", xh(b"x", 0)) & mask,
                                  xh(b"word", xh(b"", 0)) & mask]
    assert b.values.tolist() == [1.0, 1.0, 1.0, 1.0]
    ns = parse_bytes(b"1 |s:2 7: 7 a:b\n", InputConfig(noconstant=True))
    hs = xh(b"s", 0)
    assert ns.values.tolist() == [1.0, 2.0, 1.0]  # VW: an empty or word value is 1, not scaled
    assert ns.indices.tolist() == [(7 + hs) & mask, (7 + hs) & mask, xh(b"b", xh(b"a", hs)) & mask]
    for bad in (b"nan", b"-inf", b"Infinity", b"nan(0x1)"):
        with pytest.raises(InputError, match="refuses NaN"):
            parse_bytes(b"1 | a:" + bad, InputConfig())


def test_vw_labels_plus_sign_offset_and_whitespace_lines():
    b = parse_bytes(b"+1 | a\n \t\n0 | b\n-1 | c\n", InputConfig(label_offset=2))
    assert b.labels.tolist() == [3, 0, 2, 1] and b.line_numbers.tolist() == [1, 2, 3, 4]
    with pytest.raises(InputError, match="must be an integer >= 1"):
        parse_bytes(b"0 | a\n", InputConfig(label_offset=0))
    with pytest.raises(InputError, match=r"label \+ label_offset \(2\)"):
        parse_bytes(b"-5 | a\n", InputConfig(label_offset=2))
    low = parse_bytes(b"0 | a\n-5 | b\n2 | c\n", InputConfig(low_labels_unlabeled=True))
    assert low.labels.tolist() == [-1, -1, 2]


VW_TOKENS = st.sampled_from(["a", "7", "a:1.5", "a:", ":", "7:", "a:true", ":x", "a:b:c", "a:nan", "a:1x",
                             "18446744073709551616", "x:-", "a:.", "b:+e1", "12:0"])


@HYP
@given(st.lists(st.tuples(st.sampled_from(["", "+1", "2", "0", "-3", "x"]),
                          st.sampled_from(["", "s", "s:2", "18446744073709551616"]),
                          st.lists(VW_TOKENS, max_size=4)), min_size=1, max_size=5),
       st.integers(-3, 3), st.booleans())
def test_vw_compatible_grammar_matches_reference(lines, offset, low):
    data = b"\n".join(f"{lab} |{ns} {' '.join(toks)}".encode() for lab, ns, toks in lines) + b"\n \n"
    got = parse_bytes(data, InputConfig(skip_invalid=True, label_offset=offset, low_labels_unlabeled=low))
    ref = parse_ref(data, label_offset=offset, low_unlabeled=low)
    assert [(e.line, e.reason) for e in got.skipped] == [(r.line, r.reason) for r in ref if isinstance(r, Bad)]
    ex = [r for r in ref if not isinstance(r, Bad)]
    assert got.labels.tolist() == [e.label for e in ex]
    assert got.indices.tolist() == [i for e in ex for i in e.indices]
    assert got.values.tolist() == [float(v) for e in ex for v in e.values]


def test_predict_lines_up_and_counts_low_labels(data, tmp_path):
    f = tmp_path / "t.vw"
    f.write_text("1 | c1\n   \n0 | c2\n-2 | c3\n3 | c3\n")
    p = run(["predict", "-i", str(data / "m.lt"), str(f), "-p", "-", "--report", str(tmp_path / "r.json")])
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 5  # one prediction per input line, the blank-looking one too
    assert "labels below 1 read as unlabeled = 2" in p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["labels_below_1"] == 2
    # training still refuses them
    one_error_line(run(["train", "-r", "oaa", "-k", "5", str(f), "--quiet"]), 1)
    # VW's --indexing 0: --label-offset 1 with the VW format
    z = tmp_path / "z.vw"
    z.write_text("0 | a\n4 | b\n")
    p = run(["train", "-r", "oaa", "-k", "5", "--label-offset", "1", str(z), "--quiet"])
    assert p.returncode == 0, p.stderr
