"""The command line end to end: real subprocesses on stdin and files, exit codes, reports."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import separable_lines

LOMTREE = [sys.executable, "-m", "lomtree_cli.launch"]


def run(args, stdin=None, check=None):
    p = subprocess.run(LOMTREE + args, input=stdin, capture_output=True, text=True, timeout=300)
    if check is not None:
        assert p.returncode == check, p.stderr
    return p


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    train = separable_lines(8, 300, seed=0, noise_feats=2)
    test = separable_lines(8, 60, seed=1, noise_feats=2)
    (d / "train.vw").write_text("\n".join(train) + "\n")
    (d / "test.vw").write_text("\n".join(f"{ln.split(' ', 1)[0]} 'id{i}{ln[ln.index(' '):]}" for i, ln in enumerate(test)) + "\n")
    return d


def test_help_does_not_import_numba():
    code = ("import sys; from lomtree_cli.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'numba' not in sys.modules, 'numba imported'\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "train" in p.stdout and "predict" in p.stdout


def test_train_stdin_then_predict_files(data, tmp_path):
    model = str(tmp_path / "m.lt")
    report = str(tmp_path / "r.json")
    p = run(["train", "-r", "oaa", "-k", "8", "-f", model, "--report", report, "--passes", "1"],
            stdin=(data / "train.vw").read_text(), check=0)
    assert "average  since" in p.stderr and "finished run" in p.stderr
    r = json.load(open(report))
    for key in ("examples", "weighted_examples", "average_loss", "holdout_loss", "passes", "total_features",
                "skipped_lines", "seconds", "examples_per_second", "reduction", "k", "bits"):
        assert key in r
    assert r["examples"] == 300 and r["reduction"] == "oaa" and r["k"] == 8
    report2 = str(tmp_path / "r2.json")
    p = run(["predict", "-i", model, str(data / "test.vw"), "-p", "-", "--report", report2, "--quiet"], check=0)
    lines = p.stdout.splitlines()
    assert len(lines) == 60 and lines[0].endswith(" id0")
    assert json.load(open(report2))["average_loss"] == 0.0
    assert p.stderr == ""


def test_predict_reads_stdin_and_dash(data, tmp_path):
    model = str(tmp_path / "m.lt")
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", model, "--quiet"], check=0)
    a = run(["predict", "-i", model, "--quiet"], stdin=(data / "test.vw").read_text(), check=0).stdout
    b = run(["predict", "-i", model, "-", "--quiet"], stdin=(data / "test.vw").read_text(), check=0).stdout
    assert a == b and len(a.splitlines()) == 60


def test_an_unreadable_input_stops_the_run_before_it_reads_any(data, tmp_path):
    """A missing file or a directory among the inputs is the one error before the first line is
    read, in train and predict alike (before, the files ahead of it were trained on and lost)."""
    model = str(tmp_path / "m.lt")
    missing = str(tmp_path / "missing.vw")
    p = run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), missing, "-f", model], check=1)
    assert p.stderr.strip().splitlines()[-1] == f"error: {missing}: cannot open input: No such file or directory"
    assert "Reading datafile" not in p.stderr and not os.path.exists(model)
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", model, "--quiet"], check=0)
    p = run(["predict", "-i", model, str(data / "test.vw"), str(tmp_path), "-p", str(tmp_path / "p.txt")], check=1)
    assert p.stderr.strip().splitlines() == [f"error: {tmp_path}: cannot open input: Is a directory"]
    assert not os.path.exists(tmp_path / "p.txt")


def test_compressed_standard_input_is_read_as_its_file(data, tmp_path):
    """A .gz, .bz2 or .xz stream piped in is known by its first bytes and read as the file would
    be; a truncated one is a one-line error; a text line that starts with "BZh" stays text."""
    import bz2
    import gzip
    import lzma

    model = str(tmp_path / "m.lt")
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", model, "--quiet"], check=0)
    raw = (data / "test.vw").read_bytes()
    want = run(["predict", "-i", model, str(data / "test.vw"), "--quiet"], check=0).stdout
    for pack in (gzip.compress, bz2.compress, lzma.compress):
        p = subprocess.run(LOMTREE + ["predict", "-i", model, "--quiet"], input=pack(raw), capture_output=True,
                           timeout=300)
        assert p.returncode == 0 and p.stdout.decode() == want, (pack, p.stderr)
    p = subprocess.run(LOMTREE + ["predict", "-i", model, "--quiet"], input=gzip.compress(raw)[:200],
                       capture_output=True, timeout=300)
    assert p.returncode == 1
    assert p.stderr.decode().strip().splitlines()[-1].startswith("error: <stdin>: truncated or corrupt compressed")
    p = run(["predict", "-i", model, "--quiet"], stdin="BZh91 | c1\n", check=1)
    assert "error: <stdin>:1: bad label 'BZh91'" in p.stderr


def test_continue_training_from_initial_model(data, tmp_path):
    m1 = str(tmp_path / "a.lt")
    m2 = str(tmp_path / "b.lt")
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", m1, "--quiet"], check=0)
    run(["train", "-i", m1, str(data / "train.vw"), "-f", m2, "--quiet"], check=0)
    p = run(["train", "-i", m1, "-b", "20", str(data / "train.vw"), "--quiet"], check=2)
    assert "conflicts with the initial model" in p.stderr
    # the message names the options as they are spelled on the command line
    p = run(["train", "-i", m1, "-k", "9", str(data / "train.vw"), "--quiet"], check=2)
    assert "error: -k 9 conflicts with the initial model (k = 8)" in p.stderr
    p = run(["train", "-i", m1, "--loss-function", "hinge", str(data / "train.vw"), "--quiet"], check=2)
    assert "error: --loss-function hinge conflicts with the initial model (loss = squared)" in p.stderr


def test_closed_pipe_is_quiet(data, tmp_path):
    model = str(tmp_path / "m.lt")
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", model, "--quiet"], check=0)
    big = str(tmp_path / "big.vw")
    with open(big, "w") as f:
        for _ in range(200):
            f.write((data / "test.vw").read_text())
    cmd = " ".join(LOMTREE) + f" predict -i {model} {big} -p - | head -3"
    p = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, text=True, timeout=120)
    assert p.stdout.count("\n") == 3
    assert "Traceback" not in p.stderr and "Error" not in p.stderr


@pytest.mark.parametrize("line,what", [
    ("x | a", "label"),
    ("1 2 3 | a", "label"),
    ("1 -2 | a", "weight"),
    ("1 | a:1zz", "value"),
    ("1 a b", "|"),
])
def test_bad_input_line_names_file_and_line(tmp_path, line, what):
    f = tmp_path / "bad.vw"
    f.write_text("1 | a\n2 | b\n" + line + "\n")
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "--quiet"], check=1)
    assert p.stderr.startswith(f"error: {f}:3: ") and what in p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1


def test_label_out_of_range_and_skip_invalid(tmp_path):
    f = tmp_path / "bad.vw"
    f.write_text("1 | a\n9 | b\n2 | c\nfoo | d\n")
    p = run(["train", "-r", "oaa", "-k", "3", str(f), "--quiet"], check=1)
    assert f"{f}:2:" in p.stderr and "outside 1..3" in p.stderr
    rep = str(tmp_path / "r.json")
    run(["train", "-r", "oaa", "-k", "3", str(f), "--skip-invalid", "--quiet", "--report", rep], check=0)
    r = json.load(open(rep))
    assert r["skipped_lines"] == 2 and r["examples"] == 2


def test_bad_model_files_exit_2(tmp_path):
    p = run(["predict", "-i", str(tmp_path / "missing.lt")], stdin="1 | a\n", check=2)
    assert "not found" in p.stderr and "Traceback" not in p.stderr
    junk = tmp_path / "junk.lt"
    junk.write_bytes(os.urandom(300))
    p = run(["predict", "-i", str(junk)], stdin="1 | a\n", check=2)
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1


def test_bad_usage_exit_2(tmp_path):
    assert run(["train", "-r", "oaa", "--quiet"], stdin="1 | a\n").returncode == 2  # no -k
    assert run(["train", "-r", "oaa", "-k", "3", "-b", "40"], stdin="1 | a\n").returncode == 2
    assert run(["train", "-r", "nope", "-k", "3"], stdin="1 | a\n").returncode == 2


def test_inspect_text_and_json(data, tmp_path):
    model = str(tmp_path / "m.lt")
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-f", model, "--quiet"], check=0)
    assert "reduction: oaa" in run(["inspect", model], check=0).stdout
    info = json.loads(run(["inspect", model, "--json"], check=0).stdout)
    assert info["k"] == 8


def test_progressive_predictions_file(data, tmp_path):
    preds = tmp_path / "p.txt"
    run(["train", "-r", "oaa", "-k", "8", str(data / "train.vw"), "-p", str(preds), "--quiet"], check=0)
    assert len(preds.read_text().splitlines()) == 300


def test_compressed_inputs(data, tmp_path):
    import gzip
    import lzma

    text = (data / "train.vw").read_bytes()
    for name, opener in (("t.vw.gz", gzip.open), ("t.vw.xz", lzma.open)):
        with opener(tmp_path / name, "wb") as f:
            f.write(text)
        rep = str(tmp_path / (name + ".json"))
        run(["train", "-r", "oaa", "-k", "8", str(tmp_path / name), "--quiet", "--report", rep], check=0)
        assert json.load(open(rep))["examples"] == 300
