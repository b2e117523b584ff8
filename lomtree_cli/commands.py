"""What ``lomtree train`` and ``lomtree predict`` do with their parsed options.

``cli.py`` (click) parses a command line into a dict of parameters and calls ``run_train`` /
``run_predict``, inside ``runtime.guarded`` (errors become one line and an exit status). Nothing
here imports click, numpy or numba at module level.
"""

from __future__ import annotations

import math
import os
import sys
import time

from .config import (DUAL_DEFAULTS, DUAL_MEMORY_MB, InputConfig, LearnerConfig, ReductionConfig, check_average,
                     check_regularization, check_solver)
from .errors import ConfigError
from .runtime import end_startup

#: train options a model fixes or records: when given on the command line next to ``-i MODEL``
#: they are checked against the model (``driver.train``'s ``explicit``), as is every reduction option
EXPLICIT_TRAIN = ("bits", "hash_seed", "noconstant", "label_offset", "loss", "sgd", "quantile_tau", "power_t",
                  "learning_rate", "decay_learning_rate", "l1", "l2", "average", "solver", "cost", "dual_memory",
                  "link", "min_prediction", "max_prediction")


PROGRESS_INTERVAL_RULE = "must be an integer >= 1 (additive) or a float > 0 (multiplicative)"


def progress_interval(value: str) -> float | int:
    """``-P``'s value: an int >= 1 (a table line every N examples) or a float > 1 (at counts
    growing by that factor; a float in (0, 1] is 1 + it, as VW reads it: ``-P 0.5`` is x1.5);
    ValueError otherwise (the CLI reports ``PROGRESS_INTERVAL_RULE``)."""
    if value.strip().lstrip("+").isdigit():
        v = int(value)
        if v < 1:
            raise ValueError(PROGRESS_INTERVAL_RULE)
        return v
    v = float(value)
    if not (v > 0.0 and math.isfinite(v)):
        raise ValueError(PROGRESS_INTERVAL_RULE)
    return v if v > 1.0 else 1.0 + v


def run_predict(p: dict, given: set, start: float) -> None:
    """``lomtree predict`` with its parameters ``p`` (the names of cli.predict's arguments, ``-P``
    already read by ``progress_interval``); ``given``: the names set on the command line;
    ``start``: when the process started (``runtime.process_start_time``)."""
    from .driver import RunOptions, predict, resolve_threads
    from .parsing import check_inputs
    from .paths import check_outputs

    models = list(dict.fromkeys(p["model"]))
    if len(models) > 1 and p["dask"] is not None:
        raise ConfigError("several -i (an ensemble) predict in one process: not with --dask")
    if p["daemon"]:
        if p["dask"] is not None:
            raise ConfigError("--daemon and --dask cannot be used together")
        return _run_daemon(dict(p, model=models), given)
    p = dict(p, model=models[0])  # Dask's one model
    if given & {"port", "socket_path", "host", "idle_timeout"}:
        raise ConfigError("--port, --socket, --host and --idle-timeout need --daemon")
    check_inputs(p["inputs"])
    preds = [("-p", p["predictions"])]
    if p["dask"] is not None:  # -p DIR/: a file per input, each checked as -p would be
        from .distributed import prediction_paths

        preds = [("-p", x) for x in dict.fromkeys(prediction_paths(p["predictions"], list(p["inputs"])).values())]
    check_outputs(preds + [("--report", p["report"])], [("input", x) for x in p["inputs"]] + [("-i", x) for x in models])
    flush = p["flush"]
    chunk_bytes = p["chunk_bytes"]
    opts = RunOptions(inputs=list(p["inputs"]), predictions=p["predictions"], quiet=p["quiet"],
                      progress_interval=p["progress_interval"],
                      progress_bar=p["progress_bar"], report=p["report"], flush=flush,
                      probabilities=p["probabilities"], top_k=p["top_k"] or 0, threshold=p.get("threshold"),
                      chunk_bytes=(4096 if flush and chunk_bytes == 1 << 20 else chunk_bytes),
                      start_time=start, handle_signals=True, threads=resolve_threads(p["threads"]),
                      max_line_bytes=p["max_line_bytes"], max_example_features=p["max_example_features"],
                      on_started=end_startup, vw_output=p.get("vw_output"))
    if p["dask"] is not None:
        if p["flush"]:
            raise ConfigError("--flush cannot be used with --dask (ranges are predicted at once)")
        from .distributed import predict as dask_predict

        return dask_predict(p["model"], opts, p["dask"], skip_invalid=p["skip_invalid"])
    predict(models, opts, skip_invalid=p["skip_invalid"])


