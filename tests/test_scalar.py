"""-r regression and -r binary (reductions/scalar.py) and VW's update flags (kernels/linear.py
``_update_rule``): against the pure-Python reference (tests/reference/scalar_ref.py) on
hypothesis streams, against VW itself when ``vowpalwabbit`` is installed, and through the
command line (the default reduction, VW's summary lines, prediction format, bad labels)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig, to_dict
from lomtree_cli.core import Learner
from lomtree_cli.reductions.scalar import best_constant
from tests.helpers import cli, one_error
from tests.reference.scalar_ref import RefScalar

LOSSES = ("squared", "classic", "logistic", "hinge", "quantile", "poisson")
RULES = [(a, n, i) for a in (False, True) for n in (False, True) for i in (False, True)]

examples = st.lists(st.tuples(
    st.lists(st.tuples(st.integers(0, 40), st.floats(-3, 3).filter(lambda v: abs(v) > 1e-3)), min_size=0, max_size=5),
    st.sampled_from([-1.0, 1.0, 0.0, 0.5, 2.0, 3.25]),
    st.sampled_from([1.0, 1.0, 0.5, 2.0, 0.0]),
    st.booleans()), min_size=1, max_size=25)


def _batch(exs, binary):
    feats = [sorted(dict(f).items()) for f, *_ in exs]  # one value per feature id
    indptr = np.cumsum([0] + [len(f) for f in feats]).astype(np.int64)
    real = np.array([(1.0 if y > 0 else -1.0) if binary else y for _, y, _, _ in exs])
    b = ExampleBatch(labels=np.ones(len(exs), np.int64), weights=np.array([w for *_, w, _ in exs]), indptr=indptr,
                     indices=np.array([h for f in feats for h, _ in f], dtype=np.int64),
                     values=np.array([v for f in feats for _, v in f], dtype=np.float32),
                     line_numbers=np.arange(1, len(exs) + 1, dtype=np.int64), real=real)
    return b, feats


@settings(max_examples=60, deadline=None)
@given(exs=examples, loss=st.sampled_from(LOSSES), rule=st.sampled_from(RULES), power_t=st.sampled_from([0.5, 0.3]),
       binary=st.booleans(), initial_t=st.sampled_from([None, 2.0]),
       link=st.sampled_from(["identity", "logistic", "glf1"]))
def test_kernel_matches_reference(exs, loss, rule, power_t, binary, initial_t, link):
    if loss == "poisson":
        binary = False
        exs = [(f, abs(y), w, t) for f, y, w, t in exs]
    a, n, i = rule
    sgd = rule == (False, False, False)
    lcfg = LearnerConfig(loss=loss, power_t=power_t, initial_t=initial_t, link=link,
                         **({"sgd": True} if sgd else dict(adaptive=a, normalized=n, invariant=i)))
    model = Learner.new(InputConfig(bits=6), lcfg, ReductionConfig(name="binary" if binary else "regression"))
    batch, feats = _batch(exs, binary)
    train = np.array([t and w > 0 for *_, w, t in exs])
    preds, losses = model.process(batch, train)
    ref = RefScalar(loss, a, n, i, power_t=power_t, initial_t=initial_t, binary=binary, link=link)
    for j, (f, (_, _, w, _)) in enumerate(zip(feats, exs)):
        p, lv = ref.step([(h, float(np.float32(v))) for h, v in f], float(batch.real[j]), w, bool(train[j]))
        assert preds[j] == pytest.approx(p, rel=1e-6, abs=1e-9), (j, preds[j], p)
        assert losses[j] == pytest.approx(lv, rel=1e-6, abs=1e-9), (j, losses[j], lv)


def test_default_flags_are_the_default_update():
    """Naming all three flags is the default update: the same predictions bit for bit."""
    rng = np.random.default_rng(1)
    exs = [([(int(h), float(v)) for h, v in zip(rng.integers(0, 50, 4), rng.normal(size=4))], float(rng.normal()),
            1.0, True) for _ in range(200)]
    batch, _ = _batch(exs, False)
    train = np.ones(len(exs), bool)
    out = []
    for lc in (LearnerConfig(), LearnerConfig(adaptive=True, normalized=True, invariant=True)):
        out.append(Learner.new(InputConfig(bits=8), lc, ReductionConfig(name="regression")).process(batch, train)[0])
    assert out[0].tobytes() == out[1].tobytes()


def test_config_defaults_per_flags():
    """VW's defaults: eta 10 and initial_t 1 where the update is neither adaptive nor normalized."""
    assert (LearnerConfig().eta, LearnerConfig().t0) == (0.5, 0.0)
    assert (LearnerConfig(adaptive=False, normalized=False).eta, LearnerConfig(adaptive=False, normalized=False).t0) == (10.0, 1.0)
    assert (LearnerConfig(normalized=False, invariant=False).eta, LearnerConfig(normalized=False).t0) == (10.0, 0.0)
    assert LearnerConfig(adaptive=False, normalized=False).plain_table and not LearnerConfig(normalized=False).plain_table


