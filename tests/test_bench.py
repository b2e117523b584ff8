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


def test_dual_solver_variant_drops_the_rate_options(tmp_path):
    """A tuned run of the dual solver keeps no learning-rate option of the one-pass run (lomtree
    refuses them with --solver dual)."""
    p = _write(tmp_path, "sector_oaa.toml", """
[run]
dataset = "sector"
reduction = "oaa"
bits = 24
learning_rate = 0.5
power_t = 0.5

[tuned]
passes = 10
solver = "dual"
""")
    e = bench.load_experiment(p)
    assert e.variants["1pass"] == {"bits": 24, "passes": 1, "learning_rate": 0.5, "power_t": 0.5}
    assert e.variants["tuned"] == {"bits": 24, "passes": 10, "solver": "dual"}
    cmd = bench.lomtree_train_cmd("oaa", 105, e.variants["tuned"], "t.vw", "m", "r.json", "c", ())
    assert cmd[cmd.index("--solver") + 1] == "dual" and "-l" not in cmd


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
    ('[run]\ndataset = "sector"\nreduction = "oaa"\n[tuned]\nextra_args = ["-l", "1"]\n', "belong in \\[run\\]"),
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


# --------------------------------------------------------------------------------------------
# accuracy anchors: napkinXC and fastText (data_scripts/bench_anchors.py); neither package (nor
# scipy) is needed here: the runner is faked

import numpy as np  # noqa: E402

from data_scripts import bench_anchors  # noqa: E402


def test_anchor_kwargs_and_command_lines():
    ba = bench_anchors
    assert ba.napkin_kwargs("napkinxc_plt") == {"threads": 1}
    assert ba.napkin_kwargs("napkinxc_hsm") == {"threads": 1}
    assert ba.napkin_kwargs("napkinxc_bhsm") == {"threads": 1, "max_leaves": 2}  # the binary tree
    assert ba.ANCHORS["napkinxc_bhsm"][2] == "HSM" and ba.ANCHORS["napkinxc_plt"][2] == "PLT"
    assert ba.fasttext_kwargs("fasttext_hs", 5) == {"loss": "hs", "epoch": 5, "dim": 100, "thread": 1, "verbose": 0}
    assert ba.fasttext_kwargs("fasttext_softmax", 1)["loss"] == "softmax"
    cmd = ba.fit_cmd("napkinxc_bhsm", "tr.vw", "m", "r.json", bits=24, epochs=7)
    assert cmd[1:] == ["-m", "data_scripts.bench_anchors", "fit", "--anchor", "napkinxc_bhsm", "--train", "tr.vw",
                       "--model", "m", "--report", "r.json", "--bits", "24"]
    cmd = ba.fit_cmd("fasttext_hs", "tr.txt", "m.bin", "r.json", epochs=5)
    assert cmd[-4:] == ["--epochs", "5", "--threads", "1"] and "--bits" not in cmd
    assert ba.fit_cmd("fasttext_hs", "tr.txt", "m.bin", "r.json", threads=2)[-2:] == ["--threads", "2"]
    assert ba.fasttext_kwargs("fasttext_hs", 5, 2)["thread"] == 2
    assert ba.test_cmd("napkinxc_plt", "te.vw", "m", "r.json")[-2:] == ["--bits", "24"]
    assert "--bits" not in ba.test_cmd("fasttext_softmax", "te.txt", "m.bin", "r.json")
    with pytest.raises(SystemExit):  # the child refuses an unknown anchor (argparse, exit 2)
        ba.main(["fit", "--anchor", "nope", "--model", "m", "--report", "r"])


def test_read_hashed_hand_worked_lines(tmp_path):
    """lomtree's own parser and hashing (docs/ALGORITHMS.md §1.3), worked by hand: numeric names in the
    default namespace are their own index; a named namespace hashes its names with xxh32 seeded
    by the namespace's hash; no constant feature (napkinXC adds its own bias)."""
    import xxhash

    f = tmp_path / "a.vw"
    f.write_text("3 | 7:0.5 2:1.5 7\n2 |a x y:2\n")
    labels, indptr, indices, values = bench_anchors.read_hashed(f, bits=24)
    mask = (1 << 24) - 1
    nh = xxhash.xxh32_intdigest(b"a", 0)
    hx, hy = xxhash.xxh32_intdigest(b"x", nh) & mask, xxhash.xxh32_intdigest(b"y", nh) & mask
    assert labels.tolist() == [3, 2]
    assert indptr.tolist() == [0, 3, 5]
    assert indices.tolist() == [7, 2, 7, hx, hy]
    assert values.tolist() == [0.5, 1.5, 1.0, 1.0, 2.0]


