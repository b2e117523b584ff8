"""Prediction and training on Dask: a LocalCluster of 2 worker processes
on 127.0.0.1, started once for the module; outputs must equal the single-process ones."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli.cli import main
from lomtree_cli.model_io import load_model, model_arrays
from tests.helpers import label_set_lines, separable_lines

distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(autouse=True)
def bounded():
    """A hung cluster must not hang the suite: after 120 s a test ends the run with its traceback."""
    import faulthandler

    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def cluster():
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    train = separable_lines(12, 1200, seed=0, noise_feats=3)
    (d / "train.vw").write_text("\n".join(train) + "\n")
    test = separable_lines(12, 700, seed=1, noise_feats=3)
    # tags, an unlabeled line and a label below 1 (read as unlabeled by predict)
    test[5] = test[5].replace(" |", " 'tag5 |", 1)
    test[9] = "| c3 n4"
    test[11] = "0 | c2"
    (d / "test.vw").write_text("\n".join(test) + "\n")
    (d / "test2.vw").write_text("\n".join(test[:333]) + "\n")
    return d


def cli(args, code=0):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == code, r.output
    return r


@pytest.mark.parametrize("extra", [[], ["--top-k", "3"], ["--probabilities"]])
def test_predict_equals_local(cluster, data, tmp_path, extra):
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "-f", m, "--quiet"])
    ins = [str(data / "test.vw"), str(data / "test2.vw")]
    cli(["predict", "-i", m, *ins, "-p", str(tmp_path / "local.txt"), "--quiet",
         "--report", str(tmp_path / "local.json")] + extra)
    cli(["predict", "-i", m, *ins, "-p", str(tmp_path / "dask.txt"), "--quiet", "--dask", cluster,
         "--report", str(tmp_path / "dask.json")] + extra)
    assert (tmp_path / "dask.txt").read_bytes() == (tmp_path / "local.txt").read_bytes()
    a = json.loads((tmp_path / "local.json").read_text())
    b = json.loads((tmp_path / "dask.json").read_text())
    for key in ("examples", "average_loss", "total_features", "weighted_examples", "labels_below_1"):
        assert a[key] == b[key], key


def test_predict_one_file_per_input(cluster, data, tmp_path, monkeypatch):
    import lomtree_cli.distributed as D

    monkeypatch.setattr(D, "RANGE_BYTES", 4096)  # many ranges per file
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "filter", "-k", "12", str(data / "train.vw"), "-f", m, "--quiet"])
    out = tmp_path / "preds"
    cli(["predict", "-i", m, str(data / "test.vw"), str(data / "test2.vw"), "-p", str(out) + "/", "--quiet",
         "--dask", cluster])
    for name in ("test.vw", "test2.vw"):
        cli(["predict", "-i", m, str(data / name), "-p", str(tmp_path / f"{name}.local"), "--quiet"])
        assert (out / f"{name}.pred").read_bytes() == (tmp_path / f"{name}.local").read_bytes()


def test_predict_into_an_existing_directory(cluster, data, tmp_path):
    """``-p DIR`` names an existing directory with or without the slash; each file in it is
    checked as ``-p`` is: one that is also an input is refused before anything is read."""
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "-f", m, "--quiet"])
    cli(["predict", "-i", m, str(data / "test2.vw"), "-p", str(tmp_path / "local"), "--quiet"])
    out = tmp_path / "preds"
    out.mkdir()
    for target in (str(out), str(out) + "/"):
        cli(["predict", "-i", m, str(data / "test2.vw"), "-p", target, "--quiet", "--dask", cluster])
        assert (out / "test2.vw.pred").read_bytes() == (tmp_path / "local").read_bytes()
    (out / "x.vw").write_bytes((data / "test2.vw").read_bytes())
    (out / "x.vw.pred").write_bytes((data / "test2.vw").read_bytes())
    r = cli(["predict", "-i", m, str(out / "x.vw"), str(out / "x.vw.pred"), "-p", str(out), "--quiet",
             "--dask", cluster], code=2)
    assert "x.vw.pred is also an input" in r.output
    assert (out / "x.vw.pred").read_bytes() == (data / "test2.vw").read_bytes()


def test_line_ranges_cover_the_file(data):
    from lomtree_cli.distributed import line_ranges

    raw = (data / "test.vw").read_bytes()
    for parts in (1, 2, 3, 7, 50):
        r = line_ranges(str(data / "test.vw"), parts)
        assert r[0][0] == 0 and r[-1][1] == len(raw)
        assert all(a[1] == b[0] for a, b in zip(r, r[1:]))
        assert all(raw[e - 1:e] == b"\n" for _, e in r)


def test_shards_interleave_blocks(tmp_path, monkeypatch):
    """Training shards: a file is cut into line-aligned blocks and shard i takes blocks i, i + W, ...
    in file order; every byte of every file is in exactly one shard; a file smaller than W blocks
    gives W ranges (shard i: range i), a compressed file goes to the shards in turn."""
    import gzip

    import lomtree_cli.distributed as D

    monkeypatch.setattr(D, "SHARD_BLOCK_BYTES", 1024)
    big, small, gz = tmp_path / "big.vw", tmp_path / "small.vw", tmp_path / "c.vw.gz"
    big.write_text("\n".join(separable_lines(12, 2000, seed=2, noise_feats=3)) + "\n")
    small.write_text("\n".join(separable_lines(12, 20, seed=3)) + "\n")
    with gzip.open(gz, "wt") as f:
        f.write("\n".join(separable_lines(12, 20, seed=4)) + "\n")
    raw = big.read_bytes()
    for w in (1, 2, 3):
        shards = D.shards_of([str(big), str(small), str(gz)], w)
        blocks = sorted(r for sh in shards for r in sh if r[0] == str(big))
        assert len(blocks) == w * (len(raw) // (w * 1024))
        assert blocks[0][1] == 0 and blocks[-1][2] == len(raw)
        assert all(a[2] == b[1] for a, b in zip(blocks, blocks[1:]))
        assert all(raw[e - 1:e] == b"\n" and e - s < 2048 for _, s, e in blocks)
        for i, sh in enumerate(shards):
            assert [r for r in sh if r[0] == str(big)] == blocks[i::w]
            assert [r[0] for r in sh if r[0] == str(small)] == [str(small)]
        assert [r[1:] for sh in shards for r in sh if r[0] == str(small)] == D.line_ranges(str(small), w)
        assert (str(gz), 0, -1) in shards[0]  # the blocks before it are a multiple of W: its turn is shard 0's
    monkeypatch.setattr(D, "MAX_SHARD_BLOCKS", 3)
    assert [len(sh) for sh in D.shards_of([str(big)], 2)] == [3, 3]


def test_sync_interval_doctests():
    import doctest

    import lomtree_cli.distributed as D

    assert doctest.testmod(D).failed == 0


def _average_reference(states, base=None, rule="average"):
    """The averaging under the adaptive update, one slot at a time in plain Python. ``"average"``
    (VW's): the weights weighted by the adaptive sums G, and G and N their G-weighted means; where
    no model has G > 0, plain means (and G 0). ``"increments"``: where some model's G grew since
    ``base`` (a state; None: zero) by dG_i, w = w0 + sum dG_i (w_i - w0) / sum dG_i and
    G = G0 + sum dG_i^2 / sum dG_i (N as VW's); elsewhere VW's. A slot a model does not hold is 0
    there. S and T: plain means."""
    n = len(states)
    at = {}
    if base is not None:
        at = {slot: (float(base["w"][j]), float(base["G"][j])) for j, slot in enumerate(base["nz"].tolist())}
    cells = {}
    for s in states:
        for j, slot in enumerate(s["nz"].tolist()):
            cells.setdefault(slot, []).append((float(s["w"][j]), float(s["G"][j]), float(s["N"][j])))
    out = {}
    for slot, vals in cells.items():
        vals = vals + [(0.0, 0.0, 0.0)] * (n - len(vals))
        sum_g = sum(g for _, g, _ in vals)
        if sum_g > 0:
            out[slot] = [sum(g * w for w, g, _ in vals) / sum_g, sum(g * g for _, g, _ in vals) / sum_g,
                         sum(g * v for _, g, v in vals) / sum_g]
        else:
            out[slot] = [sum(w for w, _, _ in vals) / n, 0.0, sum(v for _, _, v in vals) / n]
        if rule == "increments":
            w0, g0 = at.get(slot, (0.0, 0.0))
            d = [max(g - g0, 0.0) for _, g, _ in vals]
            if sum(d) > 0:
                out[slot][0] = w0 + sum(di * (w - w0) for di, (w, _, _) in zip(d, vals)) / sum(d)
                out[slot][1] = g0 + sum(di * di for di in d) / sum(d)
    S = [sum(float(s["model_S"][m]) for s in states) / n for m in range(states[0]["model_S"].shape[0])]
    T = [sum(float(s["model_T"][m]) for s in states) / n for m in range(states[0]["model_T"].shape[0])]
    return out, S, T


def _continued(base, lines, red):
    """A model trained from ``base`` (a Classifier) on ``lines``, as a worker trains a round."""
    from lomtree_cli import Classifier

    return load_model(io.BytesIO(Classifier.from_bytes(base.to_bytes()).partial_fit(lines).to_bytes()))


@pytest.mark.parametrize("red,parts,rule,from_zero", [("oaa", 2, "average", True), ("filter", 3, "average", True),
                                                      ("oaa", 2, "increments", False),
                                                      ("filter", 3, "increments", False),
                                                      ("rtree", 4, "increments", False),
                                                      ("filter", 2, "average", False)])
def test_average_models_against_reference(data, red, parts, rule, from_zero):
    """``average_models`` of models trained on different data against the slow reference: from a
    zero base (where the two rules agree), and from a trained base (each model continued from it
    on its own part, as a round of workers); node counts add up (the base's, plus each model's own
    since it)."""
    from lomtree_cli.distributed import average_models

    lines = (data / "train.vw").read_text().splitlines()
    if from_zero:
        models = [load_model(io.BytesIO(_fit(lines[i * 300:(i + 1) * 300], red).to_bytes())) for i in range(parts)]
        base = load_model(io.BytesIO(_fit(lines[:1], red).to_bytes()))
        base.learner.arrays.table[:] = 0
        base.learner.arrays.S[:] = 0
        base.learner.arrays.T[:] = 0
    else:
        start = _fit(lines[:200], red)
        models = [_continued(start, lines[200 + i * 150:200 + (i + 1) * 150], red) for i in range(parts)]
        base = load_model(io.BytesIO(start.to_bytes()))
    base_state = base.learner.state()
    states = [m.learner.state() for m in models]
    before = base.reduction.state()
    average_models(models, base, rule)
    got = base.learner.state()
    want, S, T = _average_reference(states, base_state, rule)
    kept = sorted(slot for slot, v in want.items() if any(np.float32(x) != 0 for x in v))
    np.testing.assert_array_equal(got["nz"], kept)
    for col, name in enumerate(("w", "G", "N")):
        np.testing.assert_allclose(got[name], [want[slot][col] for slot in kept], rtol=2e-6, atol=1e-30,
                                   err_msg=name)
    np.testing.assert_allclose(got["model_S"], S, rtol=1e-12)
    np.testing.assert_allclose(got["model_T"], T, rtol=1e-12)
    if "node_counts" in before:
        c0 = before["node_counts"]
        np.testing.assert_array_equal(base.reduction.state()["node_counts"],
                                      c0 + sum(m.reduction.state()["node_counts"] - c0 for m in models))
    if rule == "increments" and not from_zero:  # the rules differ once the base has trained slots
        vw, _, _ = _average_reference(states, base_state, "average")
        assert any(abs(vw[slot][0] - want[slot][0]) > 1e-3 for slot in kept)


def test_merge_rule_per_reduction():
    """A regressor per class (OAA) keeps VW's average; tree nodes merge by increments."""
    from lomtree_cli.distributed import merge_rule

    assert merge_rule("oaa") == "average"
    assert {merge_rule(r) for r in ("filter", "rtree", "cpt", "plt")} == {"increments"}


def _fit(lines, red="oaa", k=12):
    from lomtree_cli import Classifier

    return Classifier(reduction=red, classes=k, format="vw").fit(lines)


@pytest.mark.parametrize("red,rule,copies", [("oaa", "average", 2), ("filter", "average", 2), ("rtree", "average", 2),
                                             ("oaa", "increments", 2), ("filter", "increments", 3),
                                             ("rtree", "increments", 2)])
def test_average_of_identical_models_is_the_model(data, red, rule, copies):
    """Both rules: copies of one model average to that model, from a zero base and (increments,
    where the base matters) from the trained model they were continued from."""
    from lomtree_cli import Classifier
    from lomtree_cli.distributed import average_models

    lines = (data / "train.vw").read_text().splitlines()[:300]
    trained = _fit(lines, red)
    base = load_model(io.BytesIO(_fit(lines[:1], red).to_bytes()))  # any model of the same shape
    base.learner.arrays.table[:] = 0
    if rule == "increments":
        start = _fit(lines[:100], red)
        base = load_model(io.BytesIO(start.to_bytes()))
        trained = Classifier.from_bytes(start.to_bytes()).partial_fit(lines[100:])
    models = [load_model(io.BytesIO(trained.to_bytes())) for _ in range(copies)]
    average_models(models, base, rule)
    got, want = model_arrays(base.learner, base.reduction), model_arrays(trained._model.base, trained._model.reduction)
    for name in want:
        if name == "reduction/node_counts":
            continue  # counts add up (each worker's examples since the base)
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("red,copies", [("oaa", 2), ("filter", 2), ("filter", 5)])
def test_identical_shards_train_one_shards_model(cluster, data, tmp_path, red, copies):
    """A file made of the same part twice, on 2 workers (one part each, with the early syncs, at the
    model's own rate: ``--plain-rate``): the averaged model is exactly the model of one part trained
    in one process. With ``--shards 5`` (more shards than workers: five models averaged, at most four
    in flight) too."""
    part = (data / "train.vw").read_text().splitlines()[:1000 // copies]
    (tmp_path / "part.vw").write_text("\n".join(part) + "\n")
    (tmp_path / "copies.vw").write_text("\n".join(part * copies) + "\n")
    cli(["train", "-r", red, "-k", "12", str(tmp_path / "part.vw"), "-f", str(tmp_path / "one.lt"), "--quiet"])
    cli(["train", "-r", red, "-k", "12", str(tmp_path / "copies.vw"), "-f", str(tmp_path / "two.lt"), "--quiet",
         "--dask", cluster, "--plain-rate", "--report", str(tmp_path / "r.json")]
        + (["--shards", str(copies)] if copies != 2 else []))
    m1 = load_model(str(tmp_path / "one.lt"))
    one = model_arrays(m1.learner, m1.reduction)
    m2 = load_model(str(tmp_path / "two.lt"))
    two = model_arrays(m2.learner, m2.reduction)
    for name in one:
        if name == "reduction/node_counts":
            np.testing.assert_array_equal(two[name], copies * one[name])
            continue
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["examples"] == len(part) * copies and r["dask_workers"] == 2 and r["dask_shards"] == copies


@pytest.mark.parametrize("red", ["oaa", "filter"])
def test_train_segment_scales_the_rate(data, tmp_path, red):
    """A worker's round at ``rate`` c learns as one process at learning rate c times the model's
    (``-l``), and the model it returns keeps the model's own rate."""
    import lomtree_cli.distributed as D

    tr = str(data / "train.vw")
    cli(["train", "-r", red, "-k", "12", tr, "-f", str(tmp_path / "l1.lt"), "--quiet", "-l", "1.0"])
    (tmp_path / "empty.vw").write_text("")
    cli(["train", "-r", red, "-k", "12", str(tmp_path / "empty.vw"), "-f", str(tmp_path / "zero.lt"), "--quiet"])
    zero = (tmp_path / "zero.lt").read_bytes()
    seg = D._train_segment(zero, [(tr, 0, (data / "train.vw").stat().st_size)], (0, 0, 0), 0, False, 10,
                           False, load_model(io.BytesIO(zero)).input_config.max_line_bytes, 2.0)
    got, want = load_model(io.BytesIO(seg.model)), load_model(str(tmp_path / "l1.lt"))
    assert got.learner.eta == 0.5 and want.learner.eta == 1.0
    a, b = model_arrays(got.learner, got.reduction), model_arrays(want.learner, want.reduction)
    assert set(a) == set(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


class _InProcessClient:
    """Stands in for a dask Client: tasks run at once in this process; records each task's
    (examples limit, rate)."""

    def __init__(self):
        self.rounds = []

    def scheduler_info(self):
        return {"workers": {"a": None, "b": None}}

    def scatter(self, data, **kw):
        return data

    def submit(self, f, *args, **kw):
        if f.__name__ == "train_segment":  # (examples, rate) of a round's task
            self.rounds.append((args[3], args[8]))
        value = f(*args)
        return type("Done", (), {"result": lambda self: value, "release": lambda self: None})()


@pytest.mark.parametrize("red,extra,power_t", [("oaa", [], 0.5), ("filter", [], 0.5), ("filter", ["--plain-rate"], 0.5),
                                               ("cpt", ["--passes", "2", "--holdout-off"], 0.75)])
def test_early_rounds_rates(data, tmp_path, monkeypatch, red, extra, power_t):
    """The rate each task learns at: in the first data-parallel pass's rounds (100, 125, 156, 195,
    then the rest of about 600 examples), 2^(1 - power_t) for OAA's class regressors,
    2^((1 - power_t) 100 / N) for tree nodes (N the round's examples; CPT's power_t is 0.75); 1 in
    a growing pass, with --plain-rate and later."""
    from contextlib import contextmanager

    import lomtree_cli.distributed as D

    client = _InProcessClient()

    @contextmanager
    def connect(address):
        yield client

    monkeypatch.setattr(D, "connect", connect)
    cli(["train", "-r", red, "-k", "12", str(data / "train.vw"), "--quiet", "--dask", "local:2", *extra])
    limits = [100, 125, 156, 195, 244]
    if red == "oaa":
        rates = [2 ** (1 - power_t)] * 5
    elif "--plain-rate" in extra:
        rates = [1.0] * 5
    else:
        rates = [2 ** ((1 - power_t) * 100 / n) for n in limits]
    early = [(n, r) for n in limits for r in [rates[limits.index(n)]] * 2]
    if red == "cpt":  # pass 1 grows the tree: the shards in turn, to their ends, at the model's rate
        early = [(0, 1.0), (0, 1.0)] + early
    got = client.rounds[:len(early)]
    assert [n for n, _ in got] == [n for n, _ in early]
    assert [r for _, r in got] == pytest.approx([r for _, r in early], rel=1e-12)
    assert all(rate == 1.0 for _, rate in client.rounds[len(early):])


def test_train_sync_every_and_passes(cluster, data, tmp_path):
    """--sync-every and --passes with holdout: a normal model file, predictions close to one process."""
    cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "-f", str(tmp_path / "d.lt"), "--quiet",
         "--dask", cluster, "--sync-every", "100", "--passes", "2", "--report", str(tmp_path / "r.json")])
    r = json.loads((tmp_path / "r.json").read_text())
    # every 10th example of each shard is held out (the shards' line counts differ by a few)
    assert r["dask_syncs"] >= 12 and abs(r["examples"] - 2160) <= 4 and r["best_pass"] in (1, 2)
    cli(["predict", "-i", str(tmp_path / "d.lt"), str(data / "test.vw"), "--quiet", "-p", "/dev/null",
         "--report", str(tmp_path / "p.json")])
    assert json.loads((tmp_path / "p.json").read_text())["average_loss"] < 0.1
    assert load_model(str(tmp_path / "d.lt")).passes_done == r["best_pass"]


def test_first_pass_syncs_at_growing_intervals(cluster, data, tmp_path):
    """--sync-first N: in the first pass the models are averaged after N examples of each shard
    (about 600 here), then at intervals growing by --sync-growth (1.25: after 100, 225, 381, 576;
    2: after N, 3N, 7N, ...), capped by --sync-every; later passes sync once; 0 turns it off."""
    tr = str(data / "train.vw")
    for extra, syncs in (([], 5), (["--sync-first", "0"], 1), (["--sync-growth", "2"], 3),
                         (["--sync-first", "50", "--sync-growth", "2"], 4),
                         (["--sync-first", "50", "--sync-growth", "2", "--sync-every", "130"], 6),
                         (["--sync-growth", "1", "--sync-first", "250"], 3),
                         (["--passes", "2", "--holdout-off"], 6)):
        cli(["train", "-r", "oaa", "-k", "12", tr, "-f", str(tmp_path / "m.lt"), "--quiet", "--dask", cluster,
             "--report", str(tmp_path / "r.json"), *extra])
        assert json.loads((tmp_path / "r.json").read_text())["dask_syncs"] == syncs, extra
        cli(["predict", "-i", str(tmp_path / "m.lt"), str(data / "test.vw"), "--quiet", "-p", "/dev/null",
             "--report", str(tmp_path / "p.json")])
        assert json.loads((tmp_path / "p.json").read_text())["average_loss"] < 0.1


def test_local_cluster_and_usage_errors(data, tmp_path):
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "-f", m, "--quiet", "--dask", "local:2"])
    r = cli(["train", "-r", "lomtree", "-k", "12", str(data / "train.vw"), "--dask", "local:2"], code=2)
    assert "not distributed yet" in r.output
    r = cli(["predict", "-i", m, "--dask", "local:2"], code=2)
    assert "standard input" in r.output
    r = cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "--sync-every", "5"], code=2)
    assert "--sync-every needs --dask" in r.output
    r = cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "--shards", "4"], code=2)
    assert "--shards needs --dask" in r.output
    r = cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "--sync-first", "50"], code=2)
    assert "--sync-first needs --dask" in r.output
    for opt in (["--sync-growth", "1.5"], ["--plain-rate"]):
        r = cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), *opt], code=2)
        assert f"{opt[0]} needs --dask" in r.output
    r = cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "--dask", "local:2", "--sync-growth", "0.5"],
            code=2)
    assert "--sync-growth" in r.output
    r = cli(["predict", "-i", m, str(data / "test.vw"), "--dask", "local:0"], code=2)
    assert "local:N" in r.output


