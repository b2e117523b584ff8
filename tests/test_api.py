"""The Python API: against the CLI, input kinds, labels, files, sklearn."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
from click.testing import CliRunner

from lomtree_cli import Classifier
from lomtree_cli.api import dict_line, matrix_batch
from lomtree_cli.cli import main
from lomtree_cli.config import InputConfig
from lomtree_cli.model_io import load_model
from lomtree_cli.parsing import parse_bytes

sp = pytest.importorskip("scipy.sparse")

FIXED = ("oaa", "filter", "rtree")
ALL = ("oaa", "lomtree", "filter", "rtree", "cpt", "plt")


def make_data(n=400, d=30, k=6, seed=0, density=0.3):
    """A sparse problem: class c (1..k) is the argmax of k random projections."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=seed, format="csr", dtype=np.float64)
    X.data = np.round(X.data * 4 - 1, 3)  # a few exact zeros kept as explicit entries
    W = rng.normal(size=(d, k))
    y = np.asarray(X @ W).argmax(axis=1) + 1
    return X, y


def libsvm_text(X, y) -> str:
    """LIBSVM lines with 1-based indices (column j = index j + 1), entries as stored."""
    X = X.tocsr()
    out = []
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{j + 1}:{v!r}" for j, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist()))
        out.append(f"{y[i]} {feats}".rstrip())
    return "\n".join(out) + "\n"


def cli(args):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return r


def members(path):
    m = load_model(path)
    from lomtree_cli.model_io import model_arrays

    return m, model_arrays(m.learner, m.reduction)


def same_arrays(path_a, path_b):
    """The two model files hold the same arrays, bit for bit; their loaded models."""
    m_a, a_a = members(path_a)
    m_b, a_b = members(path_b)
    assert set(a_a) == set(a_b)
    for name in a_a:
        np.testing.assert_array_equal(a_a[name], a_b[name], err_msg=name)
    return m_a, m_b


@pytest.mark.parametrize("reduction", ALL)
def test_api_model_equals_cli_model(tmp_path, reduction):
    """fit on a CSR matrix == lomtree train --format libsvm on the same data as LIBSVM text: the
    same weights, tree and predictions; the API's model file predicts the same in the CLI."""
    X, y = make_data()
    k = 6
    (tmp_path / "train.libsvm").write_text(libsvm_text(X, y))
    passes = ["--passes", "2"] if reduction in ("oaa", "lomtree") else []
    cli(["train", "-r", reduction, "-k", str(k), "--format", "libsvm", str(tmp_path / "train.libsvm"),
         "-f", str(tmp_path / "cli.lt"), "--quiet"] + passes)
    clf = Classifier(reduction=reduction, classes=k, passes=2 if passes else 1).fit(X, y)
    clf.save(str(tmp_path / "api.lt"))
    m_cli, m_api = same_arrays(str(tmp_path / "cli.lt"), str(tmp_path / "api.lt"))
    assert m_cli.header["input"] == m_api.header["input"]
    assert m_cli.header["reduction_config"] == m_api.header["reduction_config"]
    assert m_cli.header["learner_meta"] == m_api.header["learner_meta"]
    # the CLI's model in the API and the API's model in the CLI: identical predictions
    Xt, yt = make_data(n=100, seed=1)
    (tmp_path / "test.libsvm").write_text(libsvm_text(Xt, yt))
    api_pred = clf.predict(Xt)
    loaded = Classifier.load(str(tmp_path / "cli.lt"))
    np.testing.assert_array_equal(loaded.predict(Xt), api_pred)
    r = cli(["predict", "-i", str(tmp_path / "api.lt"), str(tmp_path / "test.libsvm"), "-p", "-", "--quiet"])
    assert [int(v) for v in r.output.split()] == api_pred.tolist()
    assert loaded.get_params()["reduction"] == reduction and loaded.get_params()["classes"] == k


def test_sparse_dense_lines_agree():
    X, y = make_data(n=200)
    dense = X.toarray()
    lines = libsvm_text(X, y).splitlines()
    a = Classifier(reduction="oaa", classes=6).fit(X, y)
    b = Classifier(reduction="oaa", classes=6).fit(dense, y)
    c = Classifier(reduction="oaa", classes=6, format="libsvm").fit(lines)  # labels from the lines
    for other in (b, c):
        np.testing.assert_array_equal(a._model.base.arrays.table, other._model.base.arrays.table)
    for Xp in (X, dense, sp.csc_matrix(X), sp.coo_matrix(X), lines):
        np.testing.assert_array_equal(a.predict(Xp), a.predict(X))


