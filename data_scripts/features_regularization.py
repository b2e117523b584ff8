"""--l1 / --l2 on Sector: test error and nonzero weights of lomtree and VW at a
few values, OAA (VW --oaa) and the Filter tree (VW --ect), one pass, -b 24.

    python -m data_scripts.features_regularization [OUT.json]   (after `make data` and `make dev`)

Each row: ``lomtree train -r R -k 105 -b 24 TRAIN -f M OPT`` then ``lomtree predict -i M TEST``
(nonzero weights from ``lomtree inspect``), and ``python -m vowpalwabbit --R 105 -b 24 -d TRAIN
-f M --readable_model RM OPT`` then ``-t -i M -d TEST`` (nonzero weights: those of RM whose
effective value ``trunc(w, l1_state) * l2_state`` is not 0; VW keeps its gravity and contraction
unapplied in a save_resume model).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = os.path.join(ROOT, ".venv", "bin", "python")
LOMTREE = os.path.join(ROOT, ".venv", "bin", "lomtree")
DATA = os.path.join(ROOT, "bench", "data")
TRAIN, TEST = os.path.join(DATA, "sector.train.vw"), os.path.join(DATA, "sector.test.vw")
SETTINGS = [()] + [("--l1", x) for x in ("1e-6", "1e-5", "1e-3", "1e-2", "0.03", "0.1", "0.3")] + \
    [("--l2", x) for x in ("1e-6", "1e-4", "1e-2", "0.1")]
REDUCTIONS = [("oaa", "oaa"), ("filter", "ect")]


def lomtree_row(tmp, red, opt):
    m = os.path.join(tmp, "m.lt")
    rep = os.path.join(tmp, "r.json")
    subprocess.run([LOMTREE, "train", "-r", red, "-k", "105", "-b", "24", TRAIN, "-f", m, "--quiet", *opt], check=True)
    subprocess.run([LOMTREE, "predict", "-i", m, TEST, "-p", "/dev/null", "--quiet", "--report", rep], check=True)
    info = subprocess.run([LOMTREE, "inspect", m], check=True, capture_output=True, text=True).stdout
    nz = int(re.search(r"nonzero_weights: (\d+)", info).group(1))
    return 100 * json.load(open(rep))["average_loss"], nz


def vw_row(tmp, red, opt):
    m, rm = os.path.join(tmp, "m.vw"), os.path.join(tmp, "m.txt")
    vw = [PY, "-m", "vowpalwabbit"]
    subprocess.run(vw + [f"--{red}", "105", "-b", "24", "-d", TRAIN, "-f", m, "--readable_model", rm, "--quiet",
                         *opt], check=True)
    out = subprocess.run(vw + ["-t", "-i", m, "-d", TEST], check=True, capture_output=True, text=True).stderr
    err = float(re.search(r"average loss = ([0-9.]+)", out).group(1))
    gravity, contraction, ws = 0.0, 1.0, []
    with open(rm) as fh:
        for ln in fh:
            if ln.startswith("l1_state "):
                gravity = float(ln.split()[1])
            elif ln.startswith("l2_state "):
                contraction = float(ln.split()[1])
            elif re.match(r"^\d+:", ln):
                ws.append(float(ln.split(":", 1)[1].split()[0]))
    nz = sum(1 for w in ws if abs(w) > gravity and w * contraction != 0.0)
    return 100 * err, nz


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "bench", "features", "regularization.json")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for red, vw_red in REDUCTIONS:
            for opt in SETTINGS:
                le, lnz = lomtree_row(tmp, red, opt)
                ve, vnz = vw_row(tmp, vw_red, opt)
                rows.append({"reduction": red, "vw": vw_red, "option": " ".join(opt) or "(none)",
                             "lomtree_error": le, "lomtree_nonzero": lnz, "vw_error": ve, "vw_nonzero": vnz})
                print(json.dumps(rows[-1]), flush=True)
    with open(out, "w") as fh:
        json.dump(rows, fh, indent=1)
    print("| reduction (VW) | option | lomtree error % | lomtree nonzero weights | VW error % | VW nonzero weights |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['reduction']} (--{r['vw']}) | {r['option']} | {r['lomtree_error']:.2f} | {r['lomtree_nonzero']:,} "
              f"| {r['vw_error']:.2f} | {r['vw_nonzero']:,} |")


if __name__ == "__main__":
    main()
