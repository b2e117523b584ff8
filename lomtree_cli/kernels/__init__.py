"""Numba kernels: flat arrays in, flat arrays out, one compiled call per chunk.

Numba itself is set up by ``numba_setup`` (cache location, fast cache loads, the tested
versions) before the first kernel is compiled or loaded through it.

Reference counting: numba brackets the use of every array it is handed (also each array read out
of a NamedTuple such as ``LinearArrays``) with atomic ``NRT_incref``/``NRT_decref`` calls, and
its pruning pass removes them only in simple control flow. In the per-node helpers of the tree
reductions (``learn``, a record look-up, ...) they were a third of the LOMtree training time.
``kernel`` is ``njit(cache=True)`` with numba's NRT switched off for functions that allocate
no arrays: no reference counting is emitted at all, and numba refuses to compile such a
function if it ever allocates. Functions that allocate keep plain ``njit(cache=True)``.

Ahead-of-time kernels: ``python -m lomtree_cli.aot`` (run by ``make``) compiles every kernel that
Python code calls into one extension module, with the same numba options, next to numba's cache
and named by the same source key. When that module exists for the current sources, CPU and numpy,
``kernel``/``jit`` return ``_Kernel`` objects instead of numba dispatchers: a call whose argument
types (dtype, ndim, layout, read-only flag of each array; scalar kinds; tuple contents) equal the
compiled signature goes straight to the compiled function, and numba is never imported (it costs
0.3-0.5 s of every command's start). Any other call, e.g. a test calling an internal helper or an
array of another layout, switches the process to the JIT once (``_switch_to_jit``: every
``_Kernel`` gets its numba dispatcher, also in the module globals that compiled callers read) and
runs there, so a mismatch costs time, never correctness. ``LOMTREE_AOT=0`` (and
``NUMBA_DISABLE_JIT=1``) keep the JIT from the start.
"""

import json as _json
import os as _os
import sys as _sys
import threading as _threading
from operator import attrgetter as _attrgetter

from numpy import ndarray as np_ndarray


def _want_aot() -> bool:
    return _os.environ.get("LOMTREE_AOT", "1") not in ("", "0") and \
        _os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")


def cpu_id() -> str:
    """The CPU model and feature flags (the AOT module is compiled for the host CPU)."""
    import xxhash

    model = flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].strip()
                if model and flags:
                    break
    except OSError:
        pass
    machine = _os.uname().machine if hasattr(_os, "uname") else ""
    return xxhash.xxh3_64_hexdigest(f"{machine}|{model}|{flags}".encode())


def aot_dir() -> str:
    """Where the AOT module of these sources is: the first of the cache folders that has it
    (the package's, built by ``make``, is readable by every user who can read the install),
    else where a build would put it (``numba_setup.cache_base()``)."""
    from ..numba_setup import cache_base, cache_bases, source_key

    name = f"aot-{source_key()}"
    for base in cache_bases():
        d = _os.path.join(base, name)
        if _os.path.exists(_os.path.join(d, "kernels.json")):
            return d
    return _os.path.join(cache_base(), name)


AOT_MODULE = "_lomtree_aot"


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x


def aot_meta(d: str):
    """The metadata (``kernels.json``) of the AOT module in ``d`` if that module exists and suits
    this machine (CPU, numpy minor version, interpreter), else None."""
    try:
        with open(_os.path.join(d, "kernels.json")) as f:
            meta = _json.load(f)
    except (OSError, ValueError):
        return None
    import numpy as np

    if meta.get("cpu") != cpu_id() or meta.get("numpy") != ".".join(np.__version__.split(".")[:2]) or \
            meta.get("cache_tag") != _sys.implementation.cache_tag or \
            not _os.path.exists(_os.path.join(d, meta.get("file", ""))):
        return None
    return meta


def _load_aot():
    """{"module:name": (compiled function, argument key)} from the AOT module, or None."""
    if not _want_aot():
        return None
    d = aot_dir()
    meta = aot_meta(d)
    if meta is None:
        return None
    # importlib.machinery is loaded at start-up already; importlib.util would cost 0.5-1 ms more
    from importlib.machinery import ExtensionFileLoader, ModuleSpec

    try:
        path = _os.path.join(d, meta["file"])
        loader = ExtensionFileLoader(AOT_MODULE, path)
        mod = loader.create_module(ModuleSpec(AOT_MODULE, loader, origin=path))
        loader.exec_module(mod)
        return {name: (getattr(mod, e["symbol"]), _tuplify(e["args"])) for name, e in meta["entries"].items()}
    except Exception:  # noqa: BLE001 - a broken or foreign module: the JIT does the work
        return None


_AOT = _load_aot()
_REGISTRY = []  # every _Kernel made, in definition order
_LOCK = _threading.Lock()
_JIT_STATE = {"on": _AOT is None, "fast_cache_load": None}


def _jit_setup():
    """numba's set-up (``numba_setup``), once, before it compiles or loads anything for lomtree."""
    if _JIT_STATE["fast_cache_load"] is None:
        from .. import numba_setup

        numba_setup.configure()
        _JIT_STATE["fast_cache_load"] = numba_setup.patch_cache_load()
        _JIT_STATE["nrt_off"] = numba_setup.nrt_option()


