"""River's own conformance checks (``river.checks.yield_checks``) on ``lomtree_cli.river``'s two
classes with open label sets (``classes=None``), and their use in River's evaluation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

river = pytest.importorskip("river")

from river import checks, datasets, evaluate, metrics, preprocessing  # noqa: E402

from lomtree_cli.river import Classifier, MultiLabelClassifier  # noqa: E402


def _small_datasets(model, scale=1):
    """River's datasets for the checks, shorter (the machine is small), and for label sets the
    bundled Yeast in place of Music, which River downloads."""
    from river import base

    if isinstance(model, base.MultiLabelClassifier):
        yield datasets.Yeast().take(40 * scale)
        return
    yield datasets.Phishing().take(40 * scale)
    yield ((x, np.bool_(y)) for x, y in datasets.Phishing().take(40 * scale))
    yield datasets.ImageSegments().take(50 * scale)


def _checks(models):
    """(model, check) of River's checks, their datasets ours (``_small_datasets``): the checks
    bind them when they are made."""
    out = []
    keep = checks._yield_datasets
    checks._yield_datasets = _small_datasets
    try:
        for model in models:
            label = f"{type(model).__name__}-{model.reduction}"
            for i, check in enumerate(checks.yield_checks(model)):
                name = getattr(check, "__name__", str(i))
                out.append(pytest.param(model, check, id=f"{label}-{name}-{i}"))
    finally:
        checks._yield_datasets = keep
    return out


MODELS = [Classifier(bits=16), Classifier(reduction="plt", bits=16), Classifier(reduction="oaa", bits=16),
          Classifier(reduction="cpt", bits=16), MultiLabelClassifier(bits=16),
          MultiLabelClassifier(reduction="oaa", bits=16)]


@pytest.mark.parametrize("model, check", _checks(MODELS))
def test_river_checks(model, check):
    check(model.clone())


def test_the_checks_ran_on_datasets():
    """The parametrisation above holds the dataset checks (not only the general ones)."""
    names = {getattr(c, "__name__", "") for c in checks.yield_checks(Classifier())}
    assert {"check_learn_one", "check_predict_proba_one", "check_classifier_tracks_seen_labels"} <= names


@pytest.mark.parametrize("reduction", ("oaa", "plt", "cpt", "lomtree"))
def test_progressive_validation_with_a_scaler(reduction):
    """River's progressive validation through a ``StandardScaler`` pipeline learns the seven
    classes of ImageSegments as they come, well above the majority class (14%)."""
    model = preprocessing.StandardScaler() | Classifier(reduction=reduction)
    acc = evaluate.progressive_val_score(datasets.ImageSegments().take(600), model, metrics.Accuracy()).get()
    assert acc > (0.6 if reduction != "plt" else 0.3), acc


def test_open_labels_and_fixed_reductions():
    """A label never seen is learned at its first example; the Filter tree refuses an open set
    at the first call, with the way out."""
    m = Classifier(reduction="oaa")
    for _ in range(30):
        m.learn_one({"a": 1.0}, "x")
        m.learn_one({"b": 1.0}, "y")
    assert m.predict_one({"a": 1.0}) == "x"
    for _ in range(30):
        m.learn_one({"c": 1.0}, "z")
    assert m.predict_one({"c": 1.0}) == "z" and m.predict_one({"b": 1.0}) == "y"
    p = m.predict_proba_one({"c": 1.0})
    assert set(p) == {"x", "y", "z"} and abs(sum(p.values()) - 1) < 1e-9 and min(p.values()) > 0
    with pytest.raises(ValueError, match="fixed number of classes"):
        Classifier(reduction="filter").learn_one({"a": 1.0}, "x")
    f = Classifier(reduction="filter", classes=["x", "y"])
    f.learn_one({"a": 1.0}, "x")
    with pytest.raises(NotImplementedError):
        f.predict_proba_one({"a": 1.0})


def test_multilabel_dicts():
    m = MultiLabelClassifier(reduction="oaa")
    for _ in range(30):
        m.learn_one({"a": 1.0}, {"x": True, "y": False, "never": False})
        m.learn_one({"b": 1.0}, {"x": False, "y": True, "never": False})
    assert m.predict_one({"a": 1.0}) == {"x": True, "y": False, "never": False}
    p = m.predict_proba_one({"b": 1.0})
    assert p["y"][True] > 0.5 > p["x"][True] and all(0 < v[True] < 1 for v in p.values())


def test_compat_sklearn_wrapper_accepts_the_api_classifier():
    """``river.compat.convert_sklearn_to_river`` takes ``lomtree_cli.Classifier`` (a scikit-learn
    classifier with ``partial_fit``)."""
    from river import compat

    from lomtree_cli import Classifier as Api

    model = compat.convert_sklearn_to_river(Api(reduction="oaa", bits=16), classes=[False, True])
    for x, y in itertools.islice(datasets.Phishing(), 50):
        model.learn_one(x, y)
    assert model.predict_one(x) in (False, True)


def test_bench_river_runs(tmp_path):
    """data_scripts/bench_river.py on short streams: every model's accuracy and costs."""
    import json

    from data_scripts import bench_river

    out = tmp_path / "river.json"
    bench_river.main(["--rbf-n", "150", "--segments-n", "150", "--reductions", "oaa,plt", "--repeats", "1",
                      "--keys-n", "200", "--out", str(out)])
    r = json.loads(out.read_text())
    assert set(r["streams"]) == {"ImageSegments", "RandomRBF-150"}
    for rows in r["streams"].values():
        assert set(rows) == {"lomtree oaa", "lomtree oaa -q pairs", "lomtree plt", "River OvR LogisticRegression",
                             "River HoeffdingTree"}
        assert all(0 <= v["accuracy"] <= 100 and v["learn_one_us"] > 0 for v in rows.values())
    assert set(r["keys"]) == {"str", "int"}
