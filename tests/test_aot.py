"""Ahead-of-time kernels (``lomtree_cli.aot``, ``lomtree_cli.kernels``): every command of the
builder's warm-up (each reduction, both formats, train / cached passes / predict / inspect /
probabilities / top-k) writes byte-identical files and output with the AOT module as with numba's
JIT, and without importing numba; a call with argument types the module was not compiled for
switches to the JIT and still computes the right result; the argument key used to pick the
compiled function is numba's ``typeof`` in every part the signature fixes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import namedtuple

import numpy as np
import pytest

from lomtree_cli.reductions.base import REGISTRY

from lomtree_cli import kernels as KN

JIT = os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
HAVE_CC = shutil.which("cc") or shutil.which("gcc")
try:  # numba.pycc is deprecated; without it lomtree runs on the JIT only (lomtree_cli.aot says so)
    import importlib.util

    HAVE_PYCC = importlib.util.find_spec("numba.pycc") is not None
except ImportError:
    HAVE_PYCC = False
pytestmark = pytest.mark.skipif(not (JIT and HAVE_CC and HAVE_PYCC),
                                reason="needs numba's JIT, numba.pycc and a C compiler")


def _env(aot: bool) -> dict:
    env = dict(os.environ, LOMTREE_AOT="1" if aot else "0")
    return env


@pytest.fixture(scope="module")
def aot_built():
    """``make test`` builds the module first; a bare pytest run builds it here (about a minute)."""
    check = subprocess.run([sys.executable, "-m", "lomtree_cli.aot", "--check"], env=_env(False))
    if check.returncode != 0:
        b = subprocess.run([sys.executable, "-m", "lomtree_cli.aot", "--quiet"], env=dict(_env(False),
                           LOMTREE_AOT_STRICT="1"), capture_output=True, text=True, timeout=900)
        assert b.returncode == 0, b.stderr
    assert subprocess.run([sys.executable, "-m", "lomtree_cli.aot", "--check"], env=_env(False)).returncode == 0


RUN_ALL = textwrap.dedent("""
    import io, sys, contextlib
    from lomtree_cli.aot import _warm_commands
    from lomtree_cli.cli import main
    from lomtree_cli import kernels
    out = open("stdout.txt", "w")
    for cmd in _warm_commands("."):
        with contextlib.redirect_stdout(out):
            try:
                main(args=cmd, prog_name="lomtree", standalone_mode=True)
            except SystemExit as e:
                print("exit", e.code, file=out)
    out.close()
    print("numba" in sys.modules, kernels.aot_active())
""")


def test_every_warm_up_command_matches_the_jit_without_numba(aot_built, tmp_path):
    outs = {}
    for mode in ("aot", "jit"):
        d = tmp_path / mode
        d.mkdir()
        p = subprocess.run([sys.executable, "-c", RUN_ALL], cwd=d, env=_env(mode == "aot"), capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        outs[mode] = p.stdout.split()
    assert outs["aot"] == ["False", "True"], "numba was imported or a kernel fell back to the JIT"
    assert outs["jit"] == ["True", "False"]
    names = sorted(f.name for f in (tmp_path / "jit").iterdir() if not f.name.endswith(".cache"))
    assert names == sorted(f.name for f in (tmp_path / "aot").iterdir() if not f.name.endswith(".cache"))
    from lomtree_cli.reductions.classes import get_reduction_class

    sets = sum(get_reduction_class(r).label_sets for r in REGISTRY)  # and two more of label sets
    dual = sum(spec.dual for spec in REGISTRY.values())  # and one of --solver dual
    assert sum(n.endswith(".lt") or n.endswith(".lt2") for n in names) == 2 * len(REGISTRY) + 2 * sets + dual
    for n in names:
        assert (tmp_path / "aot" / n).read_bytes() == (tmp_path / "jit" / n).read_bytes(), n
    assert "exit" in (tmp_path / "aot" / "stdout.txt").read_text()  # the inspects printed and exited 0


FALLBACK = textwrap.dedent("""
    import sys
    import numpy as np
    from lomtree_cli import kernels
    from lomtree_cli.kernels import trees
    parent = np.array([4, 4, 5, 5, 6, 6, -1], dtype=np.int32)  # parents after children
    a = trees.node_depths(parent).tolist()
    state1 = ("numba" in sys.modules, kernels.aot_active())
    wide = np.zeros(14, dtype=np.int32)
    wide[::2] = parent
    b = trees.node_depths(wide[::2]).tolist()  # not contiguous: not the compiled signature
    c = trees.node_depths(parent).tolist()
    print(a == b == c == [2, 2, 2, 2, 1, 1, 0], state1, ("numba" in sys.modules, kernels.aot_active()),
          type(trees.node_depths).__name__)
