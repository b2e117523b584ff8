"""What ``lomtree train`` and ``lomtree predict`` do with their parsed options, without click.

``cli.py`` (click) parses a command line into a dict of parameters and calls ``run_train`` /
``run_predict``; so does ``launch.main`` when ``argv.parse`` read the command line itself (the
common case: about 25-35 ms of every command is importing click and building its commands). Both
paths run the same code from here on, with the same messages and exit codes:

* every ``LomtreeError`` becomes one line ``error: ...`` on stderr and its exit code (1 bad data,
  2 bad usage or bad model file); ``OSError`` and ``MemoryError`` exit 1 the same way;
* a closed stdout ends the command quietly (exit 0);
* SIGINT/SIGTERM stop at an example boundary with a complete model (exit 130/143).

Nothing here imports click, numpy or numba at module level.
"""

from __future__ import annotations

import os
import sys

from .config import InputConfig, LearnerConfig, ReductionConfig
from .errors import ConfigError, LomtreeError
from .launch import say

#: train options a model fixes or records: when given on the command line next to ``-i MODEL``
#: they are checked against the model (``driver.train``'s ``explicit``)
EXPLICIT_TRAIN = ("bits", "hash_seed", "noconstant", "label_offset", "loss", "sgd", "quantile_tau", "power_t",
                  "max_internal_nodes", "swap_resistance", "leaf_labels", "candidates_up",
                  "cpt_alpha", "learning_rate", "decay_learning_rate")


def fail(msg: str, code: int):
    say(f"error: {msg}")
    sys.exit(code)


def quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def guarded(fn):
    """Run a command body: one-line errors, quiet closed pipes, signal exit codes."""
    from .driver import Interrupted

    try:
        return fn()
    except Interrupted as e:
        say(f"interrupted by signal {e.signum}; stopped at an example boundary")
        sys.exit(e.exit_code)
    except LomtreeError as e:
        fail(str(e), e.exit_code)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
    except MemoryError:
        fail("out of memory (try fewer --bits or a smaller -k)", 1)
    except OSError as e:
        fail(f"{getattr(e, 'filename', '') or ''}: {e.strerror or e}", 1)


PROGRESS_INTERVAL_RULE = "must be an integer >= 1 (additive) or a float > 1 (multiplicative)"


def progress_interval(value: str) -> float | int:
    """``-P``'s value: an int >= 1 (a table line every N examples) or a float > 1 (at counts
    growing by that factor); ValueError otherwise (the CLI reports ``PROGRESS_INTERVAL_RULE``)."""
    if value.strip().lstrip("+").isdigit():
        v = int(value)
        if v < 1:
            raise ValueError(PROGRESS_INTERVAL_RULE)
        return v
    v = float(value)
    if not v > 1.0:
        raise ValueError(PROGRESS_INTERVAL_RULE)
    return v


def run_predict(p: dict, start: float) -> None:
    """``lomtree predict`` with its parameters ``p`` (the names of cli.predict's arguments, ``-P``
    already read by ``progress_interval``); ``start``: when the process started
    (``driver.process_start_time``)."""
    from .driver import RunOptions, resolve_threads

    def body():
        from .driver import predict
        from .paths import check_outputs

        check_outputs([("-p", p["predictions"]), ("--report", p["report"])],
                      [("input", x) for x in p["inputs"]] + [("-i", p["model"])])
        flush = p["flush"]
        chunk_bytes = p["chunk_bytes"]
        opts = RunOptions(inputs=list(p["inputs"]), predictions=p["predictions"], quiet=p["quiet"],
                          progress_interval=p["progress_interval"],
                          progress_bar=p["progress_bar"], report=p["report"], flush=flush,
                          probabilities=p["probabilities"], top_k=p["top_k"] or 0,
                          chunk_bytes=(4096 if flush and chunk_bytes == 1 << 20 else chunk_bytes),
                          start_time=start, handle_signals=True, threads=resolve_threads(p["threads"]),
                          max_line_bytes=p["max_line_bytes"])
        predict(p["model"], opts, skip_invalid=p["skip_invalid"])

    guarded(body)


def test_only(p: dict, start: float) -> None:
    """``lomtree train -t -i MODEL ...`` (VW's -t): exactly ``lomtree predict -i MODEL ...``; the
    options that only training reads are refused rather than ignored."""
    if p["initial_model"] is None:
        raise ConfigError("-t/--testonly needs -i MODEL")
    if p["final_model"] is not None:
        raise ConfigError("-t/--testonly does not train: -f would write the model unchanged")
    q = {"inputs": p["inputs"], "model": p["initial_model"], "predictions": p["predictions"],
         "probabilities": False, "top_k": None, "flush": False, "threads": 0}
    for name in ("skip_invalid", "quiet", "progress_bar", "progress_interval", "report", "chunk_bytes",
                 "max_line_bytes"):
        q[name] = p[name]
    run_predict(q, start)