def test_bad_line_is_one_error_line(cluster, data, tmp_path, monkeypatch):
    """A malformed line: the predictions before it, then 'file:line: ...' and exit 1, as one process
    (line numbers of the whole file, also in a later range); training stops the same way."""
    import lomtree_cli.distributed as D

    monkeypatch.setattr(D, "RANGE_BYTES", 2048)
    lines = (data / "test.vw").read_text().splitlines()
    lines[400] = "x | bad"
    (tmp_path / "bad.vw").write_text("\n".join(lines) + "\n")
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "oaa", "-k", "12", str(data / "train.vw"), "-f", m, "--quiet"])
    a = cli(["predict", "-i", m, str(tmp_path / "bad.vw"), "-p", str(tmp_path / "l.txt"), "--quiet"], code=1)
    b = cli(["predict", "-i", m, str(tmp_path / "bad.vw"), "-p", str(tmp_path / "d.txt"), "--quiet",
             "--dask", cluster], code=1)
    assert "bad.vw:401: bad label 'x'" in a.output and "bad.vw:401: bad label 'x'" in b.output
    assert (tmp_path / "d.txt").read_bytes() == (tmp_path / "l.txt").read_bytes()
    # training reads label 0 (line 12) as an error, in one process and on Dask
    one = cli(["train", "-r", "oaa", "-k", "12", str(tmp_path / "bad.vw"), "--quiet"], code=1)
    r = cli(["train", "-r", "oaa", "-k", "12", str(tmp_path / "bad.vw"), "--dask", cluster, "--quiet"], code=1)
    assert r.output == one.output and "bad.vw:12: bad label '0'" in r.output
    r = cli(["predict", "-i", str(tmp_path / "none.lt"), str(tmp_path / "bad.vw"), "--dask", cluster], code=2)
    assert "model file not found" in r.output


