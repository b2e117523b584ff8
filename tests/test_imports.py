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


def import_graph(mods: dict) -> dict:
    """module -> the package modules it imports anywhere in its source (functions included).
    ``from X import name`` is an import of ``X.name`` when that is a module, else of ``X``."""
    graph = {}
    for m, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        here = m if path.endswith("__init__.py") else m.rpartition(".")[0]
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = here.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)
        graph[m] = sorted(t for t in out if t in mods and t != m)
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


def test_importing_the_package_leaves_the_environment_alone(tmp_path):
    """``import lomtree_cli``, its Python API, fitting and predicting (numba loaded through the
    JIT too): ``os.environ`` is unchanged; the command line's entry point alone sets the BLAS
    thread variables."""
    code = (
        "import json, os, sys\n"
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