def test_model_headers_of_existing_options_unchanged():
    """The new fields are written only when set: an existing model's header keys stay as they were."""
    assert set(to_dict(LearnerConfig())) == {"learning_rate", "power_t", "initial_t", "loss", "quantile_tau", "sgd",
                                             "decay_learning_rate", "l1", "l2", "average", "solver", "cost",
                                             "dual_memory"}
    assert "real_labels" not in to_dict(InputConfig()) and to_dict(InputConfig(real_labels=True))["real_labels"]
    assert to_dict(LearnerConfig(link="logistic"))["link"] == "logistic"


def test_best_constant_as_vw():
    """VW's best constants on hand-worked label counts: 3 x (-1) and 1 x 1, weights 1."""
    stats = np.array([-2.0, 4.0, -1.0, 1.0, 0.0])
    assert best_constant("squared", 0.5, stats, -1, 1) == (-0.5, pytest.approx(0.75))
    b, bl = best_constant("logistic", 0.5, stats, -1, 1)
    assert b == pytest.approx(math.log(1 / 3)) and bl == pytest.approx(
        (3 * math.log1p(math.exp(b)) + math.log1p(math.exp(-b))) / 4)
    assert best_constant("hinge", 0.5, stats, -1, 1) == (-1.0, pytest.approx(0.5))
    assert best_constant("quantile", 0.5, stats, -1, 1) == (-1.0, pytest.approx(0.25))
    assert best_constant("squared", 0.5, np.array([1.0, 2.0, 0.0, 1.0, 1.0]), 0, 2)[1] is None  # 3 labels: no loss
    assert best_constant("poisson", 0.5, stats, -1, 1) is None


def _vw_file(tmp_path, n=400, seed=0, binary=False):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=20)
    lines = []
    for _ in range(n):
        idx = rng.choice(20, 5, replace=False)
        val = rng.uniform(0.1, 1.0, 5)
        y = float(val @ w[idx]) + 0.1 * rng.normal()
        lab = ("1" if y > 0 else "-1") if binary else f"{y:.4f}"
        lines.append(lab + " | " + " ".join(f"f{i}:{v:.4f}" for i, v in zip(idx, val)))
    p = tmp_path / ("b.vw" if binary else "r.vw")
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_cli_default_is_regression(tmp_path):
    """No -r, no -k: VW's default learner, VW's summary lines and -p format; with -k: lomtree's default."""
    f = _vw_file(tmp_path)
    code, out, err = cli("train", f, "-p", "-", "--report", tmp_path / "r.json")
    assert code == 0, err
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["reduction"] == "regression" and "best_constant" in rep
    assert "weighted label sum = " in err and "best constant = " in err and "average 0/1 loss" not in err
    first = out.splitlines()[0]
    assert first == "0"  # VW's first prediction: the range of labels is [0, y] before any weight moves
    assert all(ln == "0" or "." in ln and len(ln.split(".")[1]) == 6 for ln in out.splitlines())
    assert "0.0000" in err  # the table's label/predict columns with 4 decimals
    code, _, err = cli("train", "-r", "lomtree", f)
    assert "needs -k" in one_error(code, err, 2)


def test_cli_binary_labels(tmp_path):
    """-r binary: -1/1 predictions and 0/1 loss; another label is learned as it is with its base
    loss and one warning (VW's --binary goes on after its error message)."""
    f = _vw_file(tmp_path)
    code, _, err = cli("train", "--binary", f)
    assert code == 0 and err.count("is not -1 or 1 (-r binary)") == 1, err
    b = _vw_file(tmp_path, binary=True)
    code, out, err = cli("train", "-r", "binary", b, "--loss_function", "logistic", "-p", "-", "-f", tmp_path / "m")
    assert code == 0, err
    assert set(out.split()) <= {"1", "-1"}
    code, out, err = cli("predict", "-i", tmp_path / "m", b, "-p", "-")
    assert code == 0 and set(out.split()) <= {"1", "-1"} and "average loss = " in err