@pytest.mark.parametrize("red", ["cpt", "plt"])
def test_growing_reductions(cluster, data, tmp_path, red):
    """CPT and PLT grow their tree in pass 1, shard after shard on one worker at a time: for CPT
    that is exactly the single-process model in one pass (PLT builds its k-means tree from the
    first shard's buffer, not the whole input's); later passes are data-parallel over the frozen
    tree (which must not change), with the early syncs in the first of them."""
    tr = str(data / "train.vw")
    cli(["train", "-r", red, "-k", "12", tr, "-f", str(tmp_path / "one.lt"), "--quiet"])
    cli(["train", "-r", red, "-k", "12", tr, "-f", str(tmp_path / "d.lt"), "--quiet", "--dask", cluster])
    m1, m2 = load_model(str(tmp_path / "one.lt")), load_model(str(tmp_path / "d.lt"))
    a, b = model_arrays(m1.learner, m1.reduction), model_arrays(m2.learner, m2.reduction)
    assert set(a) == set(b)
    if red == "cpt":
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    cli(["train", "-r", red, "-k", "12", tr, "-f", str(tmp_path / "d3.lt"), "--quiet", "--dask", cluster,
         "--passes", "3", "--report", str(tmp_path / "r.json")])
    # 2 shards in turn, then the early syncs in the first data-parallel pass (after 100, 225, 381, 576
    # of about 600 examples: 5), and one in pass 3
    assert json.loads((tmp_path / "r.json").read_text())["dask_syncs"] == 8
    cli(["predict", "-i", str(tmp_path / "d3.lt"), str(data / "test.vw"), "--quiet", "-p", "/dev/null",
         "--report", str(tmp_path / "p.json")])
    assert json.loads((tmp_path / "p.json").read_text())["average_loss"] < 0.2


