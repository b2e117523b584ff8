"""Reductions from multiclass to binary regression; see ``registry.REGISTRY``. Importing this
package imports none of them (nor numpy)."""

from .registry import REGISTRY

__all__ = ["REGISTRY", "get_reduction_class"]


def __getattr__(name):
    """``get_reduction_class`` (``classes.py``), imported on first use: it imports the reductions,
    which import ``config``, which imports ``registry`` and so this package."""
    if name == "get_reduction_class":
        from .classes import get_reduction_class

        return get_reduction_class
    raise AttributeError(f"module 'lomtree_cli.reductions' has no attribute {name!r}")