def _dense(indptr, cols, values, d):
    out = np.zeros((len(indptr) - 1, d))
    for i in range(len(indptr) - 1):
        for j in range(indptr[i], indptr[i + 1]):
            out[i, cols[j]] += values[j]  # duplicates summed, as lomtree's linear model does
    return out


def test_remap_columns_hand_worked():
    # train rows: {7: .5, 2: 1.5, 7: 1}, {900: 1}; columns = sorted distinct indices [2, 7, 900]
    indptr, indices = np.array([0, 3, 4]), np.array([7, 2, 7, 900])
    values = np.array([0.5, 1.5, 1.0, 1.0], np.float32)
    cols = bench_anchors.column_map(indices)
    assert cols.tolist() == [2, 7, 900]
    p, c, v = bench_anchors.remap(indptr, indices, values, cols)
    assert p.tolist() == [0, 3, 4] and c.tolist() == [1, 0, 1, 2]
    assert _dense(p, c, v, 3).tolist() == [[1.5, 1.5, 0.0], [0.0, 0.0, 1.0]]
    # test rows with features unseen in training (5, 10**6): dropped; an empty row stays a row
    p, c, v = bench_anchors.remap(np.array([0, 2, 3, 3]), np.array([5, 900, 10**6]),
                                  np.array([1.0, 2.0, 3.0], np.float32), cols)
    assert p.tolist() == [0, 1, 1, 1] and c.tolist() == [2] and v.tolist() == [2.0]


def test_to_csr_sums_duplicates():
    pytest.importorskip("scipy")
    m = bench_anchors.to_csr(np.array([0, 3, 4]), np.array([1, 0, 1, 2]),
                             np.array([0.5, 1.5, 1.0, 1.0], np.float32), 3)
    assert m.toarray().tolist() == [[1.5, 1.5, 0.0], [0.0, 0.0, 1.0]]


@pytest.mark.parametrize("line, expect", [
    ("3 1.0 'tag |w the:2 cat |p1 in", "__label__3 w^the w^cat p1^in"),
    ("5 | 7:0.5 foo", "__label__5 7 foo"),  # default namespace: bare names, values dropped
    ("1 |w\tfoo  bar\n", "__label__1 w^foo w^bar"),
    ("6 |p1 <s> |p2 <s> |pair <s>_<s>", "__label__6 p1^<s> p2^<s> pair^<s>_<s>"),  # KJV next word
    ("2 |ns:0.5 a |", "__label__2 ns^a"),  # namespace weight dropped, empty namespace
    ("   ", None),
])
def test_fasttext_line(line, expect):
    assert bench_anchors.fasttext_line(line) == expect


def test_fasttext_file_converts_and_caches(tmp_path):
    src = tmp_path / "a.vw"
    src.write_text("1 |w a b\n\n2 |w c\n")
    dst = bench_anchors.fasttext_file(src, tmp_path / "ft" / "a.txt")
    assert dst.read_text() == "__label__1 w^a w^b\n__label__2 w^c\n"
    dst.write_text("kept\n")
    assert bench_anchors.fasttext_file(src, dst).read_text() == "kept\n"  # newer than src: not rebuilt


def test_fasttext_top1_calls_the_cpp_predict():
    calls = []

    class F:
        def predict(self, text, k, threshold, on_unicode_error):
            calls.append((text, k, threshold, on_unicode_error))
            return [(0.9, "__label__4")] if text.strip() else []

    assert bench_anchors.fasttext_top1(F(), "w^a w^b") == "__label__4"
    assert calls == [("w^a w^b\n", 1, 0.0, "strict")]
    assert bench_anchors.fasttext_top1(F(), "") is None


def test_missing_packages_without_importing():
    seen = []

    def spec(name):
        seen.append(name)
        return None if name == "scipy" else object()

    assert bench_anchors.missing_packages("napkinxc_bhsm", spec) == ["scipy"]
    assert seen == ["napkinxc", "scipy"]
    assert bench_anchors.missing_packages("fasttext_hs", lambda n: None) == ["fasttext-wheel"]