def test_continue_a_model_on_dask(cluster, data, tmp_path):
    """-i MODEL --dask: the model goes on learning (passes add up), options checked against it."""
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "rtree", "-k", "12", "--seed", "3", str(data / "train.vw"), "-f", m, "--quiet"])
    cli(["train", "-i", m, str(data / "train.vw"), "-f", str(tmp_path / "m2.lt"), "--quiet", "--dask", cluster])
    m2 = load_model(str(tmp_path / "m2.lt"))
    assert m2.passes_done == 2 and m2.reduction.config.seed == 3
    r = cli(["train", "-i", m, "-k", "5", str(data / "train.vw"), "--quiet", "--dask", cluster], code=2)
    assert "conflicts with the initial model" in r.output


# -- label sets ---------------------------------------------------------------------------------------

def _label_set_lines(n, seed):
    """Multi-label lines: 1-3 labels of 1..12, a word per label and noise words."""
    return label_set_lines(n, seed)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    d = tmp_path_factory.mktemp("sets")
    (d / "train.vw").write_text("\n".join(_label_set_lines(1200, 0)) + "\n")
    (d / "more.vw").write_text("\n".join(_label_set_lines(500, 2)) + "\n")
    (d / "test.vw").write_text("\n".join(_label_set_lines(400, 1)) + "\n")
    return d


