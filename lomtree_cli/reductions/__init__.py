"""Reductions from multiclass to binary regression; see ``base.REGISTRY``."""

from .base import REGISTRY, Reduction, get_reduction_class

__all__ = ["REGISTRY", "Reduction", "get_reduction_class"]
