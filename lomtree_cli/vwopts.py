"""VW's spellings of ``lomtree train`` options: ``-d``, ``--oaa/--ect/--log_multi K``,
``--cache_file``, and the feature/label options turned into ``InputConfig`` fields.

``apply_vw_options(p, given)`` rewrites the parameter dict of a ``train`` command line in place
so that an alias reads exactly as its lomtree form (``--oaa 10`` is ``-r oaa -k 10``; ``--ect``
is the filter tree, ``--log_multi`` LOMtree); giving both spellings with different values is a
usage error. Parameters missing from ``p`` (a caller that predates these options) read as unset.
"""

from __future__ import annotations

from .errors import ConfigError
from .reductions.registry import vw_aliases

#: VW reduction option -> (lomtree reduction, whether the VW spelling implies --multilabel), from
#: the registry entries' ``vw_options``
ALIASES = vw_aliases()


def _opt(name: str) -> str:
    return "--" + name


def apply_vw_options(p: dict, given: set) -> None:
    data = tuple(p.get("data") or ())
    if data:
        p["inputs"] = tuple(p.get("inputs") or ()) + data
    chosen = [a for a in ALIASES if p.get(a) is not None]
    if len(chosen) > 1:
        raise ConfigError(f"{_opt(chosen[0])} and {_opt(chosen[1])} cannot be used together")
    if chosen:
        a = chosen[0]
        k = p[a]
        red, multilabel = ALIASES[a]
        if "reduction" in given and p["reduction"] != red:
            raise ConfigError(f"{_opt(a)} means -r {red}; it conflicts with -r {p['reduction']}")
        if p.get("k") is not None and p["k"] != k:
            raise ConfigError(f"{_opt(a)} {k} conflicts with -k {p['k']}")
        p["reduction"] = red
        p["k"] = k
        given.update({"reduction", "k"})
        if multilabel:
            p["multilabel"] = True
    if (p.get("readable_model") or p.get("invert_hash")) and not p.get("final_model"):
        raise ConfigError("--readable_model/--invert_hash need -f MODEL (the text is written from the saved model)")
    if p.get("readable_model") and p.get("invert_hash"):
        raise ConfigError("--readable_model and --invert_hash cannot both be given")
    if p.get("cache_file") is not None:
        if p.get("cache") is not None and p["cache"] != p["cache_file"]:
            raise ConfigError("-c/--cache and --cache_file cannot both be given")
        p["cache"] = p["cache_file"]
    names = p.get("named_labels")
    if names:
        from .labels import check_names

        n = len(check_names(names))
        if p.get("k") is None and p.get("initial_model") is None:
            p["k"] = n
        elif p.get("k") is not None and p["k"] != n:
            raise ConfigError(f"-k {p['k']} conflicts with --named-labels ({n} labels)")
    for name in ("quadratic", "cubic", "interactions"):
        if p.get(name):
            given.add("interactions")  # the stored field holds all three
    for name in ("ngram", "skips", "ignore", "keep", "ignore_linear"):
        if p.get(name):
            given.add(name)
    if names:
        given.add("named_labels")
    if p.get("string_labels"):
        given.add("string_labels")
    if p.get("multilabel") or p.get("fmt") == "xmc":
        given.add("multilabel")


def vw_input_fields(p: dict) -> dict:
    """The ``InputConfig`` fields of the feature and label options of ``p`` (ConfigError on a
    malformed value)."""
    terms = []
    for name, size in (("quadratic", 2), ("cubic", 3), ("interactions", None)):
        for t in p.get(name) or ():
            n = len(t.encode("utf-8", errors="surrogateescape"))
            if size is not None and n != size:
                flag = "-q/--quadratic" if name == "quadratic" else "--cubic"
                raise ConfigError(f"{flag} takes {size} namespace letters, got {t!r}")
            if "," in t:
                raise ConfigError(f"--{name}: ',' cannot be a namespace letter here, got {t!r}")
            terms.append(t)
    out = {"interactions": ",".join(terms)}
    for name in ("ngram", "skips"):
        vals = list(p.get(name) or ())
        if any("," in v for v in vals):
            raise ConfigError(f"--{name}: give one value per --{name}")
        out[name] = ",".join(vals)
    for name in ("ignore", "keep", "ignore_linear"):
        out[name] = "".join(p.get(name) or ())
    out["named_labels"] = p.get("named_labels") or ""
    out["string_labels"] = bool(p.get("string_labels")) or bool(out["named_labels"])
    out["multilabel"] = bool(p.get("multilabel")) or p.get("fmt") == "xmc"
    return out
