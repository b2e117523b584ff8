"""Entropy criteria of ``lomtree inspect`` (lomtree_cli/entropy.py) against hand-computed numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli import entropy
from lomtree_cli.cli import main
from lomtree_cli.config import LearnerConfig, ReductionConfig
from lomtree_cli.learner import LinearLearner
from lomtree_cli.reductions import get_reduction_class

from .helpers import make_batch


def test_criteria_by_hand():
    # two leaves: counts (2, 2) and (4): w = 1/2 each; the first is 50/50, the second pure
    got = entropy.criteria([np.array([2.0, 2.0]), np.array([4.0])], C=1.0)
    assert got["shannon"] == pytest.approx(0.5 * math.log(2), abs=1e-6)
    assert got["gini"] == pytest.approx(0.25, abs=1e-6)
    assert got["modified_gini"] == pytest.approx(0.5 * 2 * math.sqrt(0.25))  # pure leaf: sqrt(1 * 0) = 0
    got = entropy.criteria([np.array([2.0, 2.0]), np.array([4.0])], C=2.0)
    assert got["modified_gini"] == pytest.approx(0.5 * 2 * math.sqrt(0.5 * 1.5) + 0.5 * 1.0, abs=1e-6)
    # (1, 3) and (0, 0, 4) with a zero count: w = 1/2 each
    got = entropy.criteria([np.array([1.0, 3.0]), np.array([0.0, 0.0, 4.0])])
    assert got["shannon"] == pytest.approx(0.5 * -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-6)
    assert got["gini"] == pytest.approx(0.5 * 2 * 0.25 * 0.75, abs=1e-6)
    assert entropy.criteria([]) == {"shannon": 0.0, "gini": 0.0, "modified_gini": 0.0}


def _reduction(name, k, **kw):
    cls = get_reduction_class(name)
    rcfg = ReductionConfig(name=name, k=k, **kw)
    return cls(rcfg, LinearLearner(LearnerConfig(), 10, cls.n_models_for(rcfg), cls.slot_mode))


def test_filter_tree_levels_by_hand():
    """k = 3: the bracket is ((1, 2), 3); labels seen 2, 1 and 3 times."""
    red = _reduction("filter", 3)
    st = red.state()
    assert st["parent"].tolist() == [3, 3, 4, 4, -1]
    labels = [1, 1, 2, 3, 3, 3]
    b = make_batch([[(5, 1.0)]] * len(labels), labels, bits=10)
    red.process(b, np.ones(len(labels), bool))
    rep = entropy.report(red)
    H = lambda *p: -sum(x * math.log(x) for x in p)  # noqa: E731
    root, lvl1 = rep["levels"][0], rep["levels"][1]
    assert root["shannon"] == pytest.approx(H(2 / 6, 1 / 6, 3 / 6), abs=1e-6)
    assert root["gini"] == pytest.approx(1 - (4 + 1 + 9) / 36, abs=1e-6)
    # depth 1: node (1, 2) with counts (2, 1), w = 1/2, and leaf 3, pure
    assert lvl1["cells"] == 2
    assert lvl1["shannon"] == pytest.approx(0.5 * H(2 / 3, 1 / 3), abs=1e-6)
    assert lvl1["gini"] == pytest.approx(0.5 * (1 - 4 / 9 - 1 / 9), abs=1e-6)
    assert lvl1["modified_gini"] == pytest.approx(0.5 * (math.sqrt(2 / 3 * 1 / 3) * 2), abs=1e-6)
    assert rep["tree"] == {"shannon": 0.0, "gini": 0.0, "modified_gini": 0.0}
    assert rep["examples"] == 6.0


def test_mtree_levels_by_hand():
    """k = 4, arity 2, depth 2; labels 1, 2 under one root child and 3, 4 under the other."""
    red = _reduction("mtree", 4, arity=2, depth=2, dim=3, reassign_after=0)
    red._set_digits(np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]], np.int64))
    red.label_n[:] = [0, 1, 3, 2, 2]
    rep = entropy.report(red)
    lvl1 = rep["levels"][1]
    assert lvl1["cells"] == 2
    want = 0.5 * -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) + 0.5 * math.log(2)
    assert lvl1["shannon"] == pytest.approx(want, abs=1e-6)
    assert lvl1["gini"] == pytest.approx(0.5 * 2 * 0.25 * 0.75 + 0.5 * 0.5, abs=1e-6)
    assert rep["levels"][2]["shannon"] == 0.0 and rep["levels"][2]["cells"] == 4


def test_inspect_reports_entropy_json(tmp_path):
    f = tmp_path / "d.vw"
    f.write_text("".join(f"{1 + i % 4} | a{i % 4} b{i % 3}\n" for i in range(60)))
    m = tmp_path / "m.lt"
    r = CliRunner().invoke(main, ["train", "-r", "lomtree", "-k", "4", str(f), "-f", str(m), "--quiet"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["inspect", str(m), "--json", "--gini-c", "2"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    ent = info["entropy"]
    assert ent["C"] == 2.0 and ent["levels"][0]["shannon"] == pytest.approx(math.log(4), rel=1e-3, abs=1e-6)
    assert ent["tree"]["shannon"] <= ent["levels"][0]["shannon"]
    r = CliRunner().invoke(main, ["inspect", str(m), "--gini-c", "0.5"])
    assert r.exit_code == 2 and "error: --gini-c" in r.stderr


def test_entropy_curve_budgets_and_correlations():
    from data_scripts import entropy_curve as ec

    assert ec.budgets(105) == [1, 2, 4, 8, 16, 32, 64, 104]
    assert ec.budgets(3) == [1, 2]
    rows = [{"test_error": e, "shannon": 2 * e, "gini": -e, "modified_gini": 1.0} for e in (0.1, 0.5, 0.7)]
    got = ec.correlations(rows)
    assert got["shannon"] == pytest.approx(1.0) and got["gini"] == pytest.approx(-1.0)
    assert got["modified_gini"] is None  # constant: no correlation
