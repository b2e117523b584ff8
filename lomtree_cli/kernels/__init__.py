"""Numba kernels: flat arrays in, flat arrays out, one compiled call per chunk.

Start-up: loading a kernel from numba's on-disk cache (``cache=True``) first calls
``target_context.refresh()``, which imports and installs every typing and lowering registry
numba has (about 0.2 s, once per process) although a cached kernel is machine code that needs
none of them: only the NRT runtime must be up. ``_fast_cache_load`` makes a cache load
initialise just the NRT; a real compilation (a cache miss) still refreshes the context itself
(numba's compiler pipeline does so on construction), so nothing is lost when it has to compile.
The patch is applied only when numba has the exact methods it wraps, and
``LOMTREE_NUMBA_FULL_REFRESH=1`` turns it off (``tests/test_startup.py`` checks that both ways
predict the same).

Reference counting: numba brackets the use of every array it is handed (also each array read out
of a NamedTuple such as ``LinearArrays``) with atomic ``NRT_incref``/``NRT_decref`` calls, and
its pruning pass removes them only in simple control flow. In the per-node helpers of the tree
reductions (``learn``, a record look-up, ...) they were a third of the LOMtree training time.
``kernel`` is ``njit(cache=True)`` with numba's NRT switched off for functions that allocate
no arrays: no reference counting is emitted at all, and numba refuses to compile such a
function if it ever allocates. Functions that allocate keep plain ``njit(cache=True)``.
"""

import os as _os


def _fast_cache_load() -> bool:
    if _os.environ.get("LOMTREE_NUMBA_FULL_REFRESH", "0") not in ("", "0"):
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


FAST_CACHE_LOAD = _fast_cache_load()


def _nrt_option() -> bool:
    try:
        from numba.core.cpu import CPUTargetOptions
    except Exception:  # noqa: BLE001
        return False
    return hasattr(CPUTargetOptions, "_nrt")


_NRT_OFF = _nrt_option()


def kernel(**options):
    """``numba.njit(cache=True, **options)`` without NRT reference counting (see above): for
    kernels that take arrays and scalars, allocate nothing and return scalars or tuples of them."""
    from numba import njit

    if _NRT_OFF:
        options.setdefault("_nrt", False)
    return njit(cache=True, **options)
