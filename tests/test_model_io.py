"""Model files: exact round trips, continued training, and refusal of bad files."""

import json
import os
import threading

import numpy as np
import pytest

from lomtree_cli import model_io
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.errors import ModelFormatError
from lomtree_cli.learner import LinearLearner
from lomtree_cli.parsing import parse_bytes
from lomtree_cli.reductions.oaa import OneAgainstAll
from tests.helpers import separable_lines

ICFG = InputConfig(bits=12)


def batch(seed, n=150, k=6):
    lines = separable_lines(k, n, seed=seed, noise_feats=3)
    return parse_bytes(("\n".join(lines) + "\n").encode(), ICFG)


def fresh(k=6, **kw):
    lrn = LinearLearner(LearnerConfig(**kw), ICFG.bits, k)
    return OneAgainstAll(ReductionConfig(name="oaa", k=k), lrn)


def test_roundtrip_predicts_identically(tmp_path):
    red = fresh()
    b = batch(0)
    red.process(b, np.ones(len(b), bool))
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, ICFG, red.learner, red, passes_done=1)
    m = model_io.load_model(path)
    np.testing.assert_array_equal(m.learner.arrays.table, red.learner.arrays.table)
    np.testing.assert_array_equal(m.learner.arrays.S, red.learner.arrays.S)
    b2 = batch(1)
    np.testing.assert_array_equal(m.reduction.predict(b2), red.predict(b2))
    assert m.passes_done == 1
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".writing")]


@pytest.mark.parametrize("sgd", [False, True])
def test_save_load_continue_equals_uninterrupted(tmp_path, sgd):
    b1, b2 = batch(2), batch(3)
    whole = fresh(sgd=sgd)
    whole.process(b1, np.ones(len(b1), bool))
    whole.process(b2, np.ones(len(b2), bool))
    part = fresh(sgd=sgd)
    part.process(b1, np.ones(len(b1), bool))
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, ICFG, part.learner, part)
    m = model_io.load_model(path)
    m.reduction.process(b2, np.ones(len(b2), bool))
    np.testing.assert_array_equal(m.learner.arrays.table, whole.learner.arrays.table)
    np.testing.assert_array_equal(m.learner.arrays.hp, whole.learner.arrays.hp)


def test_save_is_deterministic(tmp_path):
    files = []
    for i in range(2):
        red = fresh()
        b = batch(4)
        red.process(b, np.ones(len(b), bool))
        p = str(tmp_path / f"m{i}.lt")
        model_io.save_model(p, ICFG, red.learner, red)
        files.append(open(p, "rb").read())
    assert files[0] == files[1]


@pytest.fixture
def saved(tmp_path):
    red = fresh()
    b = batch(5)
    red.process(b, np.ones(len(b), bool))
    p = str(tmp_path / "m.lt")
    model_io.save_model(p, ICFG, red.learner, red)
    return p


def test_truncated_files_are_refused(saved, tmp_path):
    data = open(saved, "rb").read()
    for cut in sorted({0, 1, 10, 100, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1}):
        p = tmp_path / f"t{cut}.lt"
        p.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError):
            model_io.load_model(str(p))


def test_byte_flips_are_refused(saved, tmp_path):
    data = bytearray(open(saved, "rb").read())
    rng = np.random.default_rng(0)
    refused = 0
    for i, pos in enumerate(rng.integers(0, len(data), 60)):
        d = bytearray(data)
        d[pos] ^= 1 << int(rng.integers(0, 8))
        p = tmp_path / f"f{i}.lt"
        p.write_bytes(bytes(d))
        try:
            m = model_io.load_model(str(p))
        except ModelFormatError:
            refused += 1
            continue
        # a flip in zip padding/metadata that changes nothing may load; then it must be identical
        ref = model_io.load_model(saved)
        np.testing.assert_array_equal(m.learner.arrays.table, ref.learner.arrays.table)
    assert refused > 50


def test_wrong_version_and_magic(saved, tmp_path):
    with np.load(saved, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays["header"].tobytes())
    for key, val in (("format_version", 99), ("format", "something-else")):
        h = dict(header, **{key: val})
        arrays2 = dict(arrays, header=np.frombuffer(json.dumps(h).encode(), np.uint8))
        p = tmp_path / f"{key}.lt"
        with open(p, "wb") as f:
            np.savez(f, **arrays2)
        with pytest.raises(ModelFormatError, match="version|format"):
            model_io.load_model(str(p))


def test_missing_and_non_model_files(tmp_path):
    with pytest.raises(ModelFormatError, match="not found"):
        model_io.load_model(str(tmp_path / "nope.lt"))
    p = tmp_path / "text.lt"
    p.write_text("1 | a b c\n")
    with pytest.raises(ModelFormatError):
        model_io.load_model(str(p))


