"""Reductions from multiclass to binary regression; see ``registry.REGISTRY``. Importing this
package imports none of them (nor numpy)."""

from .registry import REGISTRY, get_reduction_class

__all__ = ["REGISTRY", "get_reduction_class"]
