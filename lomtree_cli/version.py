"""The package's version (a leaf module: the model file, the example cache and ``--version`` read it)."""

__version__ = "0.1.0"