#: predict options that have no meaning for a daemon (it answers on its connections)
_NOT_FOR_DAEMON = ("inputs", "predictions", "report", "flush", "progress_bar", "progress_interval", "threads",
                   "chunk_bytes")


def _run_daemon(p: dict, given: set) -> None:
    from .daemon import serve

    clash = [n for n in _NOT_FOR_DAEMON if n in given]
    if clash:
        raise ConfigError(f"--daemon answers on its connections: {', '.join(_option_name(n) for n in clash)} "
                          f"cannot be used with it")
    if p["port"] is not None and p["socket_path"] is not None:
        raise ConfigError("--port and --socket cannot be used together")
    serve(p["model"], port=p["port"], socket_path=p["socket_path"], host=p["host"],
          probabilities=p["probabilities"], top_k=p["top_k"] or 0, max_line_bytes=p["max_line_bytes"],
          max_example_features=p["max_example_features"], idle_timeout=p.get("idle_timeout", 60.0),
          quiet=p["quiet"], on_started=end_startup, threshold=p.get("threshold"))


def _option_name(name: str) -> str:
    return {"inputs": "INPUT", "predictions": "-p", "progress_bar": "--progress",
            "progress_interval": "-P"}.get(name, "--" + name.replace("_", "-"))


def test_only(p: dict, start: float, run: dict) -> None:
    """``lomtree train -t -i MODEL ...`` (VW's -t): exactly ``lomtree predict -i MODEL ...`` (with
    ``--daemon``: the daemon); ``run``: VW's output options (``vwopts.apply_vw_run_options``)."""
    if p["final_model"] is not None:
        raise ConfigError("-t/--testonly does not train: -f would write the model unchanged")
    q = {"inputs": p["inputs"], "model": (p["initial_model"],), "predictions": p["predictions"],
         "probabilities": False, "top_k": run.get("top_k"), "flush": False, "threads": 0,
         "daemon": bool(p.get("daemon")), "port": p.get("port"), "socket_path": None, "host": "127.0.0.1",
         "idle_timeout": 60.0, "dask": None, "threshold": None,
         "vw_output": run.get("vw_output") or ("labels" if run.get("top_k") else None)}
    for name in ("skip_invalid", "quiet", "progress_bar", "progress_interval", "report", "chunk_bytes",
                 "max_line_bytes", "max_example_features"):
        q[name] = p[name]
    if q["daemon"]:
        return _vw_daemon(p, q)
    run_predict(q, set(), start)


def _vw_daemon(p: dict, q: dict) -> None:
    """VW's ``-t -i MODEL --daemon [--port P] [--num_children N] [--foreground] [--pid_file F]
    [--port_file F]`` as ``lomtree predict -i MODEL --daemon``: one process answers every
    connection (a thread each; --num_children is accepted); without --foreground it detaches once
    it listens (the command returns then, as VW's does); the files are written when it listens."""
    from .daemon import serve

    if p["inputs"] or p["predictions"] is not None:
        raise ConfigError("--daemon answers on its connections: no INPUT, -d or -p")
    files = [(flag, p.get(name)) for flag, name in (("--pid_file", "pid_file"), ("--port_file", "port_file"))]
    from .paths import check_outputs

    check_outputs([(flag, path) for flag, path in files if path], [("-i", p["initial_model"])])
    notify = None
    if not p.get("foreground"):
        r, w = os.pipe()
        pid = os.fork()
        if pid:  # the caller: wait until the daemon listens (or fails), then return
            os.close(w)
            with os.fdopen(r, "rb") as f:
                ok = f.read(1) == b"1"
            if not ok:
                os.waitpid(pid, 0)
                raise ConfigError("the daemon did not start (see its message above)")
            return
        os.close(r)
        os.setsid()
        notify = w

    def ready(address, _stop):
        if p.get("pid_file"):
            with open(p["pid_file"], "w") as f:
                f.write(f"{os.getpid()}\n")
        if p.get("port_file"):
            with open(p["port_file"], "w") as f:
                f.write(f"{address[1]}\n")
        if notify is not None:  # detached: off the caller's terminal and pipes, then tell it
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            os.write(notify, b"1")
            os.close(notify)

    try:
        serve(q["model"][0], port=q["port"], host=q["host"], top_k=q["top_k"] or 0,
              max_line_bytes=q["max_line_bytes"], max_example_features=q["max_example_features"],
              quiet=q["quiet"], on_started=end_startup, ready=ready)
    finally:
        if notify is not None:
            os._exit(0)


