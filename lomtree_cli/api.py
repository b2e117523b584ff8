"""The Python API: ``Classifier``, in scikit-learn's shape and River's.

Hyper-parameters are the command line's options under the same names (docs/CLI.md): ``reduction``,
``classes`` (``-k``), ``bits``, ``learning_rate``, ``power_t``, ``loss_function``, ``passes``,
``seed``, every reduction option of the registry (``max_internal_nodes``, ``cpt_alpha``,
``arity``, ...), with the same defaults (None = the reduction's default, as on the command line).
Nothing is checked in ``__init__`` (scikit-learn's rule); ``fit`` checks everything and raises
``ValueError`` with the CLI's one-line message.

>>> import numpy as np
>>> from lomtree_cli import Classifier
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20)
>>> y = np.array([1, 2] * 20)
>>> clf = Classifier(reduction="oaa", passes=3).fit(X, y)
>>> clf.predict([[1.0, 0.0], [0.0, 1.0]]).tolist()
[1, 2]
>>> clf.predict_one({"b": 1.0}) in (1, 2)
True

Inputs (``X``)
--------------
- a 2-D array (numpy, anything ``np.asarray`` takes) or a scipy.sparse matrix/array (any
  format): **column j is the LIBSVM feature index j + 1**, hashed exactly as the LIBSVM parser
  hashes it (``(j + 1) & (2**bits - 1)``, hash seed not added), zero values dropped, entries in
  the row's stored order (ascending columns for dense and canonical CSR), the constant feature
  last. So a model fitted on a CSR matrix equals ``lomtree train --format libsvm`` on the same
  data written as LIBSVM with 1-based indices (``sklearn.datasets.dump_svmlight_file(X, y, f,
  zero_based=False)``); a loaded model's feature options (``-q``, ``--ngram``, ``--ignore``, ...)
  apply to an array as to its LIBSVM lines. NaN, infinite and float32-overflowing values are a
  ValueError;
- a list of text lines (``str`` or ``bytes``, one example each, no newline inside) in the
  model's ``format`` (VW by default; ``format="libsvm"``): parsed by the CLI's parser, their
  labels used when ``y`` is None;
- River's ``learn_one(x: dict, y)`` / ``predict_one(x)``: a feature dict is the VW line
  ``| key:value ...`` (keys are VW feature names in the default namespace: the key ``"3"`` hashes
  as the number 3; a string value ``{"color": "red"}`` is VW's ``color:red``, the feature
  ``color^red`` of value 1; a bool is 0/1).

Labels (``y`` and ``classes``)
------------------------------
- ``classes=K`` (an int, the CLI's ``-k``): the labels are the integers 1..K, used as the CLI
  uses them (``label_offset`` added first); ``classes_`` is ``1..K`` (less ``label_offset``).
- ``classes=[...]`` (a sequence, VW's ``--named_labels``): label ``classes[i]`` is class i + 1;
  strings or integers.
- ``classes=None``: ``classes_`` = the sorted distinct labels of ``y`` at the first ``fit`` (or
  ``partial_fit``'s ``classes=`` argument, scikit-learn's convention); class i + 1 is
  ``classes_[i]``. Integer labels 1..K with every one present give the CLI's model exactly.
  The set is open for oaa, lomtree, plt and cpt: a new label of ``partial_fit`` (without
  ``classes=``) or ``learn_one`` joins as the next class (``Reduction.grow_classes``).
A label outside fixed classes is a ValueError, before anything is learned (it never reaches a kernel).

Label sets (``multilabel=True``; reductions ``plt`` and ``oaa``, as ``lomtree train --multilabel``)
-----------------------------------------------------------------------------------------------
- ``Y`` is a list of label collections (``[[1, 3], {"b"}, []]``; an empty one is an example
  with no label, trained as a negative of every label like a LIBSVM line that starts with a
  space) or a 0-1 indicator matrix of shape (n, K), numpy or scipy.sparse (scikit-learn's
  ``MultiLabelBinarizer`` output): column j is class j + 1. A 2-D numpy array is always read as
  an indicator matrix, a list always as collections. Labels map through ``classes`` as single
  labels do; ``classes=None`` is 1..K for an indicator matrix, else the sorted distinct labels of
  all the sets. A fit on arrays equals ``lomtree train --multilabel --format libsvm`` on the same
  data written with ``l1,l2,...`` label fields.
- ``predict(X)``: per example the list of labels with P(label|x) >= ``threshold`` (0.5), best
  first, ``lomtree predict``'s lines; ``predict(X, top_k=K)``: an (n, K) array of labels, best
  first; ``predict_proba(X)``: each label's own probability (no normalisation); ``score``: P@1;
  ``learn_one(x, {"a", "b"})``; ``predict_one(x)``: a set.
- ``multilabel`` is the model file's (``InputConfig.multilabel``): the CLI and the API read each
  other's multi-label models; a label set given to a single-label Classifier is a ValueError.

Model files: ``save(path)`` writes the CLI's model file (``lomtree predict -i`` reads it);
``Classifier.load(path)`` reads any CLI model (one of ``-r cpt``/``table`` trained without -k:
``classes_`` is 1..its largest label, those it never met of probability 0; of ``--format xmc``:
0..K-1, the file's labels, as ``lomtree predict`` prints them). A label list other than ``1..K`` is stored as the
member ``labels/names`` (the UTF-8 names joined by ``\\n``, the member of the CLI's label dictionary)
and a header key ``api_labels`` ("int" or "str"); the CLI reads that member only for models trained
with string labels (VW format), so it prints class ids for such an API model. Pickling a
Classifier stores its model file's bytes (never a pickle of the model's objects).
"""

from __future__ import annotations

import inspect
import io
import math
import numbers
import re
import warnings

import numpy as np

from .batch import ExampleBatch
from .config import InputConfig
from .errors import InputError, LomtreeError
from .parsing import MAX_WEIGHT, generate_features, parse_bytes, parse_chunk
from .reductions.registry import DEFAULT, reduction_options

try:  # scikit-learn's base classes and method gate when it is installed (it is optional)
    from sklearn.base import BaseEstimator as _SkEstimator, ClassifierMixin as _SkClassifier
    from sklearn.utils.metaestimators import available_if
except ImportError:  # pragma: no cover - without scikit-learn: plain classes, the same gate
    class _SkEstimator:
        pass

    class _SkClassifier:
        pass

    def available_if(check):
        """The method exists (``hasattr``) only when ``check(self)`` is true."""
        import functools
        import types

        class _Gate:
            def __init__(self, fn):
                self.fn = fn
                functools.update_wrapper(self, fn)

            def __get__(self, obj, owner=None):
                if obj is None:
                    return self.fn
                if not check(obj):
                    raise AttributeError(f"This {type(obj).__name__} has no attribute {self.fn.__name__!r}")
                return types.MethodType(self.fn, obj)

        return _Gate

#: examples per batch handed to the driver (batches do not change results)
CHUNK = 4096
#: probabilities of ``predict_proba`` are kept this far from 0 and 1: a class the reduction does
#: not rank (a tree answers its best few) or scores at 0 (OAA's clipped squared loss) is
#: improbable, not impossible, and ``log_loss`` must not need clipping
PROBA_FLOOR = 1e-6
#: the most classes a label set may hold: the CLI's bound on -k (``classes_`` and the label
#: tables are sized by it, 8-48 bytes a class, before anything is learned)
MAX_CLASSES = 2**31 - 1
#: labels member of a model file (the CLI's label dictionary uses the same)
LABELS_MEMBER = "labels/names"


class NotFittedError(ValueError, AttributeError):
    """The classifier is used before ``fit``/``partial_fit``/``load`` (scikit-learn's meaning)."""


def _value_error(e: Exception) -> ValueError:
    return ValueError(str(e))


# -- inputs -----------------------------------------------------------------------------------

def _is_lines(X) -> bool:
    if isinstance(X, (str, bytes)):
        raise ValueError("X is one string: give a list of lines")
    if isinstance(X, (list, tuple)) and len(X) and isinstance(X[0], (str, bytes)):
        return True
    return False


def _is_dicts(X) -> bool:
    return isinstance(X, (list, tuple)) and len(X) > 0 and isinstance(X[0], dict)


def _line_error(e: InputError) -> ValueError:
    col = f" (column {e.column})" if e.column else ""
    return ValueError(f"line {e.line}: {e.detail}{col}")


def lines_batch(lines, cfg: InputConfig) -> ExampleBatch:
    """One batch of the text ``lines`` (one example each) by the CLI's parser; ValueError on a bad
    line (``line N: ...``), an empty line or a line with a newline inside."""
    parts = []
    for i, ln in enumerate(lines):
        b = ln.encode("utf-8") if isinstance(ln, str) else bytes(ln)
        if b"\n" in b.rstrip(b"\r\n") or b"\r" in b.rstrip(b"\r\n")[-1:]:
            raise ValueError(f"line {i + 1}: a newline inside a line (give one example per line)")
        b = b.rstrip(b"\r\n")
        if not b.strip(b" \t") and (cfg.format == "libsvm" or not b):
            raise ValueError(f"line {i + 1}: an empty line is no example")
        parts.append(b)
    data = b"\n".join(parts) + b"\n"
    try:
        batch = parse_bytes(data, cfg, source="<lines>", xmc_header=False)
    except InputError as e:
        raise _line_error(e) from None
    if len(batch) != len(parts):  # a LIBSVM comment-only line
        raise ValueError("every line must be an example (a LIBSVM line holding only a comment is not)")
    return batch


#: what a feature name (or a string value) cannot hold: whitespace (``str.isspace``'s), ':' or '|'
_NOT_IN_NAME = re.compile(r"[\s:|]")


def _feature_name(key) -> str:
    s = key if type(key) is str else str(key)
    if not s or _NOT_IN_NAME.search(s) is not None:
        raise ValueError(f"feature name {s!r}: must be non-empty, without whitespace, ':' or '|'")
    return s


def dict_line(x: dict) -> str:
    """The VW line (no label) of the feature dict ``x``: ``| key:value ...``."""
    if not isinstance(x, dict):
        raise ValueError(f"x must be a dict of features, got {type(x).__name__}")
    parts = ["|"]
    search = _NOT_IN_NAME.search
    for key, v in x.items():
        name = key if type(key) is str and key and search(key) is None else _feature_name(key)
        if type(v) is float and math.isfinite(v):  # the common case, first
            if v != 0.0:
                parts.append(f"{name}:{v!r}")
            continue
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if isinstance(v, str):
            parts.append(f"{name}:{_feature_name(v)}")
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"feature {name!r}: value {v!r} is not a number or a string") from None
        except OverflowError:  # an int beyond any float
            raise ValueError(f"feature {name!r}: an integer value out of float32 range") from None
        if not math.isfinite(f):
            raise ValueError(f"feature {name!r}: value {f} is not finite")
        if f != 0.0:
            parts.append(f"{name}:{f!r}")
    return " ".join(parts)


