"""The order of the cached passes 2..N (``--shuffle-passes``, ``passorder``): each pass reads every
cached example exactly once with its weight, tag and labels, in an order fixed by (seed, pass);
holdout keeps the file order."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import driver
from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.errors import ConfigError
from lomtree_cli.passorder import concat, shuffled, take


def make_batch(rng, n, line0, with_tags=True):
    """``n`` examples: example i has 1-3 features whose values encode its line, a weight, a tag
    and a label set of 0-2 labels."""
    counts = rng.integers(1, 4, n)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lines = np.arange(line0, line0 + n, dtype=np.int64)
    values = np.repeat(lines, counts).astype(np.float32)
    indices = rng.integers(0, 1000, int(indptr[-1])).astype(np.int64)
    lcounts = rng.integers(0, 3, n)
    lptr = np.concatenate([[0], np.cumsum(lcounts)]).astype(np.int64)
    lids = rng.integers(1, 50, int(lptr[-1])).astype(np.int64)
    return ExampleBatch(labels=np.ones(n, np.int64), weights=lines * 0.5, indptr=indptr, indices=indices,
                        values=values, line_numbers=lines, source="x.vw",
                        tags=[f"t{i}" if i % 3 else None for i in lines] if with_tags else None,
                        label_ptr=lptr, label_ids=lids)


def records(batches):
    """Each example as (line, weight, tag, features, labels), in the order read."""
    out = []
    for b in batches:
        for i in range(len(b)):
            a, z = int(b.indptr[i]), int(b.indptr[i + 1])
            out.append((int(b.line_numbers[i]), float(b.weights[i]), None if b.tags is None else b.tags[i],
                        tuple(zip(b.indices[a:z].tolist(), b.values[a:z].tolist())),
                        tuple(b.label_set(i).tolist())))
    return out


def stream(seed, sizes):
    rng = np.random.default_rng(seed)
    out, line = [], 1
    for n in sizes:
        out.append(make_batch(rng, n, line))
        line += n
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.integers(0, 2**64 - 1), st.integers(1, 9),
       st.sampled_from([4, 30, 1 << 24]))
def test_each_example_once_per_pass_with_its_fields(sizes, seed, p, window):
    batches = stream(1, sizes)
    want = records(batches)
    got = records(shuffled(iter(batches), seed, p, window=window))
    assert sorted(got) == sorted(want)
    assert len(got) == len(want)
    # the order is fixed by (seed, pass)
    assert records(shuffled(iter(batches), seed, p, window=window)) == got


def test_passes_differ_and_seed_matters():
    batches = stream(2, [50, 50, 50])
    orders = [[r[0] for r in records(shuffled(iter(batches), 7, p))] for p in (1, 2, 3)]
    assert orders[0] != orders[1] != orders[2]
    assert [r[0] for r in records(shuffled(iter(batches), 8, 1))] != orders[0]
    assert sorted(orders[0]) == list(range(1, 151))


def test_window_bounds_the_mixing():
    # a window of 1 entry holds one batch: each batch's examples are permuted among themselves only
    batches = stream(3, [20] * 6)
    got = [r[0] for r in records(shuffled(iter(batches), 1, 1, window=1))]
    seen = 0
    for b in batches:
        assert sorted(got[seen:seen + len(b)]) == b.line_numbers.tolist()
        seen += len(b)
    assert got != sorted(got)


def test_take_and_concat_match_a_plain_python_reference():
    batches = stream(4, [7, 1, 12])
    whole = concat(batches)
    assert records([whole]) == records(batches)
    order = np.random.default_rng(0).permutation(len(whole))
    want = [records([whole])[i] for i in order]
    assert records([take(whole, order)]) == want


def _labelset_data(path, n=200, k=6, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(1, n + 1):
            ys = sorted(set(int(y) for y in rng.integers(1, k + 1, int(rng.integers(1, 3)))))
            f.write(f"{','.join(map(str, ys))} 'e{i} |a w{int(rng.integers(0, 20))} c{ys[0]}\n")
    return str(path)


def _passes_read(monkeypatch, tmp_path, **kw):
    """The line numbers each pass of a multi-label plt run over the cache learns from, in order."""
    seen = []
    orig = driver.Runner.run_pass

    def spy(self, batches, pass_index, holdout, writer, stop):
        lines = []
        seen.append(lines)

        def watch():
            for b in batches:
                lines.extend(b.line_numbers.tolist())
                yield b
        return orig(self, watch(), pass_index, holdout, writer, stop)

    monkeypatch.setattr(driver.Runner, "run_pass", spy)
    data = _labelset_data(tmp_path / "d.vw")
    opts = driver.RunOptions(inputs=[data], passes=3, err=io.StringIO(), cache=str(tmp_path / "d.cache"),
                             use_cache=True, early_terminate=99, **kw)
    rcfg = ReductionConfig(name="plt", k=6)
    driver.train(InputConfig(bits=16, multilabel=True), LearnerConfig(loss="logistic"), rcfg, opts,
                 final_model=str(tmp_path / "m.lt"))
    return seen


def test_cached_passes_shuffled_through_the_driver(monkeypatch, tmp_path):
    seen = _passes_read(monkeypatch, tmp_path, holdout_off=True, shuffle_passes=True)
    assert seen[0] == list(range(1, 201))
    assert sorted(seen[1]) == sorted(seen[2]) == list(range(1, 201))
    assert seen[1] != seen[0] and seen[2] != seen[1]


def test_holdout_keeps_the_file_order(monkeypatch, tmp_path):
    seen = _passes_read(monkeypatch, tmp_path, shuffle_passes=True)
    assert seen[1] == seen[2] == list(range(1, 201))


def test_default_off_for_small_label_sets(monkeypatch, tmp_path):
    # -k 6: the first pass is not shuffled (--shuffle-buffer off), nor are the later ones
    seen = _passes_read(monkeypatch, tmp_path, holdout_off=True)
    assert seen[1] == list(range(1, 201))


def test_refused_with_the_dual_solver(tmp_path):
    data = _labelset_data(tmp_path / "d.vw")
    opts = driver.RunOptions(inputs=[data], passes=2, err=io.StringIO(), holdout_off=True, shuffle_passes=True)
    with pytest.raises(ConfigError, match="--shuffle-passes cannot be used with --solver dual"):
        driver.train(InputConfig(bits=16, multilabel=True), LearnerConfig(loss="hinge", solver="dual"),
                     ReductionConfig(name="oaa", k=6), opts, final_model=str(tmp_path / "m.lt"))


@pytest.mark.parametrize("extra, decay", [(["--holdout-off"], 1.0), ([], 0.6),
                                          (["--holdout-off", "--no-shuffle-passes"], 0.6),
                                          (["--holdout-off", "--decay-learning-rate", "0.8"], 0.8)])
def test_no_rate_decay_when_the_later_passes_are_shuffled(tmp_path, extra, decay):
    from click.testing import CliRunner

    from lomtree_cli import model_io
    from lomtree_cli.cli import main

    data = _labelset_data(tmp_path / "d.vw", n=60)
    model = str(tmp_path / "m.lt")
    res = CliRunner().invoke(main, ["train", "-r", "plt", "--multilabel", "-k", "4096", "-b", "14", data,
                                    "--passes", "2", "-f", model, "--quiet", *extra])
    assert res.exit_code == 0, res.output
    assert model_io.load_model(model).learner.config.decay_learning_rate == pytest.approx(decay)