def test_inspect(saved):
    info = model_io.inspect_model(saved)
    assert info["reduction"] == "oaa" and info["k"] == 6 and info["bits"] == 12


def test_no_pickle_anywhere_in_the_package():
    root = os.path.join(os.path.dirname(__file__), "..", "lomtree_cli")
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(dirpath, f)).read()
                assert "import pickle" not in text and "allow_pickle=True" not in text, f


def test_fast_member_reader_equals_numpy(saved):
    """Members read straight from the file (no zip CRC pass) equal numpy's reading of them."""
    header, got = model_io._read_members(saved)
    with np.load(saved, allow_pickle=False) as z:
        assert header == json.loads(z["header"].tobytes())
        assert sorted(z.files) == sorted([*got, "header"])
        for name in got:
            ref = z[name]
            assert got[name].dtype == ref.dtype and got[name].shape == ref.shape
            np.testing.assert_array_equal(got[name], ref)


def test_predict_reads_no_optimiser_state(saved, tmp_path):
    """A damaged G member: ``lomtree predict``'s load (which never reads G, N) predicts exactly as
    the intact model; a load that uses the optimiser state (training, inspect) refuses the file."""
    with np.load(saved, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["learner/G"] = arrays["learner/G"] + np.float32(1)
    bad = tmp_path / "bad.lt"
    with open(bad, "wb") as f:
        np.savez(f, **arrays)
    b = batch(9)
    good = model_io.load_model(saved, predict_only=True, skip_unused=True)
    lazy = model_io.load_model(str(bad), predict_only=True, skip_unused=True)
    np.testing.assert_array_equal(lazy.reduction.process(b, np.zeros(len(b), bool))[0],
                                  good.reduction.process(b, np.zeros(len(b), bool))[0])
    for kw in ({}, {"predict_only": True}):
        with pytest.raises(ModelFormatError, match="checksum mismatch in learner/G"):
            model_io.load_model(str(bad), **kw)


@pytest.mark.parametrize("rows", [64, 1000, 1 << 18])
def test_streamed_members_are_numpys(tmp_path, monkeypatch, rows):
    """The weight table's members, written ``rows`` table rows at a time, hold what numpy selects
    from the table (slots with a non-zero w, G or N bit pattern, then each column there), and every
    member's bytes in the file are ``np.save``'s of that array (the format ``np.savez`` wrote)."""
    import io
    import zipfile

    from lomtree_cli import learner as learner_mod

    monkeypatch.setattr(learner_mod, "SAVE_ROWS", rows)
    red = fresh()
    b = batch(6)
    red.process(b, np.ones(len(b), bool))
    table = red.learner.arrays.table
    table[7, 2] = np.float32(-0.0)  # kept: only its sign bit is set
    path = str(tmp_path / "m.lt")
    model_io.save_model(path, ICFG, red.learner, red)
    nz = np.flatnonzero((table.view(np.uint32) != 0).any(axis=1))
    want = {"learner/nz": nz, "learner/w": table[nz, 0], "learner/G": table[nz, 1], "learner/N": table[nz, 2]}
    assert 7 in nz and 0 < nz.size < table.shape[0]
    with zipfile.ZipFile(path) as z:
        for name, a in want.items():
            buf = io.BytesIO()
            np.save(buf, a)
            assert z.read(name + ".npy") == buf.getvalue(), name
        assert sorted(z.namelist())[0] == "header.npy" and len(z.namelist()) == 8
    m = model_io.load_model(path)
    np.testing.assert_array_equal(m.learner.arrays.table.view(np.uint32), table.view(np.uint32))


def test_streamed_save_refuses_a_diverged_table(tmp_path, monkeypatch):
    """A NaN in a later piece of the table: nothing is written, an earlier model stays."""
    from lomtree_cli import learner as learner_mod
    from lomtree_cli.errors import LomtreeError

    monkeypatch.setattr(learner_mod, "SAVE_ROWS", 64)
    red = fresh()
    b = batch(7)
    red.process(b, np.ones(len(b), bool))
    path = tmp_path / "m.lt"
    path.write_bytes(b"old")
    red.learner.arrays.table[-1, 1] = np.nan
    with pytest.raises(LomtreeError, match=r"NaN or infinite numbers \(learner/G\): not written"):
        model_io.save_model(str(path), ICFG, red.learner, red)
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["m.lt"]
    # the threads that made the pieces and flushed the file have stopped
    assert not [t.name for t in threading.enumerate() if t.name in ("lomtree-save", "lomtree-flush")]
