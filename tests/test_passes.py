"""Multiple passes (docs/ALGORITHMS.md §4.3): cache vs re-parse, holdout, early termination, decay."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from lomtree_cli import driver, model_io
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.errors import ConfigError
from lomtree_cli.kernels.linear import MODE_CPT
from lomtree_cli.metrics import Progress
from lomtree_cli.parsing import iter_batches
from lomtree_cli.reductions import get_reduction_class

REDUCTIONS = ["oaa", "filter", "rtree", "lomtree", "cpt", "table"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reduction_or_skip(name):
    try:
        return get_reduction_class(name)
    except ConfigError as e:
        pytest.skip(str(e))


def make_data(path, n=300, k=4, seed=0, secret_every=0):
    """Noisy linear-ish data; with ``secret_every`` lines divisible by it carry feature ``z:secret``."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(1, n + 1):
            y = int(rng.integers(1, k + 1))
            noisy = rng.random() < 0.15
            shown = int(rng.integers(1, k + 1)) if noisy else y
            extra = " |z secret" if secret_every and i % secret_every == 0 else ""
            tag = f" 't{i}" if i % 5 == 0 else ""
            f.write(f"{y}{tag} |a c{shown} w{int(rng.integers(0, 30))} |b v:{rng.normal() + y:.3f}{extra}\n")
    return str(path)


def run(paths, tmp_path, red="oaa", k=4, passes=3, model="m.lt", preds=None, bits=16, decay=1.0, **kw):
    cls = reduction_or_skip(red)
    icfg = InputConfig(bits=bits)
    lcfg = LearnerConfig(loss=cls.default_loss, decay_learning_rate=decay)
    rcfg = ReductionConfig(name=red, k=None if red in ("cpt", "table") else k)
    err = io.StringIO()
    opts = driver.RunOptions(inputs=list(paths), passes=passes, err=err,
                             predictions=None if preds is None else str(tmp_path / preds), **kw)
    mpath = None if model is None else str(tmp_path / model)
    summary = driver.train(icfg, lcfg, rcfg, opts, final_model=mpath)
    return summary, err.getvalue(), mpath


def model_arrays(path) -> dict:
    m = model_io.load_model(path)
    out = {f"learner/{k}": v for k, v in m.learner.state().items()}
    out.update({f"reduction/{k}": np.asarray(v) for k, v in m.reduction.state().items()})
    out["meta"] = np.frombuffer(json.dumps({**m.learner.meta(), **m.reduction.meta(),
                                            "passes": m.passes_done}, sort_keys=True).encode(), np.uint8)
    return out


def assert_same_model(p1, p2):
    a, b = model_arrays(p1), model_arrays(p2)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert a[key].tobytes() == b[key].tobytes(), key


@pytest.mark.parametrize("red", REDUCTIONS)
def test_cache_passes_equal_reparsed_passes(tmp_path, monkeypatch, red):
    data = make_data(tmp_path / "d.vw")
    s1, _, m1 = run([data], tmp_path, red, model="cached.lt", preds="cached.p", chunk_bytes=2048)
    # the same run re-parsing the text in every pass (no cache)
    with monkeypatch.context() as mp:
        mp.setattr(driver, "_open_cache", lambda *a, **k: None)
        s2, _, m2 = run([data], tmp_path, red, model="parsed.lt", preds="parsed.p", chunk_bytes=2048)
    assert_same_model(m1, m2)
    assert (tmp_path / "cached.p").read_bytes() == (tmp_path / "parsed.p").read_bytes()
    for key in ("examples", "average_loss", "holdout_loss", "passes", "best_pass", "total_features"):
        assert s1[key] == s2[key], key
    # an explicit cache file, kept and then reused from pass 1 of the next run
    cpath = str(tmp_path / "keep.cache")
    run([data], tmp_path, red, model="c1.lt", cache=cpath, use_cache=True)
    assert os.path.exists(cpath)
    s3, err, m3 = run([data], tmp_path, red, model="c2.lt", preds="c2.p", cache=cpath, use_cache=True)
    assert "reading examples from the cache" in err
    assert_same_model(m1, m3)
    assert (tmp_path / "c2.p").read_bytes() == (tmp_path / "cached.p").read_bytes()


def test_one_pass_with_cache_flag(tmp_path):
    data = make_data(tmp_path / "d.vw")
    s1, _, m1 = run([data], tmp_path, passes=1, model="a.lt", cache="", use_cache=True)
    assert os.path.exists(m1 + ".cache")
    s2, err, m2 = run([data], tmp_path, passes=1, model="a.lt", cache="", use_cache=True)
    assert "reading examples from the cache" in err
    s3, err, m3 = run([data], tmp_path, passes=1, model="b.lt", bits=15, cache=m1 + ".cache", use_cache=True)
    assert "bits 16 -> 15" in err
    assert s1["average_loss"] == s2["average_loss"]


