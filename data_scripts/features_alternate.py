"""Training throughput against VW with the two programs alternating (the machine is shared;
alternating spreads its load over both). One pass, -b 24, no model written, whole command.

    python -m data_scripts.features_alternate [REPS] [ROW ...]

ROW is ``task:options:reduction[:lomtree-only options]``, e.g. ``book:-q ww:lomtree`` or
``book:-q ww:lomtree:--leaf-labels 0`` (LOMtree with VW's model: no leaf candidate lists; default:
every KJV book row, and KJV next word without feature options and with ``-q pp``). Prints, per row, the median and
fastest training seconds of each program, both as CPU time (user + sys of the command, from
``getrusage(RUSAGE_CHILDREN)``) and as wall clock.
"""
import os
import statistics
import subprocess
import sys

from .common import children_cpu_seconds

LT = os.environ.get("LT", os.path.join(os.path.dirname(sys.executable), "lomtree"))
VW = os.environ.get("VW", f"{sys.executable} -m vowpalwabbit").split()
DATA = os.environ.get("DATA", "bench/data")
TASKS = {"book": ("kjv_book.train.vw", 66), "nextword": ("kjv_nextword.train.vw", 5001)}
VW_NAME = {"filter": "ect", "lomtree": "log_multi", "oaa": "oaa"}
ROWS = [f"book:{o}:{r}" for o in ("-q ww", "--ngram 2") for r in ("filter", "lomtree", "oaa")] + \
       [f"nextword:{o}:{r}" for o in ("", "-q pp") for r in ("filter", "lomtree")]


def timed(cmd):
    """(cpu seconds, wall seconds) of one command."""
    c0 = children_cpu_seconds()
    t0 = os.times().elapsed
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = os.times().elapsed
    return children_cpu_seconds() - c0, t1 - t0


def fmt(xs):
    return "%.2f / %.2f" % (statistics.median(xs), min(xs))


def main(argv):
    reps = int(argv[0]) if argv else 5
    rows = argv[1:] or ROWS
    print("row | lomtree cpu median / fastest | VW cpu | lomtree wall | VW wall", flush=True)
    for row in rows:
        task, opts, red, *own = row.split(":")
        own = own[0].split() if own else []
        path, k = TASKS[task]
        data = os.path.join(DATA, path)
        extra = ["--max-internal-nodes", "5000"] if (task, red) == ("nextword", "lomtree") and "T=" in opts else []
        opts = [o for o in opts.split() if not o.startswith("T=")]
        lt = [LT, "train", "-r", red, "-k", str(k), "-b", "24", data, "--quiet", *opts, *extra, *own]
        vw = [*VW, f"--{VW_NAME[red]}", str(k), "-b", "24", "-d", data, "--quiet", *opts]
        a, b = [], []
        for _ in range(reps):
            a.append(timed(lt))
            b.append(timed(vw))
        print(f"{task} {' '.join(opts) or '(none)'} {red} {' '.join(own)}| {fmt([x[0] for x in a])} | {fmt([x[0] for x in b])} | "
              f"{fmt([x[1] for x in a])} | {fmt([x[1] for x in b])}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