def run_train(p: dict, given: set, start: float) -> None:
    """``lomtree train`` with its parameters ``p`` (as for ``run_predict``); ``given``:
    the names set on the command line (not defaults)."""
    if p["threads"] != 1 and "numpy" not in sys.modules:
        # the threads share the work (plt's k-means splits too); OpenBLAS's own threads on top of
        # them made the k-means slower (PyPI, 100,000 words: 5.4 s against 3.9 s; 14 s against
        # 4.6 s while another process ran)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .driver import RunOptions, resolve_threads, train
    from .parsing import check_inputs
    from .paths import check_outputs
    from .vwopts import apply_vw_options, apply_vw_run_options, vw_input_fields

    apply_vw_options(p, given)
    run = apply_vw_run_options(p, given, sys.stderr)
    if p.get("no_stdin") and not p["inputs"]:
        run["source"] = lambda _pass: ()
    else:
        check_inputs(p["inputs"])
    if p.get("daemon") and not (p.get("testonly") and p["initial_model"] is not None):
        raise ConfigError("--daemon needs -t -i MODEL (the daemon predicts; training is `lomtree train`)")
    for name in ("port", "num_children", "foreground", "pid_file", "port_file"):
        if p.get(name) not in (None, False) and not p.get("daemon"):
            raise ConfigError(f"--{name} needs --daemon")
    if p.get("testonly"):
        if p["initial_model"] is not None:
            return test_only(p, start, run)
        if p["final_model"] is not None:
            raise ConfigError("-t/--testonly does not train: -f would write the new model unchanged")
        run["learn"] = False  # VW's -t without -i: the new model's predictions, nothing learned
    if p["k"] is None and p["initial_model"] is None and p["fmt"] == "xmc":
        p["k"] = _xmc_labels(p["inputs"])
    readable_tmp = None
    if (p.get("readable_model") or p.get("invert_hash")) and not p["final_model"]:
        readable_tmp = p["final_model"] = _readable_model_path(p)
    _default_reduction(p, given)
    if p["bits"] is None:
        p["bits"] = default_bits(p)
    cache_path = p["cache"]
    if cache_path == "" and p["final_model"]:
        cache_path = p["final_model"] + ".cache"
    if p.get("kill_cache") and cache_path:
        _kill_cache(cache_path)
    check_outputs([("-f", p["final_model"]), ("-p", p["predictions"]), ("--report", p["report"]),
                   ("-c", cache_path)],
                  [("input", x) for x in p["inputs"]] + [("-i", p["initial_model"])])
    feats = vw_input_fields(p)
    icfg = InputConfig(format=p["fmt"], bits=p["bits"], hash_seed=p["hash_seed"], noconstant=p["noconstant"],
                       label_offset=p["label_offset"], skip_invalid=p["skip_invalid"],
                       max_line_bytes=p["max_line_bytes"], max_example_features=p["max_example_features"],
                       **feats)
    explicit = _explicit(p, given)
    if p["initial_model"] is not None:
        explicit.update({n: v for n, v in feats.items() if n in given})
    rcfg = lcfg = None
    trees = _check_trees(p, run)
    if p["dask"] is not None and p.get("average") is None:
        p["average"] = False  # Dask merges online weights only: not the label-set default --average
    if p["initial_model"] is None:
        rcfg, lcfg = new_model_configs(p)
    else:
        LearnerConfig(l1=p["l1"], l2=p["l2"])  # bad values fail before the model is read
    opts = RunOptions(inputs=list(p["inputs"]), predictions=p["predictions"], passes=p["passes"], cache=p["cache"],
                      use_cache=p["cache"] is not None, holdout_period=p["holdout_period"],
                      holdout_off=p["holdout_off"], early_terminate=p["early_terminate"], quiet=p["quiet"],
                      progress_interval=p["progress_interval"],
                      progress_bar=p["progress_bar"], report=p["report"], chunk_bytes=p["chunk_bytes"],
                      start_time=start, handle_signals=True, on_started=end_startup,
                      train_threads=resolve_threads(p["threads"]), compact=_compact(p),
                      shuffle_passes=p.get("shuffle_passes"), **run)
    if p["dask"] is not None:
        if opts.train_threads > 1:
            raise ConfigError("--threads cannot be used with --dask (each worker trains in one thread)")
        if (lcfg is not None and lcfg.solver == "dual") or p.get("solver") == "dual":
            raise ConfigError("--solver dual cannot be used with --dask (its dual variables live in one process)")
        if p["cache"] is not None:
            raise ConfigError("-c/--cache cannot be used with --dask (each worker reads its shard)")
        from .distributed import train as dask_train

        return dask_train(icfg, lcfg, rcfg, opts, p["dask"], p["sync_every"], initial_model=p["initial_model"],
                          final_model=p["final_model"], explicit=_explicit(p, given), shards=p["shards"] or 0,
                          sync_first=p["sync_first"], sync_growth=p["sync_growth"], plain_rate=p["plain_rate"])
    for name in ("sync_every", "sync_first", "sync_growth", "plain_rate", "shards"):
        if name in given:
            raise ConfigError(f"--{name.replace('_', '-')} needs --dask")
    if trees > 1:
        return _train_trees(p, icfg, lcfg, rcfg, opts, trees)
    try:
        train(icfg, lcfg, rcfg, opts, initial_model=p["initial_model"], final_model=p["final_model"],
              explicit=explicit)
        if p.get("readable_model") or p.get("invert_hash"):
            from .readable import write_readable

            write_readable(p["final_model"], list(p["inputs"]), p.get("readable_model"), p.get("invert_hash"))
    finally:
        if readable_tmp is not None:
            for path in (readable_tmp, readable_tmp + ".cache"):
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _check_trees(p: dict, run: dict) -> int:
    """``--trees N``'s N (1 when not given); ConfigError where N > 1 cannot be used."""
    n = p.get("trees", 1)
    if n == 1:
        return 1
    from .core import gives_probabilities
    from .model_io import MAX_TREES  # what a file of trees may hold

    if not 1 <= n <= MAX_TREES:
        raise ConfigError(f"--trees must be in 1..{MAX_TREES}, got {n}")
    for bad, why in ((p["initial_model"] is not None, "-i (it continues one model)"),
                     (p["dask"] is not None, "--dask"),
                     (not p["final_model"], "no -f (the trees are written together as one model file)"),
                     (p.get("readable_model") or p.get("invert_hash"), "--readable_model / --invert_hash"),
                     (p["predictions"] is not None or run.get("vw_output"),
                      "-p or VW's output options (each tree has its own progressive predictions)"),
                     (run.get("source") is not None, "--no_stdin")):
        if bad:
            raise ConfigError(f"--trees {n} cannot be used with {why}")
    if not gives_probabilities(p["reduction"]):  # predict averages the trees' probabilities
        raise ConfigError(f"--trees {n}: -r {p['reduction']} gives no probabilities, and the trees' "
                          f"ensemble averages them (oaa, plt, cpt, mtree, table give them)")
    return n


