"""lomtree: a streaming learner for multiclass problems with very many classes.

Logarithmic-time tree reductions (LOMtree, Filter tree, Random tree, CPT) next to
one-against-all, over a VW-style hashed linear learner.
"""

__version__ = "0.1.0"
