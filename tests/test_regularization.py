"""``--l1`` / ``--l2``: every reduction on the linear learner, the model file,
the command line and the API. The update kernels against the pure-Python reference, with and
without regularisation, are in ``test_linear.py`` (``REGS``)."""

import hashlib

import numpy as np
import pytest

from lomtree_cli import model_io
from lomtree_cli.config import LearnerConfig, from_dict
from lomtree_cli.kernels import linear as K
from lomtree_cli.reductions.registry import REGISTRY
from tests.helpers import separable_lines
from tests.test_cli import run

#: reductions whose linear learner's weights --l1/--l2 regularise (mtree: its embeddings and node
#: layers, tested apart; the others refuse them)
LINEAR = [r for r, spec in REGISTRY.items() if not spec.no_regularization and r != "mtree"]
K_CLASSES = 8

#: sha256 (first 16 hex digits) of the weight table (w, G, N bits), S, T and the reduction's state of the model that
#: ``_train(tmp, r)`` writes: the weights as the code before --l1/--l2 existed made them (c00926f),
#: taken with the state at b57c717 (before mtree took them): at 0 the models stay bit for bit
BEFORE = {
    "oaa": "b5e7e546d5eb97fa",
    "lomtree": "ab3f76fbb06b06bb",  # the defaults of -l 0.25 --candidates-up 3 and the prior
    "filter": "b37b1cbaf608c768",
    "rtree": "19a39409e951c74c",
    "cpt": "ffce86d5351c5f06",
    "plt": "73c1f91deb0bf1ff",
    "mtree": "7980066676e946c7",  # main at b57c717, before mtree took --l1/--l2
}


def noisy_lines(n: int, seed: int) -> list[str]:
    """Class c has the feature `c<c>` (value 1) and 6 features of a 3,000-word vocabulary (most seen
    once or twice) with value 0.1: ``--l1`` zeroes the noise weights, the class weights stay."""
    return separable_lines(K_CLASSES, n, seed=seed, noise_feats=6, vocab=3000, noise_value=0.1, noise_name="r")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("reg")
    (d / "train.vw").write_text("\n".join(noisy_lines(400, seed=3)) + "\n")
    return d


def _train(d, reduction, *opts, name="m.lt"):
    """Train ``reduction`` on the module's data (in process) and load the model back."""
    from lomtree_cli.cli import main

    model = str(d / f"{reduction}-{name}")
    args = ["train", "-r", reduction, "-k", str(K_CLASSES), "-b", "12", "--seed", "5", "--quiet",
            str(d / "train.vw"), "-f", model, *opts]
    try:
        main(args)
    except SystemExit as e:
        assert e.code in (0, None)
    return model_io.load_model(model)


def fingerprint(loaded) -> str:
    a = loaded.learner.arrays
    h = hashlib.sha256()
    state = loaded.reduction.state()
    for x in (a.table, a.S, a.T, *(state[name] for name in sorted(state))):
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()[:16]


def weights(loaded) -> np.ndarray:
    return loaded.learner.arrays.table[:, 0].astype(np.float64)


#: options that give a reduction's model of BEFORE under later defaults (mtree: the arity and the
#: root's linear weights of b57c717; an empty array adds nothing to the fingerprint)
THEN = {"mtree": ("--arity", "32", "--linear", "0")}


#: mtree's dot products are compiled with fastmath reassociation, whose vector width follows the
#: CPU: BEFORE's mtree fingerprint holds on the CPU where it was taken only (an AMD EPYC, znver3,
#: gives another), so there the zero-regularisation model is compared with the plain one alone.
CPU_DEPENDENT = {"mtree"}


@pytest.mark.parametrize("reduction", LINEAR + ["mtree"])
def test_zero_regularization_keeps_the_model_bit_for_bit(data, reduction):
    then = THEN.get(reduction, ())
    plain = fingerprint(_train(data, reduction, *then))
    if reduction not in CPU_DEPENDENT and reduction in BEFORE:  # (entries newer than --l1/--l2: no "before")
        assert plain == BEFORE[reduction]
    assert fingerprint(_train(data, reduction, *then, "--l1", "0", "--l2", "0", name="z.lt")) == plain


