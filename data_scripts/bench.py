"""The benchmark suite: every reduction on every dataset, beside Vowpal Wabbit.

What it runs (all as real subprocesses, timed as whole commands, start-up included)
    * one **experiment** per ``configs/<dataset>_<reduction>.toml`` file: ``lomtree train ...
      --report R.json -f M`` then ``lomtree predict -i M TEST -p /dev/null --report R2.json
      --quiet``, once with the file's ``[run]`` settings (one pass) and once with ``[run]``
      updated by ``[tuned]`` (more passes, other learning rate, ...).  When the file names a VW
      counterpart (``vw = "oaa" | "log_multi" | "ect"``) and the ``vowpalwabbit`` package is
      installed, VW runs on the same files with the same bits, passes, learning rate and holdout
      (``python -m vowpalwabbit --<vw> k -b B -d TRAIN -f M`` then ``-t -i M -d TEST``);
    * a **synthetic sweep** (``configs/suite.toml``, ``[*.synthetic]``): per-example train and
      test time of every tree reduction and OAA for k = 10^2 .. 10^5 classes (OAA on fewer
      examples at large k);
    * the **foundation figures**: OAA train/predict throughput on Sector repeated 5
      times vs VW ``--oaa 105``, parse+hash throughput on the KJV next-word file vs VW ``--ect
      5001``, and the start-up time of ``lomtree predict`` on a 10-line input.

Multiple passes
    Ours: ``--passes N -c bench/runs/<run>.cache``; VW: ``-c -k --cache_file
    bench/runs/<run>.vwcache --passes N``.  Both keep the default holdout (every 10th example
    of each pass is held out and never trained on; early termination after 3 passes without a
    holdout improvement).  Ours keeps the best-holdout-pass model; VW keeps the last pass's
    model unless it stopped early (docs/ALGORITHMS.md §4.3).  Test error is always measured on the
    separate test file.

Measurements
    Wall time (``time.perf_counter`` around ``Popen`` .. ``os.wait4``) and peak resident memory
    (``ru_maxrss`` of the child from ``os.wait4``).  The numba cache is warmed first by a tiny
    train+predict per reduction.  Test error carries a 95 % **Wilson** score interval (the
    normal-approximation half-width is stored in the JSON too).

Outputs: ``bench/results.json`` (everything), ``bench/results.md`` (tables, machine, command)
and ``bench/*.png`` (``data_scripts.bench_report``; matplotlib is optional).

Command line::

    python -m data_scripts.bench [--quick] [--configs configs] [--out bench] [--only sector ...]
        [--no-vw] [--no-synthetic] [--no-foundation] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None

from .common import REPO_ROOT, log, run_timed as run_child

BENCH_DIR = REPO_ROOT / "bench"
DATA_DIR = BENCH_DIR / "data"
RUNS_DIR = BENCH_DIR / "runs"
SYNTH_DIR = RUNS_DIR / "synth"  # the sweep's generated streams not found in DATA_DIR
CONFIG_DIR = REPO_ROOT / "configs"

#: our reductions, in table order
REDUCTIONS = ("oaa", "lomtree", "filter", "rtree", "cpt", "table", "plt")
#: VW's counterpart of each of our reductions (None: VW has none)
VW_COUNTERPART = {"oaa": "oaa", "lomtree": "log_multi", "filter": "ect"}
#: option name in a config -> lomtree train flag
LOMTREE_FLAGS = {
    "bits": "-b", "learning_rate": "-l", "power_t": "--power-t", "initial_t": "--initial-t",
    "loss_function": "--loss-function", "passes": "--passes", "holdout_period": "--holdout-period",
    "early_terminate": "--early-terminate", "max_internal_nodes": "--max-internal-nodes",
    "swap_resistance": "--swap-resistance", "cpt_alpha": "--cpt-alpha", "seed": "--seed",
    "decay_learning_rate": "--decay-learning-rate", "holdout_off": "--holdout-off",
    "solver": "--solver", "cost": "--cost", "max_class_records": "--max-class-records",
}
#: options of the online solver's learning rate, left out of a run with ``solver = "dual"`` (it has none)
RATE_OPTIONS = ("learning_rate", "power_t", "initial_t", "decay_learning_rate")
#: option name in a config -> VW flag (options VW lacks, e.g. max_internal_nodes, are not passed)
VW_FLAGS = {
    "bits": "-b", "learning_rate": "-l", "power_t": "--power_t", "initial_t": "--initial_t",
    "loss_function": "--loss_function", "passes": "--passes", "holdout_period": "--holdout_period",
    "early_terminate": "--early_terminate", "decay_learning_rate": "--decay_learning_rate",
    "holdout_off": "--holdout_off",
}
#: options that are switches (true: the flag alone; false: left out)
SWITCHES = {"holdout_off"}
#: options that apply only to one reduction (ours)
REDUCTION_ONLY = {"max_internal_nodes": "lomtree", "swap_resistance": "lomtree", "max_class_records": "lomtree",
                  "cpt_alpha": "cpt"}
#: options of the run section that are not flags
META_KEYS = {"dataset", "reduction", "k", "vw", "vw_args", "extra_args", "paper_error", "enabled",
             "note", "format"}
#: a variant's option that is not a flag: ``ensemble = N`` trains N models (``--seed`` s, s + 1, ...,
#: s the variant's seed, 0 by default) and predicts with all of them (``lomtree predict -i ... -i ...``)
ENSEMBLE = "ensemble"

#: the LOMtree paper's tuned test errors (%) (Choromanska & Langford 2015, Table 3)
PAPER_ERRORS = {("sector", "lomtree"): 16.19, ("sector", "rtree"): 15.77,
                ("sector", "filter"): 17.70, ("sector", "oaa"): 9.17}

#: the benchmark datasets: files built by ``data_scripts.prepare_all``
DATASETS = {
    "sector": ("sector.train.vw", "sector.test.vw", 105),
    "letter": ("letter.train.vw", "letter.test.vw", 26),
    "pendigits": ("pendigits.train.vw", "pendigits.test.vw", 10),
    "kjv_book": ("kjv_book.train.vw", "kjv_book.test.vw", 66),
    "kjv_nextword": ("kjv_nextword.train.vw", "kjv_nextword.test.vw", 5001),
    "synth_k1000": ("synth_k1000.train.vw", "synth_k1000.test.vw", 1000),
}


# ---------------------------------------------------------------------------------------------
# configuration

def _load_toml(path: Path) -> dict:
    path = Path(path)
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if tomllib is None:  # pragma: no cover
        raise RuntimeError("reading .toml configs needs Python >= 3.11 (tomllib); use .json")
    with open(path, "rb") as fh:
        return tomllib.load(fh)


@dataclass
class Experiment:
    """One config file: a dataset, a reduction, and its settings per variant."""

    name: str
    dataset: str
    reduction: str
    k: int | None
    variants: dict[str, dict]  # "1pass" / "tuned" -> options (bits, passes, learning_rate, ...)
    vw: str | None = None
    vw_args: list[str] = field(default_factory=list)
    extra_args: list[str] = field(default_factory=list)
    paper_error: float | None = None
    enabled: bool = True
    path: str = ""


def load_experiment(path: str | os.PathLike) -> Experiment:
    """Read one experiment config (``.toml`` or ``.json``).

    ``[run]`` holds the dataset, the reduction, k and the one-pass options; ``[tuned]``
    overrides any of them for the tuned variant (absent: no tuned variant).  Unknown option
    names are an error (a typo must not silently fall back to a default).
    """
    path = Path(path)
    raw = _load_toml(path)
    if "run" not in raw:
        raise ValueError(f"{path}: no [run] section")
    run = dict(raw["run"])
    for key in ("dataset", "reduction"):
        if key not in run:
            raise ValueError(f"{path}: [run] needs {key!r}")
    if run["reduction"] not in REDUCTIONS:
        raise ValueError(f"{path}: unknown reduction {run['reduction']!r}; known: {', '.join(REDUCTIONS)}")
    tuned = dict(raw.get("tuned", {}))
    for section, opts in (("run", run), ("tuned", tuned)):
        unknown = set(opts) - META_KEYS - set(LOMTREE_FLAGS) - {ENSEMBLE}
        if unknown:
            raise ValueError(f"{path}: [{section}] unknown option(s) {sorted(unknown)}")
    # the experiment's own keys are [run]'s: in [tuned] they would be ignored, silently
    run_only = set(tuned) & (META_KEYS - {"paper_error", "note"})
    if run_only:
        raise ValueError(f"{path}: {sorted(run_only)} belong in [run], not [tuned]")
    base = {k: v for k, v in run.items() if k not in META_KEYS}
    base.setdefault("bits", 18)
    base.setdefault("passes", 1)
    variants = {"1pass": base}
    tuned_opts = {k: v for k, v in tuned.items() if k not in META_KEYS}
    if tuned_opts:
        variants["tuned"] = {**base, **tuned_opts}
    for opts in variants.values():
        if opts.get("solver") == "dual":
            for key in RATE_OPTIONS:
                opts.pop(key, None)
    vw = run.get("vw", VW_COUNTERPART.get(run["reduction"]))
    k = run.get("k", DATASETS.get(run["dataset"], (None, None, None))[2])
    paper = tuned.get("paper_error", run.get("paper_error", PAPER_ERRORS.get((run["dataset"], run["reduction"]))))
    return Experiment(
        name=path.stem, dataset=run["dataset"], reduction=run["reduction"], k=k, variants=variants,
        vw=vw or None, vw_args=list(run.get("vw_args", [])), extra_args=list(run.get("extra_args", [])),
        paper_error=paper, enabled=bool(run.get("enabled", True)), path=str(path))


def load_experiments(config_dir: str | os.PathLike = CONFIG_DIR, datasets=None) -> list[Experiment]:
    """Every ``<dataset>_<reduction>`` config in ``config_dir`` (not ``suite.toml``), sorted by
    dataset order then reduction order; ``datasets`` restricts the list."""
    exps = []
    for p in sorted(Path(config_dir).iterdir()):
        if p.suffix not in (".toml", ".json") or p.stem == "suite":
            continue
        e = load_experiment(p)
        if datasets is not None and e.dataset not in datasets:
            continue
        exps.append(e)
    order = list(DATASETS)
    exps.sort(key=lambda e: (order.index(e.dataset) if e.dataset in order else len(order), e.dataset,
                             REDUCTIONS.index(e.reduction)))
    return exps


def load_suite(config_dir: str | os.PathLike = CONFIG_DIR, quick: bool = False) -> dict:
    """``configs/suite.toml``'s ``[full]`` or ``[quick]`` table (datasets, synthetic sweep, ...)."""
    raw = _load_toml(Path(config_dir) / "suite.toml")
    return raw["quick" if quick else "full"]