def _label_counts(*paths):
    """The label counts a multi-label model keeps (index 0: the examples), from the files."""
    c = np.zeros(13)
    for p in paths:
        for line in p.read_text().splitlines():
            c[0] += 1
            for l in line.split(" |")[0].split(","):
                c[int(l)] += 1
    return c


@pytest.mark.parametrize("extra", [[], ["--top-k", "3"], ["--threshold", "0.3", "--probabilities"]])
def test_multilabel_predict_equals_local(cluster, sets, tmp_path, extra):
    """A multi-label model on Dask: the same lines and the same P@k, nDCG@k, PSP@k (and F1) as one
    process (the ranges' counts add up exactly)."""
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "plt", "--multilabel", "-k", "12", str(sets / "train.vw"), "-f", m, "--quiet"])
    t = str(sets / "test.vw")
    cli(["predict", "-i", m, t, "-p", str(tmp_path / "l.txt"), "--quiet", "--report", str(tmp_path / "l.json")] + extra)
    cli(["predict", "-i", m, t, "-p", str(tmp_path / "d.txt"), "--quiet", "--report", str(tmp_path / "d.json"),
         "--dask", cluster] + extra)
    assert (tmp_path / "d.txt").read_bytes() == (tmp_path / "l.txt").read_bytes()
    a = json.loads((tmp_path / "l.json").read_text())
    b = json.loads((tmp_path / "d.json").read_text())
    assert b["dask_ranges"] >= 8 and "psp@5" in a
    for key in a:
        if key.startswith(("p@", "ndcg@", "psp@", "micro_f1", "macro_f1")) or key == "examples":
            assert a[key] == b[key], key