def dicts_batch(xs, cfg: InputConfig) -> ExampleBatch:
    """One batch of feature dicts: the batch the CLI's parser makes of their VW lines
    (``dict_line``). The common dicts (string keys, float or int values) are converted here with
    the parser's own hashes of their keys (``_DictHashes``) and the parser's value rule; any
    other dict, and any value the parser would refuse, goes through the parser as its line (one
    call of the parse kernel for the whole list, its checks and messages)."""
    if cfg.format != "vw" or cfg.generates_features or cfg.has_string_labels:
        return _parsed_dicts(xs, cfg)
    hashes = _DictHashes.of(cfg)
    indptr = [0]
    indices: list = []
    values: list = []
    for x in xs:
        if type(x) is not dict or not hashes.add(x, indices, values):
            return _parsed_dicts(xs, cfg)
        indptr.append(len(indices))
    n = len(indptr) - 1
    if n == 1:  # learn_one / predict_one: the fewest numpy calls
        return ExampleBatch(labels=np.zeros(1, np.int64), weights=np.ones(1), indptr=np.array(indptr, np.int64),
                            indices=np.array(indices, np.int64), values=np.array(values, np.float32),
                            line_numbers=np.ones(1, np.int64), source="<dict>")
    return ExampleBatch(labels=np.zeros(n, np.int64), weights=np.array([1.0] * n),
                        indptr=np.array(indptr, np.int64), indices=np.array(indices, np.int64),
                        values=np.array(values, np.float32), line_numbers=np.arange(1, n + 1, dtype=np.int64),
                        source="<dict>")


def _parsed_dicts(xs, cfg: InputConfig) -> ExampleBatch:
    """``dicts_batch`` by the parser: the VW lines of the dicts in one parse call. ``dict_line``
    leaves no newline in a line, and a line ``|`` (an empty dict) is an example of the constant
    feature alone: ``lines_batch``'s checks are not needed."""
    if cfg.format != "vw":  # feature dicts are VW lines whatever the model's format
        from dataclasses import replace

        cfg = replace(cfg, format="vw")
    data = ("\n".join([dict_line(x) for x in xs]) + "\n").encode("utf-8")
    batch, errors = parse_chunk(data, cfg, "<dict>")
    if errors:
        raise _line_error(errors[0])
    return batch


#: a float64 ``v`` is finite in float32 (the parser's ``float32(v)``, rounded to nearest) iff
#: ``|v| < F32_OVER``, and that float32 is 0 (a dropped feature) iff ``|v| <= F32_UNDER``
F32_OVER = 2.0 ** 128 - 2.0 ** 103
F32_UNDER = 2.0 ** -150


class _DictHashes:
    """The parser's hashed index of each feature name met in a dict (per hash seed and bits).

    The parser hashes a name whatever its value, and a number value ``v`` (``dict_line`` writes
    ``repr(v)``, which parses back to ``v`` exactly) becomes ``float32(v)``, dropped when 0: so a
    dict of numbers is its names' indices and its values' float32s. Names are hashed by the
    parser itself, once (a line ``| name:1 ...`` of the new names of a dict); features repeat in
    a stream, so a one-example ``learn_one`` is dictionary look-ups. Past ``MAX_NAMES`` names the
    memo starts again (a stream of ever new names must not grow it without bound)."""

    MAX_NAMES = 1 << 18
    _ALL: dict = {}
    _last = None  # the one ``of`` gave last (and the config it was asked for)

    def __init__(self, cfg: InputConfig):
        self.cfg = cfg
        self.index: dict = {}
        self.constant = None if cfg.noconstant else int(cfg.constant_index)

    @classmethod
    def of(cls, cfg: InputConfig) -> "_DictHashes":
        last = cls._last
        if last is not None and last[0] is cfg:
            return last[1]
        key = (cfg.mask, int(cfg.hash_seed), bool(cfg.noconstant))
        h = cls._ALL.get(key)
        if h is None:
            h = cls._ALL[key] = cls(cfg)
        cls._last = (cfg, h)
        return h

    def add(self, x: dict, indices: list, values: list) -> bool:
        """Append the features of ``x`` (the constant last) to ``indices``/``values``; False,
        with the lists unchanged, when ``x`` holds anything but string keys and finite float or
        int values in float32's range (the parser decides those)."""
        index = self.index
        start = len(indices)
        for key, v in x.items():
            if type(v) is not float:
                if not (isinstance(v, float) or (type(v) is int and -F32_OVER < v < F32_OVER)):
                    break
                v = float(v)
            if not -F32_OVER < v < F32_OVER:  # NaN, infinite, or inf in float32: refused
                break
            tk = type(key)  # (not a bool: True would find the entry of the key 1)
            h = index.get(key) if tk is str or tk is int else None
            if h is None:
                if (tk is not str and tk is not int) or not self._learn_names(x):
                    break
                h = index.get(key)  # (None if another thread emptied the memo meanwhile)
                if h is None:
                    break
            if -F32_UNDER <= v <= F32_UNDER:  # 0 in float32: dropped (its name is a good one)
                continue
            indices.append(h)
            values.append(v)
        else:
            if self.constant is not None:
                indices.append(self.constant)
                values.append(1.0)
            return True
        del indices[start:], values[start:]
        return False

    def _learn_names(self, x: dict) -> bool:
        """Hash the new string keys of ``x`` by the parser; False if a key is no feature name."""
        # an int key is the name str(key), as ``dict_line`` writes it (VW hashes a number name
        # as the number); it is memoised under the int itself, beside the string
        new = [k for k in x if (type(k) is str or type(k) is int) and k not in self.index]
        if any(type(k) is str and (not k or _NOT_IN_NAME.search(k) is not None) for k in new):
            return False
        if len(self.index) + len(new) > self.MAX_NAMES:
            self.index.clear()
        data = ("| " + " ".join([f"{k}:1" for k in new]) + "\n").encode("utf-8")
        batch, errors = parse_chunk(data, self.cfg, "<dict>")
        got = batch.indices.tolist()
        if errors or len(got) != len(new) + (self.constant is not None):
            return False
        self.index.update(zip(new, got))
        return True


