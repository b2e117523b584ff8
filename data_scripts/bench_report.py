"""Tables (Markdown) and plots (PNG) from ``bench/results.json`` (see ``data_scripts.bench``).

``write_all(results, out_dir)`` writes ``results.md`` and, when matplotlib is importable,
``test_error.png``, ``time_vs_k.png``, ``oaa_vs_lomtree_test_time.png`` and ``plt_cost_vs_k.png``
(per-example train / predict cost of ``-r plt`` next to OAA vs k).  Everything here
is a pure function of the results dict, so ``python -m data_scripts.bench --report-only``
re-renders them without running anything.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: plot file names (relative to the output directory)
PLOTS = {
    "error": "test_error.png",
    "time": "time_vs_k.png",
    "ratio": "oaa_vs_lomtree_test_time.png",
    "plt_cost": "plt_cost_vs_k.png",
}

#: display names
NAMES = {"oaa": "OAA", "lomtree": "LOMtree", "filter": "Filter tree", "rtree": "Rtree", "cpt": "CPT",
         "table": "label-frequency", "plt": "PLT", "log_multi": "VW --log_multi", "ect": "VW --ect"}
SYSTEM_ORDER = ["oaa", "plt", "lomtree", "filter", "rtree", "cpt", "table"]
VW_ORDER = ["oaa", "log_multi", "ect"]
#: the accuracy anchors (data_scripts/bench_anchors.py), in table order
ANCHOR_ORDER = ["napkinxc_plt", "napkinxc_hsm", "napkinxc_bhsm", "fasttext_hs", "fasttext_softmax"]
ANCHOR_NAMES = {"napkinxc_plt": "napkinXC PLT", "napkinxc_hsm": "napkinXC HSM",
                "napkinxc_bhsm": "napkinXC binary HSM", "fasttext_hs": "fastText hs",
                "fasttext_softmax": "fastText softmax"}
#: the reductions whose per-example cost grows with log k (OAA: with k; the table: constant)
LOG_TIME = ["plt", "cpt", "filter", "rtree", "lomtree"]


def is_anchor(rec: dict) -> bool:
    return rec.get("system") in ("napkinxc", "fasttext")


def display_name(rec: dict) -> str:
    if rec.get("system") == "vw":
        return "VW --" + rec["reduction"]
    if is_anchor(rec):
        return ANCHOR_NAMES.get(rec["reduction"], rec["reduction"])
    return NAMES.get(rec["reduction"], rec["reduction"])


def fmt_pct(x: float | None, digits: int = 2) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def fmt_error_ci(rec: dict) -> str:
    """``'16.19 [14.9, 17.5]'``: test error % with its 95 % interval."""
    if rec.get("error") is None:
        return ""
    return f"{100 * rec['error']:.2f} [{100 * rec['ci_low']:.1f}, {100 * rec['ci_high']:.1f}]"


def fmt_num(x, digits: int = 2) -> str:
    if x is None:
        return ""
    if isinstance(x, float) and math.isnan(x):
        return ""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def md_table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A GitHub Markdown table; ``align`` is one char per column (``l``/``r``), default l then r."""
    align = align or ("l" + "r" * (len(headers) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(lines)


def _sort_key(rec: dict):
    if rec.get("system") == "vw":
        return (1, VW_ORDER.index(rec["reduction"]) if rec["reduction"] in VW_ORDER else 9)
    if is_anchor(rec):
        return (2, ANCHOR_ORDER.index(rec["reduction"]) if rec["reduction"] in ANCHOR_ORDER else 9)
    return (0, SYSTEM_ORDER.index(rec["reduction"]) if rec["reduction"] in SYSTEM_ORDER else 9)


def status_cell(rec: dict) -> str:
    """The cell of a run that has no error: ``NOT INSTALLED (...)``, ``SKIPPED: why``, ``FAILED``..."""
    st = rec.get("status", "?")
    if st == "skipped":
        return "skipped: " + rec.get("message", "")
    if st == "not installed":
        return "NOT INSTALLED (" + rec.get("message", "").split(" (pip")[0] + ")"
    return st.upper()


def passes_cell(rec: dict) -> str:
    """``1``, ``5 (3 used)``; napkinXC: ``batch``; fastText: its epochs."""
    opts = rec.get("options", {})
    if rec.get("system") == "napkinxc":
        return "batch"
    if rec.get("system") == "fasttext":
        return f"{opts.get('epoch', 1)} epoch" + ("s" if opts.get("epoch", 1) != 1 else "")
    passes = f"{opts.get('passes', 1)}"
    if rec.get("passes_used") not in (None, opts.get("passes", 1)):
        passes += f" ({rec['passes_used']} used)"
    return passes


def results_table(results: list[dict]) -> str:
    """One row per run on the real datasets: error with CI, paper, times, memory."""
    rows = []
    datasets = []
    for r in results:
        if not r.get("sweep") and r.get("dataset") not in datasets:
            datasets.append(r.get("dataset"))
    for ds in datasets:
        for var in ("1pass", "tuned"):
            recs = sorted((r for r in results if r.get("dataset") == ds and r.get("variant") == var
                           and not r.get("sweep")), key=_sort_key)
            for r in recs:
                opts = r.get("options", {})
                passes = passes_cell(r)
                extra = ", ".join(f"{k}={v}" for k, v in opts.items()
                                  if k not in ("bits", "passes", "epoch", "verbose"))
                if r.get("status") != "ok":
                    rows.append([ds, display_name(r), passes, opts.get("bits", ""), extra,
                                 status_cell(r), "", "", "", "", ""])
                    continue
                ntest = r["test"].get("examples") or 0
                rows.append([
                    ds, display_name(r), passes, opts.get("bits", ""), extra, fmt_error_ci(r),
                    "" if r.get("paper_error") is None or var != "tuned" else f"{r['paper_error']:.2f}",
                    fmt_num(r["train"]["seconds"]),
                    fmt_num(1e6 * r["test"]["seconds"] / ntest if ntest else None, 1),
                    fmt_num(r["train"]["peak_rss_mb"], 0), fmt_num(r["test"]["peak_rss_mb"], 0),
                ])
    return md_table(["dataset", "learner", "passes", "bits", "options", "test error % [95% CI]",
                     "paper %", "train s", "test µs/ex", "train MB", "test MB"], rows, "lllrlrrrrrr")


def comparison_table(comps: list[dict]) -> str:
    rows = []
    for c in comps:
        verdict = "ok" if c["within_1_point"] else f"MISS by {c['diff_points'] - 1:.2f}"
        rows.append([c["dataset"], c["variant"], f"{NAMES.get(c['reduction'])} vs VW --{c['vw']}",
                     fmt_pct(c["ours_error"]), fmt_pct(c["vw_error"]), f"{c['diff_points']:+.2f}", verdict,
                     _two(c["train_ratio"], c.get("train_cpu_ratio")), _two(c["test_ratio"], c.get("test_cpu_ratio"))])
    return md_table(["dataset", "variant", "pair", "ours %", "VW %", "diff (points)", "target: ≤ +1 point",
                     "train speed ours/VW: wall (CPU)", "test speed ours/VW: wall (CPU)"], rows, "lllrrrlrr")


def _two(wall, cpu) -> str:
    return f"{wall:.2f}" + ("" if cpu is None else f" ({cpu:.2f})")


def foundation_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        if r["unit"] == "s":
            ours = "" if r["ours"] is None else f"{r['ours']:.2f} s"
            vw = "" if r["vw"] is None else f"{r['vw']:.2f} s"
            ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f} (VW time / ours)"
        else:
            ours = "" if r["ours"] is None else f"{r['ours']:,.0f} {r['unit']}"
            vw = "" if r["vw"] is None else f"{r['vw']:,.0f} {r['unit']}"
            ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}"
        target = r.get("target", "")
        if target:
            target += " ✓" if r.get("meets_target") else " ✗"
        out.append([r["what"], ours, f"{vw} ({r.get('vw_what', '')})" if vw else "", ratio, target])
    return md_table(["measurement (whole commands)", "lomtree", "VW", "ratio ours/VW", "target"], out, "lrrrl")


