"""The reduction classes by name: the registry's ``"module:Class"`` targets, imported on first use.

Apart from ``registry.py`` (a table read without importing any reduction, below ``config``) because
it imports the reductions, which import ``config``: the layers stay one-way, registry -> config
-> reductions -> this module -> ``core``, ``model_io``, ``api``.
"""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .registry import REGISTRY


def get_reduction_class(name: str):
    """The class registered under ``name``; ConfigError if unknown or not available."""
    try:
        target = REGISTRY[name].target
    except KeyError:
        raise ConfigError(f"unknown reduction {name!r}") from None
    mod_name, cls_name = target.split(":")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name == mod_name:
            raise ConfigError(f"reduction {name!r} is not available in this build") from None
        raise
    return getattr(mod, cls_name)