def _train_trees(p: dict, icfg, lcfg, rcfg, opts, n: int) -> None:
    """``train --trees N``: N models with ``--seed S, S+1, ...`` trained one after another on the
    same examples (those after the first read the first's example cache: -c's, else one of this
    run's beside -f, removed at the end) and written as one file of N predict-only trees
    (``model_io.save_trees``), which ``predict`` ranks as an ensemble. One model in memory at a
    time. Interrupted, the file holds the trees so far, the last as far as it got."""
    from dataclasses import replace

    from .driver import train
    from .errors import Interrupted
    from .model_io import save_trees
    from .output import finish
    from .paths import resolve_model_path

    directory, base = os.path.split(resolve_model_path(p["final_model"]))
    tmp = [os.path.join(directory, f".{base}.{os.getpid()}.tree{i}.writing") for i in range(1, n + 1)]
    own = []  # the example cache of this run's own, when -c is not given
    if opts.cache == "":  # -c without a path: MODEL.cache of -f, shared by the trees (not one per tree file)
        opts = replace(opts, cache=p["final_model"] + ".cache")
    elif opts.cache is None:  # the examples are parsed once (stdin can be read only once)
        own.append(os.path.join(directory, f".{base}.{os.getpid()}.cache.writing"))
        opts = replace(opts, cache=own[0], use_cache=True)
    reports = []
    start = opts.start_time or time.time()
    try:
        for i in range(n):
            seed = (rcfg.seed + i) % 2**64
            if not opts.quiet:
                sys.stderr.write(f"tree {i + 1} of {n} (--seed {seed})\n")
            try:
                # a tree's seconds are its own (the first's from the process start), the report's the run's
                reports.append(train(icfg, lcfg, replace(rcfg, seed=seed),
                                     replace(opts, report=None, stdin_cached=i > 0, start_time=None if i else start),
                                     final_model=tmp[i]))
            except Interrupted:
                if os.path.exists(tmp[i]):
                    save_trees(p["final_model"], tmp[:i + 1])
                raise
        save_trees(p["final_model"], tmp)
    finally:
        for path in tmp + own:
            try:
                os.unlink(path)
            except OSError:
                pass
    first = reports[0]
    report = {key: first[key] for key in ("examples", "passes", "reduction", "k", "bits")}
    report.update(trees=n, seconds=time.time() - start, tree_reports=reports)
    if opts.report:
        finish(sys.stderr, replace(opts, quiet=True), report)


