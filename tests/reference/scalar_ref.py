"""Slow pure-Python reference of the scalar learner (-r regression / -r binary) with VW's update
flags, written from VW's definitions (``gd.cc``, ``loss_functions.cc``, ``scorer.cc``,
``binary.cc``; docs/ALGORITHMS.md §2.3, §3.9) with dicts and loops, independently of
``kernels/linear.py`` and ``kernels/scalar_kernels.py``. w, G, N are rounded to float32 after
every store (the table is float32); everything else is float64.

One regressor over features ``(h, x)`` (h already masked); ``step(feats, y, iw, train)`` returns
(prediction, loss) as the reduction reports them.
"""

from __future__ import annotations

import math

import numpy as np

X_MIN = 2.0 ** -63
X2_MIN = 2.0 ** -126
POISSON_MAX = 44.0


def f32(x: float) -> float:
    return float(np.float32(x))


def loss(name, p, y, tau):
    if name in ("squared", "classic"):
        return (p - y) ** 2
    if name == "logistic":
        a = (y + 1) / 2
        return a * math.log1p(math.exp(-p)) + (1 - a) * math.log1p(math.exp(p))
    if name == "hinge":
        return max(0.0, 1 - y * p)
    if name == "quantile":
        e = y - p
        return tau * e if e > 0 else -(1 - tau) * e
    c = min(max(p, -POISSON_MAX), POISSON_MAX)
    return 2 * (y * (math.log(y + 1e-6) - c) - (y - math.exp(c)))


def dloss(name, p, y, tau):
    if name in ("squared", "classic"):
        return 2 * (p - y)
    if name == "logistic":
        a = (y + 1) / 2
        return -a / (1 + math.exp(p)) + (1 - a) / (1 + math.exp(-p))
    if name == "hinge":
        return -y if y * p < 1 else 0.0
    if name == "quantile":
        e = y - p
        return 0.0 if e == 0 else (-tau if e > 0 else 1 - tau)
    return math.exp(min(max(p, -POISSON_MAX), POISSON_MAX)) - y


def _wexp_solve(z):
    """a with a + exp(a) = z, by bisection (slow and sure). For z > 1 the root is in (0, log z)
    (exp(a) < z), so no midpoint's exp overflows however large z is."""
    lo, hi = min(z, 0.0) - 50, (math.log(z) if z > 1.0 else 1.0) + 1
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid + math.exp(mid) < z:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def invariant_update(name, p, y, s, q, tau):
    """VW's importance-invariant update amount for scale s and pred_per_update q."""
    if name == "classic":
        return 2 * (y - p) * s
    if name == "squared":
        return 2 * (y - p) * s if s * q < 1e-6 else (y - p) * (1 - math.exp(-2 * s * q)) / q
    if name == "hinge":
        if y * p >= 1:
            return 0.0
        return y * min(s, (1 - y * p) / q)
    if name == "quantile":
        e = y - p
        if e == 0:
            return 0.0
        if e > 0:
            return tau * s if tau * s * q < e else e / q
        return -(1 - tau) * s if (1 - tau) * s * q < -e else e / q
    if name == "logistic":
        def one(lab):
            if s * q < 1e-6:
                return lab * s / (1 + math.exp(lab * p))
            a = lab * p
            return lab * (_wexp_solve(a + math.exp(a) + s * q) - a) / q
        a = (y + 1) / 2
        return one(1.0) if a == 1 else one(-1.0) if a == 0 else a * one(1.0) + (1 - a) * one(-1.0)
    c = min(max(p, -POISSON_MAX), POISSON_MAX)
    if y > 0:
        if y * s * q > POISSON_MAX:
            return -(c - math.log(y)) / q
        return y * s - math.log1p(math.exp(c) * math.expm1(y * s * q) / y) / q
    return -math.log1p(math.exp(c) * s * q) / q