def test_anchor_plan_skips_and_epochs():
    cfg = {"datasets": ["sector", "kjv_book"], "anchors": ["napkinxc_bhsm", "fasttext_hs"],
           "skip": {"sector:fasttext_hs": "values dropped", "kjv_book:fasttext_hs:tuned": "too long"}}
    plan = bench.anchor_plan(cfg, ["sector", "kjv_book", "letter"], {"sector": 5, "kjv_book": 4})
    got = [(s["dataset"], s["anchor"], s["variant"], s["epochs"], s["skip"]) for s in plan]
    assert got == [("sector", "napkinxc_bhsm", "1pass", 1, None),
                   ("sector", "fasttext_hs", "1pass", 1, "values dropped"),
                   ("sector", "fasttext_hs", "tuned", 5, "values dropped"),
                   ("kjv_book", "napkinxc_bhsm", "1pass", 1, None),
                   ("kjv_book", "fasttext_hs", "1pass", 1, None),
                   ("kjv_book", "fasttext_hs", "tuned", 4, "too long")]
    exps = bench.load_experiments(bench.CONFIG_DIR, ["sector"])
    plt_exp = next(e for e in exps if e.reduction == "plt")
    assert bench.tuned_passes(exps) == {"sector": plt_exp.variants["tuned"]["passes"]}
    suite = bench.load_suite(bench.CONFIG_DIR)
    for s in bench.anchor_plan(suite["anchors"], suite["datasets"], bench.tuned_passes(bench.load_experiments())):
        assert s["anchor"] in bench_anchors.ANCHORS
        if s["dataset"] == "sector" and s["anchor"].startswith("fasttext"):
            assert "values" in s["skip"]  # Sector is left out for fastText, with the reason


def _fake_runner(reports):
    """A stand-in for ``run_timed``: writes the ``--report`` JSON a real child would, records the command."""
    seen = []

    def run(cmd, timeout=None):
        seen.append(cmd)
        what = cmd[cmd.index("-m") + 2]
        Path(cmd[cmd.index("--report") + 1]).write_text(json.dumps(reports[what]))
        return bench.Timed(cmd, 0, 2.5 if what == "fit" else 0.5, 100 * 1024, "")

    return run, seen


def test_run_anchor_with_a_fake_runner(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "kjv_book.train.vw").write_text("1 |w a b\n2 |w c\n")
    (data / "kjv_book.test.vw").write_text("1 |w a\n")
    monkeypatch.setattr(bench, "DATA_DIR", data)
    monkeypatch.setattr(bench, "RUNS_DIR", tmp_path / "runs")
    (tmp_path / "runs").mkdir()
    monkeypatch.setattr(bench_anchors, "missing_packages", lambda anchor: [])
    run, seen = _fake_runner({"fit": {"examples": 2, "fit_seconds": 2.0}, "test": {"examples": 200, "errors": 50}})
    step = {"dataset": "kjv_book", "anchor": "napkinxc_bhsm", "variant": "1pass", "epochs": 1, "skip": None}
    rec = bench.run_anchor(step, 24, runner=run)
    assert rec["status"] == "ok" and rec["system"] == "napkinxc" and rec["k"] == 66
    assert rec["error"] == 0.25 and rec["n"] == 200 and rec["errors"] == 50
    assert (rec["ci_low"], rec["ci_high"]) == bench.wilson_interval(50, 200)
    assert rec["train"]["seconds"] == 2.5 and rec["test"]["seconds"] == 0.5 and rec["train"]["examples"] == 2
    assert rec["options"] == {"threads": 1, "max_leaves": 2, "bits": 24}
    assert seen[0][seen[0].index("--train") + 1] == str(data / "kjv_book.train.vw")
    assert seen[1][seen[1].index("--test") + 1] == str(data / "kjv_book.test.vw")
    # fastText: the files are converted to its text first, and the tuned epochs are passed on
    run, seen = _fake_runner({"fit": {"fit_seconds": 1.0}, "test": {"examples": 1, "errors": 0}})
    rec = bench.run_anchor({**step, "anchor": "fasttext_softmax", "variant": "tuned", "epochs": 5}, runner=run)
    assert rec["status"] == "ok" and rec["error"] == 0.0 and rec["options"]["epoch"] == 5
    ft_train = Path(seen[0][seen[0].index("--train") + 1])
    assert ft_train.read_text() == "__label__1 w^a w^b\n__label__2 w^c\n"
    assert seen[0][-4:] == ["--epochs", "5", "--threads", "1"]


