"""Model members made a piece at a time while a save writes them (``model_io.write_model``):
the weight table's kept slots (``LinearLearner.state_members``), LOMtree's class records."""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

import numpy as np


class Streamed(NamedTuple):
    """A member written a piece at a time: its dtype and shape, and ``chunks()``, an iterator over
    its C-order pieces (1-D, contiguous), made while the member is written, so the whole member
    is never in memory at once (the weight table's kept slots, ``LinearLearner.state_members``)."""

    dtype: np.dtype
    shape: tuple
    chunks: Callable[[], Iterator[np.ndarray]]

    def array(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        flat = out.reshape(-1)
        i = 0
        for c in self.chunks():
            flat[i:i + c.size] = c
            i += c.size
        return out


def materialize(members: dict) -> dict:
    """``members`` with every ``Streamed`` one made whole."""
    return {name: m.array() if isinstance(m, Streamed) else m for name, m in members.items()}