def _slots(learner, h: int) -> np.ndarray:
    mask = (1 << learner.bits) - 1
    m = np.arange(learner.n_models, dtype=np.int64)
    if learner.mode == MODE_CPT:
        return (h + m * 0x9E3779B1) & mask
    return (h * learner.n_models + m) & mask


@pytest.mark.parametrize("red", ["oaa", "filter", "rtree", "lomtree", "cpt"])
def test_holdout_examples_are_never_learned(tmp_path, red):
    """Every 10th line carries a feature seen nowhere else: its slots must stay untouched."""
    data = make_data(tmp_path / "d.vw", n=400, secret_every=10)
    run([data], tmp_path, red, passes=4, early_terminate=10, bits=18)
    m = model_io.load_model(str(tmp_path / "m.lt"))
    lrn = m.learner
    others = set()
    for b in iter_batches([data], InputConfig(bits=18)):
        for i in np.flatnonzero(b.line_numbers % 10 != 0):
            others.update(b.indices[b.indptr[i]: b.indptr[i + 1]].tolist())
    # the secret hash: the feature of holdout lines that no training line has
    holdout_feats = set()
    for b in iter_batches([data], InputConfig(bits=18)):
        for i in np.flatnonzero(b.line_numbers % 10 == 0):
            holdout_feats.update(b.indices[b.indptr[i]: b.indptr[i + 1]].tolist())
    only = holdout_feats - others
    assert only, "test data: no holdout-only feature"
    used = np.concatenate([_slots(lrn, h) for h in others])
    table = lrn.arrays.table
    checked = 0
    for h in only:
        sl = np.setdiff1d(_slots(lrn, h), used)  # slots shared with trained features may move
        checked += sl.size
        assert not table[sl].any(), f"holdout-only feature {h} was learned"
    assert checked > 0
    # and the trained features were learned
    assert table[used].any()


