"""Corrupt model files are refused with one line (exit code 2), never loaded wrong, never run code.

For every reduction of ``REGISTRY`` whose module exists: truncations (a dense sample here, every
byte in the ``slow`` test) and random bit flips of a saved model either raise
``ModelFormatError`` or, when the damage hits bytes that carry no information (zip timestamps,
padding), load a model that re-saves to exactly the original bytes. A "silent load" (a model
that loads but differs) fails the test. The CLI is spot-checked: exit code 2, one ``error:`` line.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli import model_io
from lomtree_cli.errors import ModelFormatError
from tests.robustness_helpers import ALL_REDUCTIONS, ROOT, available, run_cli, train_api, write_lines

PKG = pathlib.Path(ROOT) / "lomtree_cli"


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("corrupt")
    return write_lines(d / "train.vw", 8, 300, seed=0)


@pytest.fixture(scope="module")
def models(tmp_path_factory, train_file):
    """reduction name -> (path, bytes) of a small trained model (built lazily)."""
    d = tmp_path_factory.mktemp("models")
    cache = {}

    def get(name):
        if name not in cache:
            path = str(d / f"{name}.lt")
            train_api(name, [train_file], path)
            cache[name] = (path, pathlib.Path(path).read_bytes())
        return cache[name]

    return get


def resave_bytes(m, tmp_path) -> bytes:
    p = str(tmp_path / "resaved.lt")
    model_io.save_model(p, m.input_config, m.learner, m.reduction, m.passes_done)
    return pathlib.Path(p).read_bytes()


def try_variants(original: bytes, variants, tmp_path):
    """Load every corrupted variant; returns (tried, refused, identical); fails on a silent load."""
    p = tmp_path / "variant.lt"
    tried = refused = identical = 0
    for label, data in variants:
        tried += 1
        p.write_bytes(data)
        try:
            m = model_io.load_model(str(p))
        except ModelFormatError as e:
            msg = str(e)
            assert msg.isprintable() and str(p) in msg, msg
            refused += 1
            continue
        assert resave_bytes(m, tmp_path) == original, f"silent load of a corrupted model ({label})"
        identical += 1
    return tried, refused, identical


def truncations(data: bytes, stride: int):
    cuts = set(range(0, len(data), stride)) | set(range(max(0, len(data) - 64), len(data))) | set(range(64))
    return [(f"cut{c}", data[:c]) for c in sorted(cuts)]


def flips(data: bytes, n: int, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for pos, bit in zip(rng.integers(0, len(data), n), rng.integers(0, 8, n)):
        d = bytearray(data)
        d[pos] ^= 1 << int(bit)
        out.append((f"flip{pos}.{bit}", bytes(d)))
    for pos in rng.integers(0, len(data), n // 4):  # whole-byte garbage
        d = bytearray(data)
        d[pos] = (d[pos] + int(rng.integers(1, 256))) % 256
        out.append((f"byte{pos}", bytes(d)))
    return out


@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:truncate+flip")
def test_truncations_and_flips_never_load_wrong(name, models, tmp_path):
    available(name)
    path, original = models(name)
    assert model_io.load_model(path) is not None
    tried, refused, identical = try_variants(original, truncations(original, 29) + flips(original, 160, 1),
                                             tmp_path)
    # refused > 80%: the rest hit bytes that carry nothing (zip timestamps, padding, and the zip
    # CRC-32 fields of members other than the header, which model_io does not re-check: every
    # member's bytes are covered by its xxh3 checksum)
    assert refused + identical == tried and refused > 0.8 * tried


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:every-truncation")
def test_every_truncation_and_many_flips(name, models, tmp_path):
    available(name)
    _, original = models(name)
    variants = [(f"cut{c}", original[:c]) for c in range(len(original))] + flips(original, 4000, 2)
    tried, refused, identical = try_variants(original, variants, tmp_path)
    print(f"{name}: {tried} corrupted variants, {refused} refused, {identical} identical, 0 silent")


def _rewrite(path, out, edit):
    """Re-pack a model with ``edit(arrays, header)`` applied and consistent checksums (a 'valid' zip)."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays.pop("header").tobytes())
    edit(arrays, header)
    header["checksums"] = {k: model_io._digest(a) for k, a in arrays.items()}
    with open(out, "wb") as f:
        np.savez(f, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    return out


@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:inconsistent")
def test_inconsistent_but_wellformed_files_are_refused(name, models, tmp_path):
    """Zip and checksums fine, content inconsistent: structure checks refuse it."""
    cls = available(name)
    path, _ = models(name)

    def drop_member(arrays, header):
        arrays.pop(sorted(k for k in arrays if k.startswith("reduction/") or k == "learner/w")[0])

    def bits(arrays, header):
        header["input"]["bits"] = 12

    def wrong_dtype(arrays, header):
        key = sorted(k for k in arrays if k.startswith("reduction/") or k == "learner/w")[0]
        arrays[key] = arrays[key].astype(np.float64 if arrays[key].dtype != np.float64 else np.int32)

    def shorter(arrays, header):
        key = sorted(k for k in arrays if k.startswith("reduction/") or k == "learner/model_S")[0]
        arrays[key] = arrays[key][:-1]

    def bad_index(arrays, header):
        nz = arrays["learner/nz"].copy()
        if nz.size == 0:  # no weights (table): an index list that points nowhere, values to match
            nz = np.array([0], np.int64)
            for c in ("w", "G", "N"):
                if f"learner/{c}" in arrays:
                    arrays[f"learner/{c}"] = np.ones(1, np.float32)
        nz[-1] = 1 << 40
        arrays["learner/nz"] = nz

    edits = {"drop_member": drop_member, "bits": bits, "wrong_dtype": wrong_dtype, "shorter": shorter,
             "bad_index": bad_index}
    if cls.needs_k:
        def k_changed(arrays, header):
            header["reduction_config"]["k"] = header["reduction_config"]["k"] + 3
        edits["k_changed"] = k_changed
    loaded_anyway = []
    for label, edit in edits.items():
        p = _rewrite(path, str(tmp_path / f"{label}.lt"), edit)
        try:
            model_io.load_model(p)
        except ModelFormatError as e:
            assert str(e).isprintable()
            continue
        loaded_anyway.append(label)
    assert not loaded_anyway, f"{name}: inconsistent model files loaded: {loaded_anyway}"


@pytest.mark.parametrize("name", ALL_REDUCTIONS, ids=lambda n: f"{n}:cli-exit-2")
def test_cli_refuses_corrupt_models_with_exit_2(name, models, tmp_path):
    from lomtree_cli.cli import main

    available(name)
    _, original = models(name)
    rng = np.random.default_rng(7)
    variants = [original[: len(original) // 2], original[:-1], b"", b"PK\x03\x04" + bytes(100)]
    for pos in rng.integers(0, len(original), 6):
        d = bytearray(original)
        d[pos] ^= 0x10
        variants.append(bytes(d))
    p = tmp_path / "bad.lt"
    runner = CliRunner()
    for i, data in enumerate(variants):
        p.write_bytes(data)
        for args in (["predict", "-i", str(p), "--quiet"], ["inspect", str(p)],
                     ["train", "-i", str(p), "--quiet"]):
            res = runner.invoke(main, args, input="1 | a\n")
            if res.exit_code == 0:  # a flip in a byte that carries nothing: the model is intact
                # (for predict: intact in every member predict reads; the optimiser state is not read)
                lazy = args[0] == "predict"
                assert i >= 4 and model_io.load_model(str(p), predict_only=lazy, skip_unused=lazy) is not None
                continue
            assert res.exit_code == 2, (args, res.exit_code, res.stderr, res.exception)
            assert isinstance(res.exception, SystemExit)
            lines = res.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and str(p) in lines[0], res.stderr


def test_cli_subprocess_truncated_model_exit_2(models, tmp_path):
    name = "oaa"
    available(name)
    _, original = models(name)
    p = tmp_path / "half.lt"
    p.write_bytes(original[: len(original) // 2])
    r = run_cli(["predict", "-i", str(p)], stdin=b"1 | a\n")
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err


def test_corrupt_model_is_reported_while_stdin_waits(models, tmp_path):
    """predict starts parsing its input while the model loads; a model whose header reads but whose
    weights are damaged is still reported at once, without waiting for input on an idle stdin."""
    import subprocess
    import sys

    available("oaa")
    path, _ = models("oaa")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["learner/w"] = arrays["learner/w"] + np.float32(1)  # checksum mismatch, header intact
    p = tmp_path / "bad_w.lt"
    with open(p, "wb") as f:
        np.savez(f, **arrays)
    proc = subprocess.Popen([sys.executable, "-m", "lomtree_cli.launch", "predict", "-i", str(p)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        proc.wait(timeout=120)  # stdin stays open and empty
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
    assert proc.returncode == 2 and err.startswith("error: ") and "checksum mismatch in learner/w" in err, err


# ---------------------------------------------------------------------------- no code execution


def _np_load_calls():
    for f in sorted(PKG.rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
                if name == "load" and isinstance(fn, ast.Attribute) and getattr(fn.value, "id", "") in ("np", "numpy"):
                    yield f, node


def test_np_load_is_always_called_with_allow_pickle_false():
    """Any np.load in the package (model_io reads models with it) refuses pickles."""
    for f, node in _np_load_calls():
        kw = {k.arg: k.value for k in node.keywords}
        assert "allow_pickle" in kw and isinstance(kw["allow_pickle"], ast.Constant) \
            and kw["allow_pickle"].value is False, f"{f}:{node.lineno}: np.load without allow_pickle=False"


def test_no_code_loading_modules_in_the_package():
    banned_imports = {"pickle", "cPickle", "marshal", "shelve", "dill", "joblib", "cloudpickle"}
    for f in sorted(PKG.rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & banned_imports, f
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in banned_imports, f
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec"), f"{f}:{node.lineno}: {node.func.id}"
            elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
                assert isinstance(node.value, ast.Constant) and node.value.value is False, f"{f}:{node.lineno}"


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ.get("LOMTREE_PWNED", "/nonexistent/pwned"),))


def test_pickled_members_are_never_executed(models, tmp_path, monkeypatch):
    available("oaa")
    path, _ = models("oaa")
    marker = tmp_path / "pwned"
    monkeypatch.setenv("LOMTREE_PWNED", str(marker))
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    evil = np.empty(1, dtype=object)
    evil[0] = _Boom()
    for target in ("header", "learner/w", "reduction/extra"):
        out = tmp_path / "evil.lt"
        with open(out, "wb") as f:
            np.savez(f, **{**arrays, target: evil})
        with pytest.raises(ModelFormatError):
            model_io.load_model(str(out))
        assert not marker.exists()
