"""numba_setup: the numba versions lomtree was tested with, and the numba internals its two
patches rely on. A failure here on a new numba is the signal to read those internals again
(``numba_setup``'s docstring), run the whole suite, and only then widen ``TESTED`` and the
range in ``pyproject.toml``."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

from lomtree_cli import numba_setup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(numba_setup.__file__)))


def _dotted(v) -> str:
    return ".".join(map(str, v))


def test_installed_numba_is_a_tested_version():
    v = numba_setup.numba_version()
    lo, hi = numba_setup.TESTED
    assert numba_setup.tested(), (
        f"numba {_dotted(v)} is not a version lomtree was tested with ({_dotted(lo)} to {_dotted(hi)}): "
        f"check numba_setup's patches against its source, run the suite, then widen TESTED and pyproject.toml")


def test_pyproject_allows_exactly_the_tested_versions():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        spec = re.search(r'"numba([^"]*)"', f.read()).group(1)
    lo, hi = numba_setup.TESTED
    assert spec == f">={_dotted(lo)},<{hi[0]}.{hi[1] + 1}"


def test_the_internals_the_patches_use_are_there():
    from numba.core import caching, compiler
    from numba.core.cpu import CPUTargetOptions
    from numba.core.runtime import rtsys
    from numba.pycc import compiler as pyccc

    for name in ("load_overload", "_load_overload", "_guard_against_spurious_io_errors"):
        assert hasattr(caching.Cache, name), name
    assert list(inspect.signature(caching.Cache._load_overload).parameters) == ["self", "sig", "target_context"]
    assert hasattr(rtsys, "initialize")
    # the wrapper passes these (numba.pycc leaves the later ones, e.g. pipeline_class, at their defaults)
    assert list(inspect.signature(pyccc.compile_extra).parameters)[:8] == [
        "typingctx", "targetctx", "func", "args", "return_type", "flags", "locals", "library"]
    flags = compiler.Flags()
    for name in ("no_compile", "no_cfunc_wrapper", "no_cpython_wrapper"):
        assert hasattr(flags, name), name
    assert numba_setup.nrt_option() == hasattr(CPUTargetOptions, "_nrt")


def test_configure_sets_numba_config_not_the_environment(tmp_path):
    """The cache directory lives in numba's config, survives numba's re-reading of the
    environment when it compiles, and never enters ``os.environ``; the fast cache load is on."""
    code = (
        "import os\n"
        "from lomtree_cli import numba_setup as s\n"
        "s.configure()\n"
        "from numba import njit\n"
        "from numba.core import config\n"
        "njit(lambda x: x + 1)(1)\n"
        "assert config.CACHE_DIR == s.numba_cache_dir(), config.CACHE_DIR\n"
        "assert 'NUMBA_CACHE_DIR' not in os.environ\n"
        "print(s.patch_cache_load())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "LOMTREE_NUMBA_FULL_REFRESH")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True"]


def test_untested_numba_keeps_numba_unpatched(monkeypatch):
    monkeypatch.setattr(numba_setup, "numba_version", lambda: (0, 99))
    assert not numba_setup.tested()
    monkeypatch.setattr(numba_setup, "numba_version", lambda: (0, 67))
    assert not numba_setup.tested()
    monkeypatch.delenv("LOMTREE_NUMBA_FULL_REFRESH", raising=False)
    assert numba_setup.patch_cache_load() is False