def _check_matrix(X):
    """(scipy CSR or None, dense float64 array or None, n_rows, n_cols) of ``X``; ValueError on
    anything that is not a 2-D array of finite numbers."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):  # scipy.sparse, any format
        csr = X.tocsr()
        if np.iscomplexobj(csr.data):
            raise ValueError("Complex data not supported")
        n, d = csr.shape
        dense = None
    else:
        dense = np.asarray(X)
        if dense.dtype.kind in "OUS":
            dense = dense.astype(np.float64)
        if dense.dtype.kind == "c":
            raise ValueError("Complex data not supported")
        if dense.ndim != 2:
            raise ValueError(f"Expected 2D array, got {dense.ndim}D array instead. Reshape your data "
                             f"(array.reshape(-1, 1) for one feature, array.reshape(1, -1) for one sample).")
        n, d = dense.shape
        csr = None
    if n == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape=({n}, {d})) while a minimum of 1 is required.")
    if d == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape=({n}, {d})) while a minimum of 1 is required.")
    return csr, dense, n, d


def _check_csr(indptr: np.ndarray, cols: np.ndarray, d: int, what: str) -> None:
    """ValueError unless a CSR matrix's structure is sound: scipy does not check a matrix built
    from raw arrays, and a negative or too large column would be hashed like any other."""
    if indptr.shape[0] == 0 or indptr[0] != 0 or (np.diff(indptr) < 0).any() or indptr[-1] != cols.shape[0]:
        raise ValueError(f"{what} has a corrupt row pointer (indptr)")
    if cols.size and (int(cols.min()) < 0 or int(cols.max()) >= d):
        raise ValueError(f"{what} has a column index outside 0..{d - 1} (a corrupt sparse matrix: "
                         f"indices {int(cols.min())}..{int(cols.max())})")


def matrix_batch(X, cfg: InputConfig) -> ExampleBatch:
    """The batch of a 2-D array or scipy.sparse matrix: column j is LIBSVM index j + 1 (module
    docstring). Vectorised numpy over the whole matrix; no Python loop over rows or features."""
    csr, dense, n, d = _check_matrix(X)
    if csr is not None:
        indptr = np.asarray(csr.indptr, dtype=np.int64)
        cols = np.asarray(csr.indices, dtype=np.int64)
        _check_csr(indptr, cols, d, "X")
        data = np.asarray(csr.data, dtype=np.float64)
        rows_of = np.repeat(np.arange(n), np.diff(indptr))
    else:
        rows_of, cols = np.nonzero(dense)
        data = np.asarray(dense[rows_of, cols], dtype=np.float64)
    if not np.isfinite(data).all():
        raise ValueError("Input X contains NaN or infinity (lomtree refuses them: they would make the weights NaN)")
    with np.errstate(over="ignore"):
        v32 = data.astype(np.float32)
    if not np.isfinite(v32).all():
        raise ValueError("Input X contains a value out of float32 range")
    keep = v32 != 0
    rows_of, cols, v32 = rows_of[keep], cols[keep], v32[keep]
    counts = np.bincount(rows_of, minlength=n).astype(np.int64)
    extra = 0 if cfg.noconstant else 1
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts + extra, out=new_indptr[1:])
    total = int(new_indptr[-1])
    indices = np.empty(total, dtype=np.int64)
    values = np.empty(total, dtype=np.float32)
    is_feat = np.ones(total, dtype=bool)
    if extra:
        const_pos = new_indptr[1:] - 1
        is_feat[const_pos] = False
        indices[const_pos] = cfg.constant_index
        values[const_pos] = 1.0
    indices[is_feat] = (cols + 1) & cfg.mask
    values[is_feat] = v32
    batch = ExampleBatch(labels=np.zeros(n, np.int64), weights=np.ones(n, np.float64), indptr=new_indptr,
                         indices=indices, values=values, line_numbers=np.arange(1, n + 1, dtype=np.int64),
                         source="<array>")
    if not cfg.generates_features:
        return batch
    # a loaded CLI model's crosses, n-grams, ignored namespaces: the LIBSVM parser puts every
    # feature in the namespace ' ' (32) and the constant in VW's constant namespace (128)
    batch, errors = generate_features(batch, np.where(is_feat, 32, 128).astype(np.uint8), cfg)
    if errors:
        raise ValueError(f"X row {errors[0].line - 1}: {errors[0].detail}")
    return batch


# -- labels -----------------------------------------------------------------------------------

def _is_sparse(a) -> bool:
    return hasattr(a, "tocsr") and hasattr(a, "nnz")


_SETS_HINT = "label sets need Classifier(multilabel=True)"


def _label_kind(t: type) -> str:
    if issubclass(t, str):
        return "strings"
    if issubclass(t, bytes):
        return "bytes"
    if issubclass(t, numbers.Number):
        return "numbers"
    return t.__name__


def _one_kind(raw, a: np.ndarray) -> None:
    """ValueError when the labels ``a`` (numpy's array of ``raw``) mix strings, bytes and
    numbers, or hold something else: numpy turns ``["a", 1]`` into the strings ``'a', '1'`` (the
    label 1 would come back as '1') and cannot sort an object array of both."""
    if a.dtype.kind not in "USO" or (isinstance(raw, np.ndarray) and a.dtype.kind != "O"):
        return
    kinds = {_label_kind(t) for t in set(map(type, np.asarray(raw, dtype=object).ravel().tolist()))}
    odd = kinds - {"strings", "bytes", "numbers"}
    if odd:
        raise ValueError(f"Unknown label type: {sorted(odd)[0]} (labels are integers or strings)")
    if len(kinds) > 1:
        raise ValueError(f"the labels mix {' and '.join(sorted(kinds))}: give labels of one type")


def _no_nested(labels: list, what: str, sets: bool = True) -> None:
    """ValueError when a label of ``labels`` is itself a collection: numpy would read ``['a']``
    inside a label list as the label ``'a'``. ``sets``: say where label sets go."""
    for v in labels:
        if isinstance(v, (list, tuple, set, frozenset, dict, np.ndarray)):
            hint = f" ({_SETS_HINT})" if sets else ""
            raise ValueError(f"{what}: a label is a {type(v).__name__} ({v!r}); labels are integers or strings{hint}")


def _check_classes_memory(k: int) -> None:
    """ValueError when ``k`` classes would not fit in memory (``classes_``, label tables): the
    check the CLI makes of -k, before anything is allocated."""
    from .learner import check_memory

    try:
        check_memory(56 * int(k), f"{int(k):,} classes")
    except LomtreeError as e:
        raise _value_error(e) from None


def _column_y(y) -> np.ndarray:
    if _is_sparse(y):
        raise ValueError(f"y is a sparse label-indicator matrix: {_SETS_HINT}")
    raw = y
    try:
        y = np.asarray(y)
    except ValueError:  # ragged: lists of labels of different lengths
        raise ValueError(f"y holds lists of labels: {_SETS_HINT}") from None
    if y.dtype.kind == "O" and y.ndim == 1 and y.size and isinstance(y[0], (set, frozenset, list, tuple, np.ndarray)):
        raise ValueError(f"y holds label sets: {_SETS_HINT}")
    if y.ndim == 2 and y.shape[1] > 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead ({_SETS_HINT})")
    if y.ndim == 2 and y.shape[1] == 1:
        try:
            from sklearn.exceptions import DataConversionWarning as _W
        except ImportError:  # pragma: no cover - scikit-learn is optional
            _W = UserWarning
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape "
                      "of y to (n_samples, ), for example using ravel().", _W, stacklevel=3)
        y = y.ravel()
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    _one_kind(raw, y)
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError("Input y contains NaN or infinity.")
        if (y != np.round(y)).any():
            raise ValueError("Unknown label type: continuous (lomtree is a classifier: labels are integers or strings)")
        y = y.astype(np.int64)
    elif y.dtype.kind == "O":
        if any(isinstance(v, float) and not math.isfinite(v) for v in y.tolist()):
            raise ValueError("Input y contains NaN or infinity.")
    elif y.dtype.kind not in "iuUSb":
        raise ValueError(f"Unknown label type: {y.dtype}")
    return y


def _sample_weight(sample_weight, n: int) -> np.ndarray:
    """float64 weights of ``n`` examples, finite, >= 0 and not all 0; ValueError otherwise."""
    w = np.array(sample_weight, dtype=np.float64)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"sample_weight.shape == {w.shape}, expected ({n},)!")
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise ValueError("sample_weight must be finite and >= 0")
    if not (w > 0).any():
        raise ValueError("Sample weights must contain at least one non-zero number")
    return w


def _py(v):
    """A numpy scalar as the Python value (for messages)."""
    return v.item() if hasattr(v, "item") else v


class Labels:
    """Class names <-> ids 1..k. ``names``: array (classes_); ``int_offset``: not None when the
    names are the integers ``1 - offset .. k - offset`` (the CLI's labels: id = label + offset)."""

    def __init__(self, names, int_offset: int | None = None):
        self.names = np.asarray(names)
        self.int_offset = int_offset
        self._sorted = None
        self._index = None  # name -> id (``id_of``)
        self._values = None  # the names as Python values (``name_of``)

    @property
    def k(self) -> int:
        return int(self.names.shape[0])

    @staticmethod
    def from_param(classes, label_offset: int, y=None) -> "Labels":
        if isinstance(classes, numbers.Integral) and not isinstance(classes, bool):
            k = int(classes)
            if not 1 <= k < 2**31:
                raise ValueError(f"classes (-k) must be in 1..2^31-1, got {k}")
            _check_classes_memory(k)
            return Labels(np.arange(1, k + 1, dtype=np.int64) - int(label_offset), int(label_offset))
        if classes is None:
            if y is None:
                raise ValueError("the classes are not known: give classes=K or a list of labels "
                                 "(or fit with y first)")
            names = np.unique(_column_y(y))
        else:
            _no_nested(list(classes), "classes")
            names = np.asarray(list(classes))
            _one_kind(list(classes), names)
            if names.ndim != 1 or names.shape[0] == 0:
                raise ValueError("classes must be an int K or a non-empty list of labels")
            if np.unique(names).shape[0] != names.shape[0]:
                raise ValueError("classes: a label is given twice")
        if names.dtype.kind in "iu":
            k = names.shape[0]
            if np.array_equal(names, np.arange(1, k + 1) - int(label_offset)):
                return Labels(names.astype(np.int64), int(label_offset))
        return Labels(names)

    def ids(self, y) -> np.ndarray:
        """int64 ids 1..k of the labels ``y``; ValueError for a label not in the classes."""
        y = _column_y(y)
        if self.int_offset is not None and y.dtype.kind in "iub":
            ids = y.astype(np.int64) + self.int_offset
            bad = (ids < 1) | (ids > self.k)
            if bad.any():
                v = y[np.flatnonzero(bad)[0]]
                raise ValueError(f"label {_py(v)!r} is not one of the classes ({self.describe()})")
            return ids
        names = self.names
        if self._sorted is None:
            order = np.argsort(names, kind="stable")
            self._sorted = (names[order], order)
        s, order = self._sorted
        try:
            pos = np.searchsorted(s, y)
        except TypeError:
            raise ValueError(f"labels of type {y.dtype} do not match the classes ({self.describe()})") from None
        pos = np.minimum(pos, s.shape[0] - 1)
        ok = s[pos] == y
        if not np.all(ok):
            v = y[np.flatnonzero(~np.asarray(ok))[0]]
            raise ValueError(f"label {_py(v)!r} is not one of the classes ({self.describe()})")
        return order[pos].astype(np.int64) + 1

    def unseen(self, y) -> list:
        """The distinct labels of ``y`` (a list of labels) not among the classes, in order of
        first appearance."""
        index = self._index
        if index is None:
            index = self._index = {v: i + 1 for i, v in enumerate(self.names.tolist())}
        out, met = [], set()
        for v in y:
            v = v.item() if isinstance(v, np.generic) else v
            try:
                known = v in index or v in met
            except TypeError:  # unhashable: ``ids`` says what is wrong with it
                continue
            if not known:
                met.add(v)
                out.append(v)
        return out

    def add(self, new: list) -> None:
        """Append the labels ``new`` (ids k+1, k+2, ...): an open label set grows."""
        _no_nested(new, "y")
        old = self.names.tolist()
        _one_kind(old + list(new), np.asarray(old + list(new)))
        names = np.asarray(old + list(new))
        if names.dtype.kind == "f":  # numpy made the integers of ``old`` floats: no label is
            raise ValueError("labels must be integers or strings")
        off = self.int_offset
        if off is not None and not (names.dtype.kind in "iu" and np.array_equal(names, np.arange(1, names.shape[0] + 1) - off)):
            off = None
        self.names = names.astype(np.int64) if off is not None else names
        self.int_offset = off
        self._sorted = None
        self._index = None
        self._values = None

    def id_of(self, y) -> int:
        """The id 1..k of the one label ``y`` (``ids([y])[0]`` without arrays: a dictionary of the
        names); ValueError as ``ids``."""
        index = self._index
        if index is None:
            index = self._index = {v: i + 1 for i, v in enumerate(self.names.tolist())}
        try:
            i = index.get(y.item() if isinstance(y, np.generic) else y)
        except TypeError:  # unhashable
            i = None
        if i is None or type(y) is bool or (type(y) is float and self.names.dtype.kind not in "f"):
            _no_nested([y], "y")  # (``ids`` would read ['a'] as a column of the label 'a')
            return int(self.ids([y])[0])  # its message, or the conversions ``ids`` makes
        return i

    def name_of(self, i: int):
        """The label of id ``i`` (``decode`` of one id, as a Python value)."""
        values = self._values
        if values is None:
            values = self._values = self.names.tolist()
        return values[min(max(int(i), 1), len(values)) - 1]

    def decode(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        return self.names[np.clip(ids, 1, self.k) - 1]

    def describe(self) -> str:
        if self.int_offset is not None:
            return f"{self.names[0]}..{self.names[-1]}"
        shown = ", ".join(map(str, self.names[:10].tolist()))
        return shown + (f", ... ({self.k} labels)" if self.k > 10 else "")

    # model file members
    def to_members(self, k: int | None = None) -> tuple[dict, dict]:
        """The model file's members and header keys of the names (none for the CLI's 1..k, ``k``
        the model's classes: an open label set may have fewer names than room)."""
        if self.int_offset is not None and (k is None or k == self.k):
            return {}, {}
        values = self.names.tolist()
        kind = {"b": "bool", "i": "int", "u": "int", "S": "bytes"}.get(self.names.dtype.kind, "str")
        if self.names.dtype.kind == "O":  # integers beyond 64 bits, or bytes, as Python objects
            kinds = set(map(type, values))
            kind = "int" if kinds == {int} else "bytes" if kinds == {bytes} else "str"
        if kind == "bytes":  # each byte as one character: any bytes come back
            values = [v.decode("latin-1") for v in values]
        text = "\n".join(str(v) for v in values)
        if kind in ("str", "bytes") and any("\n" in v for v in values):
            raise ValueError("a label containing a newline cannot be saved")
        return ({LABELS_MEMBER: np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()},
                {"api_labels": kind})

    @staticmethod
    def from_model(loaded) -> "Labels":
        k = loaded.reduction.config.k
        a = loaded.extra.get(LABELS_MEMBER)
        kind = loaded.header.get("api_labels")
        if a is None:
            if k is None:
                k = _open_k(loaded)
            off = int(loaded.input_config.offset)  # an XMC file's labels are 0-based: classes_ as written
            return Labels(np.arange(1, int(k) + 1, dtype=np.int64) - off, off)
        names = bytes(np.asarray(a, np.uint8)).decode("utf-8").split("\n")
        if kind == "bool":
            return Labels(np.array([v == "True" for v in names]))
        if kind == "bytes":
            return Labels(np.array([v.encode("latin-1") for v in names]))
        if kind != "int":
            return Labels(np.array(names))
        ints = [int(v) for v in names]
        for dtype in (np.int64, np.uint64):  # as numpy held them (it never makes them float here)
            info = np.iinfo(dtype)
            if all(info.min <= v <= info.max for v in ints):
                return Labels(np.array(ints, dtype=dtype))
        return Labels(np.array(ints, dtype=object))


#: the largest label of a model without -k that ``classes_`` may count up to (8 bytes each)
OPEN_LABELS_MAX = 1 << 24


def _open_k(loaded) -> int:
    """The classes of a model trained without -k (cpt, table: an open set of labels): 1..its
    largest label, as if trained with -k that label (a label it never met has probability 0)."""
    from .kernels.cpt_kernels import map_items

    lmap = getattr(loaded.reduction, "lmap", None)
    keys = map_items(lmap)[0] if lmap is not None else np.zeros(0, np.int64)
    top = int(keys.max()) if keys.size else 1
    if top > OPEN_LABELS_MAX:
        raise ValueError(f"the model has no -k and a label {top}: classes_ 1..{top} would be too large "
                         f"(at most {OPEN_LABELS_MAX})")
    return top


# -- label sets -------------------------------------------------------------------------------

def _is_indicator(Y) -> bool:
    """``Y`` is a 0-1 indicator matrix (scipy.sparse, or a 2-D numpy array), not a list of sets."""
    return _is_sparse(Y) or (isinstance(Y, np.ndarray) and Y.ndim == 2)


def indicator_rows(Y):
    """``Y`` as scikit-learn reads it: a list of lists (or 1-D arrays) of one length holding only
    0 and 1 is the rows of an indicator matrix (``Y.tolist()``), returned as a 2-D array; anything
    else unchanged (sets, tuples, rows of other labels or lengths: label collections)."""
    if not isinstance(Y, list) or not Y or _is_indicator(Y):
        return Y
    first = Y[0]
    if not isinstance(first, (list, np.ndarray)) or len(first) == 0:
        return Y
    n = len(first)
    for row in Y:
        if not isinstance(row, (list, np.ndarray)) or len(row) != n:
            return Y
    try:
        a = np.asarray(Y)
    except ValueError:
        return Y
    if a.ndim != 2 or a.dtype.kind not in "biu" or not np.isin(a, (0, 1)).all():
        return Y
    return a


def _y_format(Y):
    """How ``predict`` answers a multi-label model fitted on ``Y``: ("dense", dtype) or
    ("sparse", dtype) for an indicator matrix, None for label collections (lists of labels)."""
    if _is_sparse(Y):
        return ("sparse", Y.dtype)
    if isinstance(Y, np.ndarray) and Y.ndim == 2:
        return ("dense", Y.dtype)
    return None


def _label_lists(Y) -> tuple[list, np.ndarray]:
    """(every label of every set, flat; the set sizes) of ``Y``, a sequence of collections."""
    if isinstance(Y, (str, bytes, dict)) or not hasattr(Y, "__len__"):
        raise ValueError(f"with multilabel=True, Y is a list of label collections or a 0-1 indicator matrix, "
                         f"got {type(Y).__name__}")
    flat, sizes = [], np.zeros(len(Y), np.int64)
    for i, s in enumerate(Y):
        if isinstance(s, (str, bytes, dict)) or not hasattr(s, "__iter__"):
            raise ValueError(f"Y[{i}] is {type(s).__name__}: with multilabel=True each example's labels are a "
                             f"collection (a list or a set)")
        before = len(flat)
        flat.extend(s.tolist() if isinstance(s, np.ndarray) else s)
        _no_nested(flat[before:], f"Y[{i}]", sets=False)
        sizes[i] = len(flat) - before
    return flat, sizes


def _indicator(Y) -> tuple[np.ndarray, np.ndarray, int]:
    """(label_ptr, label_ids, columns) of a 0-1 indicator matrix: column j is class id j + 1."""
    if _is_sparse(Y):
        csr = Y.tocsr(copy=True)
        _check_csr(np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64), int(csr.shape[1]), "Y")
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        if csr.data.size and not (csr.data == 1).all():
            raise ValueError("Y: an indicator matrix holds only 0 and 1")
        return np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64) + 1, int(csr.shape[1])
    if Y.dtype.kind not in "biuf":
        raise ValueError(f"Y: an indicator matrix holds only 0 and 1, got dtype {Y.dtype}")
    if not np.isin(Y, (0, 1)).all():
        raise ValueError("Y: an indicator matrix holds only 0 and 1")
    rows, cols = np.nonzero(Y)
    ptr = np.zeros(Y.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=Y.shape[0]), out=ptr[1:])
    return ptr, cols.astype(np.int64) + 1, int(Y.shape[1])


