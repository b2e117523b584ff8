"""LinearLearner: owns the shared hashed weight table and the per-regressor normaliser state.

A thin Python holder around ``kernels.linear.LinearArrays``; every reduction receives one and
passes ``learner.arrays`` to its compiled kernels.
"""

from __future__ import annotations

import numpy as np

from .config import LearnerConfig
from .kernels import linear as K


#: table rows per chunk of a saved model's weight members (``state_members``): 3 MB of table
SAVE_ROWS = 1 << 18

#: longest example ``slot_layout`` checks (longer ones take the general paths)
MAX_LAYOUT = 1 << 16


def _layout_size(n_features: int) -> int:
    """Length of ``lin.work`` for ``slot_layout`` on examples of up to ``n_features`` features."""
    n = min(max(int(n_features), 8), MAX_LAYOUT)
    return K.LAYOUT_OFF + (1 << (2 * n - 1).bit_length())


def _layout_work(n_features: int) -> np.ndarray:
    return np.zeros(_layout_size(n_features), dtype=np.int64)


def physical_memory() -> int:
    """Bytes of RAM of this machine (0 when unknown)."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 0


def check_memory(need: int, what: str) -> None:
    """ConfigError (exit 2, before any work) when ``need`` bytes are more than this machine's RAM:
    a size option (-k, --max-internal-nodes, -b) the machine cannot hold is a usage error, not
    minutes of swapping and a multi-GB model file."""
    have = physical_memory()
    if have and need > have:
        from .errors import ConfigError

        raise ConfigError(f"the model would need {need / 2**30:.1f} GiB for {what}, more than this "
                          f"machine's {have / 2**30:.1f} GiB: lower -k, --max-internal-nodes or -b")


class LinearLearner:
    """The base learner of docs/ALGORITHMS.md §2 for ``n_models`` regressors over ``2**bits`` slots.

    Parameters
    ----------
    lcfg : LearnerConfig
    bits : hash bits (table size ``2**bits``)
    n_models : W, the number of regressors (grows on demand in CPT mode)
    mode : ``K.MODE_STRIDE`` or ``K.MODE_CPT``
    predict_only : keep only the weights (no G, N): a third of the memory, and ``learn`` is a
        no-op on such a table. Plain SGD and the dual solver need only the weights too.

    With ``lcfg.average`` the kernels add ``c * d`` to ``arrays.avg`` (float64, one per slot) for
    every change ``d`` of a weight made while the clock (the weight of the trained examples
    before) is ``c``; after examples of total weight ``T`` the weight-averaged iterate
    ``sum_t iw_t w_t / T`` is ``w - avg / T`` (``K.averaged_weights``). Learning uses the online
    weights ``w``; prediction (``for_prediction``, called by ``core.Learner`` and at a
    predict-only load) the averaged ones, swapped into the table in one pass and back at the
    next update (``for_learning``). Model files keep ``w`` and ``avg``, so a loaded model
    continues exactly.
    """

    def __init__(self, lcfg: LearnerConfig, bits: int, n_models: int, mode: int = K.MODE_STRIDE,
                 predict_only: bool = False):
        self.config = lcfg
        self.bits = int(bits)
        self.mode = int(mode)
        self.predict_only = bool(predict_only)
        n = max(1, int(n_models))
        cols = 1 if (lcfg.plain_table or predict_only) else 3
        averaging = lcfg.average and not predict_only
        check_memory((1 << self.bits) * (cols * 4 + 8 * averaging) + 16 * n, f"{n} regressors and 2^{self.bits} weights")
        table = np.zeros((1 << self.bits, cols), dtype=np.float32)
        S = np.zeros(n, dtype=np.float64)
        T = np.zeros(n, dtype=np.float64)
        t0 = lcfg.t0
        if cols == 3 and t0 > 0:
            table[:, 1] = t0
            S[:] = t0
            T[:] = t0
        self.arrays = K.LinearArrays(table, S, T, K.make_hp(lcfg, self.bits, n, self.mode),
                                     np.zeros((1024, 3), dtype=np.float64), _layout_work(1024),
                                     np.zeros((1 << self.bits) if averaging else 1, dtype=np.float64))
        if not averaging:
            self.arrays.hp[K.HP_AVG] = 0.0
        #: the online weights while the averaged ones are in the table (``for_prediction``)
        self._online = None
        #: ``ensure_scratch`` has made room for examples of this many features (not fewer)
        self.scratch_features = 0

    # -- state -------------------------------------------------------------------------------
    @property
    def n_models(self) -> int:
        return int(self.arrays.S.shape[0])

    def ensure_models(self, n: int) -> None:
        """Grow the per-regressor arrays to at least ``n`` (capacity doubles; CPT)."""
        cur = self.n_models
        if n <= cur:
            return
        new = max(n, 2 * cur)
        fill = self.config.t0 if (not self.config.plain_table and self.config.t0 > 0) else 0.0
        S = np.full(new, fill, dtype=np.float64)
        T = np.full(new, fill, dtype=np.float64)
        S[:cur] = self.arrays.S
        T[:cur] = self.arrays.T
        self.arrays = self.arrays._replace(S=S, T=T)

    def restride(self, n_models: int, new_id: np.ndarray, features) -> None:
        """Stride mode: the table laid out for ``n_models`` regressors, regressor m becoming
        ``new_id[m]``, for the hashed feature indices ``features`` (those ever learned: a slot
        does not say which feature and regressor wrote it). Each (feature, regressor) keeps its
        weight and optimiser state, exactly where no two pairs share a slot in either layout;
        the other regressors start untrained. O(features x regressors)."""
        self.for_learning()
        a = self.arrays
        W, mask = int(a.hp[K.HP_W]), int(a.hp[K.HP_MASK])
        new_id = np.asarray(new_id, dtype=np.int64)
        h = np.unique(np.asarray(features, dtype=np.int64))[:, None]
        src = ((h * W + np.arange(new_id.shape[0], dtype=np.int64)[None, :]) & mask).ravel()
        dst = ((h * int(n_models) + new_id[None, :]) & mask).ravel()
        table = np.zeros_like(a.table)
        if table.shape[1] == 3 and self.config.t0 > 0:
            table[:, 1] = self.config.t0
        table[dst] = a.table[src]
        avg = a.avg
        if avg.shape[0] > 1:
            avg = np.zeros_like(a.avg)
            avg[dst] = a.avg[src]
        fill = self.config.t0 if (not self.config.plain_table and self.config.t0 > 0) else 0.0
        S = np.full(int(n_models), fill, dtype=np.float64)
        T = np.full(int(n_models), fill, dtype=np.float64)
        S[new_id], T[new_id] = a.S[:new_id.shape[0]], a.T[:new_id.shape[0]]
        hp = a.hp.copy()
        hp[K.HP_W] = int(n_models)
        self.arrays = a._replace(table=table, S=S, T=T, hp=hp, avg=avg)

    def ensure_scratch(self, n_features: int) -> None:
        """Let ``learn`` cache per-feature rates, and ``slot_layout`` check the slots, of examples
        of up to ``n_features`` features (the layout check up to ``MAX_LAYOUT`` features)."""
        self.scratch_features = max(self.scratch_features, int(n_features))
        if n_features > self.arrays.scratch.shape[0]:
            size = max(int(n_features), 2 * self.arrays.scratch.shape[0])
            self.arrays = self.arrays._replace(scratch=np.zeros((size, 3), dtype=np.float64))
        size = _layout_size(n_features)
        if size > self.arrays.work.shape[0]:
            self.arrays = self.arrays._replace(work=np.zeros(size, dtype=np.int64))

    # -- averaged weights ----------------------------------------------------------------------
    @property
    def averaging(self) -> bool:
        """The table's weights are averaged for prediction (``--average``)."""
        return self.arrays.hp[K.HP_AVG] != 0.0

    def for_prediction(self) -> None:
        """Put the averaged weights in the table (a no-op without ``--average`` or when they are)."""
        if self._online is None and self.averaging:
            a = self.arrays
            self._online = a.table[:, 0].copy()
            K.averaged_weights(a.table, a.avg, a.hp[K.HP_CLOCK])

    def for_learning(self) -> None:
        """Put the online weights back in the table (a no-op unless ``for_prediction`` took them)."""
        if self._online is not None:
            self.arrays.table[:, 0] = self._online
            self._online = None

    @property
    def eta(self) -> float:
        return float(self.arrays.hp[K.HP_ETA])

    def set_eta(self, eta: float) -> None:
        """Set the current learning rate (Dask workers scale it for a round, then restore it)."""
        self.arrays.hp[K.HP_ETA] = eta

    def decay(self, factor: float) -> None:
        """Multiply the learning rate by ``factor`` (end of a pass)."""
        self.arrays.hp[K.HP_ETA] *= factor

    @property
    def nan_count(self) -> int:
        return int(self.arrays.hp[K.HP_NAN])

    def state(self) -> dict:
        """Arrays to save, bit-exact and sparse: the slots whose w, G or N bit pattern is not 0.

        ``nz`` int64 (slots), ``w`` (and ``G``, ``N`` unless SGD) float32 at those slots,
        ``size`` int64 (1,) = 2**bits, ``model_S``, ``model_T`` float64 (n_models,).
        """
        from .streamed import materialize

        return materialize(self.state_members())

    def state_members(self) -> dict:
        """``state()`` with ``nz``, ``w``, ``G``, ``N`` as ``streamed.Streamed`` members: each
        produced ``SAVE_ROWS`` table rows at a time when it is written, so a save never holds them
        all at once (they were 20 bytes per kept slot at the peak of a save: 160 MB of a k = 20,001
        LOMtree's 485 MB)."""
        from .streamed import Streamed

        if self.predict_only:
            raise ValueError("a predict-only learner has no optimiser state to save")
        self.for_learning()
        a = self.arrays
        bits = a.table.view(np.uint32)
        size = bits.shape[0]
        starts = range(0, size, SAVE_ROWS)
        avg = a.avg if self.averaging else None
        none = np.zeros(0, dtype=np.float64)

        def piece(s):
            return bits[s:s + SAVE_ROWS], none if avg is None else avg[s:s + SAVE_ROWS]

        # the kept slots per piece, counted once: each member's length must be known before its
        # first byte is written
        counts = [K.kept_count(*piece(s)) for s in starts]
        m = sum(counts)

        def member(col, dtype):
            def chunks():
                for s, c in zip(starts, counts):
                    if not c:
                        continue
                    b, v = piece(s)
                    if col == "nz" or col == "avg":
                        nz = np.empty(c + 1, dtype=np.int64)
                        K.kept_slots(b, v, nz)
                        yield nz[:c] + s if col == "nz" else v[nz[:c]]
                    else:
                        out = np.empty(c + 1, dtype=np.uint32)
                        K.kept_column(b, v, col, out)
                        if col == 1:  # G: an adaptive sum that overflowed float32 (a feature value
                            # near 1e19, x^2 past 3.4e38) has stopped its weight, as the largest
                            # float32 does: saved so, the finished run is kept (not refused as inf)
                            g = out[:c].view(np.float32)
                            np.minimum(g, np.finfo(np.float32).max, out=g)
                        yield out[:c].view(dtype)
            return Streamed(np.dtype(dtype), (m,), chunks)

        out = {"nz": member("nz", np.int64), "size": np.array([size], dtype=np.int64), "w": member(0, np.float32)}
        if not self.config.plain_table:
            out["G"] = member(1, np.float32)
            out["N"] = member(2, np.float32)
        if avg is not None:
            out["avg"] = member("avg", np.float64)
        out["model_S"] = a.S.copy()
        out["model_T"] = a.T.copy()
        return out

    def predict_state_members(self, weight_threshold: float = 0.0) -> dict:
        """The members of a predict-only model (``--predict_only_model``): the weights prediction
        uses (the averaged ones under ``--average``), those with ``|w| < weight_threshold`` set to
        0, at the slots whose weight is not 0, without the optimiser state (G, N, avg). The slots
        are ``slot_gaps`` (``gap_code``: 2 bytes a slot where they are dense enough) or, when that
        is smaller, ``slot_bits``: one bit per table slot (numpy's little-endian ``packbits``);
        ``size``, ``model_S``, ``model_T`` as ``state_members``. Made ``SAVE_ROWS`` rows at a time,
        as ``state_members``. (Earlier predict-only files list the slots as ``nz``, uint32.)"""
        from .streamed import Streamed

        self.for_prediction()
        a = self.arrays
        w_all = a.table[:, 0]
        size = w_all.shape[0]
        starts = range(0, size, SAVE_ROWS)
        thr = float(weight_threshold)

        def kept(s):
            # the table's weight column is strided: one contiguous copy of the piece, then two
            # comparisons, 2.5x faster than |w| >= thr on the column (|w| >= thr > 0 implies w != 0)
            w = np.ascontiguousarray(w_all[s:s + SAVE_ROWS])
            return w, ((w >= thr) | (w <= -thr)) if thr > 0 else w != 0

        def gaps(s, prev):
            """(the gap codes of piece ``s`` after slot ``prev``, its last kept slot)."""
            slots = np.flatnonzero(kept(s)[1]) + s
            return gap_code(slots, prev), (int(slots[-1]) if slots.size else prev)

        counts, n_codes, prev = [], 0, -1
        for s in starts:  # member lengths first: each is known before its first byte is written
            codes, prev = gaps(s, prev)
            counts.append(int(np.count_nonzero(codes)))
            n_codes += codes.shape[0]
        m = sum(counts)
        bitmap = (size + 7) // 8 < 2 * n_codes

        def slots():
            last = -1
            for s in starts:
                if bitmap:
                    yield np.packbits(kept(s)[1], bitorder="little")
                else:
                    codes, last = gaps(s, last)
                    if codes.size:
                        yield codes

        def weights():
            for s, c in zip(starts, counts):
                if c:
                    w, mask = kept(s)
                    yield w[mask]

        out = {"size": np.array([size], dtype=np.int64)}
        if bitmap:
            out["slot_bits"] = Streamed(np.dtype(np.uint8), ((size + 7) // 8,), slots)
        else:
            out["slot_gaps"] = Streamed(np.dtype(np.uint16), (n_codes,), slots)
        out["w"] = Streamed(np.dtype(np.float32), (m,), weights)
        out["model_S"] = a.S.copy()
        out["model_T"] = a.T.copy()
        return out

    def meta(self) -> dict:
        hp = self.arrays.hp
        return {"eta_current": float(hp[K.HP_ETA]), "sgd_t": float(hp[K.HP_CLOCK])}

    def load_state(self, arrays: dict, meta: dict, weights_only: bool = False) -> None:
        """Restore from ``state()``/``meta()`` output; ValueError on inconsistent arrays.
        ``weights_only``: ``predict_state_members`` output (a predict-only learner only)."""
        if weights_only and not self.predict_only:
            raise ValueError("a predict-only model's weights cannot be trained on")
        a = self.arrays
        size = 1 << self.bits
        if arrays["size"].shape != (1,) or int(arrays["size"][0]) != size:
            raise ValueError("weight table size does not match bits")
        nz = _slots(arrays, size, weights_only)
        if nz.size and (nz[0] < 0 or nz[-1] >= size or np.any(nz[1:] <= nz[:-1])):
            raise ValueError("bad slot index list")
        cols = ["w"] if (self.config.plain_table or weights_only) else ["w", "G", "N"]
        for i, c in enumerate(cols):
            v = arrays.get(c)
            if v is None and i >= a.table.shape[1]:
                continue  # not read (predict-only load)
            if v is None or v.dtype != np.float32 or v.shape != nz.shape:
                raise ValueError(f"bad {c} values")
            if i < a.table.shape[1]:
                K.scatter_rows(a.table, nz, v, i)
        if self.config.average and not weights_only:  # (a predict-only model's weights are the averaged ones)
            avg = arrays.get("avg")
            weight = meta.get("sgd_t")
            if avg is None or avg.dtype != np.float64 or avg.shape != nz.shape:
                raise ValueError("bad avg values (a model trained with --average)")
            if not isinstance(weight, (int, float)) or not weight >= 0:
                raise ValueError("bad sgd_t (a model trained with --average)")
            if self.averaging:
                a.avg[nz] = avg
            else:  # predict-only: the averaged weights are all it needs
                K.averaged_rows(a.table, nz, avg, float(weight))
        S, T = arrays["model_S"], arrays["model_T"]
        if S.shape != T.shape or S.ndim != 1 or S.dtype != np.float64 or T.dtype != np.float64:
            raise ValueError("model_S/model_T have the wrong shape or type")
        hp = a.hp.copy()
        hp[K.HP_ETA] = float(meta["eta_current"])
        hp[K.HP_CLOCK] = float(meta["sgd_t"])
        hp[K.HP_W] = max(1, int(hp[K.HP_W]))
        if self.predict_only and nz.size <= K.PREFETCH_MIN_SLOTS:
            hp[K.HP_PREFETCH] = 0.0  # all its rows stay cached: prefetching them is pure overhead
        self.arrays = a._replace(S=S.copy(), T=T.copy(), hp=hp)


#: a ``slot_gaps`` code of 0 moves this many slots on without marking one (a longer gap)
GAP_STEP = 65535


def gap_code(slots: np.ndarray, prev: int = -1) -> np.ndarray:
    """The uint16 codes of increasing slot numbers after slot ``prev`` (-1: from the start): each
    gap g (>= 1) from the slot before is ``(g - 1) // GAP_STEP`` codes 0, each moving ``GAP_STEP``
    slots on, then the rest of the gap (1..GAP_STEP), which marks the slot (``gap_decode``)."""
    g = np.diff(np.asarray(slots, dtype=np.int64), prepend=np.int64(prev))
    steps = (g - 1) // GAP_STEP
    out = np.zeros(int(steps.sum()) + g.shape[0], dtype=np.uint16)
    out[np.cumsum(steps + 1) - 1] = g - steps * GAP_STEP
    return out


def gap_decode(codes: np.ndarray) -> np.ndarray:
    """The slot numbers (int64, increasing) of ``gap_code``'s codes; ValueError for codes that
    end in a move (0)."""
    if codes.size and codes[-1] == 0:
        raise ValueError("bad slot gaps")
    pos = np.cumsum(np.where(codes == 0, GAP_STEP, codes).astype(np.int64)) - 1
    return pos[codes != 0]


def _slots(arrays: dict, size: int, weights_only: bool) -> np.ndarray:
    """The slot numbers (int64) of a saved weight table: its ``nz`` list (int64; a predict-only
    model's uint32 too), its ``slot_gaps`` or its ``slot_bits`` bitmap (``predict_state_members``);
    ValueError when they are malformed."""
    layouts = [name for name in ("nz", "slot_gaps", "slot_bits") if name in arrays]
    if len(layouts) > 1 or (not weights_only and layouts != ["nz"]):
        raise ValueError("bad slot index list: " + (" and ".join(layouts) or "none"))
    codes = arrays.get("slot_gaps")
    if codes is not None:
        if codes.dtype != np.uint16 or codes.ndim != 1:
            raise ValueError("bad slot gaps")
        nz = gap_decode(codes)
        if nz.size and nz[-1] >= size:
            raise ValueError("bad slot gaps: past the table")
        return nz
    bits = arrays.get("slot_bits")
    if bits is not None:
        if bits.dtype != np.uint8 or bits.shape != ((size + 7) // 8,):
            raise ValueError("bad slot bitmap")
        pieces = []
        step = SAVE_ROWS // 8
        for i in range(0, bits.shape[0], step):  # a piece at a time: no 2^b bytes at once
            pieces.append(np.flatnonzero(np.unpackbits(bits[i:i + step], bitorder="little")) + 8 * i)
        nz = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        if nz.size and nz[-1] >= size:
            raise ValueError("bad slot bitmap")
        return nz.astype(np.int64, copy=False)
    nz = arrays.get("nz")
    if nz is None or nz.ndim != 1 or not (nz.dtype == np.int64 or (weights_only and nz.dtype == np.uint32)):
        raise ValueError("bad slot index list")
    return nz.astype(np.int64, copy=False)