@pytest.mark.parametrize("reduction", [r for r in LINEAR if not REGISTRY[r].real_labels])
def test_l1_drives_weights_to_exactly_zero(data, reduction):
    """(the real-label entries would regress on the class ids 1..8 here: test_scalar.py has theirs)"""
    w0 = weights(_train(data, reduction))
    w1 = weights(_train(data, reduction, "--l1", "0.1", name="l1.lt"))
    n0, n1 = np.count_nonzero(w0), np.count_nonzero(w1)
    assert n1 < 0.5 * n0, (n0, n1)
    # a weight driven to zero is exactly 0.0 (positive zero: the model stores it sparsely)
    assert not np.any(np.signbit(w1[w1 == 0.0]))


@pytest.mark.parametrize("reduction", LINEAR)
def test_l2_shrinks_the_weight_norm(data, reduction):
    w0 = weights(_train(data, reduction))
    w2 = weights(_train(data, reduction, "--l2", "0.5", name="l2.lt"))
    assert np.linalg.norm(w2) < 0.9 * np.linalg.norm(w0)


def test_mtree_l1_zeroes_and_l2_shrinks_the_trained_parameters(data):
    def trained(*opts, name):
        red = _train(data, "mtree", "--dim", "8", *opts, name=name).reduction
        rows = np.flatnonzero(red.touched)
        return red.E[rows].astype(np.float64), red.W.astype(np.float64)

    E0, W0 = trained(name="m0.lt")
    E1, W1 = trained("--l1", "0.2", name="m1.lt")
    E2, W2 = trained("--l2", "0.5", name="m2.lt")
    assert E0.shape == E1.shape and W0.shape == W1.shape
    assert np.count_nonzero(E1) < 0.5 * np.count_nonzero(E0)
    assert np.count_nonzero(W1) < 0.5 * np.count_nonzero(W0)
    assert np.linalg.norm(E2) < 0.9 * np.linalg.norm(E0) and np.linalg.norm(W2) < 0.9 * np.linalg.norm(W0)


def test_model_keeps_l1_l2_and_continued_training_uses_them(data, tmp_path):
    whole = tmp_path / "whole.vw"
    lines = (data / "train.vw").read_text().splitlines()
    (tmp_path / "a.vw").write_text("\n".join(lines[:200]) + "\n")
    (tmp_path / "b.vw").write_text("\n".join(lines[200:]) + "\n")
    whole.write_text("\n".join(lines) + "\n")
    common = ["-r", "oaa", "-k", str(K_CLASSES), "-b", "12", "--quiet"]
    run(["train", *common, str(tmp_path / "a.vw"), "-f", str(tmp_path / "a.lt"), "--l1", "0.01", "--l2", "0.02"],
        check=0)
    loaded = model_io.load_model(str(tmp_path / "a.lt"))
    assert (loaded.learner.config.l1, loaded.learner.config.l2) == (0.01, 0.02)
    assert (loaded.learner.arrays.hp[K.HP_L1], loaded.learner.arrays.hp[K.HP_L2]) == (0.01, 0.02)
    info = model_io.inspect_model(str(tmp_path / "a.lt"))
    assert (info["l1"], info["l2"]) == (0.01, 0.02)
    _train(data, "oaa")
    assert "l1" not in model_io.inspect_model(str(data / "oaa-m.lt"))  # shown when set
    # -i continues with the model's l1, l2: the same weights as one uninterrupted run
    run(["train", str(tmp_path / "b.vw"), "-i", str(tmp_path / "a.lt"), "-f", str(tmp_path / "ab.lt"), "--quiet"],
        check=0)
    run(["train", *common, str(whole), "-f", str(tmp_path / "one.lt"), "--l1", "0.01", "--l2", "0.02"], check=0)
    ab, one = model_io.load_model(str(tmp_path / "ab.lt")), model_io.load_model(str(tmp_path / "one.lt"))
    assert (ab.learner.config.l1, ab.learner.config.l2) == (0.01, 0.02)
    np.testing.assert_array_equal(ab.learner.arrays.table, one.learner.arrays.table)
    # given next to -i they replace the model's values (as -l does)
    run(["train", str(tmp_path / "b.vw"), "-i", str(tmp_path / "a.lt"), "-f", str(tmp_path / "c.lt"), "--quiet",
         "--l1", "0"], check=0)
    c = model_io.load_model(str(tmp_path / "c.lt"))
    assert (c.learner.config.l1, c.learner.config.l2) == (0.0, 0.02)
    assert not np.array_equal(c.learner.arrays.table, ab.learner.arrays.table)


