"""Shared helpers of the robustness tests: reductions present, tiny trained models.

Every test that covers "every reduction" takes its list from ``REGISTRY`` and skips a reduction
whose module is not there yet (``available(name)``), so the suite is green while reductions are
being written and covers them automatically once they land.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from lomtree_cli.errors import ConfigError
from lomtree_cli.reductions import REGISTRY, get_reduction_class
from tests.helpers import separable_lines

ALL_REDUCTIONS = sorted(REGISTRY)
#: per-reduction options of the in-process runs: PLT's tree buffer fills inside the first file, so
#: a run saved after that file and continued equals one run over both
CONTRACT_OPTIONS = {"plt": {"tree_buffer": 100}}
LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def available(name: str):
    """The reduction class, or skip the test when its module is not in this tree yet."""
    try:
        return get_reduction_class(name)
    except ConfigError as e:
        pytest.skip(str(e))
    except ImportError as e:  # the module exists but imports something still missing
        pytest.skip(f"reduction {name!r} does not import yet: {e}")


def write_lines(path, k: int, n: int, seed: int = 0, noise_feats: int = 2) -> str:
    with open(path, "w") as f:
        f.write("\n".join(separable_lines(k, n, seed=seed, noise_feats=noise_feats)) + "\n")
    return str(path)


def train_api(name: str, inputs, model_path=None, k: int = 8, bits: int = 10, seed: int = 3,
              initial_model=None, predictions=None, **run_kw) -> dict:
    """``driver.train`` in-process (quiet) for reduction ``name``; returns the summary."""
    from lomtree_cli import driver
    from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig

    cls = available(name)
    icfg = InputConfig(bits=bits)
    opts = driver.RunOptions(inputs=list(inputs), quiet=True, predictions=predictions, **run_kw)
    if initial_model is not None:
        return driver.train(icfg, None, None, opts, initial_model=initial_model, final_model=model_path,
                            explicit={})
    rcfg = ReductionConfig(name=name, k=k if cls.needs_k else None, seed=seed, **CONTRACT_OPTIONS.get(name, {}))
    lcfg = LearnerConfig(loss=cls.default_loss)
    return driver.train(icfg, lcfg, rcfg, opts, final_model=model_path)


def run_cli(args, stdin=None, timeout=300, env=None):
    return subprocess.run(LOMTREE + list(args), input=stdin, capture_output=True, timeout=timeout, cwd=ROOT,
                          env=env)


# ---- interrupted runs: an endless stdin and a watch on the progress table (test_signals, test_server)

def line(i: int) -> bytes:
    c = (i * 7919) % 8 + 1
    return b"%d | c%d n%d m%d:0.5\n" % (c, c, (i * 31) % 50, i % 13)


def lines(n: int) -> bytes:
    return b"".join(line(i) for i in range(n))


class Feeder(threading.Thread):
    """Writes ``line(0), line(1), ...`` to the process's stdin until it goes away."""

    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc = proc

    def run(self):
        i = 0
        try:
            while True:
                self.proc.stdin.write(b"".join(line(j) for j in range(i, i + 200)))
                i += 200
        except (BrokenPipeError, OSError, ValueError):
            pass


class StderrReader(threading.Thread):
    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc = proc
        self.lines = []
        self.started = threading.Event()

    def run(self):
        for raw in self.proc.stderr:
            s = raw.decode("utf-8", "replace")
            self.lines.append(s)
            if s.strip() and s.split()[0].replace(".", "").isdigit():  # a row of the progress table
                self.started.set()
