"""VW's spellings of ``lomtree train`` options: ``-d``, ``--oaa/--ect/--log_multi K``,
``--cache_file``, and the feature/label options turned into ``InputConfig`` fields.

``apply_vw_options(p, given)`` rewrites the parameter dict of a ``train`` command line in place
so that an alias reads exactly as its lomtree form (``--oaa 10`` is ``-r oaa -k 10``; ``--ect``
is the filter tree, ``--log_multi`` LOMtree); giving both spellings with different values is a
usage error. Parameters missing from ``p`` (a caller that predates these options) read as unset.

The finer rules of VW's command lines (docs/CLI.md has the main ones):

- ``--oaa/--ect/--log_multi/--plt/--multilabel_oaa K``: label sets are 0-based; labels past ``K``
  are predicted, not learned; ``--oaa`` reads labels as 0-based when the input files hold a
  label ``0`` (stdin: ``--indexing 0``). ``--named_labels``: an unknown name is unlabeled.
- ``-p`` with ``--probabilities``/``--scores``/``-r``: every class (``1:0.25 2:0.75``), before the
  example's update; label sets and ``--top_k`` joined by ``,``. ``-P 0.5`` is x1.5. ``-t``
  without ``-i``, and ``--noop``: the new model's predictions.
- ``--holdout_after N`` holds out each pass's tail (one pass too).
- ``--no_stdin``, ``--audit``, ``--num_children`` are accepted; ``--error E`` with ``--ect``
  warns (the filter tree is ``E = 0``). ``--readable_model``/``--invert_hash`` need no ``-f``
  (``a^x*b^y`` for crosses).
- ``train -t -i MODEL --daemon --port P [--foreground] [--pid_file F] [--port_file F]`` is
  ``predict --daemon``, detached unless ``--foreground``, a thread per connection.
"""

from __future__ import annotations

from .errors import ConfigError
from .reductions.registry import REGISTRY, vw_aliases

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


#: the spellings that mean one thing to VW and another to lomtree, resolved before click parses:
#: ``-k`` (VW: --kill_cache; lomtree: the class count), ``--progress`` (VW: the table's interval;
#: lomtree: the progress bar) and ``-r`` (VW: --raw_predictions FILE; lomtree: the reduction)
AMBIGUOUS_RULES = (
    "-k N with N an integer that names no file is -k/--classes N; any other -k is VW's --kill_cache",
    "--progress X with X a number that names no file is VW's --progress (-P X); else the progress bar",
    "-r X with X a reduction name is -r/--reduction X; any other -r X is VW's -r/--raw_predictions X",
)


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return not tok.startswith("-") or tok[1:2].isdigit()


def vw_argv(args: list, reductions) -> list:
    """``lomtree train``'s command line with VW's ambiguous spellings resolved (``AMBIGUOUS_RULES``):
    ``-k --oaa 10`` -> ``--kill_cache --oaa 10``, ``--progress 10`` -> ``-P 10``, ``-r raw.txt``
    -> ``--raw_predictions raw.txt``; every other token is left as it is (a ``--`` ends options)."""
    import os

    out = []
    i = 0
    n = len(args)
    vw_named = False
    while i < n:
        a = args[i]
        nxt = args[i + 1] if i + 1 < n else None
        if a == "--":
            out.extend(args[i:])
            break
        if a == "-k":
            if nxt is not None and nxt.strip().isdigit() and not os.path.exists(nxt):
                out += ["-k", nxt]
                i += 2
            else:
                if "--kill_cache" not in out:
                    out.append("--kill_cache")
                i += 1
            continue
        if a == "--kill_cache" and "--kill_cache" in out:
            i += 1
            continue
        if a == "--progress" and nxt is not None and _is_number(nxt) and not os.path.exists(nxt):
            out += ["-P", nxt]
            i += 2
            continue
        if a == "-r" and nxt is not None and nxt not in reductions:
            out += ["--raw_predictions", nxt]
            i += 2
            continue
        if a == "--named_labels" or a.startswith("--named_labels="):
            vw_named = True
        out.append(a)
        i += 1
    if vw_named:  # VW's spelling: an unknown name is read as 'unknown', not refused
        out.insert(0, "--vw-named-labels")
    return out


