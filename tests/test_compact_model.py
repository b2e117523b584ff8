"""Predict-only model files (``--predict_only_model``) and weight pruning (``--weight-threshold``):
the same predictions as the full model, exactly the full model's weights with the small ones
zeroed, refused for training, and checked on load like every model file."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import model_io
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.errors import ConfigError, ModelFormatError
from lomtree_cli.learner import LinearLearner
from lomtree_cli.parsing import parse_bytes
from lomtree_cli.reductions.oaa import OneAgainstAll
from tests.helpers import cli, separable_lines

ICFG = InputConfig(bits=12)
COMPACT = model_io.Compact()


def batch(seed, n=150, k=6, icfg=ICFG):
    lines = separable_lines(k, n, seed=seed, noise_feats=3)
    return parse_bytes(("\n".join(lines) + "\n").encode(), icfg)


def trained(k=6, seed=0, icfg=ICFG, **kw):
    red = OneAgainstAll(ReductionConfig(name="oaa", k=k), LinearLearner(LearnerConfig(**kw), icfg.bits, k))
    b = batch(seed, icfg=icfg)
    red.process(b, np.ones(len(b), bool))
    return red


def prediction_weights(red) -> np.ndarray:
    """The weights a full model predicts with (its averaged ones under --average), by numpy."""
    w = red.learner.arrays.table[:, 0].copy()
    if red.learner.averaging:
        from lomtree_cli.kernels.linear import HP_CLOCK

        T = red.learner.arrays.hp[HP_CLOCK]
        w = (w.astype(np.float64) - red.learner.arrays.avg / T).astype(np.float32)
    return w


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("bits", [16, 4])  # 2^16 slots: a slot list; 2^4, almost all used: a bitmap
def test_predict_only_predicts_exactly_as_the_full_model(tmp_path, average, bits):
    icfg = InputConfig(bits=bits)
    red = trained(icfg=icfg, average=average)
    ref = prediction_weights(red)
    full, po = str(tmp_path / "full.lt"), str(tmp_path / "po.lt")
    model_io.save_model(full, icfg, red.learner, red)
    model_io.save_model(po, icfg, red.learner, red, compact=COMPACT)
    with np.load(po) as z:
        names = set(z.files)
        header = json.loads(z["header"].tobytes())
    assert not names & {"learner/G", "learner/N", "learner/avg"}
    assert ("learner/slot_bits" in names) == (bits == 4) and ("learner/slot_gaps" in names) == (bits == 16)
    assert "learner/nz" not in names
    if bits == 16:
        with np.load(po) as z:
            assert z["learner/slot_gaps"].dtype == np.uint16
    assert header["format_version"] == model_io.PREDICT_ONLY_VERSION and header["predict_only"] is True
    a = model_io.load_model(full, predict_only=True)
    b = model_io.load_model(po, predict_only=True, skip_unused=True)
    np.testing.assert_array_equal(b.learner.arrays.table[:, 0].view(np.uint32),
                                  np.where(a.learner.arrays.table[:, 0] == 0, np.float32(0),
                                           a.learner.arrays.table[:, 0]).view(np.uint32))
    np.testing.assert_array_equal(b.learner.arrays.table[:, 0], ref)
    test = batch(9, icfg=icfg)
    pa, pb = a.reduction.predict_top(test, 3), b.reduction.predict_top(test, 3)
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x, y)
    assert model_io.inspect_model(po)["predict_only"] and not model_io.inspect_model(full)["predict_only"]
    assert len(open(po, "rb").read()) < len(open(full, "rb").read())


@pytest.mark.parametrize("threshold", [1e-3, 0.01, 0.1, 1.0])
def test_pruned_weights_are_the_full_ones_with_small_ones_zeroed(tmp_path, threshold):
    red = trained()
    w = red.learner.arrays.table[:, 0].copy()
    po = str(tmp_path / "po.lt")
    model_io.save_model(po, ICFG, red.learner, red, compact=model_io.Compact(threshold))
    got = model_io.load_model(po, predict_only=True).learner.arrays.table[:, 0]
    want = np.where(np.abs(w) < threshold, np.float32(0), w)
    np.testing.assert_array_equal(got, want)
    assert 0 < np.count_nonzero(got) < np.count_nonzero(w) or threshold == 1e-3
    assert model_io.inspect_model(po)["weight_threshold"] == threshold
    np.testing.assert_array_equal(red.learner.arrays.table[:, 0], w)  # the model in memory is left alone


def test_slot_bitmap_decodes_as_numpy(monkeypatch):
    """The bitmap decoder, a piece at a time, against numpy's whole-array reading."""
    from lomtree_cli import learner as learner_mod

    monkeypatch.setattr(learner_mod, "SAVE_ROWS", 64)
    rng = np.random.default_rng(1)
    for size in (8, 64, 200 * 8, 1 << 12):
        mask = rng.random(size) < 0.3
        bits = np.packbits(mask, bitorder="little")
        got = learner_mod._slots({"slot_bits": bits}, size, True)
        np.testing.assert_array_equal(got, np.flatnonzero(mask))
        assert got.dtype == np.int64
    with pytest.raises(ValueError, match="bitmap"):
        learner_mod._slots({"slot_bits": np.zeros(3, np.uint8)}, 64, True)
    with pytest.raises(ValueError, match="slot index"):  # uint32 lists belong to predict-only files
        learner_mod._slots({"nz": np.arange(3, dtype=np.uint32)}, 64, False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1 << 20), max_size=60, unique=True), st.integers(-1, 5))
