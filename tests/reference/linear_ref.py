"""Slow pure-Python reference of the base linear learner (docs/ALGORITHMS.md §2).

Written from the spec with dicts and plain loops, independently of ``kernels/linear.py``, for
comparison tests. It mirrors the float32 storage of w, G, N (values are rounded to float32 after
every store, as the table is float32) and computes everything else in float64.

Usage::

    lin = RefLinear(bits=18, n_models=3, loss="squared")
    f = lin.score(idx, val, m)
    lin.learn(idx, val, m, y, iw, lin.clip(f))
    lin.end_example(iw)
"""

from __future__ import annotations

import math

import numpy as np


def _neg_pow(x: float, p: float) -> float:
    """``x ** -p`` with IEEE semantics: ``0 ** -p`` is inf (float32 G can underflow to 0)."""
    return math.inf if x == 0.0 and p > 0 else x ** (-p)


def _rate(G: float, N: float, p: float) -> float:
    """A slot's rate ``G^-p N^-2(1-p)``, computed in the closed forms the kernel specifies for
    p = 0.5, 0.75 and 0.25 (``kernels.linear.adaptive_rate``; within 2 ulp of ``pow``): the tests
    compare predictions exactly, and a duplicated feature whose two updates cancel must leave the
    same float32 weight here as in the kernel (with ``pow`` it left 2^-54 where the kernel left 0,
    and a later score of exactly 0 became positive)."""
    if G == 0.0:
        return math.inf if p > 0 else (1.0 if N == 1.0 else N ** (-2 * (1 - p)))
    if p == 0.5:
        return 1.0 / (math.sqrt(G) * N)
    if p == 0.75:
        return 1.0 / math.sqrt(G * math.sqrt(G) * N)
    if p == 0.25:
        return 1.0 / math.sqrt(math.sqrt(G) * (N * N * N))
    return _neg_pow(G, p) * N ** (-2 * (1 - p))


def f32(x: float) -> float:
    return float(np.float32(x))