def _njit(func, options, nrt_off):
    from numba import njit

    _jit_setup()
    if nrt_off and _JIT_STATE["nrt_off"]:
        options = dict(options, _nrt=False)
    return njit(cache=True, **options)(func)


#: (dtype, ndim, flags bitmask) of an array -> its ``argkey`` (every call of a kernel looks its
#: arrays up: one dictionary look-up is about half the cost of reading the flags one by one)
_ARRAY_KEYS: dict = {}


def _array_key(a):
    fl = a.flags
    return ("a", a.dtype.str, a.ndim, "C" if fl.c_contiguous else ("F" if fl.f_contiguous else "A"),
            not fl.writeable)


def argkey(a):
    """The part of numba's ``typeof(a)`` that the compiled signature fixes (see module doc)."""
    t = type(a)
    if t is np_ndarray:
        k = (a.dtype, a.ndim, a.flags.num)
        key = _ARRAY_KEYS.get(k)
        if key is None:
            key = _ARRAY_KEYS[k] = _array_key(a)
        return key
    if t is bool:
        return "|b1"
    if t is int:
        return "<i8"
    if t is float:
        return "<f8"
    if isinstance(a, tuple):
        return ("t", t.__name__, *[argkey(x) for x in a])
    dt = getattr(a, "dtype", None)
    return dt.str if dt is not None and getattr(a, "ndim", 1) == 0 else ("?", t.__name__)


#: an array's (dtype, ndim, flags number): all that its ``argkey`` depends on, read in C
_ARRAY_FP = _attrgetter("dtype", "ndim", "flags.num")


#: the tuple whose fingerprint was computed last, and that fingerprint: a model's weight table
#: (``LinearArrays``, seven arrays) is handed to every kernel call as the same tuple object until
#: one of its arrays is replaced (a new tuple); a tuple cannot change which arrays it holds, nor
#: an array its dtype, dimensions or layout (only its write flag, which lomtree never clears on
#: these arrays)
_LAST_TUPLE = [(None, None)]


def fingerprint(a):
    """What ``argkey(a)`` depends on, quicker to get: an array's ``_ARRAY_FP``, a Python
    scalar's type, a tuple's type and fingerprints (the last tuple's remembered by identity),
    else the ``argkey``."""
    t = type(a)
    if t is np_ndarray:
        return _ARRAY_FP(a)
    if t is int or t is float or t is bool:
        return t
    if isinstance(a, tuple):
        last = _LAST_TUPLE[0]
        if last[0] is a:
            return last[1]
        fp = (t, *[_ARRAY_FP(x) if type(x) is np_ndarray else fingerprint(x) for x in a])
        _LAST_TUPLE[0] = (a, fp)  # (one store: another thread sees the old pair or the new one)
        return fp
    return argkey(a)


def direct(k, args):
    """The function to call ``k(*args)`` with, for as long as every argument keeps its type:
    the compiled function itself when the AOT module has ``k`` for these argument types (no
    per-call check: a one-example call is a few microseconds, and checking ~17 arguments was
    most of it), else ``k`` (a numba dispatcher, or a ``_Kernel`` that goes to the JIT). The
    caller calls it again whenever it hands other arrays."""
    if type(k) is _Kernel and k.aot is not None and k.dispatcher is None and \
            tuple([argkey(a) for a in args]) == k.aot[1]:
        return k.aot[0]
    return k


#: argument fingerprints a kernel remembers as its compiled signature's (a few: one per way of
#: calling it, e.g. with views or with owned arrays)
_KNOWN_MAX = 8


class _Kernel:
    """A kernel while the AOT module serves: the compiled function for its signature, else the JIT."""

    __slots__ = ("py_func", "options", "nrt_off", "name", "aot", "dispatcher", "known", "__wrapped__")

    def __init__(self, func, options, nrt_off):
        self.py_func = self.__wrapped__ = func
        self.options = options
        self.nrt_off = nrt_off
        self.name = f"{func.__module__}:{func.__name__}"
        self.aot = _AOT.get(self.name)
        self.dispatcher = None
        #: fingerprint lists (``fingerprint``) of calls whose ``argkey``s were the signature: a
        #: call with one of them needs no ``argkey`` (a one-example call of a reduction's kernel
        #: spent more time in the ``argkey``s of its 15-25 arrays than in the kernel)
        self.known = []

    def __call__(self, *args):
        if self.aot is not None:
            fp = [_ARRAY_FP(a) if type(a) is np_ndarray else fingerprint(a) for a in args]
            known = self.known
            # the newest first: a stream of one kind of call (learn_one) compares once
            if (known and fp == known[-1]) or fp in known:
                return self.aot[0](*args)
            fn, key = self.aot
            if tuple([argkey(a) for a in args]) == key:
                if len(self.known) >= _KNOWN_MAX:
                    del self.known[0]
                self.known.append(fp)
                return fn(*args)
        if self.dispatcher is None:
            _switch_to_jit()
        return self.dispatcher(*args)

    def __repr__(self):
        return f"<lomtree kernel {self.name} ({'aot' if self.aot else 'jit'})>"