class RefScalar:
    def __init__(self, loss="squared", adaptive=True, normalized=True, invariant=True, eta=None, power_t=0.5,
                 initial_t=None, tau=0.5, binary=False, link="identity", min_pred=None, max_pred=None):
        self.loss, self.A, self.Nz, self.I = loss, adaptive, normalized, invariant
        self.eta = eta if eta is not None else (0.5 if adaptive and normalized else 10.0)
        self.p = power_t
        self.t0 = initial_t if initial_t is not None else (1.0 if not adaptive and not normalized else 0.0)
        self.tau, self.binary, self.link = tau, binary, link
        wide = 50.0 if loss in ("logistic", "poisson") else 0.0
        self.lo = -wide if min_pred is None else min_pred
        self.hi = wide if max_pred is None else max_pred
        self.fixed = min_pred is not None or max_pred is not None
        self.w, self.G, self.N = {}, {}, {}
        if self.t0 > 0 and (adaptive or normalized):
            self.S = self.T = self.t0
            self.G0 = self.t0
        else:
            self.S = self.T = 0.0
            self.G0 = 0.0
        self.clock = 0.0

    def _linked(self, v):
        if self.link == "logistic":
            v = 1 / (1 + math.exp(-v))
        elif self.link == "poisson":
            v = math.exp(v)
        elif self.link == "glf1":
            v = 2 / (1 + math.exp(-v)) - 1
        return (1.0 if v > 0 else -1.0) if self.binary else v

    def step(self, feats, y, iw, train):
        if train and not self.fixed:
            self.lo, self.hi = min(self.lo, y), max(self.hi, y)
        f = sum(self.w.get(h, 0.0) * x for h, x in feats)
        p = min(max(f, self.lo), self.hi)
        out = self._linked(p)
        lv = (0.0 if out == y else iw) if self.binary and y in (1.0, -1.0) else loss(self.loss, p, y, self.tau) * iw
        if train:
            self._learn(feats, y, iw, p)
            self.clock += iw
        return out, lv

    def _learn(self, feats, y, iw, p):
        if not loss(self.loss, p, y, self.tau) > 0 or not feats:
            return
        pw, A, Nz = self.p, self.A, self.Nz
        sqrt_rate = pw == 0.5
        d = dloss(self.loss, p, y, self.tau)
        g2 = iw * d * d
        if g2 == 0:
            return
        nexp = 2.0 if (Nz and not A and sqrt_rate) else 2 * (1 - pw)
        M = 1.0
        if A or Nz:
            q = nx = 0.0
            for h, x in feats:
                x2, ax = x * x, abs(x)
                if x2 < X2_MIN:
                    x2, ax = X2_MIN, X_MIN
                if A:
                    self.G[h] = f32(self.G.get(h, self.G0) + g2 * x2)
                if Nz:
                    n = self.N.get(h, 0.0)
                    if ax > n:
                        if n > 0:
                            self.w[h] = f32(self.w.get(h, 0.0) * (n / ax) ** nexp)
                        self.N[h] = n = f32(ax)
                    nx += x2 / (n * n)
                q += x2 * self._rate(h)
            if Nz:
                self.T += iw
                self.S += iw * nx
                r = self.T / self.S
                M = (math.sqrt(r) if A else r) if sqrt_rate else r ** (1 - pw)
                q *= M
        else:
            q = sum(x * x for _, x in feats)
        s = self.eta * iw
        if not A:
            if not Nz:
                s *= self.t0 ** pw
            s *= (self.t0 + self.clock + iw) ** (-pw)
        u = invariant_update(self.loss, p, y, s, q, self.tau) if self.I else -s * d
        for h, x in feats:
            self.w[h] = f32(self.w.get(h, 0.0) + M * u * x * (self._rate(h) if (A or Nz) else 1.0))

    def _rate(self, h):
        r = 1.0
        if self.A:
            G = self.G.get(h, self.G0)
            r = 1 / math.sqrt(G) if self.p == 0.5 else G ** (-self.p)
        if self.Nz:
            nexp = 2.0 if (not self.A and self.p == 0.5) else 2 * (1 - self.p)
            r *= self.N[h] ** (-nexp)
        return r
