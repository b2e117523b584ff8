"""Everything lomtree does to numba beyond its public API, in one place.

lomtree depends on three numba internals; each is used only on the numba versions of
``TESTED`` (the range ``pyproject.toml`` allows; ``tests/test_numba_setup.py`` fails on any
other version, so a new numba is looked at before the range grows):

1. **Cache location** (``configure``): numba's ``cache=True`` revalidates a compiled function
   only against its own source file, not against the kernels it calls in other modules; after an
   edit of ``kernels/linear.py`` a cached reduction kernel would keep the old code. So numba's
   cache directory (``numba.core.config.CACHE_DIR``) is one keyed by a hash of every
   compiled-code source of the package (``source_key``), unless the user set
   ``NUMBA_CACHE_DIR``. It is set on numba's config when lomtree first needs numba, never in
   the environment: importing lomtree changes nothing in the caller's process environment.
   The same key names the ahead-of-time module (``lomtree_cli.aot``).
2. **Fast cache loads** (``patch_cache_load``): loading a kernel from numba's on-disk cache
   first calls ``target_context.refresh()``, which imports and installs every typing and
   lowering registry numba has (about 0.2 s, once per process) although a cached kernel is
   machine code that needs none of them: only the NRT runtime must be up. The replacement of
   ``numba.core.caching.Cache.load_overload`` initialises just the NRT; a real compilation (a
   cache miss) still refreshes the context itself (numba's compiler pipeline does so on
   construction). ``LOMTREE_NUMBA_FULL_REFRESH=1`` turns it off (``tests/test_startup.py``
   checks that both ways predict the same).
3. **Per-function flags in the ahead-of-time build** (``pycc_function_flags``): ``numba.pycc``
   (deprecated by numba, still in 0.68) compiles every exported function with one set of
   flags; lomtree's kernels differ (``nogil``, ``_nrt=False``, ``error_model``), so its
   ``compile_extra`` is wrapped to use each dispatcher's own options.

Also ``nrt_option``: whether numba's CPU target accepts ``_nrt=False`` (``kernels.kernel``).

Only the standard library and xxhash are imported here at module level (the CLI's start-up).
"""

from __future__ import annotations

import contextlib
import os

#: numba versions (major, minor) this code was tested with, inclusive; ``pyproject.toml``
#: allows exactly these (``numba>=0.68,<0.69``)
TESTED = ((0, 68), (0, 68))

_KEY: list = []


def numba_version() -> tuple:
    """(major, minor) of the installed numba, read from its metadata (numba is not imported)."""
    from importlib.metadata import version

    parts = version("numba").split(".")
    return int(parts[0]), int(parts[1])


def tested() -> bool:
    """The installed numba is in ``TESTED``."""
    try:
        v = numba_version()
    except Exception:  # noqa: BLE001 - no metadata: unknown, so untested
        return False
    return TESTED[0] <= v <= TESTED[1]


# -- 1. cache location ------------------------------------------------------------------------

def source_key() -> str:
    """Hash of the version and of every compiled-code source (kernels/, reductions/, and aot.py,
    whose compile options shape the ahead-of-time module); computed once per process."""
    if _KEY:
        return _KEY[0]
    import xxhash  # a dependency anyway; hashlib loads OpenSSL (about 3 ms of every start)

    from .version import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    h = xxhash.xxh3_64(__version__.encode())
    try:
        with open(os.path.join(here, "aot.py"), "rb") as f:
            h.update(f.read())
    except OSError:
        pass
    for sub in ("kernels", "reductions"):
        d = os.path.join(here, sub)
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".py"))
        except OSError:
            continue
        for n in names:
            h.update(n.encode())
            with open(os.path.join(d, n), "rb") as f:
                h.update(f.read())
    _KEY.append(h.hexdigest())
    return _KEY[0]


def _writable_dir(d: str) -> bool:
    """``d`` exists (or can be made) and this user can write in it."""
    try:
        os.makedirs(d, mode=0o755, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK | os.X_OK)


