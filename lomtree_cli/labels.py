"""String class labels: VW's ``--named_labels`` and open label dictionaries.

``LabelDict`` maps label strings to the ids 1..n the reductions learn with. With a fixed list
(``--named-labels a,b,c``: label i+1 is the i-th name, k = the list's length) a label not in the
list is a malformed line (``unknown_label``). Without a list (``--string-labels``, for reductions
that grow with the labels seen such as CPT) a new string gets the next id, in input order; the
dictionary is stored in the model (``labels/names``: the UTF-8 names joined by ``\\n``, no
pickle), so ``predict`` prints the names, ``--top-k`` and ``--probabilities`` too, and ``inspect``
shows them. ``predict`` never adds to a model's dictionary: an unknown label there is a mistake
(or, with a fixed list, a malformed line).

The parse kernel hands over the byte span of each example's label token
(``kernels.parse.parse_vw_chunk_ns``); the mapping is one dict look-up per example.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError, InputError

#: model member holding the names
MEMBER = "labels/names"


def check_names(text: str) -> list[str]:
    names = text.split(",")
    if any(n == "" for n in names):
        raise ConfigError("--named-labels: empty label name (the names are separated by ',')")
    bad = [n for n in names if any(c.isspace() or c in "|:" for c in n)]
    if bad:
        raise ConfigError(f"--named-labels: a label name cannot contain whitespace, '|' or ':' ({bad[0]!r})")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"--named-labels: label {dup!r} is given twice")
    return names


class LabelDict:
    """Label strings <-> ids 1..n; ``fixed``: no label may be added (a named list, or predict)."""

    def __init__(self, names: list[str] | None = None, fixed: bool = False, grow: bool = True):
        self.grow = grow  # train: new strings get ids (unless fixed); predict: never stored
        self.names: list[str] = list(names or [])
        self.ids: dict = {n.encode("utf-8"): i + 1 for i, n in enumerate(self.names)}
        self.fixed = fixed
        self.unknown_ids: dict = {}  # predict: labels the model never saw (ids past the dictionary)

    def __len__(self) -> int:
        return len(self.names)

    @staticmethod
    def from_config(cfg) -> "LabelDict | None":
        if not cfg.has_string_labels:
            return None
        if cfg.named_labels:
            return LabelDict(check_names(cfg.named_labels), fixed=True)
        return LabelDict()

    def extend(self, names: list[str]) -> None:
        """Add ``names`` (not in the dictionary yet) as the next ids, in order."""
        for n in names:
            self.names.append(n)
            self.ids[n.encode("utf-8")] = len(self.names)

    def to_array(self) -> np.ndarray:
        return np.frombuffer("\n".join(self.names).encode("utf-8"), dtype=np.uint8).copy()

    @staticmethod
    def from_array(a: np.ndarray, fixed: bool) -> "LabelDict":
        text = bytes(np.asarray(a, np.uint8)).decode("utf-8")
        return LabelDict(text.split("\n") if text else [], fixed=fixed)

    def name(self, i: int) -> str:
        if 1 <= i <= len(self.names):
            return self.names[i - 1]
        return "?" if i <= 0 else self.unknown_name(i)

    def unknown_name(self, i: int) -> str:
        for k, v in self.unknown_ids.items():
            if v == i:
                return k.decode("utf-8", errors="replace")
        return str(i)

    def strings(self, ids) -> list[str]:
        names = self.names
        n = len(names)
        return [names[i - 1] if 0 < i <= n else self.name(i) for i in ids]

    def map_spans(self, data, spans: np.ndarray, grow: bool):
        """ids (int64, (n,)) of the label tokens ``data[s:e]``; 0 where there is no label; -1 for
        a label outside a fixed list (when not ``grow``: predict gives such labels ids past the
        dictionary, never stored)."""
        out = np.zeros(spans.shape[0], np.int64)
        ids = self.ids
        get = ids.get
        mv = bytes(data)
        for j, (s, e) in enumerate(spans.tolist()):
            if s < 0:
                continue
            key = mv[s:e]
            v = get(key)
            if v is None:
                if self.fixed and not grow:
                    v = -1
                elif grow:
                    self.names.append(key.decode("utf-8", errors="replace"))
                    v = len(self.names)
                    ids[key] = v
                else:  # predict with an open dictionary: a label the model never saw
                    v = self.unknown_ids.get(key)
                    if v is None:
                        v = len(self.names) + 1 + len(self.unknown_ids)
                        self.unknown_ids[key] = v
            out[j] = v
        return out


class ShiftedLabels:
    """Class ids written as the input wrote their labels: ``id - offset``, ``offset`` the input's
    ``--label-offset`` (plus 1 for the 0-based XMC files), so that predictions name labels as the
    data does; ``LabelDict``'s two output methods."""

    def __init__(self, offset: int):
        self.offset = int(offset)

    def name(self, c: int) -> str:
        return str(int(c) - self.offset)

    def strings(self, ids: list) -> list[str]:
        return [str(c - self.offset) for c in ids]


