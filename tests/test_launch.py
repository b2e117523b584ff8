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

from lomtree_cli import launch
from tests.helpers import separable_lines

MAIN = [sys.executable, "-m", "lomtree_cli.launch"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered on a pipe


def test_exit_status_as_the_interpreter_computes_it(capsys):
    assert launch.exit_status(None) == 0
    assert launch.exit_status(0) == 0
    assert launch.exit_status(2) == 2
    assert launch.exit_status(256 + 3) == 3
    assert launch.exit_status("bad thing") == 1
    assert capsys.readouterr().err == "bad thing\n"


def test_end_startup_only_undoes_what_main_did():
    was = gc.isenabled()
    try:
        gc.disable()
        launch.end_startup()  # main did not hold the collector: nothing changes
        assert not gc.isenabled()
        launch._GC_HELD[0] = True
        frozen = gc.get_freeze_count()
        launch.end_startup()
        assert gc.isenabled() and gc.get_freeze_count() > frozen and not launch._GC_HELD[0]
        gc.disable()
        launch.end_startup()  # once only
        assert not gc.isenabled()
    finally:
        launch._GC_HELD[0] = False
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


# ---------------------------------------------------------------------------- early parse (predict)

def test_early_start_only_for_regular_files_without_flush(tmp_path, monkeypatch):
    from lomtree_cli import argv, driver

    f = tmp_path / "a.vw"
    f.write_text("1 | a\n")
    started = []
    monkeypatch.setattr(driver, "start_predict_early", lambda *a: started.append(a) or True)
    for args, want in ((["-i", "m.lt", str(f)], ("m.lt", [str(f)], False, 1 << 20, 0, 32 << 20)),
                       (["-i", "m.lt", str(f), "--skip-invalid", "--threads", "2", "--chunk-bytes=4096"],
                        ("m.lt", [str(f)], True, 4096, 2, 32 << 20)),
                       (["-i", "m.lt", str(f), "--flush"], None), (["-i", "m.lt", "-"], None),
                       (["-i", "m.lt"], None), (["-i", "m.lt", str(tmp_path)], None),
                       (["-i", "m.lt", str(tmp_path / "none.vw")], None)):
        started.clear()
        params, _ = argv.parse("predict", args)
        launch._start_predict_early(params)
        assert started == ([] if want is None else [want]), args
    monkeypatch.setenv("LOMTREE_EARLY_PARSE", "0")
    launch._start_predict_early(argv.parse("predict", ["-i", "m.lt", str(f)])[0])
    assert started == []


def _tiny_model(tmp_path, n=2000):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(4, n, seed=3)) + "\n")
    model = tmp_path / "m.lt"
    p = subprocess.run(MAIN + ["train", "-r", "lomtree", "-k", "4", "-b", "12", str(data), "-f", str(model),
                               "--quiet"], capture_output=True, timeout=300, env=ENV)
    assert p.returncode == 0, p.stderr
    return data, model


def test_early_parse_predicts_the_same(tmp_path):
    data, model = _tiny_model(tmp_path)
    outs = []
    for early in ("1", "0"):
        p = subprocess.run(MAIN + ["predict", "-i", str(model), str(data), "--chunk-bytes", "4096", "--threads", "2",
                                   "--report", str(tmp_path / f"r{early}.json")],
                           capture_output=True, timeout=300, env={**ENV, "LOMTREE_EARLY_PARSE": early})
        assert p.returncode == 0, p.stderr
        rep = json.loads((tmp_path / f"r{early}.json").read_text())
        outs.append((p.stdout, rep["examples"], rep["average_loss"]))
    assert outs[0] == outs[1] and outs[0][1] == 2000


def test_early_parser_is_taken_only_for_its_own_command(tmp_path, monkeypatch):
    from lomtree_cli import argv, driver

    data, model = _tiny_model(tmp_path, n=300)
    took = []
    take = driver._take_early
    monkeypatch.setattr(driver, "_take_early", lambda key: took.append(take(key)) or took[-1])
    want = tmp_path / "want.txt"
    driver.predict(str(model), driver.RunOptions(inputs=[str(data)], predictions=str(want), quiet=True, threads=1))
    for scan_args, opts_kw, taken in (
            (["-i", str(model), str(data), "--threads", "1"], {"threads": 1}, True),
            (["-i", str(model), str(data), "--threads", "2"], {"threads": 1}, False),
            (["-i", str(model), str(data), "--threads", "1", "--chunk-bytes", "100"], {"threads": 1}, False),
            (["-i", str(model), str(data), str(data), "--threads", "1"], {"threads": 1}, False)):
        launch._start_predict_early(argv.parse("predict", scan_args)[0])
        assert len(driver._EARLY) == 1
        early_batches = driver._EARLY[0][2]
        got = tmp_path / "got.txt"
        driver.predict(str(model), driver.RunOptions(inputs=[str(data)], predictions=str(got), quiet=True, **opts_kw))
        assert not driver._EARLY
        assert got.read_bytes() == want.read_bytes()
        assert (took[-1] is not None) == taken
        if taken:
            assert took[-1][1] is early_batches