class RefLinear:
    def __init__(self, bits=18, n_models=1, loss="squared", eta=None, power_t=0.5, initial_t=None,
                 tau=0.5, sgd=False, mode="stride", l1=0.0, l2=0.0, group=1):
        self.mask = (1 << bits) - 1
        self.W = max(1, n_models)
        self.loss = loss
        self.eta = eta if eta is not None else (10.0 if sgd else 0.5)
        self.p = power_t
        self.t0 = initial_t if initial_t is not None else (1.0 if sgd else 0.0)
        self.tau = tau
        self.sgd = sgd
        self.mode = mode
        self.group = group  # block mode: blocks per feature region
        self.l1 = l1
        self.l2 = l2
        self.w = {}
        self.G = {}
        self.N = {}
        self.S = {}
        self.T = {}
        self.clock = 0.0
        if self.mode not in ("stride", "cpt", "block"):
            raise ValueError(mode)
        self.lo, self.hi = (-50.0, 50.0) if loss == "logistic" else (-1.0, 1.0)

    # slots -------------------------------------------------------------------------------
    def slot(self, h, m):
        if self.mode == "stride":
            return (h * self.W + m) % (self.mask + 1)
        if self.mode == "block":  # regressor m = child m % W of the node owning block m // W
            R = self.W * self.group  # a feature's rows of `group` consecutive blocks are adjacent
            x = (m // R + 1) * 0x9E3779B1
            K = ((x >> 8) & 0xFFFFF) | 1
            C = (x * 0x85EBCA77) & 0xFFFFFF
            return ((h * K + C) * R + m % R) % (self.mask + 1)
        return (h + m * 0x9E3779B1) % (self.mask + 1)

    def _G(self, s):
        if s in self.G:
            return self.G[s]
        return f32(self.t0) if (not self.sgd and self.t0 > 0) else 0.0

    def _ST(self, m):
        init = self.t0 if (not self.sgd and self.t0 > 0) else 0.0
        return self.S.get(m, init), self.T.get(m, init)

    # prediction --------------------------------------------------------------------------
    def score(self, idx, val, m):
        s = 0.0
        for h, v in zip(idx, val):
            s += self.w.get(self.slot(int(h), m), 0.0) * float(v)
        return s

    def clip(self, f):
        if math.isnan(f):
            return 0.0
        return min(max(f, self.lo), self.hi)

    # losses ------------------------------------------------------------------------------
    def loss_value(self, p, y):
        if self.loss == "squared":
            return (p - y) ** 2
        if self.loss == "logistic":
            return math.log1p(math.exp(-y * p))
        if self.loss == "hinge":
            return max(0.0, 1 - y * p)
        return self.tau * (y - p) if y > p else (1 - self.tau) * (p - y)

    def dloss(self, p, y):
        if self.loss == "squared":
            return 2 * (p - y)
        if self.loss == "logistic":
            return -y / (1 + math.exp(y * p))
        if self.loss == "hinge":
            return -y if y * p < 1 else 0.0
        if y > p:
            return -self.tau
        if y < p:
            return 1 - self.tau
        return 0.0

    def amount(self, yhat, y, sigma, q):
        if self.loss == "squared":
            if sigma * q < 1e-6:
                return 2 * (y - yhat) * sigma
            return (y - yhat) * (1 - math.exp(-2 * sigma * q)) / q
        if self.loss == "hinge":
            if y * yhat >= 1:
                return 0.0
            return y * min(sigma, (1 - y * yhat) / q)
        if self.loss == "quantile":
            e = y - yhat
            if e == 0:
                return 0.0
            if e > 0:
                return self.tau * sigma if self.tau * sigma * q < e else e / q
            return -(1 - self.tau) * sigma if (1 - self.tau) * sigma * q < -e else e / q
        if sigma * q < 1e-6:
            return y * sigma / (1 + math.exp(y * yhat))
        a = y * yhat
        z = a + math.exp(a) + sigma * q
        # bisection (independent of the kernel's Newton): a' + exp(a') = z, increasing in a'
        lo, hi = a, a + sigma * q
        if z > 1:
            hi = min(hi, math.log(z))  # a' > 0 implies exp(a') < z
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid + math.exp(mid) < z:
                lo = mid
            else:
                hi = mid
        return y * ((lo + hi) / 2 - a) / q

    # update ------------------------------------------------------------------------------
    @staticmethod
    def _eta_bar(u, d):
        """VW's example rate -u/d (0 when |u| or |d| <= 1e-8: no regularisation)."""
        if abs(u) <= 1e-8 or abs(d) <= 1e-8:
            return 0.0
        return max(0.0, -u / d)

    def _new_weight(self, w, step, rate):
        """One touched weight after its update ``step``, where ``rate`` multiplies its loss
        gradient in that step: a gradient step on loss + l2/2 w^2 at that rate (the l2 factor
        never below 0), then the l1 truncation of the result toward 0 by l1 * rate."""
        if self.l1 == 0 and self.l2 == 0:
            return w + step
        x = w * max(0.0, 1.0 - self.l2 * rate) + step
        gravity = self.l1 * rate
        if abs(x) <= gravity:
            return 0.0
        return x - math.copysign(gravity, x)

    def learn(self, idx, val, m, y, iw, yhat):
        if iw <= 0 or len(idx) == 0 or not self.loss_value(yhat, y) > 0:
            return
        if self.sgd:
            t_eff = self.t0 + self.clock + iw
            sigma = self.eta * iw * t_eff ** (-self.p)
            d = self.dloss(yhat, y)
            u = -sigma * d
            if u == 0:
                return
            for h, v in zip(idx, val):
                if not math.isfinite(float(v)):
                    continue
                s = self.slot(int(h), m)
                self.w[s] = f32(self._new_weight(self.w.get(s, 0.0), u * float(v), self._eta_bar(u, d)))
            return
        d = self.dloss(yhat, y)
        g2 = iw * d * d
        if g2 == 0:
            return
        p = self.p
        nx = 0.0
        q = 0.0
        for h, v in zip(idx, val):
            x = float(v)
            s = self.slot(int(h), m)
            x2, ax = x * x, abs(x)
            if x2 < 2.0**-126:
                x2, ax = 2.0**-126, 2.0**-63
            self.G[s] = f32(self._G(s) + g2 * x2)
            n_old = self.N.get(s, 0.0)
            if ax > n_old:
                if n_old > 0:
                    self.w[s] = f32(self.w.get(s, 0.0) * (n_old / ax) ** (2 * (1 - p)))
                self.N[s] = f32(ax)
            n_s = self.N[s]
            nx += x2 / (n_s * n_s)
            q += x2 * _rate(self.G[s], n_s, p)
        S, T = self._ST(m)
        T += iw
        S += iw * nx
        self.S[m], self.T[m] = S, T
        M = (S / T) ** (-(1 - p))
        q *= M
        u = self.amount(yhat, y, self.eta * iw, q)
        if math.isnan(u) or u == 0:
            return
        for h, v in zip(idx, val):
            s = self.slot(int(h), m)
            r = _rate(self.G[s], self.N[s], p)
            self.w[s] = f32(self._new_weight(self.w.get(s, 0.0), M * u * float(v) * r, self._eta_bar(u, d) * M * r))

    def end_example(self, iw):
        self.clock += iw

    # comparison helpers ------------------------------------------------------------------
    def dense_w(self):
        out = np.zeros(self.mask + 1, dtype=np.float32)
        for s, v in self.w.items():
            out[s] = v
        return out
