"""lomtree: a streaming learner for multiclass problems with very many classes.

Logarithmic-time tree reductions (LOMtree, Filter tree, Random tree, CPT) next to
one-against-all, over a VW-style hashed linear learner.

Numba cache: numba's ``cache=True`` revalidates a compiled function only against its own source
file, not against the kernels it calls in other modules; after an edit of ``kernels/linear.py``
a cached reduction kernel would keep the old code. So, before numba is imported, the cache
directory is set to one keyed by a hash of every compiled-code source of the package (unless the
user set ``NUMBA_CACHE_DIR``). Reading and hashing (xxh3) the sources costs under a millisecond. The same key names
the ahead-of-time kernel module (``lomtree_cli.aot``, loaded by ``lomtree_cli.kernels``), so an
edited source never runs with kernels built from the old one.
"""

import os as _os

__version__ = "0.1.0"


_KEY = []


def __getattr__(name):
    """``lomtree_cli.Classifier`` (and ``Model``): the Python API (``api.py``), imported on first
    use so that the command line's start-up does not pay for it."""
    if name in ("Classifier", "Model"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'lomtree_cli' has no attribute {name!r}")


def _source_key() -> str:
    """Hash of the version and of every compiled-code source (kernels/, reductions/, and aot.py,
    whose compile options shape the ahead-of-time module); computed once per process."""
    if _KEY:
        return _KEY[0]
    import xxhash  # a dependency anyway; hashlib loads OpenSSL (about 3 ms of every start)

    here = _os.path.dirname(_os.path.abspath(__file__))
    h = xxhash.xxh3_64(__version__.encode())
    try:
        with open(_os.path.join(here, "aot.py"), "rb") as f:
            h.update(f.read())
    except OSError:
        pass
    for sub in ("kernels", "reductions"):
        d = _os.path.join(here, sub)
        try:
            names = sorted(n for n in _os.listdir(d) if n.endswith(".py"))
        except OSError:
            continue
        for n in names:
            h.update(n.encode())
            with open(_os.path.join(d, n), "rb") as f:
                h.update(f.read())
    _KEY.append(h.hexdigest())
    return _KEY[0]


def _writable_dir(d: str) -> bool:
    """``d`` exists (or can be made) and this user can write in it."""
    try:
        _os.makedirs(d, mode=0o755, exist_ok=True)
    except OSError:
        return False
    return _os.access(d, _os.W_OK | _os.X_OK)


def _cache_bases() -> list:
    """Where compiled kernels may be, in order: the package's ``__pycache__`` (where ``make``
    puts them), ``$XDG_CACHE_HOME/lomtree`` or ``~/.cache/lomtree``, and a per-user folder in the
    temporary directory (for a user whose HOME is not writable)."""
    import tempfile

    here = _os.path.dirname(_os.path.abspath(__file__))
    home = _os.environ.get("XDG_CACHE_HOME") or _os.path.expanduser("~/.cache")
    return [_os.path.join(here, "__pycache__"), _os.path.join(home, "lomtree"),
            _os.path.join(tempfile.gettempdir(), f"lomtree-{_os.getuid() if hasattr(_os, 'getuid') else 0}")]


def _cache_base() -> str:
    """The first of ``_cache_bases()`` this user can write in (the last one when none is: numba
    then reports the problem). Any user who can read the install can run it."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    bases = _cache_bases()
    if _os.access(here, _os.W_OK):
        return bases[0]
    for b in bases[1:]:
        if _writable_dir(b):
            return b
    return bases[-1]


def _numba_cache_dir() -> str:
    return _os.path.join(_cache_base(), f"numba-{_source_key()}")


if "NUMBA_CACHE_DIR" not in _os.environ:
    try:
        _os.environ["NUMBA_CACHE_DIR"] = _numba_cache_dir()
    except OSError:
        pass

# lomtree makes no BLAS calls worth a thread, and OpenBLAS's worker threads (started when numpy is
# imported) spin for a while after start: on a 2-core machine that took CPU from the parser
# thread. One BLAS thread unless the user asked for more.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

if _os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
    import warnings as _warnings

    # Without the JIT the kernels run as Python on numpy scalars, and the intended uint64
    # wrap-around of the hash and RNG mixers warns; compiled code wraps silently.
    _warnings.filterwarnings("ignore", message="overflow encountered in scalar", category=RuntimeWarning,
                             module=r"lomtree_cli\.")
    # and IEEE division by zero / NaN (the kernels' error_model="numpy": an underflowed float32
    # adaptive sum gives an infinite rate, the update becomes NaN and is dropped and counted)
    for _msg in ("divide by zero encountered in scalar", "invalid value encountered in scalar"):
        _warnings.filterwarnings("ignore", message=_msg, category=RuntimeWarning, module=r"lomtree_cli\.")
