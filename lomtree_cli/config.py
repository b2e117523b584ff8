"""Frozen, self-validating configuration dataclasses.

One for the input/hashing side (``InputConfig``), one for the base linear learner
(``LearnerConfig``) and one for the reduction (``ReductionConfig``). Each checks its own values in
``__post_init__`` and raises ``ConfigError`` (exit code 2) on a bad value: values are never
silently replaced.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from .errors import ConfigError
from .reductions.registry import DEFAULT, REGISTRY

LOSSES = ("squared", "logistic", "hinge", "quantile", "squared-hinge", "classic", "poisson")
#: VW's links (its scorer): the prediction of -r binary / -r regression is link(clipped score)
LINKS = ("identity", "logistic", "poisson", "glf1")
#: the losses the dual coordinate descent solver minimises (``--solver dual``)
DUAL_LOSSES = ("hinge", "squared-hinge")
#: its defaults (loss, C) for single labels and for label sets (bench/notes/multipass.md). Single:
#: five-fold cross-validation on Sector's training file, the hinge at C = 2 best after 5 and after
#: 10 passes (squared hinge at C = 2-4 0.3 points behind). Label sets (binary relevance): by the
#: holdout of Bibtex's and Delicious's training files, the squared hinge at C = 0.01 (a C of 2
#: over-fits the rare positives: Bibtex P@1 55 against 64)
DUAL_DEFAULTS = {False: ("hinge", 2.0), True: ("squared-hinge", 0.01)}
DUAL_COST = DUAL_DEFAULTS[False][1]
#: why a model of the dual solver is not trained further (``-i``, the Python API)
DUAL_NOT_CONTINUED = ("a model of --solver dual cannot be trained on: its dual variables are not in the model file "
                      "(train it anew with more --passes)")
SOLVERS = ("online", "dual")
#: ``--dual-memory`` default (MB): the dual variables of the examples (4 bytes per example and regressor)
DUAL_MEMORY_MB = 1024
FORMATS = ("vw", "libsvm", "xmc")
REDUCTIONS = tuple(REGISTRY)
#: the constant feature's hash before masking (VW's constant); docs/ALGORITHMS.md §1.3
CONSTANT_HASH = 11650396
#: ``--max-line-bytes`` default: a longer line is malformed (found without buffering it whole)
MAX_LINE_BYTES = 32 << 20
#: the largest ``--max-line-bytes`` (the reader's buffer can grow to about twice the limit)
MAX_LINE_BYTES_LIMIT = 1 << 34
#: ``--max-example-features`` default: an example whose feature options (-q, --cubic,
#: --interactions, --ngram, --skips) make more features is malformed
MAX_EXAMPLE_FEATURES = 1 << 22
#: the largest ``--max-example-features``
MAX_EXAMPLE_FEATURES_LIMIT = 1 << 32
#: LOMtree's ``--max-internal-nodes`` is at most this many times k
MAX_NODES_PER_CLASS = 64


@dataclass(frozen=True)
class InputConfig:
    """How text becomes hashed examples (docs/ALGORITHMS.md §1).

    format : 'vw', 'libsvm' or 'xmc' (the Extreme Classification Repository's text format: a
        header line ``N F L``, then LIBSVM lines with label sets; 0-based labels and features)
    bits : hash bits b; features are masked to [0, 2**b)
    hash_seed : seed S of the namespace hash
    noconstant : do not append the constant feature
    label_offset : added to labels (use 1 for 0-based data), taken off again in predictions;
        |label_offset| < 2**31
    skip_invalid : skip malformed lines (counted) instead of stopping
    max_line_bytes : a line longer than this (bytes before its newline) is malformed
    max_example_features : an example whose feature options make more features than this (or
        hold more while making them) is malformed
    low_labels_unlabeled : a label below 1 is read as unlabeled (counted) instead of an error
        (``predict``, which does not use labels to learn)
    interactions, ngram, skips, ignore, keep, ignore_linear : VW's feature options (
        spellings in ``features.py``), applied to every parsed chunk by ``kernels/interactions.py``
    named_labels : VW's ``--named_labels``: the class names joined by ``,`` (label i+1 = name i)
    string_labels : labels are strings; ids are given in order of first appearance and the
        dictionary is stored in the model (``labels.py``); implied by ``named_labels``
    multilabel : every example carries a set of labels (``1,5,7``, possibly empty); implied by
        ``format='xmc'``
    real_labels : labels are real numbers (``-r binary``, ``-r regression``): ``ExampleBatch.real``
    """

    format: str = "vw"
    bits: int = 18
    hash_seed: int = 0
    noconstant: bool = False
    label_offset: int = 0
    skip_invalid: bool = False
    max_line_bytes: int = MAX_LINE_BYTES
    max_example_features: int = MAX_EXAMPLE_FEATURES
    low_labels_unlabeled: bool = False
    interactions: str = ""
    ngram: str = ""
    skips: str = ""
    ignore: str = ""
    keep: str = ""
    ignore_linear: str = ""
    named_labels: str = ""
    string_labels: bool = False
    multilabel: bool = False
    real_labels: bool = False

    def __post_init__(self):
        if self.real_labels and (self.format != "vw" or self.multilabel or self.string_labels or self.named_labels):
            raise ConfigError("real labels (-r binary, -r regression) need --format vw, one label a line and no "
                              "--named-labels/--string-labels")
        if self.format == "xmc" and not self.multilabel:
            object.__setattr__(self, "multilabel", True)
        if self.format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if not 1 <= int(self.bits) <= 32:
            raise ConfigError(f"--bits must be in 1..32, got {self.bits}")
        if not 0 <= int(self.hash_seed) < 2**32:
            raise ConfigError(f"--hash-seed must be in 0..2^32-1, got {self.hash_seed}")
        if not -2**31 < int(self.label_offset) < 2**31:
            raise ConfigError(f"--label-offset must be in -(2^31-1)..2^31-1, got {self.label_offset}")
        if not 1 <= int(self.max_line_bytes) <= MAX_LINE_BYTES_LIMIT:
            raise ConfigError(f"--max-line-bytes must be in 1..2^34, got {self.max_line_bytes}")
        if not 1 <= int(self.max_example_features) <= MAX_EXAMPLE_FEATURES_LIMIT:
            raise ConfigError(f"--max-example-features must be in 1..2^32, got {self.max_example_features}")
        if self.interactions or self.ngram or self.skips:
            from .features import check_options

            check_options(self.interactions, self.ngram, self.skips)
        if self.ignore and self.keep:
            raise ConfigError("--ignore and --keep cannot be used together")
        if (self.named_labels or self.string_labels) and self.format != "vw":
            raise ConfigError("--named-labels and --string-labels need --format vw")
        if self.named_labels:
            from .labels import check_names

            check_names(self.named_labels)

    @property
    def generates_features(self) -> bool:
        """Some feature option is set: chunks go through ``kernels.interactions``."""
        return bool(self.interactions or self.ngram or self.ignore or self.keep or self.ignore_linear)

    @property
    def offset(self) -> int:
        """What is added to a label as written: ``label_offset``, plus 1 for the 0-based XMC format."""
        return int(self.label_offset) + (1 if self.format == "xmc" else 0)

    @property
    def has_string_labels(self) -> bool:
        return bool(self.string_labels or self.named_labels)

    @property
    def mask(self) -> int:
        return (1 << int(self.bits)) - 1

    @property
    def constant_index(self) -> int:
        return CONSTANT_HASH & self.mask


@dataclass(frozen=True)
class LearnerConfig:
    """The base linear learner (docs/ALGORITHMS.md §2).

    learning_rate : eta (None = 0.5, or 10 with --sgd)
    power_t, initial_t : as VW (initial_t None = 0, or 1 with --sgd)
    loss : squared | logistic | hinge | quantile
    quantile_tau : tau of the quantile loss
    sgd : plain SGD instead of adaptive + normalized + importance-invariant
    decay_learning_rate : eta multiplier applied at the end of every pass
    l1, l2 : VW's --l1 / --l2 regularisation strengths (>= 0; 0 = off), applied to the weights
        each update touches (``kernels.linear``, "Regularisation")
    average : predict with the average of the weights over all trained examples (averaged SGD,
        Polyak & Juditsky 1992; Bottou 2010) instead of the last ones (``LinearLearner``)
    solver : 'online' (the updates above) or 'dual' (dual coordinate descent over the cached
        passes, Hsieh et al. 2008; ``kernels/dual_kernels.py``, docs/ALGORITHMS.md §2.7)
    cost : the dual solver's C, the weight of the summed losses against ``|w|^2 / 2``
    dual_memory : MB the dual solver's dual variables may take (4 bytes per example and regressor)
    adaptive, normalized, invariant : VW's update flags (all three: the default update; a subset
        is VW's update with only those parts, ``kernels.linear._update_rule``); ``sgd`` means none
    link : -r binary / -r regression: the link applied to the clipped score (VW's ``--link``)
    min_prediction, max_prediction : fixed clipping bounds of those reductions' scores (None: the
        range of the labels seen, as VW)
    """

    learning_rate: float | None = None
    power_t: float = 0.5
    initial_t: float | None = None
    loss: str = "squared"
    quantile_tau: float = 0.5
    sgd: bool = False
    decay_learning_rate: float = 1.0
    l1: float = 0.0
    l2: float = 0.0
    average: bool = False
    solver: str = "online"
    cost: float = DUAL_COST
    dual_memory: float = DUAL_MEMORY_MB
    adaptive: bool = True
    normalized: bool = True
    invariant: bool = True
    link: str = "identity"
    min_prediction: float | None = None
    max_prediction: float | None = None

    def __post_init__(self):
        if self.link not in LINKS:
            raise ConfigError(f"--link must be one of {', '.join(LINKS)}, got {self.link!r}")
        for name in ("min_prediction", "max_prediction"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ConfigError(f"--{name} must be finite, got {v}")
        if self.min_prediction is not None and self.max_prediction is not None and \
                self.min_prediction > self.max_prediction:
            raise ConfigError(f"--min_prediction {self.min_prediction:g} is above --max_prediction "
                              f"{self.max_prediction:g}")
        if self.sgd and not (self.adaptive and self.normalized and self.invariant):
            raise ConfigError("--sgd is the update without --adaptive, --normalized and --invariant: give it alone")
        if self.loss not in LOSSES:
            raise ConfigError(f"--loss-function must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        self._check_solver()
        for name in ("power_t", "quantile_tau", "decay_learning_rate"):
            v = getattr(self, name)
            if not math.isfinite(v):
                raise ConfigError(f"--{name.replace('_', '-')} must be finite, got {v}")
        if self.learning_rate is not None and not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ConfigError(f"--learning-rate must be a positive number, got {self.learning_rate}")
        if self.initial_t is not None and not (math.isfinite(self.initial_t) and self.initial_t >= 0):
            raise ConfigError(f"--initial-t must be >= 0, got {self.initial_t}")
        if not 0.0 < self.quantile_tau < 1.0:
            raise ConfigError(f"--quantile-tau must be in (0, 1), got {self.quantile_tau}")
        if not self.power_t >= 0:
            raise ConfigError(f"--power-t must be >= 0, got {self.power_t}")
        for name in ("l1", "l2"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"--{name} must be a finite number >= 0, got {v}")
        if not self.decay_learning_rate > 0:
            raise ConfigError(f"--decay-learning-rate must be > 0, got {self.decay_learning_rate}")

    def _check_solver(self) -> None:
        if self.solver not in SOLVERS:
            raise ConfigError(f"--solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        if not (math.isfinite(self.cost) and self.cost > 0):
            raise ConfigError(f"--cost must be a positive number, got {self.cost}")
        if not (math.isfinite(self.dual_memory) and self.dual_memory > 0):
            raise ConfigError(f"--dual-memory must be a positive number of MB, got {self.dual_memory}")
        if self.solver == "online":
            if self.loss == "squared-hinge":
                raise ConfigError("--loss-function squared-hinge needs --solver dual")
            return
        if self.loss not in DUAL_LOSSES:
            raise ConfigError(f"--solver dual minimises --loss-function {' or '.join(DUAL_LOSSES)}, got {self.loss}")
        for flag, on in (("--sgd", self.sgd), ("--average", self.average), ("--l1", self.l1), ("--l2", self.l2)):
            if on:
                raise ConfigError(f"{flag} does not apply to --solver dual (its regularisation is --cost)")

    @property
    def rule(self) -> tuple:
        """(adaptive, normalized, invariant) of the update (``--sgd``: none)."""
        if self.sgd:
            return (False, False, False)
        return (bool(self.adaptive), bool(self.normalized), bool(self.invariant))

    @property
    def flagged(self) -> bool:
        """The update is a subset of VW's flags named on their own (not the default, not --sgd)."""
        return not self.sgd and self.rule != (True, True, True)

    @property
    def plain_table(self) -> bool:
        """The weight table holds the weights only (plain SGD, the dual solver): no G, N columns."""
        return self.sgd or self.solver == "dual" or self.rule[:2] == (False, False)

    @property
    def eta(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        # VW: 10 for any update that is not both adaptive and normalized
        return 10.0 if self.sgd or self.rule[:2] != (True, True) else 0.5

    @property
    def t0(self) -> float:
        if self.initial_t is not None:
            return float(self.initial_t)
        return 1.0 if self.sgd or self.rule[:2] == (False, False) else 0.0


@dataclass(frozen=True)
class ReductionConfig:
    """Which reduction, and its parameters (docs/ALGORITHMS.md §3).

    name : a name in ``reductions.registry.REGISTRY``
    k : number of classes (labels 1..k); required when the reduction's entry says ``needs_k``
    max_internal_nodes : LOMtree T (None = k - 1)
    swap_resistance : LOMtree R_S
    leaf_labels : LOMtree L: candidate labels per leaf, rescored one-against-some (0 = majority label)
    candidates_up : LOMtree: the candidates are the top L of the node this many levels above the leaf
    leaf_positive_weight : LOMtree: importance of the label's own regressor update at the leaf,
        against 1 for each other candidate's
    trained_candidates : LOMtree M: the leaf trains the label and the M best-scored candidates
        (0: every candidate)
    max_class_records : LOMtree N: the most class records kept (None: ``2^(b-4)``); more are
        pruned by count
    label_prior : LOMtree: beta, weight of a candidate's log count share in its ranking score (-1:
        chosen by progressive validation)
    cpt_alpha : CPT balance/regressor trade-off in [0, 1]
    cpt_predict : 'exact' (best-first search) or 'greedy'
    cpt_random_insert : CPT baseline: insert new labels on a random side
    arity : PLT: most children of a node (M)
    beam : PLT: beam width of the prediction search (B)
    tree_buffer : PLT: examples buffered to build the label tree (0 = grow it online)
    path_weight : PLT: gamma, weight of the parent path in a candidate's ranking score (-1: chosen
        by progressive validation)
    leaf_negatives : PLT: train every beam candidate leaf toward -1 (one-against-some)
    shuffle_buffer : PLT: replay the tree buffer's examples in a random order (seeded)
    complete_tree : PLT: VW's fixed complete tree (``plt.complete_tree``), not one built from the data
    block_group : PLT: consecutive blocks of W node regressors that share a feature's region of the
        table (``kernels.linear``, mode 2); 1, the layout of models made before it
    dim : mtree: width D of the learned embeddings
    depth : mtree: tree depth L (0 = flat when k <= max(128, 4 arity), else the least L with
        arity**L >= k)
    reassign_after : mtree: trained examples before the first label re-assignment (then at every
        doubling; 0 = keep the initial random tree)
    tree : mtree: 'huffman' (the M-ary Huffman tree of the label counts, when known before training)
        or 'balanced'
    linear : mtree: rate factor of the root's hashed linear weights (0 = none; -1 = 2 on a tree, 0.1
        on a flat softmax)
    seed : the run's random seed (SplitMix64 state)
    """

    name: str = DEFAULT
    k: int | None = None
    max_internal_nodes: int | None = None
    swap_resistance: int = 4
    leaf_labels: int = 0
    candidates_up: int = 0
    leaf_positive_weight: float = 1.0
    trained_candidates: int = 0
    max_class_records: int | None = None
    label_prior: float = -1.0
    cpt_alpha: float = 0.5
    cpt_predict: str = "exact"
    cpt_random_insert: bool = False
    arity: int = 32
    beam: int = 10
    tree_buffer: int = 1_000_000
    path_weight: float = -1.0
    leaf_negatives: bool = True
    shuffle_buffer: bool = False
    block_group: int = 1
    complete_tree: bool = False
    dim: int = 100
    depth: int = 0
    reassign_after: int = 1000
    tree: str = "huffman"
    linear: float = -1.0
    seed: int = 0

    def __post_init__(self):
        if self.name not in REDUCTIONS:
            raise ConfigError(f"--reduction must be one of {', '.join(REDUCTIONS)}, got {self.name!r}")
        if REGISTRY[self.name].needs_k and self.k is None:
            raise ConfigError(f"--reduction {self.name} needs -k/--classes K")
        if self.k is not None and not 1 <= int(self.k) < 2**31:
            raise ConfigError(f"-k/--classes must be in 1..2^31-1, got {self.k}")
        if self.max_internal_nodes is not None and int(self.max_internal_nodes) < 0:
            raise ConfigError(f"--max-internal-nodes must be >= 0, got {self.max_internal_nodes}")
        if self.max_internal_nodes is not None and self.k is not None and \
                int(self.max_internal_nodes) > MAX_NODES_PER_CLASS * int(self.k):
            raise ConfigError(f"--max-internal-nodes must be at most {MAX_NODES_PER_CLASS} x k = "
                              f"{MAX_NODES_PER_CLASS * int(self.k)}, got {self.max_internal_nodes} (the tree's "
                              f"arrays grow with it; ALGORITHMS.md explores k-1 ... 64k-1)")
        if int(self.swap_resistance) < 0:
            raise ConfigError(f"--swap-resistance must be >= 0, got {self.swap_resistance}")
        if not 0 <= int(self.leaf_labels) <= 1024:
            raise ConfigError(f"--leaf-labels must be in 0..1024, got {self.leaf_labels}")
        if not 0 <= int(self.candidates_up) <= 64:
            raise ConfigError(f"--candidates-up must be in 0..64, got {self.candidates_up}")
        if not 0 <= int(self.trained_candidates) <= 1024:
            raise ConfigError(f"--trained-candidates must be in 0..1024, got {self.trained_candidates}")
        if self.max_class_records is not None and not 1 <= int(self.max_class_records) < 2**62:
            raise ConfigError(f"--max-class-records must be a positive count, got {self.max_class_records}")
        if not 0.0 < float(self.leaf_positive_weight) <= 1e6:
            raise ConfigError(f"--leaf-positive-weight must be in (0, 1e6], got {self.leaf_positive_weight}")
        if not (self.label_prior == -1.0 or (math.isfinite(self.label_prior) and 0.0 <= self.label_prior <= 10.0)):
            raise ConfigError(f"--label-prior must be in [0, 10] or -1 (chosen), got {self.label_prior}")
        if not (math.isfinite(self.cpt_alpha) and 0.0 <= self.cpt_alpha <= 1.0):
            raise ConfigError(f"--cpt-alpha must be in [0, 1], got {self.cpt_alpha}")
        if self.cpt_predict not in ("exact", "greedy"):
            raise ConfigError(f"--cpt-predict must be exact or greedy, got {self.cpt_predict!r}")
        if not 2 <= int(self.arity) <= 1024:
            raise ConfigError(f"--arity must be in 2..1024, got {self.arity}")
        if not 1 <= int(self.beam) <= 4096:
            raise ConfigError(f"--beam must be in 1..4096, got {self.beam}")
        if not (self.path_weight == -1.0 or (math.isfinite(self.path_weight) and 0.0 <= self.path_weight <= 1.0)):
            raise ConfigError(f"--path-weight must be in [0, 1] or -1 (chosen), got {self.path_weight}")
        if not 0 <= int(self.tree_buffer) <= 1 << 30:
            raise ConfigError(f"--tree-buffer must be in 0..2^30, got {self.tree_buffer}")
        if not 1 <= int(self.dim) <= 4096:
            raise ConfigError(f"--dim must be in 1..4096, got {self.dim}")
        if not 0 <= int(self.depth) <= 64:
            raise ConfigError(f"--depth must be in 0..64, got {self.depth}")
        if not 0 <= int(self.reassign_after) < 2**53:
            raise ConfigError(f"--reassign-after must be in 0..2^53-1, got {self.reassign_after}")
        if not (self.linear == -1.0 or (math.isfinite(self.linear) and 0.0 <= self.linear <= 100.0)):
            raise ConfigError(f"--linear must be in [0, 100] or -1 (2 on a tree, 0.1 on a flat softmax), got {self.linear}")
        if self.tree not in ("huffman", "balanced"):
            raise ConfigError(f"--tree must be huffman or balanced, got {self.tree!r}")
        if not 0 <= int(self.seed) < 2**64:
            raise ConfigError(f"--seed must be in 0..2^64-1, got {self.seed}")


def check_regularization(reduction: str, l1: float, l2: float) -> None:
    """ConfigError when ``--l1``/``--l2`` are set for a reduction they cannot apply to (its
    registry entry's ``no_regularization``): refused, not silently ignored."""
    why = REGISTRY[reduction].no_regularization
    if why and (l1 or l2):
        raise ConfigError(f"--l1/--l2 do not apply to --reduction {reduction}: {why}")


def check_average(reduction: str, average: bool) -> None:
    """ConfigError when ``--average`` is set for a reduction whose predictions are not the linear
    learner's weights (the label table's counts, mtree's embeddings)."""
    why = REGISTRY[reduction].no_regularization or REGISTRY[reduction].no_average
    if why and average:
        raise ConfigError(f"--average does not apply to --reduction {reduction}: {why}")


def check_solver(reduction: str, lcfg: LearnerConfig) -> None:
    """ConfigError when ``--solver dual`` is set for a reduction it does not train (its registry
    entry's ``dual``)."""
    if lcfg.solver == "dual" and not REGISTRY[reduction].dual:
        able = [n for n, spec in REGISTRY.items() if spec.dual]
        raise ConfigError(f"--solver dual trains {' and '.join('-r ' + n for n in able)} only, not -r {reduction}")


#: fields written to a model file only when they differ from these values, so that the headers of
#: models that never use them stay byte for byte those of the versions before them
_WRITTEN_WHEN_SET = {"real_labels": False, "adaptive": True, "normalized": True, "invariant": True,
                     "link": "identity", "min_prediction": None, "max_prediction": None,
                     "complete_tree": False}


def to_dict(cfg) -> dict:
    """Plain JSON-able dict of a config record."""
    return {k: v for k, v in asdict(cfg).items() if k not in _WRITTEN_WHEN_SET or v != _WRITTEN_WHEN_SET[k]}


def from_dict(cls, d: dict):
    """Build ``cls`` from a dict, ignoring unknown keys (newer files) and validating values."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})
