"""The pure parts of data_scripts/bench_multilabel.py: data conversion, metrics, tables.

No anchor, no lomtree CLI and no dataset is needed: tiny inputs are built in tmp_path.
"""

from __future__ import annotations

import lzma

import pytest

from data_scripts import bench_multilabel as bm


def test_parse_xmc_line_labels_features_and_empty_label_field():
    assert bm.parse_xmc_line("3,7 0:1 5:0.5") == ([3, 7], [(0, 1.0), (5, 0.5)])
    assert bm.parse_xmc_line(" 2:1 4:1") == ([], [(2, 1.0), (4, 1.0)])
    assert bm.parse_xmc_line("1") == ([1], [])
    y, x = bm.parse_xmc_line("0,1 3:0.25\r\n")
    assert (y, x) == ([0, 1], [(3, 0.25)])
    assert bm.parse_xmc_line(bm.format_xmc_line([4, 9], [(0, 1.0), (7, -0.5)])) == ([4, 9], [(0, 1.0), (7, -0.5)])


def test_libsvm_multilabel_to_xmc_shifts_features_only():
    assert bm.libsvm_ml_to_xmc("2,3 1:0.5 4:-1") == ([2, 3], [(0, 0.5), (3, -1.0)])
    with pytest.raises(ValueError):
        bm.libsvm_ml_to_xmc("1 0:1")


def test_convert_libsvm_header_from_both_sides():
    train = ["0,2 1:1 3:0.5", "1 2:1"]
    test = ["4 7:1", ""]
    tr, te, f, l = bm.convert_libsvm_ml(train, test)
    assert (f, l) == (7, 5)  # largest 0-based feature 6 (test side), largest label 4
    assert len(tr) == 2 and len(te) == 1
    assert te[0] == ([4], [(6, 1.0)])


def _xz(path, text):
    with lzma.open(path, "wt") as fh:
        fh.write(text)


def test_prepare_xmc_split_selects_rows_and_keeps_header(tmp_path):
    data = tmp_path / "data"
    (data / "bibtex").mkdir(parents=True)
    rows = ["0 0:1", "1,2 1:1 2:1", " 3:1", "2 0:1 3:1"]
    _xz(data / "bibtex" / "Bibtex_data.txt.xz", "4 5 3\n" + "\n".join(rows) + "\n")
    _xz(data / "bibtex" / "bibtex_train_rows.txt.xz", "1\n3\n4\n")
    _xz(data / "bibtex" / "bibtex_test_rows.txt.xz", "2\n")
    out = tmp_path / "prep"
    train, test = bm.prepare_dataset("bibtex", data, out)
    assert train.read_text().splitlines() == ["3 5 3", "0 0:1", " 3:1", "2 0:1 3:1"]
    assert test.read_text().splitlines() == ["1 5 3", "1,2 1:1 2:1"]
    header, labels, feats = bm.read_xmc(train)
    assert header == (3, 5, 3) and labels == [[0], [], [2]] and feats[2] == [(0, 1.0), (3, 1.0)]
    # up to date: a second call does not rewrite
    mtime = train.stat().st_mtime_ns
    bm.prepare_dataset("bibtex", data, out)
    assert train.stat().st_mtime_ns == mtime


def test_prepare_yeast_like(tmp_path):
    data = tmp_path / "data"
    (data / "yeast").mkdir(parents=True)
    _xz(data / "yeast" / "yeast_train.svm.xz", "0,1 1:0.5 2:-0.25\n3 1:1 2:1\n")
    _xz(data / "yeast" / "yeast_test.svm.xz", "2 1:0.125 3:1\n")
    train, test = bm.prepare_dataset("yeast", data, tmp_path / "prep")
    assert train.read_text().splitlines() == ["2 3 4", "0,1 0:0.5 1:-0.25", "3 0:1 1:1"]
    assert test.read_text().splitlines() == ["1 3 4", "2 0:0.125 2:1"]


def test_prepare_missing_input_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        bm.prepare_dataset("delicious", tmp_path, tmp_path / "prep")


def test_select_rows_out_of_range():
    with pytest.raises(ValueError):
        bm.select_rows(["a", "b"], [3])


