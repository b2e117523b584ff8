"""``--readable_model FILE`` / ``--invert_hash FILE`` (VW's spellings): the trained
weights as text, one line per non-zero weight, grouped by regressor (for the tree reductions a
regressor is a tree node's router or a leaf's scorer; OAA: class i is regressor i - 1; the registry
entry's ``regressors`` says which).

``--invert_hash`` adds the feature names: the training inputs are read again (text, in order,
Python-side: a debugging aid, not a hot path) and every linear feature name ``namespace^name``
is written next to the slots it hashes to (generated interaction and n-gram features are shown
as their slot only)."""

from __future__ import annotations

import numpy as np

from .errors import ConfigError


def _names_of_slots(paths, icfg) -> dict:
    """slot -> sorted feature names (``ns^name``) of the linear features of ``paths``."""
    from .kernels.hashing import hash_name

    names: dict = {}
    mask = icfg.mask
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                parts = line.rstrip(b"\r\n").split(b"|")[1:]
                for part in parts:
                    toks = part.split()
                    if not toks:
                        continue
                    ns = b"" if part[:1].isspace() or part[:1] == b"" else toks[0].split(b":")[0]
                    feats = toks if ns == b"" else toks[1:]
                    buf = np.frombuffer(ns or b" ", np.uint8)
                    nh = int(hash_name(buf, 0, len(ns), np.uint64(icfg.hash_seed))) & 0xFFFFFFFF if ns else icfg.hash_seed
                    for t in feats:
                        name = t.split(b":")[0]
                        if not name:
                            continue
                        b = np.frombuffer(name, np.uint8)
                        slot = int(hash_name(b, 0, len(name), np.uint64(nh))) & mask
                        names.setdefault(slot, set()).add((ns.decode(errors="replace") + "^" + name.decode(errors="replace")))
    if not icfg.noconstant:
        names.setdefault(icfg.constant_index, set()).add("Constant")
    return names


def write_readable(p: dict, icfg) -> None:
    from .model_io import load_model

    path = p.get("readable_model") or p.get("invert_hash")
    model = p.get("final_model")
    if model is None:
        raise ConfigError("--readable_model/--invert_hash need -f MODEL")
    m = load_model(model, predict_only=True)
    names = {}
    if p.get("invert_hash"):
        names = _names_of_slots([x for x in p["inputs"] if x != "-"], m.input_config)
    table = np.asarray(m.learner.arrays.table)
    with open(path, "w") as f:
        f.write(f"reduction: {m.reduction.name}\nk: {m.reduction.config.k}\nbits: {m.input_config.bits}\n")
        for name in ("interactions", "ngram", "skips", "ignore", "keep", "ignore_linear"):
            if getattr(m.input_config, name):
                f.write(f"{name}: {getattr(m.input_config, name)}\n")
        if m.label_dict is not None:
            f.write("labels: " + ",".join(m.label_dict.names) + "\n")
        from .kernels.linear import CPT_MULT, HP_MASK, HP_MODE, HP_W, MODE_STRIDE

        hp = m.learner.arrays.hp
        mask = int(hp[HP_MASK])
        stride = int(hp[HP_MODE]) == MODE_STRIDE
        mult = int(hp[HP_W]) if stride else 1
        w = table[:, 0] if table.ndim == 2 else table
        if not names:  # the raw table: slot:weight of every non-zero weight
            f.write("slots (slot(h, regressor m) = (h * %d + %s) & %d):\n" % (mult, "m" if stride else f"m * {CPT_MULT}", mask))
            for s in np.flatnonzero(w).tolist():
                f.write(f"{s}:{w[s]:.9g}\n")
            return
        hs = np.array(sorted(names), np.int64)
        labels = [",".join(sorted(names[h])) for h in hs.tolist()]
        for r in range(m.learner.n_models):
            off = r if stride else r * CPT_MULT
            slots = (hs * mult + off) & mask
            ws = w[slots]
            nz = np.flatnonzero(ws)
            if nz.size == 0:
                continue
            f.write(f"regressor {r}{_node_hint(m, r)}:\n")
            for j in nz.tolist():
                f.write(f"{labels[j]}:{int(hs[j])}:{ws[j]:.9g}\n")


def _node_hint(m, r: int) -> str:
    from .reductions.registry import REGISTRY

    kind = REGISTRY[m.reduction.name].regressors
    if kind == "class":
        lab = r + 1
        return f" (class {m.label_dict.name(lab) if m.label_dict is not None else lab})"
    return f" ({kind} {r})" if kind else ""