def test_bad_real_label_is_one_line(tmp_path):
    p = tmp_path / "bad.vw"
    p.write_text("1 | a\nx1 | b\n")
    assert one_error(*cli("train", p)[::2], 1) == f"error: {p}:2: label 'x1' is not a finite number"


def test_vw_agrees(tmp_path):
    """VW itself (in-process) on the same files and options: average loss and every prediction."""
    vw = pytest.importorskip("vowpalwabbit")
    import re

    reg, binf = _vw_file(tmp_path), _vw_file(tmp_path, binary=True)
    cases = [(reg, ""), (reg, "--invariant"), (reg, "--normalized --invariant"), (reg, "--loss_function classic"),
             (reg, "--loss_function quantile --quantile_tau 0.3"), (reg, "--power_t 0.3 --normalized -l 1"),
             (binf, "--binary --loss_function logistic"), (binf, "--loss_function hinge --adaptive --invariant"),
             (reg, "--link glf1 --sgd -l 0.5")]
    for f, opts in cases:
        ws = vw.Workspace(f"-d {f} -p {tmp_path / 'vw.p'} {opts}", enable_logging=True)
        ws.finish()
        want = float(re.search(r"average loss = (\S+)", "\n".join(ws.get_log())).group(1))
        code, _, err = cli("train", f, "-p", tmp_path / "lt.p", *opts.split())
        assert code == 0, err
        got = float(re.search(r"average loss = (\S+)", err).group(1))
        assert got == pytest.approx(want, rel=1e-3, abs=1e-6), opts
        a = np.loadtxt(tmp_path / "vw.p")
        b = np.loadtxt(tmp_path / "lt.p")
        assert np.allclose(a, b, atol=5e-3), (opts, np.abs(a - b).max())


def test_regressor_api(tmp_path):
    from lomtree_cli import BinaryClassifier, Classifier, Regressor

    rng = np.random.default_rng(0)
    X = rng.random((300, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 3.0])
    r = Regressor(passes=3).fit(X, y)
    assert r.score(X, y) > 0.9
    r.save(tmp_path / "r.lt")
    again = Classifier.load(tmp_path / "r.lt")
    assert type(again) is Regressor and np.array_equal(again.predict(X), r.predict(X))
    # the API's text lines and the command line's file: the same predictions
    f = tmp_path / "t.vw"
    f.write_text("".join(f"{v:.3f} | a:{x[0]:.3f} b:{x[1]:.3f}\n" for v, x in zip(y, X)))
    code, out, _ = cli("train", f, "-p", "-", "--quiet")
    api = Regressor()
    api.partial_fit(f.read_text().splitlines())
    lines = f.read_text().splitlines()
    assert code == 0 and np.allclose(api.predict(lines), Regressor().fit(lines).predict(lines))
    yb = np.where(y > np.median(y), 1, -1)
    b = BinaryClassifier(loss_function="logistic", passes=2).fit(X, yb)
    assert set(b.predict(X).tolist()) <= {-1, 1} and b.score(X, yb) > 0.8
    s = Regressor()
    for x, v in zip(X[:50], y[:50]):
        s.learn_one({"a": x[0], "b": x[1]}, v)
    assert isinstance(s.predict_one({"a": 0.5, "b": 0.5}), float)
    with pytest.raises(ValueError):
        BinaryClassifier().fit(X, y)  # real labels are not -1/1


def test_l1_zeroes_the_noise_weights_of_binary(tmp_path):
    """--l1 under -r binary: the noise features' weights go to exactly 0, the signal's stay."""
    rng = np.random.default_rng(4)
    lines = []
    for _ in range(400):
        y = 1 if rng.random() < 0.5 else -1
        noise = " ".join(f"r{int(v)}:0.1" for v in rng.integers(0, 3000, 6))
        lines.append(f"{y} | {'pos' if y > 0 else 'neg'} {noise}")
    f = tmp_path / "n.vw"
    f.write_text("\n".join(lines) + "\n")
    from lomtree_cli import model_io

    nz = []
    for opts in ([], ["--l1", "0.1"]):
        code, _, err = cli("train", "-r", "binary", f, "-b", "12", "-f", tmp_path / "m.lt", "--quiet", *opts)
        assert code == 0, err
        w = model_io.load_model(str(tmp_path / "m.lt")).learner.arrays.table[:, 0]
        nz.append(np.count_nonzero(w))
    assert nz[1] < 0.5 * nz[0] and nz[1] >= 2, nz
