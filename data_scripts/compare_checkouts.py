"""Do two lomtree installations train the same models and print the same predictions?

Usage: ``python -m data_scripts.compare_checkouts LOMTREE_A LOMTREE_B [--n 3000] [--classes 20]``

``LOMTREE_A`` and ``LOMTREE_B`` are ``lomtree`` executables (e.g. the ``.venv/bin/lomtree`` of two
checkouts). On a synthetic stream (``data_scripts.synthetic``) every reduction of the registry
is trained by both (one pass with progressive predictions ``-p``; three passes with holdout
and the example cache; a continued run ``-i``), and both predict a test stream with each
model (``--top-k 3`` too where the reduction has probabilities). Compared byte for byte: the
prediction files and every member of the model files (a model file is a zip whose entries carry
their write time, so the files themselves differ in those bytes only). Exit status 1 on any
difference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

from lomtree_cli.reductions.registry import REGISTRY

#: every reduction of this checkout's registry; those with probabilities also predict ``--top-k``
REDUCTIONS = tuple(REGISTRY)
TOP = tuple(n for n, spec in REGISTRY.items() if spec.probabilities)


def members(path: str) -> dict:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in sorted(z.namelist())}


def run(exe: str, args: list) -> None:
    p = subprocess.run([exe] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{exe} {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--classes", type=int, default=20)
    a = ap.parse_args(argv)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        train, test = os.path.join(d, "train.vw"), os.path.join(d, "test.vw")
        subprocess.run([sys.executable, "-m", "data_scripts.synthetic", "-k", str(a.classes), "-n", str(a.n),
                        "--zipf", "1.0", "--out", train, "--test-out", test], check=True)
        for red in REDUCTIONS:
            runs = {
                "1pass": ["-b", "18"],
                "3passes": ["-b", "18", "--passes", "3", "-c", "--holdout-period", "5"],
            }
            for tag, opts in runs.items():
                outs = {}
                for side, exe in (("a", a.a), ("b", a.b)):
                    base = os.path.join(d, f"{red}-{tag}-{side}")
                    model, more = base + ".lt", base + "-more.lt"
                    run(exe, ["train", "-r", red, "-k", str(a.classes), train, "-f", model, "-p", base + ".prog",
                              "--quiet"] + opts)
                    run(exe, ["train", "-i", model, test, "-f", more, "--quiet"])
                    run(exe, ["predict", "-i", model, test, "-p", base + ".pred", "--quiet"])
                    files = {"progressive": base + ".prog", "predictions": base + ".pred"}
                    if red in TOP:
                        run(exe, ["predict", "-i", model, test, "-p", base + ".top", "--top-k", "3", "--quiet"])
                        files["top-3"] = base + ".top"
                    got = {name: open(p, "rb").read() for name, p in files.items()}
                    got["model"] = members(model)
                    got["continued model"] = members(more)
                    outs[side] = got
                diff = [name for name in outs["a"] if outs["a"][name] != outs["b"][name]]
                print(f"{red:8s} {tag:8s} " + ("same" if not diff else "DIFFERENT: " + ", ".join(diff)))
                bad += bool(diff)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