def test_holdout_train_masks(tmp_path, monkeypatch):
    """Through the Python API: in every pass, exactly positions 10, 20, ... are not trained."""
    cls = reduction_or_skip("oaa")
    seen = []
    orig = cls.process

    def spy(self, batch, train):
        seen.append((batch.line_numbers.copy(), np.asarray(train).copy()))
        return orig(self, batch, train)

    monkeypatch.setattr(cls, "process", spy)
    data = make_data(tmp_path / "d.vw", n=95)
    s, _, _ = run([data], tmp_path, passes=3, holdout_period=7, early_terminate=10, chunk_bytes=700)
    lines = np.concatenate([x[0] for x in seen])
    train = np.concatenate([x[1] for x in seen])
    assert lines.shape[0] == 3 * 95
    assert np.array_equal(train, lines % 7 != 0)
    assert s["examples"] == 3 * (95 - 95 // 7)
    seen.clear()
    s, err, _ = run([data], tmp_path, passes=3, holdout_off=True)
    assert np.concatenate([x[1] for x in seen]).all()


def test_holdout_off_summary(tmp_path):
    data = make_data(tmp_path / "d.vw", n=200)
    s, err, _ = run([data], tmp_path, passes=3, holdout_off=True, report=str(tmp_path / "r.json"))
    assert s["holdout_loss"] is None and s["examples"] == 600 and s["passes"] == 3
    assert "number of examples per pass = 200\npasses used = 3\n" in err
    line = [x for x in err.splitlines() if x.startswith("average loss")][0]
    assert line == "average loss = %.6f" % s["average_loss"]
    assert not [x for x in err.splitlines() if x.endswith(" h")]
    assert json.load(open(tmp_path / "r.json"))["holdout_loss"] is None


def test_holdout_summary_and_table(tmp_path):
    data = make_data(tmp_path / "d.vw", n=200)
    s, err, _ = run([data], tmp_path, passes=3, early_terminate=10, report=str(tmp_path / "r.json"))
    assert s["examples"] == 3 * 180
    assert "number of examples per pass = 180\npasses used = 3\n" in err
    assert "average loss = %.6f h\n" % s["holdout_loss"] in err
    rows = [x for x in err.splitlines() if x[:1].isdigit() or x.startswith("n.a.")]
    assert rows and not rows[0].endswith(" h") and rows[-1].endswith(" h")
    assert json.load(open(tmp_path / "r.json"))["holdout_loss"] == s["holdout_loss"]
    # fewer examples than the period: no holdout loss at all
    tiny = make_data(tmp_path / "t.vw", n=5)
    s, err, _ = run([tiny], tmp_path, passes=3)
    assert s["holdout_loss"] is None and "average loss = undefined (no holdout)" in err


def test_early_termination_keeps_best_pass(tmp_path, monkeypatch):
    data = make_data(tmp_path / "d.vw")
    losses = iter([0.5, 0.3, 0.4, 0.35, 0.2, 0.1])
    real_end = Progress.end_pass

    def scripted(self):
        real_end(self)
        return next(losses)

    monkeypatch.setattr(Progress, "end_pass", scripted)
    s, err, m = run([data], tmp_path, passes=10, early_terminate=2, model="early.lt")
    assert s["passes"] == 4 and s["best_pass"] == 2 and s["holdout_loss"] == 0.3
    assert s["holdout_losses"] == [0.5, 0.3, 0.4, 0.35]  # every completed pass, in order (report field)
    assert "early stopping after pass 4" in err and "keeping pass 2" in err
    monkeypatch.undo()
    s2, _, m2 = run([data], tmp_path, passes=2, model="two.lt")
    assert_same_model(m, m2)
    assert model_io.load_model(m).passes_done == 2


def test_decay_learning_rate(tmp_path):
    data = make_data(tmp_path / "d.vw", n=100)
    _, _, a = run([data], tmp_path, passes=3, holdout_off=True, decay=0.5, model="a.lt")
    assert model_io.load_model(a).learner.eta == pytest.approx(0.5 * 0.5 ** 3)
    # the decay applies after a pass: one pass is unaffected, the second is not
    _, _, b1 = run([data], tmp_path, passes=1, decay=0.5, model="b1.lt")
    _, _, c1 = run([data], tmp_path, passes=1, decay=1.0, model="c1.lt")
    wb, wc = model_arrays(b1)["learner/w"], model_arrays(c1)["learner/w"]
    assert np.array_equal(wb, wc)
    _, _, b2 = run([data], tmp_path, passes=2, holdout_off=True, decay=0.5, model="b2.lt")
    _, _, c2 = run([data], tmp_path, passes=2, holdout_off=True, decay=1.0, model="c2.lt")
    assert not np.array_equal(model_arrays(b2)["learner/w"], model_arrays(c2)["learner/w"])
    # decaying by 0.5 after pass 1 == resuming pass 2 from the pass-1 model with -l 0.25
    _, _, r = run([data], tmp_path, passes=1, holdout_off=True, decay=0.5, model="r1.lt")
    icfg = InputConfig(bits=16)
    opts = driver.RunOptions(inputs=[data], passes=1, err=io.StringIO())
    driver.train(icfg, None, None, opts, initial_model=r, final_model=str(tmp_path / "r2.lt"),
                 explicit={"learning_rate": 0.25, "decay_learning_rate": 0.5})
    assert np.array_equal(model_arrays(str(tmp_path / "r2.lt"))["learner/w"], model_arrays(b2)["learner/w"])


def test_cache_write_failure(tmp_path):
    data = make_data(tmp_path / "d.vw", n=100)
    bad = str(tmp_path / "no" / "such" / "dir" / "x.cache")
    s1, err, m1 = run([data], tmp_path, passes=3, model="a.lt", cache=bad, use_cache=True)
    assert "cannot write the example cache" in err
    s2, _, m2 = run([data], tmp_path, passes=3, model="b.lt")
    assert_same_model(m1, m2)


def _cli(args, stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "lomtree_cli.launch", *args], input=stdin, capture_output=True,
                          cwd=ROOT, env=env, timeout=120)


def test_stdin_with_passes_subprocess(tmp_path):
    data = make_data(tmp_path / "d.vw", n=300)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    raw = open(data, "rb").read()
    args = ["train", "-r", "oaa", "-k", "4", "-b", "16", "--passes", "4"]
    r = _cli([*args, "-f", str(tmp_path / "stdin.lt"), "-p", str(tmp_path / "stdin.p")], stdin=raw, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert b"passes used = 4" in r.stderr and b" h\n" in r.stderr
    assert os.listdir(tmpdir) == []  # the temporary cache is gone
    r = _cli([*args, data, "-f", str(tmp_path / "file.lt"), "-p", str(tmp_path / "file.p")], env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert_same_model(str(tmp_path / "stdin.lt"), str(tmp_path / "file.lt"))
    assert (tmp_path / "stdin.p").read_bytes() == (tmp_path / "file.p").read_bytes()
    # stdin when the cache cannot be written: a clear error, exit 2 (a cache in a missing
    # directory is now refused before any work)
    r = _cli([*args, "-c", str(tmp_path / "no" / "dir" / "c"), "--quiet"], stdin=raw, env=env)
    assert r.returncode == 2 and (b"cannot read standard input again" in r.stderr or
                                  b"no/dir does not exist" in r.stderr), r.stderr


def test_bad_pass_options(tmp_path):
    data = make_data(tmp_path / "d.vw", n=20)
    with pytest.raises(ConfigError):
        run([data], tmp_path, passes=0)
    with pytest.raises(ConfigError):
        run([data], tmp_path, passes=2, holdout_period=0)
    with pytest.raises(ConfigError):
        run([data], tmp_path, passes=2, early_terminate=0)
    assert math.isfinite(run([data], tmp_path, passes=2, holdout_period=0, holdout_off=True)[0]["average_loss"])