def test_array_hashing_is_libsvm_index_plus_one():
    """Column j of an array is hashed as the LIBSVM parser hashes index j + 1 (no seed), zeros
    dropped, the constant last; VW lines name the same slot with the feature "j+1" (seed 0)."""
    cfg = InputConfig(format="libsvm", bits=4)
    X = np.array([[0.0, 2.5, 0.0, -1.0] + [0.0] * 14 + [3.0]])
    b = matrix_batch(X, cfg)
    ref = parse_bytes(b"1 2:2.5 4:-1 19:3\n", cfg)
    np.testing.assert_array_equal(b.indices, ref.indices)
    np.testing.assert_array_equal(b.values, ref.values)
    assert b.indices.tolist() == [2, 4, 19 & 15, cfg.constant_index]
    vw = parse_bytes(b"1 | 2:2.5 4:-1 19:3\n", InputConfig(bits=4))
    np.testing.assert_array_equal(b.indices, vw.indices)


@pytest.mark.parametrize("opts", (["--interactions", "::"], ["--ngram", "2"], ["--ignore_linear", " ", "-q", "  "]))
def test_arrays_get_the_feature_options_of_a_cli_model(tmp_path, opts):
    """A CLI model with feature options (crosses, n-grams, ignored namespaces) predicts an array
    as the CLI predicts its LIBSVM lines: the array's features are generated as the parser's."""
    X, y = make_data(n=120)
    Xt, yt = make_data(n=60, seed=1)
    (tmp_path / "train.libsvm").write_text(libsvm_text(X, y))
    (tmp_path / "test.libsvm").write_text(libsvm_text(Xt, yt))
    cli(["train", "-r", "oaa", "-k", "6", "--format", "libsvm", str(tmp_path / "train.libsvm"),
         "-f", str(tmp_path / "m.lt"), "--quiet"] + opts)
    cfg = load_model(str(tmp_path / "m.lt")).input_config
    assert cfg.generates_features
    got, want = matrix_batch(Xt, cfg), parse_bytes(libsvm_text(Xt, yt).encode(), cfg)
    for name in ("indptr", "indices", "values"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    r = cli(["predict", "-i", str(tmp_path / "m.lt"), str(tmp_path / "test.libsvm"), "-p", "-", "--quiet"])
    clf = Classifier.load(str(tmp_path / "m.lt"))
    assert clf.predict(Xt).tolist() == [int(v) for v in r.output.split()]
    np.testing.assert_array_equal(clf.predict(Xt.toarray()), clf.predict(Xt))


def vw_namespace_lines(n=300, seed=0):
    """VW lines of three namespaces whose label needs the cross of a and b (an XOR of words)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.integers(0, 3, size=3)
        words = " ".join(f"w{int(v)}" for v in rng.integers(0, 5, size=3))
        out.append(f"{(a + b) % 3 + 1} |a x{a} |b y{b} |c {words} z{c}")
    return out


@pytest.mark.parametrize("cli_opts, params", [
    (["-q", "ab", "--ngram", "c2"], {"quadratic": "ab", "ngram": "c2"}),
    (["--cubic", "abc", "-q", "ac", "--ignore", "b"], {"cubic": ["abc"], "quadratic": "ac", "ignore": "b"}),
    (["--interactions", "ab", "--ngram", "3", "--skips", "1", "--keep", "ac", "--ignore_linear", "a"],
     {"interactions": ["ab"], "ngram": 3, "skips": [1], "keep": "ac", "ignore_linear": "a"}),
])
def test_feature_options_are_the_cli_options(tmp_path, cli_opts, params):
    """Classifier's feature parameters build the model lomtree train builds with the same options
    (same weights and input header); a loaded CLI model gives them back as parameters, and a
    clone of it fits that model again."""
    lines = vw_namespace_lines()
    (tmp_path / "train.vw").write_text("\n".join(lines) + "\n")
    cli(["train", "-r", "oaa", "-k", "3", str(tmp_path / "train.vw"), "-f", str(tmp_path / "cli.lt"),
         "--quiet"] + cli_opts)
    clf = Classifier(reduction="oaa", classes=3, **params).fit(lines)
    clf.save(str(tmp_path / "api.lt"))
    m_cli, m_api = same_arrays(str(tmp_path / "cli.lt"), str(tmp_path / "api.lt"))
    assert m_cli.header["input"] == m_api.header["input"]
    assert m_cli.input_config.generates_features
    loaded = Classifier.load(str(tmp_path / "cli.lt"))
    again = Classifier(**loaded.get_params()).fit(lines)
    again.save(str(tmp_path / "again.lt"))
    same_arrays(str(tmp_path / "cli.lt"), str(tmp_path / "again.lt"))
    assert loaded.predict(lines).tolist() == clf.predict(lines).tolist()


def test_crosses_learn_what_the_namespaces_alone_cannot():
    lines = vw_namespace_lines(n=600)
    y = [int(line.split()[0]) for line in lines]
    alone = Classifier(reduction="oaa", classes=3, passes=3).fit(lines).score(lines, y)
    crossed = Classifier(reduction="oaa", classes=3, passes=3, quadratic="ab").fit(lines).score(lines, y)
    assert alone < 0.6 < 0.95 < crossed


@pytest.mark.parametrize("params, message", [
    ({"quadratic": "abc"}, "takes 2 namespace letters"),
    ({"quadratic": 3}, "a string or a list of strings"),
    ({"ngram": "x"}, "--ngram"),
    ({"interactions": ["a,b"]}, "cannot be a namespace letter"),
])
def test_bad_feature_options_raise_value_error(params, message):
    with pytest.raises(ValueError, match=message):
        Classifier(reduction="oaa", classes=3, **params).fit(vw_namespace_lines(n=10))


def test_bad_inputs_raise_value_error():
    X, y = make_data(n=50)
    clf = Classifier(reduction="filter", classes=6)
    for bad_y in (y + 10, y - 1, np.where(y == 3, -5, y)):
        with pytest.raises(ValueError, match="not one of the classes"):
            clf.fit(X, bad_y)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="not one of the classes"):
        clf.partial_fit(X, np.full(50, 7))
    with pytest.raises(ValueError, match="continuous"):
        Classifier().fit(X, y + 0.5)
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(np.full((2, 30), np.nan))
    with pytest.raises(ValueError, match="features"):
        clf.predict(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="line 2"):
        Classifier(reduction="oaa", classes=3).fit(["1 | a", "x | b"])
    with pytest.raises(ValueError, match="outside 1..3"):
        Classifier(reduction="oaa", classes=3).fit(["1 | a", "9 | b"])
    with pytest.raises(ValueError, match="classes"):
        Classifier(reduction="filter").learn_one({"a": 1}, 1)
    with pytest.raises(ValueError, match="bits"):
        Classifier(bits=40).fit(X, y)
    with pytest.raises(ValueError, match="feature name"):
        dict_line({"a b": 1})
    with pytest.raises(ValueError, match="Expected 2D"):
        clf.predict(np.zeros(30))
    with pytest.raises(ValueError, match="not fitted"):
        Classifier().predict(X)
    for k in (2.7, "2", True):  # as predict's top_k: an int, not what int() makes of it
        with pytest.raises(ValueError, match="must be an int"):
            Classifier(reduction="oaa", classes=6).fit(X, y).predict_top(X, k)
    # an integer too large for a float is a value out of range, not an OverflowError
    for x in ({"a": 10**400}, {"a": 1, "b": -(10**400)}):
        with pytest.raises(ValueError, match="'a'|'b'"):
            clf.learn_one(x, 1)
        with pytest.raises(ValueError, match="'a'|'b'"):
            clf.predict_one(x)


def test_feature_dicts_need_y():
    """A list of feature dicts carries no labels: fit and partial_fit without y are the "requires
    y" ValueError (they learned nothing, silently), as for arrays; lines carry their own."""
    dicts = [{"a": 1.0}, {"b": 1.0}]
    for clf in (Classifier(reduction="oaa", classes=2), Classifier(reduction="oaa", classes=2, multilabel=True)):
        with pytest.raises(ValueError, match="requires y"):
            clf.fit(dicts)
        with pytest.raises(ValueError, match="requires y"):
            clf.partial_fit(dicts)
        clf.partial_fit(dicts, [1, 2] if not clf.multilabel else [[1], [2]])
        with pytest.raises(ValueError, match="requires y"):
            clf.partial_fit(dicts)
    assert Classifier(reduction="oaa", classes=2).fit(["1 | a", "2 | b"]).predict(["| a"]).tolist() == [1]


def test_score_checks_its_inputs():
    """score's y and sample_weight are checked as fit's: a length that is not X's, or weights
    that sum to 0, are a ValueError naming them (not numpy's broadcast message, nor NaN)."""
    X, y = make_data(n=50)
    clf = Classifier(reduction="oaa", classes=6).fit(X, y)
    with pytest.raises(ValueError, match="X has 50 examples but y has 49 labels"):
        clf.score(X, y[:-1])
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(2,\), expected \(50,\)"):
        clf.score(X, y, sample_weight=[1, 1])
    with pytest.raises(ValueError, match="non-zero"):
        clf.score(X, y, sample_weight=np.zeros(50))
    w = np.r_[np.zeros(25), np.ones(25)]
    assert clf.score(X, y, sample_weight=w) == np.mean(clf.predict(X[25:]) == y[25:])
    Y = [[int(v)] for v in y]
    ml = Classifier(reduction="oaa", classes=6, multilabel=True).fit(X, Y)
    with pytest.raises(ValueError, match="sample_weight"):
        ml.score(X, Y, sample_weight=[1, 1])


def test_string_labels_save_load_and_cli(tmp_path):
    X, y = make_data(n=300)
    names = np.array(["zero", "one", "two", "three", "four", "five", "six"])
    ys = names[y]
    clf = Classifier(reduction="oaa").fit(X, ys)
    assert sorted(clf.classes_.tolist()) == clf.classes_.tolist()
    assert set(clf.predict(X).tolist()) <= set(ys.tolist())
    clf.save(str(tmp_path / "m.lt"))
    back = Classifier.load(str(tmp_path / "m.lt"))
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    assert back.classes_.tolist() == clf.classes_.tolist()
    # integer labels that are not 1..K keep their values through a file
    yi = y * 10
    c2 = Classifier(reduction="oaa").fit(X, yi)
    c2.save(str(tmp_path / "i.lt"))
    b2 = Classifier.load(str(tmp_path / "i.lt"))
    assert b2.classes_.dtype.kind == "i"
    np.testing.assert_array_equal(b2.predict(X), c2.predict(X))
    # the CLI reads the file and prints class ids (positions in classes_ + 1)
    (tmp_path / "t.libsvm").write_text(libsvm_text(X[:20], y[:20]))
    r = cli(["predict", "-i", str(tmp_path / "m.lt"), str(tmp_path / "t.libsvm"), "-p", "-", "--quiet"])
    ids = [int(v) for v in r.output.split()]
    assert clf.classes_[np.array(ids) - 1].tolist() == clf.predict(X[:20]).tolist()


@pytest.mark.parametrize("labels", (
    np.array([False, True]), np.array([2**63 + 5, 7], dtype=np.uint64), [10**20, -3], [b"a", b"\xff\x01"],
    np.array(["\u00e9", "\u65e5\u672c"]), np.array([-4, 9])), ids=("bool", "uint64", "bigint", "bytes", "unicode", "int"))
def test_labels_of_every_type_keep_their_values_through_a_file(tmp_path, labels):
    """The labels a model file stores load back as the same values of the same kind (a file
    that loads with other labels, or not at all, would be a silently different model)."""
    X, y = make_data(n=60, k=2)
    ys = np.asarray(labels, dtype=object if isinstance(labels, list) else None)[y - 1]
    clf = Classifier(reduction="oaa").fit(X, ys)
    clf.save(str(tmp_path / "m.lt"))
    back = Classifier.load(str(tmp_path / "m.lt"))
    assert back.classes_.tolist() == clf.classes_.tolist()
    assert [type(v) for v in back.classes_.tolist()] == [type(v) for v in clf.classes_.tolist()]
    assert back.predict(X).tolist() == clf.predict(X).tolist()
    assert pickle.loads(pickle.dumps(clf)).classes_.tolist() == clf.classes_.tolist()


def test_labels_of_mixed_types_are_refused():
    """Strings and numbers in one label list are a ValueError (numpy would turn the numbers into
    strings, or fail to sort them), as is a label that is neither."""
    X = np.eye(4)
    for bad in (["a", 1, 2, "b"], np.array(["a", 1, 2.0, "b"], dtype=object), ["a", None, "a", "b"]):
        with pytest.raises(ValueError, match="labels mix|label type"):
            Classifier(reduction="oaa").fit(X, bad)
    with pytest.raises(ValueError, match="labels mix"):
        Classifier(reduction="oaa", classes=["a", 1]).fit(X, ["a", "a", "a", "a"])
    with pytest.raises(ValueError, match="labels mix|label type"):
        Classifier(reduction="oaa", multilabel=True).fit(X, [["a"], [None], [], ["a"]])
    with pytest.raises(ValueError, match="labels mix"):
        Classifier(reduction="oaa", multilabel=True).fit(X, [["a"], [1], [], ["a", 1]])
    assert Classifier(reduction="oaa").fit(X, np.array(["a", "1", "a", "1"])).classes_.tolist() == ["1", "a"]


def test_partial_fit_equals_fit_in_one_pass():
    X, y = make_data(n=300)
    a = Classifier(reduction="lomtree", classes=6).fit(X, y)
    b = Classifier(reduction="lomtree", classes=6)
    for lo in range(0, 300, 70):
        b.partial_fit(X[lo:lo + 70], y[lo:lo + 70])
    np.testing.assert_array_equal(a._model.base.arrays.table, b._model.base.arrays.table)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("reduction", ["oaa", "plt", "lomtree", "filter", "rtree", "cpt", "mtree", "table"])
def test_stream_in_parts_equals_fit_in_one_pass(reduction):
    """partial_fit on consecutive parts learns what fit learns in its one pass (the pass's end, a
    PLT's tree built from its buffer, comes with ``settle``): the same model arrays and
    predictions, and partial_fit ends no pass."""
    from lomtree_cli.model_io import model_arrays

    X, y = make_data(n=300)
    a = Classifier(reduction=reduction, classes=6).fit(X, y)
    b = Classifier(reduction=reduction, classes=6)
    for lo in range(0, 300, 70):
        b.partial_fit(X[lo:lo + 70], y[lo:lo + 70])
    assert b.passes_done_ == 0 and a.passes_done_ == 1
    b.settle()
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    got, want = (model_arrays(c._model.base, c._model.reduction) for c in (b, a))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_streaming_saves_nothing_and_starts_no_thread(monkeypatch, tmp_path):
    """learn_one, predict_one and partial_fit work on the model in memory: no model file is
    written or read, no thread is started; the model file appears only when asked for."""
    import threading

    from lomtree_cli import model_io

    def refuse(*a, **kw):
        raise AssertionError("the model file was used")

    X, y = make_data(n=50)
    clf = Classifier(reduction="plt", classes=6)
    for name in ("write_model", "save_model", "model_bytes", "load_model"):
        monkeypatch.setattr(model_io, name, refuse)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    clf.partial_fit(X, y)
    clf.learn_one({"1": 1.0, "7": -0.5}, 3)
    assert clf.predict_one({"1": 1.0}) in range(1, 7)
    monkeypatch.undo()
    clf.save(str(tmp_path / "m.lt"))
    assert Classifier.load(str(tmp_path / "m.lt")).predict(X).tolist() == clf.predict(X).tolist()


def test_learn_one_equals_vw_lines():
    """River's learn_one on dicts == fit on the VW lines '| key:value ...'."""
    rng = np.random.default_rng(3)
    dicts, labels = [], []
    for _ in range(150):
        c = int(rng.integers(1, 5))
        dicts.append({f"c{c}": 1.0, "noise": float(rng.normal()), "colour": ["red", "blue"][c % 2], 7: True})
        labels.append(c)
    river = Classifier(reduction="oaa", classes=4)
    for x, c in zip(dicts, labels):
        river.learn_one(x, c)
    lines = [f"{c} {dict_line(x)}" for x, c in zip(dicts, labels)]
    batch = Classifier(reduction="oaa", classes=4).fit(lines)
    np.testing.assert_array_equal(river._model.base.arrays.table, batch._model.base.arrays.table)
    assert river.predict_one(dicts[0]) == batch.predict([dicts[0]])[0]
    p = river.predict_proba_one(dicts[0])
    assert abs(sum(p.values()) - 1) < 1e-9
    assert Classifier(classes=3).predict_one({"a": 1}) is None


@pytest.mark.parametrize("reduction", ["oaa", "filter", "cpt", "plt", "lomtree", "rtree", "mtree", "table"])
def test_learn_one_partial_fit_and_cli_learn_the_same(tmp_path, reduction):
    """learn_one on feature dicts, partial_fit on the same dicts and lomtree train on their VW
    lines learn one model: the API's two model files are byte-identical, their arrays are the
    CLI's, and predict_one predicts what predict and the CLI's model predict."""
    from lomtree_cli.model_io import model_arrays

    rng = np.random.default_rng(5)
    dicts, labels = [], []
    for _ in range(150):
        c = int(rng.integers(1, 7))
        dicts.append({f"c{c}": 1.0, f"n{int(rng.integers(40))}": float(rng.normal()), "len": int(rng.integers(0, 9)),
                      "7": float(rng.random())})
        labels.append(c)
    one = Classifier(reduction=reduction, classes=6)
    for x, c in zip(dicts, labels):
        one.learn_one(x, c)
    part = Classifier(reduction=reduction, classes=6)
    for lo in range(0, 150, 40):
        part.partial_fit(dicts[lo:lo + 40], labels[lo:lo + 40])
    (tmp_path / "t.vw").write_text("".join(f"{c} {dict_line(x)}\n" for x, c in zip(dicts, labels)))
    cli(["train", "-r", reduction, "-k", "6", str(tmp_path / "t.vw"), "-f", str(tmp_path / "cli.lt"), "--quiet"])
    assert one.to_bytes() == part.to_bytes()
    _, want = members(str(tmp_path / "cli.lt"))
    got = model_arrays(one._model.base, one._model.reduction)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    ones = [one.predict_one(x) for x in dicts]
    assert ones == one.predict(dicts).tolist() == Classifier.load(str(tmp_path / "cli.lt")).predict(dicts).tolist()


def test_dicts_become_the_arrays_of_their_vw_lines():
    """Feature dicts of numbers are converted without the parser (the names' hashes memoised):
    the same batch as the parser makes of their lines, for values at float32's edges (0 after
    rounding: dropped; past its range: refused with the parser's message) and random doubles."""
    import struct

    from lomtree_cli.api import _parsed_dicts, dicts_batch

    rng = np.random.default_rng(2)
    doubles = [struct.unpack("<d", struct.pack("<Q", int(b)))[0] for b in rng.integers(0, 2**63, 3000, dtype=np.int64)]
    edges = [2.0**-150, -(2.0**-150), np.nextafter(2.0**-150, 1.0), 2.0**-149, 1e-45, 5e-324, -0.0, 0.0, 0.1,
             2.0**128 - 2.0**103 - 2.0**75, -(2.0**128 - 2.0**103 - 2.0**75), 3.4028234663852886e38, 7, -3, 2**70]
    values = [v for v in doubles if abs(v) < 3e38] + edges
    names = ["a", "12", "007", "x_y", "é", "1844674407370955161", "n" * 40]
    for seed in (0, 5):
        cfg = InputConfig(bits=18, hash_seed=seed)
        xs = [{names[(i + j) % len(names)] + str(j % 3): values[(7 * i + j) % len(values)] for j in range(i % 9)}
              for i in range(len(values))]
        a, b = dicts_batch(xs, cfg), _parsed_dicts(xs, cfg)
        for f in ("labels", "weights", "indptr", "indices", "values", "line_numbers"):
            assert getattr(a, f).dtype == getattr(b, f).dtype
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
        assert a.values.view(np.uint32).tolist() == b.values.view(np.uint32).tolist()
    cfg = InputConfig(bits=18)
    for bad in ({"a": 2.0**128 - 2.0**103}, {"a": float("nan")}, {"a": 2**200}, {"a b": 0.0}, {"": 1.0}):
        with pytest.raises(ValueError) as fast:
            dicts_batch([{"ok": 1.0}, bad], cfg)
        with pytest.raises(ValueError) as parsed:
            _parsed_dicts([{"ok": 1.0}, bad], cfg)
        assert str(fast.value) == str(parsed.value)


def test_pickle_and_bytes_are_the_model_file(tmp_path):
    X, y = make_data(n=100)
    clf = Classifier(reduction="cpt", classes=6).fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    clf.save(str(tmp_path / "m.lt"))
    assert Classifier.from_bytes(clf.to_bytes()).predict(X).tolist() == clf.predict(X).tolist()
    labs, probs = clf.predict_top(X[:5], 3)
    assert labs.shape == probs.shape == (5, 3)
    assert not hasattr(Classifier(reduction="filter"), "predict_proba")


def test_parameters_are_the_registry_options():
    """Every reduction option of the registry is a Classifier parameter (and nothing else is
    hard-coded as one); repr works with array parameters."""
    import inspect

    from lomtree_cli.api import _REDUCTION_OPTIONS
    from lomtree_cli.reductions.registry import reduction_options

    assert set(_REDUCTION_OPTIONS) == set(reduction_options())
    params = set(inspect.signature(Classifier.__init__).parameters)
    assert set(_REDUCTION_OPTIONS) <= params
    assert "classes=array" in repr(Classifier(classes=np.array([3, 5])))


def test_threads_are_the_cli_threads(monkeypatch):
    """``threads`` is ``lomtree train --threads``: 0 is one per CPU (at most 4), a negative count
    or more than the CPUs allow is the CLI's ValueError before anything is learned."""
    from lomtree_cli import driver

    monkeypatch.setattr(driver.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    X, y = make_data(n=60)
    seen = []
    from lomtree_cli.reductions.plt import ProbabilisticLabelTree

    monkeypatch.setattr(ProbabilisticLabelTree, "set_train_threads", lambda self, n: seen.append(int(n)))
    Classifier(reduction="plt", classes=6, threads=0).fit(X, y)
    Classifier(reduction="plt", classes=6, threads=0).partial_fit(X, y)
    assert set(seen) == {3}
    for bad, msg in ((-1, "--threads must be >= 0"), (13, "--threads must be at most 4 x the 3 CPUs"),
                     (1.5, "--threads must be an int")):
        with pytest.raises(ValueError, match=msg):
            Classifier(reduction="plt", classes=6, threads=bad).fit(X, y)


@pytest.mark.parametrize("multilabel", (False, True))
def test_a_streamed_plt_saved_before_predicting_keeps_what_it_learned(multilabel):
    """PLT holds a stream's first examples until it builds its tree; a model saved (or pickled)
    while they are held is the model that predicts after them: its file has their weights, not
    only the tree built from them."""
    X, y = make_data(n=200)
    Y = [[int(v)] for v in y] if multilabel else y
    a = Classifier(reduction="plt", classes=6, multilabel=multilabel).partial_fit(X, Y)
    data = a.to_bytes()
    b = Classifier.from_bytes(data)
    np.testing.assert_array_equal(b.predict_proba(X), a.predict_proba(X))
    assert a.to_bytes() == data
    c = Classifier(reduction="plt", classes=6, multilabel=multilabel)
    for i in range(50):
        c.learn_one({str(j + 1): float(v) for j, v in zip(X[i].indices, X[i].data)}, Y[i] if not multilabel else set(Y[i]))
    d = pickle.loads(pickle.dumps(c))
    np.testing.assert_array_equal(d.predict_proba(X), c.predict_proba(X))


@pytest.mark.parametrize("reduction", ("cpt", "table"))
def test_a_cli_model_without_k_loads(tmp_path, reduction):
    """A cpt or table model trained without -k (its labels an open set) loads in the API:
    classes_ is 1..its largest label (a label it never met has probability 0), and it predicts
    as the CLI does."""
    X, y = make_data(n=200, k=3)
    y = np.array([2, 5, 9])[y - 1]
    (tmp_path / "train.libsvm").write_text(libsvm_text(X, y))
    cli(["train", "-r", reduction, "--format", "libsvm", str(tmp_path / "train.libsvm"), "-f", str(tmp_path / "m.lt"),
         "--quiet"])
    clf = Classifier.load(str(tmp_path / "m.lt"))
    assert clf.classes_.tolist() == list(range(1, 10))
    r = cli(["predict", "-i", str(tmp_path / "m.lt"), str(tmp_path / "train.libsvm"), "-p", "-", "--quiet"])
    assert clf.predict(X).tolist() == [int(v) for v in r.output.split()]
    P = clf.predict_proba(X)
    assert P.shape == (200, 9) and (P[:, [0, 2, 3, 5, 6, 7]] < 1e-5).all()  # (PROBA_FLOOR: not 0)
    r = cli(["predict", "-i", str(tmp_path / "m.lt"), str(tmp_path / "train.libsvm"), "-p", "-", "--quiet",
             "--top-k", "2"])
    labs, probs = clf.predict_top(X, 2)
    assert r.output.splitlines() == [" ".join(f"{a}:{p:.6f}" for a, p in zip(la, pr)) for la, pr in zip(labs, probs)]


def test_mtree_passes_plan_as_over_a_file(tmp_path):
    """mtree over several passes of a data set of known length plans its rate schedule and its
    Huffman tree from that length and its label counts: fit's arrays are such a data set, so
    fit builds the model ``lomtree train`` builds from the same data as a file (not the model of
    a stream of unknown length, as from stdin)."""
    X, y = make_data(n=300)
    (tmp_path / "train.libsvm").write_text(libsvm_text(X, y))
    cli(["train", "-r", "mtree", "-k", "6", "--format", "libsvm", str(tmp_path / "train.libsvm"), "--passes", "3",
         "--holdout-off", "-c", "-f", str(tmp_path / "cli.lt"), "--quiet"])
    Classifier(reduction="mtree", classes=6, passes=3, holdout_off=True).fit(X, y).save(str(tmp_path / "api.lt"))
    m_cli, m_api = same_arrays(str(tmp_path / "cli.lt"), str(tmp_path / "api.lt"))
    assert m_cli.header["learner_meta"] == m_api.header["learner_meta"]
    assert m_cli.header["reduction_meta"] == m_api.header["reduction_meta"]


def test_fit_lines_without_classes_takes_them_from_the_labels():
    """Text lines carry class ids: without ``classes`` the model has 1..K, K the largest id the
    labels name (as ``lomtree train`` without ``-k``), offsets and label sets included; a stream
    of unlabelled lines is a ValueError naming the way out."""
    from lomtree_cli.api import Classifier

    c = Classifier(reduction="cpt", bits=18).fit(["1 | a b", "3 | c d", "2 | e"])
    assert c.classes_.tolist() == [1, 2, 3]
    c = Classifier(reduction="oaa", bits=18, label_offset=1).fit(["0 | a", "4 | b"] * 3)
    assert c.classes_.tolist() == [0, 1, 2, 3, 4] and c.predict(["| a"]).tolist() == [0]
    c = Classifier(reduction="plt", bits=18, multilabel=True, format="libsvm").fit(["1,5 1:1", "2 2:1"] * 3)
    assert c.classes_.tolist() == [1, 2, 3, 4, 5]
    c = Classifier(reduction="cpt", bits=18)
    c.partial_fit(["7 | a", "1 | b"])
    assert c.classes_.tolist() == list(range(1, 8))
    with pytest.raises(ValueError, match="carry no label"):
        Classifier(reduction="cpt", bits=18).fit(["| a", "| b"])
    with pytest.raises(ValueError, match="for files"):
        Classifier(reduction="cpt", bits=18, format="xmc").fit(["1 0:1"])


@pytest.mark.parametrize("reduction", ["oaa", "cpt", "plt", "lomtree"])
@pytest.mark.parametrize("keys", ["str", "int"])
def test_predict_then_learn_one_is_the_progressive_pass(reduction, keys):
    """River's loop (predict_one, then learn_one of the same dict, one example at a time) says
    what one progressive pass of the parser's batch of the VW lines says before each update,
    and ends in the same model file as ``fit`` on those lines."""
    from lomtree_cli.api import lines_batch

    rng = np.random.default_rng(11)
    key = (lambda j: f"f{j}") if keys == "str" else int
    dicts, labels = [], []
    for _ in range(200):
        c = int(rng.integers(1, 6))
        x = {key(int(j)): float(rng.normal()) for j in rng.choice(30, 6, replace=False)}
        x[key(40 + c)] = 1.0
        dicts.append(x)
        labels.append(c)
    opts = {"tree_buffer": 0} if reduction == "plt" else {}
    one = Classifier(reduction=reduction, classes=5, **opts)
    got = []
    for x, c in zip(dicts, labels):
        got.append(one.predict_one(x))
        one.learn_one(x, c)
    lines = [f"{c} {dict_line(x)}" for x, c in zip(dicts, labels)]
    # the reference: the model of the first example, then every later example predicted and
    # learned in one call of the learner over the parser's batch of the lines
    model = Classifier(reduction=reduction, classes=5, **opts).partial_fit(lines[:1])
    learner = model._model
    learner.reduction.set_need_predictions(True)
    progressive = learner.learn(lines_batch(lines[1:], learner.input_config)).tolist()
    assert got[0] is None
    assert got[1:] == progressive
    assert one.to_bytes() == model.to_bytes() == Classifier(reduction=reduction, classes=5, **opts).partial_fit(
        lines).to_bytes()