def throughput_table(rows: list[dict]) -> str:
    """Median whole-command and steady-state (start-up removed) rates, ours and VW."""
    names = {"oaa": "OAA", "lomtree": "LOMtree", "filter": "Filter tree"}

    def rate(x):
        return "" if x is None else f"{x:,.0f}"

    out = []
    for r in rows:
        vw = f"VW --{r['vw_reduction']}" if r.get("vw_reduction") else ""
        out.append([f"{names.get(r['reduction'], r['reduction'])} {r['part']}", f"{r['file']} ({r['examples']:,})",
                    vw, rate(r["ours_whole_ex_s"]), rate(r["vw_whole_ex_s"]), fmt_num(r.get("ratio_whole")),
                    fmt_num(r.get("ratio_paired")),
                    rate(r["ours_steady_ex_s"]), rate(r["vw_steady_ex_s"]), fmt_num(r.get("ratio_steady")),
                    rate(r.get("daemon_1_ex_s")), rate(r.get("daemon_8_ex_s")),
                    "" if r.get("ratio_whole_vw_nop") is None else
                    _two(r["ratio_whole_vw_nop"], r.get("ratio_paired_vw_nop")),
                    fmt_num(r.get("ours_fixed_seconds")),
                    fmt_num(r.get("vw_fixed_seconds"))])
    return md_table(["command", "file (examples)", "vs", "ours ex/s (whole)", "VW ex/s (whole)", "ratio whole",
                     "ratio paired", "ours ex/s (steady)", "VW ex/s (steady)", "ratio steady", "daemon ex/s (1 client)",
                     "daemon ex/s (8 clients)", "ratio vs VW without -p", "ours 10-line s", "VW 10-line s"],
                    out, "lllrrrrrrrrrrrr")


