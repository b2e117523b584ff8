"""Dual coordinate descent for hashed one-against-all, written plainly from Hsieh et al. 2008
(Algorithm 1) for the tests: dicts of slots, each pair (example, regressor) its own coordinate,
regressors stepped in order with a fresh score each, and the primal and dual objectives."""

from __future__ import annotations

import math

import numpy as np


def f32(x: float) -> float:
    return float(np.float32(x))


class RefDual:
    """``examples``: (indices masked to ``bits``, values, label set, importance weight) per example;
    regressor c of feature h is slot ``(h * k + c) mod 2^bits``."""

    def __init__(self, examples, k: int, bits: int, cost: float, loss: str):
        self.examples = examples
        self.k = k
        self.size = 1 << bits
        self.cost = cost
        self.squared = loss == "squared-hinge"
        self.w: dict = {}
        self.alpha = [[0.0] * k for _ in examples]

    def phi(self, i: int, c: int) -> dict:
        """Example i as regressor c sees it: slot -> summed value."""
        out: dict = {}
        idx, val, _, _ = self.examples[i]
        for h, v in zip(idx, val):
            s = (h * self.k + c) % self.size
            out[s] = out.get(s, 0.0) + float(v)
        return out

    def y(self, i: int, c: int) -> float:
        return 1.0 if c + 1 in self.examples[i][2] else -1.0

    def d_u(self, i: int):
        ci = self.cost * self.examples[i][3]
        return (0.5 / ci, math.inf) if self.squared else (0.0, ci)

    def score(self, i: int, c: int) -> float:
        idx, val, _, _ = self.examples[i]
        return sum(self.w.get((h * self.k + c) % self.size, 0.0) * float(v) for h, v in zip(idx, val))

    def step(self, i: int) -> None:
        """The k coordinates of example i, in order."""
        D, U = self.d_u(i)
        for c in range(self.k):
            x = self.phi(i, c)
            qbar = sum(v * v for v in x.values()) + D
            if qbar <= 0:
                continue
            a = self.alpha[i][c]
            y = self.y(i, c)
            G = y * self.score(i, c) - 1.0 + D * a
            pg = min(G, 0.0) if a == 0 else max(G, 0.0) if a >= U else G
            if pg == 0:
                continue
            new = f32(min(max(a - G / qbar, 0.0), U))
            for s, v in x.items():
                self.w[s] = f32(self.w.get(s, 0.0) + (new - a) * y * v)
            self.alpha[i][c] = new

    def run_pass(self, order, train) -> None:
        for i in order:
            if train[i]:
                self.step(i)

    def dense_w(self) -> np.ndarray:
        out = np.zeros(self.size)
        for s, v in self.w.items():
            out[s] = v
        return out

    # -- objectives --------------------------------------------------------------------------
    def w_of_alpha(self, alpha) -> dict:
        w: dict = {}
        for i in range(len(self.examples)):
            for c in range(self.k):
                if alpha[i][c]:
                    for s, v in self.phi(i, c).items():
                        w[s] = w.get(s, 0.0) + alpha[i][c] * self.y(i, c) * v
        return w

    def dual(self, alpha, train) -> float:
        """The dual objective (maximised): sum alpha - |w(alpha)|^2 / 2 - sum D_i alpha^2 / 2."""
        w = self.w_of_alpha(alpha)
        out = -0.5 * sum(v * v for v in w.values())
        for i in range(len(self.examples)):
            if train[i]:
                D, _ = self.d_u(i)
                out += sum(a - 0.5 * D * a * a for a in alpha[i])
        return out

    def primal(self, w: dict, train) -> float:
        """|w|^2 / 2 + sum over trained pairs of C_i xi(y w . phi)."""
        out = 0.5 * sum(v * v for v in w.values())
        for i in range(len(self.examples)):
            if not train[i]:
                continue
            ci = self.cost * self.examples[i][3]
            for c in range(self.k):
                m = self.y(i, c) * sum(w.get(s, 0.0) * v for s, v in self.phi(i, c).items())
                xi = max(0.0, 1.0 - m)
                out += ci * (xi * xi if self.squared else xi)
        return out