def set_labels(classes, label_offset: int, Y) -> "Labels":
    """The classes of a multi-label model: ``classes`` as for one label; None = 1..K for a K-column
    indicator matrix, else the sorted distinct labels of all the sets."""
    if classes is not None or Y is None:
        return Labels.from_param(classes, label_offset)
    if _is_indicator(Y):
        return Labels.from_param(int(Y.shape[1]), label_offset)
    flat, _ = _label_lists(Y)
    if not flat:
        raise ValueError("Y has no label at all: give the classes (classes=K or a list of labels)")
    return Labels.from_param(None, label_offset, flat)


def label_sets(Y, labels: "Labels") -> tuple[np.ndarray, np.ndarray]:
    """(label_ptr, label_ids) of ``Y`` (a list of label collections or an indicator matrix): each
    example's class ids, sorted and distinct, as the parser gives a line's label set."""
    if _is_indicator(Y):
        ptr, ids, cols = _indicator(Y)
        if cols != labels.k:
            raise ValueError(f"Y has {cols} columns but there are {labels.k} classes")
        return ptr, ids
    flat, sizes = _label_lists(Y)
    ids = labels.ids(flat) if flat else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(sizes.shape[0]), sizes)
    order = np.lexsort((ids, owner))
    ids, owner = ids[order], owner[order]
    keep = np.ones(ids.shape[0], dtype=bool)
    keep[1:] = (ids[1:] != ids[:-1]) | (owner[1:] != owner[:-1])
    ids, owner = ids[keep], owner[keep]
    ptr = np.zeros(sizes.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=sizes.shape[0]), out=ptr[1:])
    return ptr, ids


# -- the estimator ------------------------------------------------------------------------------

#: every reduction's options (``Classifier`` spells each as a parameter: scikit-learn reads them
#: from the signature)
_REDUCTION_OPTIONS = tuple(reduction_options())
#: VW's feature options, each as its CLI option may be repeated: a string or a list of strings
_FEATURE_OPTIONS = ("quadratic", "cubic", "interactions", "ngram", "skips", "ignore", "keep", "ignore_linear")


def _option_values(name: str, value) -> tuple:
    """A feature option's values as the CLI collects its repeated flags: ``None`` none, a string
    (or an int, for ``ngram``/``skips``) one, a list or tuple of them several."""
    if value is None:
        return ()
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for v in values:
        if isinstance(v, numbers.Integral) and not isinstance(v, bool) and name in ("ngram", "skips"):
            v = str(int(v))
        if not isinstance(v, str):
            raise ValueError(f"{name} takes a string or a list of strings, got {value!r}")
        out.append(v)
    return tuple(out)


class _SklearnEstimator(_SkEstimator):
    """What every lomtree estimator of this module shares with scikit-learn (the Classifier; a
    regressor takes the same): feature names of DataFrames, the shuffled passes of ``fit``, and
    the two checks an online learner fails by design."""

    #: scikit-learn's checks an online learner fails by design (``check_estimator``'s
    #: ``expected_failed_checks``; ``_xfail_checks`` tag of scikit-learn < 1.6)
    EXPECTED_FAILED_CHECKS = {
        "check_sample_weight_equivalence_on_dense_data":
            "online learning: an importance weight of 2 is one larger step, not two visits of the example",
        "check_sample_weight_equivalence_on_sparse_data":
            "online learning: an importance weight of 2 is one larger step, not two visits of the example",
    }

    def _check_names(self, X, reset: bool) -> None:
        """``feature_names_in_``: a DataFrame's column names at the first fit, the same names in
        the same order afterwards (scikit-learn's rule and messages)."""
        try:
            from sklearn.utils.validation import _check_feature_names
        except ImportError:  # pragma: no cover - without scikit-learn: the rule, shorter messages
            cols = getattr(X, "columns", None)
            names = None if cols is None else np.asarray(list(cols), dtype=object)
            if names is not None and not all(isinstance(c, str) for c in names):
                names = None
            if reset:
                if names is None:
                    self.__dict__.pop("feature_names_in_", None)
                else:
                    self.feature_names_in_ = names
                return
            have = getattr(self, "feature_names_in_", None)
            if have is not None and names is not None and not np.array_equal(have, names):
                raise ValueError("The feature names should match those that were passed during fit.")
            return
        _check_feature_names(self, X, reset=reset)

    def _pass_order(self, n: int):
        """A function of the pass number giving the order of the ``n`` examples in that pass
        (``shuffle=True``: a new permutation each pass, from ``random_state``), or None."""
        if not self.shuffle:
            return None
        rs = self.random_state
        if isinstance(rs, np.random.RandomState):
            rs = int(rs.randint(0, 2**31 - 1))
        elif isinstance(rs, np.random.Generator):
            rs = int(rs.integers(0, 2**31 - 1))
        elif rs is not None and (isinstance(rs, bool) or not isinstance(rs, numbers.Integral)):
            raise ValueError(f"random_state must be None, an int or a numpy random generator, got {rs!r}")
        rng = np.random.default_rng(rs)
        return lambda _pass: rng.permutation(n)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"requires_y": True, "X_types": ["2darray", "sparse"], "_xfail_checks": dict(self.EXPECTED_FAILED_CHECKS)}


def permuted(batch: ExampleBatch, order: np.ndarray) -> ExampleBatch:
    """The examples of ``batch`` in the order ``order`` (a permutation), numpy over the arrays."""
    order = np.asarray(order, dtype=np.int64)

    def gather(ptr, arrays):
        counts = np.diff(ptr)[order]
        new = np.zeros(order.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=new[1:])
        pos = np.repeat(ptr[:-1][order] - new[:-1], counts) + np.arange(int(new[-1]), dtype=np.int64)
        return new, [a[pos] for a in arrays]

    base = int(batch.indptr[0])
    indptr, (indices, values) = gather(batch.indptr - base, (batch.indices[base:], batch.values[base:]))
    lptr = lids = None
    if batch.label_ptr is not None:
        lb = int(batch.label_ptr[0])
        lptr, (lids,) = gather(batch.label_ptr - lb, (batch.label_ids[lb:],))
    return ExampleBatch(labels=batch.labels[order], weights=batch.weights[order], indptr=indptr, indices=indices,
                        values=values, line_numbers=batch.line_numbers[order], source=batch.source,
                        label_ptr=lptr, label_ids=lids)