def sweep_table(results: list[dict]) -> str:
    recs = [r for r in results if r.get("sweep")]
    ks = sorted({int(r["k"]) for r in recs})
    reds = [x for x in SYSTEM_ORDER if any(r["reduction"] == x for r in recs)]
    rows = []
    for k in ks:
        for red in reds:
            r = next((x for x in recs if int(x["k"]) == k and x["reduction"] == red), None)
            if r is None:
                continue
            if r.get("status") != "ok":
                rows.append([f"{k:,}", NAMES[red], r.get("status", "").upper(), "", "", "", ""])
                continue
            rows.append([f"{k:,}", NAMES[red], f"{r['train'].get('examples', 0):,}",
                         f"{r['test'].get('examples', 0):,}",
                         fmt_num(r.get("train_us_per_ex"), 1), fmt_num(r.get("test_us_per_ex"), 1),
                         fmt_num(r["train"]["peak_rss_mb"], 0)])
    return md_table(["k", "learner", "train ex", "predicted ex", "train µs/ex", "predict µs/ex",
                     "train MB"], rows, "llrrrrr")


def ratio_rows(results: list[dict]) -> list[tuple[int, float, dict]]:
    """(k, OAA test µs/ex / LOMtree test µs/ex, {other tree: ratio}) for every k of the sweep."""
    recs = [r for r in results if r.get("sweep") and r.get("status") == "ok"]
    out = []
    for k in sorted({int(r["k"]) for r in recs}):
        by = {r["reduction"]: r.get("test_us_per_ex") for r in recs if int(r["k"]) == k}
        if by.get("oaa") and by.get("lomtree"):
            out.append((k, by["oaa"] / by["lomtree"],
                        {red: by["oaa"] / v for red, v in by.items() if v and red != "oaa"}))
    return out


# ---------------------------------------------------------------------------------------------
# the main table, the anchors and the PLT cost

def _by(results: list[dict], ds: str, variant: str) -> dict:
    """``{display name: record}`` of the non-sweep runs of one dataset and variant; a batch
    learner (napkinXC) has only a one-pass record and stands in both variants."""
    out = {}
    for r in sorted(results, key=_sort_key):
        if r.get("sweep") or r.get("dataset") != ds:
            continue
        if r.get("variant") == variant or (r.get("system") == "napkinxc" and r.get("variant") == "1pass"):
            out[display_name(r)] = r
    return out