def test_slot_gaps_decode_to_the_slots(slots, shift):
    """``gap_code`` / ``gap_decode`` against the slots themselves, gaps past ``GAP_STEP`` included,
    and coded after a previous slot ``prev`` (a piece of a save): the codes continue the decode."""
    from lomtree_cli.learner import GAP_STEP, gap_code, gap_decode

    slots = np.array(sorted(s + 3 * GAP_STEP * (s % 3) for s in slots), dtype=np.int64)
    codes = gap_code(slots)
    assert codes.dtype == np.uint16
    np.testing.assert_array_equal(gap_decode(codes), slots)
    # long gaps cost one code each GAP_STEP, short ones a single code
    g = np.diff(slots, prepend=-1)
    assert codes.shape[0] == int(((g - 1) // GAP_STEP + 1).sum())
    cut = len(slots) // 2
    if cut:
        head, tail = gap_code(slots[:cut]), gap_code(slots[cut:], int(slots[cut - 1]))
        np.testing.assert_array_equal(np.concatenate([head, tail]), codes)


def test_version_2_predict_only_files_are_still_read(tmp_path):
    """A version 2 file (uint32 ``nz``, as written before the gap codes) loads to the same table."""
    icfg = InputConfig(bits=16)  # a slot list (gap codes), not a bitmap
    red = trained(icfg=icfg)
    po = str(tmp_path / "po.lt")
    model_io.save_model(po, icfg, red.learner, red, compact=COMPACT)
    want = model_io.load_model(po, predict_only=True).learner.arrays.table[:, 0]
    from lomtree_cli.learner import gap_decode

    def to_v2(arrays, header):
        arrays["learner/nz"] = gap_decode(arrays.pop("learner/slot_gaps")).astype(np.uint32)
        header["format_version"] = 2
        header["checksums"] = {k: model_io._digest(v) for k, v in arrays.items() if k != "header"}

    old = str(tmp_path / "v2.lt")
    _rewrite(po, old, to_v2)
    np.testing.assert_array_equal(model_io.load_model(old, predict_only=True).learner.arrays.table[:, 0], want)


def test_training_on_a_predict_only_model_is_refused(tmp_path):
    red = trained()
    po = str(tmp_path / "po.lt")
    model_io.save_model(po, ICFG, red.learner, red, compact=COMPACT)
    with pytest.raises(ConfigError, match="predict-only model .* no optimiser state"):
        model_io.load_model(po)
    with pytest.raises(ValueError, match="cannot be trained"):
        lrn = LinearLearner(LearnerConfig(), ICFG.bits, 6)
        lrn.load_state({"size": np.array([1 << 12]), "nz": np.zeros(0, np.uint32), "w": np.zeros(0, np.float32)},
                       {"eta_current": 0.5, "sgd_t": 0.0}, weights_only=True)


def _rewrite(src, dst, edit):
    with np.load(src, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays["header"].tobytes())
    edit(arrays, header)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    with open(dst, "wb") as f:
        np.savez(f, **arrays)


def test_damaged_predict_only_files_are_refused(tmp_path):
    icfg = InputConfig(bits=16)  # a slot list (2^4: a bitmap, below)
    red = trained(icfg=icfg)
    po = str(tmp_path / "po.lt")
    model_io.save_model(po, icfg, red.learner, red, compact=COMPACT)
    data = bytearray(open(po, "rb").read())
    rng = np.random.default_rng(0)
    refused = 0
    ref = model_io.load_model(po, predict_only=True).learner.arrays.table
    for i, pos in enumerate(rng.integers(0, len(data), 40)):
        d = bytearray(data)
        d[pos] ^= 1 << int(rng.integers(0, 8))
        p = tmp_path / f"f{i}.lt"
        p.write_bytes(bytes(d))
        try:
            m = model_io.load_model(str(p), predict_only=True, skip_unused=True)
        except ModelFormatError:
            refused += 1
            continue
        np.testing.assert_array_equal(m.learner.arrays.table, ref)
    assert refused > 30

    def checksummed(arrays, header):
        header["checksums"] = {k: model_io._digest(v) for k, v in arrays.items() if k != "header"}

    edits = {
        "version without predict_only": lambda a, h: h.pop("predict_only"),
        "predict_only in a version-1 file": lambda a, h: h.update(format_version=1),
        "negative threshold": lambda a, h: h.update(weight_threshold=-1.0),
        "gaps past the table": lambda a, h: (a.update({"learner/slot_gaps": np.concatenate(
            [a["learner/slot_gaps"], np.zeros(2, np.uint16), np.ones(1, np.uint16)])}), checksummed(a, h)),
        "gaps ending in a move": lambda a, h: (a.update({"learner/slot_gaps": np.concatenate(
            [a["learner/slot_gaps"][:-1], np.zeros(1, np.uint16)])}), checksummed(a, h)),
        "int32 gaps": lambda a, h: (a.update({"learner/slot_gaps": a["learner/slot_gaps"].astype(np.int32)}),
                                    checksummed(a, h)),
        "gaps and a list": lambda a, h: (a.update({"learner/nz": np.zeros(0, np.uint32)}), checksummed(a, h)),
        "one slot more": lambda a, h: (a.update({"learner/slot_gaps": np.concatenate(
            [a["learner/slot_gaps"], np.ones(1, np.uint16)])}), checksummed(a, h)),
        "short weights": lambda a, h: (a.update({"learner/w": a["learner/w"][:-1].copy()}), checksummed(a, h)),
    }
    for name, edit in edits.items():
        bad = str(tmp_path / "bad.lt")
        _rewrite(po, bad, edit)
        with pytest.raises(ModelFormatError):
            model_io.load_model(bad, predict_only=True)
    small = InputConfig(bits=4)
    red = trained(icfg=small)
    model_io.save_model(po, small, red.learner, red, compact=COMPACT)
    for name, edit in {
        "short bitmap": lambda a, h: (a.update({"learner/slot_bits": a["learner/slot_bits"][:1].copy()}),
                                      checksummed(a, h)),
        "bitmap and list": lambda a, h: (a.update({"learner/nz": np.zeros(0, np.uint32)}), checksummed(a, h)),
        "one bit flipped": lambda a, h: (a.update({"learner/slot_bits": a["learner/slot_bits"] ^ np.uint8(1)}),
                                      checksummed(a, h)),
    }.items():
        bad = str(tmp_path / "bad.lt")
        _rewrite(po, bad, edit)
        with pytest.raises(ModelFormatError):
            model_io.load_model(bad, predict_only=True)


def test_full_models_keep_format_version_1(tmp_path):
    red = trained()
    full = str(tmp_path / "full.lt")
    model_io.save_model(full, ICFG, red.learner, red)
    with np.load(full) as z:
        assert json.loads(z["header"].tobytes())["format_version"] == 1
        assert z["learner/nz"].dtype == np.int64 and "predict_only" not in json.loads(z["header"].tobytes())


def _cli(*args, cwd):
    """``lomtree ARGS`` in this process, file names taken in ``cwd``: a CompletedProcess-like result."""
    from types import SimpleNamespace

    import os

    here = os.getcwd()
    os.chdir(cwd)
    try:
        code, out, err = cli(*args)
    finally:
        os.chdir(here)
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def test_cli_predict_only_model_plt_multilabel(tmp_path):
    """``train --predict_only_model`` (and the conversion ``train -i FULL EMPTY -f PO
    --predict_only_model``): ``predict`` prints the same bytes as with the full model."""
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(400):
        labs = sorted(set(rng.integers(1, 13, size=int(rng.integers(1, 4))).tolist()))
        words = " ".join(f"w{l}" for l in labs) + " " + " ".join(f"n{x}" for x in rng.integers(0, 30, 4))
        lines.append(",".join(map(str, labs)) + " | " + words)
    (tmp_path / "train.vw").write_text("\n".join(lines[:300]) + "\n")
    (tmp_path / "test.vw").write_text("\n".join(lines[300:]) + "\n")
    (tmp_path / "empty.vw").write_text("")
    common = ["-r", "plt", "--multilabel", "-k", "12", "-b", "14", "train.vw", "--quiet"]
    for args in (["-f", "full.lt"], ["-f", "po.lt", "--predict_only_model"]):
        r = _cli("train", *common, *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = _cli("train", "-i", "full.lt", "empty.vw", "-f", "conv.lt", "--predict-only-model", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    preds = {}
    for m in ("full", "po", "conv"):
        r = _cli("predict", "-i", f"{m}.lt", "test.vw", "-p", f"{m}.pred", "--top-k", "3", "--quiet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        preds[m] = (tmp_path / f"{m}.pred").read_bytes()
    assert preds["full"] and preds["po"] == preds["full"] and preds["conv"] == preds["full"]
    assert (tmp_path / "po.lt").stat().st_size < (tmp_path / "full.lt").stat().st_size
    r = _cli("inspect", "po.lt", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["predict_only"] is True
    # the tree's int64 arrays are stored as int32 (listed in the header) and read back as int64
    with np.load(tmp_path / "po.lt") as z:
        narrowed = json.loads(z["header"].tobytes())["narrowed"]
        assert "reduction/parent" in narrowed and all(z[n].dtype == np.int32 for n in narrowed)
    loaded = model_io.load_model(str(tmp_path / "po.lt"), predict_only=True)
    assert loaded.reduction.state()["parent"].dtype == np.int64

    def checksummed(arrays, header):
        header["checksums"] = {k: model_io._digest(v) for k, v in arrays.items() if k != "header"}

    for edit in (lambda a, h: h.update(narrowed=h["narrowed"] + ["learner/w"]),
                 lambda a, h: h.update(narrowed=h["narrowed"] + ["reduction/nothing"]),
                 lambda a, h: h.update(narrowed="reduction/parent"),
                 lambda a, h: (a.update({"reduction/parent": a["reduction/parent"].astype(np.int64)}),
                               checksummed(a, h))):
        _rewrite(str(tmp_path / "po.lt"), str(tmp_path / "bad.lt"), edit)
        with pytest.raises(ModelFormatError, match="narrowed"):
            model_io.load_model(str(tmp_path / "bad.lt"), predict_only=True)
    r = _cli("train", "-i", "po.lt", "train.vw", "-f", "again.lt", "--quiet", cwd=tmp_path)
    assert r.returncode == 2 and "predict-only model" in r.stderr and "Traceback" not in r.stderr
    for bad in (["-f", "x.lt", "--weight-threshold", "0.1"], ["--predict_only_model"],
                ["-f", "x.lt", "--predict_only_model", "--weight-threshold", "-1"],
                ["-f", "x.lt", "--predict_only_model", "--weight-threshold", "nan"]):
        r = _cli("train", *common, *bad, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("error:") and len(r.stderr.splitlines()) == 1, (bad, r.stderr)


def test_cli_predict_only_model_after_several_passes(tmp_path):
    """--passes 3 with holdout (the best pass's model written, learning going on after a save),
    with --average: the predict-only model predicts as the full model of the same run."""
    (tmp_path / "train.vw").write_text("\n".join(separable_lines(6, 300, seed=4, noise_feats=3)) + "\n")
    (tmp_path / "test.vw").write_text("\n".join(separable_lines(6, 100, seed=5, noise_feats=3)) + "\n")
    common = ["-r", "oaa", "-k", "6", "train.vw", "--passes", "3", "--average", "--quiet"]
    for args in (["-f", "full.lt"], ["-f", "po.lt", "--predict_only_model"]):
        r = _cli("train", *common, *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    for m in ("full", "po"):
        r = _cli("predict", "-i", f"{m}.lt", "test.vw", "-p", f"{m}.pred", "--probabilities", "--quiet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "po.pred").read_bytes() == (tmp_path / "full.pred").read_bytes()
