"""scikit-learn's own conformance checks on ``lomtree_cli.Classifier``: ``check_estimator`` for
the reductions, the DataFrame column-name check, the three multi-label checks, and the scorers
and meta-estimators that read ``predict_proba``'s name or the multi-label output."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from lomtree_cli import Classifier  # noqa: E402

#: every reduction but the label-frequency baseline ``table``, which by design fails the
#: accuracy of check_classifiers_train (it predicts the most frequent label whatever x)
REDUCTIONS = ("lomtree", "plt", "oaa", "filter", "cpt", "rtree", "mtree")


@parametrize_with_checks([Classifier(reduction=r, bits=16) for r in REDUCTIONS],
                         expected_failed_checks=lambda est: est.EXPECTED_FAILED_CHECKS)
def test_sklearn_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


MULTILABEL_CHECKS = ("check_classifiers_multilabel_representation_invariance",
                     "check_classifiers_multilabel_output_format_predict",
                     "check_classifiers_multilabel_output_format_predict_proba",
                     "check_dataframe_column_names_consistency")


@pytest.mark.parametrize("reduction", ("plt", "oaa"))
@pytest.mark.parametrize("name", MULTILABEL_CHECKS)
def test_sklearn_multilabel_checks(reduction, name):
    pytest.importorskip("pandas")
    from sklearn.utils import estimator_checks

    est = Classifier(reduction=reduction, multilabel=True, bits=16)
    if name == "check_dataframe_column_names_consistency":
        est.set_params(multilabel=False)
    getattr(estimator_checks, name)(type(est).__name__, est)


def test_predict_proba_is_a_method_only_with_probabilities():
    """scikit-learn reads the method's name and presence: a real method where the reduction has
    probabilities, none (``hasattr`` False) where it has not, before and after fitting."""
    X = np.array([[1.0, 0.0], [0.0, 1.0]] * 10)
    y = np.array([1, 2] * 10)
    for r, has in (("oaa", True), ("plt", True), ("cpt", True), ("lomtree", False), ("filter", False)):
        c = Classifier(reduction=r, bits=16)
        assert hasattr(c, "predict_proba") is has
        c.fit(X, y)
        assert hasattr(c, "predict_proba") is has
        if has:
            assert c.predict_proba.__name__ == "predict_proba"


def test_scorers_and_meta_estimators():
    """The binary ``roc_auc`` scorer is a number (it was nan when predict_proba was a property),
    ``f1_micro`` on an indicator matrix too; stacking and calibration run."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_breast_cancer, make_multilabel_classification
    from sklearn.ensemble import StackingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    clf = make_pipeline(StandardScaler(), Classifier(reduction="oaa", bits=16, passes=3))
    auc = cross_val_score(clf, X, y, scoring="roc_auc", cv=3)
    assert np.isfinite(auc).all() and auc.mean() > 0.9, auc
    CalibratedClassifierCV(clf, cv=3).fit(X, y).predict_proba(X[:5])
    StackingClassifier([("lt", clf)], final_estimator=LogisticRegression(), cv=3).fit(X, y).predict(X[:5])
    X, Y = make_multilabel_classification(n_samples=300, n_features=20, n_classes=5, random_state=0)
    f1 = cross_val_score(Classifier(reduction="oaa", multilabel=True, bits=16, passes=3), X, Y, scoring="f1_micro", cv=3)
    assert np.isfinite(f1).all() and f1.mean() > 0.3, f1


def test_sample_weight_routing():
    """A BaseEstimator: metadata routing of ``sample_weight`` reaches ``fit``."""
    import sklearn
    from sklearn.model_selection import cross_validate

    X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20)
    y = np.array([1, 2] * 20)
    with sklearn.config_context(enable_metadata_routing=True):
        est = Classifier(reduction="oaa", bits=16).set_fit_request(sample_weight=True).set_score_request(sample_weight=False)
        cross_validate(est, X, y, cv=2, params={"sample_weight": np.ones(40)})
