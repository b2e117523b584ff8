"""Ahead-of-time compilation of the kernels: ``python -m lomtree_cli.aot`` (``make`` runs it).

A lomtree command that loads its kernels from numba's cache spends 0.5-0.7 s before it reads a
line, 0.3-0.5 s of it importing numba; VW's whole run on a file of a few thousand examples takes
about that. This builds one CPython extension module holding every kernel that Python code calls,
compiled by numba's ``numba.pycc`` with each kernel's own numba options (``nogil`` releases the
GIL in the wrapper as the JIT does, NRT off for ``kernel`` functions, ``error_model``, ...) for the
host CPU. ``lomtree_cli.kernels`` loads it when it matches the sources (the directory is named by
``numba_setup.source_key()``), the CPU, numpy's minor version and the interpreter; then no
command imports numba. Without it (no C compiler, another CPU, edited sources, ``LOMTREE_AOT=0``)
everything runs through numba's JIT as before: the module is an accelerator, never required.

Which kernels, with which signatures: the builder runs a warm-up (a tiny train, predict and
inspect of every reduction and input format, ``warm``) twice under the JIT;
during the second run every numba dispatcher in lomtree's module globals is wrapped to record the
calls that come from Python and the numba types of their arguments. Each (kernel, signature) seen
is exported once. A call with other argument types at run time goes to the JIT (see
``lomtree_cli.kernels``), so a signature the warm-up does not reach costs start-up time only.

After a build, the modules and numba caches of other sources in the same cache directory are
removed (they accumulated with every edit of a kernel: 175 MB here). ``numba.pycc`` is deprecated
in numba (kept through 0.68 at least): if it is missing, the build says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import json
import os
import pkgutil
import shutil
import sys
import tempfile
import time
import warnings


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"lomtree aot: {msg}", file=sys.stderr, flush=True)


def current(kernels_mod) -> bool:
    """The AOT module for the current sources exists and suits this machine."""
    return kernels_mod.aot_meta(kernels_mod.aot_dir()) is not None


def _type_key(t):
    """JSON form of ``lomtree_cli.kernels.argkey`` for a numba type (ValueError if unsupported)."""
    import numpy as np
    from numba.core import types as nt

    if isinstance(t, nt.Array):
        return ["a", np.dtype(str(t.dtype)).str, t.ndim, t.layout, not t.mutable]
    if isinstance(t, nt.BaseNamedTuple):
        return ["t", t.instance_class.__name__] + [_type_key(x) for x in t.types]
    if isinstance(t, nt.BaseTuple):
        return ["t", "tuple"] + [_type_key(x) for x in t.types]
    if isinstance(t, (nt.Boolean, nt.Integer, nt.Float)):
        return np.dtype(str(t)).str
    raise ValueError(f"no AOT argument key for numba type {t}")


def _warm_commands(d: str) -> list[list[str]]:
    """The warm-up: every reduction of ``REGISTRY`` trained on both input formats (one pass, and
    two through the example cache), predicted and inspected; the reductions that predict
    probabilities also with ``--probabilities`` and ``--top-k``. Writes its inputs into ``d``."""
    from .reductions.registry import REGISTRY

    vw, svm = os.path.join(d, "w.vw"), os.path.join(d, "w.svm")
    lines = [f"{1 + i % 5} |a f{i % 7}:0.5 g{i % 3} |b {i % 11}:1.5" for i in range(40)]
    with open(vw, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(svm, "w") as f:
        f.write("".join(f"{1 + i % 5} {1 + i % 7}:0.5 {9 + i % 3}:1\n" for i in range(40)))
    cmds = []
    for r in REGISTRY:
        m = os.path.join(d, f"{r}.lt")
        preds = os.path.join(d, f"{r}.preds")
        # real labels are read from VW text only
        second = [vw] if REGISTRY[r].real_labels else ["--format", "libsvm", svm]
        cmds += [["train", "-r", r, "-k", "5", "-b", "18", vw, "-f", m, "-p", preds, "--quiet"],
                 ["train", "-r", r, "-k", "5", "-b", "18", *second, "--passes", "2",
                  "-c", os.path.join(d, f"{r}.cache"), "-f", m + "2", "--quiet"],
                 ["predict", "-i", m, vw, "-p", preds, "--quiet"],
                 ["inspect", m]]
    # label re-assignment (mtree's first comes after --reassign-after examples: none in 40 lines by
    # default, but early in any longer run and in the Python API's streams)
    for r, spec in REGISTRY.items():
        if any(o.field == "reassign_after" for o in spec.options):
            cmds.append(["train", "-r", r, "-k", "5", "-b", "18", vw, "--reassign-after", "10", "--quiet"])
    # a tree over more labels than its arity (five labels, arity 2): PLT's k-means build
    for r, spec in REGISTRY.items():
        if any(o.field == "arity" for o in spec.options):
            cmds.append(["train", "-r", r, "-k", "5", "-b", "18", vw, "--arity", "2", "--quiet"])
    # train --threads 2 (batches of at least two parts of MIN_PART examples: a longer file)
    many = os.path.join(d, "many.vw")
    with open(many, "w") as f:
        f.write("\n".join(lines * 8) + "\n")
    for r, spec in REGISTRY.items():
        if spec.train_threads:
            cmds.append(["train", "-r", r, "-k", "5", "-b", "18", many, "--threads", "2", "--quiet"])
            cmds.append(["train", "-r", r, "-k", "5", "-b", "18", many, "--threads", "2", "--tree-buffer", "0",
                         "--quiet"])
    # many labels: the tables a reduction grows from Python between kernel calls (LOMtree's class
    # records) grow at least once
    wide = os.path.join(d, "wide.vw")
    with open(wide, "w") as f:
        f.write("".join(f"{1 + i % 97} |a f{i % 13} g{i % 5}\n" for i in range(400)))
    for r in REGISTRY:
        cmds.append(["train", "-r", r, "-k", "97", "-b", "18", wide, "--quiet"])
    # class records pruned (LOMtree's --max-class-records at its least for this tree)
    for r, spec in REGISTRY.items():
        if any(o.field == "max_class_records" for o in spec.options):
            cmds.append(["train", "-r", r, "-k", "97", "-b", "18", wide, "--leaf-labels", "0", "--max-internal-nodes",
                         "8", "--max-class-records", "248", "--quiet"])
    # label sets: every reduction that learns them, on the three formats that carry them
    xmc, mls = os.path.join(d, "w.xmc"), os.path.join(d, "w.mls")
    with open(xmc, "w") as f:
        f.write("40 12 6\n" + "".join(f"{i % 5},{(i + 2) % 6} {i % 7}:0.5 {9 + i % 3}:1\n" for i in range(39)) + " 3:1\n")
    with open(mls, "w") as f:
        f.write("".join(f"{1 + i % 5},{1 + (i + 2) % 6} |a f{i % 7}:0.5 |b g{i % 3}\n" for i in range(40)))
    for r in REGISTRY:
        if not REGISTRY[r].label_sets:
            continue
        m = os.path.join(d, f"{r}.ml.lt")
        cmds += [["train", "-r", r, "--multilabel", "-k", "6", "-b", "18", mls, "-f", m, "--quiet"],
                 ["train", "-r", r, "--format", "xmc", "-k", "6", "-b", "18", xmc, "--passes", "2",
                  "-c", os.path.join(d, f"{r}.ml.cache"), "-f", m + "2", "--quiet"],
                 ["predict", "-i", m, mls, "-p", os.path.join(d, "p"), "--quiet"],
                 ["predict", "-i", m, mls, "-p", os.path.join(d, "p"), "--top-k", "3", "--quiet"]]
    # the dual solver: one pass and several, single-label and label sets, its probabilities
    for r, spec in REGISTRY.items():
        if spec.dual:
            m = os.path.join(d, f"{r}.dual.lt")
            cmds += [["train", "-r", r, "-k", "5", "-b", "18", vw, "--solver", "dual", "--quiet"],
                     ["train", "-r", r, "-k", "5", "-b", "18", vw, "--solver", "dual", "--passes", "2", "-c",
                      os.path.join(d, f"{r}.dual.cache"), "-f", m, "--quiet"],
                     ["predict", "-i", m, vw, "-p", os.path.join(d, "p"), "--top-k", "3", "--quiet"],
                     ["train", "-r", r, "--format", "xmc", "-k", "6", "-b", "18", xmc, "--solver", "dual",
                      "--passes", "2", "--loss-function", "hinge", "--quiet"]]
    for r in REGISTRY:
        if REGISTRY[r].probabilities:
            out = os.path.join(d, "p")
            cmds.append(["predict", "-i", os.path.join(d, f"{r}.lt"), vw, "-p", out, "--probabilities", "--quiet"])
            cmds.append(["predict", "-i", os.path.join(d, f"{r}.lt"), vw, "-p", out, "--top-k", "3", "--quiet"])
    return cmds


def warm() -> None:
    """Load every kernel a command uses: the commands of ``_warm_commands``, output discarded."""
    from .cli import main as cli_main
    from .version import PROG

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with tempfile.TemporaryDirectory(prefix="lomtree-warm-") as d:
            for cmd in _warm_commands(d):
                try:
                    cli_main(args=cmd, prog_name=PROG, standalone_mode=True)
                except SystemExit:
                    pass
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def warm_api() -> None:
    """The Python API's one-example calls (``learn_one`` / ``predict_one`` of feature dicts;
    ``Reduction.one_step`` where a reduction has one) of every reduction, with an open label set
    and with given classes."""
    from .api import Classifier
    from .reductions.registry import REGISTRY

    for r in REGISTRY:
        for classes in (None, ["x", "y"]):
            try:
                clf = Classifier(reduction=r, classes=classes)
                for i in range(4):
                    x = {"a": 1.0, f"b{i}": 0.5}
                    if i:
                        clf.predict_one(x)
                    clf.learn_one(x, "xy"[i % 2])
                clf.predict_one({"a": 1.0})
            except ValueError:  # a reduction that needs classes, or takes no feature dicts
                pass


def _package_modules():
    mods = []
    for pkg in ("lomtree_cli.kernels", "lomtree_cli.reductions"):
        p = importlib.import_module(pkg)
        for m in pkgutil.iter_modules(p.__path__):
            mods.append(importlib.import_module(f"{pkg}.{m.name}"))
    return mods


def warm_features() -> None:
    """Run the kernels of feature generation and string labels once on a tiny chunk (so that
    ``discover`` records their signatures and they join the ahead-of-time module)."""
    from .config import InputConfig
    from .parsing import iter_batches, parse_bytes

    data = b"a |x 1 2 |y:2 3 4\nb | 5\n"
    for kw in ({"interactions": "xy,::", "ngram": "2", "skips": "1"}, {"ignore_linear": "x"}):
        parse_bytes(data, InputConfig(string_labels=True, **kw))
    for fmt, line in (("vw", b"1 |x 1 2\n"), ("libsvm", b"1 1:1 2:1\n")):
        fd, path = tempfile.mkstemp(prefix="lomtree-warm-", suffix=".txt")
        try:
            os.write(fd, line)
            os.close(fd)
            for _ in iter_batches([path], InputConfig(format=fmt, interactions="  ")):
                pass
        finally:
            os.unlink(path)


def discover():
    """[(dispatcher, argument types)] for every kernel call made from Python in the warm-up."""
    import numba
    from numba.core.registry import CPUDispatcher

    _package_modules()
    warm()  # compile (or load) everything first: the recorders below must not be compiled into callers
    warm_features()
    warm_api()
    seen: dict = {}
    replaced = []
    for mname, mod in list(sys.modules.items()):
        if mod is None or not mname.startswith("lomtree_cli"):
            continue
        for n, v in list(vars(mod).items()):
            if isinstance(v, CPUDispatcher) and v.py_func.__module__.startswith("lomtree_cli."):
                def rec(*args, _d=v):
                    seen.setdefault(_d, {}).setdefault(tuple(numba.typeof(a) for a in args), None)
                    return _d(*args)
                replaced.append((mod, n, v))
                setattr(mod, n, rec)
    try:
        warm()
        warm_features()  # feature generation and string labels
        warm_api()  # the Python API's one-example calls
    finally:
        for mod, n, v in replaced:
            setattr(mod, n, v)
    return [(d, sig) for d, sigs in seen.items() for sig in sigs]


def build(quiet: bool = False) -> str:
    """Compile the AOT module into ``kernels.aot_dir()`` (atomically: a temporary directory renamed)."""
    from . import kernels as KN
    from .numba_setup import numba_cache_dir, pycc_function_flags

    t0 = time.time()
    warnings.simplefilter("ignore")  # numba.pycc's pending-deprecation warnings
    from llvmlite import binding as llvm
    from numba.pycc import CC

    import numpy as np

    calls = discover()
    target = KN.aot_dir()
    base = os.path.dirname(target)
    os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="aot-build-", dir=base)
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the module from every other user
    try:
        cc = CC(KN.AOT_MODULE)
        cc.output_dir = tmp
        cc.target_cpu = llvm.get_host_cpu_name()
        entries, by_func = {}, {}
        for d, sig in sorted(calls, key=lambda c: (c[0].py_func.__module__, c[0].py_func.__name__)):
            name = f"{d.py_func.__module__}:{d.py_func.__name__}"
            if name in entries:
                _log(f"{name}: a second signature {sig} is left to the JIT", quiet)
                continue
            try:
                key = [_type_key(t) for t in sig]
            except ValueError as e:
                _log(f"{name}: {e}; left to the JIT", quiet)
                continue
            symbol = name.replace("lomtree_cli.", "").replace(".", "_").replace(":", "__")
            ret = d.overloads[sig].signature.return_type
            cc.export(symbol, ret(*sig))(d.py_func)
            entries[name] = {"symbol": symbol, "args": key}
            by_func[d.py_func] = d
        with pycc_function_flags(by_func), contextlib.redirect_stdout(sys.stderr if not quiet else open(os.devnull, "w")):
            cc.compile()
        (so,) = glob.glob(os.path.join(tmp, KN.AOT_MODULE + "*"))
        meta = {"file": os.path.basename(so), "cpu": KN.cpu_id(), "cpu_name": cc.target_cpu,
                "numpy": ".".join(np.__version__.split(".")[:2]), "cache_tag": sys.implementation.cache_tag,
                "entries": entries}
        with open(os.path.join(tmp, "kernels.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # modules and numba caches of other (older) sources: never loaded again by these sources
    keep = {target, numba_cache_dir(), os.environ.get("NUMBA_CACHE_DIR", "")}
    for old in glob.glob(os.path.join(base, "aot-*")) + glob.glob(os.path.join(base, "numba-*")):
        if old not in keep and not os.path.basename(old).startswith("aot-build-"):
            shutil.rmtree(old, ignore_errors=True)
    _log(f"{len(entries)} kernels compiled for {cc.target_cpu} in {time.time() - t0:.1f} s -> {target}", quiet)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lomtree_cli.aot", description=__doc__.split("\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild even when the module is current")
    ap.add_argument("--check", action="store_true", help="exit 0 if the module is current, 1 if not")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    os.environ["LOMTREE_AOT"] = "0"  # the builder itself runs the JIT
    from . import kernels as KN

    if KN.aot_active():
        raise SystemExit("lomtree aot: lomtree_cli.kernels was imported before LOMTREE_AOT=0 took effect")
    if current(KN) and not a.force:
        _log(f"up to date ({KN.aot_dir()})", a.quiet or a.check)
        return 0
    if a.check:
        return 1
    from .numba_setup import TESTED, numba_version, tested

    if not tested():
        lo, hi = (".".join(map(str, v)) for v in TESTED)
        _log(f"numba {'.'.join(map(str, numba_version()))} is outside the versions this build was tested with "
             f"({lo} to {hi}); commands use numba's JIT", a.quiet)
        return 0
    try:
        import numba.pycc  # noqa: F401
    except ImportError as e:
        _log(f"numba.pycc is not available ({e}); commands use numba's JIT", a.quiet)
        return 0
    try:
        build(a.quiet)
    except Exception as e:  # noqa: BLE001 - e.g. no C compiler: the JIT still works
        _log(f"build failed ({type(e).__name__}: {e}); commands use numba's JIT", False)
        return 0 if os.environ.get("LOMTREE_AOT_STRICT", "0") in ("", "0") else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
