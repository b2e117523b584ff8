"""Large-k benchmark on a real stream: next word over the PyPI summaries (``data_scripts.pypi_tasks``).

Every lomtree reduction next to Vowpal Wabbit (``--ect``, ``--log_multi``), fastText (``-loss hs``,
1 and 5 epochs, 2 threads) and napkinXC (``PLT()``, one thread; on the 40,000-summary size only, as
its batch fit at the larger sizes is beyond an hour), on the same files, one run at a time: test
error, train CPU and wall seconds, CPU µs per training example, prediction CPU, peak RSS. Then the
per-example cost against k (vocabularies of 1,000 ... 100,000 on the 40,000-summary stream) for
every reduction and OAA, plotted.

Each command is a whole subprocess (start-up and reading included), timed by ``os.wait4``. OAA
and napkinXC are left out where their projected time passes ``--budget`` seconds (a cell says so).
Results are merged into ``--json`` by (task, system), so the sizes may be run in several
invocations (each record keeps its date and load average); ``--markdown`` is written from all of it.

Command line (``make bench`` runs it with the defaults)::

    python -m data_scripts.bench_pypi [--data-dir DIR] [--sizes 40000 300000 0] [--vocabs 20000 100000]
        [--systems plt cpt ...] [--sweep-vocabs 1000 3000 10000 30000 100000] [--no-sweep]
        [--anchor-python PY] [--json bench/pypi.json] [--markdown bench/pypi.md]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path

from . import bench_anchors as ba
from .bench import lomtree_exe
from .common import DEFAULT_DATA_DIR, REPO_ROOT, atomic_write, run_timed, sanitize_command
from .pypi_tasks import size_name, task_name

#: system id -> (display name, kind, options). kind: lomtree (train options), vw (VW reduction),
#: fasttext (epochs), napkinxc (anchor id).
SYSTEMS = {
    "plt": ("lomtree -r plt", "lomtree", ["-r", "plt"]),
    "cpt": ("lomtree -r cpt", "lomtree", ["-r", "cpt"]),
    "filter": ("lomtree -r filter", "lomtree", ["-r", "filter"]),
    "lomtree": ("lomtree -r lomtree", "lomtree", ["-r", "lomtree"]),
    "rtree": ("lomtree -r rtree", "lomtree", ["-r", "rtree"]),
    "mtree": ("lomtree -r mtree --dim 50 -b 20", "lomtree", ["-r", "mtree", "--dim", "50", "-b", "20"]),
    "oaa": ("lomtree -r oaa", "lomtree", ["-r", "oaa"]),
    # millions of examples fill a 2^24 table: the two most accurate with four times the slots
    "plt_b26": ("lomtree -r plt -b 26", "lomtree", ["-r", "plt", "-b", "26"]),
    "cpt_b26": ("lomtree -r cpt -b 26", "lomtree", ["-r", "cpt", "-b", "26"]),
    # both cores, as fastText's 2 threads (Hogwild; runs are not repeatable)
    "plt_b26_t2": ("lomtree -r plt -b 26 --threads 2", "lomtree", ["-r", "plt", "-b", "26", "--threads", "2"]),
    # the full stream's setting: twice the slots again, and the rate progressive validation picks on
    # the streams longer than the tree buffer (bench/notes/plt-at-scale.md)
    "plt_b27_t2": ("lomtree -r plt -b 27 --threads 2 -l 0.75", "lomtree",
                   ["-r", "plt", "-b", "27", "--threads", "2", "-l", "0.75"]),
    "plt_x5": ("lomtree -r plt, ≤ 5 passes", "lomtree", ["-r", "plt", "--passes", "5"]),
    "plt_b26_x5": ("lomtree -r plt -b 26 --passes 5 --holdout-off", "lomtree",
                   ["-r", "plt", "-b", "26", "--passes", "5", "--holdout-off"]),
    # KJV next word's multi-pass setting (bench/notes/multipass.md) with power_t 0.5
    "cpt_b27_x5": ("lomtree -r cpt -b 27 --passes 5 --holdout-off --decay-learning-rate 0.5 --power-t 0.5", "lomtree",
                   ["-r", "cpt", "-b", "27", "--passes", "5", "--holdout-off", "--decay-learning-rate", "0.5",
                    "--power-t", "0.5"]),
    "vw_ect": ("VW --ect", "vw", "ect"),
    "vw_log_multi": ("VW --log_multi", "vw", "log_multi"),
    "fasttext_hs1": ("fastText hs, 1 epoch", "fasttext", 1),
    "fasttext_hs5": ("fastText hs, 5 epochs", "fasttext", 5),
    "napkinxc_plt": ("napkinXC PLT", "napkinxc", "napkinxc_plt"),
}
DEFAULT_SYSTEMS = list(SYSTEMS)
#: systems that run on the smallest size only (napkinXC's batch fit; several passes)
SMALL_ONLY = {"napkinxc_plt", "plt_x5", "plt_b26_x5", "cpt_b27_x5"}
#: projected CPU µs per (training example x class) of a one-pass OAA (measured: 80 µs at k = 20,001)
OAA_US_PER_CLASS = 0.004
REDUCTIONS_SWEPT = ["plt", "cpt", "filter", "lomtree", "rtree", "mtree", "oaa"]
BITS = 24
FASTTEXT_THREADS = 2


def log(msg: str) -> None:
    print(f"[{_dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))


def skip_reason(system: str, size: int, smallest: int, n_train: int, k: int, budget: float) -> str | None:
    """Why a system is not run on a task (None: it runs)."""
    if system in SMALL_ONLY and size != smallest:
        return "run on the smallest size only (batch fit / several passes)"
    if system == "oaa" and n_train * k * OAA_US_PER_CLASS / 1e6 > budget:
        return f"projected {n_train * k * OAA_US_PER_CLASS / 60e6:.0f} min of training (> --budget)"
    return None


def run_system(system: str, train: Path, test: Path, k: int, work: Path, anchor_py: str, timeout: float) -> dict:
    """Train and test one system; returns the record (error %, times, RSS)."""
    name, kind, opt = SYSTEMS[system]
    model = work / f"{train.stem}.{system}.model"
    rec: dict = {"system": system, "name": name, "date": f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M}",
                 "loadavg": round(os.getloadavg()[0], 2)}
    if kind == "lomtree":
        rep, trep = work / f"{system}.train.json", work / f"{system}.test.json"
        bits = [] if "-b" in opt else ["-b", str(BITS)]
        extra = ["-c", str(work / f"{system}.cache")] if "--passes" in opt else []
        fit = lomtree_exe() + ["train", "-k", str(k)] + bits + opt + extra + [str(train), "-f", str(model),
                                                                              "--report", str(rep), "--quiet"]
        pred = lomtree_exe() + ["predict", "-i", str(model), str(test), "-p", "/dev/null", "--report", str(trep),
                                "--quiet"]
    elif kind == "vw":
        fit = [anchor_py, "-m", "vowpalwabbit", f"--{opt}", str(k), "-b", str(BITS), "-d", str(train),
               "-f", str(model), "--quiet"]
        pred = [anchor_py, "-m", "vowpalwabbit", "-t", "-i", str(model), "-d", str(test), "-p", str(work / "vw.pred"),
                "--quiet"]
    else:
        rep, trep = work / f"{system}.fit.json", work / f"{system}.test.json"
        if kind == "fasttext":
            tr_txt = ba.fasttext_file(train, work / f"{train.stem}.ft.txt")
            te_txt = ba.fasttext_file(test, work / f"{test.stem}.ft.txt")
            fit = [anchor_py] + ba.fit_cmd("fasttext_hs", str(tr_txt), str(model), str(rep), epochs=opt,
                                           threads=FASTTEXT_THREADS)[1:]
            pred = [anchor_py] + ba.test_cmd("fasttext_hs", str(te_txt), str(model), str(trep))[1:]
        else:
            fit = [anchor_py] + ba.fit_cmd(opt, str(train), str(model), str(rep), bits=BITS)[1:]
            pred = [anchor_py] + ba.test_cmd(opt, str(test), str(model), str(trep), bits=BITS)[1:]
    env = {"PYTHONPATH": str(REPO_ROOT)}
    t = run_timed(fit, env_extra=env, timeout=timeout)
    rec.update(train_rc=t.rc, train_wall=round(t.wall, 2), train_cpu=round(t.cpu, 2), train_rss_mb=t.maxrss_kb // 1024)
    if t.rc != 0:
        rec["status"] = f"train failed (exit {t.rc}): {t.stderr.strip().splitlines()[-1:] or ''}"
        return rec
    p = run_timed(pred, env_extra=env, timeout=timeout)
    rec.update(test_rc=p.rc, test_wall=round(p.wall, 2), test_cpu=round(p.cpu, 2), test_rss_mb=p.maxrss_kb // 1024)
    if p.rc != 0:
        rec["status"] = f"test failed (exit {p.rc}): {p.stderr.strip().splitlines()[-1:] or ''}"
        return rec
    rec["error"] = round(100 * test_error(kind, p, trep if kind != "vw" else work / "vw.pred", test), 2)
    rec["status"] = "ok"
    if kind == "lomtree":
        rec["passes_used"] = json.loads(Path(rep).read_text()).get("passes")
    for f in (model, work / f"{system}.cache", work / "vw.pred"):
        if f.exists() and f.is_file():
            f.unlink()
        elif f.is_dir():
            for x in f.iterdir():
                x.unlink()
            f.rmdir()
    return rec


def test_error(kind: str, p, report: Path, test: Path) -> float:
    if kind == "lomtree":
        r = json.loads(report.read_text())
        z = r.get("average_zero_one_loss")
        return float(z if z is not None else r["average_loss"])
    if kind == "vw":  # the predictions against the test file's labels
        with open(report) as fp, open(test) as ft:
            pairs = [(a.split()[0], b.split(" ", 1)[0]) for a, b in zip(fp, ft)]
        return sum(float(a) != float(b) for a, b in pairs) / max(len(pairs), 1)
    r = json.loads(report.read_text())
    return r["errors"] / max(r["examples"], 1)


def run_task(size: int, vocab: int, systems, files: Path, work: Path, results: dict, anchor_py: str,
             budget: float, timeout: float, smallest: int, prefix: str = "main") -> None:
    task = task_name(size, vocab)
    train, test = files / f"{task}.train.vw", files / f"{task}.test.vw"
    n_train = count_lines(train)
    k = vocab + 1
    for system in systems:
        key = f"{prefix}/{task}/{system}"
        why = skip_reason(system, size, smallest, n_train, k, budget) if prefix == "main" else None
        if why:
            results[key] = {"system": system, "name": SYSTEMS[system][0], "status": f"skipped: {why}"}
            continue
        log(f"{task} {system} ...")
        rec = run_system(system, train, test, k, work, anchor_py, timeout)
        rec.update(task=task, size=size_name(size), vocab=vocab, k=k, n_train=n_train,
                   n_test=count_lines(test))
        if "train_cpu" in rec:
            rec["train_us_per_ex"] = round(1e6 * rec["train_cpu"] / max(n_train * (rec.get("passes_used") or 1), 1), 2)
        if "test_cpu" in rec:
            rec["test_us_per_ex"] = round(1e6 * rec["test_cpu"] / max(rec["n_test"], 1), 2)
        results[key] = rec
        log(f"  {rec.get('error', rec['status'])} % | train {rec.get('train_cpu')} s CPU, {rec.get('train_wall')} s "
            f"wall, {rec.get('train_rss_mb')} MB")


def runs_of(meta: dict) -> list[str]:
    """The commands whose records the results hold (older files kept only the last one's)."""
    return list(meta.get("commands") or ([meta["command"]] if "command" in meta else []))


def render(results: dict, meta: dict) -> str:
    """bench/pypi.md: one table per task, then the cost sweep."""
    out = ["# Next word over the PyPI summaries (large k, real stream)", "",
           f"Machine: {meta['machine']}. Records carry their own date and 1-minute load average "
           "(`bench/pypi.json`); a later run replaces the records of the systems it ran. Error: 0/1 loss on the "
           "held-out summaries (every 10th). Train: the whole command's CPU (user + system) and wall seconds, "
           "start-up and reading included; µs/ex = train CPU / (training examples x passes). RSS: the child's "
           "peak. Made by these runs, in order:", ""]
    out += [f"- `{c}`" for c in runs_of(meta)] + [""]
    tasks = sorted({r["task"] for k, r in results.items() if k.startswith("main/") and "task" in r},
                   key=lambda t: (["40k", "300k", "all"].index(t.split("_")[1]) if t.split("_")[1] in
                                  ("40k", "300k", "all") else 9, t))
    for task in tasks:
        recs = [(k.split("/")[2], r) for k, r in results.items() if k.startswith(f"main/{task}/")]
        any_r = next(r for _, r in recs if "n_train" in r)
        out += [f"## {task}: {any_r['n_train']:,} train / {any_r['n_test']:,} test examples, k = {any_r['k']:,}", "",
                "| system | test error % | train CPU s | train wall s | µs/ex | test CPU s | peak RSS MB | date (load) |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for system, r in sorted(recs, key=lambda x: (x[1].get("error", 999), x[0])):
            if r.get("status") != "ok":
                out.append(f"| {SYSTEMS[system][0]} | {r.get('status')} | | | | | | |")
                continue
            passes = f" ({r['passes_used']} passes)" if (r.get("passes_used") or 1) > 1 else ""
            out.append(f"| {SYSTEMS[system][0]}{passes} | {r['error']:.2f} | {r['train_cpu']:.1f} | "
                       f"{r['train_wall']:.1f} | {r['train_us_per_ex']:.1f} | {r['test_cpu']:.1f} | "
                       f"{r['train_rss_mb']:,} | {r['date']} ({r['loadavg']}) |")
        out.append("")
    every = [r for k, r in results.items() if k.startswith("sweep/") and "k" in r]
    sweep = [r for r in every if r.get("status") == "ok"]
    if sweep:
        ks = sorted({r["k"] for r in sweep})
        out += ["## Cost against k (40,000 summaries; vocabularies of " + ", ".join(f"{k - 1:,}" for k in ks) + ")", "",
                "CPU µs per example, train / predict (whole commands / examples), and test error %.", "",
                "| reduction | " + " | ".join(f"k = {k:,}" for k in ks) + " |",
                "| --- |" + " ---: |" * len(ks)]
        for system in REDUCTIONS_SWEPT:
            cells = []
            for k in ks:
                r = next((r for r in every if r["system"] == system and r["k"] == k), None)
                cells.append("" if r is None else r["status"] if r.get("status") != "ok" else
                             f"{r['train_us_per_ex']:.1f} / {r['test_us_per_ex']:.1f} ({r['error']:.2f})")
            out.append(f"| {system} | " + " | ".join(cells) + " |")
        out += ["", "Plot: `bench/pypi_cost_vs_k.png`.", ""]
    return "\n".join(out)


def plot_sweep(results: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sweep = [r for k, r in results.items() if k.startswith("sweep/") and r.get("status") == "ok"]
    if not sweep:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for system in REDUCTIONS_SWEPT:
        rs = sorted((r for r in sweep if r["system"] == system), key=lambda r: r["k"])
        if rs:
            axes[0].plot([r["k"] for r in rs], [r["train_us_per_ex"] for r in rs], "o-", label=system)
            axes[1].plot([r["k"] for r in rs], [r["test_us_per_ex"] for r in rs], "o-", label=system)
    for ax, what in zip(axes, ("train", "predict")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("classes k (PyPI next word, 40,000 summaries)")
        ax.set_ylabel(f"{what} CPU µs per example")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def build_files(data_dir: str, files: Path, sizes, vocabs) -> int:
    """``pypi_tasks.build_all`` in a child process: the summaries it reads (~600 MB of Python
    objects for all of them) would stay in this process, and every command it then forks starts
    from its memory, so each one's peak RSS (``ru_maxrss``) would be at least that."""
    import subprocess

    cmd = [sys.executable, "-m", "data_scripts.pypi_tasks", "--data-dir", str(data_dir), "--out-dir", str(files),
           "--summaries", *map(str, sizes), "--vocab", *map(str, vocabs)]
    return subprocess.run(cmd, cwd=REPO_ROOT).returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_scripts.bench_pypi", description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--files", default=str(REPO_ROOT / "bench" / "data" / "pypi"), help="where the task files go")
    ap.add_argument("--sizes", type=int, nargs="+", default=[40_000, 300_000, 0], help="0 = all summaries")
    ap.add_argument("--vocabs", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--systems", nargs="+", default=DEFAULT_SYSTEMS, choices=sorted(SYSTEMS))
    ap.add_argument("--sweep-vocabs", type=int, nargs="+", default=[1_000, 3_000, 10_000, 30_000, 100_000])
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-main", action="store_true", help="only the cost sweep")
    ap.add_argument("--anchor-python", default=sys.executable,
                    help="the Python with vowpalwabbit, fasttext and napkinxc (default: this one)")
    ap.add_argument("--budget", type=float, default=1200.0, help="most projected seconds of an OAA run")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--json", default=str(REPO_ROOT / "bench" / "pypi.json"))
    ap.add_argument("--markdown", default=str(REPO_ROOT / "bench" / "pypi.md"))
    a = ap.parse_args(argv)
    files = Path(a.files)
    work = files / "runs"
    work.mkdir(parents=True, exist_ok=True)
    jpath = Path(a.json)
    old = json.loads(jpath.read_text()) if jpath.exists() else {}
    results = old.get("results", {})
    # the file gathers the records of many runs: keep every run's command, not only the last one's
    commands = runs_of(old.get("meta", {}))
    command = "python -m data_scripts.bench_pypi " + sanitize_command(argv if argv is not None else sys.argv[1:])
    if command not in commands:
        commands.append(command)

    def save() -> None:
        meta = {"commands": commands,
                "machine": f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
                           f"Python {platform.python_version()}"}
        with atomic_write(jpath) as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=1, sort_keys=True)
        with atomic_write(a.markdown) as fh:
            fh.write(render(results, meta))
        plot_sweep(results, jpath.with_name("pypi_cost_vs_k.png"))

    if not a.no_main:
        if build_files(a.data_dir, files, a.sizes, a.vocabs):
            return 1
        for size in a.sizes:
            for vocab in a.vocabs:
                run_task(size, vocab, a.systems, files, work, results, a.anchor_python, a.budget, a.timeout,
                         smallest=min(s or 10**9 for s in a.sizes))
                save()
    if not a.no_sweep:
        size = min(a.sizes) if a.sizes else 40_000
        if build_files(a.data_dir, files, [size], a.sweep_vocabs):
            return 1
        for vocab in a.sweep_vocabs:
            run_task(size, vocab, REDUCTIONS_SWEPT, files, work, results, a.anchor_python, a.budget, a.timeout,
                     smallest=size, prefix="sweep")
            save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