def cache_bases() -> list:
    """Where compiled kernels may be, in order: the package's ``__pycache__`` (where ``make``
    puts them), ``$XDG_CACHE_HOME/lomtree`` or ``~/.cache/lomtree``, and a per-user folder in the
    temporary directory (for a user whose HOME is not writable)."""
    import tempfile

    from .version import PROG

    here = os.path.dirname(os.path.abspath(__file__))
    home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return [os.path.join(here, "__pycache__"), os.path.join(home, PROG),
            os.path.join(tempfile.gettempdir(), f"{PROG}-{os.getuid() if hasattr(os, 'getuid') else 0}")]


def cache_base() -> str:
    """The first of ``cache_bases()`` this user can write in (the last one when none is: numba
    then reports the problem). Any user who can read the install can run it."""
    here = os.path.dirname(os.path.abspath(__file__))
    bases = cache_bases()
    if os.access(here, os.W_OK):
        return bases[0]
    for b in bases[1:]:
        if _writable_dir(b):
            return b
    return bases[-1]


def numba_cache_dir() -> str:
    """numba's cache directory for these sources (``NUMBA_CACHE_DIR`` when the user set it)."""
    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(cache_base(), f"numba-{source_key()}")


def configure() -> None:
    """Point numba's cache at ``numba_cache_dir()`` (numba is imported here); idempotent. Called
    before lomtree compiles or loads a kernel through numba."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return  # numba read it itself
    from numba.core import config

    try:
        config.CACHE_DIR = numba_cache_dir()
    except OSError:
        pass


# -- 2. fast cache loads ----------------------------------------------------------------------

def patch_cache_load() -> bool:
    """Make numba's cache loads initialise only the NRT (module docstring); True when active. Not
    applied on an untested numba, when numba lacks the methods it wraps, or with
    ``LOMTREE_NUMBA_FULL_REFRESH=1``."""
    if os.environ.get("LOMTREE_NUMBA_FULL_REFRESH", "0") not in ("", "0") or not tested():
        return False
    try:
        from numba.core import caching
        from numba.core.runtime import rtsys
    except Exception:  # noqa: BLE001 - another numba layout: keep numba's own behaviour
        return False
    cls = getattr(caching, "Cache", None)
    if cls is None or getattr(cls.load_overload, "_lomtree_fast", False):
        return bool(cls)
    if not all(hasattr(cls, a) for a in ("_load_overload", "_guard_against_spurious_io_errors")) or \
            not hasattr(rtsys, "initialize"):
        return False

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        # None when the guard swallowed an I/O error: numba then compiles (and refreshes)

    load_overload._lomtree_fast = True
    load_overload.__doc__ = cls.load_overload.__doc__
    cls.load_overload = load_overload
    return True


def nrt_option() -> bool:
    """numba's CPU target takes the ``_nrt`` option (compile without reference counting)."""
    try:
        from numba.core.cpu import CPUTargetOptions
    except Exception:  # noqa: BLE001
        return False
    return hasattr(CPUTargetOptions, "_nrt")


# -- 3. per-function flags in numba.pycc ------------------------------------------------------

@contextlib.contextmanager
def pycc_function_flags(by_func):
    """While active, ``numba.pycc`` compiles each exported function ``f`` with the options of its
    dispatcher ``by_func[f]`` (module docstring)."""
    from numba.core import compiler as ncomp
    from numba.pycc import compiler as pyccc

    orig = pyccc.compile_extra

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, library):
        d = by_func[func]
        f2 = ncomp.Flags()
        d.targetdescr.options.parse_as_flags(f2, d.targetoptions)
        f2.no_compile = True
        f2.no_cfunc_wrapper = True
        f2.no_cpython_wrapper = flags.no_cpython_wrapper
        return orig(typingctx, targetctx, func, args, return_type, f2, locals=locals, library=library)

    pyccc.compile_extra = compile_extra
    try:
        yield
    finally:
        pyccc.compile_extra = orig