def test_run_anchor_failure_and_not_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RUNS_DIR", tmp_path)
    step = {"dataset": "sector", "anchor": "napkinxc_plt", "variant": "1pass", "epochs": 1, "skip": None}
    monkeypatch.setattr(bench_anchors, "missing_packages", lambda anchor: ["napkinxc", "scipy"])

    def never(cmd, timeout=None):
        raise AssertionError("nothing may run")

    rec = bench.run_anchor(step, runner=never)
    assert rec["status"] == "not installed" and "napkinxc, scipy not installed" in rec["message"]
    assert bench.run_anchor({**step, "skip": "why"}, runner=never)["status"] == "skipped"
    # a failing child: a clear status, no exception
    data = tmp_path / "data"
    data.mkdir()
    (data / "sector.train.vw").write_text("1 | 1:1\n")
    (data / "sector.test.vw").write_text("1 | 1:1\n")
    monkeypatch.setattr(bench, "DATA_DIR", data)
    monkeypatch.setattr(bench_anchors, "missing_packages", lambda anchor: [])
    rec = bench.run_anchor(step, runner=lambda cmd, timeout=None: bench.Timed(cmd, 1, 0.1, 1, "Traceback ... boom"))
    assert rec["status"] == "failed" and "fit exit 1" in rec["message"] and "boom" in rec["message"]


def _anchor(anchor, err, ds="sector", var="1pass", train_s=20.0, test_s=3.0):
    return {**_rec(bench_anchors.package_of(anchor), anchor, err, ds=ds, var=var, train_s=train_s, test_s=test_s),
            "anchor": anchor, "options": {"threads": 1}}


def test_main_table_cells_and_missing_package():
    res = _results() + [
        _rec("lomtree", "plt", 0.12, train_s=4.0), _rec("lomtree", "plt", 0.11, var="tuned", train_s=10.0),
        _anchor("napkinxc_bhsm", 0.0976, train_s=40.0), _anchor("napkinxc_plt", 0.073),
        {"system": "fasttext", "reduction": "fasttext_hs", "anchor": "fasttext_hs", "dataset": "sector",
         "variant": "1pass", "status": "skipped", "options": {"epoch": 1},
         "message": "fastText's text input drops feature values"},
        {"system": "napkinxc", "reduction": "napkinxc_hsm", "anchor": "napkinxc_hsm", "dataset": "sector",
         "variant": "1pass", "status": "not installed", "options": {},
         "message": "napkinxc not installed (pip install -e '.[bench]')"}]
    md = bench_report.main_table(res, "1pass")
    head, sep, row = md.splitlines()
    cols = [c.strip() for c in head.strip("|").split("|")]
    cells = dict(zip(cols, [c.strip() for c in row.strip("|").split("|")]))
    assert cols[:3] == ["task (k)", "OAA", "PLT"] and cols.index("VW --oaa") < cols.index("napkinXC PLT")
    assert cells["PLT"] == "12.00 (4.0 s / 1.0 s)"
    assert cells["napkinXC binary HSM"] == "9.76 (40.0 s / 3.0 s)"
    assert cells["napkinXC HSM"] == "NOT INSTALLED (napkinxc not installed)"
    assert cells["fastText hs"] == "skipped"
    assert bench_report.main_notes(res) == ["skipped: fastText hs on sector: fastText's text input drops feature values"]
    tuned_only = {**res[-2], "variant": "tuned", "dataset": "kjv_nextword", "message": "too long"}
    assert bench_report.main_notes([tuned_only]) == ["skipped: fastText hs on kjv_nextword (tuned): too long"]
    assert cells["CPT"] == "MISSING"
    tuned = bench_report.main_table(res, "tuned")
    assert "11.00 (10.0 s / 1.0 s)" in tuned and "9.76 (40.0 s" in tuned  # napkinXC (batch) in both tables
    long = bench_report.results_table(res)
    assert "NOT INSTALLED" in long and "| batch |" in long
    picks = bench_report.pick_lines(res)
    assert picks == ["sector: most accurate log-time reduction `-r plt` 12.00 % (OAA 10.00 %, +2.00 points); "
                     "best anchor napkinXC PLT 7.30 %"]
    rows = bench_report.anchor_rows(res)
    assert len(rows) == 1
    r = rows[0]
    assert r["ratio_1pass"] == pytest.approx(10.0) and r["ratio_tuned"] == pytest.approx(4.0)
    assert not r["plt_at_least_bhsm"] and r["best_napkinxc"] == "napkinXC PLT"
    assert r["plt_vs_best_napkinxc_points"] == pytest.approx(3.7)
    assert "10.0×" in bench_report.anchor_table(rows)


