"""Fast tests of the benchmark runner's pure parts (data_scripts/bench.py, bench_report.py).

No benchmark runs here: config loading, command lines, confidence intervals, VW output parsing,
comparisons, table rendering and the report writer (without plots).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from data_scripts import bench, bench_report

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------
# configs

def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_load_experiment_variants(tmp_path):
    p = _write(tmp_path, "sector_lomtree.toml", """
[run]
dataset = "sector"
reduction = "lomtree"
k = 105
bits = 24
passes = 1
max_internal_nodes = 50
vw = "log_multi"

[tuned]
passes = 8
learning_rate = 1.0
paper_error = 16.19
""")
    e = bench.load_experiment(p)
    assert (e.dataset, e.reduction, e.k, e.vw, e.paper_error) == ("sector", "lomtree", 105, "log_multi", 16.19)
    assert e.variants["1pass"] == {"bits": 24, "passes": 1, "max_internal_nodes": 50}
    assert e.variants["tuned"] == {"bits": 24, "passes": 8, "max_internal_nodes": 50, "learning_rate": 1.0}
    assert e.enabled


def test_load_experiment_defaults_and_json(tmp_path):
    p = _write(tmp_path, "letter_rtree.json", json.dumps({"run": {"dataset": "letter", "reduction": "rtree"}}))
    e = bench.load_experiment(p)
    assert e.k == 26  # from the dataset table
    assert e.vw is None  # VW has no Rtree
    assert e.variants == {"1pass": {"bits": 18, "passes": 1}}  # no [tuned]: one variant
    assert e.paper_error is None


def test_load_experiment_default_vw_counterpart(tmp_path):
    p = _write(tmp_path, "pendigits_filter.toml", '[run]\ndataset = "pendigits"\nreduction = "filter"\n')
    assert bench.load_experiment(p).vw == "ect"
    p = _write(tmp_path, "pendigits_oaa.toml", '[run]\ndataset = "pendigits"\nreduction = "oaa"\nvw = ""\n')
    assert bench.load_experiment(p).vw is None


@pytest.mark.parametrize("text, msg", [
    ('[run]\ndataset = "sector"\nreduction = "lomtree"\nbitz = 3\n', "unknown option"),
    ('[run]\ndataset = "sector"\nreduction = "nope"\n', "unknown reduction"),
    ('[run]\nreduction = "oaa"\n', "dataset"),
    ('[tuned]\npasses = 3\n', "no \\[run\\]"),
    ('[run]\ndataset = "sector"\nreduction = "oaa"\n[tuned]\npases = 3\n', "unknown option"),
])
def test_load_experiment_rejects(tmp_path, text, msg):
    with pytest.raises(ValueError, match=msg):
        bench.load_experiment(_write(tmp_path, "x.toml", text))


def test_repository_configs_load():
    """Every shipped config parses, names a known dataset, and the suite has both modes."""
    exps = bench.load_experiments(bench.CONFIG_DIR)
    assert exps
    pairs = {(e.dataset, e.reduction) for e in exps}
    for ds in bench.DATASETS:
        for red in bench.REDUCTIONS:
            assert (ds, red) in pairs, (ds, red)
    for e in exps:
        assert e.dataset in bench.DATASETS
        assert e.k == bench.DATASETS[e.dataset][2]
    sector = {e.reduction: e for e in exps if e.dataset == "sector"}
    assert sector["lomtree"].paper_error == 16.19 and sector["oaa"].paper_error == 9.17
    for mode in (False, True):
        s = bench.load_suite(bench.CONFIG_DIR, quick=mode)
        assert set(s["datasets"]) <= set(bench.DATASETS)
        assert min(s["synthetic"]["k"]) <= 100
    assert max(bench.load_suite(bench.CONFIG_DIR)["synthetic"]["k"]) >= 100_000


def test_load_experiments_filters_and_orders(tmp_path):
    for ds, red in (("pendigits", "oaa"), ("sector", "rtree"), ("sector", "oaa")):
        _write(tmp_path, f"{ds}_{red}.toml", f'[run]\ndataset = "{ds}"\nreduction = "{red}"\n')
    _write(tmp_path, "suite.toml", "[full]\ndatasets = []\n[quick]\ndatasets = []\n")
    names = [e.name for e in bench.load_experiments(tmp_path)]
    assert names == ["sector_oaa", "sector_rtree", "pendigits_oaa"]
    assert [e.name for e in bench.load_experiments(tmp_path, ["pendigits"])] == ["pendigits_oaa"]


# --------------------------------------------------------------------------------------------
# command lines

def test_lomtree_train_cmd_one_pass():
    cmd = bench.lomtree_train_cmd("lomtree", 105, {"bits": 24, "passes": 1, "max_internal_nodes": 50,
                                                  "cpt_alpha": 0.3, "learning_rate": 0.5},
                                  "tr.vw", "m", "r.json", "c")
    tail = cmd[cmd.index("train"):]
    assert tail == ["train", "-r", "lomtree", "-k", "105", "-b", "24", "--max-internal-nodes", "50",
                    "-l", "0.5", "tr.vw", "-f", "m", "--report", "r.json", "--quiet"]


def test_lomtree_train_cmd_passes_use_cache():
    cmd = bench.lomtree_train_cmd("filter", 10, {"bits": 18, "passes": 5}, "tr.vw", "m", "r.json", "c.cache")
    assert "--passes" in cmd and cmd[cmd.index("--passes") + 1] == "5"
    assert cmd[cmd.index("-c") + 1] == "c.cache"
    assert "--max-internal-nodes" not in cmd


def test_predict_cmd_writes_predictions_to_dev_null():
    cmd = bench.lomtree_predict_cmd("m", "te.vw", "r.json")
    assert cmd[cmd.index("-p") + 1] == "/dev/null" and "--quiet" in cmd and cmd[cmd.index("-i") + 1] == "m"


def test_vw_cmds_same_settings():
    opts = {"bits": 24, "passes": 10, "learning_rate": 0.5, "max_internal_nodes": 7, "swap_resistance": 4}
    cmd = bench.vw_train_cmd("log_multi", 105, opts, "tr.vw", "m", "c")
    assert cmd[:3] == [sys.executable, "-m", "vowpalwabbit"]
    assert cmd[3:5] == ["--log_multi", "105"]
    s = " ".join(cmd)
    assert "-b 24" in s and "--passes 10" in s and "-l 0.5" in s and "-c -k --cache_file c" in s
    assert "-d tr.vw -f m" in s
    assert "max_internal" not in s and "swap" not in s  # VW log_multi has no T; ours-only options dropped
    one = bench.vw_train_cmd("oaa", 5, {"bits": 18, "passes": 1}, "tr.vw", "m")
    assert "--passes" not in one and "-c" not in one
    assert bench.vw_test_cmd("m", "te.vw")[3:] == ["-t", "-i", "m", "-d", "te.vw", "-p", "/dev/null"]
    assert bench.vw_test_cmd("m", "te.vw", "p.txt")[-2:] == ["-p", "p.txt"]
    assert bench.vw_test_cmd("m", "te.vw", None)[3:] == ["-t", "-i", "m", "-d", "te.vw"]
    # the same output as ours: predictions to /dev/null
    assert bench.lomtree_predict_cmd("m", "te.vw", "r.json")[-5:-3] == ["-p", "/dev/null"]


# --------------------------------------------------------------------------------------------
# statistics

def test_wilson_interval_known_values():
    lo, hi = bench.wilson_interval(10, 100)
    assert lo == pytest.approx(0.05523, abs=1e-4) and hi == pytest.approx(0.17437, abs=1e-4)
    lo, hi = bench.wilson_interval(0, 50)
    assert lo == 0.0 and hi == pytest.approx(0.07135, abs=1e-4)
    lo, hi = bench.wilson_interval(50, 50)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.07135, abs=1e-4)
    assert all(math.isnan(x) for x in bench.wilson_interval(0, 0))


def test_wilson_interval_contains_estimate_and_shrinks():
    for e, n in ((1, 3207), (520, 3207), (3000, 3207), (7, 10)):
        lo, hi = bench.wilson_interval(e, n)
        assert lo <= e / n <= hi
    w1 = bench.wilson_interval(100, 1000)
    w2 = bench.wilson_interval(1000, 10000)
    assert (w2[1] - w2[0]) < (w1[1] - w1[0])


def test_normal_halfwidth_and_error_record():
    assert bench.normal_halfwidth(50, 100) == pytest.approx(1.96 * 0.05)
    r = bench.error_record(0.1619, 3207)
    assert r["errors"] == 519 and r["n"] == 3207
    assert r["ci_low"] < 519 / 3207 < r["ci_high"]
    assert bench.error_record(None, 10)["error"] is None


# --------------------------------------------------------------------------------------------
# parsing

VW_TRAIN = """Num weight bits = 24
learning rate = 0.5
...
finished run
number of examples per pass = 5771
passes used = 4
weighted example sum = 23084.000000
weighted label sum = 0.000000
average loss = 0.171577 h
total feature number = 3784952
"""

VW_TEST = """only testing
finished run
number of examples = 3207
weighted example sum = 3207.000000
weighted label sum = 0.000000
average loss = 0.090115
total feature number = 526203
"""


def test_parse_vw_output_multipass_holdout():
    s = bench.parse_vw_output(VW_TRAIN)
    assert s["examples"] == 5771 and s["passes"] == 4 and s["holdout"] is True
    assert s["average_loss"] == pytest.approx(0.171577) and s["total_features"] == 3784952


def test_parse_vw_output_test_and_garbage():
    s = bench.parse_vw_output(VW_TEST)
    assert (s["examples"], s["passes"], s["holdout"]) == (3207, 1, False)
    assert s["average_loss"] == pytest.approx(0.090115)
    s = bench.parse_vw_output("average loss = n.a.\n")
    assert s["average_loss"] is None and s["examples"] is None
    assert bench.parse_vw_output("")["average_loss"] is None


def test_test_error_from_report():
    assert bench._test_error_from_report({"average_loss": 0.2}) == 0.2
    assert bench._test_error_from_report({"average_loss": 0.05, "average_zero_one_loss": 0.3}) == 0.3
    assert bench._test_error_from_report(None) is None


def test_is_missing():
    t = bench.Timed(["x"], 2, 0.1, 1000, "error: reduction 'cpt' is not available in this build\n")
    assert bench.is_missing(t)
    assert not bench.is_missing(bench.Timed(["x"], 1, 0.1, 1000, "not available in this build"))
    assert not bench.is_missing(bench.Timed(["x"], 2, 0.1, 1000, "error: bad option"))


def test_per_example_times_remove_startup():
    rec = {"train": {"seconds": 20.0, "cpu_seconds": 11.0, "examples": 1010},
           "test": {"seconds": 3.0, "cpu_seconds": 2.0, "examples": 110},
           "fixed": {"lines": 10, "train_cpu_seconds": 1.0, "test_cpu_seconds": 1.0}}
    t = bench.per_example_times(rec)
    assert t["train_us_per_ex"] == pytest.approx(1e4) and t["test_us_per_ex"] == pytest.approx(1e4)
    assert t["train_us_per_ex_raw"] == pytest.approx(1e6 * 20 / 1010)  # wall, start-up included
    del rec["fixed"]
    assert bench.per_example_times(rec)["test_us_per_ex"] == pytest.approx(1e6 * 2 / 110)


def test_head_and_repeat_file(tmp_path):
    src = tmp_path / "a.vw"
    src.write_text("".join(f"{i} | x\n" for i in range(1, 6)))
    assert bench.head_file(src, 2, tmp_path / "h.vw").read_text() == "1 | x\n2 | x\n"
    rep = bench.repeat_file(src, 3, tmp_path / "r.vw")
    assert bench.count_lines(rep) == 15 and rep.read_text() == src.read_text() * 3


# --------------------------------------------------------------------------------------------
# comparisons and report

def _rec(system, red, err, ds="sector", var="1pass", train_s=2.0, test_s=1.0, n=3207, **kw):
    r = {"system": system, "reduction": red, "dataset": ds, "variant": var, "status": "ok",
         "options": {"bits": 24, "passes": 1}, "train": {"seconds": train_s, "peak_rss_mb": 500.0, "examples": 6412},
         "test": {"seconds": test_s, "peak_rss_mb": 300.0, "examples": n}}
    r.update(bench.error_record(err, n))
    r.update(kw)
    return r


def _results():
    return [
        _rec("lomtree", "oaa", 0.10, paper_error=9.17), _rec("vw", "oaa", 0.095, train_s=1.0, test_s=0.5),
        _rec("lomtree", "lomtree", 0.30), _rec("vw", "log_multi", 0.25),
        _rec("lomtree", "rtree", 0.2),
        {"system": "lomtree", "reduction": "cpt", "dataset": "sector", "variant": "1pass", "status": "missing",
         "options": {"bits": 24, "passes": 1}, "message": "not available"},
    ]


def test_comparisons_pair_with_vw():
    comps = bench.comparisons(_results())
    by = {c["reduction"]: c for c in comps}
    assert set(by) == {"oaa", "lomtree"}
    assert by["oaa"]["diff_points"] == pytest.approx(0.5) and by["oaa"]["within_1_point"]
    assert by["oaa"]["train_ratio"] == pytest.approx(0.5) and by["oaa"]["test_ratio"] == pytest.approx(0.5)
    assert by["lomtree"]["diff_points"] == pytest.approx(5.0) and not by["lomtree"]["within_1_point"]


def test_md_table_shape_and_escaping():
    t = bench_report.md_table(["a", "b"], [[1, "x|y"], [None, 2.5]])
    lines = t.splitlines()
    assert lines[0] == "| a | b |" and lines[1] == "| --- | ---: |"
    assert lines[2] == "| 1 | x\\|y |" and lines[3] == "|  | 2.5 |"


def test_results_table_rows():
    md = bench_report.results_table(_results())
    lines = md.splitlines()
    assert len(lines) == 2 + 6
    assert "10.00 [9.0, 11.1]" in md and "9.17" not in md  # the paper's numbers are tuned: tuned rows only
    assert "9.17" in bench_report.results_table([_rec("lomtree", "oaa", 0.1, var="tuned", paper_error=9.17)])
    assert "MISSING" in md
    assert lines.index(next(line for line in lines if "VW --oaa" in line)) > \
        lines.index(next(line for line in lines if "Rtree" in line))  # ours first, then VW


def test_comparison_and_foundation_tables():
    md = bench_report.comparison_table(bench.comparisons(_results()))
    assert "MISS by 4.00" in md and "| ok |" in md
    rows = [{"what": "OAA train", "unit": "ex/s", "ours": 2000.0, "vw": 4000.0, "ratio": 0.5, "vw_what": "--oaa 105"},
            {"what": "start-up", "unit": "s", "ours": 1.2, "vw": 0.1, "ratio": 0.083, "target": "< 1.5 s",
             "meets_target": True}]
    md = bench_report.foundation_table(rows)
    assert "2,000 ex/s" in md and "0.50" in md and "1.20 s" in md and "✓" in md


def test_render_and_write_all_without_plots(tmp_path, monkeypatch):
    res = {"command": "make bench-quick", "argv": "python -m data_scripts.bench --quick", "started": "now",
           "elapsed_seconds": 60, "machine": {"nproc": 2, "cpu": "Some CPU", "memory_gb": 23.0},
           "ci": "95% Wilson score interval", "holdout": "every 10th", "available": {"oaa": "ok", "cpt": "missing"},
           "results": _results() + [
               {**_rec("lomtree", "oaa", 0.5, ds="synth_k100", var="sweep"), "k": 100, "sweep": True,
                "train_us_per_ex": 50.0, "test_us_per_ex": 20.0},
               {**_rec("lomtree", "lomtree", 0.5, ds="synth_k100", var="sweep"), "k": 100, "sweep": True,
                "train_us_per_ex": 10.0, "test_us_per_ex": 4.0}],
           "comparisons": bench.comparisons(_results()), "foundation": []}
    monkeypatch.setattr(bench_report, "_plt", lambda: None)  # as if matplotlib were missing
    plots = bench_report.write_all(res, tmp_path)
    assert plots == []
    md = (tmp_path / "results.md").read_text()
    assert "make bench-quick" in md and "Some CPU" in md and "2 CPUs" in md
    assert "`cpt` (missing)" in md and "k=100: 5.0×" in md
    assert bench_report.ratio_rows(res["results"]) == [(100, 5.0, {"lomtree": 5.0})]


def test_run_timed_measures_a_child(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RUNS_DIR", tmp_path)
    t = bench.run_timed([sys.executable, "-c", "import sys; b = bytearray(50 << 20); sys.stderr.write('hi'); sys.exit(3)"],
                        retries=0)
    assert t.rc == 3 and t.stderr == "hi" and t.seconds > 0 and 0 < t.cpu_seconds
    assert t.maxrss_kb > 50 * 1024  # the child's own peak, not ours
    d = t.as_dict()
    assert d["rc"] == 3 and d["peak_rss_mb"] > 50


def test_compiled_during():
    assert bench.compiled_during("[cache] index saved to 'a'\n[cache] data saved to 'b'\n")
    assert not bench.compiled_during("[cache] index loaded from 'a'\n[cache] data loaded from 'b'\n")
    assert not bench.compiled_during("")


def test_holdout_off_is_a_switch_for_both_programs():
    on = {"bits": 24, "passes": 8, "holdout_off": True}
    ours = bench.lomtree_train_cmd("lomtree", 105, on, "tr.vw", "m", "r.json")
    vw = bench.vw_train_cmd("log_multi", 105, on, "tr.vw", "m")
    assert "--holdout-off" in ours and "True" not in ours
    assert "--holdout_off" in vw and "True" not in vw
    off = dict(on, holdout_off=False)
    assert not any("holdout" in a for a in bench.lomtree_train_cmd("lomtree", 105, off, "tr.vw", "m", "r.json"))
    assert not any("holdout" in a for a in bench.vw_train_cmd("log_multi", 105, off, "tr.vw", "m"))


def test_short_files_get_their_own_number_of_rounds():
    from data_scripts.bench_throughput import case_repeats

    cfg = {"repeats": 3, "short_repeats": 7}
    assert case_repeats("sector_lomtree_x5", cfg) == 7
    assert case_repeats("letter_filter_x5", cfg) == 7
    assert case_repeats("kjv_lomtree", cfg) == 3
    assert case_repeats("sector_filter_x5", {"repeats": 4}) == 4


def test_paired_ratio_is_the_median_of_per_round_ratios():
    """VW time / ours per round, median over rounds (here 1.5, the ratio of the medians 1.25)."""
    from data_scripts.bench_throughput import paired_ratio

    def runs(*secs, rc=0):
        return [bench.Timed(cmd=[], rc=rc, seconds=s, maxrss_kb=0, stderr="") for s in secs]

    ours = runs(1.0, 1.0, 9.0, 9.0, 1.2)
    vw = runs(1.5, 1.5, 1.5, 1.5, 9.0)
    assert paired_ratio(ours, vw) == pytest.approx(1.5)
    assert paired_ratio(runs(2.0, 1.0), runs(1.0, 3.0)) == pytest.approx((0.5 + 3.0) / 2)
    assert paired_ratio(runs(1.0) + runs(1.0, rc=1), runs(2.0, 2.0)) == pytest.approx(2.0)  # failed runs left out
    assert paired_ratio([], []) is None


def test_throughput_rounds_time_vw_with_and_without_predictions(tmp_path, monkeypatch):
    """Each round runs our prediction and VW's with ``-p /dev/null`` (the same work), and VW's
    test once more without ``-p`` (the loss only); its ratios land in the predict row."""
    from data_scripts import bench_throughput as T

    data = tmp_path / "data"
    data.mkdir()
    (data / "letter.train.vw").write_text("".join(f"{i % 26 + 1} | 1:0.{i % 9 + 1}\n" for i in range(40)))
    (data / "letter.test.vw").write_text("".join(f"{i % 26 + 1} | 1:0.{i % 7 + 1}\n" for i in range(20)))
    monkeypatch.setattr(bench, "DATA_DIR", data)
    monkeypatch.setattr(bench, "RUNS_DIR", tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    ran = []
    secs = {"ours": 1.0, "vw": 1.5, "vw_nop": 0.8}

    def fake_run(cmd, env_extra=None, **kw):
        is_vw = "vowpalwabbit" in cmd
        who = ("vw_nop" if "-t" in cmd and "-p" not in cmd else "vw") if is_vw else "ours"
        ran.append((who, cmd))
        return bench.Timed(cmd=cmd, rc=0, seconds=secs[who], maxrss_kb=0, stderr="")

    monkeypatch.setattr(bench, "run_timed", fake_run)
    rows = T.run_case("letter_filter_x5", 3, use_vw=True)
    nop = [c for who, c in ran if who == "vw_nop"]
    assert len(nop) == 3 and all(c[c.index("-d") + 1].endswith("letter.test.x5.vw") for c in nop)
    vw_pred = [c for who, c in ran if who == "vw" and "-t" in c]
    assert vw_pred and all(c[c.index("-p") + 1] == "/dev/null" for c in vw_pred)
    pred = next(r for r in rows if r["part"] == "predict")
    train = next(r for r in rows if r["part"] == "train")
    assert pred["ratio_whole"] == pytest.approx(1.5) and pred["ratio_paired"] == pytest.approx(1.5)
    assert pred["ratio_whole_vw_nop"] == pytest.approx(0.8) and pred["ratio_paired_vw_nop"] == pytest.approx(0.8)
    assert pred["vw_nop_all_seconds"] == [0.8, 0.8, 0.8]
    assert "ratio_whole_vw_nop" not in train
    md = bench_report.throughput_table(rows)
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    col = header.index("ratio vs VW without -p")
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")][col]
             for line in md.splitlines()[2:]}
    assert cells["Filter tree predict"] == "0.80 (0.80)" and cells["Filter tree train"] == ""
