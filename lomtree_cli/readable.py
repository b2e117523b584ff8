"""``--readable_model FILE`` / ``--invert_hash FILE`` (VW's spellings): the trained
weights as text, one line per non-zero weight, grouped by regressor (for the tree reductions a
regressor is a tree node's router or a leaf's scorer; OAA: class i is regressor i - 1; the registry
entry's ``regressors`` says which). The slots follow the model's table layout (``slot_params``:
stride, CPT's hashed offsets, or plt's blocks); a tree reduction lists the regressors of the
nodes it has (``tree.reg``), never a slot of a node that does not exist.

``--invert_hash`` adds the feature names: the training inputs are read again (text, in order,
Python-side: a debugging aid, not a hot path), in the model's format (VW: ``namespace^name``;
LIBSVM and XMC: the feature index), and every feature is written next to the slot it hashes to:
linear features, and the crossed ones of ``-q/--cubic/--interactions`` as ``a^x*b^y`` (VW 9's
terms: wildcards over the example's namespaces, a namespace crossed with itself once per
unordered pair). N-gram features are not named (their slots are listed by ``--readable_model``)."""

from __future__ import annotations

import numpy as np

from .errors import ConfigError

_FNV = 16777619
_M64 = (1 << 64) - 1


def slot_params(hp) -> "callable":
    """``slot(h, m)`` of the model's table layout: the pure-Python twin of ``kernels.linear``'s."""
    from .kernels.linear import CPT_MULT, HP_GROUP, HP_MASK, HP_MODE, HP_W, MODE_BLOCK, MODE_STRIDE

    mask = int(hp[HP_MASK])
    mode = int(hp[HP_MODE])
    W = int(hp[HP_W])

    def params(m: int) -> tuple[int, int]:
        if mode == MODE_STRIDE:
            return W, m
        if mode == MODE_BLOCK:
            R = W * int(hp[HP_GROUP])
            g = m // R
            x = ((g + 1) * CPT_MULT) & _M64
            x = x - (1 << 64) if x >> 63 else x  # int64 arithmetic, as the kernel's
            K = ((x >> 8) & 0xFFFFF) | 1
            C = (x * 0x85EBCA77) & 0xFFFFFF
            return R * K, R * C + (m - g * R)
        return 1, m * CPT_MULT

    return params, mask


def _terms(icfg):
    from .features import WILDCARD, split_specs, term_bytes

    terms = [term_bytes(t) for t in split_specs(icfg.interactions)]
    return terms, any(WILDCARD in t for t in terms)


def _cross(groups: dict, term: bytes):
    """(name, hash, value) of the crossed features of ``term`` over ``groups`` (nsid -> list of
    (name, hash, value)), as ``kernels.interactions`` makes them."""
    if any(c not in groups for c in term):
        return []
    out = []

    def rec(q, start_prev, name, h, v):
        if q == len(term):
            out.append((name, h, v))
            return
        feats = groups[term[q]]
        start = start_prev if q > 0 and term[q] == term[q - 1] else 0
        for j in range(start, len(feats)):
            fn, fh, fv = feats[j]
            if q == 0:
                rec(1, j, fn, fh, fv)
            else:
                rec(q + 1, j, f"{name}*{fn}", ((_FNV * h) & _M64) ^ fh, v * fv)

    rec(0, 0, "", 0, 1.0)
    return out


def _vw_groups(line: bytes, icfg, mode) -> dict:
    """nsid -> [(``ns^name``, hash, value)] of a VW line's features (before feature generation)."""
    from .kernels.hashing import hash_name

    groups: dict = {}
    for part in line.split(b"|")[1:]:
        toks = part.split()
        if not toks:
            continue
        named = not (part[:1].isspace() or part[:1] == b"")
        ns = toks[0].split(b":")[0] if named else b""
        feats = toks[1:] if named else toks
        nsid = ns[0] if ns else 32
        if mode[nsid] == 1:
            continue
        nh = int(hash_name(np.frombuffer(ns, np.uint8), 0, len(ns), np.uint64(icfg.hash_seed))) & _M64 \
            if ns else int(icfg.hash_seed)
        nsname = ns.decode(errors="replace")
        g = groups.setdefault(nsid, [])
        for t in feats:
            name, _, val = t.partition(b":")
            if not name:
                continue
            try:
                v = float(val) if val else 1.0
            except ValueError:
                v = 1.0
            h = int(hash_name(np.frombuffer(name, np.uint8), 0, len(name), np.uint64(nh))) & _M64
            g.append((f"{nsname}^{name.decode(errors='replace')}", h, v))
    return groups


def _index_groups(line: bytes, xmc: bool) -> dict:
    """The one group of a LIBSVM / XMC line: ``index`` -> hash ``index`` (``parse``'s)."""
    body = line.split(b"#", 1)[0].split()
    feats = []
    for t in body[1:] if body and (b":" not in body[0] or xmc) else body:
        idx, _, val = t.partition(b":")
        if not idx.isdigit():
            continue
        try:
            v = float(val) if val else 1.0
        except ValueError:
            v = 1.0
        feats.append((idx.decode(), int(idx), v))
    return {32: feats} if feats else {}


