"""The package's import graph has no cycle, counting imports inside functions; importing the
package (and its Python API) leaves the process environment as it was."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import lomtree_cli

PACKAGE_DIR = os.path.dirname(os.path.abspath(lomtree_cli.__file__))


def package_modules(package_dir: str = PACKAGE_DIR) -> dict:
    """module name -> source path of every module of the package in ``package_dir``
    (``lomtree_cli`` by default)."""
    root = os.path.dirname(package_dir)
    mods = {}
    for d, dirs, files in os.walk(package_dir):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                name = os.path.relpath(os.path.join(d, f), root)[:-3].replace(os.sep, ".")
                mods[name[:-len(".__init__")] if name.endswith(".__init__") else name] = os.path.join(d, f)
    return mods


def _ancestors(name: str) -> list:
    """``a.b.c`` -> ``["a", "a.b"]``: the packages whose ``__init__`` importing ``a.b.c`` runs first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _from_base(here: str, node: ast.ImportFrom) -> str:
    """The module a ``from X import ...`` names (relative levels resolved against ``here``)."""
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    return ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))


def _lazy_getattr(tree: ast.Module):
    """A package ``__init__``'s module-level ``def __getattr__(name)``, or None."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return node
    return None


def _guard_names(test) -> set | None:
    """The names an ``if name in ("A", "B")`` / ``if name == "A"`` guard admits; None for any other
    test (then the imports under it count for every name)."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name):
        right = test.comparators[0]
        if isinstance(test.ops[0], ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return {right.value}
        if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts):
            return {e.value for e in right.elts}
    return None


def lazy_maps(mods: dict) -> dict:
    """package -> {name: the modules its ``__getattr__`` imports when asked for ``name``}; the key
    ``"*"`` holds what it imports for any name (imports outside an ``if name in (...)`` guard)."""
    maps = {}
    for m, path in mods.items():
        if not path.endswith("__init__.py"):
            continue
        with open(path, encoding="utf-8") as f:
            fn = _lazy_getattr(ast.parse(f.read(), path))
        if fn is None:
            continue
        lazy = {}

        def collect(stmts, names):
            for st in stmts:
                if isinstance(st, ast.If):
                    admitted = _guard_names(st.test)
                    collect(st.body, admitted if admitted is not None and names == {"*"} else names)
                    collect(st.orelse, names)
                    continue
                for node in ast.walk(st):
                    targets = set()
                    if isinstance(node, ast.Import):
                        targets = {a.name for a in node.names}
                    elif isinstance(node, ast.ImportFrom):
                        base = _from_base(m, node)
                        targets = {f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names}
                    for n in names:
                        lazy.setdefault(n, set()).update(t for t in targets if t in mods)

        collect(fn.body, {"*"})
        maps[m] = lazy
    return maps


def import_graph(mods: dict) -> dict:
    """module -> the package modules importing it may import, read strictly from its source:

    - every ``import`` and ``from ... import``, inside functions too (as if each function ran);
    - the packages a module's import runs first (``import a.b.c`` runs ``a`` and ``a.b``);
    - ``from P import name`` asks ``P`` for ``name``: when ``P`` has a lazy ``__getattr__``, an
      import of what it loads for ``name`` (``lazy_maps``); ``from X import name`` is an import of
      ``X.name`` when that is a module, else of ``X``;
    - imports by name: ``importlib.import_module("x")``; with a computed name, every module
      that a string names (``"x"``, ``"x:attribute"``: the registry's way of naming a reduction
      class; a package's name: its modules) in the module or in those it imports.

    A package's ``__getattr__`` itself is not an edge of the package (importing ``a.b`` does not
    call ``a.__getattr__``): its imports are charged to the modules that ask for its names.
    """
    maps = lazy_maps(mods)
    trees, named, dynamic = {}, {}, set()
    for m, path in mods.items():
        with open(path, encoding="utf-8") as f:
            trees[m] = tree = ast.parse(f.read(), path)
        named[m] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value.partition(":")[0]
                if name in mods:
                    named[m].add(name)
                    named[m].update(t for t in mods if t.startswith(name + ".") and mods[name].endswith("__init__.py"))
            elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) \
                    in ("import_module", "__import__"):
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    dynamic.add(m)
    graph = {}
    for m, path in mods.items():
        tree = trees[m]
        here = m if path.endswith("__init__.py") else m.rpartition(".")[0]
        lazy_fn = _lazy_getattr(tree) if path.endswith("__init__.py") else None
        skip = {id(n) for n in ast.walk(lazy_fn)} if lazy_fn is not None else set()
        out = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(here, node)
                out.add(base)
                for a in node.names:
                    if f"{base}.{a.name}" in mods:
                        out.add(f"{base}.{a.name}")
                    lazy = maps.get(base, {})
                    out.update(lazy.get(a.name, ()))
                    out.update(lazy.get("*", ()))
            elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) \
                    in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                out.add(str(node.args[0].value))
        if m in dynamic:
            out |= named[m].union(*(named.get(t, set()) for t in list(out)))
        own = set(_ancestors(m))
        out |= {p for t in list(out) for p in _ancestors(t)}
        graph[m] = sorted(t for t in out if t in mods and t != m and t not in own)
    return graph