def run_train(p: dict, given: set, start: float, warn) -> None:
    """``lomtree train`` with its parameters ``p`` (as for ``run_predict``); ``given``:
    the names set on the command line (not defaults); ``warn(msg)`` prints a warning line."""
    from .driver import RunOptions

    def body():
        from .driver import train
        from .reductions import get_reduction_class

        from .paths import check_outputs

        from .vwopts import apply_vw_options, vw_input_fields

        apply_vw_options(p, given)
        if p.get("testonly"):
            return test_only(p, start)
        if p["passes"] < 1:
            raise ConfigError("--passes must be >= 1")
        cache_path = p["cache"]
        if cache_path == "" and p["final_model"]:
            cache_path = p["final_model"] + ".cache"
        check_outputs([("-f", p["final_model"]), ("-p", p["predictions"]), ("--report", p["report"]),
                       ("-c", cache_path)],
                      [("input", x) for x in p["inputs"]] + [("-i", p["initial_model"])])
        explicit = {n: p[n] for n in EXPLICIT_TRAIN if n in given}
        feats = vw_input_fields(p)
        explicit.update({n: v for n, v in feats.items() if n in given})
        if p["initial_model"] is not None:
            if "reduction" in given:
                explicit["reduction"] = p["reduction"]
            if p["k"] is not None:
                explicit["k"] = p["k"]
            if "fmt" in given:
                explicit["format"] = p["fmt"]
        icfg = InputConfig(format=p["fmt"], bits=p["bits"], hash_seed=p["hash_seed"], noconstant=p["noconstant"],
                           label_offset=p["label_offset"], skip_invalid=p["skip_invalid"],
                           max_line_bytes=p["max_line_bytes"], **feats)
        if p["initial_model"] is None:
            reduction = p["reduction"]
            cls = get_reduction_class(reduction)
            rcfg = ReductionConfig(name=reduction, k=p["k"], max_internal_nodes=p["max_internal_nodes"],
                                   swap_resistance=p["swap_resistance"], cpt_alpha=p["cpt_alpha"],
                                   leaf_labels=(getattr(cls, "default_leaf_labels", 0) if p["leaf_labels"] is None
                                                else p["leaf_labels"]),
                                   candidates_up=(getattr(cls, "default_candidates_up", 0)
                                                  if p["candidates_up"] is None else p["candidates_up"]),
                                   cpt_predict=p["cpt_predict"], cpt_random_insert=p["cpt_random_insert"],
                                   arity=p["arity"], beam=p["beam"], tree_buffer=p["tree_buffer"], path_weight=p["path_weight"], leaf_negatives=not p["no_leaf_negatives"],
                                   dim=p["dim"], depth=p["depth"], reassign_after=p["reassign_after"],
                                   seed=p["seed"])
            the_loss = p["loss"]
            if the_loss is None:
                the_loss = cls.default_loss
            power_t = getattr(cls, "default_power_t", 0.5) if p["power_t"] is None else p["power_t"]
            lcfg = LearnerConfig(learning_rate=p["learning_rate"], power_t=power_t, initial_t=p["initial_t"],
                                 loss=the_loss, quantile_tau=p["quantile_tau"], sgd=p["sgd"],
                                 decay_learning_rate=p["decay_learning_rate"])
        else:
            rcfg = None
            lcfg = None
        cache = p["cache"]
        opts = RunOptions(inputs=list(p["inputs"]), predictions=p["predictions"], passes=p["passes"], cache=cache,
                          use_cache=cache is not None, holdout_period=p["holdout_period"],
                          holdout_off=p["holdout_off"], early_terminate=p["early_terminate"], quiet=p["quiet"],
                          progress_interval=p["progress_interval"],
                          progress_bar=p["progress_bar"], report=p["report"], chunk_bytes=p["chunk_bytes"],
                          start_time=start, handle_signals=True)
        train(icfg, lcfg, rcfg, opts, initial_model=p["initial_model"], final_model=p["final_model"],
              explicit=explicit)
        if p.get("readable_model") or p.get("invert_hash"):
            from .readable import write_readable

            write_readable(p, icfg)

    guarded(body)
