"""Scale and label range.

- Labels outside 1..k stop training with the clear ``file:line: label L is outside 1..k`` error
  (L and the range as the file writes labels, ``--label-offset`` taken off)
  (exit 1) for every reduction that needs k; ``--skip-invalid`` skips them; in ``predict`` they
  are counted as mistakes with one warning. Reductions without k (cpt, table) take any label up
  to 2^31-1 with memory that follows the labels seen, not their values.
- k = 10^6 runs in memory that follows the nodes and labels used (no k x k or k x 2^b structure):
  peak RSS of a small run is checked here; ``data_scripts/scale_memory.py`` gives the figures
  (200,000 examples over 10^6 classes).
"""

from __future__ import annotations

import json
import os
import resource

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli.cli import main
from tests.robustness_helpers import ALL_REDUCTIONS, ROOT, available, run_cli


def invoke(args, stdin=None):
    return CliRunner().invoke(main, args, input=stdin)


@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:label-range")
def test_labels_outside_1_k(name, tmp_path):
    cls = available(name)
    f = tmp_path / "in.vw"
    f.write_text("1 | a\n2 | b\n6 | c\n3 | d\n2147483647 | e\n")
    lib = tmp_path / "in.svm"
    lib.write_text("0 1:1\n1 2:1\n5 3:1\n")  # with --label-offset 1: labels 1, 2, 6
    k = ["-k", "5"] if cls.needs_k else []
    res = invoke(["train", "-r", name, *k, str(f), "--quiet", "-f", str(tmp_path / "m.lt")])
    if not cls.needs_k:
        assert res.exit_code == 0, res.stderr  # any label >= 1 is fine
        return
    assert res.exit_code == 1 and res.stderr == f"error: {f}:3: label 6 is outside 1..5\n", res.stderr
    res = invoke(["train", "-r", name, *k, "--format", "libsvm", "--label-offset", "1", str(lib), "--quiet"])
    # named as the file writes it (label 5 + the offset 1 would be class 6)
    assert res.exit_code == 1 and res.stderr == f"error: {lib}:3: label 5 is outside 0..4 (-k 5)\n", res.stderr
    rep = tmp_path / "r.json"
    res = invoke(["train", "-r", name, *k, str(f), "--quiet", "--skip-invalid", "--report", str(rep),
                  "-f", str(tmp_path / "m.lt")])
    assert res.exit_code == 0, res.stderr
    r = json.loads(rep.read_text())
    assert (r["examples"], r["skipped_lines"]) == (3, 2)
    # evaluation only: counted as a mistake, one warning, no error
    res = invoke(["predict", "-i", str(tmp_path / "m.lt"), str(f), "-p", str(tmp_path / "p.txt")])
    assert res.exit_code == 0, res.stderr
    assert res.stderr.count("warning:") == 1 and "outside 1..5" in res.stderr
    assert len((tmp_path / "p.txt").read_text().splitlines()) == 5


@pytest.mark.parametrize("name", ["cpt", "table"], ids=lambda n: f"{n}:huge-label-values")
def test_label_values_do_not_size_memory(name, tmp_path):
    """Labels near 2^31 in a reduction without k: memory follows labels seen, not their values."""
    available(name)
    f = tmp_path / "in.vw"
    labels = [1, 2**31 - 1, 10**9, 2**31 - 2, 7, 10**9]
    f.write_text("".join(f"{y} | f{y} g\n" for y in labels) * 20)
    m = tmp_path / "m.lt"
    r = run_cli(["train", "-r", name, str(f), "-f", str(m), "--quiet", "-b", "12"])
    assert r.returncode == 0, r.stderr
    assert m.stat().st_size < 200_000
    p = run_cli(["predict", "-i", str(m), str(f), "-p", "-", "--quiet"])
    assert p.returncode == 0 and set(p.stdout.split()) <= {str(y).encode() for y in labels}


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"), reason="k=10^6 needs compiled kernels")
@pytest.mark.parametrize("name", ["lomtree", "filter", "rtree", "cpt"], ids=lambda n: f"{n}:k=1e6")  # OAA is O(k) per example
def test_a_million_classes_in_process(name, tmp_path):
    """k = 10^6 with a few hundred examples: the run works and the RSS growth is bounded
    (a k x k bit matrix would be 125 GB, a k x 2^16 float32 table 262 GB)."""
    from tests.robustness_helpers import train_api

    available(name)
    rng = np.random.default_rng(0)
    ys = rng.integers(1, 10**6 + 1, 300)
    f = tmp_path / "in.vw"
    f.write_text("".join(f"{y} | p{y} q{y % 97} n{i % 50}\n" for i, y in enumerate(ys)))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s = train_api(name, [str(f)], str(tmp_path / "m.lt"), k=10**6, bits=16)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert s["examples"] == 300
    assert grew_mb < 600, f"{name} at k=10^6 grew the RSS by {grew_mb:.0f} MB"


@pytest.mark.slow
def test_scale_memory_script(tmp_path):
    from data_scripts.scale_memory import main as scale

    out = tmp_path / "scale.json"
    assert scale(["-n", "20000", "--out-dir", str(tmp_path), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert all(r["above_baseline_mb"] < 1500 for r in rows), rows
    assert ROOT