def output_names(label_dict, input_cfg):
    """What writes a model's class ids in predictions: its string labels' dictionary, else the
    ids shifted back by the input's offset (``ShiftedLabels``), else None (ids as they are)."""
    if label_dict is not None:
        return label_dict
    return ShiftedLabels(input_cfg.offset) if input_cfg.offset else None


def apply(batch, data, spans: np.ndarray, labels: LabelDict, skip_invalid: bool):
    """Set ``batch.labels`` from the label spans; returns ``(batch, errors)``: with a fixed list,
    examples whose label is not in it are InputErrors (``unknown_label``) and dropped (strict mode:
    the batch ends before the first one)."""
    ids = labels.map_spans(data, spans, labels.grow and not labels.fixed)
    bad = ids < 0
    if not bad.any():
        batch.labels = ids
        return batch, []
    errs = []
    for j in np.flatnonzero(bad).tolist():
        s, e = spans[j].tolist()
        tok = bytes(data[s:e]).decode("utf-8", errors="replace")
        errs.append(InputError(batch.source, int(batch.line_numbers[j]), "unknown_label",
                               f"label {tok!r} is not one of the --named-labels ({_shown(labels)})"))
        if not skip_invalid:
            break
    batch.labels = np.where(bad, 0, ids)
    if not skip_invalid:
        first = int(np.flatnonzero(bad)[0])
        return batch.slice(0, first), errs
    return batch.subset(~bad), errs


def apply_sets(batch, data, starts: np.ndarray, ends: np.ndarray, labels: LabelDict, skip_invalid: bool):
    """``apply`` for label sets: the names at the byte spans ``[starts, ends)`` (in the order of
    ``batch.label_ptr``) become ids, each example's sorted and distinct."""
    ids = labels.map_spans(data, np.stack([starts, ends], axis=1), labels.grow and not labels.fixed)
    ptr = batch.label_ptr
    owner = np.repeat(np.arange(len(batch)), np.diff(ptr))
    bad_ex = np.zeros(len(batch), dtype=bool)
    bad_ex[owner[ids < 0]] = True
    # sorted and distinct per example: sort by (example, id), drop repeats
    order = np.lexsort((ids, owner))
    ids, owner = ids[order], owner[order]
    keep = np.ones(ids.shape[0], dtype=bool)
    keep[1:] = (ids[1:] != ids[:-1]) | (owner[1:] != owner[:-1])
    ids, owner = ids[keep], owner[keep]
    new_ptr = np.zeros(len(batch) + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=len(batch)), out=new_ptr[1:])
    batch.label_ptr, batch.label_ids = new_ptr, ids
    if not bad_ex.any():
        return batch, []
    errs = []
    for j in np.flatnonzero(bad_ex).tolist():
        errs.append(InputError(batch.source, int(batch.line_numbers[j]), "unknown_label",
                               f"a label of the set is not one of the --named-labels ({_shown(labels)})"))
        if not skip_invalid:
            break
    if not skip_invalid:
        return batch.slice(0, int(np.flatnonzero(bad_ex)[0])), errs
    return batch.subset(~bad_ex), errs


def _shown(labels: LabelDict) -> str:
    names = labels.names
    text = ",".join(names[:10])
    return text + (f",... ({len(names)} labels)" if len(names) > 10 else "")