def find_cycle(graph: dict) -> list | None:
    """One cycle of ``graph`` as a list of modules (first = last), or None."""
    state, stack = {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in graph[v]:
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_no_import_cycle():
    graph = import_graph(package_modules())
    assert "lomtree_cli.driver" in graph and "lomtree_cli.core" in graph["lomtree_cli.driver"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_in_data_scripts():
    """The benchmark scripts too: a runner below, command lines above, imports inside functions
    counted."""
    graph = import_graph(package_modules(os.path.join(os.path.dirname(PACKAGE_DIR), "data_scripts")))
    assert "data_scripts.bench" in graph["data_scripts.bench_throughput"]
    assert "data_scripts.common" in graph["data_scripts.bench"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_sees_function_level_imports(tmp_path):
    """The checker itself: a cycle made by an import inside a function is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    mods = {f"pkg.{n}": str(pkg / f"{n}.py") for n in ("a", "b", "c")}
    mods["pkg"] = str(pkg / "__init__.py")
    graph = import_graph(mods)
    assert graph["pkg.c"] == ["pkg.a"] and graph["pkg.b"] == ["pkg.a"]
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    (pkg / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(import_graph(mods)) is None


def _write_pkg(root, files: dict) -> dict:
    """A package ``pkg`` of ``files`` (name -> source) under ``root``; its ``package_modules``."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    for name, src in files.items():
        (pkg / f"{name}.py").write_text(src)
    return package_modules(str(pkg))


def test_find_cycle_sees_lazy_getattr_parents_and_names(tmp_path):
    """The checker itself, on what a plain import scan misses: a package ``__getattr__`` that loads
    a module for one name (only the modules asking for that name import it), one that loads for
    every name, the package ``__init__`` that importing a submodule runs, and a class named by a
    ``"module:Class"`` string that a module imports by computed name."""
    lazy = ("def __getattr__(name):\n"
            "    if name in ('Api', 'Other'):\n"
            "        from . import api\n"
            "        return api.Api\n"
            "    raise AttributeError(name)\n")
    mods = _write_pkg(tmp_path / "a", {"__init__": lazy, "api": "from . import low\n",
                                       "low": "from . import helper\n", "helper": "X = 1\n"})
    graph = import_graph(mods)
    assert graph["pkg"] == [] and graph["pkg.low"] == ["pkg.helper"]
    assert find_cycle(graph) is None  # asking for a submodule loads nothing else
    (tmp_path / "a" / "pkg" / "helper.py").write_text("def f():\n    from pkg import Api\n")
    graph = import_graph(mods)
    assert "pkg.api" in graph["pkg.helper"]
    assert find_cycle(graph) == ["pkg.api", "pkg.low", "pkg.helper", "pkg.api"]
    # a __getattr__ importing outside a name guard: every name asked for loads it
    (tmp_path / "a" / "pkg" / "__init__.py").write_text("def __getattr__(name):\n    from . import api\n")
    (tmp_path / "a" / "pkg" / "helper.py").write_text("from . import low\n")
    assert find_cycle(import_graph(mods)) is not None
    # a package __init__ importing what imports a module of the package
    mods = _write_pkg(tmp_path / "b", {"__init__": "", "top": "from .sub.leaf import Z\n", "low": "Y = 1\n"})
    (tmp_path / "b" / "pkg" / "sub").mkdir()
    (tmp_path / "b" / "pkg" / "sub" / "__init__.py").write_text("from .. import top\n")
    (tmp_path / "b" / "pkg" / "sub" / "leaf.py").write_text("from ..low import Y\nZ = Y\n")
    graph = import_graph(package_modules(str(tmp_path / "b" / "pkg")))
    assert "pkg.sub" in graph["pkg.top"] and find_cycle(graph) is not None
    # the registry's way: a table of "module:Class" strings, imported by a loader below it
    mods = _write_pkg(tmp_path / "c", {"__init__": "", "table": "T = {'a': 'pkg.impl:A'}\n",
                                       "load": "import importlib\nfrom .table import T\n"
                                               "def get(n):\n    return importlib.import_module(T[n])\n",
                                       "impl": "from .config import C\nclass A: pass\n",
                                       "config": "from .table import T\nC = 1\n"})
    graph = import_graph(mods)
    assert graph["pkg.table"] == [] and "pkg.impl" in graph["pkg.load"] and find_cycle(graph) is None
    (tmp_path / "c" / "pkg" / "table.py").write_text(
        "import importlib\nT = {'a': 'pkg.impl:A'}\ndef get(n):\n    return importlib.import_module(T[n])\n")
    assert find_cycle(import_graph(mods)) == ["pkg.config", "pkg.table", "pkg.impl", "pkg.config"]


def test_import_graph_covers_what_python_imports(tmp_path):
    """The scanner against the interpreter: what importing a module (or asking the package for a
    name, or loading a reduction class) really loads of the package is inside what the graph
    says it may load."""
    graph = import_graph(package_modules())

    def reach(starts):
        seen, todo = set(), list(starts)
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo.extend(graph[v])
        return seen

    cases = {
        "import lomtree_cli.cli": reach(["lomtree_cli.cli", "lomtree_cli"]),
        "import lomtree_cli.config": reach(["lomtree_cli.config", "lomtree_cli"]),
        "from lomtree_cli import Classifier": reach(["lomtree_cli.api", "lomtree_cli.regressor", "lomtree_cli"]),
        "from lomtree_cli.reductions.classes import get_reduction_class as g; g('plt'); g('oaa')":
            reach(["lomtree_cli.reductions.classes", "lomtree_cli"]),
    }
    for code, allowed in cases.items():
        p = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(m for m in sys.modules"
                            " if m == 'lomtree_cli' or m.startswith('lomtree_cli.')))"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        loaded = set(p.stdout.split())
        assert len(loaded) > 3 and loaded <= allowed, (code, loaded - allowed)


def test_importing_the_package_leaves_the_environment_alone(tmp_path):
    """``import lomtree_cli``, its Python API, fitting and predicting (numba loaded through the
    JIT too): ``os.environ`` is unchanged; the command line's entry point alone sets the BLAS
    thread variables. scikit-learn (optional; the API's base classes when installed) sets
    ``KMP_*`` variables on its own import: it is imported before the comparison, so that the test
    sees lomtree's changes alone, run alone or after tests that imported it."""
    code = (
        "import json, os, sys\n"
        "try:\n"
        "    import sklearn.base\n"
        "except ImportError:\n"
        "    pass\n"
        "before = dict(os.environ)\n"
        "import lomtree_cli\n"
        "from lomtree_cli import Classifier\n"
        "import numpy as np\n"
        "clf = Classifier(reduction='oaa', classes=2, bits=10).fit(np.eye(2), [1, 2])\n"
        "clf.learn_one({'a': 1.0}, 1)\n"
        "assert clf.predict_one({'a': 1.0}) in (1, 2)\n"
        "after = dict(os.environ)\n"
        "print(json.dumps({k: [before.get(k), after.get(k)] for k in set(before) | set(after)"
        " if before.get(k) != after.get(k)}))\n")
    blas = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_CACHE_DIR")
    base = {k: v for k, v in os.environ.items() if k not in blas}
    for extra in ({}, {"LOMTREE_AOT": "0"}):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=dict(base, **extra), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == {}, extra
    # the command line's entry point sets them, before numpy is imported
    code = ("import atexit, os, sys\n"
            "atexit.register(lambda: sys.stderr.write(os.environ.get('OPENBLAS_NUM_THREADS', '-')))\n"
            "from lomtree_cli import launch\n"
            "sys.argv = ['lomtree', '--version']\n"
            "launch.main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=base,
                       cwd=tmp_path)
    assert p.returncode == 0 and p.stderr.strip() == "1", p.stderr
