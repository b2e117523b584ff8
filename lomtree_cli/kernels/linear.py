"""Base linear learner kernels: one hashed weight table shared by many binary regressors.

Implements docs/ALGORITHMS.md §2: the score of regressor ``m``, and VW's default update
(adaptive + normalized + importance-invariant, Karampatziakis & Langford 2011; Ross, Mineiro &
Langford 2013; Duchi, Hazan & Singer 2011) or plain SGD, for squared, logistic, hinge and
quantile losses.

State (``LinearArrays``)
------------------------
table : float32, shape (2**bits, 3)
    Per slot: weight ``w`` (column 0), adaptive sum ``G`` (1), normalizer ``N`` (2). Interleaved
    so one slot is one cache line access (VW's stride layout).
S, T : float64, shape (n_models,)
    Per-regressor normaliser state (VW's ``gd_per_model_states``).
hp : float64, shape (N_HP,)
    Hyper-parameters and the mutable SGD clock, indexed by the ``HP_*`` constants.
scratch : float64, shape (capacity, 3)
    Per-feature work space of ``learn`` (rate r and the G, N it was computed from). Examples
    longer than the capacity take the slower path that recomputes r; ``LinearLearner`` grows it.
work : int64, shape (LAYOUT_OFF + 2**j,)
    Work space of ``slot_layout``: the close slot differences of the current example
    (``work[:ND_MAX]``) and its open-addressing table (``work[LAYOUT_OFF:]``).

Slot of feature ``h`` for regressor ``m`` (§2.5)::

    mode 0 (stride):  (h * W + m) & mask          OAA, Filter tree, Rtree, LOMtree
    mode 1 (CPT):     (h + m * 0x9E3779B1) & mask  W unknown
    mode 2 (block):   (h * R * K(g) + R * C(g) + r) & mask,  R = W * G, g = m // R, r = m % R
                      W a power of two: regressor m = b * W + j is child j of the node that owns
                      block b (PLT). G consecutive blocks form group g; a feature's slots of one
                      group are R adjacent rows, its W slots of one block among them, so all
                      children of a node are scored in one pass (``score_block``), and the blocks
                      an example's beam visits lie in a few regions per feature, not one region
                      a block as with G = 1 (the layout of models that predate G; plt's
                      ``block_group`` chooses G, ``bench/multilabel-tuning.md`` measures it).
                      Blocks grow without moving weights, as in CPT mode. The group's base index
                      ``(h K(g) + C(g)) mod 2^bits / R`` multiplies by an odd K(g) (20 bits) and
                      adds C(g) (24 bits), both from g by golden-ratio hashing (``block_mix``): an
                      additive offset alone would keep runs of consecutive feature ids (LIBSVM
                      indices) together and let whole runs of two groups collide.

The kernels are compiled functions (``kernel``/``jit``) meant to be called from the reductions' per-chunk
kernels (numba inlines or calls them natively); Python never calls them per feature.

Differences from VW (accepted, §2.3): exact float64 math instead of VW's approximate rsqrt and
Lambert-W, so results agree with VW to a few digits, not bit for bit.

Regularisation (``--l1``, ``--l2``; ``hp[HP_L1]``, ``hp[HP_L2]``)
-------------------------------------------------------------------------
VW (``gd.cc``, ``compute_update``) turns each update of amount ``u`` into an example rate
``eta_bar = -u / l'(yhat, y)`` (nothing when ``|u|`` or ``|l'|`` is at most 1e-8), multiplies a
global ``contraction`` by ``1 - l2 eta_bar``, adds ``l1 eta_bar`` to a global ``gravity``, and
applies both lazily to *every* weight of the table (``trunc_weight(w, gravity) * contraction``
in each prediction, written back by ``sync_weights``).

lomtree applies them per update to the weights the update *touches*, each at its own rate: for
each (feature occurrence, trained regressor) with rate ``e`` (the factor of its loss gradient
in its step: ``eta_bar * M * r`` in the adaptive update, ``r`` the slot's adaptive/normalized
rate and ``M`` the regressor's normaliser; ``eta_bar`` with ``--sgd``),
``w <- trunc(max(0, 1 - l2 e) w + step, l1 e)`` (``reg_step``): a gradient step on
``loss + l2/2 w^2`` followed by the truncated gradient's l1 truncation (Langford, Li & Zhang
2009; per coordinate as in the composite mirror descent of Duchi, Hazan & Singer 2011), so a
fresh weight stays 0 unless its gradient ``|l' x|`` exceeds ``l1``. **Choices**: (1) touched
weights only, because VW's global form needs every score kernel of every reduction to truncate
and scale each weight it reads; a weight is then regularised only by the updates that reach it
(its feature present, its regressor trained with a nonzero loss), a rare feature's much less
than in VW, where every update of any regressor shrinks every weight. (2) The weight's own rate,
not VW's ``eta_bar``: with ``eta_bar`` per touched weight, l1 made OAA on Sector *denser* (more
updates reach weights that are large next to ``eta_bar l1``) and at best 0.2 points more
accurate (``--l1 0.01``; 0.1 cost 5 points); with the weight's rate, ``--l1 0.03`` took its test error from 12.9% to 9.4%
and ``--l1 0.1`` its nonzero weights from 3.0M to 0.56M (bench/notes/features.md). The values are
therefore not VW's: VW's ``--l1 1e-5`` already costs 10 points of error on Sector. Each weight
pass tests ``reg_on`` once per example and keeps the old arithmetic when both are 0 (the models
are bit for bit those of before). A feature repeated in an example (or two colliding in a
slot) is regularised once per occurrence, as its step is applied.

Two copies of the update: ``_update`` (one regressor: ``learn``, and ``learn_rescore``, which
sums the post-update score in the weight pass when no slot repeats) and ``learn_block`` (k
regressors, features outer; with ``distinct`` the weight pass takes the first pass's rates as
they are). Each writes the per-slot arithmetic out because shared per-slot helper functions,
with or without ``inline="always"``, made the learn loops 20-50% slower under numba 0.68 (OAA
on Sector); ``test_learn_block_equals_sequential_learns`` keeps the two bit-identical. Where
numba allowed one copy at the same speed, the variants are flags of these two (``learn_rescore``,
``learn_block``'s ``distinct``: same model bits, no measurable cost). ``learn`` as ``learn_block`` with k = 1 was not tried: the routers' updates are the
trees' hot loop.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import jit, kernel, prefetch_row

# indices into hp
HP_ETA = 0
HP_POWER_T = 1
HP_INITIAL_T = 2
HP_LOSS = 3
HP_TAU = 4
HP_SGD = 5
HP_CLOCK = 6  # SGD: sum of iw of earlier trained examples
HP_W = 7
HP_MODE = 8
HP_MASK = 9
HP_LO = 10
HP_HI = 11
HP_NAN = 12  # count of NaN scores/updates met (the driver warns once)
HP_PREFETCH = 13  # 1: tree descents prefetch the next nodes' rows (prefetch_slots); 0: they don't
HP_L1 = 14  # --l1: each updated weight truncated toward 0 by l1 times its rate (``reg_step``)
HP_L2 = 15  # --l2: each updated weight first multiplied by 1 - l2 times its rate
HP_AVG = 16  # --average: every weight change d at clock c adds c * d to ``avg`` (``averaged_weights``)
HP_GROUP = 17  # block mode: G, the blocks that share a feature's region of the table (``slot_params``)
HP_RULE = 18  # 0: the default update (or --sgd); else RULE_ON + the VW flags named (``_update_rule``)
N_HP = 19

#: ``hp[HP_RULE]`` bits: VW's update flags given on their own (``LearnerConfig.rule``)
RULE_ON = 8
RULE_ADAPTIVE = 1
RULE_NORMALIZED = 2
RULE_INVARIANT = 4

LOSS_SQUARED = 0
LOSS_LOGISTIC = 1
LOSS_HINGE = 2
LOSS_QUANTILE = 3
LOSS_SQUARED_HINGE = 4  # the dual solver's only (``dual_kernels``); config refuses it to the online updates
LOSS_CLASSIC = 5  # VW's "classic": squared loss, its update never importance-invariant
LOSS_POISSON = 6  # VW's poisson loss of a log-rate score (labels >= 0)
LOSS_IDS = {"squared": LOSS_SQUARED, "logistic": LOSS_LOGISTIC, "hinge": LOSS_HINGE, "quantile": LOSS_QUANTILE,
            "squared-hinge": LOSS_SQUARED_HINGE, "classic": LOSS_CLASSIC, "poisson": LOSS_POISSON}
#: VW clamps the poisson loss's score to +-44 inside its exp
POISSON_MAX = 44.0
#: score bounds of a model of the dual solver: its scores are margins, and clipping them to [-1, 1]
#: would tie every class whose margin passes 1
DUAL_BOUND = 1e30

MODE_STRIDE = 0
MODE_CPT = 1
MODE_BLOCK = 2
CPT_MULT = 0x9E3779B1

# unsigned table indices: numba emits a negative-index wrap-around fix-up for every signed index
# it cannot prove non-negative (a slot computed by hashing); with uint64 indices it emits none,
# and OAA's per-class loops vectorise. (uint64 + int64 is float64 in numba: add uint64 constants.)
_U1 = np.uint64(1)
_U2 = np.uint64(2)

X2_MIN = 2.0**-126
X_MIN = 2.0**-63

# slot_layout: at most ND_MAX close differences are kept (more: "unknown"); its hash table
# starts at LAYOUT_OFF in lin.work
ND_MAX = 8
# tree descents prefetch the children's rows only for examples this short (prefetch_slots)
PREFETCH_MAX_FEATURES = 64
# and not for a loaded prediction-only model with at most this many nonzero weights
# (LinearLearner.load_state): its rows stay in the L2 cache (<= 256 KB even one per cache line)
PREFETCH_MIN_SLOTS = 4096
LAYOUT_OFF = 16
#: l1/l2 regularise an update only when |update| and |loss derivative| exceed this (VW's 1e-8)
REG_MIN = 1e-8
_GOLD = np.uint64(0x9E3779B97F4A7C15)


class LinearArrays(NamedTuple):
    """All state of the base learner (see module docstring for shapes and dtypes)."""

    table: np.ndarray
    S: np.ndarray
    T: np.ndarray
    hp: np.ndarray
    scratch: np.ndarray
    work: np.ndarray
    avg: np.ndarray


@kernel(inline="always")
def block_mix(b):
    """(K, C) of block ``b`` (block mode): K odd, < 2^20; C < 2^24 (int64)."""
    x = (np.int64(b) + 1) * np.int64(CPT_MULT)
    return ((x >> 8) & 0xFFFFF) | 1, (x * np.int64(0x85EBCA77)) & 0xFFFFFF


@kernel(inline="always")
def slot_params(lin, m):
    """(mult, off, mask) with ``slot(h, m) = (h * mult + off) & mask`` in every mode."""
    mask = np.int64(lin.hp[HP_MASK])
    mode = lin.hp[HP_MODE]
    if mode == MODE_STRIDE:
        return np.int64(lin.hp[HP_W]), np.int64(m), mask
    if mode == MODE_BLOCK:
        R = np.int64(lin.hp[HP_W]) * np.int64(lin.hp[HP_GROUP])
        g = np.int64(m) // R
        K, C = block_mix(g)
        return R * K, R * C + (np.int64(m) - g * R), mask
    return np.int64(1), np.int64(m) * np.int64(CPT_MULT), mask


@kernel(inline="always")
def slot(lin, h, m):
    """Slot of hashed feature ``h`` for regressor ``m`` (int64)."""
    mult, off, mask = slot_params(lin, m)
    return (np.int64(h) * mult + off) & mask


@kernel(error_model="numpy")
def score(lin, idx, val, start, end, m):
    """Raw score ``f_m(x) = sum_j w[slot(h_j, m)] * v_j`` (float64, sequential sum)."""
    tab = lin.table
    mult, off, mask = slot_params(lin, m)
    s = 0.0
    for j in range(start, end):
        s += np.float64(tab[np.uint64((np.int64(idx[j]) * mult + off) & mask), 0]) * np.float64(val[j])
    return s


@kernel(error_model="numpy")
def score_block(lin, idx, val, start, end, m0, n, out):
    """Raw scores of the ``n`` regressors ``m0 .. m0+n-1`` of one block (block mode, ``m0`` a
    multiple of W, ``n <= W``): ``out[j] = f_{m0+j}(x)``, each summed over the features in order
    as ``score`` does, in one pass over the features (a feature's n slots are adjacent rows)."""
    tab = lin.table
    mult, off, mask = slot_params(lin, m0)
    for j in range(n):
        out[j] = 0.0
    for t in range(start, end):
        base = (np.int64(idx[t]) * mult + off) & mask
        v = np.float64(val[t])
        for j in range(n):
            out[j] += np.float64(tab[np.uint64(base + j), 0]) * v



@kernel(error_model="numpy")
def score_set(lin, idx, val, start, end, ms, n, out):
    """Raw scores of the ``n`` regressors ``ms[:n]`` (int64; stride mode): ``out[q] = f_{ms[q]}(x)``,
    each summed over the features in order as ``score`` does, in one pass over the features. A
    feature's slots of all regressors lie in one run of W rows from its base ``h W``, so the ``n``
    reads of a feature share a few cache lines instead of being ``n`` passes of random reads
    (LOMtree's leaf candidates, which are label regressors of one such run)."""
    tab = lin.table
    W = np.int64(lin.hp[HP_W])
    mask = np.int64(lin.hp[HP_MASK])
    for q in range(n):
        out[q] = 0.0
    for t in range(start, end):
        base = np.int64(idx[t]) * W
        v = np.float64(val[t])
        for q in range(n):
            out[q] += np.float64(tab[np.uint64((base + ms[q]) & mask), 0]) * v


#: table rows (3 float32 each) a prefetch step may advance without skipping a 64-byte line
ROWS_PER_LINE = 5


@kernel(inline="always")
def prefetch_block(lin, idx, start, end, m0, n):
    """Prefetch every cache line of each feature's ``n`` adjacent rows from regressor ``m0``'s
    (block mode: a node's children; ``n`` = 1 in stride mode, the row of regressor ``m0``):
    issued for a whole beam level, or the next positive node, before it is scored (PLT), or for
    the next example's first nodes (LOMtree, Filter tree), so that the cache misses overlap."""
    tab = lin.table
    mult, off, mask = slot_params(lin, m0)
    for t in range(start, end):
        base = (np.int64(idx[t]) * mult + off) & mask
        for j in range(0, n, ROWS_PER_LINE):
            prefetch_row(tab, np.uint64(base + j))
        if n > 1:
            prefetch_row(tab, np.uint64(base + n - 1))


@kernel(inline="always")
def prefetch_slots(lin, idx, start, end, m):
    """Prefetch the table rows of regressor ``m`` for ``idx[start:end]`` (``kernels.prefetch_row``:
    a hint to the CPU; no value changes), for examples of at most ``PREFETCH_MAX_FEATURES``
    features only. A short example's score is a few dependent cache misses that the prefetch
    hides; a long one's score loop already has many independent loads in flight, and the
    prefetches only add work. Nor when ``hp[HP_PREFETCH]`` is 0: a small model whose rows are all
    in the cache anyway, where they only cost time. Figures: ``bench/notes/design-history.md``."""
    if end - start > PREFETCH_MAX_FEATURES or lin.hp[HP_PREFETCH] == 0.0:
        return
    tab = lin.table
    mult, off, mask = slot_params(lin, m)
    for j in range(start, end):
        prefetch_row(tab, np.uint64((np.int64(idx[j]) * mult + off) & mask))


@kernel(error_model="numpy")
def clip_score(lin, f):
    """Prediction ``clip(f, lo, hi)``; NaN becomes 0 (and is counted in hp[HP_NAN])."""
    if f != f:
        lin.hp[HP_NAN] += 1.0
        return 0.0
    lo = lin.hp[HP_LO]
    hi = lin.hp[HP_HI]
    if f < lo:
        return lo
    if f > hi:
        return hi
    return f


@kernel(error_model="numpy")
def loss_value(loss, tau, p, y):
    """``l(p, y)`` for y in {-1, +1} (docs/ALGORITHMS.md §2.2); real y for squared, classic,
    quantile and poisson; logistic with y in (-1, 1) is VW's mixture of its losses at -1 and +1."""
    if loss == LOSS_SQUARED or loss == LOSS_CLASSIC:
        return (p - y) * (p - y)
    if loss == LOSS_LOGISTIC:
        if y != 1.0 and y != -1.0:
            a = (y + 1.0) / 2.0
            return a * math.log1p(math.exp(-p)) + (1.0 - a) * math.log1p(math.exp(p))
        return math.log1p(math.exp(-y * p))
    if loss == LOSS_POISSON:
        c = min(max(p, -POISSON_MAX), POISSON_MAX)
        return 2.0 * (y * (math.log(y + 1e-6) - c) - (y - math.exp(c)))
    if loss == LOSS_HINGE:
        v = 1.0 - y * p
        return v if v > 0.0 else 0.0
    # quantile
    if y > p:
        return tau * (y - p)
    return (1.0 - tau) * (p - y)


@kernel(error_model="numpy")
def loss_derivative(loss, tau, p, y):
    """``dl/dp`` at (p, y)."""
    if loss == LOSS_SQUARED or loss == LOSS_CLASSIC:
        return 2.0 * (p - y)
    if loss == LOSS_LOGISTIC:
        if y != 1.0 and y != -1.0:
            a = (y + 1.0) / 2.0
            return -a / (1.0 + math.exp(p)) + (1.0 - a) / (1.0 + math.exp(-p))
        return -y / (1.0 + math.exp(y * p))
    if loss == LOSS_POISSON:
        return math.exp(min(max(p, -POISSON_MAX), POISSON_MAX)) - y
    if loss == LOSS_HINGE:
        return -y if y * p < 1.0 else 0.0
    if y > p:
        return -tau
    if y < p:
        return 1.0 - tau
    return 0.0


@kernel(error_model="numpy")
def _solve_logistic(z):
    """The a' with a' + exp(a') = z (Newton; start from the side that converges fast)."""
    if z > 1.0:
        x = math.log(z)
    else:
        x = z - 1.0
    for _ in range(60):
        ex = math.exp(x)
        step = (x + ex - z) / (1.0 + ex)
        x -= step
        if abs(step) < 1e-9:
            break
    return x


@kernel(error_model="numpy")
def _logistic_amount(yhat, y, sigma, q):
    """``update_amount`` of the logistic loss for y in {-1, +1}."""
    sq = sigma * q
    if sq < 1e-6:
        return y * sigma / (1.0 + math.exp(y * yhat))
    a = y * yhat
    a2 = _solve_logistic(a + math.exp(a) + sq)
    return y * (a2 - a) / q


@kernel(error_model="numpy")
def update_amount(loss, tau, yhat, y, sigma, q):
    """Importance-invariant update amount ``U_l(yhat, y, sigma, q)`` (docs/ALGORITHMS.md §2.3);
    classic's is its plain gradient step (VW's)."""
    sq = sigma * q
    if loss == LOSS_CLASSIC:
        return 2.0 * (y - yhat) * sigma
    if loss == LOSS_POISSON:
        c = min(max(yhat, -POISSON_MAX), POISSON_MAX)
        if y > 0.0:
            arg = y * sq
            if arg > POISSON_MAX:
                return -(c - math.log(y)) / q
            return y * sigma - math.log1p(math.exp(c) * math.expm1(arg) / y) / q
        inner = math.exp(c) * sq
        if not math.isfinite(inner):
            return -(c + math.log(sq)) / q
        return -math.log1p(inner) / q
    if loss == LOSS_LOGISTIC and y != 1.0 and y != -1.0:
        a = (y + 1.0) / 2.0
        return a * _logistic_amount(yhat, 1.0, sigma, q) + (1.0 - a) * _logistic_amount(yhat, -1.0, sigma, q)
    if loss == LOSS_SQUARED:
        if sq < 1e-6:
            return 2.0 * (y - yhat) * sigma
        return (y - yhat) * (1.0 - math.exp(-2.0 * sq)) / q
    if loss == LOSS_HINGE:
        if y * yhat >= 1.0:
            return 0.0
        lim = (1.0 - y * yhat) / q
        return y * (sigma if sigma < lim else lim)
    if loss == LOSS_QUANTILE:
        e = y - yhat
        if e == 0.0:
            return 0.0
        if e > 0.0:
            if tau * sq < e:
                return tau * sigma
            return e / q
        if (1.0 - tau) * sq < -e:
            return -(1.0 - tau) * sigma
        return e / q
    # logistic
    if sq < 1e-6:
        return y * sigma / (1.0 + math.exp(y * yhat))
    a = y * yhat
    z = a + math.exp(a) + sq
    a2 = _solve_logistic(z)
    return y * (a2 - a) / q


@kernel(inline="always")
def adaptive_rate(G, N, p, nexp):
    """The rate ``r = G^-p N^-nexp`` of a slot (float64; ``G`` its adaptive sum, ``N`` its
    normaliser, ``nexp = 2 (1 - p)``) in the adaptive, normalized update.

    ``p = 0.5``: ``1 / (sqrt(G) N)``. ``p = 0.75`` (LOMtree's and CPT's default):
    ``1 / sqrt(G sqrt(G) N)``, within 2 ulp of ``pow`` (float64) and a third of its cost: two
    ``pow`` per (feature, regressor) were 30% of LOMtree's training with ``-q ww`` on KJV book.
    ``p = 0.25`` (multi-label models with several passes): ``1 / sqrt(sqrt(G) N^3)``, the same
    way. Other ``p``: ``pow``; ``N^-nexp`` is skipped when ``N = 1`` (binary features), where it
    is 1 exactly."""
    if p == 0.5:
        return 1.0 / (math.sqrt(G) * N)
    if p == 0.75:
        return 1.0 / math.sqrt(G * math.sqrt(G) * N)
    if p == 0.25:
        return 1.0 / math.sqrt(math.sqrt(G) * (N * N * N))
    return G ** (-p) * (1.0 if N == 1.0 else N ** (-nexp))


@kernel(inline="always")
def model_rate(S, T, p):
    """A regressor's normaliser factor ``M = (S / T)^-(1 - p)`` (``S``, ``T``: its normaliser
    state) in the adaptive, normalized update: ``sqrt(T / S)`` at ``p = 0.5``; at ``p = 0.75``
    (LOMtree's and CPT's default) ``1 / sqrt(sqrt(S / T))``, within 2 ulp of ``pow`` and a third of
    its cost (one ``pow`` per trained regressor was 5% of LOMtree's training on KJV next word)."""
    if p == 0.5:
        return math.sqrt(T / S)
    if p == 0.75:
        return 1.0 / math.sqrt(math.sqrt(S / T))
    if p == 0.25:
        x = T / S
        return x * math.sqrt(math.sqrt(1.0 / x))  # x^(3/4)
    return (S / T) ** (-(1.0 - p))


@kernel(inline="always")
def renorm(ratio, p, nexp):
    """``ratio^nexp`` (``nexp = 2 (1 - p)``): how a weight shrinks when its slot's normaliser grows
    from ``N`` to ``|x|`` (``ratio = N / |x|``); ``ratio`` itself at ``p = 0.5``, ``sqrt`` at
    ``p = 0.75``, ``pow`` otherwise."""
    if p == 0.5:
        return ratio
    if p == 0.75:
        return math.sqrt(ratio)
    if p == 0.25:
        return ratio * math.sqrt(ratio)
    return ratio ** nexp


@kernel(inline="always")
def reg_on(hp):
    """--l1 or --l2 is set: the weight passes take ``reg_step`` (one test per example)."""
    return hp[HP_L1] != 0.0 or hp[HP_L2] != 0.0


@kernel(inline="always")
def reg_rate(u, d):
    """VW's example rate ``eta_bar = -u / d`` of an update of amount ``u`` (``d``: the loss
    derivative), the step size without the per-coordinate rate; 0 (no regularisation) when
    ``|u|`` or ``|d|`` is at most ``REG_MIN``, as in VW's ``compute_update``."""
    if abs(u) > REG_MIN and abs(d) > REG_MIN:
        eb = -u / d
        if eb > 0.0:
            return eb
    return 0.0


@kernel(inline="always")
def regularized(w, step, rate, l1, l2):
    """The regularised update of one parameter ``w`` whose step is ``step`` at ``rate`` (the
    factor of its loss gradient in the step): ``trunc(max(0, 1 - l2 rate) w + step, l1 rate)``,
    where ``trunc(x, g)`` moves x toward 0 by g and stops at 0 (VW's ``trunc_weight``). float64.
    Also mtree's (``mtree_kernels.learn_one``)."""
    c = 1.0 - l2 * rate
    if c < 0.0:
        c = 0.0
    x = w * c + step
    g = l1 * rate
    if x > g:
        return x - g
    if x < -g:
        return x + g
    return 0.0


@kernel(inline="always")
def reg_step(hp, w, step, es):
    """``regularized`` with the learner's --l1, --l2."""
    return regularized(w, step, es, hp[HP_L1], hp[HP_L2])


@kernel(error_model="numpy")
def learn(lin, idx, val, start, end, m, y, iw, yhat):
    """Update regressor ``m`` on example ``idx/val[start:end]`` toward ``y`` in {-1,+1}.

    ``yhat`` is the clipped pre-update prediction. Does nothing when ``iw <= 0``,
    ``l(yhat, y) == 0`` or the example has no features (**Choice**: then there is no weight to
    move, and the normaliser state S, T is left alone too, so a featureless example cannot
    make the normaliser infinite). Does not advance the SGD clock (see ``end_example``).
    """
    _update(lin, idx, val, start, end, m, y, iw, yhat, 0.0, False, False)


@kernel(error_model="numpy")
def learn_rescore(lin, idx, val, start, end, m, y, iw, f, distinct):
    """``learn(..., m, y, iw, clip_score(f))``, then the post-update raw score of ``m``.

    ``f`` must be ``score(lin, idx, val, start, end, m)`` at the current weights (the caller may
    pass one it already has). Bit-identical to ``learn`` followed by ``score``: when no weight
    moved the answer is ``f``; when ``distinct`` (``slot_layout``: no slot visited twice) the
    score is summed in the weight pass, in feature order, from the stored weights, and the
    first pass's rate of each feature is final (its G, N cannot change again), so the weight
    pass reads neither back. Any other case (SGD, a predict-only table, duplicate slots, more
    features than the scratch holds) updates as ``learn`` does, then runs ``score``.
    """
    return _update(lin, idx, val, start, end, m, y, iw, clip_score(lin, f), f, distinct, True)


@kernel(inline="always")
def learn_scored(lin, idx, val, start, end, m, y, iw, f, distinct, shortcuts):
    """The post-update score of regressor ``m`` after learning toward ``y`` from its pre-update
    score ``f``: summed in the update (``learn_rescore``) when ``shortcuts``, else ``learn`` and
    ``score`` afresh (bit-identical; tests switch the shortcuts off to compare)."""
    if shortcuts:
        return learn_rescore(lin, idx, val, start, end, m, y, iw, f, distinct)
    learn(lin, idx, val, start, end, m, y, iw, clip_score(lin, f))
    return score(lin, idx, val, start, end, m)


@kernel(error_model="numpy")
def _update(lin, idx, val, start, end, m, y, iw, yhat, f, distinct, rescore):
    """The one update of a single regressor, for ``learn`` and (``rescore``) ``learn_rescore``;
    returns the post-update score when ``rescore`` (else ``f``, which ``learn`` ignores).
    ``packed``: the rescore's fast path, the first pass keeps each feature's rate alone and the
    weight pass sums the score."""
    hp = lin.hp
    tab = lin.table
    scr = lin.scratch
    loss = np.int64(hp[HP_LOSS])
    tau = hp[HP_TAU]
    if iw <= 0.0 or end <= start:
        return f
    if hp[HP_RULE] != 0.0:
        _update_rule(lin, idx, val, start, end, m, y, iw, yhat)
        return score(lin, idx, val, start, end, m) if rescore else f
    if hp[HP_SGD] == 0.0 and tab.shape[1] < 3:
        return f  # a predict-only table has no optimiser state
    if not loss_value(loss, tau, yhat, y) > 0.0:
        return f
    p = hp[HP_POWER_T]
    eta = hp[HP_ETA]
    mult, off, mask = slot_params(lin, m)
    if hp[HP_SGD] != 0.0:
        t_eff = hp[HP_INITIAL_T] + hp[HP_CLOCK] + iw
        sigma = eta * iw * t_eff ** (-p)
        d = loss_derivative(loss, tau, yhat, y)
        u = -sigma * d
        if u == 0.0:
            return f
        reg = reg_on(hp)
        es = reg_rate(u, d)
        avg = hp[HP_AVG] != 0.0
        for j in range(start, end):
            v = np.float64(val[j])
            if not math.isfinite(v):
                continue
            s = np.uint64((np.int64(idx[j]) * mult + off) & mask)
            w0 = tab[s, 0]
            if reg:
                w = np.float32(reg_step(hp, np.float64(w0), u * v, es))
            else:
                w = np.float32(np.float64(w0) + u * v)
            tab[s, 0] = w
            if avg:
                lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
        return score(lin, idx, val, start, end, m) if rescore else f
    d = loss_derivative(loss, tau, yhat, y)
    g2 = iw * d * d
    if g2 == 0.0:
        return f
    nexp = 2.0 * (1.0 - p)
    cached = end - start <= scr.shape[0]
    packed = rescore and distinct and cached
    moved = False
    nx = 0.0
    q = 0.0
    for j in range(start, end):
        x = np.float64(val[j])
        if not math.isfinite(x):
            continue
        s = np.uint64((np.int64(idx[j]) * mult + off) & mask)
        x2 = x * x
        ax = abs(x)
        if x2 < X2_MIN:
            x2 = X2_MIN
            ax = X_MIN
        G = np.float32(np.float64(tab[s, 1]) + g2 * x2)
        tab[s, 1] = G
        Nf = tab[s, 2]
        if ax > np.float64(Nf):
            if Nf > 0.0:
                moved = True
                w0 = tab[s, 0]
                w = np.float32(np.float64(w0) * renorm(np.float64(Nf) / ax, p, nexp))
                tab[s, 0] = w
                if hp[HP_AVG] != 0.0:
                    lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
            Nf = np.float32(ax)
            tab[s, 2] = Nf
        Nv = np.float64(Nf)
        nx += x2 / (Nv * Nv)
        r = adaptive_rate(np.float64(G), Nv, p, nexp)
        q += x2 * r
        if cached:
            k = j - start
            scr[k, 0] = r
            if not packed:
                scr[k, 1] = np.float64(G)
                scr[k, 2] = Nv
    lin.T[m] += iw
    lin.S[m] += iw * nx
    M = model_rate(lin.S[m], lin.T[m], p)
    u = update_amount(loss, tau, yhat, y, eta * iw, M * q)
    if u != u:
        hp[HP_NAN] += 1.0
        u = 0.0
    if u == 0.0:
        return score(lin, idx, val, start, end, m) if rescore and moved else f
    Mu = M * u
    reg = reg_on(hp)
    avg = hp[HP_AVG] != 0.0
    a = reg_rate(u, d) * M  # the rate of a weight is a * r
    acc = 0.0
    for j in range(start, end):
        v = np.float64(val[j])
        s = np.uint64((np.int64(idx[j]) * mult + off) & mask)
        if not math.isfinite(v):
            if packed:
                acc += np.float64(tab[s, 0]) * v
            continue
        if packed:  # no slot repeats: the first pass's rate is final
            r = scr[j - start, 0]
        else:
            # r is a function of the slot's current (G, N): reuse the first pass's value unless a
            # later feature of this example (a duplicate or a collision) changed them since
            Gs = np.float64(tab[s, 1])
            Ns = np.float64(tab[s, 2])
            if cached and scr[j - start, 1] == Gs and scr[j - start, 2] == Ns:
                r = scr[j - start, 0]
            else:
                r = adaptive_rate(Gs, Ns, p, nexp)
        w0 = tab[s, 0]
        if reg:
            w = np.float32(reg_step(hp, np.float64(w0), Mu * v * r, a * r))
        else:
            w = np.float32(np.float64(w0) + Mu * v * r)
        tab[s, 0] = w
        if avg:
            lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
        if packed:
            acc += np.float64(w) * v
    if packed:
        return acc
    return score(lin, idx, val, start, end, m) if rescore else f


@kernel(error_model="numpy")
def _update_rule(lin, idx, val, start, end, m, y, iw, yhat):
    """VW's update with any subset of its flags (``hp[HP_RULE]``: adaptive, normalized, invariant;
    none is VW's ``--sgd``), as ``gd.cc`` composes them (docs/ALGORITHMS.md §2.3): per feature the
    rate ``r = [G^-p] [N^-e]`` (``e = 2 (1 - p)`` with adaptive, else 2 at ``p = 0.5``), the
    regressor's factor ``M`` from its ``S, T`` when normalized, ``sigma = eta iw`` times
    ``t^-p`` unless adaptive (``t``: initial_t plus the weight trained before and this one; with
    neither adaptive nor normalized eta is first multiplied by ``initial_t^p``, as VW does), and
    the importance-invariant amount (invariant) or ``-sigma l'`` (not). Exact float64 math."""
    hp = lin.hp
    tab = lin.table
    code = np.int64(hp[HP_RULE])
    ada = (code & RULE_ADAPTIVE) != 0
    nrm = (code & RULE_NORMALIZED) != 0
    inv = (code & RULE_INVARIANT) != 0
    loss = np.int64(hp[HP_LOSS])
    tau = hp[HP_TAU]
    if iw <= 0.0 or end <= start:
        return
    if (ada or nrm) and tab.shape[1] < 3:
        return  # a predict-only table has no optimiser state
    if not loss_value(loss, tau, yhat, y) > 0.0:
        return
    p = hp[HP_POWER_T]
    sqrt_rate = p == 0.5
    eta = hp[HP_ETA]
    t0 = hp[HP_INITIAL_T]
    mult, off, mask = slot_params(lin, m)
    d = loss_derivative(loss, tau, yhat, y)
    g2 = iw * d * d
    if g2 == 0.0:
        return  # no gradient (logistic loss at a mixed label's optimum): VW's update is 0 there too
    nexp = 2.0 * (1.0 - p)
    if nrm and not ada and sqrt_rate:
        nexp = 2.0
    q = 0.0
    if ada or nrm:
        nx = 0.0
        for j in range(start, end):
            x = np.float64(val[j])
            if not math.isfinite(x):
                continue
            s = np.uint64((np.int64(idx[j]) * mult + off) & mask)
            x2 = x * x
            ax = abs(x)
            if x2 < X2_MIN:
                x2 = X2_MIN
                ax = X_MIN
            r = 1.0
            if ada:
                G = np.float32(np.float64(tab[s, 1]) + g2 * x2)
                tab[s, 1] = G
                r = 1.0 / math.sqrt(np.float64(G)) if sqrt_rate else np.float64(G) ** (-p)
            if nrm:
                Nf = tab[s, 2]
                if ax > np.float64(Nf):
                    if Nf > 0.0:
                        w0 = tab[s, 0]
                        w = np.float32(np.float64(w0) * (np.float64(Nf) / ax) ** nexp)
                        tab[s, 0] = w
                        if hp[HP_AVG] != 0.0:
                            lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
                    Nf = np.float32(ax)
                    tab[s, 2] = Nf
                Nv = np.float64(Nf)
                nx += x2 / (Nv * Nv)
                r *= Nv ** (-nexp)
            q += x2 * r
        M = 1.0
        if nrm:
            lin.T[m] += iw
            lin.S[m] += iw * nx
            ratio = lin.T[m] / lin.S[m]
            if sqrt_rate:
                M = math.sqrt(ratio) if ada else ratio
            else:
                M = ratio ** (1.0 - p)
            q *= M
    else:
        M = 1.0
        for j in range(start, end):
            x = np.float64(val[j])
            if math.isfinite(x):
                q += x * x
    sigma = eta * iw
    if not ada:
        if not nrm:
            sigma *= t0 ** p
        sigma *= (t0 + hp[HP_CLOCK] + iw) ** (-p)
    if inv:
        u = update_amount(loss, tau, yhat, y, sigma, q)
    else:
        u = -sigma * d
    if u != u:
        hp[HP_NAN] += 1.0
        u = 0.0
    if u == 0.0:
        return
    Mu = M * u
    reg = reg_on(hp)
    avg = hp[HP_AVG] != 0.0
    a = reg_rate(u, d) * M
    for j in range(start, end):
        v = np.float64(val[j])
        if not math.isfinite(v):
            continue
        s = np.uint64((np.int64(idx[j]) * mult + off) & mask)
        # the rate of the slot's final G, N: that of its last occurrence, as VW's stored one
        r = 1.0
        if ada:
            Gs = np.float64(tab[s, 1])
            r = 1.0 / math.sqrt(Gs) if sqrt_rate else Gs ** (-p)
        if nrm:
            r *= np.float64(tab[s, 2]) ** (-nexp)
        w0 = tab[s, 0]
        if reg:
            w = np.float32(reg_step(hp, np.float64(w0), Mu * v * r, a * r))
        else:
            w = np.float32(np.float64(w0) + Mu * v * r)
        tab[s, 0] = w
        if avg:
            lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))


