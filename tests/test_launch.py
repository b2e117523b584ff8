"""The console entry point (``lomtree_cli.launch.main``): the garbage collector held during start-up
and back on (frozen) for the run, and the fast exit that skips the interpreter's teardown but
keeps every output, exit status and ``atexit`` handler."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

from lomtree_cli import launch, runtime
from tests.helpers import separable_lines

MAIN = [sys.executable, "-m", "lomtree_cli.launch"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered on a pipe


def test_exit_status_as_the_interpreter_computes_it(capsys):
    assert runtime.exit_status(None) == 0
    assert runtime.exit_status(0) == 0
    assert runtime.exit_status(2) == 2
    assert runtime.exit_status(256 + 3) == 3
    assert runtime.exit_status("bad thing") == 1
    assert capsys.readouterr().err == "bad thing\n"


def test_end_startup_only_undoes_what_main_did():
    was = gc.isenabled()
    try:
        gc.disable()
        runtime.end_startup()  # main did not hold the collector: nothing changes
        assert not gc.isenabled()
        runtime._GC_HELD[0] = True
        frozen = gc.get_freeze_count()
        runtime.end_startup()
        assert gc.isenabled() and gc.get_freeze_count() > frozen and not runtime._GC_HELD[0]
        gc.disable()
        runtime.end_startup()  # once only
        assert not gc.isenabled()
    finally:
        runtime._GC_HELD[0] = False
        gc.unfreeze()
        if was:
            gc.enable()


def test_collector_runs_again_during_a_command(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(4, 200, seed=1)) + "\n")
    probe = textwrap.dedent(f"""
        import gc, sys
        import lomtree_cli.driver as D
        seen = []
        orig = D.Runner._process
        def spy(self, batch, train):
            seen.append(gc.isenabled())
            return orig(self, batch, train)
        D.Runner._process = spy
        import atexit
        atexit.register(lambda: print("enabled during run:", all(seen) and bool(seen), file=sys.stderr))
        sys.argv = ["lomtree", "train", "-r", "oaa", "-k", "4", "-b", "10", {str(data)!r}, "--quiet"]
        from lomtree_cli.launch import main
        main()
    """)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "enabled during run: True" in p.stderr  # atexit handlers still run at the fast exit


def test_fast_exit_keeps_outputs_and_status(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(4, 3000, seed=2)) + "\n")
    model = tmp_path / "m.lt"
    p = subprocess.run(MAIN + ["train", "-r", "oaa", "-k", "4", "-b", "12", str(data), "-f", str(model),
                               "--quiet"], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 0, p.stderr
    # predictions on a pipe (block-buffered stdout): every line arrives
    p = subprocess.run(MAIN + ["predict", "-i", str(model), str(data), "-p", "-"], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 3000
    assert b"average loss" in p.stderr  # the summary on stderr, flushed
    p = subprocess.run(MAIN + ["inspect", str(model), "--json"], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 0 and json.loads(p.stdout)["reduction"] == "oaa"
    # error statuses pass through
    p = subprocess.run(MAIN + ["predict", "-i", str(tmp_path / "none.lt"), str(data)], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 2 and p.stderr.decode().strip().endswith("model file not found")
    p = subprocess.run(MAIN + ["no-such-command"], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 2 and b"No such command" in p.stderr


def test_finish_flushes_stdio_runs_atexit_and_keeps_the_status():
    code = ("import atexit, sys; from lomtree_cli.launch import _finish; "
            "atexit.register(lambda: sys.stderr.write('bye')); "
            "sys.stdout.write('x' * 100); sys.stderr.write('partial '); _finish(3)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    assert (p.returncode, p.stdout, p.stderr) == (3, "x" * 100, "partial bye")


def test_no_import_cycles_among_the_command_modules():
    """launch -> cli -> commands -> driver/daemon, all of them -> runtime (a leaf): no module of
    this set imports, even lazily inside a function, one that imports it back."""
    import ast
    from pathlib import Path

    pkg = Path(launch.__file__).parent
    group = ("launch", "cli", "commands", "driver", "daemon", "runtime")
    edges = {}
    for name in group:
        tree = ast.parse((pkg / f"{name}.py").read_text())
        mods = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                mods |= {node.module} if node.module else {a.name for a in node.names}
        edges[name] = {m for m in mods if m in group}
    assert edges["runtime"] == set()

    def reach(a, seen):
        for b in edges[a]:
            if b not in seen:
                seen.add(b)
                reach(b, seen)
        return seen

    for name in group:
        assert name not in reach(name, set()), f"{name} imports itself through {sorted(edges[name])}"
