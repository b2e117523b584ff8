"""The package's version and the program's name (a leaf module: the model file, the example cache
and ``--version`` read it)."""

__version__ = "0.1.0"
#: the command's name (and of its cache folder); a constant so that it is not read as the
#: reduction of the same name
PROG = "lomtree"
