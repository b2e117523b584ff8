"""lomtree's River classes next to River's own models: progressive validation and per-example cost.

Usage: ``python -m data_scripts.bench_river [--rbf-n 20000] [--reductions oaa,lomtree,plt,cpt] [--repeats 3] [--out bench/river.json]``

Two streams: River's bundled ``ImageSegments`` (2,310 rows, 7 classes) and
``datasets.synth.RandomRBF(seed_model=42, seed_sample=42)`` (``--rbf-n`` rows; River's defaults:
2 classes, 10 features, 50 centroids). Every model sits behind the same
``preprocessing.StandardScaler``: ``lomtree_cli.river.Classifier`` for each reduction (defaults,
``classes=None``: the labels join as they come; oaa also with every pair of features crossed,
``quadratic="  "``), River's ``OneVsRestClassifier(LogisticRegression())``
and ``tree.HoeffdingTreeClassifier()``. Accuracy is ``evaluate.progressive_val_score``'s; the
per-example cost is a second pass of the same loop (``predict_one`` then ``learn_one`` of the whole
pipeline, scaler included), CPU µs per call (``time.process_time``: wall-clock figures on a
shared machine swing 3-4x), the best of ``--repeats`` runs.

``--crossed-study SEEDS``: instead, the progressive accuracy of each reduction with and without
every pair of features crossed on ImageSegments, Phishing, Bananas and RandomRBF with each seed.

Also: ``learn_one``/``predict_one`` of ``lomtree_cli.Classifier(reduction="oaa", bits=24)`` on the
same 10-feature dicts with string keys (``{"f3": v}``) and with integer keys (``{3: v}``).
"""

from __future__ import annotations

import argparse
import json
import os
import time


def streams(rbf_n: int, segments_n: int | None = None):
    from river import datasets

    return {"ImageSegments": lambda: datasets.ImageSegments().take(segments_n or 10**9),
            f"RandomRBF-{rbf_n}": lambda: datasets.synth.RandomRBF(seed_model=42, seed_sample=42).take(rbf_n)}


def study_streams(rbf_n: int, seeds) -> dict:
    """The streams of the crossed-features study: River's bundled ImageSegments, Phishing and
    Bananas, and RandomRBF over several (model, sample) seeds."""
    from river import datasets

    out = {"ImageSegments": lambda: datasets.ImageSegments(), "Phishing": lambda: datasets.Phishing(),
           "Bananas": lambda: datasets.Bananas()}
    for s in seeds:
        out[f"RandomRBF-{rbf_n} seed {s}"] = lambda s=s: datasets.synth.RandomRBF(seed_model=s, seed_sample=s).take(rbf_n)
    return out


def crossed_study(reductions, rbf_n: int, seeds) -> dict:
    """Progressive accuracy of each reduction with its defaults and with every pair of features
    crossed (``options={"quadratic": "  "}``), River's two models beside them."""
    from river import evaluate, linear_model, metrics, multiclass, preprocessing, tree

    from lomtree_cli.river import Classifier

    makers = {}
    for r in reductions:
        makers[r] = lambda r=r: preprocessing.StandardScaler() | Classifier(reduction=r)
        makers[f"{r} -q pairs"] = lambda r=r: preprocessing.StandardScaler() | Classifier(
            reduction=r, options={"quadratic": "  "})
    makers["River OvR LR"] = lambda: preprocessing.StandardScaler() | multiclass.OneVsRestClassifier(
        linear_model.LogisticRegression())
    makers["River HoeffdingTree"] = lambda: preprocessing.StandardScaler() | tree.HoeffdingTreeClassifier()
    out = {}
    for sname, data in study_streams(rbf_n, seeds).items():
        row = {}
        for mname, make in makers.items():
            row[mname] = round(100 * evaluate.progressive_val_score(data(), make(), metrics.Accuracy()).get(), 2)
        print(f"{sname:26s} " + "  ".join(f"{m} {a:.2f}" for m, a in row.items()), flush=True)
        out[sname] = row
    return out