def _readable_model_path(p: dict) -> str:
    """Where ``--readable_model``/``--invert_hash`` without ``-f`` keep the model while the text is
    written (beside the text file; removed at the end)."""
    out = p.get("readable_model") or p.get("invert_hash")
    d = os.path.dirname(os.path.abspath(out))
    return os.path.join(d, f".{os.path.basename(out)}.{os.getpid()}.model")


def _kill_cache(path: str) -> None:
    """VW's --kill_cache: an example cache at ``path`` is removed (written again by this run); a
    file there that is not a lomtree cache is left alone (the cache's own check then names it)."""
    from .cache import MAGIC

    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError:
        return
    if head == MAGIC:
        os.unlink(path)


def _default_reduction(p: dict, given: set) -> None:
    """VW's default learner: a new model given no -r, no class count (-k, --named-labels, an XMC
    header, a VW reduction option such as --oaa K) and no label sets or string labels is
    ``-r regression`` (``REAL_DEFAULT``); ``--binary`` (VW's) is ``-r binary``. With any of those
    lomtree's own default (``-r lomtree``, which needs -k) stays."""
    from .reductions.registry import REAL_DEFAULT, REGISTRY, VW_BINARY

    if p.get("vw_binary"):
        if "reduction" in given and p["reduction"] not in (VW_BINARY, REAL_DEFAULT):
            raise ConfigError(f"--binary means -r {VW_BINARY}; it conflicts with -r {p['reduction']}")
        p["reduction"] = VW_BINARY
        given.add("reduction")
        return
    if p.get("initial_model") is not None or "reduction" in given or p.get("k") is not None:
        return
    if p.get("multilabel") or p.get("string_labels") or p.get("named_labels") or p.get("fmt") != "vw":
        return
    p["reduction"] = REAL_DEFAULT
    assert REGISTRY[REAL_DEFAULT].real_labels


def _update_flags(p: dict) -> dict:
    """``LearnerConfig``'s update fields: VW's --adaptive/--normalized/--invariant, any of them
    named turning on exactly those (with --sgd or without), else all three (--sgd: none)."""
    named = {n: bool(p.get(n)) for n in ("adaptive", "normalized", "invariant")}
    if any(named.values()):
        return dict(named, sgd=False)
    return {"sgd": bool(p.get("sgd"))}


