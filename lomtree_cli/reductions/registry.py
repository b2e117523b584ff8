"""The registry of reductions: one entry per reduction, read without importing any of them.

An entry (``ReductionSpec``) says where the class is (imported only when the reduction runs, by
``classes.get_reduction_class``: this module imports no reduction, so
``--help`` and ``predict`` do not import numba or every kernel), whether the reduction needs
``-k``, its own command-line options and its own defaults, as VW's ``*_setup`` functions declare
theirs, and what it can do (label sets, probabilities, Dask, ...). Everything else is derived from
here: ``config.REDUCTIONS`` and its ``-k`` rule, the ``-r`` choice, the reduction options and VW
spellings of ``lomtree train`` (``cli.py``, ``vwopts.py``), the ``Classifier``'s options
(``api.py``), which given options are checked against an initial model (``commands.py``,
``driver.py``), Dask training (``distributed.py``), ``--invert_hash`` (``readable.py``), the AOT
warm-up (``aot.py``) and the tests' lists; no other module names a reduction
(``tests/test_registry.py``). ``Reduction`` subclasses take ``needs_k``, ``label_sets`` and
their default loss from their entry (``base.Reduction.__init_subclass__``).

A new reduction (docs/ARCHITECTURE.md, "Adding a reduction"): its module, its kernels in
``lomtree_cli/kernels/``, its fields in ``config.ReductionConfig`` (stored in models, checked
there), and one entry here. A new option of a reduction: its ``ReductionConfig`` field and an
``Option`` in the reduction's entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Option:
    """A reduction's command-line option. ``field``: the ``ReductionConfig`` field it sets (and the
    click parameter name); ``flags``: its spellings; ``type``: ``int``, ``float``, a tuple of
    choices, or ``bool`` for a flag that sets ``field`` to ``flag_value`` when given; ``off``: for
    a ``bool`` option, the spelling that sets it to False (``flags`` then set it to True). Left out,
    the reduction's default applies (``ReductionSpec.defaults``, else the ``ReductionConfig``
    default)."""

    field: str
    flags: tuple
    type: object = int
    help: str = ""
    flag_value: bool = True
    off: str = ""


@dataclass(frozen=True)
class ReductionSpec:
    """``target``: ``"module:Class"``; ``needs_k``: ``-k`` is required; ``options``: the
    reduction's own options; ``defaults``: its defaults where they differ from
    ``ReductionConfig``'s and ``LearnerConfig``'s (keys ``loss``, ``power_t``, ``learning_rate``
    (not under ``--sgd``) and reduction fields); ``no_regularization``: why ``--l1``/``--l2``
    cannot apply (the reduction has no weights), empty when they do; ``no_average``: why
    ``--average`` cannot (besides ``no_regularization``). ``label_set_defaults``: the
    defaults of a multi-label model (``--multilabel``) where they differ, and
    ``label_set_pass_defaults`` those of a multi-label model trained with ``--passes > 1``
    (keys as ``defaults``, plus ``decay_learning_rate``). ``large_k_defaults``: those of a
    single-label model with ``k >= LARGE_K`` classes, ``label_set_large_k_defaults`` those of a
    multi-label one; ``large_k_pass_blend``: the keys whose multi-label default at ``k >= LARGE_K``
    with N > 1 passes lies between the two (``pass_blend``). ``title``: the reduction's name in
    help texts (its options' section of ``lomtree train -h``); ``summary``: what it is, in a few
    words (``lomtree --help`` lists every entry with it).

    Capabilities, read by the code that depends on them instead of lists of names:
    ``label_sets``: it learns label sets (``--multilabel``; the class's ``label_sets``);
    ``probabilities``: it implements ``predict_top`` (``--probabilities``, ``--top-k``);
    ``dask``: how ``train --dask`` trains it: ``"fixed"`` (its structure does not depend on the
    data: data-parallel from the first example), ``"grown"`` (its label tree is complete after one
    pass: pass 1 runs the shards in turn, later passes are data-parallel), None (refused);
    ``train_threads``: ``train --threads N`` learns each batch in N threads sharing the weights
    (Hogwild); ``dual``: ``--solver dual`` trains it (dual coordinate descent, ``kernels/dual_kernels.py``);
    ``regressors``: what regressor r is, in ``--invert_hash``'s headings (``"class"``: class r + 1,
    ``"tree node"``: node r, ``"model"``: the one model, empty: no regressors); ``vw_options``: VW's options that mean this
    reduction (``--oaa K`` is ``-r oaa -k K``), each mapped to whether it implies ``--multilabel``;
    ``real_labels``: its labels are real numbers (``InputConfig.real_labels``), its predictions
    floats, and a ``train`` with no ``-r``, no class count and no VW reduction option means the
    first such entry (``REAL_DEFAULT``, VW's default learner).
    The entropy criteria of ``inspect`` need code: the class's ``label_levels``."""

    target: str
    title: str = ""
    summary: str = ""
    needs_k: bool = True
    options: tuple = ()
    defaults: dict = field(default_factory=dict)
    no_regularization: str = ""
    no_average: str = ""
    label_set_defaults: dict = field(default_factory=dict)
    label_set_pass_defaults: dict = field(default_factory=dict)
    large_k_defaults: dict = field(default_factory=dict)
    label_set_large_k_defaults: dict = field(default_factory=dict)
    large_k_pass_blend: tuple = ()
    label_sets: bool = False
    probabilities: bool = False
    dask: str | None = None
    dual: bool = False
    train_threads: bool = False
    regressors: str = ""
    vw_options: dict = field(default_factory=dict)
    real_labels: bool = False
    #: VW option -> the option values it sets where lomtree's defaults for this entry differ (VW's
    #: model and rates under VW's spelling: ``vwopts.apply_vw_run_options``)
    vw_models: dict = field(default_factory=dict)


_ARITY = Option("arity", ("--arity",), help="most children of a node (plt, one label a line, -k > 32,768: 16, "
                                             "so that the tree has at most 5 levels)")
_BEAM = Option("beam", ("--beam",), help="beam width of the prediction search (plt with label sets: 16)")

#: multi-label defaults of plt and oaa (bench/multilabel-tuning.md: one pass and 10 passes on
#: Bibtex, Delicious and Yeast): (plt) a beam of 16, as an example's several labels spread over
#: more of the tree; in one pass the averaged weights (averaged SGD) of a slowly decaying rate,
#: 1-2 points of P@k over the last weights on the 4,880 examples of Bibtex; with several passes a
#: smaller rate, a slower per-example decay and 0.6 of the rate at every pass, so that
#: ``--passes N`` alone is the tuned run
_SET_DEFAULTS = {"learning_rate": 0.5, "power_t": 0.1, "average": True}
_SET_PASS_DEFAULTS = {"learning_rate": 0.1, "power_t": 0.25, "decay_learning_rate": 0.6, "average": False}

#: single-label plt from this many classes on (bench/pypi.md, bench/notes/plt-at-scale.md): a
#: faster-decaying rate, leaves trained against their siblings only, the PLT's path probability and
#: arity 8 (deeper, narrower nodes: 0.25-0.6 points better on the next-word streams, no dearer; from
#: k = 32,769 on 16, ``large_k_arity``).
#: On next-word streams (KJV, k = 5,001; PyPI, k = 20,001) the beam's leaf negatives push down the
#: plausible next words that did not occur and cost 1.5-3 points; on the synthetic k = 1,000 stream
#: (clean prototypes) they are what brings the tree to OAA, hence a threshold between the two.
#: Beam 4: prediction costs about one cache miss per feature, level and unit of width; 4 is within
#: 0.15 points of 10 there at 40-45% of its prediction time.
#: With label sets (bench/multilabel.md, synthetic streams): leaves against their siblings only,
#: path weight 1 and arity 8 train without any beam search (the beam is what the leaf negatives and
#: the path weight's statistics need): at k = 100,000 2.2x cheaper and better on P@1/3/5; at
#: k = 10,000 3x cheaper, P@1 -0.1, P@3 -1.2, P@5 equal (``--leaf-negatives`` buys them back).
#: From k = 4,096 one pass over label sets keeps the last weights of the single-label rate: a
#: label first seen late has zero weights in all the earlier iterates, so the average (from the
#: first example) shrinks it (synthetic k = 100,000: P@1 89.4 averaged against 91.0).
#: On real tagging (bench/notes/xmc-at-scale.md: PyPI names, 25,596 labels, one pass) the leaf
#: negatives are worth 4 points of P@1 (45.4 -> 49.5 on a quarter of it) and a rate of 0.5 1.6 more,
#: at twice the training CPU (still a tenth of napkinXC's fit); the buffer is replayed in a random
#: order (a stream sorted by anything its labels follow, as names are, otherwise ends on its last
#: labels: 43.2 -> 46.4 on the whole set). plt's label sets also default to -b 26 there (when -b
#: is not given): the leaf negatives touch far more (word, node) weights than the table holds, and
#: PyPI names makes 32.66 P@1 at VW's -b 18, 52.34 at 24, 53.86 at 26 (about 1 GB of weights).
#: Their ranking takes half the parent path's log probability (path weight 0.5, a prediction-time
#: weight: training does not read it): the leaves, trained against the beam's candidates, rank
#: better than the product of the path's probabilities says; PyPI names +0.81 / +0.61 / +0.08 P@1/3/5
#: in one pass, +0.77 / +0.55 / +0.11 after ten, 85,499 labels +0.68 / +0.46 / +0.03, the synthetic
#: label sets within 0.15 (progressive validation chooses by P@1 alone: 0.25, worse on P@5).
LARGE_K = 4096

_LARGE_K_TREE = {"leaf_negatives": False, "path_weight": 1.0, "arity": 8}
_LARGE_K_SETS = {"average": False, "learning_rate": 0.5, "power_t": 0.5, "leaf_negatives": True,
                 "shuffle_buffer": True}

#: passes at which a blended default (``large_k_pass_blend``) reaches the label-set pass default
BLEND_PASSES = 10


def pass_blend(one: float, many: float, passes: int) -> float:
    """The default of N passes between ``one`` (the one-pass default) and ``many`` (that of
    ``BLEND_PASSES``), geometric in log N: ``one * (many / one) ** min(log N / log 10, 1)``. plt's
    label sets from k = 4,096 learn one pass at rate 0.5 and power_t 0.5 and ten at 0.1 and 0.25;
    two or five passes at either end's rates are worse than between them (PyPI names, 10% of its
    training set, one tree, P@1/3/5: two passes at the ten-pass rates 42.99 / 25.83 / 17.96, below
    one pass's 44.52 / 26.69 / 18.53; blended 45.25 / 27.43 / 19.11; five 45.27 / 27.76 / 19.42
    against 45.85 / 28.09 / 19.58; the whole set, five passes 55.19 / 36.81 / 26.44 against 55.96
    / 37.13 / 26.55; bench/notes/xmc-at-scale.md)."""
    return one * (many / one) ** min(math.log(passes) / math.log(BLEND_PASSES), 1.0)


def large_k_arity(k: int) -> int:
    """Arity of a single-label plt over k >= LARGE_K classes: the least power of two from 8 on whose
    tree has at most 5 levels (M^5 >= k): 8 up to k = 32,768, 16 up to 2^20.

    Measured one pass, ``-b 24`` (bench/notes/plt-at-scale.md, "Arity against k"): with 100,001
    classes arity 16 is better than 8 on every PyPI size (0.07-0.20 points) and on the synthetic
    k = 100,000 stream (0.8), and cheaper (fewer levels); with 5,001 and 20,001 classes it is
    0.1-0.25 worse on every size, and 4 and 2 are worse at 100,001 (0.3 and 0.9). Label sets keep
    8 (synthetic k = 100,000: P@1 0.65 lower with 16, P@3 and P@5 equal)."""
    return max(8, 1 << -(-(k - 1).bit_length() // 5))


_LARGE_K_PLT = {**_LARGE_K_TREE, "arity": large_k_arity, "power_t": 0.75, "beam": 4}
#: single-label lomtree from this many classes on (bench/notes/lomtree.md, "At scale"): T = 1,023
#: internal nodes instead of k-1. With T = k-1 on PyPI next word (k = 20,001) the swaps grow chains
#: hundreds of nodes deep (depth 524, 33 router calls per example) and the class records take
#: 400 MB; with 1,023 the tree is 11 deep, training 2.5-3x cheaper with half the peak RSS, the
#: error 1.4 points lower on 330K examples and equal on 2.4M (the candidates' label regressors,
#: not the leaves, tell the classes apart). KJV next word (k = 5,001): 75.57 against 75.55 with
#: T = 5,000.
_LARGE_K_LOMTREE = {"max_internal_nodes": 1023, "leaf_labels": 64, "candidates_up": 2, "leaf_positive_weight": 16.0,
                    "trained_candidates": 16}

#: VW's rates, for the VW spellings of reductions whose lomtree defaults differ (``vw_models``)
_VW_RATES = {"power_t": 0.5, "learning_rate": 0.5, "average": False, "decay_learning_rate": 1.0}

#: the reduction of ``lomtree train`` and ``Classifier`` when none is given
DEFAULT = "lomtree"
#: the reduction of label sets where none is named (``lomtree_cli.river.MultiLabelClassifier``)
DEFAULT_LABEL_SETS = "plt"

#: reduction name -> its entry. Defaults measured best (bench/notes/lomtree.md): LOMtree's
#: (VW forces quantile loss on log_multi; squared loss, power_t 0.75, learning rate 0.25 and
#: candidates 3 levels up measured better here, the last two for k >= 1000, at a cost for k <= 105);
#: CPT's power_t 0.75 was better than 0.5 on 5 of 6 benchmark tasks (one pass, -b 24; worse on
#: Pendigits) and on their mean.
REGISTRY = {
    "oaa": ReductionSpec("lomtree_cli.reductions.oaa:OneAgainstAll", "OAA",
                         "one-against-all, O(k); label sets: binary relevance",
                         label_set_defaults=_SET_DEFAULTS, label_set_pass_defaults=_SET_PASS_DEFAULTS,
                         label_set_large_k_defaults=_LARGE_K_SETS,
                         label_sets=True, probabilities=True, dask="fixed", dual=True, regressors="class",
                         vw_options={"oaa": False, "multilabel_oaa": True},
                         vw_models={"multilabel_oaa": dict(_VW_RATES)}),
    "lomtree": ReductionSpec("lomtree_cli.reductions.lomtree:LomTree", "LOMtree",
                             "LOMtree (Choromanska & Langford 2015) with candidate labels at the leaves", options=(
        Option("max_internal_nodes", ("--max-internal-nodes", "--lom_max_internal"),
               help=f"maximum internal nodes T (none given: k-1; with -k >= {LARGE_K}: "
                    f"{_LARGE_K_LOMTREE['max_internal_nodes']})"),
        Option("swap_resistance", ("--swap-resistance", "--swap_resistance"), help="swap resistance R_S"),
        Option("leaf_labels", ("--leaf-labels",),
               help="candidate labels kept per leaf, rescored one-against-some (0 = the leaf's majority label)"),
        Option("candidates_up", ("--candidates-up",),
               help="take the candidate labels from the node this many levels above the leaf"),
        Option("label_prior", ("--label-prior",), float,
               help="weight of a candidate's log share of the candidates' counts in its score (0 = the label "
                    "regressors alone; -1 = chosen by progressive validation among 0, 0.02, 0.05, 0.1, 0.2)"),
        Option("leaf_positive_weight", ("--leaf-positive-weight",), float,
               help=f"importance of the label's own update at the leaf, the other candidates' being 1 [1; with "
                    f"-k >= {LARGE_K}: {_LARGE_K_LOMTREE['leaf_positive_weight']:g}]"),
        Option("trained_candidates", ("--trained-candidates",),
               help=f"the leaf trains the label and the M best-scored candidates (0 = all) [0; with -k >= "
                    f"{LARGE_K}: {_LARGE_K_LOMTREE['trained_candidates']}]"),
        Option("max_class_records", ("--max-class-records",),
               help="the most (node, label) class records kept, 32 bytes each: beyond it those of lowest count "
                    "are dropped, never the root's or a node's candidates [2^(b-4)]")),
        defaults={"power_t": 0.75, "learning_rate": 0.25, "leaf_labels": 32, "candidates_up": 3,
                  "leaf_positive_weight": 1.0, "trained_candidates": 0},
        large_k_defaults=_LARGE_K_LOMTREE, regressors="tree node", vw_options={"log_multi": False},
        # VW's log_multi: the plain LOMtree (majority leaves, T = K - 1) with VW's quantile loss
        vw_models={"log_multi": {**_VW_RATES, "leaf_labels": 0, "candidates_up": 0, "loss": "quantile"}}),
    "filter": ReductionSpec("lomtree_cli.reductions.filter_tree:FilterTree", "Filter tree", "filter tree (VW's --ect)",
                            dask="fixed", regressors="tree node", vw_options={"ect": False}),
    "rtree": ReductionSpec("lomtree_cli.reductions.random_tree:RandomTree", "Rtree",
                           "random balanced tree (a baseline)", dask="fixed", regressors="tree node"),
    "cpt": ReductionSpec("lomtree_cli.reductions.cpt:ConditionalProbabilityTree", "CPT",
                         "conditional probability tree: P(y|x), labels need not be known in advance",
                         needs_k=False, options=(
        Option("cpt_alpha", ("--cpt-alpha", "--cpt_alpha"), float, help="balance/regressor trade-off in [0, 1]"),
        Option("cpt_predict", ("--cpt-predict", "--cpt_predict"), ("exact", "greedy"),
               help="best-first search or greedy descent"),
        Option("cpt_random_insert", ("--cpt-random-insert", "--cpt_random_insert"), bool,
               help="baseline: insert new labels on a random side")),
        defaults={"power_t": 0.75}, probabilities=True, dask="grown", regressors="tree node"),
    "table": ReductionSpec("lomtree_cli.reductions.table:LabelFrequencyTable", "label table",
                           "label frequencies (a baseline for cpt)", needs_k=False,
                           no_regularization="it counts labels and has no weights", probabilities=True),
    "plt": ReductionSpec("lomtree_cli.reductions.plt:ProbabilisticLabelTree", "PLT",
                         "probabilistic label tree over a k-means label tree, P(y|x); label sets", options=(
        _ARITY, _BEAM,
        Option("tree_buffer", ("--tree-buffer",),
               help="examples buffered to build the label tree by k-means (0 = grow it online)"),
        Option("path_weight", ("--path-weight",), float,
               help="weight of the parent path's log probability in a candidate's score (1 = pure PLT; "
                    "-1 = chosen by progressive validation among 0, 0.25, 0.5, 0.75, 1)"),
        Option("leaf_negatives", ("--leaf-negatives",), bool, off="--no-leaf-negatives",
               help=f"train leaves also against the example's beam candidates, not only against their "
                    f"siblings [on; off with one label a line and -k >= {LARGE_K}]"),
        Option("shuffle_buffer", ("--shuffle-buffer",), bool, off="--no-shuffle-buffer",
               help=f"replay the tree buffer's examples in a random order (seeded), not the stream's [off; "
                    f"on with label sets and -k >= {LARGE_K}]"),
        Option("block_group", ("--block-group",),
               help="blocks of node regressors that share a feature's region of the weight table [0: as "
                    "many as a balanced tree of k labels has; 1: each block hashed apart, the layout of "
                    "models made before this option]"),
        Option("complete_tree", ("--complete-tree",), bool,
               help="VW's --plt tree: the complete arity-ary tree of k leaves, label l at a fixed leaf, fixed "
                    "before training (its root owns a regressor)")),
        defaults={"block_group": 0},
        label_set_defaults={**_SET_DEFAULTS, "beam": 16}, label_set_pass_defaults=_SET_PASS_DEFAULTS,
        large_k_defaults=_LARGE_K_PLT, label_set_large_k_defaults={**_LARGE_K_TREE, **_LARGE_K_SETS, "path_weight": 0.5, "bits": 26},
        large_k_pass_blend=("learning_rate", "power_t"), label_sets=True, probabilities=True, dask="grown", train_threads=True,
        regressors="tree node", vw_options={"plt": True},
        # VW's plt: its complete binary tree, no beam negatives, pure path probabilities
        vw_models={"plt": {**_VW_RATES, "arity": 2, "tree_buffer": 0, "path_weight": 1.0, "leaf_negatives": False,
                           "complete_tree": True}}),
    "regression": ReductionSpec("lomtree_cli.reductions.scalar:Regression", "regression",
                                "one linear model of real labels (VW's default learner)", needs_k=False,
                                real_labels=True, regressors="model", dask="fixed"),
    "binary": ReductionSpec("lomtree_cli.reductions.scalar:Binary", "binary",
                            "one linear model, labels -1/1, its sign predicted (VW's --binary)", needs_k=False,
                            real_labels=True, regressors="model", dask="fixed"),
    "mtree": ReductionSpec("lomtree_cli.reductions.mtree:MaryTree", "mtree",
                           "M-ary softmax tree over learned embeddings (Jernite et al. 2017), P(y|x)", options=(
        _ARITY, _BEAM,
        Option("dim", ("--dim",), help="width of the learned embeddings"),
        Option("depth", ("--depth",), help="tree depth (0 = a flat softmax when k <= max(128, 4 arity), else "
                                           "the Huffman tree, or the least depth with arity^depth >= k)"),
        Option("reassign_after", ("--reassign-after",),
               help="trained examples before the first label re-assignment, then at each doubling "
                    "(0 = keep the initial random tree)"),
        Option("tree", ("--tree",), ("huffman", "balanced"),
               help="huffman: the M-ary Huffman tree of the training files' label counts when they are known "
                    "before training (--passes > 1 over plain files, a new model, no --depth), else balanced; "
                    "balanced: all leaves at one depth, labels re-assigned by the node objective"),
        Option("linear", ("--linear",), float,
               help="rate factor of the hashed linear weights of the root's children (memory 2^bits x its children "
                    "floats; 0 = none; -1 = 2 on a tree, 0.1 on a flat softmax)")),
        defaults={"arity": 8}, probabilities=True, regressors="tree node",
        no_average="its embeddings and node layers are not the linear learner's weights"),
}

#: what ``lomtree train`` trains given no -r, no -k/--classes and no VW reduction option (VW's default)
REAL_DEFAULT = next(n for n, spec in REGISTRY.items() if spec.real_labels)
#: what VW's ``--binary`` means
VW_BINARY = "binary"


def reduction_options() -> dict:
    """field -> (Option, names of the reductions that take it), over every entry, in order."""
    out: dict = {}
    for name, spec in REGISTRY.items():
        for o in spec.options:
            if o.field in out and out[o.field][0] != o:
                raise ValueError(f"option {o.field} declared differently by two reductions")
            out.setdefault(o.field, (o, []))[1].append(name)
    return out


def vw_aliases() -> dict:
    """VW's reduction option -> (the reduction it means, whether it implies ``--multilabel``)."""
    return {opt: (name, ml) for name, spec in REGISTRY.items() for opt, ml in spec.vw_options.items()}


def default(name: str, key: str, fallback, multilabel: bool = False, passes: int = 1, k: int | None = None):
    """Reduction ``name``'s default for ``key`` (a config field, ``loss``, ``power_t``,
    ``learning_rate``, ``decay_learning_rate`` or ``average``); ``multilabel``, ``passes`` and ``k``: the
    model's, for the defaults of multi-label models and of many classes."""
    spec = REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None:  # the library's callers (the Python API) pass any value
        from ..errors import ConfigError

        raise ConfigError(f"reduction must be one of {', '.join(REGISTRY)}, got {name!r}")
    if multilabel and passes > 1 and key in spec.label_set_pass_defaults:
        many = spec.label_set_pass_defaults[key]
        if k is not None and k >= LARGE_K and key in spec.large_k_pass_blend:
            return pass_blend(spec.label_set_large_k_defaults[key], many, passes)
        return many
    if k is not None and k >= LARGE_K:
        large = spec.label_set_large_k_defaults if multilabel else spec.large_k_defaults
        if key in large:
            return large[key](k) if callable(large[key]) else large[key]
    if multilabel and key in spec.label_set_defaults:
        return spec.label_set_defaults[key]
    return spec.defaults.get(key, fallback)