#: VW option -> the option values that make VW's model at VW's rates where lomtree's own defaults
#: for that reduction differ (the registry entries' ``vw_models``)
VW_MODELS = {opt: model for spec in REGISTRY.values() for opt, model in spec.vw_models.items()}

_ZERO_LABEL = None
#: VW's single-label option with a regressor per class (--oaa): VW 9 detects its 0-based labels
_CLASS_ALIASES = [a for a, (r, ml) in ALIASES.items() if not ml and REGISTRY[r].regressors == "class"]


def _has_zero_label(paths) -> bool:
    """A line of the regular files ``paths`` starts with the label ``0`` (VW 9's sign of 0-based
    labels for --oaa); read in 1 MB blocks, a line cut between two blocks is looked at whole."""
    import os
    import re

    global _ZERO_LABEL
    if _ZERO_LABEL is None:
        _ZERO_LABEL = re.compile(rb"(?:^|\n)0(?:[ \t|:]|\r?\n|$)")
    for path in paths:
        if path == "-" or not os.path.isfile(path):
            continue
        from .parsing import open_input

        f, _ = open_input(path)
        with f:
            tail = b""
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                cut = block.rfind(b"\n")
                text = tail + (block if cut < 0 else block[:cut + 1])
                if _ZERO_LABEL.search(text):
                    return True
                tail = b"" if cut < 0 else block[cut + 1:]
                if cut < 0:
                    tail = text
            if tail and _ZERO_LABEL.search(tail):
                return True
    return False


def apply_vw_run_options(p: dict, given: set, err) -> dict:
    """VW's run-control and output options of ``p`` (after ``apply_vw_options``) read into what
    lomtree's run takes; returns the ``driver.RunOptions`` fields they set. Writes VW's notes (0-based
    labels found) to ``err``."""
    run: dict = {}
    vw_spelled = any(p.get(a) is not None for a in ALIASES) or bool(p.get("vw_named_labels"))
    run["vw_labels"] = vw_spelled
    run["keep_last_pass"] = vw_spelled or bool(p.get("kill_cache"))
    idx = p.get("indexing")
    offset_given = "label_offset" in given
    if idx is not None:
        if offset_given and p["label_offset"] != (1 if idx == "0" else 0):
            raise ConfigError(f"--indexing {idx} conflicts with --label-offset {p['label_offset']}")
        p["label_offset"] = 1 if idx == "0" else 0
        given.add("label_offset")
    elif not offset_given and p.get("initial_model") is None and not p.get("testonly"):
        multilabel_vw = [a for a in ALIASES if p.get(a) is not None and ALIASES[a][1]]
        if multilabel_vw and p.get("fmt", "vw") == "vw":  # VW's label sets are 0-based
            p["label_offset"] = 1
            given.add("label_offset")
        elif any(p.get(a) is not None for a in _CLASS_ALIASES) and p.get("fmt", "vw") == "vw" and \
                _has_zero_label(p.get("inputs") or ()):
            err.write("[info] label 0 found -- labels are now considered 0-indexed.\n")
            p["label_offset"] = 1
            given.add("label_offset")
    if p.get("error") is not None:
        if p.get("ect") is None:
            raise ConfigError("--error is the error count of --ect")
        if p["error"] > 0:
            err.write(f"warning: --error {p['error']}: lomtree's --ect is the single-elimination filter tree "
                      f"(--error 0)\n")
    for opt, model in VW_MODELS.items():
        if p.get(opt) is not None and p.get("initial_model") is None:
            for name, v in model.items():
                if p.get(name) is None:
                    p[name] = v
    if p.get("probabilities") and p.get("scores"):
        raise ConfigError("--probabilities and --scores cannot be used together")
    if p.get("probabilities"):
        run["vw_output"] = "probabilities"
    elif p.get("scores"):
        run["vw_output"] = "scores"
    if p.get("raw_predictions"):
        if p.get("predictions") is not None or run.get("vw_output"):
            raise ConfigError("-r/--raw_predictions writes the scores of -p's examples: give one of them")
        p["predictions"] = p["raw_predictions"]
        run["vw_output"] = "scores"
    if p.get("top_k") is not None:
        run["top_k"] = int(p["top_k"])
    if p.get("holdout_after") is not None:
        run["holdout_after"] = int(p["holdout_after"])
    if p.get("noop"):
        run["learn"] = False
    return run
