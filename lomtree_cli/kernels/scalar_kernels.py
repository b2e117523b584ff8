"""Numba kernels of the scalar learner (``reductions/scalar.py``: -r binary, -r regression): real
labels read from their byte spans, and the chunk's progressive predict-then-learn of one
regressor as VW's scorer and ``--binary`` do it."""

from __future__ import annotations

import math

import numpy as np

from . import jit, kernel
from . import linear as K
from .parse import parse_float

LINK_IDS = {"identity": 0, "logistic": 1, "poisson": 2, "glf1": 3}

# ``stats`` of scalar_process: VW's shared_data sums behind "weighted label sum" and the best constant
ST_LABEL_SUM = 0  # sum of iw * label over the counted examples
ST_WEIGHT = 1  # sum of iw over them
ST_FIRST = 2  # the first label seen (NaN: none yet)
ST_SECOND = 3  # the second distinct label (NaN: none yet)
ST_MORE = 4  # 1 when a third distinct label was seen
N_STATS = 5


@jit(nogil=True)
def real_label_values(buf, spans, out, bad):
    """``out[i]``: the real label of example i read from ``buf[spans[i, 0]:spans[i, 1]]`` (as a
    float32, then float64: VW's labels are float32); ``bad[i]``: the token is not a finite
    number. A number followed by ``:`` is read as VW reads it, the number (``1:1`` is 1). Examples
    without a label (span -1) are left alone."""
    for i in range(spans.shape[0]):
        s = spans[i, 0]
        e = spans[i, 1]
        if s < 0:
            continue
        v, end, ok = parse_float(buf, s, e)
        if not ok or (end != e and buf[end] != 58) or not math.isfinite(v) or not math.isfinite(np.float32(v)):
            bad[i] = True
        else:
            out[i] = np.float64(np.float32(v))


def apply_real_labels(batch, data, spans, skip_invalid: bool):
    """Set ``batch.real`` from the label spans of a parsed chunk; ``(batch, errors)``: a label that
    is not a number is an InputError (``label_real``) and its example dropped (strict mode: the
    batch ends before the first one)."""
    from ..errors import InputError

    n = len(batch)
    real = np.zeros(n, dtype=np.float64)
    bad = np.zeros(n, dtype=np.bool_)
    if n:
        buf = np.frombuffer(data, dtype=np.uint8)
        real_label_values(buf, np.ascontiguousarray(spans, dtype=np.int64), real, bad)
    batch.real = real
    if not bad.any():
        return batch, []
    errs = []
    for j in np.flatnonzero(bad).tolist():
        s, e = spans[j].tolist()
        tok = bytes(data[s:e]).decode("utf-8", errors="replace")
        errs.append(InputError(batch.source, int(batch.line_numbers[j]), "label_real",
                               f"label {tok!r} is not a finite number"))
        if not skip_invalid:
            break
    if not skip_invalid:
        return batch.slice(0, int(np.flatnonzero(bad)[0])), errs
    return batch.subset(~bad), errs


@kernel(inline="always")
def link_value(link, f):
    """VW's links of a clipped score: identity, logistic, poisson (exp), glf1 (2 logistic - 1)."""
    if link == 1:
        return 1.0 / (1.0 + math.exp(-f))
    if link == 2:
        return math.exp(f)
    if link == 3:
        return 2.0 / (1.0 + math.exp(-f)) - 1.0
    return f


@kernel(inline="always")
def count_label(stats, y, iw):
    """VW's ``count_label`` and weighted label sums (best constant of the summary)."""
    stats[ST_LABEL_SUM] += iw * y
    stats[ST_WEIGHT] += iw
    if stats[ST_MORE] != 0.0:
        return
    if stats[ST_FIRST] != stats[ST_FIRST]:
        stats[ST_FIRST] = y
    elif stats[ST_FIRST] != y:
        if stats[ST_SECOND] != stats[ST_SECOND]:
            stats[ST_SECOND] = y
        elif stats[ST_SECOND] != y:
            stats[ST_MORE] = 1.0


@jit(nogil=True)
def scalar_process(lin, indptr, indices, values, real, labeled, weights, train, counted, fixed, binary, link,
                   preds, losses, stats):
    """Progressive predict-then-learn of regressor 0 over a chunk.

    For a trained example the label first widens the clipping range ``hp[HP_LO], hp[HP_HI]``
    (unless ``fixed``: --min_prediction/--max_prediction), then the score is clipped to it
    (VW's ``set_minmax`` before ``predict``), its loss taken (``loss_value`` times the importance
    weight, for labeled examples of positive weight), and the regressor learns from it. With
    ``binary`` the prediction is the sign of the linked score (-1 or 1) and the loss 0/1 (VW's
    ``--binary``; a label other than -1 or 1 keeps the loss function's loss, as in VW); else the
    linked score.

    preds, losses : float64 (n,) out; stats : float64 (N_STATS,) in/out (``count_label``).
    """
    hp = lin.hp
    loss = np.int64(hp[K.HP_LOSS])
    tau = hp[K.HP_TAU]
    for i in range(preds.shape[0]):
        s = indptr[i]
        e = indptr[i + 1]
        y = real[i]
        iw = weights[i]
        if train[i] and not fixed:
            if y < hp[K.HP_LO]:
                hp[K.HP_LO] = y
            if y > hp[K.HP_HI]:
                hp[K.HP_HI] = y
        yhat = K.clip_score(lin, K.score(lin, indices, values, s, e, 0))
        out = link_value(link, yhat)
        if binary:
            out = 1.0 if out > 0.0 else -1.0
        preds[i] = out
        losses[i] = 0.0
        if labeled[i] and iw > 0.0:
            if binary and (y == 1.0 or y == -1.0):
                losses[i] = 0.0 if y == out else iw
            else:
                losses[i] = K.loss_value(loss, tau, yhat, y) * iw
        if counted[i]:
            count_label(stats, y, iw)
        if train[i]:
            K.learn(lin, indices, values, s, e, 0, y, iw, yhat)
            K.end_example(lin, iw)
