"""Every entry of ``REGISTRY`` keeps the promises of its entry, through the command line.

One test per reduction, on a tiny stream: its class agrees with its entry (name, ``-k`` rule,
label sets, ``predict_top``); training over A then B in one run equals training on A, saving,
and continuing on B with ``-i`` (the model files member by member, only the header's
``passes_done`` differing, and the progressive predictions); ``predict`` prints what the Python
API's ``Classifier`` predicts from the same model file; ``--top-k`` and ``predict_proba`` work
exactly where the entry declares probabilities, ``--multilabel`` where it declares label sets,
``--dask`` is refused where it declares no mode, and otherwise each is one error line naming the
reductions that can. A new entry is checked by adding it; nothing here names a reduction.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from lomtree_cli import Classifier
from lomtree_cli.output import real_strings
from lomtree_cli.reductions.base import Reduction
from lomtree_cli.reductions.registry import REGISTRY
from tests.helpers import cli, one_error
from tests.robustness_helpers import CONTRACT_OPTIONS, available, write_lines

K = 6
#: header fields that may legitimately differ between one run over A+B and A, save, load, B
DIFFERS_AFTER_CONTINUE = {"passes_done"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("conform")
    a = write_lines(d / "a.vw", K, 200, seed=10, noise_feats=3)
    b = write_lines(d / "b.vw", K, 200, seed=11, noise_feats=3)
    t = write_lines(d / "t.vw", K, 40, seed=12, noise_feats=3)
    # entries of real labels (binary and regression): the same streams, labels -1 (odd) or 1 (even)
    signed = [str(d / f"{x}_signed.vw") for x in ("a", "b", "t")]
    for src, dst in zip((a, b, t), signed):
        with open(src) as f, open(dst, "w") as g:
            g.writelines(("1" if int(ln.split(None, 1)[0]) % 2 == 0 else "-1") + " " + ln.split(None, 1)[1]
                         for ln in f)
    sets = d / "sets.vw"
    sets.write_text("".join(f"{1 + i % K},{1 + (i + 2) % K} | c{1 + i % K} c{1 + (i + 2) % K} n{i % 7}\n"
                            for i in range(60)))
    return a, b, t, str(sets), signed


def members(path) -> tuple[dict, dict]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(arrays.pop("header").tobytes()), arrays


def ok(got) -> str:
    code, out, err = got
    assert code == 0, err
    return out


def flags(name: str) -> list:
    """The options of a new model: the entry's own where its continuation needs them."""
    return ["-r", name, "-k", str(K), "-b", "12", "--quiet"] + \
        [f"--{f.replace('_', '-')}={v}" for f, v in CONTRACT_OPTIONS.get(name, {}).items()]


def able(what) -> list:
    return [n for n, spec in REGISTRY.items() if what(spec)]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_reduction_keeps_its_entry(name, files, tmp_path):
    spec, cls = REGISTRY[name], available(name)
    assert cls.name == name and cls.needs_k == spec.needs_k and cls.label_sets == spec.label_sets
    assert (cls.predict_top is not Reduction.predict_top) == spec.probabilities
    a, b, t, sets, signed = files
    if spec.real_labels:
        a, b, t = signed
    whole, first, cont = (str(tmp_path / f"{x}.lt") for x in ("whole", "first", "cont"))
    p_whole, p1, p2 = (tmp_path / f"{x}.txt" for x in ("p_whole", "p1", "p2"))

    # save, load, continue == one run
    ok(cli("train", *flags(name), a, b, "-f", whole, "-p", p_whole, "--invert_hash", tmp_path / "names.txt"))
    ok(cli("train", *flags(name), a, "-f", first, "-p", p1))
    ok(cli("train", "-i", first, b, "-f", cont, "-p", p2, "--quiet"))
    (hw, aw), (hc, ac) = members(whole), members(cont)
    assert sorted(aw) == sorted(ac)
    for k in aw:
        assert aw[k].dtype == ac[k].dtype and aw[k].shape == ac[k].shape, k
        assert aw[k].tobytes() == ac[k].tobytes(), f"member {k} differs after save/load/continue"
    differing = {k for k in set(hw) | set(hc) if hw.get(k) != hc.get(k)}
    assert differing <= DIFFERS_AFTER_CONTINUE, f"header fields differ: {sorted(differing)}"
    assert (hw["passes_done"], hc["passes_done"]) == (1, 2)
    assert p1.read_bytes() + p2.read_bytes() == p_whole.read_bytes()

    # the readable model names each regressor as the entry says (mtree's embeddings are not shown)
    heads = re.findall(r"^regressor \d+(.*):$", (tmp_path / "names.txt").read_text(), re.M)
    assert all(h.startswith(f" ({spec.regressors} ") for h in heads) if spec.regressors else heads == []

    # predict: the command line and the Python API on the same model file
    preds = ok(cli("predict", "-i", cont, t, "-p", "-", "--quiet")).split()
    assert preds == ok(cli("predict", "-i", whole, t, "-p", "-", "--quiet")).split()
    lines = open(t).read().splitlines()
    clf = Classifier.load(cont)
    if spec.real_labels:  # real predictions, printed as VW prints them
        assert real_strings(np.asarray(clf.predict(lines), dtype=np.float64)) == preds
    else:
        assert [str(y) for y in clf.predict(lines).tolist()] == preds
    ok(cli("inspect", cont))

    # probabilities: --top-k and predict_proba exactly where the entry declares them
    code, out, err = cli("predict", "-i", cont, t, "-p", "-", "--top-k", "3", "--quiet")
    if spec.probabilities:
        assert code == 0, err
        rows = out.splitlines()
        assert len(rows) == len(lines) and all(len(r.split()) == 3 for r in rows)
        proba = clf.predict_proba(lines)
        assert proba.shape == (len(lines), K) and np.allclose(proba.sum(axis=1), 1.0)
    else:
        assert "not available for reduction" in one_error(code, err, 2)
        assert not hasattr(clf, "predict_proba")

    # label sets: learned where declared, else one line that names the reductions that learn them
    code, _, err = cli("train", *flags(name), "--multilabel", sets, "-f", tmp_path / "sets.lt")
    if spec.label_sets:
        assert code == 0, err
        ok(cli("predict", "-i", tmp_path / "sets.lt", sets, "-p", tmp_path / "sets.txt", "--quiet"))
    else:
        msg = one_error(code, err, 2)
        assert f"-r {name} does not learn label sets" in msg
        assert all(f"-r {n}" in msg for n in able(lambda s: s.label_sets)), msg

    # Dask: a reduction without a mode is refused before any cluster starts (test_dask runs the others)
    if spec.dask is None:
        msg = one_error(*cli("train", *flags(name), a, "--dask", "local:1", "-f", tmp_path / "d.lt")[::2], 2)
        assert msg.startswith("error: --dask trains " + ", ".join(able(lambda s: s.dask is not None)) + ";"), msg