def _compact(p: dict):
    """``model_io.Compact`` of ``--predict_only_model`` (and ``--weight-threshold``), else None; a
    file of trees (``--trees N``) is always predict-only (nothing trains on it)."""
    if not p.get("predict_only_model") and p.get("trees", 1) <= 1:
        if p.get("weight_threshold") is not None:
            raise ConfigError("--weight-threshold needs --predict_only_model or --trees (a pruned model is a "
                              "predict-only one)")
        return None
    if not p["final_model"]:
        raise ConfigError("--predict_only_model needs -f MODEL (it says how the model is written)")
    from .model_io import Compact, check_weight_threshold

    return Compact(check_weight_threshold(p.get("weight_threshold") or 0.0))


def _xmc_labels(inputs) -> int | None:
    """The label count ``L`` of the first input file's XMC header (``-k`` when not given, as
    napkinXC and Omikuji take it); None unless every input is a regular file: standard input, a
    pipe (``<(xzcat f)``) or a device cannot be read twice, and the training needs the header.
    InputError when L is 0 or more labels than the inputs can name (``xmc_label_bound``)."""
    from .errors import InputError
    from .parsing import open_input, read_xmc_header, xmc_label_bound

    if not inputs or not all(x != "-" and os.path.isfile(x) for x in inputs):
        return None
    f, name = open_input(inputs[0])
    with f:
        labels = read_xmc_header(f, name)[2]
    if labels < 1:
        raise InputError(name, 1, "xmc_header", "the header says 0 labels (L of 'N F L'): give -k, or L >= 1")
    bound = xmc_label_bound(inputs)
    if labels > bound:
        raise InputError(name, 1, "xmc_header", f"the header says {labels} labels, more than the inputs can name "
                         f"(at most {bound}): give -k to train for that many")
    return labels


#: the rate decay across passes when the passes after the first are read shuffled: none. PyPI
#: names (a quarter, 10 shuffled passes): 53.68 / 34.16 / 23.50 P@1/3/5 against 50.36 / 32.27 /
#: 22.55 with the label-set pass default 0.6 (one pass 51.65; bench/notes/shuffled-passes.md)
SHUFFLED_PASS_DECAY = 1.0


def shuffled_passes(p: dict, rcfg: ReductionConfig) -> bool:
    """Whether the cached passes 2..N of this new model will be read shuffled (``driver``'s rule:
    ``--shuffle-passes``, by default with the shuffled first pass; never with holdout)."""
    if int(p.get("passes") or 1) < 2 or not p.get("holdout_off"):
        return False
    if p.get("shuffle_passes") is not None:
        return bool(p["shuffle_passes"])
    from .reductions.registry import REGISTRY

    takes = any(o.field == "shuffle_buffer" for o in REGISTRY[rcfg.name].options)
    return takes and bool(rcfg.shuffle_buffer)


#: hash bits when -b is not given (VW's), unless the reduction's registry entry says otherwise
DEFAULT_BITS = 18


#: the most bits ``default_bits`` gives a ``--dask`` run: the client averages the workers' tables,
#: which peaked at 4.6 GB at -b 24 on PyPI names with two workers (about four times that at 26)
DASK_DEFAULT_BITS_MAX = 24


def default_bits(p: dict) -> int:
    """``-b`` when not given: the reduction's registry default for the model (plt with label sets
    from k = 4,096: 26, as its leaf negatives touch far more weights than 2^18 or 2^24 slots
    hold; under ``--dask`` at most ``DASK_DEFAULT_BITS_MAX``), else VW's 18. A continued model
    (``-i``) keeps its own bits whatever this says."""
    from .reductions.registry import default

    name = p.get("reduction")
    if not isinstance(name, str):
        return DEFAULT_BITS
    ml = bool(p.get("multilabel")) or p.get("fmt") == "xmc"
    bits = int(default(name, "bits", DEFAULT_BITS, ml, int(p.get("passes") or 1), p.get("k")))
    return min(bits, DASK_DEFAULT_BITS_MAX) if p.get("dask") is not None else bits