# ---------------------------------------------------------------------------------------------
# command lines

def lomtree_exe() -> list[str]:
    """How to start the CLI: the ``lomtree`` script next to this Python, else ``-m``."""
    exe = Path(sys.executable).with_name("lomtree")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "lomtree_cli.launch"]


def vw_exe() -> list[str]:
    return [sys.executable, "-m", "vowpalwabbit"]


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _flag(flag: str, key: str, val) -> list[str]:
    """``[flag, value]``, or for a switch ``[flag]`` when true and nothing when false."""
    if key in SWITCHES:
        return [flag] if val else []
    return [flag, _fmt(val)]


def lomtree_train_cmd(reduction: str, k: int | None, opts: dict, train: str, model: str, report: str,
                      cache: str | None = None, extra=()) -> list[str]:
    """``lomtree train -r R -k K <options> TRAIN -f MODEL --report REPORT --quiet``."""
    cmd = lomtree_exe() + ["train", "-r", reduction]
    if k is not None:
        cmd += ["-k", str(k)]
    for key, val in opts.items():
        if key == ENSEMBLE or (key in REDUCTION_ONLY and REDUCTION_ONLY[key] != reduction):
            continue
        if key == "passes" and int(val) == 1:
            continue
        cmd += _flag(LOMTREE_FLAGS[key], key, val)
    if int(opts.get("passes", 1)) > 1:
        cmd += ["-c", cache or (model + ".cache")]
    cmd += list(extra) + [train, "-f", model, "--report", report, "--quiet"]
    return cmd


def lomtree_predict_cmd(model, test: str, report: str) -> list[str]:
    """``lomtree predict -i MODEL ...``; ``model``: a path, or a list of them (an ensemble)."""
    models = [model] if isinstance(model, str) else list(model)
    return lomtree_exe() + ["predict", *[a for m in models for a in ("-i", m)], test, "-p", "/dev/null",
                            "--report", report, "--quiet"]


def vw_train_cmd(vw_reduction: str, k: int, opts: dict, train: str, model: str, cache: str | None = None,
                 extra=()) -> list[str]:
    """VW with the same bits/passes/learning rate; multi-pass: ``-c -k --cache_file C --passes N``."""
    cmd = vw_exe() + [f"--{vw_reduction}", str(k)]
    for key, val in opts.items():
        if key not in VW_FLAGS or (key == "passes" and int(val) == 1):
            continue
        cmd += _flag(VW_FLAGS[key], key, val)
    if int(opts.get("passes", 1)) > 1:
        cmd += ["-c", "-k", "--cache_file", cache or (model + ".vwcache")]
    cmd += list(extra) + ["-d", train, "-f", model]
    return cmd


def vw_test_cmd(model: str, test: str, predictions: str | None = "/dev/null") -> list[str]:
    """VW's test command. It writes its predictions (``-p``; /dev/null by default) as
    ``lomtree_predict_cmd`` does ours, so both commands do the same work; ``predictions=None``:
    no ``-p``, VW only computes the loss (writing 25,000 predictions costs VW 50-60 ms, Letter x5)."""
    cmd = vw_exe() + ["-t", "-i", model, "-d", test]
    return cmd + ["-p", predictions] if predictions else cmd


# ---------------------------------------------------------------------------------------------
# running and parsing

@dataclass
class Timed:
    """One finished subprocess."""

    cmd: list[str]
    rc: int
    seconds: float
    maxrss_kb: int
    stderr: str
    cpu_seconds: float = 0.0
    compiled: bool = False
    recompiled: int = 0

    def as_dict(self) -> dict:
        # paths inside the repository are recorded relative to it: no machine's paths in the results
        root = str(REPO_ROOT) + os.sep
        cmd = " ".join(shlex.quote(c.replace(root, "")) for c in self.cmd)
        return {"cmd": cmd, "rc": self.rc,
                "seconds": round(self.seconds, 4), "cpu_seconds": round(self.cpu_seconds, 4), "peak_rss_mb": round(self.maxrss_kb / 1024, 1),
                "discarded_compiling_runs": self.recompiled}


#: numba's cache log (``NUMBA_DEBUG_CACHE=1``, on the child's stdout): a save means a compile
COMPILE_MARK = "[cache] data saved"


def compiled_during(stdout: str) -> bool:
    """True if a lomtree child run with ``NUMBA_DEBUG_CACHE=1`` compiled (saved) a kernel.

    ``lomtree_cli`` keys its numba cache on a hash of all kernel and reduction sources, so an
    edit anywhere there (other engineers work in the same tree) makes the next command compile
    everything again; such a run measures the compiler, not lomtree.

    >>> compiled_during("[cache] data loaded from 'x'"), compiled_during("[cache] data saved to 'x'")
    (False, True)
    """
    return COMPILE_MARK in stdout


def run_timed(cmd: list[str], timeout: float | None = None, retries: int = 3, env_extra: dict | None = None) -> Timed:
    """Run ``cmd`` (stdout discarded, stderr kept); wall time, CPU time and peak RSS of the child.

    lomtree commands run with ``NUMBA_DEBUG_CACHE=1``; one that compiled a kernel (see
    ``compiled_during``) is run again, up to ``retries`` times; ``Timed.recompiled`` counts the
    discarded runs.  (lomtree writes predictions to ``-p /dev/null``, never to stdout, here.)"""
    is_vw = cmd[:3] == vw_exe()
    discarded = 0
    while True:
        t = _run_timed_once(cmd, timeout, watch_numba=not is_vw, env_extra=env_extra)
        if not t.compiled or discarded >= retries or t.rc != 0:
            t.recompiled = discarded
            return t
        discarded += 1
        log(f"    (compiled during the run: running again) {' '.join(cmd[1:4])}")


