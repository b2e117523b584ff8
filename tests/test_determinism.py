"""Determinism: same input, options and ``--seed`` give byte-identical model files and
predictions: across runs, across processes (different ``PYTHONHASHSEED``) and across chunk sizes,
for every reduction of ``REGISTRY`` whose module exists (save/load/continue:
``tests/test_conformance.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lomtree_cli import driver
from tests.robustness_helpers import ALL_REDUCTIONS, ROOT, available, train_api, write_lines


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("det")
    a = write_lines(d / "a.vw", 12, 250, seed=10, noise_feats=3)
    b = write_lines(d / "b.vw", 12, 250, seed=11, noise_feats=3)
    t = write_lines(d / "t.vw", 12, 80, seed=12, noise_feats=3)
    return d, a, b, t


def predict_lines(model, test, tmp_path) -> bytes:
    out = tmp_path / f"pred-{os.path.basename(model)}.txt"
    driver.predict(str(model), driver.RunOptions(inputs=[test], predictions=str(out), quiet=True))
    return out.read_bytes()


@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:same-seed")
def test_same_seed_same_bytes_and_predictions(name, files, tmp_path):
    available(name)
    _, a, b, t = files
    runs = []
    for i, chunk in enumerate((1 << 20, 1 << 20, 64)):  # the third run also changes the chunk size
        m = tmp_path / f"m{i}.lt"
        p = tmp_path / f"p{i}.txt"
        train_api(name, [a, b], str(m), k=12, seed=7, predictions=str(p), chunk_bytes=chunk)
        runs.append((m.read_bytes(), p.read_bytes(), predict_lines(m, t, tmp_path)))
    assert runs[0][0] == runs[1][0], "same seed, different model bytes"
    assert runs[0][1:] == runs[1][1:], "same seed, different predictions"
    assert runs[0] == runs[2], "chunk size changed the model or the predictions"


def test_other_process_other_hash_seed_same_bytes(files, tmp_path):
    """Two fresh interpreters with different PYTHONHASHSEED train every reduction: identical files."""
    _, a, b, _ = files
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from tests.robustness_helpers import ALL_REDUCTIONS, train_api
        from lomtree_cli.errors import ConfigError
        from lomtree_cli.reductions import get_reduction_class
        out = sys.argv[1]
        for name in ALL_REDUCTIONS:
            try:
                get_reduction_class(name)
            except (ConfigError, ImportError):
                continue
            train_api(name, [{a!r}, {b!r}], out + "/" + name + ".lt", k=12, seed=3,
                      predictions=out + "/" + name + ".txt")
    """)
    dirs = []
    for hs in ("1", "2"):
        d = tmp_path / f"hs{hs}"
        d.mkdir()
        env = dict(os.environ, PYTHONHASHSEED=hs)
        r = subprocess.run([sys.executable, "-c", script, str(d)], capture_output=True, env=env, cwd=ROOT,
                           timeout=600)
        assert r.returncode == 0, r.stderr.decode()
        dirs.append(d)
    names = sorted(os.listdir(dirs[0]))
    assert names and names == sorted(os.listdir(dirs[1]))
    for n in names:
        assert (dirs[0] / n).read_bytes() == (dirs[1] / n).read_bytes(), f"{n} differs across processes"