def models(reductions):
    from river import linear_model, multiclass, preprocessing, tree

    from lomtree_cli.river import Classifier

    out = {f"lomtree {r}": (lambda r=r: preprocessing.StandardScaler() | Classifier(reduction=r)) for r in reductions}
    if "oaa" in reductions:  # every pair of the (default-namespace) features crossed, ``-q "  "``
        out["lomtree oaa -q pairs"] = lambda: preprocessing.StandardScaler() | Classifier(
            reduction="oaa", options={"quadratic": "  "})
    out["River OvR LogisticRegression"] = lambda: preprocessing.StandardScaler() | multiclass.OneVsRestClassifier(
        linear_model.LogisticRegression())
    out["River HoeffdingTree"] = lambda: preprocessing.StandardScaler() | tree.HoeffdingTreeClassifier()
    return out


def timed(make, data, repeats: int) -> tuple:
    """(µs per predict_one, µs per learn_one): best of ``repeats`` runs of the progressive loop."""
    rows = list(data())
    best_p = best_l = float("inf")
    for _ in range(repeats):
        model = make()
        tp = tl = 0.0
        for x, y in rows:
            t0 = time.process_time()
            model.predict_one(x)
            t1 = time.process_time()
            model.learn_one(x, y)
            tl += time.process_time() - t1
            tp += t1 - t0
        best_p, best_l = min(best_p, tp / len(rows)), min(best_l, tl / len(rows))
    return 1e6 * best_p, 1e6 * best_l


def key_costs(n: int = 5000, repeats: int = 3) -> dict:
    """µs per learn_one / predict_one, oaa at bits 24, string keys against integer keys."""
    import numpy as np

    from lomtree_cli import Classifier

    rng = np.random.default_rng(0)
    cols = rng.integers(0, 1000, size=(n, 10))
    vals = rng.random((n, 10)) + 0.5
    y = rng.integers(1, 11, size=n).tolist()
    out = {}
    for kind, key in (("str", lambda c: f"f{c}"), ("int", lambda c: int(c))):
        xs = [{key(c): float(v) for c, v in zip(cols[i], vals[i])} for i in range(n)]
        learn = predict = float("inf")
        for _ in range(repeats):
            clf = Classifier(reduction="oaa", classes=10, bits=24)
            for i in range(100):  # kernels loaded, names met
                clf.learn_one(xs[i], y[i])
            t = time.process_time()
            for i in range(n):
                clf.learn_one(xs[i], y[i])
            learn = min(learn, (time.process_time() - t) / n)
            t = time.process_time()
            for i in range(n):
                clf.predict_one(xs[i])
            predict = min(predict, (time.process_time() - t) / n)
        out[kind] = {"learn_one_us": round(1e6 * learn, 1), "predict_one_us": round(1e6 * predict, 1)}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rbf-n", type=int, default=20000)
    ap.add_argument("--segments-n", type=int, default=None, help="ImageSegments rows (all 2,310 by default)")
    ap.add_argument("--keys-n", type=int, default=5000, help="calls timed for the dict-key figures")
    ap.add_argument("--reductions", default="oaa,lomtree,plt,cpt")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join("bench", "river.json"))
    ap.add_argument("--crossed-study", default=None, metavar="SEEDS",
                    help="instead: accuracy with and without crossed features, RandomRBF seeds SEEDS (1,7,0)")
    args = ap.parse_args(argv)
    if args.crossed_study:
        res = crossed_study(args.reductions.split(","), args.rbf_n, [int(s) for s in args.crossed_study.split(",")])
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
        return
    from river import evaluate, metrics

    results = {"streams": {}, "keys": key_costs(args.keys_n)}
    for sname, data in streams(args.rbf_n, args.segments_n).items():
        rows = {}
        for mname, make in models(args.reductions.split(",")).items():
            acc = evaluate.progressive_val_score(data(), make(), metrics.Accuracy()).get()
            pred_us, learn_us = timed(make, data, args.repeats)
            rows[mname] = {"accuracy": round(100 * acc, 2), "predict_one_us": round(pred_us, 1),
                           "learn_one_us": round(learn_us, 1)}
            print(f"{sname:18s} {mname:30s} accuracy {100 * acc:6.2f}%  predict_one {pred_us:7.1f} µs  "
                  f"learn_one {learn_us:7.1f} µs", flush=True)
        results["streams"][sname] = rows
    for kind, r in results["keys"].items():
        print(f"dict keys {kind}: learn_one {r['learn_one_us']} µs, predict_one {r['predict_one_us']} µs "
              f"(oaa, bits 24, 10 features)")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