def test_xmc_to_vw(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("2 4 3\n0,2 1:1 3:0.5\n 0:1\n")
    dst = tmp_path / "a.vw"
    bm.xmc_to_vw(src, dst)
    assert dst.read_text().splitlines() == ["0,2 | 1:1 3:0.5", " | 0:1"]


def test_precision_at_k():
    preds = [[1, 2, 3, 4, 5], [9, 8], [0]]
    truths = [[2, 5], [9], []]
    r = bm.precision_at_k(preds, truths)
    assert r["p@1"] == pytest.approx((0 + 1 + 0) / 3)
    assert r["p@3"] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)
    assert r["p@5"] == pytest.approx((2 / 5 + 1 / 5 + 0) / 3)
    assert r["ndcg@1"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        bm.precision_at_k([[1]], [[1], [2]])


def test_format_table_cells_and_statuses():
    runs = [
        {"system": "a", "dataset": "bibtex", "status": "ok", "p@1": 0.6322, "p@3": 0.3922, "p@5": 0.29055,
         "train_cpu_s": 1.234},
        {"system": "a", "dataset": "yeast", "status": "ok", "p@1": 0.75, "p@3": 0.5, "p@5": 0.4,
         "train_cpu_s": 123.4},
        {"system": "b", "dataset": "bibtex", "status": "not installed"},
    ]
    md = bm.format_table(runs, ["bibtex", "yeast"], [("a", "System A"), ("b", "System B")])
    lines = md.strip().splitlines()
    assert lines[0] == ("| system | Bibtex P@1 | Bibtex P@3 | Bibtex P@5 | Yeast P@1 | Yeast P@3 | Yeast P@5 "
                        "| Bibtex train CPU s | Yeast train CPU s |")
    assert lines[2] == "| System A | 63.22 | 39.22 | 29.05 | 75.00 | 50.00 | 40.00 | 1.23 | 123 |"
    assert lines[3] == "| System B | not installed | — | — | — | — | — | — | — |"
    assert len(lines) == 4


def test_format_synthetic_table():
    rows = [{"k": 1000, "reduction": "plt", "status": "ok", "train_examples": 20000, "train_us_per_example": 12.34,
             "train_us_per_example_marginal": 10.06, "predict_us_per_example": 5.0, "p@1": 0.5, "note": ""},
            {"k": 100000, "reduction": "oaa", "status": "not yet"}]
    md = bm.format_synthetic_table(rows).strip().splitlines()
    assert md[2] == "| 1,000 | plt | 20,000 | 12.3 | 10.1 | 5.0 | 50.00 |  |"
    assert md[3] == "| 100,000 | oaa | — | — | — | — | — | not yet |"


def test_sanitize_command_has_no_machine_paths():
    s = bm.sanitize_command(["--lomtree", "/somewhere/else/bin/lomtree", "--out-dir",
                             str(bm.REPO_ROOT / "bench"), "--quick"])
    assert "/somewhere" not in s and str(bm.REPO_ROOT) not in s
    assert "<…>/lomtree" in s and " bench " in s and s.endswith("--quick")


def test_generate_synthetic_shape_and_determinism():
    ex, vocab = bm.generate_synthetic(50, 200, seed=3)
    assert len(ex) == 200 and vocab == 4000
    for labels, feats in ex:
        assert 1 <= len(labels) <= 5 and len(set(labels)) == len(labels)
        assert all(0 <= l < 50 for l in labels)
        assert all(0 <= f < vocab and v == 1.0 for f, v in feats)
        assert [f for f, _ in feats] == sorted({f for f, _ in feats})
    assert bm.generate_synthetic(50, 200, seed=3)[0] == ex
    assert bm.generate_synthetic(50, 200, seed=4)[0] != ex


def test_lomtree_row_args_and_system_selection():
    row = bm.LomtreeRow("x", "x", "plt", 10, ["--l2", "1e-6"])
    assert row.train_args() == ["-r", "plt", "--multilabel", "--passes", "10", "-c", "--holdout-off",
                                "--l2", "1e-6"]
    assert bm.LomtreeRow("y", "y", "oaa").train_args() == ["-r", "oaa", "--multilabel"]
    assert bm.select_systems(["vw"], False, False) == ["vw_plt_1", "vw_plt_5"]
    # an id is that row only, though it is also a prefix of another (lomtree_plt_10)
    assert bm.select_systems(["lomtree_plt_1"], False, False) == ["lomtree_plt_1"]
    assert bm.select_systems(["lomtree_plt"], False, False) == ["lomtree_plt_1", "lomtree_plt_10", "lomtree_plt_1x3"]
    quick = bm.select_systems(None, False, True)
    assert "vw_plt_5" not in quick and "lomtree_plt_10" not in quick and "napkinxc_plt" in quick
    assert all(s.startswith("lomtree") for s in bm.select_systems(None, True, False))
    with pytest.raises(SystemExit):
        bm.select_systems(["nosuch"], False, False)


def test_missing_anchor_is_a_note_not_a_crash(monkeypatch, tmp_path):
    monkeypatch.setattr(bm.importlib.util, "find_spec", lambda name: None)
    rep = bm.run_anchor("omikuji", tmp_path / "t", tmp_path / "e")
    assert rep["status"] == "not installed" and "omikuji" in rep["note"]


def test_duration():
    assert [bm._duration(s) for s in (90, 4000, 20000)] == ["90 s", "67 min", "5.6 h"]


def test_synthetic_only_replaces_the_sweep_and_keeps_the_rows(monkeypatch, tmp_path):
    import json

    run = {"system": "lomtree_plt_1", "dataset": "bibtex", "status": "ok", "p@1": 0.5, "p@3": 0.4, "p@5": 0.3,
           "train_cpu_s": 1.0, "train_wall_s": 1.0}
    old = {"command": "python -m data_scripts.bench_multilabel", "date": "d", "versions": {}, "note": None,
           "datasets": {"bibtex": {"train_examples": 2, "test_examples": 1, "features": 3, "labels": 4}},
           "runs": [run], "synthetic": [{"k": 10, "reduction": "plt", "status": "old"}]}
    (tmp_path / "multilabel.json").write_text(json.dumps(old))
    new = [{"k": 1000, "reduction": "plt", "status": "ok", "train_examples": 5, "train_us_per_example": 2.0,
            "marginal_us_per_example": 1.0, "predict_us_per_example": 3.0, "p@1": 1.0}]
    monkeypatch.setattr(bm, "find_lomtree", lambda exe: "lomtree")
    monkeypatch.setattr(bm, "lomtree_status", lambda exe: "ok")
    monkeypatch.setattr(bm, "run_synthetic", lambda *a: new)
    monkeypatch.setattr(bm, "plot_synthetic", lambda rows, path: None)
    assert bm.main(["--synthetic-only", "--out-dir", str(tmp_path), "--synthetic-k", "1000"]) == 0
    got = json.loads((tmp_path / "multilabel.json").read_text())
    assert got["runs"] == [run] and got["synthetic"] == new and got["command"] == old["command"]
    assert "--synthetic-only" in got["synthetic_command"] and got["synthetic_date"]
    md = (tmp_path / "multilabel.md").read_text()
    assert "Bibtex" in md and "| 1,000 |" in md and "--synthetic-only" in md


def test_hash_bits_and_ensemble_rows():
    # 10^4 labels get the wider table (collisions cost points there), small sets keep -b 24
    assert bm.bits_for(159) == 24 and bm.bits_for(4095) == 24
    assert bm.bits_for(4096) == 26 and bm.bits_for(25_596) == 26
    ens = [r for r in bm.LOMTREE_ROWS if r.trees > 1]
    assert ens, "an ensemble row exists"
    quick = bm.select_systems(None, skip_anchors=True, quick=True)
    assert not any(r.id in quick for r in ens)  # several trainings are not quick
    assert all(r.id in bm.select_systems(None, skip_anchors=True, quick=False) for r in ens)


def test_subsampled_task_keeps_every_nth_training_line_on_both_sides(tmp_path):
    """``pypi_names_small``'s files: the XMC and VW training files keep the same lines (every
    ``every``-th), the XMC header counts them, the test files are copied whole."""
    n = 23
    (tmp_path / "base.train.txt").write_text("23 5 4\n" + "".join(f"{i % 4} {i % 5}:1\n" for i in range(n)))
    (tmp_path / "base.train.vw").write_text("".join(f"{i % 4 + 1} | w{i}\n" for i in range(n)))
    for ext in (".txt", ".vw"):
        (tmp_path / f"base.test{ext}").write_text("test" + ext + "\n")
    bm._subsample_task(tmp_path, "base", "small", 10)
    xmc = (tmp_path / "small.train.txt").read_text().splitlines()
    vw = (tmp_path / "small.train.vw").read_text().splitlines()
    assert xmc == ["2 5 4", "1 4:1", "3 4:1"]
    assert vw == ["2 | w9", "4 | w19"]
    assert (tmp_path / "small.test.vw").read_text() == "test.vw\n"
    assert bm.DATASETS["pypi_names_small"]["train_every"] == 10