class Classifier(_SkClassifier, _SklearnEstimator):
    """A lomtree model: scikit-learn's estimator conventions and River's ``learn_one``/``predict_one``.

    Parameters are the CLI's options (``lomtree train --help``); see the module docstring for
    ``classes`` and the inputs. ``verbose=True`` prints the CLI's progress table and summary on
    stderr. After fitting: ``classes_``, ``n_features_in_`` (array inputs), ``summary_`` (the
    JSON report of the last fit), ``passes_done_``.
    """

    #: the estimator that loads models of real labels (``regressor.Regressor``, set when it is imported)
    real_label_estimator = None

    def __init__(self, reduction=DEFAULT, classes=None, bits=18, learning_rate=None, power_t=None,
                 initial_t=None, loss_function=None, quantile_tau=0.5, sgd=False, decay_learning_rate=None, l1=0.0, l2=0.0,
                 passes=1, holdout_period=10, holdout_off=False, early_terminate=3, seed=0, hash_seed=0,
                 noconstant=False, label_offset=0, format=None, max_internal_nodes=None, swap_resistance=None,
                 leaf_labels=None, candidates_up=None, label_prior=None, leaf_positive_weight=None, trained_candidates=None,
                 max_class_records=None,
                 cpt_alpha=None, cpt_predict=None,
                 cpt_random_insert=None,
                 arity=None, beam=None, tree_buffer=None, path_weight=None, leaf_negatives=None, block_group=None,
                 shuffle_buffer=None, complete_tree=None,
                 dim=None,
                 depth=None, reassign_after=None, tree=None, linear=None, verbose=False, multilabel=False,
                 average=None, solver="online", cost=None, dual_memory=None, threads=1, quadratic=None,
                 cubic=None, interactions=None, ngram=None, skips=None, ignore=None, keep=None, ignore_linear=None,
                 shuffle=False, random_state=None):
        self.reduction = reduction
        self.classes = classes
        self.bits = bits
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.initial_t = initial_t
        self.loss_function = loss_function
        self.quantile_tau = quantile_tau
        self.sgd = sgd
        self.decay_learning_rate = decay_learning_rate
        self.l1 = l1
        self.l2 = l2
        self.passes = passes
        self.holdout_period = holdout_period
        self.holdout_off = holdout_off
        self.early_terminate = early_terminate
        self.seed = seed
        self.hash_seed = hash_seed
        self.noconstant = noconstant
        self.label_offset = label_offset
        self.format = format
        self.max_internal_nodes = max_internal_nodes
        self.swap_resistance = swap_resistance
        self.leaf_labels = leaf_labels
        self.candidates_up = candidates_up
        self.label_prior = label_prior
        self.leaf_positive_weight = leaf_positive_weight
        self.trained_candidates = trained_candidates
        self.max_class_records = max_class_records
        self.cpt_alpha = cpt_alpha
        self.cpt_predict = cpt_predict
        self.cpt_random_insert = cpt_random_insert
        self.arity = arity
        self.beam = beam
        self.tree_buffer = tree_buffer
        self.path_weight = path_weight
        self.leaf_negatives = leaf_negatives
        self.shuffle_buffer = shuffle_buffer
        self.complete_tree = complete_tree
        self.block_group = block_group
        self.dim = dim
        self.depth = depth
        self.reassign_after = reassign_after
        self.tree = tree
        self.linear = linear
        self.verbose = verbose
        self.multilabel = multilabel
        self.average = average
        self.solver = solver
        self.cost = cost
        self.dual_memory = dual_memory
        self.threads = threads
        self.quadratic = quadratic
        self.cubic = cubic
        self.interactions = interactions
        self.ngram = ngram
        self.skips = skips
        self.ignore = ignore
        self.keep = keep
        self.ignore_linear = ignore_linear
        self.shuffle = shuffle
        self.random_state = random_state

    # -- scikit-learn's plumbing ---------------------------------------------------------------
    @classmethod
    def _get_param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        names = set(self._get_param_names())
        for key, value in params.items():
            if key not in names:
                raise ValueError(f"Invalid parameter {key!r} for estimator {type(self).__name__}. "
                                 f"Valid parameters are: {sorted(names)!r}.")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        def same(a, b) -> bool:
            return a is b or (type(a) is type(b) and not isinstance(a, np.ndarray) and a == b)

        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if not same(v, defaults.get(k))]
        return f"{type(self).__name__}({', '.join(changed)})"

    _estimator_type = "classifier"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = bool(self.multilabel)
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "_model", None) is not None

    def _check_fitted(self):
        if getattr(self, "_model", None) is None:
            import sys

            sk = sys.modules.get("sklearn.exceptions")  # scikit-learn's own class when it is in use
            raise (getattr(sk, "NotFittedError", None) or NotFittedError)(f"This {type(self).__name__} instance is not fitted yet: call fit, "
                                 f"partial_fit, learn_one or load first.")

    # -- configs -------------------------------------------------------------------------------
    def _configs(self, k: int, fmt: str):
        """(InputConfig, LearnerConfig, ReductionConfig) of a new model with ``k`` classes; the
        CLI's own defaults and checks (``commands.new_model_configs``)."""
        from .commands import new_model_configs

        p = {name: getattr(self, name) for name in _REDUCTION_OPTIONS}
        p.update(reduction=self.reduction, k=k, seed=self.seed, learning_rate=self.learning_rate,
                 initial_t=self.initial_t, power_t=self.power_t, loss=self.loss_function,
                 quantile_tau=self.quantile_tau, sgd=bool(self.sgd), decay_learning_rate=self.decay_learning_rate,
                 l1=self.l1, l2=self.l2, multilabel=bool(self.multilabel), passes=int(self.passes or 1),
                 average=self.average, solver=self.solver, cost=self.cost, dual_memory=self.dual_memory)
        icfg = self._input_config(fmt)
        try:
            rcfg, lcfg = new_model_configs(p)
        except LomtreeError as e:
            raise _value_error(e) from None
        except TypeError as e:
            raise ValueError(f"bad parameter value: {e}") from None
        return icfg, lcfg, rcfg

    def _input_config(self, fmt: str) -> InputConfig:
        """The InputConfig of a new model read in format ``fmt``; ValueError for a bad value."""
        if fmt == "xmc":  # its header line belongs to a file, not to a list of lines
            raise ValueError("format='xmc' is for files (lomtree train --format xmc); give arrays, or lines "
                             "with format='libsvm' and multilabel=True")
        from .vwopts import vw_input_fields

        feats = {name: _option_values(name, getattr(self, name)) for name in _FEATURE_OPTIONS}
        try:
            fields = vw_input_fields({**feats, "fmt": fmt, "multilabel": bool(self.multilabel)})
            return InputConfig(format=fmt, bits=int(self.bits), hash_seed=int(self.hash_seed),
                               noconstant=bool(self.noconstant), label_offset=int(self.label_offset), **fields)
        except LomtreeError as e:
            raise _value_error(e) from None
        except TypeError as e:
            raise ValueError(f"bad parameter value: {e}") from None

    def _new_model_for(self, classes, y, X):
        """A new model for ``X``: its classes are ``classes`` (an int K or labels), else those of
        ``y``, else 1..K for text lines whose labels name class ids up to K (as ``lomtree train``
        without ``-k`` reads a labelled stream). Returns the lines' batch when they were parsed for
        that, for ``_batch`` to take instead of parsing them again; else None."""
        fmt = self._format_for(X)
        parsed = None
        if classes is None and y is None and _is_lines(X):
            parsed = lines_batch(X, self._input_config(fmt))
            ids = parsed.label_ids if parsed.label_ptr is not None else parsed.labels
            k = int(ids.max()) if ids.size else 0
            if k < 1:
                raise ValueError("the lines carry no label: give classes=K or a list of labels")
            if k > OPEN_LABELS_MAX:  # classes_ would be 1..k: refused before it is made
                raise ValueError(f"the lines name class {k}: without classes=K the classes are 1..the largest "
                                 f"label, at most {OPEN_LABELS_MAX} (give classes=K for more)")
            self._new_model(lambda: Labels.from_param(k, int(self.label_offset)), fmt, k=k)
            return parsed
        elif self.multilabel:
            labels = set_labels(classes, int(self.label_offset), y)
        else:
            labels = Labels.from_param(classes, int(self.label_offset), y if classes is None else None)
        self._new_model(labels, fmt)
        return parsed

    def _threads(self) -> int:
        """``threads`` as ``lomtree train --threads`` reads it: 0 = one per CPU (at most 4)."""
        from .driver import resolve_threads

        t = self.threads
        memo = self.__dict__.get("_threads_memo")
        # learn_one asks on every example: the CPU count (a system call) is read once per value
        if memo is not None and memo[0] is t:
            return memo[1]
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise ValueError(f"--threads must be an int, got {t!r}")
        if t < 0:
            raise ValueError(f"--threads must be >= 0, got {t}")
        try:
            n = resolve_threads(int(t))
        except LomtreeError as e:
            raise _value_error(e) from None
        self._threads_memo = (t, n)
        return n

    def _new_model(self, labels, fmt: str, k: int | None = None):
        """A new model of ``k`` classes (``labels.k``); ``labels``: Labels, or a function making
        them, called once the model's own memory checks have passed (as the CLI checks -k)."""
        from .core import Learner

        icfg, lcfg, rcfg = self._configs(labels.k if k is None else int(k), fmt)
        self._threads()  # checked before anything is learned
        try:
            model = Learner.new(icfg, lcfg, rcfg)
        except LomtreeError as e:
            raise _value_error(e) from None
        model.plan()  # a stream until ``fit`` plans its passes
        self._set_model(model, labels() if callable(labels) else labels)
        self.passes_done_ = 0
        # an open label set: no classes were given and the reduction can take new ones later
        # (the hashed features learned are kept for the regressors' new layout)
        self._open = self.classes is None and self.solver != "dual" and _grows(self._model.reduction.name)
        self._features = np.zeros(1 << int(icfg.bits), dtype=bool) if self._open else None

    def _take_labels(self, new: list) -> None:
        """Classes for the labels ``new`` (an open label set); ValueError when the model's
        classes are fixed (given, or a reduction built for k classes)."""
        if not getattr(self, "_open", False):
            name = self._model.reduction.name
            why = (f"reduction {name!r} builds its structure for a fixed number of classes" if not _grows(name)
                   else "the classes were given" if self.classes is not None else "the model's classes are fixed")
            raise ValueError(f"label {_py(new[0])!r} is not one of the classes ({self._labels.describe()}); {why}")
        red = self._model.reduction
        k = self._labels.k + len(new)
        if k > red.k:
            # OAA pays per regressor on every example: exactly k; the trees: room to double
            cap = k if red.cost_per_class else max(k, 2 * red.k)
            if cap > MAX_CLASSES:
                raise ValueError(f"more than {MAX_CLASSES} classes")
            _check_classes_memory(cap)
            try:
                red.grow_classes(cap, np.flatnonzero(self._features))
            except LomtreeError as e:
                raise _value_error(e) from None
        self._labels.add(new)
        self.classes_ = self._labels.names

    def _set_model(self, model, labels: Labels):
        """``model``: the ``core.Learner`` every method drives."""
        self._model = model
        self._labels = labels
        self.classes_ = labels.names

    # -- examples ------------------------------------------------------------------------------
    def _batch(self, X, y=None, sample_weight=None, fitting: bool = False, parsed=None) -> ExampleBatch:
        """The batch of ``X`` with ids of ``y`` (or the lines' own labels) and weights; ``parsed``:
        the lines ``X`` already parsed with the model's input config (``_new_model_for``)."""
        icfg = self._model.input_config
        if _is_lines(X):
            batch = parsed if parsed is not None else lines_batch(X, icfg)
            if y is None and fitting and self._labels.int_offset is None:
                raise ValueError("labels in the lines are class ids 1..k: with a list of classes, give y")
        elif _is_dicts(X):
            batch = dicts_batch(X, icfg)
        else:
            _, _, _, d = _check_matrix(X)
            have = getattr(self, "n_features_in_", None)
            self._check_names(X, reset=fitting and have is None)
            if fitting and have is None:
                self.n_features_in_ = d
            elif have is not None and d != have:
                raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting {have} features as input.")
            batch = matrix_batch(X, icfg)
        n = len(batch)
        if icfg.multilabel and batch.label_ptr is None:  # arrays: no labels until y gives them
            batch.label_ptr, batch.label_ids = np.zeros(n + 1, np.int64), np.zeros(0, np.int64)
        if y is not None and getattr(self, "_open", False):
            flat = (_label_lists(y)[0] if not _is_indicator(y) else []) if icfg.multilabel else _column_y(y).tolist()
            new = self._labels.unseen(flat)
            if new:
                self._take_labels(new)
        if y is not None and icfg.multilabel:
            ptr, ids = label_sets(y, self._labels)
            if ptr.shape[0] - 1 != n:
                raise ValueError(f"X has {n} examples but Y has {ptr.shape[0] - 1} label sets")
            batch.labels = np.ones(n, np.int64)  # every example has a set (maybe empty)
            batch.label_ptr, batch.label_ids = ptr, ids
        elif y is not None:
            ids = self._labels.ids(y)
            if ids.shape[0] != n:
                raise ValueError(f"X has {n} examples but y has {ids.shape[0]} labels")
            batch.labels = ids
        elif fitting and not _is_lines(X):  # lines carry labels; arrays and feature dicts do not
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        elif fitting and icfg.multilabel:
            over = np.flatnonzero(batch.label_ids > self._labels.k)
            if over.size:
                i = int(np.searchsorted(batch.label_ptr, over[0], side="right")) - 1
                raise ValueError(f"line {int(batch.line_numbers[i])}: label {int(batch.label_ids[over[0]])} is "
                                 f"outside 1..{self._labels.k}")
        elif fitting:
            bad = (batch.labels < 0) | (batch.labels > self._labels.k)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"line {int(batch.line_numbers[i])}: label {int(batch.labels[i])} is outside "
                                 f"1..{self._labels.k}")
        if sample_weight is not None:
            batch.weights = _sample_weight(sample_weight, n)
            if batch.weights.max() > MAX_WEIGHT:  # the parser's bound: one huge weight loses the run
                i = int(np.argmax(batch.weights > MAX_WEIGHT))
                raise ValueError(f"sample_weight[{i}] = {batch.weights[i]:g} is over {MAX_WEIGHT:g}, the largest "
                                 f"importance weight lomtree learns from (as in its input files)")
        if fitting and getattr(self, "_features", None) is not None:
            self._features[batch.indices] = True
        return batch

    def _source(self, batch: ExampleBatch):
        n = len(batch)
        order = self._pass_order(n)
        if order is None:
            return lambda _pass: (batch.slice(a, min(a + CHUNK, n)) for a in range(0, n, CHUNK))

        def shuffled(p):
            b = permuted(batch, order(p))
            return (b.slice(a, min(a + CHUNK, n)) for a in range(0, n, CHUNK))

        return shuffled

    def _run_options(self, passes: int, source, lines: int = 0):
        import sys

        from .driver import RunOptions

        return RunOptions(passes=int(passes), holdout_period=int(self.holdout_period),
                          holdout_off=bool(self.holdout_off), early_terminate=int(self.early_terminate),
                          quiet=not self.verbose, err=sys.stderr, source=source, source_lines=int(lines),
                          train_threads=self._threads())

    def _train(self, batch: ExampleBatch, passes: int):
        """``passes`` passes over ``batch`` through the command line's runner (``driver.fit``:
        its loop, holdout and best-pass model included); the model continues from its state."""
        from . import driver

        model = self._model
        kept = {}
        holdout = int(passes) > 1 and not self.holdout_off

        def save(passes_done: int) -> bool:
            # the best pass on holdout is kept as its bytes (the CLI's model file holds the same);
            # without holdout the model in memory is the one
            if holdout:
                kept["bytes"] = model.to_bytes()
            kept["passes"] = passes_done
            return True

        opts = self._run_options(passes, self._source(batch), len(batch))
        try:
            summary = driver.fit(model, opts, save)
        except LomtreeError as e:
            raise _value_error(e) from None
        if "bytes" in kept:
            from .core import Learner

            best = Learner.load(io.BytesIO(kept["bytes"]))
            best.input_config = model.input_config
            self._model = best
        self.passes_done_ = getattr(self, "passes_done_", 0) + int(kept.get("passes", summary["passes"]))
        self.summary_ = summary
        return summary

    def _stream(self, batch: ExampleBatch) -> None:
        """Learn ``batch`` as the next examples of a stream: the model's ``learn`` in chunks of
        ``CHUNK``, no pass ends (no learning-rate decay, no pass hook), nothing saved or printed."""
        model = self._model
        red = model.reduction
        red.set_need_predictions(False)  # nobody reads the progressive predictions
        try:
            n = self._threads()
            done = self.__dict__.get("_threads_set")
            if done is None or done[0] is not red or done[1] != n:  # (once per model and value)
                red.set_train_threads(n)
                self._threads_set = (red, n)
            if len(batch) <= CHUNK:
                model.learn(batch)
                return
            for a in range(0, len(batch), CHUNK):
                model.learn(batch.slice(a, min(a + CHUNK, len(batch))))
        except LomtreeError as e:
            raise _value_error(e) from None

    # -- scikit-learn API ----------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None):
        """A new model trained on ``X``, ``y`` for ``passes`` passes (as ``lomtree train``)."""
        if y is None and not _is_lines(X):
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        for attr in ("n_features_in_", "feature_names_in_", "_model"):
            self.__dict__.pop(attr, None)
        y = indicator_rows(y) if self.multilabel else y
        self._y_format = _y_format(y) if self.multilabel else None
        parsed = self._new_model_for(self.classes, y, X)
        self._train(self._batch(X, y, sample_weight, fitting=True, parsed=parsed), self.passes)
        return self

    def partial_fit(self, X, y=None, classes=None, sample_weight=None):
        """Learn ``X``, ``y`` as the next examples of a stream, continuing the model: no holdout,
        no end of a pass (the learning rate does not decay, ``passes_done_`` does not change), so
        ``partial_fit`` on consecutive parts of a data set learns what ``lomtree train`` learns in
        its one pass until that pass ends. At the first call the classes come from ``classes``
        (scikit-learn), else the ``classes`` parameter, else ``y``, else the lines' labels."""
        parsed = None
        y = indicator_rows(y) if self._multi() else y
        if getattr(self, "_model", None) is None:
            if y is None and not _is_lines(X):
                raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
            if classes is None and self.classes is None and y is not None and not _grows(self.reduction):
                raise ValueError(f"reduction {self.reduction!r} builds its structure for a fixed number of classes: "
                                 f"give them at the first call (partial_fit(X, y, classes=...) or classes=...)")
            self._y_format = _y_format(y) if self._multi() else None
            parsed = self._new_model_for(classes if classes is not None else self.classes, y, X)
            if classes is not None:  # scikit-learn's promise: these are all the classes
                self._open, self._features = False, None
        self._stream(self._batch(X, y, sample_weight, fitting=True, parsed=parsed))
        return self

    def _multi(self) -> bool:
        """The model (else the parameters) is multi-label."""
        model = getattr(self, "_model", None)
        return bool(self.multilabel) if model is None else bool(model.input_config.multilabel)

    def _format_for(self, X) -> str:
        if self.format is not None:
            return self.format
        return "vw" if (_is_lines(X) or _is_dicts(X)) else "libsvm"

    def predict(self, X, top_k: int | None = None, threshold: float | None = None):
        """The predicted label of every example (nothing in the model changes).

        Multi-label models: a list of label lists, each the labels with P(label|x) >= ``threshold``
        (0.5 by default, VW's ``--plt`` rule), best first, as ``lomtree predict`` prints them;
        with ``top_k=K`` an (n, K) array of the K best labels instead (a row with fewer labels
        of probability > 0 goes on with the others in ``classes_`` order, probability 0).
        Single-label models: ``top_k`` gives ``predict_top``'s labels; ``threshold`` is refused."""
        self._check_fitted()
        if top_k is not None:
            if threshold is not None:
                raise ValueError("give top_k or threshold, not both")
            k = self._top_k(top_k)
            if not self._multi():
                return self.predict_top(X, k)[0]
            return self._labels.decode(self._ranked_ids(self._batch(X), k))
        if not self._multi():
            if threshold is not None:
                raise ValueError("threshold is for label sets: Classifier(multilabel=True)")
            ids = self._predict_ids(self._batch(X))
            return self._labels.decode(ids)
        sets = self._set_ids(self._batch(X), threshold)
        fmt = getattr(self, "_y_format", None)
        if fmt is None:
            return [self._labels.decode(ids).tolist() for ids in sets]
        # fitted on an indicator matrix: the indicator matrix of the answer, its type and dtype
        rows = np.repeat(np.arange(len(sets)), [len(ids) for ids in sets])
        cols = (np.concatenate(sets) if sets else np.zeros(0, np.int64)).astype(np.int64) - 1
        out = np.zeros((len(sets), self._labels.k), dtype=fmt[1])
        out[rows, cols] = 1
        if fmt[0] == "sparse":
            import scipy.sparse

            return scipy.sparse.csr_matrix(out)
        return out

    def _top_k(self, top_k) -> int:
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
            raise ValueError(f"top_k must be an int, got {top_k!r}")
        if not 1 <= int(top_k) <= self._labels.k:
            raise ValueError(f"top_k must be in 1..{self._labels.k} (the number of classes), got {top_k}")
        return int(top_k)

    def _set_predictor(self, threshold):
        from .multilabel import DEFAULT_THRESHOLD, SetPredictor

        t = DEFAULT_THRESHOLD if threshold is None else threshold
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0.0 <= float(t) <= 1.0:
            raise ValueError(f"threshold must be a number in 0..1, got {threshold!r}")
        if self._buffering():
            return None
        self._model.settle()
        return SetPredictor(self._model.reduction, 0, float(t))

    def settle(self):
        """End what a stream holds back: a plt model builds its label tree from the examples it
        buffers (``tree_buffer``; the end of ``fit``'s pass, ``save`` and pickling do the same).
        Predictions never do it (they would change what later learning builds): until then a
        buffering model predicts by label frequency, as the CLI's progressive predictions."""
        self._check_fitted()
        self._model.settle()
        return self

    def _buffering(self) -> bool:
        """The reduction holds a stream's first examples to build its structure from (plt's
        ``--tree-buffer``): predicting now must not build it (a prediction changes nothing of
        what learning builds), so it answers by label frequency, as the CLI's progressive
        predictions do meanwhile."""
        red = self._model.reduction
        return bool(getattr(red, "buffer", None)) and not getattr(red, "built", True)

    def _frequencies(self) -> np.ndarray:
        """float64 (k,): each class's share of the examples buffered so far (``_buffering``):
        single labels, the label counts (``freq``); label sets, each label's fraction of the
        examples (``label_counts``)."""
        red = self._model.reduction
        k = self._labels.k
        if self._multi():
            c = red.label_counts
            return c[1:k + 1] / max(float(c[0]), 1.0)
        f = red.freq[1:k + 1].astype(np.float64)
        return f / max(float(f.sum()), 1.0)

    def _set_ids(self, batch: ExampleBatch, threshold) -> list:
        """Per example the class ids with P(label|x) >= threshold, best first: ``lomtree
        predict``'s lines (``SetPredictor.ranked``)."""
        if self._buffering():
            p = self._frequencies()
            t = 0.5 if threshold is None else float(threshold)
            order = np.argsort(-p, kind="stable")
            ids = order[p[order] >= t] + 1
            self._set_predictor(threshold)  # (its checks of threshold; it does not settle here)
            return [ids.copy() for _ in range(len(batch))]
        sets = self._set_predictor(threshold)
        batch.labels = np.zeros(len(batch), np.int64)  # nothing is scored
        out = []
        for a in range(0, len(batch), CHUNK):
            labs, _, chosen = sets.ranked(batch.slice(a, min(a + CHUNK, len(batch))))
            out.extend(row[c] for row, c in zip(labs, chosen))
        return out

    def _ranked_ids(self, batch: ExampleBatch, k: int) -> np.ndarray:
        """(n, k) class ids best first; where the reduction ranks fewer than k labels of
        probability > 0 the row goes on with the other classes in id order (their probability is
        0 and a stable sort would put them so)."""
        labs, probs = self._top_ids(batch, k)
        labs = np.where(probs > 0, labs, 0)
        for i in np.flatnonzero((labs == 0).any(axis=1)):
            have = labs[i][labs[i] > 0]
            rest = np.setdiff1d(np.arange(1, self._labels.k + 1), have)[:k - have.shape[0]]
            labs[i] = np.concatenate([have, rest])
        return labs

    def _predict_ids(self, batch: ExampleBatch) -> np.ndarray:
        model = self._model
        if self._buffering():  # the most frequent label so far (the CLI's rule: ties to the smallest id)
            return np.full(len(batch), max(1, int(model.reduction.freq[0])), dtype=np.int64)
        batch.labels = np.zeros(len(batch), np.int64)
        if len(batch) <= CHUNK:
            return model.predict(batch)
        out = [model.predict(batch.slice(a, min(a + CHUNK, len(batch)))) for a in range(0, len(batch), CHUNK)]
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def _has_top(self) -> bool:
        return self._model.has_probabilities

    def predict_top(self, X, k: int = 5):
        """(labels, probabilities): the ``k`` most probable labels of each example, best first,
        shapes (n, k); where a reduction gives fewer, probability 0 and the first class fill the
        row. Only for reductions with probabilities (OAA, CPT, PLT, mtree, table)."""
        self._check_fitted()
        if not self._has_top():
            raise ValueError(f"predict_top is not available for reduction {self._model.reduction.name}")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise ValueError(f"k must be an int, got {k!r}")  # (2.7 was read as 2, "2" as 2)
        k = int(k)
        if k < 1:
            raise ValueError("k must be >= 1")
        labs, probs = self._top_ids(self._batch(X), k)
        return self._labels.decode(labs), probs

    def _top_ids(self, batch: ExampleBatch, k: int):
        model = self._model
        if self._buffering():
            p = self._frequencies()
            order = np.argsort(-p, kind="stable")[:k]
            labs = np.zeros((len(batch), k), np.int64)
            probs = np.zeros((len(batch), k))
            labs[:, :order.shape[0]] = order + 1
            probs[:, :order.shape[0]] = p[order]
            return labs, np.where(labs > 0, probs, 0.0)
        batch.labels = np.zeros(len(batch), np.int64)
        labs, probs = [], []
        for a in range(0, len(batch), CHUNK):
            lab, p, _ = model.predict_top(batch.slice(a, min(a + CHUNK, len(batch))), k)
            lab = np.asarray(lab, dtype=np.int64)
            p = np.asarray(p, dtype=np.float64)
            if lab.shape[1] < k:  # pad
                pad = k - lab.shape[1]
                lab = np.hstack([lab, np.zeros((lab.shape[0], pad), np.int64)])
                p = np.hstack([p, np.zeros((p.shape[0], pad))])
            labs.append(lab[:, :k])
            probs.append(np.where(lab[:, :k] > 0, p[:, :k], 0.0))
        return np.vstack(labs), np.vstack(probs)

    def _gives_proba(self) -> bool:
        model = getattr(self, "_model", None)
        return self._has_top() if model is not None else _gives_probabilities(self.reduction)

    @available_if(_gives_proba)
    def predict_proba(self, X) -> np.ndarray:
        """(n, n_classes) probabilities, columns in ``classes_`` order, each row the reduction's
        label probabilities normalised to sum 1, every one kept at least ``PROBA_FLOOR`` from 0
        and 1 (a class a tree does not rank is improbable, not impossible); multi-label models:
        each label's own P(label|x), not normalised (PLT: its path probability), within
        [PROBA_FLOOR, 1 - PROBA_FLOOR]. Only for reductions with probabilities: for the others
        the method does not exist (``hasattr`` is False), as scikit-learn expects."""
        self._check_fitted()
        batch = self._batch(X)
        k = self._labels.k
        labs, probs = self._top_ids(batch, k)
        out = np.zeros((len(batch), k))
        rows = np.repeat(np.arange(len(batch)), labs.shape[1])
        lab = labs.ravel()
        ok = (lab >= 1) & (lab <= k)
        np.add.at(out, (rows[ok], lab[ok] - 1), probs.ravel()[ok])
        if self._multi():  # marginals: a label's probability does not depend on the others'
            return np.clip(out, PROBA_FLOOR, 1.0 - PROBA_FLOOR)
        # a distribution over classes_ (PLT's leaf probabilities are marginals that need not sum
        # to 1); a row with no mass (no label reached) is uniform
        tot = out.sum(axis=1, keepdims=True)
        out = np.where(tot > 0, out / np.where(tot > 0, tot, 1.0), 1.0 / k)
        return (out + PROBA_FLOOR) / (1.0 + k * PROBA_FLOOR)

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy (weighted by ``sample_weight``) of ``predict(X)`` against ``y``;
        multi-label models: precision@1 (the best label is one of the example's labels; an
        empty set scores 0), the ``p@1`` of ``lomtree predict``."""
        if self._multi():
            from .multilabel import in_sets

            self._check_fitted()
            batch = self._batch(X)
            ptr, ids = label_sets(y, self._labels)
            if ptr.shape[0] - 1 != len(batch):
                raise ValueError(f"X has {len(batch)} examples but Y has {ptr.shape[0] - 1} label sets")
            hit = in_sets(self._ranked_ids(batch, 1)[:, 0], ptr, ids).astype(np.float64)
        else:
            pred = self.predict(X)
            y = _column_y(y)
            if y.shape[0] != pred.shape[0]:
                raise ValueError(f"X has {pred.shape[0]} examples but y has {y.shape[0]} labels")
            hit = (pred == y).astype(np.float64)
        if sample_weight is None:
            return float(hit.mean())
        w = _sample_weight(sample_weight, hit.shape[0])
        return float((hit * w).sum() / w.sum())

    # -- River's API ---------------------------------------------------------------------------
    def learn_one(self, x: dict, y):
        """Learn one example: ``x`` a feature dict (module docstring), ``y`` its label (a
        collection of labels, e.g. a set, for ``multilabel=True``), as the next example of a
        stream (``partial_fit``'s rules). The classes must be known (the ``classes`` parameter,
        or an earlier fit)."""
        if self.__dict__.get("_model") is not None:  # a known label of a model with a one-example call
            step = self._one_step(True)
            if step is not None:
                index = self._labels._index  # (``id_of``'s, made at the first label it looked up)
                label = index.get(y) if index is not None and (type(y) is str or type(y) is int) else None
                if label is not None:
                    feats = self._one_features(x)
                    if feats is not None:
                        step(feats, label, True, self._features)
                        return self
        if getattr(self, "_model", None) is None:
            if self.classes is not None:
                labels = Labels.from_param(self.classes, int(self.label_offset))
            elif not _grows(self.reduction):
                raise ValueError(f"reduction {self.reduction!r} builds its structure for a fixed number of classes: "
                                 f"learn_one needs them first (Classifier(classes=K or [labels...]))")
            elif self.multilabel:
                flat = _label_lists([y])[0]
                if not flat:  # no label yet: the example teaches nothing about one
                    return self
                labels = Labels.from_param(None, int(self.label_offset), flat)
            else:
                _no_nested([y], "y")
                labels = Labels.from_param(None, int(self.label_offset), [y])
            self._new_model(labels, self.format or "vw")
        if self._multi():
            self._stream(self._batch([x], [y], fitting=True))
            return self
        batch = dicts_batch([x], self._model.input_config)
        try:
            batch.labels[0] = self._labels.id_of(y)
        except ValueError:
            if not getattr(self, "_open", False):
                raise
            _no_nested([y], "y")
            self._take_labels([y])
            batch.labels[0] = self._labels.id_of(y)
        if self._features is not None:
            self._features[batch.indices] = True
        self._stream(batch)
        return self

    def _one_step(self, learning: bool):
        """The reduction's one-example call (``Reduction.one_step``) when a single-label
        ``learn_one``/``predict_one`` of this model can take it (feature dicts hashed here, no
        ``--average`` swap, one training thread), else None: the batch path, same results."""
        model = self._model
        memo = self.__dict__.get("_step")
        red = model.reduction
        # (a model that grows its classes gets a new reduction config: a new step for the new k)
        if memo is None or memo[0] is not model or memo[1] is not red.config:
            icfg = model.input_config
            fits = icfg.format == "vw" and not icfg.generates_features and not icfg.has_string_labels and \
                not icfg.multilabel and not model.base.averaging
            memo = self._step = (model, red.config, red.one_step() if fits else None)
        if memo[2] is None or (learning and self._threads() != 1):
            return None
        return memo[2]

    def _one_features(self, x):
        """The hashed features of the feature dict ``x`` then their values, one list
        (``_DictHashes.add``'s), or None where the parser must read it (``dicts_batch``)."""
        if type(x) is not dict:
            return None
        indices: list = []
        values: list = []
        if not _DictHashes.of(self._model.input_config).add(x, indices, values):
            return None
        indices += values
        return indices

    def _know(self, labels: list) -> None:
        """The labels ``labels`` become classes of an open label set without anything learned of
        them (River's multi-label targets name every label, those absent too); with fixed
        classes nothing changes (a label outside them is refused when it is learned)."""
        if not labels:
            return
        _no_nested(labels, "y")
        if getattr(self, "_model", None) is None:
            if self.classes is None and _grows(self.reduction):
                self._new_model(Labels.from_param(None, int(self.label_offset), labels), self.format or "vw")
            return
        if getattr(self, "_open", False):
            new = self._labels.unseen(labels)
            if new:
                self._take_labels(new)

    def predict_one(self, x: dict, top_k: int | None = None, threshold: float | None = None):
        """The predicted label of the feature dict ``x`` (None before any learning, as River).
        Multi-label models: the set of labels with P(label|x) >= ``threshold`` (0.5), or with
        ``top_k`` the list of the best ``top_k`` labels, best first (empty before any learning)."""
        if getattr(self, "_model", None) is None:
            if self._multi():
                return [] if top_k is not None else set()
            return None
        if top_k is None and threshold is None:
            step = self._one_step(False)  # (None for label sets)
            if step is not None:
                feats = self._one_features(x)
                if feats is not None:
                    return self._labels.name_of(step(feats, 0, False, None))
        if top_k is None and threshold is None and not self._multi():
            return self._labels.name_of(self._predict_ids(dicts_batch([x], self._model.input_config))[0])
        v = self.predict([x], top_k=top_k, threshold=threshold)[0]
        if top_k is not None:
            return [c.item() if hasattr(c, "item") else c for c in v]
        if self._multi():
            return set(v)
        return v.item() if hasattr(v, "item") else v

    def predict_proba_one(self, x: dict) -> dict:
        """{label: probability} of the feature dict ``x``: every class, each > 0, summing to 1;
        ``{}`` before any learning; NotImplementedError (River's convention) for a reduction
        without probabilities."""
        if not self._gives_proba():
            raise NotImplementedError(f"reduction {self.reduction!r} gives no probabilities")
        if getattr(self, "_model", None) is None:
            return {}
        p = self.predict_proba([x])[0]
        return {(c.item() if hasattr(c, "item") else c): float(v) for c, v in zip(self.classes_, p)}

    # -- model files ---------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the model file (the CLI's format; ``lomtree predict -i path`` reads it)."""
        self._check_fitted()
        arrays, header = self._labels.to_members(self._model.reduction.k or None)
        try:
            self._model.save(path, arrays, header, passes_done=self.passes_done_)
        except LomtreeError as e:
            raise _value_error(e) from None

    def to_bytes(self) -> bytes:
        """The model file's bytes (``save``'s format)."""
        self._check_fitted()
        arrays, header = self._labels.to_members(self._model.reduction.k or None)
        return self._model.to_bytes(arrays, header, passes_done=self.passes_done_)

    @classmethod
    def load(cls, path, verbose: bool = False) -> "Classifier":
        """A fitted Classifier from a model file written by the CLI or by ``save`` (a path, or a
        binary file object); its parameters are the model's. ValueError on a bad file."""
        from . import model_io

        try:
            loaded = model_io.load_model(path)
        except LomtreeError as e:
            raise _value_error(e) from None
        return cls._from_loaded(loaded, verbose)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Classifier":
        return cls.load(io.BytesIO(data))

    @classmethod
    def _from_loaded(cls, loaded, verbose: bool = False) -> "Classifier":
        icfg, rcfg, lcfg = loaded.input_config, loaded.reduction.config, loaded.learner.config
        if icfg.real_labels and not hasattr(cls, "link"):  # -r binary/regression: regressor.py's estimators
            if Classifier.real_label_estimator is None:
                raise ValueError(f"a -r {rcfg.name} model: load it with lomtree_cli.Regressor.load")
            return Classifier.real_label_estimator._from_loaded(loaded, verbose)
        labels = Labels.from_model(loaded)
        params = {name: getattr(rcfg, name) for name in _REDUCTION_OPTIONS}
        # each solver's own options only: the dual solver has no learning rate, the online no C
        if lcfg.solver == "dual":
            params.update(solver="dual", cost=lcfg.cost, dual_memory=lcfg.dual_memory)
        else:
            params.update(learning_rate=lcfg.learning_rate, power_t=lcfg.power_t, initial_t=lcfg.initial_t,
                          decay_learning_rate=lcfg.decay_learning_rate)
        clf = cls(reduction=rcfg.name, classes=labels.k if labels.int_offset is not None else labels.names.tolist(),
                  bits=icfg.bits, loss_function=lcfg.loss, quantile_tau=lcfg.quantile_tau, sgd=lcfg.sgd,
                  l1=lcfg.l1, l2=lcfg.l2, seed=rcfg.seed, hash_seed=icfg.hash_seed,
                  noconstant=icfg.noconstant, label_offset=icfg.label_offset, format=icfg.format,
                  verbose=verbose, multilabel=icfg.multilabel, average=lcfg.average, **params,
                  **_feature_params(icfg))
        from .core import Learner

        clf._set_model(Learner.of(loaded), labels)
        clf.passes_done_ = loaded.passes_done
        return clf

    # pickling: the model file's bytes, never the model's objects
    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("_model", "_labels", "_features", "_threads_memo", "_threads_set", "_step")}
        if getattr(self, "_model", None) is not None:
            state["_model_bytes"] = self.to_bytes()
            if getattr(self, "_features", None) is not None:
                state["_features_bits"] = np.packbits(self._features).tobytes()
        return state

    def __setstate__(self, state):
        data = state.pop("_model_bytes", None)
        bits = state.pop("_features_bits", None)
        self.__dict__.update(state)
        if data is not None:
            other = type(self).from_bytes(data)
            self._set_model(other._model, other._labels)
            if bits is not None:  # an open label set goes on growing
                n = 1 << int(self._model.input_config.bits)
                self._features = np.unpackbits(np.frombuffer(bits, np.uint8), count=n).astype(bool)