def new_model_configs(p: dict) -> tuple[ReductionConfig, LearnerConfig]:
    """The reduction and learner configs of a new model: the options given, else the reduction's
    registry defaults, else the configs' own."""
    from dataclasses import fields

    from .reductions.registry import default, reduction_options

    name = p["reduction"]
    ml = bool(p.get("multilabel")) or p.get("fmt") == "xmc"

    def dflt(key, fallback):
        return default(name, key, fallback, ml, int(p.get("passes") or 1), p.get("k"))

    base = {f.name: f.default for f in fields(ReductionConfig)}
    own = {f: (p[f] if p[f] is not None else dflt(f, base[f])) for f in reduction_options()}
    rcfg = ReductionConfig(name=name, k=p["k"], seed=p["seed"], **own)
    rule = _update_flags(p)
    lr = p["learning_rate"]
    flagged = any(rule.get(n) for n in ("adaptive", "normalized", "invariant"))
    if lr is None and not p["sgd"] and not flagged:  # the reduction's default (--sgd keeps its own, 10)
        lr = dflt("learning_rate", None)
    decay = p.get("decay_learning_rate")
    if decay is None and shuffled_passes(p, rcfg):
        decay = SHUFFLED_PASS_DECAY
    solver = _solver_options(p, ml)
    lcfg = LearnerConfig(learning_rate=lr, initial_t=p["initial_t"],
                         power_t=p["power_t"] if p["power_t"] is not None else dflt("power_t", 0.5),
                         loss=p["loss"] if p["loss"] is not None else
                         DUAL_DEFAULTS[ml][0] if solver["solver"] == "dual" else dflt("loss", "squared"),
                         quantile_tau=p["quantile_tau"], **rule, link=p.get("link") or "identity",
                         min_prediction=p.get("min_prediction"), max_prediction=p.get("max_prediction"),
                         decay_learning_rate=decay if decay is not None else dflt("decay_learning_rate", 1.0),
                         l1=p["l1"], l2=p["l2"],
                         average=bool(p["average"] if p.get("average") is not None else
                                      False if solver["solver"] == "dual" else dflt("average", False)),
                         **solver)
    check_solver(name, lcfg)
    check_regularization(name, lcfg.l1, lcfg.l2)
    check_average(name, lcfg.average)
    return rcfg, lcfg


def _solver_options(p: dict, multilabel: bool) -> dict:
    """``LearnerConfig``'s solver fields from ``p`` (the default C of single labels or of label
    sets); ConfigError for the online solver's rate options given with ``--solver dual`` (it has no
    learning rate) and for the dual's without it."""
    solver = p.get("solver") or "online"
    if solver == "dual":
        for name, flag in (("learning_rate", "-l"), ("power_t", "--power-t"), ("initial_t", "--initial-t"),
                           ("decay_learning_rate", "--decay-learning-rate")):
            if p.get(name) is not None:
                raise ConfigError(f"{flag} does not apply to --solver dual (it has no learning rate; --cost sets "
                                  f"its regularisation)")
    else:
        for name, flag in (("cost", "--cost"), ("dual_memory", "--dual-memory")):
            if p.get(name) is not None:
                raise ConfigError(f"{flag} needs --solver dual")
    return {"solver": solver, "cost": DUAL_DEFAULTS[multilabel][1] if p.get("cost") is None else float(p["cost"]),
            "dual_memory": DUAL_MEMORY_MB if p.get("dual_memory") is None else float(p["dual_memory"])}


def _explicit(p: dict, given: set) -> dict:
    """The options given next to ``-i MODEL`` that the model fixes (checked against it) or that
    change it (learning rate)."""
    from .reductions.registry import reduction_options

    if p["initial_model"] is None:
        return {}
    explicit = {n: p[n] for n in EXPLICIT_TRAIN + tuple(reduction_options()) if n in given}
    if "reduction" in given:
        explicit["reduction"] = p["reduction"]
    if p["k"] is not None:
        explicit["k"] = p["k"]
    if "fmt" in given:
        explicit["format"] = p["fmt"]
    return explicit
