"""Benchmark of the Conditional Probability Tree.

Compares, by progressive validation (predict, then learn, one pass), the squared loss
``(1 - P(y|x))^2`` and the 0/1 loss of

* ``cpt``      -- ``-r cpt`` (alpha rule insertion, exact best-first argmax),
* ``cpt-rand`` -- ``-r cpt --cpt-random-insert`` (the paper's random-tree baseline),
* ``oaa``      -- one-against-all with logistic loss, ``P(y|x) = s_y / sum_j s_j`` with
  ``s_j = sigmoid(f_j)`` (the normalisation of ``OneAgainstAll.predict_top``); the progressive
  probability of the true label is computed by a bench-only numba kernel (``_oaa_prob_process``)
  that scores all k regressors, records ``P(y|x)`` and then learns exactly as ``oaa_process`` does,
* ``table``    -- ``-r table`` (empirical label frequencies),

plus a held-out test evaluation (``process`` with training off) and the train time of the learning
calls only (inputs are parsed once beforehand; parse time is reported separately).

Then the time per example of CPT against the number of labels (10^2..10^5) on a generated stream,
written to ``bench/cpt_scaling.png`` and ``bench/cpt_scaling.md``.

Usage::

    python -m data_scripts.bench_cpt datasets     # Sector + KJV next-word -> bench/cpt_results.md
    python -m data_scripts.bench_cpt tune         # small alpha x learning-rate grid on Sector
    python -m data_scripts.bench_cpt scaling      # bench/cpt_scaling.{png,md}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
from numba import njit

from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.kernels import linear as K
from lomtree_cli.learner import LinearLearner
from lomtree_cli.parsing import iter_batches
from lomtree_cli.reductions import get_reduction_class
from lomtree_cli.kernels.oaa_kernels import clip_argmax, scores_all

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")


@njit(cache=True)
def _oaa_prob_process(lin, indptr, indices, values, labels, weights, train, k, preds, losses, scratch):
    """OAA predict-then-learn that also records iw * (1 - P(y|x))^2 (logistic: normalised sigmoids)."""
    n = labels.shape[0]
    logistic = lin.hp[K.HP_LOSS] == K.LOSS_LOGISTIC
    for i in range(n):
        s = indptr[i]
        e = indptr[i + 1]
        scores_all(lin, indices, values, s, e, k, scratch)
        preds[i] = clip_argmax(lin, scratch, k) + 1
        tot = 0.0
        for c in range(k):
            f = scratch[c]
            tot += 1.0 / (1.0 + math.exp(-f)) if logistic else (f + 1.0) * 0.5
        y = labels[i] - 1
        if y >= 0:
            py = 0.0
            if y < k and tot > 0.0:
                f = scratch[y]
                py = (1.0 / (1.0 + math.exp(-f)) if logistic else (f + 1.0) * 0.5) / tot
            losses[i] = weights[i] * (1.0 - py) * (1.0 - py)
        if train[i]:
            iw = weights[i]
            for c in range(k):
                K.learn(lin, indices, values, s, e, c, 1.0 if c == y else -1.0, iw, scratch[c])
            K.end_example(lin, iw)


def load_batches(path, fmt, bits, limit=None):
    t = time.perf_counter()
    out, n = [], 0
    for b in iter_batches([path], InputConfig(format=fmt, bits=bits), chunk_bytes=1 << 20):
        if limit is not None and n + len(b) > limit:
            b = b.subset(np.arange(len(b)) < limit - n)
        out.append(b)
        n += len(b)
        if limit is not None and n >= limit:
            break
    return out, time.perf_counter() - t


class OAAProb:
    """OAA with the progressive P(y|x) kernel above."""

    name = "oaa"

    def __init__(self, k, bits, eta, loss="logistic"):
        self.k = k
        self.learner = LinearLearner(LearnerConfig(loss=loss, learning_rate=eta), bits, k, K.MODE_STRIDE)

    def set_need_predictions(self, need):
        """OAA computes every score anyway: its argmax is free."""

    def process(self, batch, train):
        n = len(batch)
        preds = np.zeros(n, np.int64)
        losses = np.zeros(n)
        _oaa_prob_process(self.learner.arrays, batch.indptr, batch.indices, batch.values, batch.labels,
                          batch.weights, np.ascontiguousarray(train), self.k, preds, losses,
                          np.zeros(self.k))
        return preds, losses


def make(kind, bits, eta=None, alpha=0.5, k=None, loss="squared"):
    if kind == "oaa":
        return OAAProb(k, bits, eta if eta is not None else 0.5)
    name = "cpt" if kind.startswith("cpt") else kind
    rcfg = ReductionConfig(name=name, cpt_alpha=alpha, cpt_random_insert=kind == "cpt-rand")
    cls = get_reduction_class(name)
    learner = LinearLearner(LearnerConfig(loss=loss, learning_rate=eta), bits, cls.n_models_for(rcfg), cls.slot_mode)
    return cls(rcfg, learner)


def run_stream(red, batches, train=True):
    """(weighted squared loss, 0/1 loss, seconds) over the batches, progressive when training."""
    L = Z = W = 0.0
    t = time.perf_counter()
    for b in batches:
        tr = (b.labels > 0) & (b.weights > 0) if train else np.zeros(len(b), bool)
        p, lo = red.process(b, tr)
        lab = b.labels > 0
        L += float(lo[lab].sum())
        Z += float(b.weights[lab & (p != b.labels)].sum())
        W += float(b.weights[lab].sum())
    return L / W, Z / W, time.perf_counter() - t


def warm_up(bits):
    """Compile every kernel on a tiny batch so the timings exclude JIT (cached on disk anyway)."""
    b = ExampleBatch(labels=np.array([1, 2], np.int64), weights=np.ones(2), indptr=np.array([0, 1, 2]),
                     indices=np.array([1, 2], np.int64), values=np.ones(2, np.float32),
                     line_numbers=np.array([1, 2]))
    for kind in ("cpt", "cpt-rand", "table"):
        make(kind, 4).process(b, np.ones(2, bool))
    make("oaa", 4, k=2).process(b, np.ones(2, bool))


DATASETS = {
    "sector": dict(train=os.path.join(BENCH, "data/sector.train.libsvm"),
                   test=os.path.join(BENCH, "data/sector.test.libsvm"), fmt="libsvm", k=105, bits=20,
                   limit=None),
    "kjv_nextword": dict(train=os.path.join(BENCH, "data/kjv_nextword.train.vw"),
                         test=os.path.join(BENCH, "data/kjv_nextword.test.vw"), fmt="vw", k=5001, bits=22,
                         limit=200_000, test_limit=20_000),
}


def cmd_datasets(args):
    warm_up(4)
    rows = []
    for name in args.data:
        d = DATASETS[name]
        if not os.path.exists(d["train"]):
            alt = os.path.join(BENCH, f"data/{name}.train.libsvm")
            d = dict(d, train=alt, test=alt.replace(".train.", ".test."))
        tr, tparse = load_batches(d["train"], d["fmt"], d["bits"], d.get("limit"))
        te, _ = load_batches(d["test"], d["fmt"], d["bits"], d.get("test_limit"))
        n_train = sum(len(b) for b in tr)
        print(f"{name}: {n_train} train examples parsed in {tparse:.1f}s", file=sys.stderr)
        for kind in args.kinds:
            alpha = args.alpha
            eta = args.eta_oaa if kind == "oaa" else args.eta
            loss = "logistic" if kind == "oaa" else args.cpt_loss
            red = make(kind, d["bits"], eta=eta, alpha=alpha, k=d["k"], loss=loss)
            sq, zo, secs = run_stream(red, tr)
            tsq, tzo, tsecs = run_stream(red, te, train=False)
            extra = {}
            if hasattr(red, "depth"):
                extra = {"labels": red.n_labels, "depth": red.depth()}
            row = dict(data=name, method=kind, n_train=n_train, prog_sq=sq, prog_01=zo, train_s=secs,
                       us_per_ex=1e6 * secs / n_train, test_sq=tsq, test_01=tzo, test_s=tsecs,
                       eta=eta, alpha=alpha if kind == "cpt" else None, loss=loss, **extra)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    out = os.path.join(BENCH, "cpt_results.md")
    with open(out, "w") as f:
        f.write("# CPT vs OAA vs random tree vs table (progressive, one pass)\n\n")
        f.write(f"Command: `python -m data_scripts.bench_cpt datasets {' '.join(sys.argv[2:])}`\n\n")
        f.write("| data | method | loss | eta | train ex | prog. sq. loss | prog. 0/1 | test sq. loss | test 0/1 | "
                "train s | us/ex | labels | depth |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['data']} | {r['method']} | {r['loss'] if r['method'] != 'table' else '-'} | {r['eta']} | {r['n_train']} | {r['prog_sq']:.4f} | {r['prog_01']:.4f} | "
                    f"{r['test_sq']:.4f} | {r['test_01']:.4f} | {r['train_s']:.2f} | {r['us_per_ex']:.1f} | "
                    f"{r.get('labels', '')} | {r.get('depth', '')} |\n")
    print(open(out).read())


def cmd_tune(args):
    warm_up(4)
    d = DATASETS["sector"]
    tr, _ = load_batches(d["train"], d["fmt"], d["bits"])
    te, _ = load_batches(d["test"], d["fmt"], d["bits"])
    print("| alpha | eta | prog. sq. | prog. 0/1 | test sq. | test 0/1 | depth |\n|---|---|---|---|---|---|---|")
    for alpha in args.alphas:
        for eta in args.etas:
            red = make("cpt", d["bits"], eta=eta, alpha=alpha)
            sq, zo, _ = run_stream(red, tr)
            tsq, tzo, _ = run_stream(red, te, train=False)
            print(f"| {alpha} | {eta} | {sq:.4f} | {zo:.4f} | {tsq:.4f} | {tzo:.4f} | {red.depth()} |", flush=True)
    for eta in args.etas:
        red = make("oaa", d["bits"], eta=eta, k=d["k"], loss="logistic")
        sq, zo, _ = run_stream(red, tr)
        tsq, tzo, _ = run_stream(red, te, train=False)
        print(f"| oaa | {eta} | {sq:.4f} | {zo:.4f} | {tsq:.4f} | {tzo:.4f} | |", flush=True)


def synthetic_batches(rng, n_labels, labels, bits, chunk=4096):
    """Each label owns 3 hashed features; every example adds 2 noise features and the constant."""
    mask = (1 << bits) - 1
    out = []
    for s in range(0, len(labels), chunk):
        y = labels[s:s + chunk]
        m = len(y)
        own = (y[:, None] * np.array([0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D])[None, :]) & mask
        noise = rng.integers(0, mask + 1, size=(m, 2))
        const = np.full((m, 1), 11650396 & mask)
        idx = np.concatenate([own, noise, const], axis=1).astype(np.int64)
        out.append(ExampleBatch(labels=y.astype(np.int64), weights=np.ones(m), indptr=np.arange(0, 6 * m + 1, 6),
                                indices=idx.ravel(), values=np.ones(6 * m, np.float32),
                                line_numbers=np.arange(1, m + 1)))
    return out


def cmd_scaling(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warm_up(4)
    rng = np.random.default_rng(0)
    bits = 22
    rows = []
    for n_labels in args.labels:
        # phase 1: every label once (insertion), untimed for the steady-state figure
        ins = synthetic_batches(rng, n_labels, rng.permutation(n_labels) + 1, bits)
        steady = synthetic_batches(rng, n_labels, rng.integers(1, n_labels + 1, size=args.steady), bits)
        for kind in ("cpt", "oaa"):
            if kind == "oaa" and n_labels > args.oaa_max:
                continue
            red = make(kind, bits, k=n_labels, loss="logistic" if kind == "oaa" else "squared")
            # training as `lomtree train --quiet` runs it: P(y|x) for the loss, no progressive argmax
            red.set_need_predictions(False)
            _, _, t_ins = run_stream(red, ins)
            sq, zo, t = run_stream(red, steady)
            # prediction: the exact best-first argmax (CPT) / all k scores (OAA), no learning
            red.set_need_predictions(True)
            _, _, tp = run_stream(red, steady, train=False)
            row = dict(method=kind, labels=n_labels, us_per_ex=1e6 * t / args.steady,
                       predict_us_per_ex=1e6 * tp / args.steady,
                       insert_us_per_label=1e6 * t_ins / n_labels, prog_sq=sq,
                       depth=red.depth() if kind == "cpt" else None)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    cpt = [r for r in rows if r["method"] == "cpt"]
    oaa = [r for r in rows if r["method"] == "oaa"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["labels"] for r in cpt], [r["us_per_ex"] for r in cpt], "o-", label="CPT (train, steady state)")
    ax.plot([r["labels"] for r in cpt], [r["predict_us_per_ex"] for r in cpt], "v:",
            label="CPT (predict: exact argmax)")
    ax.plot([r["labels"] for r in cpt], [r["insert_us_per_label"] for r in cpt], "s--",
            label="CPT (first sight = insertion)")
    if oaa:
        ax.plot([r["labels"] for r in oaa], [r["us_per_ex"] for r in oaa], "^-", label="OAA logistic")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of labels seen")
    ax.set_ylabel("microseconds per example")
    ax.set_title("CPT time per example vs labels (6 features/example)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(BENCH, "cpt_scaling.png"), dpi=120)
    with open(os.path.join(BENCH, "cpt_scaling.md"), "w") as f:
        f.write("# CPT: time per example vs number of labels\n\n")
        f.write(f"Command: `python -m data_scripts.bench_cpt scaling {' '.join(sys.argv[2:])}`\n\n")
        f.write("Generated stream, 6 features per example (3 label-specific, 2 noise, constant), -b 22. "
                "Phase 1 shows every label once in random order (insertions); phase 2 "
                f"({args.steady} examples, uniform labels) is the steady state. Train times are the "
                "compiled P(y|x) + learn calls as `lomtree train --quiet` makes them (no progressive argmax); "
                "predict times are the exact best-first argmax (CPT) or all k scores (OAA) on the same "
                "steady-state examples, no learning. Parsing excluded.\n\n")
        f.write("| method | labels | depth | ceil(log2 labels) | train us/example (steady) | predict us/example | "
                "us/label (insertion phase) | prog. sq. loss (steady) |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['method']} | {r['labels']} | {r['depth'] if r['depth'] is not None else ''} | "
                    f"{math.ceil(math.log2(r['labels']))} | {r['us_per_ex']:.2f} | {r['predict_us_per_ex']:.2f} | "
                    f"{r['insert_us_per_label']:.2f} | {r['prog_sq']:.4f} |\n")
    print(open(os.path.join(BENCH, "cpt_scaling.md")).read())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("datasets")
    a.add_argument("--data", nargs="+", default=["sector", "kjv_nextword"], choices=list(DATASETS))
    a.add_argument("--kinds", nargs="+", default=["cpt", "cpt-rand", "oaa", "table"])
    a.add_argument("--alpha", type=float, default=0.5)
    a.add_argument("--eta", type=float, default=None)
    a.add_argument("--eta-oaa", type=float, default=None)
    a.add_argument("--cpt-loss", default="squared", choices=["squared", "logistic"])
    t = sub.add_parser("tune")
    t.add_argument("--alphas", type=float, nargs="+", default=[0.25, 0.5, 0.75, 1.0])
    t.add_argument("--etas", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    s = sub.add_parser("scaling")
    s.add_argument("--labels", type=int, nargs="+", default=[100, 1000, 10000, 100000])
    s.add_argument("--steady", type=int, default=20000)
    s.add_argument("--oaa-max", type=int, default=10000)
    args = ap.parse_args(argv)
    {"datasets": cmd_datasets, "tune": cmd_tune, "scaling": cmd_scaling}[args.cmd](args)


if __name__ == "__main__":
    main()
