"""Rtree (`-r rtree`): SplitMix64 / Fisher–Yates vectors, training rule, kernel vs reference,
seeds, model files, CLI (docs/ALGORITHMS.md §3.3, §5, §9)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import model_io
from lomtree_cli.cli import main
from lomtree_cli.config import InputConfig
from lomtree_cli.kernels.trees import fisher_yates_permutation, permutation_from_seed, splitmix64_next
from lomtree_cli.reductions.random_tree import RandomTree
from tests.reference.linear_ref import RefLinear
from tests.reference.trees_ref import RefRandomTree, make_batch, permutation, splitmix64
from tests.test_filter_tree import BITS, HA, HC, W1, _vw_lines, make_tree, run_both, separable, streams, w_of


def rtree(k, bits=BITS, loss="squared", seed=0, lr=None):
    return make_tree(k, bits, loss, lr=lr, cls=RandomTree, seed=seed)


def test_splitmix64_vectors():
    s = np.zeros(1, dtype=np.uint64)
    out = [int(splitmix64_next(s)) for _ in range(3)]
    assert out == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    st_ = 0
    for want in out:
        st_, got = splitmix64(st_)
        assert got == want
    assert int(s[0]) == st_


def test_permutation_vectors():
    assert permutation_from_seed(5, 0).tolist() == [3, 4, 2, 5, 1]
    assert permutation_from_seed(10, 0).tolist() == [7, 4, 3, 10, 9, 2, 5, 8, 1, 6]
    assert permutation_from_seed(1, 0).tolist() == [1]


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**64 - 1])
def test_permutation_matches_reference_and_advances_state(seed):
    s = np.array([seed], dtype=np.uint64)
    p = fisher_yates_permutation(np.int64(50), s)
    assert p.tolist() == permutation(50, seed)
    assert sorted(p.tolist()) == list(range(1, 51))
    assert int(s[0]) == (seed + 49 * 0x9E3779B97F4A7C15) % 2**64


def test_seeds_change_the_permutation():
    perms = {tuple(rtree(30, seed=s).tree.perm.tolist()) for s in range(5)}
    assert len(perms) == 5
    assert rtree(30, seed=3).tree.perm.tolist() == rtree(30, seed=3).tree.perm.tolist()


def test_hand_worked_k5_training_path():
    # k=5, seed 0: perm [3,4,2,5,1]; label 5 sits at position 3 = right child of node 6
    # (regressor 1); node 6 is the right child of node 7 (regressor 2), node 7 the left child of
    # the root 8 (regressor 3). Training goes top-down without filtering.
    t = rtree(5)
    batch = make_batch([(5, 1.0, [HA, HC], [1.0, 1.0])])
    t.process(batch, np.ones(1, dtype=bool))
    for h in (HA, HC):
        assert w_of(t, h, 0) == 0.0
        assert w_of(t, h, 1) == pytest.approx(W1, abs=1e-6)
        assert w_of(t, h, 2) == pytest.approx(W1, abs=1e-6)
        assert w_of(t, h, 3) == pytest.approx(-W1, abs=1e-6)
    assert t.predict(batch)[0] == 5
    ref = RefRandomTree(5, RefLinear(bits=BITS, n_models=4), 0)
    ref.process([(5, 1.0, [HA, HC], [1.0, 1.0])], [True])
    assert ref.trace == [[(3, -1.0), (2, 1.0), (1, 1.0)]]


@settings(deadline=None, max_examples=60)
@given(streams(), st.integers(0, 2**64 - 1))
def test_kernel_matches_reference(data, seed):
    k, loss, raw = data
    run_both(lambda k, b, loss: rtree(k, b, loss, seed=seed), lambda k, lin: RefRandomTree(k, lin, seed),
             k, loss, raw)


@pytest.mark.parametrize("k", [2, 7, 16])
def test_zero_training_error_on_separable_data(k):
    t = rtree(k, bits=14, seed=k)
    batch = make_batch(separable(k, 300))
    for _ in range(4):
        t.process(batch, np.ones(len(batch), dtype=bool))
    assert (t.predict(batch) == batch.labels).all()


def test_k1():
    t = rtree(1, seed=9)
    preds, _ = t.process(make_batch([(1, 1.0, [1], [1.0])] * 2), np.ones(2, dtype=bool))
    assert preds.tolist() == [1, 1] and not t.learner.arrays.table.any()


def test_save_load_continue_equals_uninterrupted(tmp_path):
    k, seed = 13, 77
    exs = separable(k, 200, seed=5)
    a, b = make_batch(exs[:100]), make_batch(exs[100:])
    ones = np.ones(100, dtype=bool)
    full = rtree(k, seed=seed)
    full.process(a, ones)
    p_full, _ = full.process(b, ones)
    part = rtree(k, seed=seed)
    part.process(a, ones)
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, InputConfig(bits=BITS), part.learner, part)
    loaded = model_io.load_model(path).reduction
    assert loaded.tree.perm.tolist() == part.tree.perm.tolist()
    p_cont, _ = loaded.process(b, ones)
    assert p_cont.tolist() == p_full.tolist()
    assert np.array_equal(loaded.learner.arrays.table, full.learner.arrays.table)


def test_load_rejects_bad_permutation():
    st_ = rtree(6, seed=1).state()
    for perm in ([1, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5]):
        bad = dict(st_, perm=np.array(perm, dtype=np.int32))
        with pytest.raises(ValueError):
            rtree(6).load_state(bad, {})
    with pytest.raises(ValueError):
        rtree(6).load_state({k: v for k, v in st_.items() if k != "perm"}, {})
    t = rtree(6, seed=0)
    t.load_state(st_, {})  # the stored permutation wins over the seed
    assert t.tree.perm.tolist() == st_["perm"].tolist()
    assert t.tree.pos[t.tree.perm - 1].tolist() == list(range(6))


def test_cli_same_seed_same_bytes_and_inspect(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text(_vw_lines(separable(9, 150)))
    files = []
    for name, seed in (("a", 4), ("b", 4), ("c", 5)):
        m = tmp_path / f"{name}.lt"
        r = CliRunner().invoke(main, ["train", "-r", "rtree", "-k", "9", "-b", "12", "--seed", str(seed), "--quiet",
                                      str(data), "-f", str(m)])
        assert r.exit_code == 0, r.output
        files.append(m.read_bytes())
    assert files[0] == files[1]
    assert files[0] != files[2]
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "a.lt"), "--json"])
    info = json.loads(r.output)
    assert info["reduction"] == "rtree" and info["seed"] == 4 and info["depth"] == 4
    assert info["permutation_first"] == permutation(9, 4)
    assert 0.0 <= info["levels"][0]["fraction_right"] <= 1.0


def test_cli_rejects_label_above_k(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("1 | a\n3 | b\n")
    r = CliRunner().invoke(main, ["train", "-r", "rtree", "-k", "2", "--quiet", str(data)])
    assert r.exit_code == 1 and "outside 1..2" in r.output