class Ensemble:
    """Fitted classifiers that predict as one, as ``lomtree predict -i A -i B ...`` does: each
    answers its most probable labels and a label's score is the mean of their probabilities
    (``lomtree_cli/ensemble.py``); label trees of different seeds make different mistakes.

    ``Ensemble([Classifier.load(p) for p in paths])``, or classifiers just fitted. Every member
    must give probabilities (oaa, cpt, plt, mtree, table), read examples with the same input
    options and have the same classes (ValueError otherwise). An ensemble predicts
    (``predict``, ``predict_top``, ``predict_proba``, ``score``, with the arguments and results
    of ``Classifier``'s); it does not learn, and it is not a model file: save its members."""

    def __init__(self, members):
        from .ensemble import Ensemble as Combined, check_members

        members = list(members)
        if not members:
            raise ValueError("an Ensemble needs at least one fitted Classifier")
        for i, m in enumerate(members):
            if not isinstance(m, Classifier):
                raise TypeError(f"members[{i}] is a {type(m).__name__}, not a Classifier")
            m._check_fitted()
        try:
            check_members([m._model for m in members], [f"members[{i}]" for i in range(len(members))])
        except LomtreeError as e:
            raise _value_error(e) from None
        first = members[0]
        for i, m in enumerate(members[1:], 1):
            if not np.array_equal(np.asarray(m.classes_), np.asarray(first.classes_)):
                raise ValueError(f"members[{i}]: its classes differ from members[0]'s")
        self.members = members
        # members[0]'s parameters, input handling and labels, the combined model behind them (a
        # copy of its attributes: copy.copy would pickle the model through __getstate__)
        self._front = object.__new__(Classifier)
        self._front.__dict__.update(first.__dict__)
        self._front._set_model(Combined([m._model for m in members]), first._labels)
        self.classes_ = first.classes_

    @classmethod
    def load(cls, path) -> "Ensemble":
        """The Ensemble of the models in a model file: the trees of ``lomtree train --trees N``
        (a file of one model gives an Ensemble of one). ValueError on a bad file."""
        from . import model_io

        try:
            loaded = model_io.load_models(path, predict_only=True)
        except LomtreeError as e:
            raise _value_error(e) from None
        return cls([Classifier._from_loaded(m) for m in loaded])

    def predict(self, X, top_k: int | None = None, threshold: float | None = None):
        return self._front.predict(X, top_k=top_k, threshold=threshold)

    def predict_top(self, X, k: int = 5):
        return self._front.predict_top(X, k)

    def predict_proba(self, X) -> np.ndarray:
        return self._front.predict_proba(X)

    def score(self, X, y, sample_weight=None) -> float:
        return self._front.score(X, y, sample_weight=sample_weight)

    def __repr__(self) -> str:
        return f"Ensemble({len(self.members)} members: {'+'.join(m._model.reduction.name for m in self.members)})"