def _run_timed_once(cmd: list[str], timeout: float | None = None, watch_numba: bool = False,
                    env_extra: dict | None = None) -> Timed:
    env = dict(env_extra or {})
    if watch_numba:
        env["NUMBA_DEBUG_CACHE"] = "1"
    t = run_child(cmd, env_extra=env, timeout=timeout)
    return Timed(cmd, t.rc, t.wall, t.maxrss_kb, t.stderr, cpu_seconds=t.cpu,
                 compiled=watch_numba and compiled_during(t.stdout))


def is_missing(t: Timed) -> bool:
    """The CLI's answer for a reduction whose module is not in this build (exit 2)."""
    return t.rc == 2 and "not available in this build" in t.stderr


_VW_NUM = r"([-+0-9.eE]+|n\.a\.|undefined)"


def parse_vw_output(text: str) -> dict:
    """The summary VW prints on stderr: examples, average loss (and whether it is holdout), passes.

    >>> parse_vw_output("number of examples = 10\\naverage loss = 0.25\\n")["average_loss"]
    0.25
    """
    out: dict = {"examples": None, "average_loss": None, "holdout": False, "passes": 1,
                 "total_features": None, "weighted_examples": None}
    m = re.search(r"number of examples(?: per pass)? = (\d+)", text)
    if m:
        out["examples"] = int(m.group(1))
    m = re.search(r"passes used = (\d+)", text)
    if m:
        out["passes"] = int(m.group(1))
    m = re.search(r"weighted example sum = " + _VW_NUM, text)
    if m:
        out["weighted_examples"] = _num(m.group(1))
    m = re.search(r"average loss = " + _VW_NUM + r"( h)?", text)
    if m:
        out["average_loss"] = _num(m.group(1))
        out["holdout"] = bool(m.group(2))
    m = re.search(r"total feature number = (\d+)", text)
    if m:
        out["total_features"] = int(m.group(1))
    return out


def _num(s: str):
    try:
        return float(s)
    except ValueError:
        return None


def wilson_interval(errors: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion ``errors / n`` (as fractions).

    >>> [round(x, 4) for x in wilson_interval(10, 100)]
    [0.0552, 0.1744]
    """
    if n <= 0:
        return (float("nan"), float("nan"))
    p = errors / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


def normal_halfwidth(errors: int, n: int, z: float = 1.96) -> float:
    """Half-width of the normal-approximation interval ``z * sqrt(p (1-p) / n)``."""
    if n <= 0:
        return float("nan")
    p = errors / n
    return z * math.sqrt(p * (1 - p) / n)


def error_record(error_rate: float | None, n: int | None) -> dict:
    """Test error with its interval: ``{error, errors, n, ci_low, ci_high, normal_half}``."""
    if error_rate is None or not n:
        return {"error": None, "errors": None, "n": n, "ci_low": None, "ci_high": None, "normal_half": None}
    errors = int(round(error_rate * n))
    lo, hi = wilson_interval(errors, n)
    return {"error": error_rate, "errors": errors, "n": n, "ci_low": lo, "ci_high": hi,
            "normal_half": normal_halfwidth(errors, n)}


def _read_json(path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _test_error_from_report(rep: dict) -> float | None:
    """0/1 test error from a ``lomtree predict`` report (CPT reports squared loss as
    ``average_loss`` and 0/1 loss as ``average_zero_one_loss``)."""
    if rep is None:
        return None
    if "average_zero_one_loss" in rep:
        return rep["average_zero_one_loss"]
    return rep.get("average_loss")


def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _tail(text: str, n: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def _cleanup(*paths):
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# one train + test

def run_ours(run_id: str, reduction: str, k: int | None, opts: dict, train: str, test: str,
             extra=(), keep_model: bool = False, timeout: float | None = None) -> dict:
    """``lomtree train`` then ``lomtree predict``; a result record (status ok/missing/failed)."""
    members = int(opts.get(ENSEMBLE, 1))
    if members > 1:
        return _run_ensemble(run_id, reduction, k, opts, train, test, extra, members, timeout)
    model, rtrain, rtest = (str(RUNS_DIR / f"{run_id}.{s}") for s in ("model", "train.json", "test.json"))
    cache = str(RUNS_DIR / f"{run_id}.cache")
    _cleanup(model, rtrain, rtest, cache)
    rec: dict = {"id": run_id, "system": "lomtree", "reduction": reduction, "k": k, "options": dict(opts),
                 "loadavg_1min": _load1()}
    t = run_timed(lomtree_train_cmd(reduction, k, opts, train, model, rtrain, cache, extra), timeout)
    rec["train"] = t.as_dict()
    if is_missing(t):
        rec.update(status="missing", message=_tail(t.stderr))
        return rec
    if t.rc != 0:
        rec.update(status="failed", message=f"train exit {t.rc}: {_tail(t.stderr)}")
        return rec
    rep = _read_json(rtrain) or {}
    rec["train"]["report"] = rep
    rec["train"]["examples"] = rep.get("examples")
    rec["passes_used"] = rep.get("passes", opts.get("passes", 1))
    rec["holdout_loss"] = rep.get("holdout_loss")
    _test(rec, model, test, rtest, timeout)
    if not keep_model:
        _cleanup(model, cache)
    return rec


def _test(rec: dict, model, test: str, rtest: str, timeout: float | None) -> None:
    """``lomtree predict`` of ``model`` (a path or a list: an ensemble) on ``test`` into ``rec``:
    its timing, report and test error, status ok or failed."""
    p = run_timed(lomtree_predict_cmd(model, test, rtest), timeout)
    rec["test"] = p.as_dict()
    if p.rc != 0:
        rec.update(status="failed", message=f"predict exit {p.rc}: {_tail(p.stderr)}")
        return
    prep = _read_json(rtest) or {}
    rec["test"]["report"] = prep
    n = prep.get("examples")
    rec["test"]["examples"] = n
    rec.update(error_record(_test_error_from_report(prep), n))
    rec["status"] = "ok"


def _run_ensemble(run_id: str, reduction: str, k: int | None, opts: dict, train: str, test: str, extra,
                  members: int, timeout: float | None) -> dict:
    """``run_ours`` of an ensemble: ``members`` models trained one after another (seeds s, s + 1,
    ...), one ``lomtree predict`` with all of them. The training record sums the members' seconds
    (their peak RSS: the largest); its report is the first member's."""
    seed = int(opts.get("seed", 0))
    rec: dict = {"id": run_id, "system": "lomtree", "reduction": reduction, "k": k, "options": dict(opts),
                 "loadavg_1min": _load1()}
    models, parts = [], []
    for i in range(members):
        model, rtrain, cache = (str(RUNS_DIR / f"{run_id}.m{i}.{s}") for s in ("model", "train.json", "cache"))
        _cleanup(model, rtrain, cache)
        member = {key: v for key, v in opts.items() if key != ENSEMBLE}
        member["seed"] = seed + i
        t = run_timed(lomtree_train_cmd(reduction, k, member, train, model, rtrain, cache, extra), timeout)
        parts.append(t.as_dict())
        if t.rc != 0:
            rec.update(status="missing" if is_missing(t) else "failed", train=parts[-1],
                       message=f"train exit {t.rc}: {_tail(t.stderr)}")
            return rec
        if i == 0:
            rep = _read_json(rtrain) or {}
        models.append(model)
        _cleanup(cache)
    rec["train"] = {"cmd": " ; ".join(d["cmd"] for d in parts), "rc": 0,
                    "seconds": round(sum(d["seconds"] for d in parts), 4),
                    "cpu_seconds": round(sum(d["cpu_seconds"] for d in parts), 4),
                    "peak_rss_mb": max(d["peak_rss_mb"] for d in parts),
                    "discarded_compiling_runs": sum(d["discarded_compiling_runs"] for d in parts),
                    "members": members, "report": rep, "examples": rep.get("examples")}
    rec["passes_used"] = rep.get("passes", opts.get("passes", 1))
    rec["holdout_loss"] = rep.get("holdout_loss")
    rtest = str(RUNS_DIR / f"{run_id}.test.json")
    _cleanup(rtest)
    _test(rec, models, test, rtest, timeout)
    _cleanup(*models)
    return rec


def run_vw(run_id: str, vw_reduction: str, k: int, opts: dict, train: str, test: str, extra=(),
           timeout: float | None = None) -> dict:
    """VW train then ``-t`` test on the same files; a result record."""
    model = str(RUNS_DIR / f"{run_id}.vwmodel")
    cache = str(RUNS_DIR / f"{run_id}.vwcache")
    _cleanup(model, cache)
    rec: dict = {"id": run_id, "system": "vw", "reduction": vw_reduction, "k": k,
                 "options": {key: v for key, v in opts.items() if key in VW_FLAGS}, "loadavg_1min": _load1()}
    t = run_timed(vw_train_cmd(vw_reduction, k, opts, train, model, cache, extra), timeout)
    rec["train"] = t.as_dict()
    if t.rc != 0:
        rec.update(status="failed", message=f"vw train exit {t.rc}: {_tail(t.stderr)}")
        return rec
    summ = parse_vw_output(t.stderr)
    rec["train"]["examples"] = summ["examples"] * summ["passes"] if summ["examples"] else None
    rec["train"]["summary"] = summ
    rec["passes_used"] = summ["passes"]
    rec["holdout_loss"] = summ["average_loss"] if summ["holdout"] else None
    p = run_timed(vw_test_cmd(model, test), timeout)
    rec["test"] = p.as_dict()
    if p.rc != 0:
        rec.update(status="failed", message=f"vw test exit {p.rc}: {_tail(p.stderr)}")
        return rec
    ts = parse_vw_output(p.stderr)
    rec["test"]["examples"] = ts["examples"]
    rec["test"]["summary"] = ts
    rec.update(error_record(ts["average_loss"], ts["examples"]))
    rec["status"] = "ok"
    _cleanup(model, cache)
    return rec


def have_vw() -> bool:
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return False
    return True


def vw_version() -> str | None:
    if not have_vw():
        return None
    try:
        out = subprocess.run(vw_exe() + ["--version"], capture_output=True, text=True, timeout=60).stdout
        return out.split()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------------------------------------
# helpers for files

def head_file(src: Path, n: int, dst: Path) -> Path:
    """The first ``n`` lines of ``src`` in ``dst`` (rebuilt when missing or older than ``src``)."""
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime:
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(dst.suffix + ".writing")
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        for i, line in enumerate(fi):
            if i >= n:
                break
            fo.write(line)
    os.replace(tmp, dst)
    return dst


def repeat_file(src: Path, times: int, dst: Path) -> Path:
    """``src`` concatenated ``times`` times into ``dst``."""
    if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime and \
            dst.stat().st_size == times * src.stat().st_size:
        return dst
    data = src.read_bytes()
    tmp = dst.with_suffix(dst.suffix + ".writing")
    with open(tmp, "wb") as fo:
        for _ in range(times):
            fo.write(data)
    os.replace(tmp, dst)
    return dst


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))