def _datasets(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        if not r.get("sweep") and r.get("dataset") not in out:
            out.append(r.get("dataset"))
    return out


def _learners(results: list[dict]) -> list[str]:
    out = []
    for r in sorted((r for r in results if not r.get("sweep")), key=_sort_key):
        if display_name(r) not in out:
            out.append(display_name(r))
    return out


def main_cell(rec: dict | None) -> str:
    """``'12.69 (3.1 s / 0.9 s)'``: test error %, whole train and test command seconds; a run
    without an error shows its status (``skipped: ...``, ``NOT INSTALLED (...)``)."""
    if rec is None:
        return ""
    if rec.get("status") == "skipped":
        return "skipped"  # the reasons are listed under the table (main_notes)
    if rec.get("status") != "ok":
        return status_cell(rec)
    return f"{100 * rec['error']:.2f} ({fmt_num(rec['train']['seconds'], 1)} s / {fmt_num(rec['test']['seconds'], 1)} s)"


def main_table(results: list[dict], variant: str = "1pass") -> str:
    """One row per dataset, one column per learner: every lomtree reduction, VW, napkinXC, fastText."""
    names = _learners(results)
    rows = []
    for ds in _datasets(results):
        by = _by(results, ds, variant)
        if not any(r.get("variant") == variant for r in by.values()):
            continue
        k = next((r.get("k") for r in by.values() if r.get("k")), "")
        rows.append([f"{ds} ({k:,})" if isinstance(k, int) else ds] + [main_cell(by.get(n)) for n in names])
    return md_table(["task (k)"] + names, rows)


def main_notes(results: list[dict]) -> list[str]:
    """One line per distinct reason a run was skipped: ``'skipped: fastText hs on sector, ...: why'``
    (``(tuned)`` marks a run skipped in the tuned variant only)."""
    runs: dict[str, dict[tuple, set]] = {}
    for r in results:
        if r.get("status") == "skipped" and not r.get("sweep"):
            who = runs.setdefault(r.get("message", ""), {})
            who.setdefault((display_name(r), r.get("dataset")), set()).add(r.get("variant"))
    return [f"skipped: {', '.join(f'{n} on {d}' + (' (tuned)' if v == {'tuned'} else '') for (n, d), v in who.items())}"
            f": {why}" for why, who in runs.items()]


def best_log_time(by: dict) -> dict | None:
    """The most accurate of our log-time reductions among ``by``'s records (None: none ran)."""
    recs = [r for r in by.values() if r.get("system") == "lomtree" and r.get("reduction") in LOG_TIME
            and r.get("status") == "ok"]
    return min(recs, key=lambda r: r["error"]) if recs else None


def pick_lines(results: list[dict]) -> list[str]:
    """Per task: the most accurate log-time reduction, OAA and the best anchor (one pass)."""
    out = []
    for ds in _datasets(results):
        by = _by(results, ds, "1pass")
        best = best_log_time(by)
        if best is None:
            continue
        oaa = by.get("OAA")
        anchors = [r for r in by.values() if is_anchor(r) and r.get("status") == "ok"]
        a = min(anchors, key=lambda r: r["error"]) if anchors else None
        line = f"{ds}: most accurate log-time reduction `-r {best['reduction']}` {100 * best['error']:.2f} %"
        if oaa and oaa.get("status") == "ok":
            line += f" (OAA {100 * oaa['error']:.2f} %, {100 * (best['error'] - oaa['error']):+.2f} points)"
        if a:
            line += f"; best anchor {display_name(a)} {100 * a['error']:.2f} %"
        out.append(line)
    return out


#: which reduction for which situation (README-ready; the per-task lines and the cost table are the evidence)
PICK_GUIDE = (
    "`-r plt` is the accurate log-time reduction: within 1 point of OAA's one-pass error on every task where "
    "both ran (the lines above), equal to OAA for k <= 32 (one flat node). It is also the most expensive tree per "
    "example (beam 10 x arity 32 regressors per level), so it beats OAA on time only once k is large: {cross}. "
    "Use `-r oaa` when k * examples is affordable (up to a few thousand classes); `-r cpt` (or `-r filter`) "
    "when training time on a large k matters more than the last points of error; LOMtree and Rtree are kept "
    "for the paper's comparison; `-r table` is the label-frequency baseline.")


def crossover_text(rows: list[dict]) -> str:
    """Where PLT's per-example train / predict cost drops below OAA's in the sweep (``plt_cost_rows``)."""
    if not rows:
        return "see the per-example cost table"
    parts = []
    ks = ", ".join(f"{r['k']:,}" for r in rows)
    for part, what in (("train", "training"), ("test", "prediction")):
        k = next((r["k"] for r in rows if r[f"{part}_ratio"] and r[f"{part}_ratio"] > 1), None)
        parts.append(f"{what} from k = {k:,} in this run's sweep" if k else f"{what} at none of k = {ks}")
    return "cheaper than OAA for " + " and ".join(parts)


def anchor_rows(results: list[dict]) -> list[dict]:
    """Per task: napkinXC binary HSM against lomtree ``-r plt`` (one pass and
    tuned): test errors, whole-command training seconds and the ratio napkinXC fit / plt train."""
    out = []
    for ds in _datasets(results):
        one, tuned = _by(results, ds, "1pass"), _by(results, ds, "tuned")
        bh = one.get("napkinXC binary HSM")
        p1, pt = one.get("PLT"), tuned.get("PLT")
        if bh is None or bh.get("status") != "ok" or p1 is None or p1.get("status") != "ok":
            continue
        naps = [r for r in one.values() if r.get("system") == "napkinxc" and r.get("status") == "ok"]
        best_nap = min(naps, key=lambda r: r["error"])
        row = {"dataset": ds, "bhsm_error": bh["error"], "bhsm_fit_seconds": bh["train"]["seconds"],
               "plt_error": p1["error"], "plt_train_seconds": p1["train"]["seconds"],
               "ratio_1pass": bh["train"]["seconds"] / p1["train"]["seconds"],
               "ratio_1pass_cpu": _cpu_ratio(bh["train"], p1["train"]),
               "best_napkinxc": display_name(best_nap), "best_napkinxc_error": best_nap["error"]}
        if pt is not None and pt.get("status") == "ok":
            row.update(plt_tuned_error=pt["error"], plt_tuned_train_seconds=pt["train"]["seconds"],
                       plt_tuned_passes=pt.get("passes_used"),
                       ratio_tuned=bh["train"]["seconds"] / pt["train"]["seconds"],
                       ratio_tuned_cpu=_cpu_ratio(bh["train"], pt["train"]))
        best_plt = min(row["plt_error"], row.get("plt_tuned_error", 1.0))
        row["plt_at_least_bhsm"] = best_plt <= row["bhsm_error"]
        row["plt_vs_best_napkinxc_points"] = 100 * (best_plt - best_nap["error"])
        out.append(row)
    return out


def _cpu_ratio(a: dict, b: dict) -> float | None:
    """CPU seconds (user + sys of the child) of ``a`` / of ``b``, when both are known."""
    return a["cpu_seconds"] / b["cpu_seconds"] if a.get("cpu_seconds") and b.get("cpu_seconds") else None


def _ratio_cell(wall, cpu) -> str:
    return "" if wall is None else f"{wall:.1f}×" + ("" if cpu is None else f" ({cpu:.1f}×)")


def anchor_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        out.append([r["dataset"], fmt_pct(r["bhsm_error"]), fmt_num(r["bhsm_fit_seconds"], 1),
                    fmt_pct(r["plt_error"]), fmt_num(r["plt_train_seconds"], 1),
                    _ratio_cell(r["ratio_1pass"], r.get("ratio_1pass_cpu")),
                    fmt_pct(r.get("plt_tuned_error")),
                    "" if r.get("plt_tuned_passes") is None else str(r["plt_tuned_passes"]),
                    fmt_num(r.get("plt_tuned_train_seconds"), 1),
                    _ratio_cell(r.get("ratio_tuned"), r.get("ratio_tuned_cpu")),
                    "yes" if r["plt_at_least_bhsm"] else "no",
                    f"{r['best_napkinxc']} {fmt_pct(r['best_napkinxc_error'])} ({r['plt_vs_best_napkinxc_points']:+.2f})"])
    return md_table(["task", "napkinXC binary HSM %", "its fit s", "PLT 1 pass %", "train s", "fit / train (CPU)",
                     "PLT tuned %", "passes used", "train s", "fit / train (CPU)", "best PLT ≤ binary HSM",
                     "napkinXC best % (best PLT − it, points)"],
                    out, "lrrrrrrrrrll")


#: the cost constants of ``-r plt`` below ``registry.LARGE_K`` classes (its defaults there)
PLT_BEAM, PLT_ARITY = 10, 32


def plt_constants(k: int) -> tuple[int, int]:
    """(beam, arity) of a single-label ``-r plt`` model over k classes: the registry's defaults."""
    from lomtree_cli.reductions.registry import default

    return int(default("plt", "beam", PLT_BEAM, k=k)), int(default("plt", "arity", PLT_ARITY, k=k))


def plt_cost_text(ks) -> str:
    """What bounds the regressors ``-r plt`` scores per example at each k, from its defaults there."""
    parts = []
    for k in ks:
        b, m = plt_constants(k)
        d = plt_depth(k, m)
        parts.append(f"k={k:,}: beam {b}, arity {m}, {d} level{'s' if d > 1 else ''} (≤ {b * m * d:,})")
    return ("PLT's cost constants: prediction scores at most B·M node scores per level of the label tree "
            "(training: M per level, plus at most B·M candidate leaves where leaves train against the "
            "beam), so at most B·M·depth regressors per example: " + "; ".join(parts)
            + ". OAA scores all k classes. Plot: `bench/plt_cost_vs_k.png`.")


def plt_cost_rows(results: list[dict]) -> list[dict]:
    """Per k of the sweep: OAA's and PLT's per-example train / predict µs and OAA / PLT."""
    recs = [r for r in results if r.get("sweep") and r.get("status") == "ok"]
    out = []
    for k in sorted({int(r["k"]) for r in recs}):
        by = {r["reduction"]: r for r in recs if int(r["k"]) == k}
        o, p = by.get("oaa"), by.get("plt")
        if not o or not p:
            continue
        row = {"k": k, "oaa_examples": o["train"].get("examples"), "plt_examples": p["train"].get("examples"),
               "oaa_test_examples": (o.get("test") or {}).get("examples")}
        for part in ("train", "test"):
            ov, pv = o.get(f"{part}_us_per_ex"), p.get(f"{part}_us_per_ex")
            row[f"oaa_{part}_us"], row[f"plt_{part}_us"] = ov, pv
            row[f"{part}_ratio"] = ov / pv if ov and pv else None
        out.append(row)
    return out


def plt_cost_table(rows: list[dict]) -> str:
    out = [[f"{r['k']:,}", f"{r['oaa_examples'] or 0:,} / {r.get('oaa_test_examples') or 0:,}",
            fmt_num(r["oaa_train_us"], 1), fmt_num(r["oaa_test_us"], 1),
            f"{r['plt_examples'] or 0:,}", fmt_num(r["plt_train_us"], 1), fmt_num(r["plt_test_us"], 1),
            "" if r["train_ratio"] is None else f"{r['train_ratio']:.1f}×",
            "" if r["test_ratio"] is None else f"{r['test_ratio']:.1f}×"] for r in rows]
    return md_table(["k", "OAA train / predict ex", "OAA train µs/ex", "OAA predict µs/ex", "PLT train ex",
                     "PLT train µs/ex", "PLT predict µs/ex", "OAA / PLT train", "OAA / PLT predict"], out)


def plt_depth(k: int, arity: int = PLT_ARITY) -> int:
    """Levels of a balanced ``arity``-ary label tree over ``k`` leaves (>= 1)."""
    d, n = 1, arity
    while n < k:
        d, n = d + 1, n * arity
    return d


def render_markdown(res: dict, plots: list[str] | None = None) -> str:
    m = res.get("machine", {})
    parts = ["## Benchmarks", ""]
    parts.append(f"Made by `{res.get('command', 'make bench')}` "
                 f"(`{res.get('argv', '')}`), {res.get('started', '')}, "
                 f"{res.get('elapsed_seconds', 0) / 60:.1f} min.")
    extra = [f"`{a}`" for a in res.get("anchors_argv", [])] + \
        [f"`{x.get('argv')}` ({x.get('started')}, merged with `--report-only --merge {x.get('file')}`)"
         for x in res.get("merged", [])]
    if extra:
        parts.append("Then, on the same machine: " + "; ".join(extra) + ".")
    parts.append(f"Machine: {m.get('nproc')} CPUs (`nproc`), {m.get('cpu')}, {m.get('memory_gb')} GB RAM, "
                 f"{m.get('os')}; Python {m.get('python')}, numpy {m.get('numpy')}, numba {m.get('numba')}, "
                 f"Vowpal Wabbit {m.get('vowpalwabbit') or 'not installed'}; lomtree kernels: "
                 f"{m.get('kernels', 'numba JIT (cache)')}. Load average at start: "
                 f"{', '.join(f'{x:.1f}' for x in (m.get('loadavg_at_start') or []))}, at the end: "
                 f"{m.get('loadavg_at_end', '?')} (a shared machine: times are indicative; each run's "
                 f"1-minute load average is in `results.json`).")
    parts.append("")
    parts.append("Every number comes from real subprocesses (`lomtree train ... -f M --report R.json`, then "
                 "`lomtree predict -i M TEST -p /dev/null --report R2.json --quiet`; VW: "
                 "`python -m vowpalwabbit --<red> k -b B -d TRAIN -f M`, then `-t -i M -d TEST`), timed as whole "
                 "commands, start-up included, after one warm-up run per reduction. Peak memory is the child's "
                 "`ru_maxrss` (`os.wait4`). Test error: 0/1 loss on the test file with a " + res.get("ci", "") +
                 ". Multi-pass: " + res.get("holdout", "") + ". Ours keeps the best-holdout pass's model, VW "
                 "the last pass's (unless it stopped early). VW gets the same `-b`, `--passes`, `-l`; VW's "
                 "log_multi has no `--max-internal-nodes`.")
    parts.append("")
    avail = res.get("available", {})
    missing = [r for r, s in avail.items() if s != "ok"]
    if missing:
        parts.append("Reductions not available in this build when the suite ran: " +
                     ", ".join(f"`{r}` ({avail[r]})" for r in missing) + ".")
        parts.append("")
    results = res.get("results", [])
    if any(not r.get("sweep") for r in results):
        parts += ["### Main table: test error % (whole train s / whole test s)", "",
                  "One pass (napkinXC: batch, liblinear per node; fastText: 1 epoch):", "",
                  main_table(results, "1pass"), "",
                  "Tuned passes (lomtree and VW: the configs' `[tuned]` passes; fastText: the same number of "
                  "epochs as `-r plt`'s tuned passes; napkinXC: its batch run again):", "",
                  main_table(results, "tuned"), ""] + [f"- {x}" for x in main_notes(results)] + ["",
                  "napkinXC: `PLT()`, `HSM()` and binary HSM `HSM(max_leaves=2)`, defaults but `threads=1`, "
                  "on the same `.vw` files hashed by lomtree's parser at `-b 24`; fastText: `train_supervised("
                  "loss='hs'|'softmax', dim=100, thread=1)`, feature names as words (values dropped, hence no "
                  "Sector, Letter, Pendigits). Times are whole subprocesses (start-up and reading included) on a "
                  "shared 2-core machine: indicative (`data_scripts/bench_anchors.py`).", ""]
        picks = pick_lines(results)
        if picks:
            parts += ["Which reduction to pick:", ""] + [f"- {x}" for x in picks] + \
                ["", PICK_GUIDE.format(cross=crossover_text(plt_cost_rows(results))), ""]
    arows = anchor_rows(results)
    if arows:
        parts += ["### napkinXC binary HSM vs `-r plt`", "", anchor_table(arows), "",
                  "`fit / train`: napkinXC's whole fit command / lomtree's whole `train -r plt` command, "
                  "wall clock and, in brackets, CPU seconds of the two children (less disturbed by the other "
                  "load on the machine); > 1: lomtree is faster. Best PLT: the better of one pass and tuned "
                  "(≤ 10 passes).", ""]
    parts += ["### Test error, time and memory", "", results_table(results), ""]
    parts.append("`paper %`: the LOMtree paper's tuned Sector numbers (Choromanska & Langford 2015, Table 3). "
                 "`test µs/ex`: whole `predict` command / test examples.")
    parts.append("")
    if res.get("comparisons"):
        parts += ["### Against Vowpal Wabbit (same files, bits, passes)", "",
                  comparison_table(res["comparisons"]), "",
                  "Speed ratios are VW's time / ours for the whole train (or test) command, wall clock "
                  "and, in brackets, CPU (user + sys of the child, less disturbed by other load): "
                  "> 1 means lomtree is faster.", ""]
    if res.get("foundation"):
        parts += ["### Throughput vs VW", "", foundation_table(res["foundation"]), ""]
    if res.get("throughput"):
        reps = sorted({r.get("repeats", 1) for r in res["throughput"]})
        ran = " or ".join(str(x) for x in reps) + " times (the `repeats` of each row in results.json)" \
            if len(reps) > 1 else f"{reps[0]} times"
        parts += ["### Throughput vs VW, median of alternating runs", "",
                  throughput_table(res["throughput"]), "",
                  f"Each command ran {ran}, lomtree and VW alternating; medians of wall time. "
                  "`whole`: examples / whole command (start-up, model load and save included). "
                  "`steady`: (examples − 10) / (whole − the same command on the file's first 10 lines): "
                  "the rate once running, start-up removed for both programs alike "
                  "(`data_scripts/bench_throughput.py`). Ratios are ours / VW: > 1 means lomtree is faster. "
                  "`ratio paired`: the median over the rounds of VW's time / ours in the same round (the "
                  "two commands ran back to back, so a stall of the machine spoils one round, not a median). "
                  "Both prediction commands write their predictions (`-p /dev/null`); "
                  "`ratio vs VW without -p`: whole (paired) against VW's test run a fourth time in each "
                  "round without `-p` (the loss only, no predictions written).", ""]
    if any(r.get("sweep") for r in res.get("results", [])):
        parts += ["### Per-example time vs k (synthetic streams)", "", sweep_table(res["results"]), "",
                  "Each learner trains with `-b " +
                  str((res.get("suite_config", {}).get("synthetic") or {}).get("bits", "")) +
                  "` on the stream's lines (trees: repeated `repeat` = " +
                  str((res.get("suite_config", {}).get("synthetic") or {}).get("repeat", 1)) +
                  " times), then predicts the same lines (timing only). µs/ex: CPU time (user + sys of the child, "
                  "robust to the other load on a shared machine) of the whole command minus the least CPU "
                  "time of the same command on 10 lines, / (examples − 10): start-up and model "
                  "allocation removed. Raw whole-command wall times are in `results.json`. "
                  "OAA runs on fewer examples at large k (min(n, " +
                  f"{(res.get('suite_config', {}).get('synthetic') or {}).get('oaa_budget', 0):,.0f}" +
                  " / k)).", ""]
        prow = plt_cost_rows(res["results"])
        if prow:
            parts += ["#### Per-example cost of `-r plt` next to OAA", "", plt_cost_table(prow), "",
                      plt_cost_text(r["k"] for r in prow), ""]
        rr = ratio_rows(res["results"])
        if rr:
            parts.append("OAA / LOMtree per-example test time: " +
                         ", ".join(f"k={k:,}: {v:.1f}×" for k, v, _ in rr) + ".")
            parts.append("")
    if plots:
        parts += ["### Plots", ""] + [f"- `bench/{p}`" for p in plots] + [""]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# plots

def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def plot_errors(res: dict, path: Path, plt) -> bool:
    # the label-frequency baseline (near 100 % on balanced data) would flatten the bars: table only
    recs = [r for r in res.get("results", []) if not r.get("sweep") and r.get("status") == "ok"
            and r.get("reduction") != "table"]
    if not recs:
        return False
    variants = [v for v in ("1pass", "tuned") if any(r["variant"] == v for r in recs)]
    datasets = []
    for r in recs:
        if r["dataset"] not in datasets:
            datasets.append(r["dataset"])
    learners = []
    for r in sorted(recs, key=_sort_key):
        name = display_name(r)
        if name not in learners:
            learners.append(name)
    width_in = min(24, max(8, 1.6 * len(datasets) * len(learners) / 4))
    fig, axes = plt.subplots(len(variants), 1, figsize=(width_in, 4.2 * len(variants)), squeeze=False)
    width = 0.8 / max(1, len(learners))
    cmap = plt.get_cmap("tab10")
    for ax, var in zip(axes[:, 0], variants):
        for j, name in enumerate(learners):
            xs, ys, lo, hi = [], [], [], []
            for i, ds in enumerate(datasets):
                r = next((x for x in recs if x["dataset"] == ds and x["variant"] == var
                          and display_name(x) == name), None)
                if r is None:
                    continue
                xs.append(i + (j - (len(learners) - 1) / 2) * width)
                ys.append(100 * r["error"])
                lo.append(100 * (r["error"] - r["ci_low"]))
                hi.append(100 * (r["ci_high"] - r["error"]))
            if xs:
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=name, color=cmap(_colour(name)),
                       hatch="//" if name.startswith("VW") else ("xx" if name in ANCHOR_NAMES.values() else None),
                       edgecolor="black", linewidth=0.4)
        for i, ds in enumerate(datasets):
            for red, pe in ((k[1], v) for k, v in _paper(res).items() if k[0] == ds):
                if var == "tuned" and NAMES.get(red) in learners:
                    j = learners.index(NAMES[red])
                    x = i + (j - (len(learners) - 1) / 2) * width
                    ax.plot([x], [pe], marker="*", color="black", markersize=7, linestyle="none")
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels(datasets)
        ax.set_ylabel("test error % (95% Wilson CI)")
        ax.set_title(f"Test error per reduction and dataset ({'one pass' if var == '1pass' else 'tuned passes'})"
                     + ("; ★ = LOMtree paper (tuned)" if var == "tuned" else ""))
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=min(5, len(learners)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _colour(name: str) -> int:
    """Colour index of a learner: VW's counterpart gets our reduction's colour (hatched); the
    anchors get the colours after ours (tab10 wraps)."""
    pair = {"VW --oaa": "OAA", "VW --log_multi": "LOMtree", "VW --ect": "Filter tree"}
    names = [NAMES[r] for r in SYSTEM_ORDER] + [ANCHOR_NAMES[a] for a in ANCHOR_ORDER]
    name = pair.get(name, name)
    return names.index(name) % 10 if name in names else 9


def _paper(res: dict) -> dict:
    out = {}
    for r in res.get("results", []):
        if r.get("paper_error") is not None and r.get("system") == "lomtree":
            out[(r["dataset"], r["reduction"])] = r["paper_error"]
    return out


def plot_time_vs_k(res: dict, path: Path, plt) -> bool:
    recs = [r for r in res.get("results", []) if r.get("sweep") and r.get("status") == "ok"]
    if not recs:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, part in zip(axes, ("train", "test")):
        for red in SYSTEM_ORDER:
            pts = sorted((int(r["k"]), r.get(f"{part}_us_per_ex")) for r in recs if r["reduction"] == red)
            pts = [(k, v) for k, v in pts if v]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=plt.get_cmap("tab10")(_colour(NAMES[red])),
                        linestyle="--" if red == "oaa" else "-", label=NAMES[red])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of classes k")
        ax.set_ylabel(f"{part} time per example (µs)")
        ax.set_title(f"Per-example {part} CPU time vs k (start-up removed)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_ratio(res: dict, path: Path, plt) -> bool:
    rr = ratio_rows(res.get("results", []))
    if not rr:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.2))
    cmap = plt.get_cmap("tab10")
    ax.plot([k for k, _, _ in rr], [v for _, v, _ in rr], marker="o", label="OAA / LOMtree",
            color=cmap(_colour("LOMtree")))
    for red in ("filter", "rtree", "cpt"):
        pts = [(k, d[red]) for k, _, d in rr if d.get(red)]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", linestyle=":", alpha=0.7,
                    label=f"OAA / {NAMES[red]}", color=cmap(_colour(NAMES[red])))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set_xlabel("number of classes k")
    ax.set_ylabel("OAA test time / tree test time (per example)")
    ax.set_title("Test-time speed-up over OAA (cf. paper Fig. 3)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_plt_cost(res: dict, path: Path, plt) -> bool:
    """Per-example train and predict CPU µs of ``-r plt`` and OAA vs k, OAA / PLT written on."""
    rows = plt_cost_rows(res.get("results", []))
    if not rows:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    cmap = plt.get_cmap("tab10")
    for ax, part, title in zip(axes, ("train", "test"), ("train", "predict")):
        ks = [r["k"] for r in rows]
        for red, style in (("oaa", "--"), ("plt", "-")):
            pts = [(r["k"], r[f"{red}_{part}_us"]) for r in rows if r[f"{red}_{part}_us"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle=style, label=NAMES[red],
                    color=cmap(_colour(NAMES[red])))
        for r in rows:
            if r[f"{part}_ratio"] and r[f"plt_{part}_us"]:
                ax.annotate(f"{r[f'{part}_ratio']:.2g}×", (r["k"], r[f"plt_{part}_us"]),
                            textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ks)
        ax.set_xlabel("number of classes k")
        ax.set_ylabel(f"{title} CPU µs per example")
        ax.set_title(f"{title}: -r plt (its defaults at each k) vs OAA; labels: OAA / PLT")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_plots(res: dict, out_dir: Path) -> list[str]:
    plt = _plt()
    if plt is None:
        return []
    made = []
    for key, fn in (("error", plot_errors), ("time", plot_time_vs_k), ("ratio", plot_ratio),
                    ("plt_cost", plot_plt_cost)):
        if fn(res, Path(out_dir) / PLOTS[key], plt):
            made.append(PLOTS[key])
    return made


def write_all(res: dict, out_dir: str | os.PathLike) -> list[str]:
    """``results.md`` and the plots; returns the plot file names written."""
    out_dir = Path(out_dir)
    plots = write_plots(res, out_dir)
    md = render_markdown(res, plots)
    tmp = out_dir / "results.md.writing"
    tmp.write_text(md + "\n")
    os.replace(tmp, out_dir / "results.md")
    return plots
