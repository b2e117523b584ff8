"""Predictions per second through ``lomtree predict --daemon`` against ``lomtree predict``.

The daemon is started once on the model (its start-up is not counted); then for each client count
N the file's lines are split into N consecutive shares and N clients send their share at once,
each reading its answers while it writes (a pipelining client), ``repeats`` times; the rate is
lines / wall time of the slowest client, median over the repeats. ``daemon_lockstep_ex_s``: one
client that waits for each answer before it sends the next line (a round trip per prediction);
``daemon_lockstep_p50_ms``/``_p99_ms``: the percentiles of those round trips.
``lomtree predict`` on the same file (``-p /dev/null``, start-up included, median of ``repeats``
runs) is the yardstick.

Usage::

    python -m data_scripts.bench_daemon MODEL FILE [--clients 1 8] [--repeats 5] [--no-predict] [--out daemon.json]

``data_scripts.bench_throughput`` uses ``daemon_rates`` for the ``daemon`` columns of its predict rows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time


def lomtree_exe() -> list[str]:
    return [sys.executable, "-m", "lomtree_cli.launch"]


def start_daemon(model: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    proc = subprocess.Popen(lomtree_exe() + ["predict", "-i", model, "--daemon", "--port", "0", "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    if "listening on" not in first:
        proc.kill()
        raise RuntimeError(f"the daemon did not start: {first}{proc.stderr.read()}")
    host, port = first.rsplit(" ", 1)[1].strip().rsplit(":", 1)
    return proc, (host, int(port))


def stop_daemon(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _client(address, payload: bytes, n_lines: int, out: list, i: int) -> None:
    s = socket.create_connection(address)
    got = [0]

    def read():
        f = s.makefile("rb")
        for _ in f:
            got[0] += 1

    t = threading.Thread(target=read)
    t.start()
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    t.join()
    s.close()
    out[i] = got[0] == n_lines


def one_round(address, shares: list[bytes]) -> float:
    """Seconds for all clients (one per share, at once) to get every answer."""
    ok = [False] * len(shares)
    threads = [threading.Thread(target=_client, args=(address, sh, sh.count(b"\n"), ok, i))
               for i, sh in enumerate(shares)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if not all(ok):
        raise RuntimeError("a client did not get one answer per line")
    return dt


def lockstep(address, lines: list[bytes], seconds: float = 3.0) -> tuple[float, float, float, int]:
    """(lines per second, p50 ms, p99 ms, lines) of one client that sends a line and waits for its
    answer before the next (an interactive client: a round trip per prediction)."""
    s = socket.create_connection(address)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    took = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        s.sendall(lines[len(took) % len(lines)])
        f.readline()
        took.append(time.perf_counter() - t)
    dt = time.perf_counter() - t0
    s.close()
    took.sort()
    return len(took) / dt, took[len(took) // 2] * 1e3, took[int(len(took) * 0.99)] * 1e3, len(took)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux's /proc; None elsewhere): less
    sensitive than wall time to what else the machine runs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _per_line_us(before, after, n: int):
    return None if before is None or after is None else (after - before) / n * 1e6


def split_lines(data: bytes, n: int) -> list[bytes]:
    lines = data.splitlines(keepends=True)
    cut = [len(lines) * i // n for i in range(n + 1)]
    return [b"".join(lines[a:b]) for a, b in zip(cut[:-1], cut[1:])]


def daemon_rates(model: str, path: str, clients=(1, 8), repeats: int = 5) -> dict:
    """``{"daemon_<N>_ex_s": lines per second with N clients}`` (median of ``repeats`` rounds),
    ``daemon_<N>_cpu_us``: the daemon's CPU microseconds per line over the rounds; the same for
    the lockstep client."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.endswith(b"\n"):
        data += b"\n"
    n = data.count(b"\n")
    proc, address = start_daemon(model)
    try:
        out = {}
        for c in clients:
            shares = split_lines(data, c)
            cpu = cpu_seconds(proc.pid)
            times = [one_round(address, shares) for _ in range(repeats)]
            out[f"daemon_{c}_ex_s"] = n / statistics.median(times)
            out[f"daemon_{c}_cpu_us"] = _per_line_us(cpu, cpu_seconds(proc.pid), n * repeats)
        cpu = cpu_seconds(proc.pid)
        rate, p50, p99, done = lockstep(address, data.splitlines(keepends=True)[:1000])
        out.update(daemon_lockstep_ex_s=rate, daemon_lockstep_p50_ms=p50, daemon_lockstep_p99_ms=p99,
                   daemon_lockstep_cpu_us=_per_line_us(cpu, cpu_seconds(proc.pid), done))
        return out
    finally:
        stop_daemon(proc)


def predict_rate(model: str, path: str, repeats: int = 5) -> float:
    n = sum(1 for _ in open(path, "rb"))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(lomtree_exe() + ["predict", "-i", model, path, "-p", "/dev/null", "--quiet"], check=True)
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("file")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--no-predict", action="store_true", help="leave out the lomtree predict yardstick")
    a = ap.parse_args(argv)
    res = {"model": os.path.basename(a.model), "file": os.path.basename(a.file),
           "lines": sum(1 for _ in open(a.file, "rb"))}
    if not a.no_predict:
        res["predict_ex_s"] = predict_rate(a.model, a.file, a.repeats)
    res.update(daemon_rates(a.model, a.file, a.clients, a.repeats))
    text = json.dumps(res, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