def _switch_to_jit():
    """Give every ``_Kernel`` its numba dispatcher and put the dispatchers into the module globals
    (compiled callers resolve their callees there); later decorators return dispatchers."""
    with _LOCK:
        if _JIT_STATE["on"]:
            return
        for k in _REGISTRY:
            k.dispatcher = _njit(k.py_func, k.options, k.nrt_off)
        for mname, mod in list(_sys.modules.items()):
            if mod is None or not (mname == "lomtree_cli" or mname.startswith("lomtree_cli.")):
                continue
            d = vars(mod)
            for n, v in list(d.items()):
                if type(v) is _Kernel:
                    d[n] = v.dispatcher
                elif type(v) is _Placeholder:
                    if v.real is None:
                        v.real = v.make()
                    d[n] = v.real
        _JIT_STATE["on"] = True


def _make_prefetch_row():
    """``prefetch_row(table, row)``: LLVM's ``llvm.prefetch`` (read, high locality) of the first
    byte of ``table[row, 0]`` (``table[row]`` for a 1-d array); computes nothing. A tree descent
    prefetches the rows of both children of the node it is scoring, so the child's score,
    whichever it is, finds its weights in cache: on a large table the descents are bound by cache
    misses (figures: ``bench/notes/design-history.md``). Without the JIT it is a no-op Python
    function."""
    if _os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        def prefetch_row(table, row):
            return None
        return prefetch_row
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch_row(typingctx, table, row):
        if not (isinstance(table, types.Array) and table.ndim in (1, 2) and isinstance(row, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            zero = context.get_constant(types.intp, 0)
            row_i = context.cast(builder, args[1], signature.args[1], types.intp)
            index = [row_i, zero] if aryty.ndim == 2 else [row_i]
            ptr = cgutils.get_item_pointer2(context, builder, ary.data, cgutils.unpack_tuple(builder, ary.shape),
                                            cgutils.unpack_tuple(builder, ary.strides), aryty.layout, index,
                                            wraparound=False)
            i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]),
                                                "llvm.prefetch.p0")
            builder.call(fn, [i8p, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return types.void(table, row), codegen

    return prefetch_row


def _make_load_u64():
    """``load_u64(buf, i)``: the 8 bytes ``buf[i:i+8]`` of a 1-d uint8 array as one little-endian
    uint64, in one unaligned load (the parser's eight-bytes-at-once scans). The caller guarantees
    ``0 <= i`` and ``i + 8 <= buf.shape[0]``: nothing is checked. Without the JIT it is Python."""
    if _os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        import numpy as _np

        def load_u64(buf, i):
            return _np.uint64(int.from_bytes(bytes(buf[int(i):int(i) + 8]), "little"))
        return load_u64
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def load_u64(typingctx, buf, i):
        if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.dtype == types.uint8
                and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            off = context.cast(builder, args[1], signature.args[1], types.intp)
            p64 = builder.bitcast(builder.gep(ary.data, [off]), ir.IntType(64).as_pointer())
            v = builder.load(p64, align=1)
            if _sys.byteorder != "little":
                fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)]),
                                                    "llvm.bswap.i64")
                v = builder.call(fn, [v])
            return v

        return types.uint64(buf, i), codegen

    return load_u64


class _Placeholder:
    """Stands for a numba intrinsic while the AOT module serves (compiled code does not need it);
    ``_switch_to_jit`` puts the real one into the module globals before anything compiles."""

    def __init__(self, make):
        self.make = make
        self.real = None

    def __call__(self, *args):
        if self.real is None:
            _switch_to_jit()
        return self.real(*args)


if _JIT_STATE["on"]:
    _jit_setup()
prefetch_row = _make_prefetch_row() if _JIT_STATE["on"] else _Placeholder(_make_prefetch_row)
load_u64 = _make_load_u64() if _JIT_STATE["on"] else _Placeholder(_make_load_u64)


def aot_active() -> bool:
    """True while no kernel has needed the JIT (numba not imported by lomtree)."""
    return not _JIT_STATE["on"]


def _decorator(options, nrt_off):
    def deco(func):
        if _JIT_STATE["on"]:
            return _njit(func, options, nrt_off)
        with _LOCK:
            if not _JIT_STATE["on"]:
                k = _Kernel(func, options, nrt_off)
                _REGISTRY.append(k)
                return k
        return _njit(func, options, nrt_off)
    return deco


def kernel(**options):
    """``numba.njit(cache=True, **options)`` without NRT reference counting (see above): for
    kernels that take arrays and scalars, allocate nothing and return scalars or tuples of them."""
    return _decorator(options, True)


def jit(**options):
    """``numba.njit(cache=True, **options)`` (NRT on: for kernels that allocate arrays)."""
    return _decorator(options, False)


#: numba's cache loads skip the context refresh (None while the AOT module serves)
FAST_CACHE_LOAD = _JIT_STATE["fast_cache_load"]
