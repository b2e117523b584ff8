"""``lomtree serve`` and the client in ``launch.py``: a command run through a warm server behaves
exactly like the same command run in its own process (outputs, files, messages, exit statuses,
stdin/stdout pipes, SIGINT), and without a server the client runs it in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from lomtree_cli import model_io
from lomtree_cli.launch import listening
from tests.helpers import separable_lines
from tests.robustness_helpers import Feeder, StderrReader

CLIENT = [sys.executable, "-m", "lomtree_cli.launch"]


def _wait_listening(path: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read()}")
        if listening(path):
            return
        time.sleep(0.1)  # poll: the server's socket appears once it binds
    raise AssertionError("server did not start listening")


def _start(path: str, *extra: str, env_extra=None) -> subprocess.Popen:
    env = dict(os.environ, **(env_extra or {}))
    env.pop("LOMTREE_SERVER", None)
    return subprocess.Popen(CLIENT + ["serve", "--socket", path, *extra], stderr=subprocess.PIPE, text=True,
                            env=env)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("srv") / "s.sock")
    proc = _start(path, "--idle-timeout", "600")
    try:
        _wait_listening(path, proc)
        yield path
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert not os.path.exists(path)  # the server removes its socket


def _run(args, server_path=None, cwd=None, input=None):
    env = dict(os.environ)
    env.pop("LOMTREE_SERVER", None)
    if server_path:
        env["LOMTREE_SERVER"] = server_path
    return subprocess.run(CLIENT + args, capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
                          input=input)


@pytest.fixture()
def data(tmp_path):
    (tmp_path / "tr.vw").write_text("\n".join(separable_lines(6, 300, seed=1, noise_feats=3)) + "\n")
    (tmp_path / "te.vw").write_text("\n".join(separable_lines(6, 80, seed=2, noise_feats=3)) + "\n")
    return tmp_path


@pytest.mark.parametrize("red", ["oaa", "lomtree", "filter", "cpt"])
def test_same_results_as_in_process(server, data, red):
    for tag, srv in (("local", None), ("server", server)):
        tr = _run(["train", "-r", red, "-k", "6", "-b", "18", "tr.vw", "-f", f"{tag}.lt", "-p", f"{tag}.train.p",
                   "--quiet"], srv, cwd=data)
        assert tr.returncode == 0, tr.stderr
        pr = _run(["predict", "-i", f"{tag}.lt", "te.vw", "-p", f"{tag}.test.p", "--quiet"], srv, cwd=data)
        assert pr.returncode == 0, pr.stderr
    for name in ("train.p", "test.p"):
        assert (data / f"server.{name}").read_bytes() == (data / f"local.{name}").read_bytes()
    assert (data / "server.lt").read_bytes() == (data / "local.lt").read_bytes()
    a = _run(["inspect", "local.lt"], None, cwd=data)
    b = _run(["inspect", "server.lt"], server, cwd=data)
    assert b.returncode == a.returncode == 0
    assert b.stdout.replace("server.lt", "local.lt") == a.stdout


def test_progress_output_goes_to_the_clients_stderr(server, data):
    r = _run(["train", "-r", "oaa", "-k", "6", "tr.vw"], server, cwd=data)
    assert r.returncode == 0
    assert "average loss" in r.stderr and "finished run" in r.stderr


@pytest.mark.parametrize("args, code, message", [
    (["train", "-r", "oaa", "-k", "3", "bad.vw", "-f", "x.lt"], 1, "error: bad.vw:2: no '|' in line"),
    (["predict", "-i", "missing.lt", "bad.vw"], 2, "error: missing.lt: model file not found"),
    (["train", "--bogus"], 2, "No such option '--bogus'"),
    (["train", "-r", "oaa", "-k", "0", "bad.vw"], 2, "error:"),
])
def test_errors_and_exit_codes_are_the_same(server, tmp_path, args, code, message):
    (tmp_path / "bad.vw").write_text("1 | a b\nbad line\n")
    local = _run(args, None, cwd=tmp_path)
    remote = _run(args, server, cwd=tmp_path)
    assert local.returncode == remote.returncode == code
    assert message in remote.stderr
    assert remote.stderr == local.stderr
    assert remote.stdout == local.stdout


def test_stdin_and_stdout_are_the_clients(server, data):
    lines = (data / "tr.vw").read_text()
    assert _run(["train", "-r", "filter", "-k", "6", "-f", "m.lt", "--quiet"], server, cwd=data,
                input=lines).returncode == 0
    test = (data / "te.vw").read_text()
    local = _run(["predict", "-i", "m.lt", "-p", "-", "--quiet"], None, cwd=data, input=test)
    remote = _run(["predict", "-i", "m.lt", "-p", "-", "--quiet"], server, cwd=data, input=test)
    assert remote.returncode == local.returncode == 0
    assert remote.stdout == local.stdout and len(remote.stdout.splitlines()) == 80


def test_sigint_reaches_the_command(server, data):
    """SIGINT at the client, once the served command is training (a progress row has come through
    the client's stderr), stops it at an example boundary: exit 130 and a complete model."""
    env = dict(os.environ, LOMTREE_SERVER=server)
    p = subprocess.Popen(CLIENT + ["train", "-r", "oaa", "-k", "8", "-f", "int.lt", "-P", "1000"], cwd=data,
                         env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    feeder, reader = Feeder(p), StderrReader(p)  # endless stdin: only the signal can end the run
    feeder.start()
    reader.start()
    assert reader.started.wait(120), "".join(reader.lines)
    p.send_signal(signal.SIGINT)
    assert p.wait(60) == 130
    reader.join(10)
    err = "".join(reader.lines)
    assert "interrupted by signal 2" in err and "Traceback" not in err
    model_io.load_model(str(data / "int.lt"))  # stopped at an example boundary with a complete model


def test_without_a_server_the_command_runs_in_process(tmp_path, data):
    r = _run(["train", "-r", "oaa", "-k", "6", "tr.vw", "-f", "m.lt", "--quiet"], str(tmp_path / "none.sock"),
             cwd=data)
    assert r.returncode == 0, r.stderr
    assert (data / "m.lt").exists()


def test_second_server_on_a_socket_is_refused(server):
    p = _start(server, env_extra={"LOMTREE_SERVE_WARM": "0"})
    _, err = p.communicate(timeout=300)
    assert p.returncode == 2
    assert "a lomtree server already listens there" in err


def test_idle_timeout_ends_the_server(tmp_path):
    path = str(tmp_path / "idle.sock")
    p = _start(path, "--idle-timeout", "0.5", env_extra={"LOMTREE_SERVE_WARM": "0"})
    p.communicate(timeout=120)
    assert p.returncode == 0
    assert not os.path.exists(path)