def test_plt_cost_rows_and_depth():
    sweep = [{**_rec("lomtree", red, 0.1, ds=f"synth_k{k}", var="sweep"), "k": k, "sweep": True,
              "train_us_per_ex": tr, "test_us_per_ex": te}
             for k, red, tr, te in ((100, "oaa", 40.0, 20.0), (100, "plt", 20.0, 10.0),
                                    (100000, "oaa", 30000.0, 9000.0), (100000, "plt", 60.0, 30.0))]
    rows = bench_report.plt_cost_rows(sweep)
    assert [(r["k"], r["train_ratio"], r["test_ratio"]) for r in rows] == [(100, 2.0, 2.0), (100000, 500.0, 300.0)]
    md = bench_report.plt_cost_table(rows)
    assert "500.0×" in md and "300.0×" in md
    assert [bench_report.plt_depth(k) for k in (2, 32, 33, 1024, 1025, 100000)] == [1, 1, 2, 2, 3, 4]
    res = {"results": sweep, "suite_config": {"synthetic": {"bits": 22}}}
    md = bench_report.render_markdown(res)
    # the defaults at each k: beam 10 and arity 32 below 4,096 classes; beam 4, arity 16 at 100,000
    assert "k=100: beam 10, arity 32, 2 levels (≤ 640)" in md and "k=100,000: beam 4, arity 16, 5 levels (≤ 320)" in md


def test_merge_results_replaces_by_id():
    a = {"argv": "a", "results": [{"id": "x", "v": 1}, {"id": "y", "v": 1}]}
    b = {"argv": "b", "started": "t", "results": [{"id": "y", "v": 2}, {"id": "z", "v": 2}]}
    m = bench.merge_results(a, b, "b.json")
    assert m["results"] == [{"id": "x", "v": 1}, {"id": "y", "v": 2}, {"id": "z", "v": 2}]
    assert m["argv"] == "a" and m["merged"][0]["file"] == "b.json" and m["merged"][0]["argv"] == "b"
    assert a["results"][1]["v"] == 1  # the input is not changed


def test_crossover_text():
    rows = [{"k": 1000, "train_ratio": 0.4, "test_ratio": 0.1}, {"k": 10000, "train_ratio": 2.0, "test_ratio": 0.6},
            {"k": 100000, "train_ratio": 50.0, "test_ratio": 8.0}]
    assert bench_report.crossover_text(rows) == ("cheaper than OAA for training from k = 10,000 in this run's sweep "
                                                 "and prediction from k = 100,000 in this run's sweep")
    assert "prediction at none of k = 1,000" in bench_report.crossover_text(rows[:1])
    assert "{cross}" in bench_report.PICK_GUIDE


def test_recorded_commands_hold_no_machine_paths():
    """A run's command is recorded with the repository's paths relative to it."""
    from data_scripts.bench import REPO_ROOT, Timed

    t = Timed(cmd=[str(REPO_ROOT / ".venv/bin/lomtree"), "train", str(REPO_ROOT / "bench/data/a b.vw"), "/elsewhere/x"],
              rc=0, seconds=1.0, maxrss_kb=1024, stderr="")
    assert t.as_dict()["cmd"] == ".venv/bin/lomtree train 'bench/data/a b.vw' /elsewhere/x"


def test_an_ensemble_variant_trains_its_members_and_predicts_with_all(tmp_path, monkeypatch):
    """``ensemble = 2``: two models of seeds 3 and 4, one ``lomtree predict`` with both; the
    record's error is that command's, its training time the members' sum."""
    monkeypatch.setattr(bench, "RUNS_DIR", tmp_path)
    data = tmp_path / "d.vw"
    data.write_text("".join(f"{1 + i % 4} | w{i % 4} n{i % 7}\n" for i in range(200)))
    path = tmp_path / "d_plt.toml"
    path.write_text('[run]\ndataset = "d"\nreduction = "plt"\nk = 4\nvw = ""\n[tuned]\nensemble = 2\nseed = 3\n')
    opts = bench.load_experiment(path).variants["tuned"]
    assert bench.ENSEMBLE not in bench.lomtree_train_cmd("plt", 4, opts, "t", "m", "r")
    rec = bench.run_ours("e", "plt", 4, opts, str(data), str(data))
    assert rec["status"] == "ok", rec.get("message")
    cmds = rec["train"]["cmd"].split(" ; ")
    assert len(cmds) == 2 and "--seed 3" in cmds[0] and "--seed 4" in cmds[1]
    assert rec["train"]["members"] == 2 and rec["train"]["seconds"] > 0
    assert rec["test"]["cmd"].count(" -i ") == 2
    one = bench.run_ours("one", "plt", 4, {"bits": 18, "passes": 1}, str(data), str(data))
    assert one["status"] == "ok" and " -i " in one["test"]["cmd"] and "members" not in one["train"]
    assert not list(tmp_path.glob("*.model"))  # the members are removed after the prediction
    with pytest.raises(ValueError, match="unknown option"):
        bad = tmp_path / "d_cpt.toml"
        bad.write_text('[run]\ndataset = "d"\nreduction = "cpt"\nensembles = 2\n')
        bench.load_experiment(bad)
