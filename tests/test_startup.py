"""Start-up path: kernels loaded from numba's cache without the full target-context refresh
(``lomtree_cli.numba_setup.patch_cache_load``) compute exactly what the full refresh computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lomtree_cli.reductions import REGISTRY, get_reduction_class
from tests.helpers import separable_lines

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]
JIT = os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")


def _run(args, env_extra=None):
    env = dict(os.environ, LOMTREE_AOT="0", **(env_extra or {}))  # these tests are about numba's cache
    p = subprocess.run(LOMTREE + args, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.skipif(not JIT, reason="numba JIT disabled")
def test_fast_cache_load_is_active():
    code = ("import lomtree_cli.kernels as k, numba.core.caching as c; "
            "print(k.FAST_CACHE_LOAD, getattr(c.Cache.load_overload, '_lomtree_fast', False))")
    env = dict(os.environ, LOMTREE_AOT="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out == ["True", "True"]
    env = dict(os.environ, LOMTREE_AOT="0", LOMTREE_NUMBA_FULL_REFRESH="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize("red", list(REGISTRY))
def test_fast_and_full_refresh_predict_the_same(tmp_path, red):
    """Train once (compiles and fills the cache), then predict in fresh processes that load the
    kernels from the cache, with and without the fast path: identical predictions and reports."""
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(12, 400, seed=3, noise_feats=3)) + "\n")
    model = tmp_path / "m.lt"
    _run(["train", "-r", red, "-k", "12", "-b", "16", str(data), "-f", str(model), "--quiet"])
    outs = []
    for extra in ({}, {"LOMTREE_NUMBA_FULL_REFRESH": "1"}):
        preds = tmp_path / f"p{len(outs)}.txt"
        rep = tmp_path / f"r{len(outs)}.json"
        _run(["predict", "-i", str(model), str(data), "-p", str(preds), "--quiet", "--report", str(rep)], extra)
        outs.append((preds.read_text(), json.loads(rep.read_text())["average_loss"]))
    assert outs[0] == outs[1] and len(outs[0][0].splitlines()) == 400


@pytest.mark.parametrize("red", [r for r in REGISTRY if get_reduction_class(r).parallel_predict])
def test_threaded_predict_is_the_same(tmp_path, red):
    """``predict --threads N`` cuts batches into N parts predicted at once: same predictions and
    loss as one thread, for any N (chunks of 64 KB so that several batches are cut)."""
    data = tmp_path / "d.vw"
    lines = separable_lines(30, 3000, seed=5, noise_feats=40)
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.lt"
    _run(["train", "-r", red, "-k", "30", "-b", "16", str(data), "-f", str(model), "--quiet"])
    outs = []
    for t in ("1", "2", "3"):
        preds, rep = tmp_path / f"p{t}.txt", tmp_path / f"r{t}.json"
        _run(["predict", "-i", str(model), str(data), "-p", str(preds), "--quiet", "--report", str(rep),
              "--threads", t, "--chunk-bytes", "65536"])
        outs.append((preds.read_text(), json.loads(rep.read_text())["average_loss"]))
    assert outs[0] == outs[1] == outs[2] and len(outs[0][0].splitlines()) == 3000


def test_batch_slice_views():
    from lomtree_cli.parsing import parse_bytes
    from lomtree_cli.config import InputConfig

    b = parse_bytes(b"1 'a | x y:2\n2 | z\n3 'c | x z w\n", InputConfig(bits=18))
    s = b.slice(1, 3)
    assert s.labels.tolist() == [2, 3] and s.tags == [None, "c"]
    assert s.indptr.tolist() == [0, b.indptr[2] - b.indptr[1], b.indptr[3] - b.indptr[1]]
    assert (s.indices == b.indices[b.indptr[1]:]).all() and s.line_numbers.tolist() == [2, 3]