def test_multilabel_identical_shards_train_one_shards_model(cluster, sets, tmp_path):
    """oaa --multilabel on a file made of the same part twice, 2 workers: the averaged model is exactly
    the part's one-process model, and its label counts are twice the part's."""
    part = (sets / "train.vw").read_text().splitlines()[:500]
    (tmp_path / "part.vw").write_text("\n".join(part) + "\n")
    (tmp_path / "copies.vw").write_text("\n".join(part * 2) + "\n")
    common = ["-r", "oaa", "--multilabel", "-k", "12", "--quiet", "--no-average"]
    cli(["train", *common, str(tmp_path / "part.vw"), "-f", str(tmp_path / "one.lt")])
    cli(["train", *common, str(tmp_path / "copies.vw"), "-f", str(tmp_path / "two.lt"), "--dask", cluster,
         "--plain-rate"])
    m1, m2 = load_model(str(tmp_path / "one.lt")), load_model(str(tmp_path / "two.lt"))
    one, two = model_arrays(m1.learner, m1.reduction), model_arrays(m2.learner, m2.reduction)
    assert set(one) == set(two)
    for name in one:
        want = 2 * one[name] if name == "reduction/label_counts" else one[name]
        np.testing.assert_array_equal(two[name], want, err_msg=name)
    np.testing.assert_array_equal(two["reduction/label_counts"], _label_counts(tmp_path / "copies.vw"))