def _feature_params(icfg: InputConfig) -> dict:
    """A model's feature options as Classifier parameters: every cross (``-q``, ``--cubic``,
    ``--interactions``: the model keeps them as one list) under ``interactions``."""
    def terms(s):
        return s.split(",") if s else None

    return {"interactions": terms(icfg.interactions), "ngram": terms(icfg.ngram), "skips": terms(icfg.skips),
            "ignore": icfg.ignore or None, "keep": icfg.keep or None, "ignore_linear": icfg.ignore_linear or None}


def _grows(reduction) -> bool:
    """The reduction named ``reduction`` takes new classes while it learns (its class implements
    ``Reduction.grow_classes``: OAA's new regressor is a new stride of the hashed table, a tree's
    new label a new leaf; the Filter tree's and the random tree's bracket, mtree's codes are
    made for k)."""
    from .reductions.base import Reduction
    from .reductions.classes import get_reduction_class
    from .reductions.registry import REGISTRY

    if not isinstance(reduction, str) or reduction not in REGISTRY:
        return False
    return get_reduction_class(reduction).grow_classes is not Reduction.grow_classes


def _gives_probabilities(reduction) -> bool:
    from .core import gives_probabilities

    return isinstance(reduction, str) and gives_probabilities(reduction)


Model = Classifier

__all__ = ["Classifier", "Model", "Ensemble", "NotFittedError", "matrix_batch", "lines_batch", "dict_line"]