def machine_info() -> dict:
    """nproc, CPU model, memory, OS, Python and package versions."""
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    info = {"nproc": os.cpu_count(), "cpu": cpu or platform.processor(), "memory_gb": mem_gb,
            "os": platform.platform(), "python": platform.python_version(), "loadavg_at_start": load}
    for mod in ("numpy", "numba"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    info["vowpalwabbit"] = vw_version()
    # whether lomtree's commands run on the ahead-of-time kernels (``make aot``) or numba's JIT
    chk = subprocess.run([sys.executable, "-m", "lomtree_cli.aot", "--check"], capture_output=True)
    info["kernels"] = "ahead-of-time module" if chk.returncode == 0 else "numba JIT (cache)"
    return info


# ---------------------------------------------------------------------------------------------
# the parts of the suite

def warm_numba(reductions=REDUCTIONS) -> dict:
    """One tiny train + predict per reduction, so that no timed run compiles (also finds which
    reductions exist in this build: ``{reduction: "ok" | "missing" | "failed: ..."}``)."""
    tiny = RUNS_DIR / "warm.vw"
    tiny.write_text("".join(f"{1 + i % 3} | a:{i % 5} b c{i}\n" for i in range(20)))
    status = {}
    for r in reductions:
        t0 = time.perf_counter()
        rec = run_ours(f"warm_{r}", r, 3, {"bits": 18, "passes": 1}, str(tiny), str(tiny))
        # one multi-pass run warms the example-cache kernels too (they do not depend on the reduction)
        if rec["status"] == "ok" and not any(s == "ok" for s in status.values()):
            run_timed(lomtree_train_cmd(r, 3, {"bits": 18, "passes": 2}, str(tiny), str(RUNS_DIR / "warm2.model"),
                                        str(RUNS_DIR / "warm2.json"), str(RUNS_DIR / "warm2.cache")))
            _cleanup(RUNS_DIR / "warm2.model", RUNS_DIR / "warm2.json", RUNS_DIR / "warm2.cache")
        status[r] = rec["status"] if rec["status"] != "failed" else "failed: " + rec.get("message", "")
        log(f"  warm {r:8s} {status[r][:60]} ({time.perf_counter() - t0:.1f} s)")
    return status


def run_experiments(exps: list[Experiment], suite: dict, use_vw: bool, available: dict,
                    results: list, save) -> None:
    """Every experiment's variants, ours then VW's counterpart; appends to ``results``."""
    max_passes = suite.get("max_passes")
    variants = suite.get("variants", ["1pass", "tuned"])
    vw_done = set()
    for e in exps:
        if not e.enabled:
            continue
        if e.dataset not in DATASETS:
            log(f"skip {e.name}: unknown dataset {e.dataset}")
            continue
        tr, te, _ = DATASETS[e.dataset]
        train, test = DATA_DIR / tr, DATA_DIR / te
        if not train.exists() or not test.exists():
            log(f"skip {e.name}: {train} missing (run prepare_all)")
            continue
        for var in variants:
            if var not in e.variants:
                continue
            opts = dict(e.variants[var])
            if max_passes and int(opts.get("passes", 1)) > max_passes:
                opts["passes"] = max_passes
            if var == "tuned" and opts == e.variants["1pass"]:
                continue
            base = {"dataset": e.dataset, "variant": var, "config": e.path, "paper_error": e.paper_error}
            rid = f"{e.dataset}_{e.reduction}_{var}"
            if str(available.get(e.reduction, "ok")) == "missing":
                rec = {"id": rid, "system": "lomtree", "reduction": e.reduction, "k": e.k, "options": opts,
                       "status": "missing", "message": "reduction not available in this build"}
            else:
                rec = run_ours(rid, e.reduction, e.k, opts, str(train), str(test), e.extra_args)
            rec.update(base)
            results.append(rec)
            log(_line(rec))
            save()
            if use_vw and e.vw:
                key = (e.dataset, e.vw, var, json.dumps({k: v for k, v in opts.items() if k in VW_FLAGS},
                                                       sort_keys=True))
                if key in vw_done:
                    continue
                vw_done.add(key)
                vrec = run_vw(f"{e.dataset}_vw_{e.vw}_{var}", e.vw, e.k, opts, str(train), str(test), e.vw_args)
                vrec.update(base, paper_error=None, counterpart_of=e.reduction)
                results.append(vrec)
                log(_line(vrec))
                save()


def _line(rec: dict) -> str:
    name = f"{rec.get('dataset', '')} {rec['system']}:{rec['reduction']} {rec.get('variant', '')}"
    if rec["status"] != "ok":
        return f"  {name:40s} {rec['status']} {rec.get('message', '')[:100]}"
    return (f"  {name:40s} err {100 * rec['error']:6.2f}%  train {rec['train']['seconds']:7.2f} s  "
            f"test {rec['test']['seconds']:6.2f} s  peak {rec['train']['peak_rss_mb']:.0f} MB")



# ---------------------------------------------------------------------------------------------
# accuracy anchors: napkinXC and fastText (data_scripts/bench_anchors.py)

def tuned_passes(exps: list[Experiment], reduction: str = "plt") -> dict[str, int]:
    """``{dataset: passes of the tuned run of reduction}`` (fastText's tuned epochs match them)."""
    out = {}
    for e in exps:
        if e.reduction == reduction and "tuned" in e.variants:
            out[e.dataset] = int(e.variants["tuned"].get("passes", 1))
    return out


def anchor_plan(cfg: dict, datasets, tuned: dict[str, int]) -> list[dict]:
    """The anchor runs of the suite's ``[*.anchors]`` table, in order: one dict per run with
    ``dataset, anchor, variant, epochs`` and ``skip`` (a reason, or None).

    napkinXC (batch) runs once per dataset (variant ``1pass``); fastText runs one epoch
    (``1pass``) and, when the dataset has a tuned ``-r plt`` run, that many epochs (``tuned``).
    ``cfg["skip"]`` maps ``"dataset"``, ``"dataset:anchor"`` or ``"dataset:anchor:variant"``
    to the reason the run is left out."""
    skip = cfg.get("skip", {})
    plan = []
    for ds in datasets:
        if ds not in cfg.get("datasets", []):
            continue
        for anchor in cfg.get("anchors", []):
            variants = [("1pass", 1)]
            if anchor.startswith("fasttext") and tuned.get(ds, 1) > 1:
                variants.append(("tuned", tuned[ds]))
            for var, epochs in variants:
                why = skip.get(f"{ds}:{anchor}:{var}", skip.get(f"{ds}:{anchor}", skip.get(ds)))
                plan.append({"dataset": ds, "anchor": anchor, "variant": var, "epochs": epochs, "skip": why})
    return plan


def run_anchor(step: dict, bits: int = 24, timeout: float | None = None, runner=None) -> dict:
    """One anchor fit + test (subprocesses, timed by ``run_timed``); a result record with
    ``status`` ok / not installed / skipped / failed.  ``runner`` replaces ``run_timed`` (tests)."""
    from . import bench_anchors as ba

    runner = runner or run_timed
    ds, anchor, var = step["dataset"], step["anchor"], step["variant"]
    pkg = ba.package_of(anchor)
    tr, te, k = DATASETS[ds]
    rid = f"{ds}_{anchor}_{var}"
    opts = ba.napkin_kwargs(anchor) if pkg == "napkinxc" else ba.fasttext_kwargs(anchor, step["epochs"])
    if pkg == "napkinxc":
        opts["bits"] = bits
    rec: dict = {"id": rid, "system": pkg, "reduction": anchor, "anchor": anchor, "k": k, "dataset": ds,
                 "variant": var, "options": opts, "loadavg_1min": _load1()}
    if step.get("skip"):
        return {**rec, "status": "skipped", "message": str(step["skip"])}
    missing = ba.missing_packages(anchor)
    if missing:
        return {**rec, "status": "not installed",
                "message": f"{', '.join(missing)} not installed (pip install -e '.[bench]')"}
    train, test = DATA_DIR / tr, DATA_DIR / te
    if pkg == "fasttext":
        train = ba.fasttext_file(train, RUNS_DIR / "fasttext" / f"{ds}.train.txt")
        test = ba.fasttext_file(test, RUNS_DIR / "fasttext" / f"{ds}.test.txt")
    model = str(RUNS_DIR / (rid + (".napkinxc" if pkg == "napkinxc" else ".bin")))
    rfit, rtest = str(RUNS_DIR / f"{rid}.fit.json"), str(RUNS_DIR / f"{rid}.test.json")
    _rm_model(model)
    _cleanup(rfit, rtest)
    t = runner(ba.fit_cmd(anchor, str(train), model, rfit, bits, step["epochs"]), timeout)
    rec["train"] = t.as_dict()
    if t.rc != 0:
        _rm_model(model)
        return {**rec, "status": "failed", "message": f"fit exit {t.rc}: {_tail(t.stderr)}"}
    rec["train"]["report"] = _read_json(rfit) or {}
    p = runner(ba.test_cmd(anchor, str(test), model, rtest, bits), timeout)
    rec["test"] = p.as_dict()
    _rm_model(model)
    if p.rc != 0:
        return {**rec, "status": "failed", "message": f"test exit {p.rc}: {_tail(p.stderr)}"}
    rep = _read_json(rtest) or {}
    rec["test"]["report"] = rep
    n = rep.get("examples")
    rec["train"]["examples"] = rec["train"]["report"].get("examples")
    rec["test"]["examples"] = n
    rec.update(error_record(rep["errors"] / n if n else None, n))
    rec["status"] = "ok"
    return rec


def _rm_model(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        _cleanup(path)


def run_anchors(plan: list[dict], cfg: dict, results: list, save) -> None:
    """Every step of ``anchor_plan``; appends to ``results``."""
    for step in plan:
        rec = run_anchor(step, int(cfg.get("bits", 24)), cfg.get("timeout"))
        results.append(rec)
        log(_line(rec))
        save()


def synthetic_files(k: int, n: int, test_n: int, seed: int = 0) -> tuple[Path, Path]:
    """The sweep's stream with ``k`` classes.

    ``bench/data`` (often a link to a shared, read-only copy) is used as it is when it holds the
    stream with these parameters (``synth_k<K>.params.json``); otherwise the stream is built with
    ``prepare_all``'s rules into ``bench/runs/synth`` (cached there), never into ``bench/data``."""
    from . import prepare_all
    name = f"synth_k{k}"
    files = DATA_DIR / f"{name}.train.vw", DATA_DIR / f"{name}.test.vw"
    params = _read_json(DATA_DIR / f"{name}.params.json") or {}
    if all(f.exists() for f in files) and (params.get("k"), params.get("n"), params.get("test_n"),
                                           params.get("seed")) == (k, n, test_n, seed):
        return files
    out = SYNTH_DIR
    prepare_all.prepare_all(out_dir=out, only=[name], synthetic_k=[k], synthetic_n=n,
                            synthetic_test_n=test_n, synthetic_seed=seed, out=sys.stderr)
    return out / f"{name}.train.vw", out / f"{name}.test.vw"


def run_synthetic(syn: dict, available: dict, results: list, save) -> None:
    """Per-example train/test time vs k.  Each (k, reduction) also runs on ``fixed_lines``
    lines; ``(t(n) - t(fixed)) / (n - fixed)`` is the per-example time without start-up."""
    ks = syn["k"]
    n, test_n = int(syn["n"]), int(syn["test_n"])
    bits = int(syn.get("bits", 22))
    oaa_budget = float(syn.get("oaa_budget", 2e7))  # examples x classes per OAA run
    fixed = int(syn.get("fixed_lines", 10))
    for k in ks:
        train, test = synthetic_files(int(k), n, test_n, int(syn.get("seed", 0)))
        for r in syn.get("reductions", ["oaa", "lomtree", "filter", "rtree", "cpt"]):
            rid = f"synth_k{k}_{r}"
            if str(available.get(r, "ok")) == "missing":
                rec = {"id": rid, "system": "lomtree", "reduction": r, "k": k, "status": "missing",
                       "message": "reduction not available in this build"}
            else:
                ntr = min(n, int(syn.get("train_lines", n)))
                rep = max(1, int(syn.get("repeat", 1)))
                nte = ntr
                if r == "oaa":
                    ntr = max(int(syn.get("oaa_min", 200)), min(ntr, int(oaa_budget / k)))
                    # OAA predicts ~20x faster than it trains: at least oaa_predict_min lines, so
                    # that start-up jitter (tens of ms) stays small against the timed work
                    nte = max(ntr, min(nte, int(syn.get("oaa_predict_min", 0))))
                    rep = 1
                trf = train if ntr >= n else head_file(train, ntr, RUNS_DIR / f"synth_k{k}.train.head{ntr}.vw")
                tef = train if nte >= n else head_file(train, nte, RUNS_DIR / f"synth_k{k}.train.head{nte}.vw")
                if rep > 1:  # a longer input, so that the work, not start-up jitter, dominates the CPU time
                    trf = tef = repeat_file(trf, rep, RUNS_DIR / f"{trf.stem}.x{rep}.vw")
                opts = {"bits": bits}
                # prediction is timed on the training lines (a 10x larger input than the test file,
                # so that the per-example cost, not start-up noise, dominates); the error column of
                # the sweep is therefore training-set error and is not reported
                rec = run_ours(rid, r, int(k), opts, str(trf), str(tef))
                if rec["status"] == "ok":
                    small_tr = head_file(train, fixed, RUNS_DIR / f"synth_k{k}.train.head{fixed}.vw")
                    smalls = [run_ours(rid + "_fixed", r, int(k), opts, str(small_tr), str(small_tr))
                              for _ in range(int(syn.get("fixed_repeats", 2)))]
                    smalls = [x for x in smalls if x["status"] == "ok"]
                    if smalls:  # the fastest start-up seen (the least disturbed by other load)
                        rec["fixed"] = {"lines": fixed,
                                        "train_cpu_seconds": min(x["train"]["cpu_seconds"] for x in smalls),
                                        "test_cpu_seconds": min(x["test"]["cpu_seconds"] for x in smalls),
                                        "train_seconds": min(x["train"]["seconds"] for x in smalls),
                                        "test_seconds": min(x["test"]["seconds"] for x in smalls)}
                    rec.update(per_example_times(rec))
            rec.update(dataset=f"synth_k{k}", variant="sweep", sweep=True)
            results.append(rec)
            log(_line(rec) + (f"  train {rec.get('train_us_per_ex', 0):.1f} us/ex, test "
                              f"{rec.get('test_us_per_ex', 0):.1f} us/ex" if rec["status"] == "ok" else ""))
            save()


def per_example_times(rec: dict) -> dict:
    """Per-example µs of a sweep run.

    ``<part>_us_per_ex_raw``: whole-command wall time / examples.  ``<part>_us_per_ex``: CPU
    time (user + sys of the child, robust to other load on a shared machine) with start-up
    removed: ``(cpu(n) - cpu(fixed)) / (n - fixed)`` when the ``fixed``-line run is known, else
    ``cpu(n) / n``.  ``part`` is ``train`` or ``test``.
    """
    out = {}
    fx = rec.get("fixed")
    for part in ("train", "test"):
        n = rec[part].get("examples") or 0
        if not n:
            continue
        out[f"{part}_us_per_ex_raw"] = 1e6 * rec[part]["seconds"] / n
        cpu = rec[part].get("cpu_seconds", rec[part]["seconds"])
        val = 1e6 * cpu / n
        if fx and n > fx["lines"]:
            d = cpu - fx.get(f"{part}_cpu_seconds", fx.get(f"{part}_seconds"))
            if d > 0:
                val = 1e6 * d / (n - fx["lines"])
        out[f"{part}_us_per_ex"] = val
    return out


def run_foundation(fnd: dict, use_vw: bool, available: dict) -> list[dict]:
    """The foundation figures: OAA throughput on Sector x5, parse+hash rate on KJV next-word, start-up."""
    rows = []
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    bits = int(fnd.get("bits", 24))
    # (a) OAA train and predict on Sector x N
    times = int(fnd.get("sector_repeat", 5))
    src = DATA_DIR / "sector.train.vw"
    if src.exists():
        big = repeat_file(src, times, RUNS_DIR / f"sector.train.x{times}.vw")
        n = count_lines(big)
        m, rep, prep = (str(RUNS_DIR / f"fnd_oaa.{s}") for s in ("model", "train.json", "test.json"))
        t = run_timed(lomtree_train_cmd("oaa", 105, {"bits": bits}, str(big), m, rep))
        p = run_timed(lomtree_predict_cmd(m, str(big), prep)) if t.rc == 0 else None
        vt = vp = None
        if use_vw:
            vm = str(RUNS_DIR / "fnd_oaa.vwmodel")
            vt = run_timed(vw_train_cmd("oaa", 105, {"bits": bits}, str(big), vm))
            vp = run_timed(vw_test_cmd(vm, str(big))) if vt.rc == 0 else None
            _cleanup(vm)
        rows.append(_tp_row(f"OAA train, Sector x{times} ({n:,} lines), -b {bits}", "ex/s", n, t, vt,
                            vw_what="--oaa 105"))
        rows.append(_tp_row(f"OAA predict, Sector x{times} ({n:,} lines), -b {bits}", "ex/s", n, p, vp,
                            vw_what="-t --oaa 105"))
        _cleanup(m)
    # (b) parse + hash: an untrained model predicts the KJV next-word training file
    nw = DATA_DIR / "kjv_nextword.train.vw"
    if nw.exists():
        lines = fnd.get("parse_lines")
        f = nw if not lines else head_file(nw, int(lines), RUNS_DIR / f"kjv_nextword.train.head{lines}.vw")
        n = count_lines(f)
        one = head_file(nw, 1, RUNS_DIR / "kjv_nextword.head1.vw")
        red = "filter" if str(available.get("filter", "ok")) == "ok" else "oaa"
        m, rep = str(RUNS_DIR / "fnd_untrained.model"), str(RUNS_DIR / "fnd_untrained.json")
        t0 = run_timed(lomtree_train_cmd(red, 5001, {"bits": bits}, str(one), m, rep))
        p = run_timed(lomtree_predict_cmd(m, str(f), rep)) if t0.rc == 0 else None
        vt = None
        if use_vw:
            vm = str(RUNS_DIR / "fnd_ect.vwmodel")
            vt = run_timed(vw_train_cmd("ect", 5001, {"bits": bits}, str(f), vm))
            _cleanup(vm)
        rows.append(_tp_row(f"parse+hash: predict with an untrained {red} model, KJV next-word train "
                            f"({n:,} lines), -b {bits}", "lines/s", n, p, vt,
                            vw_what="--ect 5001 (training, whole run)", target=">= 0.5"))
        # (c) start-up: predict on a 10-line input with the cache warm
        ten = head_file(nw, 10, RUNS_DIR / "kjv_nextword.head10.vw")
        if t0.rc == 0:
            best = None
            for _ in range(int(fnd.get("startup_repeats", 3))):
                s = run_timed(lomtree_predict_cmd(m, str(ten), rep))
                if s.rc == 0 and (best is None or s.seconds < best.seconds):
                    best = s
            vs = None
            if use_vw:
                vm = str(RUNS_DIR / "fnd_ect10.vwmodel")
                if run_timed(vw_train_cmd("ect", 5001, {"bits": bits}, str(ten), vm)).rc == 0:
                    vs = run_timed(vw_test_cmd(vm, str(ten)))
                _cleanup(vm)
            row = {"what": f"start-up: lomtree predict on 10 lines ({red}, k=5001, -b {bits}), numba cache warm",
                   "unit": "s", "ours": best.seconds if best else None,
                   "vw": vs.seconds if vs and vs.rc == 0 else None, "target": "< 1.5 s",
                   "ours_peak_mb": round(best.maxrss_kb / 1024, 1) if best else None,
                   "vw_what": "-t on 10 lines"}
            row["ratio"] = (row["vw"] / row["ours"]) if row["ours"] and row["vw"] else None
            row["meets_target"] = row["ours"] is not None and row["ours"] < 1.5
            rows.append(row)
        _cleanup(m)
    for r in rows:
        log(f"  {r['what'][:70]:70s} ours {r['ours']} vw {r['vw']} ratio {r['ratio']}")
    return rows


def _tp_row(what, unit, n, ours: Timed | None, vw: Timed | None, vw_what="", target=None) -> dict:
    """A throughput row: examples (or lines) per second of whole commands, and ours / VW."""
    o = n / ours.seconds if ours is not None and ours.rc == 0 else None
    v = n / vw.seconds if vw is not None and vw.rc == 0 else None
    row = {"what": what, "unit": unit, "lines": n, "ours": o, "vw": v, "ratio": (o / v) if o and v else None,
           "ours_seconds": ours.seconds if ours else None, "vw_seconds": vw.seconds if vw else None,
           "ours_peak_mb": round(ours.maxrss_kb / 1024, 1) if ours else None,
           "vw_peak_mb": round(vw.maxrss_kb / 1024, 1) if vw else None, "vw_what": vw_what}
    if target:
        row["target"] = target
        row["meets_target"] = row["ratio"] is not None and row["ratio"] >= 0.5
    return row


# ---------------------------------------------------------------------------------------------
# comparisons

def _ratio(a, b):
    return a / b if a and b else None


def comparisons(results: list[dict]) -> list[dict]:
    """Each of our runs beside VW's counterpart in the same variant: error difference (points)
    and throughput ratios ours / VW (> 1: we are faster)."""
    vw = {(r["dataset"], r["reduction"], r["variant"]): r for r in results
          if r.get("system") == "vw" and r.get("status") == "ok"}
    out = []
    for r in results:
        if r.get("system") != "lomtree" or r.get("status") != "ok" or r.get("sweep"):
            continue
        cp = VW_COUNTERPART.get(r["reduction"])
        v = vw.get((r["dataset"], cp, r["variant"]))
        if v is None:
            continue
        d = 100 * (r["error"] - v["error"])
        out.append({
            "dataset": r["dataset"], "reduction": r["reduction"], "vw": cp, "variant": r["variant"],
            "ours_error": r["error"], "vw_error": v["error"], "diff_points": d, "within_1_point": d <= 1.0,
            "train_ratio": v["train"]["seconds"] / r["train"]["seconds"],
            "test_ratio": v["test"]["seconds"] / r["test"]["seconds"],
            "train_cpu_ratio": _ratio(v["train"].get("cpu_seconds"), r["train"].get("cpu_seconds")),
            "test_cpu_ratio": _ratio(v["test"].get("cpu_seconds"), r["test"].get("cpu_seconds")),
        })
    return out


# ---------------------------------------------------------------------------------------------
# throughput against VW: the runner, here because the suite below calls it; its own command line,
# data_scripts/bench_throughput.py, imports it (so the two modules import in one direction only)

#: case name -> (reduction, dataset config name for options, train file, test file (None: the
#: training file), times each file is repeated). Sector is small (6,412 / 3,207 lines), so it is
#: repeated 5 times for OAA: the steady-state rate of a 3,207-line file is the
#: difference of two noisy sub-second times.
CASES = {
    "sector_oaa_x5": ("oaa", "sector_oaa", "sector.train.vw", None, 5),
    "sector_lomtree_x5": ("lomtree", "sector_lomtree", "sector.train.vw", "sector.test.vw", 5),
    "sector_filter_x5": ("filter", "sector_filter", "sector.train.vw", "sector.test.vw", 5),
    "letter_filter_x5": ("filter", "letter_filter", "letter.train.vw", "letter.test.vw", 5),
    "kjv_lomtree": ("lomtree", "kjv_nextword_lomtree", "kjv_nextword.train.vw", "kjv_nextword.test.vw", 1),
    "kjv_filter": ("filter", "kjv_nextword_filter", "kjv_nextword.train.vw", "kjv_nextword.test.vw", 1),
}
HEAD = 10


def _median(ts: list[Timed]) -> float | None:
    ok = [t.seconds for t in ts if t.rc == 0]
    return statistics.median(ok) if ok else None


def _rates(n: int, whole: float | None, fixed: float | None) -> tuple[float | None, float | None]:
    r_whole = n / whole if whole else None
    r_steady = (n - HEAD) / (whole - fixed) if whole and fixed is not None and whole > fixed else None
    return r_whole, r_steady


def run_case(name: str, repeats: int, use_vw: bool, config_dir=CONFIG_DIR, daemon: bool = False) -> list[dict]:
    red, cfg_name, train_name, test_name, rep = CASES[name]
    exp = load_experiment(Path(config_dir) / f"{cfg_name}.toml")
    opts = dict(exp.variants["1pass"])
    opts["passes"] = 1
    train = DATA_DIR / train_name
    if not train.exists():
        log(f"  {name}: {train} missing (make data)")
        return []
    test = train if test_name is None else DATA_DIR / test_name
    if rep > 1:
        train = repeat_file(train, rep, RUNS_DIR / f"{train.stem}.x{rep}.vw")
        test = train if test_name is None else repeat_file(test, rep, RUNS_DIR / f"{test.stem}.x{rep}.vw")
    files = {"train": train, "predict": test}
    heads = {p: head_file(f, HEAD, RUNS_DIR / f"{f.stem}.head{HEAD}.vw") for p, f in files.items()}
    counts = {p: count_lines(f) for p, f in files.items()}
    m, hm = str(RUNS_DIR / f"tp_{name}.model"), str(RUNS_DIR / f"tp_{name}.head.model")
    vm, vhm = m + ".vw", hm + ".vw"
    rep_json = str(RUNS_DIR / f"tp_{name}.json")
    k, vw_red = exp.k, exp.vw
    cmds = {
        ("ours", "train"): lomtree_train_cmd(red, k, opts, str(train), m, rep_json, extra=exp.extra_args),
        ("ours", "train_head"): lomtree_train_cmd(red, k, opts, str(heads["train"]), hm, rep_json,
                                                     extra=exp.extra_args),
        ("ours", "predict"): lomtree_predict_cmd(m, str(test), rep_json),
        ("ours", "predict_head"): lomtree_predict_cmd(m, str(heads["predict"]), rep_json),
    }
    if use_vw and vw_red:
        cmds.update({
            ("vw", "train"): vw_train_cmd(vw_red, k, opts, str(train), vm, extra=exp.vw_args),
            ("vw", "train_head"): vw_train_cmd(vw_red, k, opts, str(heads["train"]), vhm, extra=exp.vw_args),
            ("vw", "predict"): vw_test_cmd(vm, str(test)),
            ("vw", "predict_head"): vw_test_cmd(vm, str(heads["predict"])),
            # VW's test as often run to evaluate: the loss only, no predictions written
            ("vw_nop", "predict"): vw_test_cmd(vm, str(test), None),
        })
    times: dict[tuple, list[Timed]] = {key: [] for key in cmds}
    order = ["train", "train_head", "predict", "predict_head"]
    for r in range(repeats):
        for what in order:
            for who in ("ours", "vw", "vw_nop"):
                if (who, what) in cmds:
                    t = run_timed(cmds[(who, what)])
                    if t.rc != 0:
                        log(f"    {who} {what} failed: {_tail(t.stderr)}")
                    times[(who, what)].append(t)
    rows = []
    for part in ("train", "predict"):
        n = counts[part]
        row = {"case": name, "reduction": red, "vw_reduction": vw_red, "part": part,
               "file": files[part].name,
               "examples": n, "repeats": repeats, "bits": opts.get("bits")}
        for who in ("ours", "vw", "vw_nop"):
            whole = _median(times.get((who, part), []))
            fixed = _median(times.get((who, part + "_head"), []))
            rw, rs = _rates(n, whole, fixed)
            row[f"{who}_seconds"] = whole
            row[f"{who}_fixed_seconds"] = fixed
            row[f"{who}_whole_ex_s"] = rw
            row[f"{who}_steady_ex_s"] = rs
            row[f"{who}_all_seconds"] = [round(t.seconds, 3) for t in times.get((who, part), [])]
        row["ratio_whole"] = _ratio(row["ours_whole_ex_s"], row["vw_whole_ex_s"])
        row["ratio_paired"] = paired_ratio(times.get(("ours", part), []), times.get(("vw", part), []))
        row["ratio_steady"] = _ratio(row["ours_steady_ex_s"], row["vw_steady_ex_s"])
        if daemon and part == "predict" and os.path.exists(m):
            from .bench_daemon import daemon_rates

            try:
                row.update(daemon_rates(m, str(test), (1, 8), repeats))
            except (RuntimeError, OSError) as e:
                log(f"    daemon failed: {e}")
        if times.get(("vw_nop", part)):
            row["ratio_whole_vw_nop"] = _ratio(row["ours_whole_ex_s"], row["vw_nop_whole_ex_s"])
            row["ratio_paired_vw_nop"] = paired_ratio(times.get(("ours", part), []), times[("vw_nop", part)])
        rows.append(row)
        log(f"  {name:16s} {part:7s} ours {row['ours_seconds']} vw {row['vw_seconds']} "
              f"ratio whole {row['ratio_whole']} paired {row['ratio_paired']} steady {row['ratio_steady']} "
              f"daemon 1/8 clients {row.get('daemon_1_ex_s')} / {row.get('daemon_8_ex_s')} ex/s")
    _cleanup(m, hm, vm, vhm, rep_json)
    return rows


def paired_ratio(ours: list[Timed], vw: list[Timed]) -> float | None:
    """Median over the rounds of VW's time / ours in that round (the two ran back to back).

    The ratio of the two medians compares commands that ran minutes apart, and this VM's speed
    drifts within minutes (the same 0.2 s Letter prediction had medians of 0.21 and 0.83 s in
    sets of 7 runs half an hour apart, with 13-17% of the CPU stolen by the host in the slow one).
    Within a round both commands see the same machine, so a slow spell spoils that round's ratio
    only, where it can move both medians."""
    pairs = [v.seconds / o.seconds for o, v in zip(ours, vw) if o.rc == 0 and v.rc == 0 and o.seconds > 0]
    return statistics.median(pairs) if pairs else None


def case_repeats(name: str, cfg: dict) -> int:
    """Rounds for a case: ``short_repeats`` for the repeated small files (Sector, Letter: commands
    of 0.15-1.2 s whose times swing by +-20% on this VM, so a median of 3 can land on either
    side of VW's), ``repeats`` for the large ones."""
    repeats = int(cfg.get("repeats", 3))
    return int(cfg.get("short_repeats", repeats)) if CASES[name][4] > 1 else repeats


def run_throughput(cfg: dict, use_vw: bool) -> list[dict]:
    rows = []
    for name in cfg.get("cases", list(CASES)):
        rows += run_case(name, case_repeats(name, cfg), use_vw, daemon=cfg.get("daemon", True))
    return rows


# ---------------------------------------------------------------------------------------------
# main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small development suite (configs/suite.toml [quick])")
    ap.add_argument("--configs", default=str(CONFIG_DIR), help="experiment configs (default: %(default)s)")
    ap.add_argument("--out", default=str(BENCH_DIR), help="results.json/.md and plots go here (default: %(default)s)")
    ap.add_argument("--only", nargs="+", metavar="DATASET", help="only these datasets")
    ap.add_argument("--no-vw", action="store_true", help="do not run Vowpal Wabbit even if installed")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--no-foundation", action="store_true")
    ap.add_argument("--no-anchors", action="store_true", help="do not run napkinXC / fastText")
    ap.add_argument("--no-experiments", action="store_true",
                    help="skip the per-dataset runs (configs/<dataset>_<reduction>.toml) and the anchors")
    ap.add_argument("--anchors-only", action="store_true",
                    help="run only napkinXC / fastText (on --only's datasets) and merge them into the existing "
                         "results.json (their earlier records replaced), then re-render")
    ap.add_argument("--report-only", action="store_true", help="re-render results.md and plots from results.json")
    ap.add_argument("--merge", metavar="JSON", nargs="+",
                    help="with --report-only: first merge these results files (e.g. a sweep run with --out "
                         "elsewhere) into results.json, their records replacing those with the same id")
    args = ap.parse_args(argv)

    from . import bench_report
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "results.json"
    if args.report_only:
        res = json.loads(json_path.read_text())
        if args.merge:
            for other in args.merge:
                res = merge_results(res, json.loads(Path(other).read_text()), other)
            tmp = json_path.with_suffix(".json.writing")
            tmp.write_text(json.dumps(res, indent=1, sort_keys=False, default=str) + "\n")
            os.replace(tmp, json_path)
        bench_report.write_all(res, out)
        return 0
    if args.anchors_only:
        return _anchors_only(args, json_path, out, argv)

    t_start = time.time()
    suite = load_suite(args.configs, args.quick)
    datasets = args.only or suite.get("datasets", list(DATASETS))
    use_vw = have_vw() and not args.no_vw
    if not use_vw:
        log("Vowpal Wabbit not installed (pip install -e '.[bench]') or --no-vw: VW columns stay empty")
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    cmd = "make bench-quick" if args.quick else "make bench"
    res = {"suite": "quick" if args.quick else "full", "command": cmd,
           "argv": " ".join(["python", "-m", "data_scripts.bench"] + (argv if argv is not None else sys.argv[1:])),
           "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": machine_info(), "vw": use_vw,
           "holdout": "multi-pass runs (ours and VW): default holdout, every 10th example of each pass held out "
                      "(never trained), early termination after 3 passes without improvement; "
                      "VW: -c -k --cache_file F --passes N; ours: --passes N -c F",
           "ci": "95% Wilson score interval", "suite_config": suite, "results": [], "foundation": [],
           "comparisons": []}

    def save():
        res["elapsed_seconds"] = round(time.time() - t_start, 1)
        tmp = json_path.with_suffix(".json.writing")
        tmp.write_text(json.dumps(res, indent=1, sort_keys=False, default=str) + "\n")
        os.replace(tmp, json_path)

    log("warming the numba cache (one tiny run per reduction)")
    res["available"] = warm_numba()
    exps = [] if args.no_experiments else load_experiments(args.configs, datasets)
    log(f"experiments: {len(exps)} configs on {', '.join(datasets)}")
    run_experiments(exps, suite, use_vw, res["available"], res["results"], save)
    res["comparisons"] = comparisons(res["results"])
    save()
    if not args.no_anchors and not args.no_experiments and suite.get("anchors"):
        log("accuracy anchors: napkinXC, fastText (same files)")
        run_anchors(anchor_plan(suite["anchors"], datasets, tuned_passes(exps)), suite["anchors"],
                    res["results"], save)
    if not args.no_foundation and suite.get("foundation"):
        log("foundation figures (throughput vs VW, start-up)")
        res["foundation"] = run_foundation(suite["foundation"], use_vw, res["available"])
        save()
    if not args.no_foundation and suite.get("throughput"):
        log("throughput vs VW: medians of alternating runs, whole command and steady state")
        res["throughput"] = run_throughput(suite["throughput"], use_vw)
        save()
    if not args.no_synthetic and suite.get("synthetic"):
        log("synthetic sweep: per-example time vs k")
        run_synthetic(suite["synthetic"], res["available"], res["results"], save)
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    res["machine"]["loadavg_at_end"] = _load1()
    save()
    bench_report.write_all(res, out)
    log(f"done in {res['elapsed_seconds']:.0f} s -> {json_path}, {out / 'results.md'}")
    return 0


def merge_results(res: dict, other: dict, name: str = "") -> dict:
    """``res`` with ``other``'s records added, each replacing a record of ``res`` with the same
    ``id`` (in place, so table order stays), and its foundation rows (throughput, start-up) if it
    has any; ``other``'s own argv is kept under ``merged``."""
    new = {r["id"]: r for r in other.get("results", []) if "id" in r}
    out = []
    for r in res.get("results", []):
        out.append(new.pop(r["id"]) if r.get("id") in new else r)
    out += list(new.values())
    merged = list(res.get("merged", [])) + [{"file": name, "argv": other.get("argv"), "started": other.get("started"),
                                             "elapsed_seconds": other.get("elapsed_seconds")}]
    found = {"foundation": other["foundation"]} if other.get("foundation") else {}  # a newer throughput run
    return {**res, "results": out, "merged": merged, **found}


def _anchors_only(args, json_path: Path, out: Path, argv=None) -> int:
    """``--anchors-only``: the anchors of ``--only``'s datasets, merged into results.json."""
    from . import bench_report

    res = json.loads(json_path.read_text())
    suite = load_suite(args.configs, args.quick)
    cfg = suite.get("anchors") or {}
    datasets = args.only or suite.get("datasets", list(DATASETS))
    plan = anchor_plan(cfg, datasets, tuned_passes(load_experiments(args.configs, datasets)))
    done = {(s["dataset"], s["anchor"], s["variant"]) for s in plan}
    res["results"] = [r for r in res["results"]
                      if (r.get("dataset"), r.get("anchor"), r.get("variant")) not in done]
    res.setdefault("anchors_argv", []).append(
        " ".join(["python", "-m", "data_scripts.bench"] + (argv if argv is not None else sys.argv[1:])))
    res["anchors_started"] = time.strftime("%Y-%m-%d %H:%M:%S %z")

    def save():
        tmp = json_path.with_suffix(".json.writing")
        tmp.write_text(json.dumps(res, indent=1, sort_keys=False, default=str) + "\n")
        os.replace(tmp, json_path)

    log(f"accuracy anchors only: {len(plan)} runs, merged into {json_path}")
    run_anchors(plan, cfg, res["results"], save)
    res["anchors_finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    save()
    bench_report.write_all(res, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