def test_older_model_headers_read_as_zero():
    cfg = from_dict(LearnerConfig, {"loss": "squared", "power_t": 0.5})  # a header before --l1/--l2
    assert (cfg.l1, cfg.l2) == (0.0, 0.0)
    hp = K.make_hp(cfg, 10, 3, K.MODE_STRIDE)
    assert hp[K.HP_L1] == 0.0 and hp[K.HP_L2] == 0.0


@pytest.mark.parametrize("opts, msg", [
    (["--l1", "-1"], "--l1 must be a finite number >= 0, got -1.0"),
    (["--l2", "nan"], "--l2 must be a finite number >= 0, got nan"),
    (["--l1", "inf"], "--l1 must be a finite number >= 0, got inf"),
    (["--l2", "-0.5", "-r", "cpt"], "--l2 must be a finite number >= 0, got -0.5"),
    (["--l2", "0.1", "-r", "table"], "--l1/--l2 do not apply to --reduction table"),
])
def test_bad_values_are_one_line_errors(data, opts, msg):
    p = run(["train", "-k", str(K_CLASSES), str(data / "train.vw"), *opts])
    assert p.returncode == 2
    assert msg in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_bad_value_next_to_initial_model(data, tmp_path):
    run(["train", "-r", "oaa", "-k", str(K_CLASSES), str(data / "train.vw"), "-f", str(tmp_path / "m.lt"),
         "--quiet"], check=0)
    p = run(["train", str(data / "train.vw"), "-i", str(tmp_path / "m.lt"), "--l2", "-1"])
    assert p.returncode == 2 and "--l2 must be a finite number >= 0" in p.stderr and "Traceback" not in p.stderr


def test_preamble_reports_them(data):
    p = run(["train", "-r", "oaa", "-k", str(K_CLASSES), str(data / "train.vw"), "--l1", "0.001", "--l2", "0.5"],
            check=0)
    assert "using l1 regularization = 0.001" in p.stderr
    assert "using l2 regularization = 0.5" in p.stderr
    p = run(["train", "-r", "oaa", "-k", str(K_CLASSES), str(data / "train.vw")], check=0)
    assert "regularization" not in p.stderr


def test_api_takes_l1_l2(tmp_path):
    from lomtree_cli.api import Classifier

    lines = noisy_lines(300, seed=4)
    plain = Classifier(reduction="oaa", classes=K_CLASSES, bits=12).fit(lines)
    reg = Classifier(reduction="oaa", classes=K_CLASSES, bits=12, l1=0.1).fit(lines)
    assert reg.get_params()["l1"] == 0.1 and plain.get_params()["l2"] == 0.0
    assert np.count_nonzero(reg._model.base.arrays.table[:, 0]) < np.count_nonzero(plain._model.base.arrays.table[:, 0])
    reg.save(str(tmp_path / "m.lt"))
    back = Classifier.load(str(tmp_path / "m.lt"))
    assert (back.l1, back.l2) == (0.1, 0.0)
    with pytest.raises(ValueError, match="--l1 must be a finite number >= 0"):
        Classifier(reduction="oaa", classes=K_CLASSES, l1=-1.0).fit(lines)
