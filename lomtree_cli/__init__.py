"""lomtree: a streaming learner for multiclass problems with very many classes.

Logarithmic-time tree reductions (LOMtree, Filter tree, Random tree, CPT) next to
one-against-all, over a VW-style hashed linear learner.

Importing the package changes nothing in the process environment: numba's cache location is set
on numba's own config when a kernel first needs numba (``numba_setup``), and the BLAS thread
variables only by the command line's entry point (``launch``).
"""

import os as _os

from .version import __version__  # noqa: F401


def __getattr__(name):
    """``lomtree_cli.Classifier`` (and ``Model``, ``Ensemble``; ``Regressor``, ``BinaryClassifier``:
    ``regressor.py``): the Python API (``api.py``),
    imported on first use so that the command line's start-up does not pay for it."""
    if name in ("Classifier", "Model", "Ensemble", "Regressor", "BinaryClassifier"):
        from . import api, regressor  # regressor: Classifier.load of a binary/regression model

        return getattr(api if hasattr(api, name) else regressor, name)
    raise AttributeError(f"module 'lomtree_cli' has no attribute {name!r}")


if _os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
    import warnings as _warnings

    # Without the JIT the kernels run as Python on numpy scalars, and the intended uint64
    # wrap-around of the hash and RNG mixers warns; compiled code wraps silently.
    _warnings.filterwarnings("ignore", message="overflow encountered in scalar", category=RuntimeWarning,
                             module=r"lomtree_cli\.")
    # and IEEE division by zero / NaN (the kernels' error_model="numpy": an underflowed float32
    # adaptive sum gives an infinite rate, the update becomes NaN and is dropped and counted)
    for _msg in ("divide by zero encountered in scalar", "invalid value encountered in scalar"):
        _warnings.filterwarnings("ignore", message=_msg, category=RuntimeWarning, module=r"lomtree_cli\.")
