"""Feature-option figures (bench/notes/features.md): lomtree vs VW with the same feature options, same run.

    python -m data_scripts.features_figures OUT.json TASK...     (TASK: book_ngram, book_q, nextword_q, parse)

Each row: train on the task's train file (one pass, -b 24), test error on its test file, train
seconds and examples/s (wall clock of the whole command, start-up included). Runs one at a time.
"""
import json, os, re, subprocess, sys, tempfile, time

LT = os.path.join(os.path.dirname(sys.executable), "lomtree")
VW = [sys.executable, "-m", "vowpalwabbit"]
D = os.environ.get("DATA", "bench/data")
TMP = os.path.join(tempfile.gettempdir(), "lomtree_features_fig")
os.makedirs(TMP, exist_ok=True)

def lines(p):
    with open(p, "rb") as f:
        return sum(1 for _ in f)

def run(cmd):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return dt, r.stderr

REPS = int(os.environ.get("REPS", "1"))  # training runs per row: the fastest counts (a shared machine)


def lomtree_row(name, red, k, train, test, feat):
    m = f"{TMP}/{name}.lt"
    dt = min(run([LT, "train", "-r", red, "-k", str(k), "-b", "24", train, "-f", m, "--quiet"] + feat)[0]
             for _ in range(REPS))
    rep = f"{TMP}/{name}.json"
    run([LT, "predict", "-i", m, test, "-p", "/dev/null", "--quiet", "--report", rep])
    r = json.load(open(rep))
    err = r.get("average_zero_one_loss") or r["average_loss"]
    return {"system": "lomtree", "reduction": red, "options": " ".join(feat), "test_error": err,
            "train_seconds": dt, "features_per_example": None}

def vw_row(name, red, k, train, test, feat):
    m = f"{TMP}/{name}.vw"
    dt = min(run(VW + [f"--{red}", str(k), "-b", "24", "-d", train, "-f", m, "--quiet"] + feat)[0]
             for _ in range(REPS))
    _, out = run(VW + ["-t", "-i", m, "-d", test])
    err = float(re.search(r"average loss = ([0-9.]+)", out).group(1))
    return {"system": "vw", "reduction": red, "options": " ".join(feat), "test_error": err, "train_seconds": dt}

TASKS = {
    "book_ngram": ("kjv_book", 66, ["--ngram", "2"], [("filter", "ect"), ("lomtree", "log_multi"), ("oaa", "oaa"), ("plt", None)]),
    "book_q": ("kjv_book", 66, ["-q", "ww"], [("filter", "ect"), ("lomtree", "log_multi"), ("oaa", "oaa"), ("plt", None)]),
    "nextword_q": ("kjv_nextword", 5001, ["-q", "pp"], [("filter", "ect"), ("lomtree", "log_multi")]),
    "nextword_q_oaa": ("kjv_nextword", 5001, ["-q", "pp"], [("oaa", "oaa")]),
    "nextword_plain": ("kjv_nextword", 5001, [], [("filter", "ect"), ("lomtree", "log_multi")]),
    "nextword_q_cpt": ("kjv_nextword", 5001, ["-q", "pp"], [("cpt", None)]),
    "nextword_q_plt": ("kjv_nextword", 5001, ["-q", "pp"], [("plt", None)]),
    "nextword_plain_cpt": ("kjv_nextword", 5001, [], [("cpt", None)]),
}

def main():
    out_path = sys.argv[1]
    res = json.load(open(out_path)) if os.path.exists(out_path) else {}
    for task in sys.argv[2:]:
        if task == "parse":
            rows = []
            for data, feat in (("kjv_nextword", ["-q", "pp"]), ("kjv_book", ["--ngram", "2"]), ("kjv_nextword", [])):
                train = f"{D}/{data}.train.vw"
                n = lines(train)
                # lomtree: parse + hash + feature generation, with the cheapest reduction (label frequency);
                # the fastest of 5 runs each (the machine is shared)
                dt = min(run([LT, "train", "-r", "table", "-b", "24", train, "--quiet"] + feat)[0] for _ in range(5))
                rows.append({"system": "lomtree -r table", "data": data, "options": " ".join(feat), "seconds": dt, "examples_per_second": n / dt})
                # VW --noop: parse + hash (+ n-grams, made by its parser; VW makes interactions while it learns)
                dt = min(run(VW + ["--noop", "-b", "24", "-d", train, "--quiet"] + feat)[0] for _ in range(5))
                rows.append({"system": "vw --noop", "data": data, "options": " ".join(feat), "seconds": dt, "examples_per_second": n / dt})
                print(rows[-2:], flush=True)
            res[task] = rows
        else:
            data, k, feat, pairs = TASKS[task]
            train, test = f"{D}/{data}.train.vw", f"{D}/{data}.test.vw"
            n = lines(train)
            rows = []
            for red, vred in pairs:
                row = lomtree_row(f"{task}_{red}", red, k, train, test, feat)
                row["examples_per_second"] = n / row["train_seconds"]
                rows.append(row)
                print(row, flush=True)
                if vred:
                    row = vw_row(f"{task}_{vred}", vred, k, train, test, feat)
                    row["examples_per_second"] = n / row["train_seconds"]
                    rows.append(row)
                    print(row, flush=True)
            res[task] = rows
        json.dump(res, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