@kernel(error_model="numpy")
def end_example(lin, iw):
    """Advance the SGD clock once per trained example (after all its regressors learned)."""
    lin.hp[HP_CLOCK] += iw


@kernel(inline="always")
def _layout_probe(work, C, b, sh, hs, hm, W, mask, size, nd):
    """``slot_layout``: compare base ``b`` with the bases already filed under key ``C``:
    (duplicate found, new nd, first free position of the probe chain)."""
    dup = False
    h = np.int64((np.uint64(C) * _GOLD) >> hs)
    while True:
        u = work[LAYOUT_OFF + h]
        if u == -1:
            return dup, nd, h
        if (u >> sh) == C:
            if u == b:
                dup = True
            else:
                dlt = (b - u) & mask
                if dlt >= W:
                    dlt -= size
                if dlt > -W:
                    if nd < ND_MAX:
                        work[nd] = dlt
                    nd += 1
        h = (h + 1) & hm


@kernel(error_model="numpy")
def slot_layout(lin, idx, start, end):
    """How the slots of example ``idx[start:end]`` may collide (stride mode): ``(distinct, nd)``.

    Regressor ``m`` reads feature ``h`` at ``slot(h, m) = (b + m) & mask``, ``b = (h * W) & mask``
    the feature's *base*, so

    - ``distinct``: no two features of the example share a base, hence no regressor visits a
      slot twice (``learn_rescore`` may then fuse its re-score into the weight pass);
    - ``nd``: the number of *close* pairs of distinct bases, whose circular difference
      ``d = b_i - b_l`` lies in ``(-W, W)``; the differences are kept in ``lin.work[:nd]``.
      Training regressor ``a`` can only change the score of another regressor ``c`` of this
      example if ``c - a`` is such a ``d`` (``scores_independent``).

    The tests of ``nd`` hold only when the regressors' ids do not alias modulo the table size
    (``W <= size``; the two ways below need ``size >= 2 W`` anyway, and an example of one
    feature gives ``(True, -1)`` when ``W > size`` or in CPT mode).

    ``(False, -1)`` means unknown: CPT mode, an example longer than the work space
    (``LinearLearner.ensure_scratch``), or one the narrow way below cannot clear in a table of
    fewer than 4 buckets (under ``8 W`` to ``16 W`` slots); ``nd = -1`` also when there are more
    than ``ND_MAX`` close pairs. Callers then take the general paths.

    Two ways, both O(n) expected:

    - *narrow*: with ``g = h & mask``, ``b = g W mod size``; if every ``g`` lies in a window of
      ``L`` values with ``L W <= size - W``, two bases differ by ``D W`` with ``0 < |D| < L``,
      which is at least ``W`` and never wraps, so there is no close pair; the bases are then
      distinct iff the ``g`` are (free when they increase, as in files with sorted numeric
      feature names like LIBSVM's; else one hash probe a feature on ``b``). The last feature
      (the constant, usually) may lie outside the window: an O(1) test on the range of its
      differences clears it, or it is compared with each of the others;
    - *general*: each base is filed in an open-addressing table under its bucket ``b >> sh``
      (buckets of ``w = 2**sh >= 2 W`` slots), so a close pair sits in the same bucket or, for a
      base within ``W`` of its bucket's edge, in a neighbouring one.
    """
    hp = lin.hp
    work = lin.work
    n = end - start
    W = np.int64(hp[HP_W])
    mask = np.int64(hp[HP_MASK])
    size = mask + 1
    if n <= 1:
        # one slot per regressor, so ``distinct``; but two regressors share it when their slots
        # alias: always possible in CPT mode, and in stride mode when W > size (regressors m and
        # m + size; a tiny table, e.g. -b 4 for 17 regressors)
        if hp[HP_MODE] != MODE_STRIDE or W > size:
            return True, np.int64(-1)
        return True, np.int64(0)
    if hp[HP_MODE] != MODE_STRIDE:
        return False, np.int64(-1)
    P = np.int64(16)
    lp = np.uint64(4)
    while P < 2 * n:
        P *= 2
        lp += _U1
    if LAYOUT_OFF + P > work.shape[0]:
        return False, np.int64(-1)
    # narrow? (all features but the last, which is often the constant, far from the others)
    g0 = np.int64(idx[start]) & mask
    lo = g0
    hi = g0
    rising = True
    prev = g0
    for j in range(start + 1, end - 1):
        g = np.int64(idx[j]) & mask
        if g <= prev:
            rising = False
        prev = g
        if g < lo:
            lo = g
        if g > hi:
            hi = g
    if rising and (hi - lo + 1) * W <= size - W:
        # the last feature against the window: its base differs from theirs by D W, D in
        # [gl - hi, gl - lo]; a duplicate or close pair needs a multiple of size in
        # (x1 - W, x2 + W), x1, x2 the ends of that range times W
        gl = np.int64(idx[end - 1]) & mask
        x1 = (gl - hi) * W
        x2 = (gl - lo) * W
        if ((x1 - W) // size + 1) * size >= x2 + W:
            return True, np.int64(0)
        # else compare the last base with each of the others
        bl = (gl * W) & mask
        nd = np.int64(0)
        distinct = True
        for j in range(start, end - 1):
            dlt = (bl - ((np.int64(idx[j]) * W) & mask)) & mask
            if dlt == 0:
                distinct = False
                continue
            if dlt >= W:
                dlt -= size
            if dlt > -W:
                if nd < ND_MAX:
                    work[nd] = dlt
                nd += 1
        return distinct, (nd if nd <= ND_MAX else np.int64(-1))
    g = np.int64(idx[end - 1]) & mask
    if g < lo:
        lo = g
    if g > hi:
        hi = g
    narrow = (hi - lo + 1) * W <= size - W
    sh = np.int64(0)
    if not narrow:
        while (np.int64(1) << sh) < 2 * W:
            sh += 1
        if (np.int64(4) << sh) > size:
            return False, np.int64(-1)
    w = np.int64(1) << sh
    bmask = (size >> sh) - 1
    hs = np.uint64(64) - lp
    hm = P - 1
    for i in range(P):
        work[LAYOUT_OFF + i] = -1
    nd = np.int64(0)
    distinct = True
    for j in range(start, end):
        b = (np.int64(idx[j]) * W) & mask
        B = b >> sh
        dup, nd, h = _layout_probe(work, B, b, sh, hs, hm, W, mask, size, nd)
        if not narrow:
            r = b & (w - 1)
            if r < W:
                nd = _layout_probe(work, (B - 1) & bmask, b, sh, hs, hm, W, mask, size, nd)[1]
            if r >= w - W:
                nd = _layout_probe(work, (B + 1) & bmask, b, sh, hs, hm, W, mask, size, nd)[1]
        if dup:
            distinct = False
        else:
            work[LAYOUT_OFF + h] = b
    if nd > ND_MAX:
        nd = np.int64(-1)
    return distinct, nd


@kernel(inline="always")
def scores_independent(lin, a, c, nd):
    """After ``slot_layout`` returned ``nd`` for this example: True if training regressor ``a``
    on it cannot change regressor ``c``'s score of it (no slot of ``a`` is a slot of ``c``)."""
    if nd == 0:
        return True
    if nd < 0:
        return False
    dc = c - a
    for i in range(nd):
        if lin.work[i] == dc or lin.work[i] == -dc:
            return False
    return True


def rule_code(lcfg) -> float:
    """``hp[HP_RULE]`` of VW's update flags ``lcfg.rule`` taken by ``_update_rule`` (--sgd too)."""
    a, n, i = lcfg.rule
    return float(RULE_ON + RULE_ADAPTIVE * a + RULE_NORMALIZED * n + RULE_INVARIANT * i)


def make_hp(lcfg, bits: int, n_models: int, mode: int) -> np.ndarray:
    """Build the ``hp`` vector from a LearnerConfig (see ``HP_*``)."""
    hp = np.zeros(N_HP, dtype=np.float64)
    hp[HP_ETA] = lcfg.eta
    hp[HP_POWER_T] = lcfg.power_t
    hp[HP_INITIAL_T] = lcfg.t0
    hp[HP_LOSS] = LOSS_IDS[lcfg.loss]
    hp[HP_TAU] = lcfg.quantile_tau
    hp[HP_SGD] = 1.0 if lcfg.sgd else 0.0
    hp[HP_W] = max(1, int(n_models))
    hp[HP_MODE] = mode
    hp[HP_MASK] = (1 << int(bits)) - 1
    hp[HP_PREFETCH] = 1.0
    hp[HP_GROUP] = 1.0
    hp[HP_L1] = lcfg.l1
    hp[HP_L2] = lcfg.l2
    hp[HP_AVG] = 1.0 if lcfg.average else 0.0
    hp[HP_RULE] = rule_code(lcfg) if lcfg.flagged else 0.0
    if lcfg.solver == "dual":
        hp[HP_LO], hp[HP_HI] = -DUAL_BOUND, DUAL_BOUND
    elif lcfg.loss == "logistic":
        hp[HP_LO], hp[HP_HI] = -50.0, 50.0
    else:
        hp[HP_LO], hp[HP_HI] = -1.0, 1.0
    return hp


@jit(error_model="numpy")
def stride_block_disjoint(lin, idx, start, end, k, tmp):
    """Nonzero when regressors ``0..k-1`` (stride mode) share no slot between different features
    of this example, i.e. the slot ranges ``[h*W, h*W + k) mod 2^b`` of distinct bases do not
    overlap: 0 = they overlap, 1 = disjoint, 2 = disjoint, every base distinct and no range
    wraps around the end of the table (``learn_block``'s ``distinct``).

    Equal bases (duplicate features, or hashes that collide for every regressor alike) are fine
    for 1: they behave as duplicates inside each regressor. tmp : int64, shape >= (end - start,).
    """
    n = end - start
    W = np.int64(lin.hp[HP_W])
    mask = np.int64(lin.hp[HP_MASK])
    size = mask + 1
    if n <= 0:
        return 2
    if k > size:
        return 0
    if n == 1:
        return 2 if ((np.int64(idx[start]) * W) & mask) + k <= size else 1
    for j in range(n):
        tmp[j] = (np.int64(idx[start + j]) * W) & mask
    b = np.sort(tmp[:n])
    first = b[0]
    prev = b[0]
    distinct = True
    for j in range(1, n):
        cur = b[j]
        if cur != prev:
            if cur - prev < k:
                return 0
            prev = cur
        else:
            distinct = False
    if prev != first and first + size - prev < k:
        return 0
    return 2 if distinct and prev + k <= size else 1


@kernel(error_model="numpy")
def _block_amounts(lin, ms, act, na, work, ys, yhats, iw, loss, tau, eta, p, reg):
    """Between the two passes of ``learn_block``: for each active entry
    ``c = act[a]`` (regressor ``ms[c]``), fold the first pass's sums (``work[c, 1]`` = sum x^2/N^2, ``work[c, 2]`` = q)
    into its normaliser state S, T and leave the weight-pass multiplier ``M * u`` in ``work[c, 3]``
    (0 for a NaN update, counted in hp[HP_NAN]), and when ``reg`` ``reg_rate * M`` in ``work[c, 1]``
    (times a slot's r, the slot's rate). Once per example, not per slot."""
    for a in range(na):
        c = act[a]
        m = ms[c]
        lin.T[m] += iw
        lin.S[m] += iw * work[c, 1]
        M = model_rate(lin.S[m], lin.T[m], p)
        u = update_amount(loss, tau, yhats[c], ys[c], eta * iw, M * work[c, 2])
        if u != u:
            lin.hp[HP_NAN] += 1.0
            u = 0.0
        work[c, 3] = M * u
        if reg:
            work[c, 1] = reg_rate(u, loss_derivative(loss, tau, yhats[c], ys[c])) * M


@kernel(error_model="numpy")
def learn_block(lin, idx, val, start, end, ms, k, ys, iw, yhats, work, act, distinct, mult, off):
    """Same result as ``for c in range(k): learn(lin, idx, val, start, end, ms[c], ys[c], iw, yhats[c])``
    (stride mode) when no two of the regressors ``ms[:k]`` share a slot on this example (OAA:
    ``ms = 0..k-1`` and ``stride_block_disjoint``; LOMtree's leaf candidates: ``scores_independent``
    for every pair), so the order of their updates does not matter; loops features outer and
    regressors inner, so the k slots of one feature are updated while they sit in the cache.

    The slot of feature h for regressor ``ms[c]`` is ``(h * mult + off + ms[c]) & mask``: in stride
    mode ``mult = W``, ``off = 0``; for the children ``m = b W + j`` of one block ``b`` (block mode)
    ``mult = W K(b)``, ``off = W C(b) - b W`` (``slot_params`` less the child's own offset), whose
    slots never meet: a feature's W slots of the block are adjacent rows.

    ms : int64 (k,) regressor ids; ys, yhats : float64 (k,); work : float64 (k, 4) scratch;
    act : int64 (k,) scratch. ``distinct``: the caller knows that no (feature, regressor) slot
    occurs twice on this example (OAA: ``stride_block_disjoint`` code 2; LOMtree: ``slot_layout``'s
    ``distinct`` and candidates independent of each other); then the first pass's rate ``r`` of
    each slot is final and the weight pass reads neither G nor N back. The same bits either way.

    When ``lin.scratch`` holds three float64 per (feature, regressor) entry, the first pass keeps
    each entry's G and N there and the rates are computed after it in one loop over the entries,
    which numba compiles to SIMD square roots and divisions (inside the pass they run one at a
    time, and each waits for its slot's loads; the same bits).

    The per-slot arithmetic is written out here and in ``learn`` on purpose: moving it into
    shared helper functions, with or without ``inline="always"``, made OAA training 20-50% slower
    under numba 0.68. ``test_learn_block_equals_sequential_learns`` keeps the
    two bit-identical.
    """
    hp = lin.hp
    if iw <= 0.0 or end <= start:
        return
    if hp[HP_RULE] != 0.0:  # VW's flags named alone: the regressors one after the other (the same result)
        for c in range(k):
            _update_rule(lin, idx, val, start, end, ms[c], ys[c], iw, yhats[c])
        return
    sgd = hp[HP_SGD] != 0.0
    tab = lin.table
    if not sgd and tab.shape[1] < 3:
        return
    loss = np.int64(hp[HP_LOSS])
    tau = hp[HP_TAU]
    p = hp[HP_POWER_T]
    eta = hp[HP_ETA]
    mask = np.int64(hp[HP_MASK])
    na = 0
    for c in range(k):
        if loss_value(loss, tau, yhats[c], ys[c]) > 0.0:
            d = loss_derivative(loss, tau, yhats[c], ys[c])
            if sgd:
                t_eff = hp[HP_INITIAL_T] + hp[HP_CLOCK] + iw
                u = -eta * iw * t_eff ** (-p) * d
                if u != 0.0:
                    work[c, 3] = u
                    work[c, 1] = reg_rate(u, d)
                    act[na] = c
                    na += 1
            else:
                g2 = iw * d * d
                if g2 != 0.0:
                    work[c, 0] = g2
                    work[c, 1] = 0.0
                    work[c, 2] = 0.0
                    act[na] = c
                    na += 1
    if na == 0:
        return
    reg = reg_on(hp)
    avg = hp[HP_AVG] != 0.0
    if sgd:
        for j in range(start, end):
            v = np.float64(val[j])
            if not math.isfinite(v):
                continue
            base = np.int64(idx[j]) * mult + off
            for a in range(na):
                c = act[a]
                s = np.uint64((base + ms[c]) & mask)
                w0 = tab[s, 0]
                if reg:
                    w = np.float32(reg_step(hp, np.float64(w0), work[c, 3] * v, work[c, 1]))
                else:
                    w = np.float32(np.float64(w0) + work[c, 3] * v)
                tab[s, 0] = w
                if avg:
                    lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
        return
    nexp = 2.0 * (1.0 - p)
    scr = lin.scratch
    L = (end - start) * na
    cached = L <= scr.shape[0]
    rs = scr.reshape(scr.size)  # cached: entry pos's rate at rs[pos], its G and N at rs[L + pos], rs[2 L + pos]
    pos = 0
    for j in range(start, end):
        x = np.float64(val[j])
        if not math.isfinite(x):
            pos += na
            continue
        base = np.int64(idx[j]) * mult + off
        x2 = x * x
        ax = abs(x)
        if x2 < X2_MIN:
            x2 = X2_MIN
            ax = X_MIN
        for a in range(na):
            c = act[a]
            s = np.uint64((base + ms[c]) & mask)
            G = np.float32(np.float64(tab[s, 1]) + work[c, 0] * x2)
            tab[s, 1] = G
            Nf = tab[s, 2]
            if ax > np.float64(Nf):
                if Nf > 0.0:
                    w0 = tab[s, 0]
                    w = np.float32(np.float64(w0) * renorm(np.float64(Nf) / ax, p, nexp))
                    tab[s, 0] = w
                    if avg:
                        lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
                Nf = np.float32(ax)
                tab[s, 2] = Nf
            Nv = np.float64(Nf)
            work[c, 1] += x2 / (Nv * Nv)
            if cached:
                rs[L + pos] = np.float64(G)
                rs[2 * L + pos] = Nv
            else:
                work[c, 2] += x2 * adaptive_rate(np.float64(G), Nv, p, nexp)
            pos += 1
    if cached:
        for q in range(L):  # apart from the pass above so that the square roots and divisions run in SIMD
            rs[q] = adaptive_rate(rs[L + q], rs[2 * L + q], p, nexp)
        pos = 0
        for j in range(start, end):
            x = np.float64(val[j])
            if not math.isfinite(x):
                pos += na
                continue
            x2 = x * x
            if x2 < X2_MIN:
                x2 = X2_MIN
            for a in range(na):
                work[act[a], 2] += x2 * rs[pos]
                pos += 1
    _block_amounts(lin, ms, act, na, work, ys, yhats, iw, loss, tau, eta, p, reg)
    pos = 0
    for j in range(start, end):
        v = np.float64(val[j])
        if not math.isfinite(v):
            pos += na
            continue
        base = np.int64(idx[j]) * mult + off
        for a in range(na):
            c = act[a]
            Mu = work[c, 3]
            if Mu != 0.0:
                s = np.uint64((base + ms[c]) & mask)
                if distinct and cached:
                    r = rs[pos]
                else:
                    Gs = np.float64(tab[s, 1])
                    Ns = np.float64(tab[s, 2])
                    if cached and rs[L + pos] == Gs and rs[2 * L + pos] == Ns:
                        r = rs[pos]
                    else:
                        r = adaptive_rate(Gs, Ns, p, nexp)
                w0 = tab[s, 0]
                if reg:
                    w = np.float32(reg_step(hp, np.float64(w0), Mu * v * r, work[c, 1] * r))
                else:
                    w = np.float32(np.float64(w0) + Mu * v * r)
                tab[s, 0] = w
                if avg:
                    lin.avg[s] += hp[HP_CLOCK] * (np.float64(w) - np.float64(w0))
            pos += 1


@jit(nogil=True)
def averaged_weights(table, avg, T):
    """``table[:, 0] = w - avg / T`` (the averaged iterate; ``LinearLearner``), in place."""
    if T > 0.0:
        for i in range(table.shape[0]):
            table[i, 0] = np.float32(np.float64(table[i, 0]) - avg[i] / T)


@jit(nogil=True)
def averaged_rows(table, nz, avg, T):
    """``averaged_weights`` for the slots ``nz`` (their ``avg`` values given in that order)."""
    if T > 0.0:
        for i in range(nz.shape[0]):
            table[nz[i], 0] = np.float32(np.float64(table[nz[i], 0]) - avg[i] / T)


@kernel(inline="always")
def _row_kept(flat, s, cols, avg):
    acc = np.uint32(0)
    for c in range(cols):
        acc |= flat[s * cols + c]
    return acc != 0 or (avg.shape[0] > 0 and avg[s] != 0.0)


@kernel(nogil=True)
def kept_count(bits, avg):
    """How many rows of ``bits`` (a piece of the table viewed as uint32, shape (size, cols)) a
    model file keeps: those not all zero bits, and with ``--average`` (``avg``: the piece's
    averages; empty without) those whose average is not 0 either (a plain-SGD weight can come back
    to exactly 0 after it moved). A save counts them first (each member's length precedes its
    bytes), then takes one column at a time (``kept_slots``, ``kept_column``): a member is written
    whole before the next begins, and a column is a quarter of a row's bytes."""
    size, cols = bits.shape
    flat = bits.reshape(size * cols)
    m = 0
    if avg.shape[0] == 0 and cols == 3:  # the training table: a fixed-width OR, which LLVM vectorises
        for s in range(size):
            m += (flat[3 * s] | flat[3 * s + 1] | flat[3 * s + 2]) != 0
    else:
        for s in range(size):
            m += _row_kept(flat, s, cols, avg)
    return m


@kernel(nogil=True)
def kept_slots(bits, avg, out):
    """The kept rows' numbers (``kept_count``), in order, into ``out`` (int64, at least their
    count + 1: every row is written at the next place, which advances past the kept ones)."""
    size, cols = bits.shape
    flat = bits.reshape(size * cols)
    i = 0
    if avg.shape[0] == 0 and cols == 3:
        for s in range(size):
            out[i] = s
            i += (flat[3 * s] | flat[3 * s + 1] | flat[3 * s + 2]) != 0
    else:
        for s in range(size):
            out[i] = s
            i += _row_kept(flat, s, cols, avg)
    return i


@kernel(nogil=True)
def kept_column(bits, avg, col, out):
    """Column ``col`` of the kept rows (``kept_count``), in order, into ``out`` (uint32, at least
    their count + 1, as ``kept_slots``)."""
    size, cols = bits.shape
    flat = bits.reshape(size * cols)
    i = 0
    if avg.shape[0] == 0 and cols == 3:
        for s in range(size):
            a = flat[3 * s]
            b = flat[3 * s + 1]
            c = flat[3 * s + 2]
            out[i] = flat[3 * s + col]
            i += (a | b | c) != 0
    else:
        for s in range(size):
            out[i] = flat[s * cols + col]
            i += _row_kept(flat, s, cols, avg)
    return i


@kernel(nogil=True)
def scatter_rows(table, nz, vals, col):
    """``table[nz, col] = vals`` (the inverse of ``kept_slots`` and ``kept_column``)."""
    for i in range(nz.shape[0]):
        table[nz[i], col] = vals[i]