""")


def test_other_argument_types_switch_to_the_jit(aot_built):
    p = subprocess.run([sys.executable, "-c", FALLBACK], env=_env(True), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "(False,", "True)", "(True,", "False)", "CPUDispatcher"]


def test_stale_or_foreign_module_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setattr(KN, "aot_dir", lambda: str(tmp_path))
    monkeypatch.setenv("LOMTREE_AOT", "1")
    assert KN._load_aot() is None  # nothing there
    meta = {"file": "_lomtree_aot.so", "cpu": "another", "numpy": ".".join(np.__version__.split(".")[:2]),
            "cache_tag": sys.implementation.cache_tag, "entries": {}}
    (tmp_path / "_lomtree_aot.so").write_bytes(b"\x7fELF garbage")
    (tmp_path / "kernels.json").write_text(json.dumps(meta))
    assert KN._load_aot() is None  # another CPU
    meta["cpu"] = KN.cpu_id()
    (tmp_path / "kernels.json").write_text(json.dumps(meta))
    assert KN._load_aot() is None  # not a loadable module
    monkeypatch.setenv("LOMTREE_AOT", "0")
    assert KN._load_aot() is None


Pair = namedtuple("Pair", "a b")

ARGUMENTS = [
    np.zeros(5, np.float32), np.zeros((3, 4), np.int64), np.zeros((3, 4), np.int64, order="F"),
    np.zeros((3, 4))[:, 1:3], np.zeros(10, np.uint32)[::2], np.frombuffer(b"abcd", dtype=np.uint8),
    np.zeros(0, np.bool_), np.zeros((2, 0), np.int32), 3, 2.5, True, np.int32(4), np.float32(1.5), np.bool_(False),
    np.uint64(7), Pair(np.zeros(2), np.zeros((2, 2), np.float32)), (np.zeros(3, np.int64), 5),
    np.zeros(5, np.float64), np.zeros((), np.int64), np.int64(3), np.zeros(4, ">f8"), (np.zeros(3, np.int64), 5.0),
    Pair(np.zeros(2), np.zeros((2, 2), np.float64)), (np.zeros(2), np.zeros((2, 2), np.float32)),
]


def test_equal_fingerprints_mean_equal_argkeys():
    """A kernel call skips the argkeys when the arguments' fingerprints were seen matching the
    compiled signature: two arguments of one fingerprint must have one argkey."""
    for a in ARGUMENTS:
        for b in ARGUMENTS:
            if KN.fingerprint(a) == KN.fingerprint(b):
                assert KN.argkey(a) == KN.argkey(b), (a, b)


@pytest.mark.parametrize("value", [
    np.zeros(5, np.float32), np.zeros((3, 4), np.int64), np.zeros((3, 4), np.int64, order="F"),
    np.zeros((3, 4))[:, 1:3], np.zeros(10, np.uint32)[::2], np.frombuffer(b"abcd", dtype=np.uint8),
    np.zeros(0, np.bool_), np.zeros((2, 0), np.int32), 3, 2.5, True, np.int32(4), np.float32(1.5), np.bool_(False),
    np.uint64(7), Pair(np.zeros(2), np.zeros((2, 2), np.float32)), (np.zeros(3, np.int64), 5),
])
@pytest.mark.skipif(not JIT, reason="numba typeof")
def test_argkey_is_numba_typeof(value):
    import numba

    from lomtree_cli.aot import _type_key

    assert KN.argkey(value) == KN._tuplify(_type_key(numba.typeof(value)))