def _one_process_and_dask_agree(tmp_path, common, test, dask_args):
    """Train ``common`` in one process (one.lt) and with ``dask_args`` (d.lt), predict ``test``
    with both: P@1 of one process above 0.8, P@1 and P@3 of Dask within 2 points of it."""
    got = {}
    for name, extra in (("one", []), ("d", dask_args)):
        cli(["train", *common, "-f", str(tmp_path / f"{name}.lt"), *extra])
        cli(["predict", "-i", str(tmp_path / f"{name}.lt"), str(test), "-p", "/dev/null", "--quiet",
             "--report", str(tmp_path / f"{name}.json")])
        got[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert got["one"]["p@1"] > 0.8
    for k in ("p@1", "p@3"):
        assert abs(got["d"][k] - got["one"][k]) <= 0.02, (k, got["d"][k], got["one"][k])


@pytest.mark.parametrize("red", ["oaa", "plt"])
def test_multilabel_training_on_dask_matches_one_process(cluster, sets, tmp_path, red):
    """Label sets trained on 2 workers: P@1/P@3 within 2 points of one process on the same options
    (this task is easy for both: about 0.9 P@1); the label counts are exactly the input's."""
    common = ["-r", red, "--multilabel", "-k", "12", str(sets / "train.vw"), "--quiet", "--no-average"]
    _one_process_and_dask_agree(tmp_path, common, sets / "test.vw", ["--dask", cluster, "--report",
                                                                     str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text())["examples"] == 1200
    np.testing.assert_array_equal(load_model(str(tmp_path / "d.lt")).reduction.label_counts,
                                  _label_counts(sets / "train.vw"))


@pytest.mark.parametrize("red", ["oaa", "plt"])
def test_continue_a_multilabel_model_on_dask(cluster, sets, tmp_path, red):
    """``train -i MULTILABEL_MODEL --dask``: the label counts (PSP@k's propensities) become those of
    both inputs (those PSP@k divides by), as in one process."""
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", red, "--multilabel", "-k", "12", str(sets / "train.vw"), "-f", m, "--quiet", "--no-average"])
    cli(["train", "-i", m, str(sets / "more.vw"), "-f", str(tmp_path / "d.lt"), "--quiet", "--dask", cluster])
    cli(["train", "-i", m, str(sets / "more.vw"), "-f", str(tmp_path / "one.lt"), "--quiet"])
    want = _label_counts(sets / "train.vw", sets / "more.vw")
    d, one = load_model(str(tmp_path / "d.lt")), load_model(str(tmp_path / "one.lt"))
    np.testing.assert_array_equal(d.reduction.label_counts, want)
    np.testing.assert_array_equal(one.reduction.label_counts, want)
    assert d.passes_done == 2


def test_dask_writes_a_predict_only_model(cluster, sets, tmp_path):
    """--predict_only_model on Dask: the model of the same (deterministic) run without its optimiser
    state: the same predictions."""
    common = ["-r", "oaa", "--multilabel", "-k", "12", str(sets / "train.vw"), "--quiet", "--dask", cluster]
    cli(["train", *common, "-f", str(tmp_path / "full.lt")])
    cli(["train", *common, "-f", str(tmp_path / "po.lt"), "--predict_only_model"])
    assert load_model(str(tmp_path / "po.lt"), predict_only=True).header["predict_only"] is True
    for m in ("full", "po"):
        cli(["predict", "-i", str(tmp_path / f"{m}.lt"), str(sets / "test.vw"), "--top-k", "3", "--quiet",
             "-p", str(tmp_path / f"{m}.txt")])
    assert (tmp_path / "po.txt").read_bytes() == (tmp_path / "full.txt").read_bytes()


def test_xmc_inputs_on_dask(cluster, tmp_path):
    """XMC files (a header line, then label sets): training reads every example once and none of
    the header; prediction equals one process's."""
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(600):
        labs = sorted(set(rng.integers(0, 8, size=int(rng.integers(1, 3))).tolist()))
        feats = sorted(set([l * 3 for l in labs] + rng.integers(0, 30, 3).tolist()))
        rows.append(",".join(map(str, labs)) + " " + " ".join(f"{f}:1" for f in feats))
    for name, part in (("train.txt", rows[:450]), ("test.txt", rows[450:])):
        (tmp_path / name).write_text(f"{len(part)} 30 8\n" + "\n".join(part) + "\n")
    m = str(tmp_path / "m.lt")
    cli(["train", "--format", "xmc", "-r", "plt", str(tmp_path / "train.txt"), "-f", m, "--quiet", "--dask", cluster,
         "--report", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text())["examples"] == 450
    assert load_model(m).reduction.label_counts[0] == 450
    for extra in ([], ["--dask", cluster]):
        cli(["predict", "-i", m, str(tmp_path / "test.txt"), "--quiet", "-p", str(tmp_path / f"p{len(extra)}.txt"),
             "--report", str(tmp_path / f"p{len(extra)}.json")] + extra)
    assert (tmp_path / "p0.txt").read_bytes() == (tmp_path / "p2.txt").read_bytes()
    a, b = (json.loads((tmp_path / f"p{i}.json").read_text()) for i in (0, 2))
    assert a["examples"] == b["examples"] == 150 and a["p@1"] == b["p@1"]


def _sorted_label_set_lines(n, seed):
    """Label-set lines sorted by their first label (as PyPI names are by name: a label's examples
    come together), so that contiguous stretches of the file hold few labels."""
    return sorted(_label_set_lines(n, seed), key=lambda line: int(line.split(",")[0].split(" ")[0]))


def test_plt_shared_tree_is_one_process_tree(cluster, sets, tmp_path):
    """plt with the shuffled buffer on 2 workers: the label tree is built once, before the first
    pass, from both shards' label-centroid sums, which add up to the whole input's: the tree equals
    the one-process tree of a buffer holding the whole input (here: every example, no holdout)."""
    common = ["-r", "plt", "--multilabel", "-k", "12", str(sets / "train.vw"), "--quiet", "--no-average",
              "--shuffle-buffer", "--leaf-negatives"]
    cli(["train", *common, "-f", str(tmp_path / "one.lt")])
    cli(["train", *common, "-f", str(tmp_path / "d.lt"), "--dask", cluster, "--report", str(tmp_path / "r.json")])
    one = model_arrays(*(lambda m: (m.learner, m.reduction))(load_model(str(tmp_path / "one.lt"))))
    d = model_arrays(*(lambda m: (m.learner, m.reduction))(load_model(str(tmp_path / "d.lt"))))
    for name in ("reduction/parent", "reduction/label", "reduction/child"):
        np.testing.assert_array_equal(d[name], one[name], err_msg=name)
    r = json.loads((tmp_path / "r.json").read_text())
    # data-parallel from the first example: the early syncs of pass 1 (after 100, 125, 156, 195 of
    # 600 examples a shard: 5 rounds), not two rounds of shards in turn
    assert r["examples"] == 1200 and r["dask_syncs"] == 5
    np.testing.assert_array_equal(load_model(str(tmp_path / "d.lt")).reduction.label_counts,
                                  _label_counts(sets / "train.vw"))


def test_shared_sketch_sums_add_up_to_the_whole_input(sets):
    """The label-centroid sums of the shards (``shard_label_sketch``) add up to those of the whole
    file (``plt.label_sketch`` over one batch of every example): the tree's input does not depend
    on the cut."""
    from lomtree_cli import parsing
    from lomtree_cli.config import InputConfig
    from lomtree_cli.distributed import shard_label_counts, shard_label_sketch, shards_of
    from lomtree_cli.reductions.plt import _label_pairs, label_sketch

    cfg = InputConfig(multilabel=True)
    path = str(sets / "train.vw")
    whole, errs = parsing.parse_chunk((sets / "train.vw").read_bytes(), cfg, path)
    assert not errs
    seen = np.arange(1, 13)
    X, cnt = label_sketch([whole], [_label_pairs(whole, np.ones(len(whole), bool))], seen, 12, 6)
    shards = shards_of([path], 3)
    counts = sum(shard_label_counts(s, cfg, 12) for s in shards)
    assert counts[1:].tolist() == _label_counts(sets / "train.vw")[1:].tolist()
    parts = [shard_label_sketch(s, cfg, 12, seen, 6) for s in shards]
    np.testing.assert_allclose(sum(x for x, _ in parts), X, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(sum(c for _, c in parts), cnt)
    assert cnt.sum() == _label_counts(sets / "train.vw")[1:].sum()


def test_shuffled_shard_learns_each_example_once_in_a_random_order(sets, tmp_path):
    """A shard read in a random order (``order``): over its rounds every example is learned exactly
    once (the label counts are the shard's), the order is a permutation drawn the same way by any
    worker, and another pass key draws another one."""
    from lomtree_cli import model_io
    from lomtree_cli.distributed import _train_segment, shard_order, shards_of

    lines = _sorted_label_set_lines(700, 3)
    (tmp_path / "sorted.vw").write_text("\n".join(lines) + "\n")
    m = str(tmp_path / "m.lt")
    cli(["train", "-r", "plt", "--multilabel", "-k", "12", str(sets / "train.vw"), "-f", m, "--quiet",
         "--no-average"])
    data = open(m, "rb").read()
    start = load_model(m).reduction.label_counts.copy()
    shard = shards_of([str(tmp_path / "sorted.vw")], 1)[0]
    cursor, seen, rounds = (0, 0, 0), 0, 0
    while True:
        seg = _train_segment(data, shard, cursor, 256, False, 10, False, 1 << 20, 1.0, (5, 0, 0))
        data, cursor, rounds = seg.model, seg.cursor, rounds + 1
        if seg.done:
            break
    assert rounds == 3 and cursor[0] == 700
    got = model_io.load_model(io.BytesIO(data)).reduction.label_counts - start
    np.testing.assert_array_equal(got, _label_counts(tmp_path / "sorted.vw"))
    a = shard_order(700, (5, 0, 0))
    np.testing.assert_array_equal(a, shard_order(700, (5, 0, 0)))
    assert sorted(a.tolist()) == list(range(700)) and not np.array_equal(a, np.arange(700))
    assert not np.array_equal(a, shard_order(700, (5, 1, 0))) and not np.array_equal(a, shard_order(700, (5, 0, 1)))


def test_plt_on_a_sorted_file_matches_one_process(cluster, tmp_path):
    """A file sorted by label (a label's examples together), plt with the shuffled buffer: one process
    replays the whole input in a random order; on 2 workers each reads its shard in a random order
    over the shared tree, and P@1 / P@3 stay within 2 points of one process."""
    (tmp_path / "train.vw").write_text("\n".join(_sorted_label_set_lines(2400, 4)) + "\n")
    (tmp_path / "test.vw").write_text("\n".join(_label_set_lines(600, 5)) + "\n")
    common = ["-r", "plt", "--multilabel", "-k", "12", str(tmp_path / "train.vw"), "--quiet", "--no-average",
              "--shuffle-buffer", "--leaf-negatives"]
    _one_process_and_dask_agree(tmp_path, common, tmp_path / "test.vw", ["--dask", cluster])