def _names_of_slots(paths, icfg) -> dict:
    """hashed index (before the regressor's slot; masked) -> feature names, of ``paths``."""
    from .features import FeatureSpec, expand_wildcards, normalise_terms
    from .parsing import open_input

    mask = icfg.mask
    spec = FeatureSpec(icfg)
    mode = spec.ns_mode
    terms, wild = _terms(icfg)
    fixed = None if wild else normalise_terms(terms)
    names: dict = {}
    for path in paths:
        f, _ = open_input(path)
        with f:
            first = True
            for line in f:
                line = line.rstrip(b"\r\n")
                if icfg.format == "xmc" and first:
                    first = False
                    continue  # the header: N F L
                first = False
                if icfg.format == "vw":
                    groups = _vw_groups(line, icfg, mode)
                else:
                    groups = _index_groups(line, icfg.format == "xmc")
                for nsid, feats in groups.items():
                    if mode[nsid] == 0:
                        for name, h, _ in feats:
                            names.setdefault(h & mask, set()).add(name)
                if terms:
                    ts = fixed if fixed is not None else normalise_terms(
                        expand_wildcards(terms, sorted(groups)))
                    for t in ts:
                        for name, h, v in _cross(groups, t):
                            if v != 0.0:
                                names.setdefault(h & mask, set()).add(name)
    if not icfg.noconstant:
        names.setdefault(icfg.constant_index, set()).add("Constant")
    return names


def _regressors(m) -> list[tuple[int, str]]:
    """(regressor, heading) of every regressor the model uses: a tree's nodes that exist, by node."""
    from .reductions.registry import REGISTRY

    kind = REGISTRY[m.reduction.name].regressors
    tree = getattr(m.reduction, "tree", None)
    reg = getattr(tree, "reg", None)
    n_nodes = getattr(m.reduction, "n_nodes", None)
    if reg is not None and isinstance(n_nodes, int):
        out = []
        for node in range(min(n_nodes, len(reg))):
            r = int(reg[node])
            if 0 <= r < m.learner.n_models:
                out.append((r, f"regressor {r} (tree node {node})"))
        return sorted(out)
    heads = []
    for r in range(m.learner.n_models):
        if kind == "class":
            lab = r + 1
            hint = f" (class {m.label_dict.name(lab) if m.label_dict is not None else lab})"
        else:
            hint = f" ({kind} {r})" if kind else ""
        heads.append((r, f"regressor {r}{hint}"))
    return heads


def write_readable(model: str | None, inputs: list, readable: str | None = None,
                   invert_hash: str | None = None) -> None:
    """Write ``--readable_model`` (``readable``) and/or ``--invert_hash`` from the model file
    ``model``; the feature names of ``--invert_hash`` are those of the files ``inputs``."""
    from .model_io import load_model

    if model is None:
        raise ConfigError("--readable_model/--invert_hash need a model")
    m = load_model(model, predict_only=True)
    for path, named in ((readable, False), (invert_hash, True)):
        if path:
            names = _names_of_slots([x for x in inputs if x != "-"], m.input_config) if named else {}
            _write(path, m, names)


def _write(path: str, m, names: dict) -> None:
    table = np.asarray(m.learner.arrays.table)
    w = table[:, 0] if table.ndim == 2 else table
    params, mask = slot_params(m.learner.arrays.hp)
    try:
        f = open(path, "w")
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from None
    with f:
        ic = m.input_config
        f.write(f"reduction: {m.reduction.name}\nk: {m.reduction.config.k}\nbits: {ic.bits}\n")
        for name in ("interactions", "ngram", "skips", "ignore", "keep", "ignore_linear"):
            if getattr(ic, name):
                f.write(f"{name}: {getattr(ic, name)}\n")
        if m.label_dict is not None:
            f.write("labels: " + ",".join(m.label_dict.names) + "\n")
        regs = _regressors(m)
        if not names:  # the raw table: slot:weight of every non-zero weight of a regressor that exists
            used = np.zeros(w.shape[0], bool)
            hs = np.arange(w.shape[0], dtype=np.int64)
            if len(regs) == m.learner.n_models and params(0) == (m.learner.n_models, 0):
                used[:] = True  # the stride layout: every slot belongs to a regressor
            else:
                for r, _ in regs:
                    mult, off = params(r)
                    used[(hs * mult + off) & mask] = True
            f.write("slots (slot:weight)\n")
            for s in np.flatnonzero((w != 0) & used).tolist():
                f.write(f"{s}:{w[s]:.9g}\n")
            return
        hs = np.array(sorted(names), np.int64)
        labels = [",".join(sorted(names[h])) for h in hs.tolist()]
        for r, head in regs:
            mult, off = params(r)
            slots = (hs * mult + off) & mask
            ws = w[slots]
            nz = np.flatnonzero(ws)
            if nz.size == 0:
                continue
            f.write(f"{head}:\n")
            for j in nz.tolist():
                f.write(f"{labels[j]}:{int(slots[j])}:{ws[j]:.9g}\n")
