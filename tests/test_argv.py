"""``argv.parse``: the train/predict command lines read without click must mean what they mean to
click (the command line of record), and the common ones must not need click at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lomtree_cli import argv, cli
from tests.helpers import separable_lines

MAIN = [sys.executable, "-m", "lomtree_cli.launch"]
SPEC_FILE = Path(argv.__file__).with_name("cli_spec.py")


def test_option_table_is_generated_from_the_click_commands():
    assert SPEC_FILE.read_text() == argv.spec_source(), "run: python -m lomtree_cli.argv"


def click_reading(command: str, args: list[str]):
    """(params, given) as click reads ``args``, or None when click rejects them."""
    cmd = cli.main.commands[command]
    try:
        ctx = cmd.make_context(command, list(args))
    except (click.exceptions.ClickException, click.exceptions.Exit):
        return None
    given = {n for n in ctx.params if ctx.get_parameter_source(n).name == "COMMANDLINE"}
    return ctx.params, given


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("argv")
    (d / "file.vw").write_text("1 | a\n")
    (d / "dir").mkdir()
    return {"file": str(d / "file.vw"), "dir": str(d / "dir"), "none": str(d / "none.json")}


def test_common_command_lines_are_read_without_click(paths):
    f = paths["file"]
    for command, args in (
            ("predict", ["-i", "m.lt", f, "-p", "/dev/null", "--report", paths["none"], "--quiet"]),
            ("predict", ["-i", "m.lt", f, "-p", "-"]),
            ("predict", ["--model=m.lt", "--top-k", "5", "--probabilities", f]),
            ("predict", ["-im.lt", "-p-", "--threads", "2", f, f]),
            ("predict", ["-i", "m.lt", "--report", f, f]),  # an existing report file is overwritten
            ("train", ["-r", "lomtree", "-k", "105", "-b", "24", f, "-f", "m.lt", "--report", "r.json", "--quiet"]),
            ("train", ["-r", "filter", "-k", "26", "-l", "0.5", "--passes", "1", "--power_t", "0.5", f, "-f", "m.lt"]),
            ("train", ["-k", "3", "--format", "libsvm", "--label-offset", "1", "--holdout_off", "-P", "3"]),
            ("train", ["-i", "a.lt", f, "-f", "b.lt", "--max-internal-nodes", "2047", "--swap-resistance", "16"]),
    ):
        got = argv.parse(command, args)
        assert got is not None, args
        assert got == click_reading(command, args), args


def test_unusual_command_lines_are_left_to_click(paths):
    f = paths["file"]
    for command, args in (
            ("predict", [f]),  # -i missing
            ("predict", ["-i", "m.lt", "--help"]), ("predict", ["-h"]),
            ("predict", ["-i", "m.lt", "--", f]),
            ("predict", ["-i", "m.lt", "--bogus", f]),
            ("predict", ["-i", "m.lt", "-i", "n.lt", f]),  # repeated
            ("predict", ["-i", "m.lt", "-p", "--quiet"]),  # a value that starts with '-'
            ("predict", ["-i", "m.lt", "--quiet=1"]),
            ("predict", ["-i", "m.lt", "--threads", "-1"]), ("predict", ["-i", "m.lt", "--threads", "x"]),
            ("predict", ["-i", "m.lt", "--chunk-bytes", "8"]), ("predict", ["-i", "m.lt", "--top-k", "0"]),
            ("predict", ["-i", "m.lt", "--report", paths["dir"]]),
            ("predict", ["-i", "m.lt", "-P", "0.5"]), ("predict", ["-i", "m.lt", "-P", "x"]),
            ("predict", ["-i"]),
            ("train", ["-r", "nope"]), ("train", ["-k", "1.5"]), ("train", ["-c", "x.cache"]),
            ("train", ["-c"]), ("train", ["--cache=x"]), ("train", ["-f", paths["dir"]]),
            ("serve", []), ("inspect", ["m.lt"]),
    ):
        assert argv.parse(command, args) is None, args


def _values(kind: tuple, paths: dict) -> list[str]:
    """Values for an option of this kind: mostly ones click accepts, some it rejects."""
    tag = kind[0]
    if tag == "int":
        return ["0", "1", "3", "-1", "1.5", "x", "+5", "1_0", " 7", ""]
    if tag == "float":
        return ["0.5", "1", "-2", "x", "1e3", "inf", "1_0.5", ""]
    if tag == "intrange":
        lo = kind[1]
        return [str(lo), str(lo + 1), str(lo - 1), "4096", "-1", "x", "0"]
    if tag == "choice":
        return list(kind[1]) + ["nope", kind[1][0].upper()]
    if tag == "path":
        return [paths["file"], paths["dir"], paths["none"], "-"]
    if tag == "progress":
        return ["2.0", "3", "0", "0.5", "x", "1", "1.0", "+4"]
    return ["m.lt", "-", "x", paths["file"]]


@st.composite
def command_lines(draw, command: str, paths: dict):
    """A command line: distinct options in random spellings and forms (``-o v``, ``-ov``,
    ``--opt v``, ``--opt=v``) with values of their kind, positional words, now and then an oddity."""
    options = argv.SPECS[command]["options"]
    chosen = draw(st.lists(st.sampled_from(options), max_size=6, unique_by=lambda o: o[0]))
    if command == "predict" and draw(st.integers(0, 9)) > 0 and options[0] not in chosen:
        chosen.append(options[0])  # -i MODEL, required
    groups = []
    for name, spellings, kind, _default, _required in chosen:
        spelling = draw(st.sampled_from(spellings))
        if kind[0] == "flag":
            groups.append([spelling] if draw(st.integers(0, 9)) else [spelling + "=1"])
            continue
        value = draw(st.sampled_from(_values(kind, paths) if kind[0] != "defer" else ["x"]))
        form = draw(st.integers(0, 2))
        if form == 0 or (form == 2 and len(spelling) != 2):
            groups.append([spelling, value])
        elif form == 1:
            groups.append([f"{spelling}={value}"])
        else:
            groups.append([spelling + value])
    for _ in range(draw(st.integers(0, 2))):
        groups.append([draw(st.sampled_from([paths["file"], "a.vw", "-"]))])
    if draw(st.integers(0, 7)) == 0:
        groups.append([draw(st.sampled_from(["--", "-h", "--help", "--bogus", "-z"]))])
    if draw(st.integers(0, 7)) == 0 and chosen:  # a repeated option
        groups.append(list(groups[0]))
    order = draw(st.permutations(range(len(groups))))
    return [w for i in order for w in groups[i]]


@pytest.mark.parametrize("command", ["predict", "train"])
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_what_argv_reads_click_reads_the_same(command, paths, data):
    args = data.draw(command_lines(command, paths))
    got = argv.parse(command, args)
    if got is not None:
        assert got == click_reading(command, args), args


def _outputs(tmp_path: Path, args: list[str], fast: bool, tag: str):
    env = {**os.environ, "LOMTREE_CLICK": "0" if fast else "1"}
    rep = tmp_path / f"{tag}.json"
    p = subprocess.run(MAIN + args + ["--report", str(rep)], capture_output=True, timeout=300, env=env,
                       cwd=tmp_path)
    report = json.loads(rep.read_text()) if rep.exists() else None
    if report:
        for key in list(report):
            if "second" in key or "time" in key or key in ("start", "elapsed"):
                report.pop(key)
    return p.returncode, p.stdout, p.stderr, report


def test_commands_do_the_same_with_and_without_click(tmp_path):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(separable_lines(4, 600, seed=5)) + "\n")
    runs = {}
    for fast in (True, False):
        tag = "fast" if fast else "click"
        tr = _outputs(tmp_path, ["train", "-r", "lomtree", "-k", "4", "-b", "14", "d.vw", "-f", f"{tag}.lt",
                                 "-p", f"{tag}.train.p", "-P", "100"], fast, f"{tag}.train")
        pr = _outputs(tmp_path, ["predict", "-i", f"{tag}.lt", "d.vw", "-p", "-"], fast, f"{tag}.test")
        bad_model = _outputs(tmp_path, ["predict", "-i", "none.lt", "d.vw", "-p", "-"], fast, f"{tag}.bad")
        bad_k = _outputs(tmp_path, ["train", "-r", "lomtree", "-k", "0", "d.vw", "--quiet"], fast, f"{tag}.badk")
        loss = _outputs(tmp_path, ["train", "-r", "lomtree", "-k", "4", "-b", "12", "--loss-function", "quantile",
                                   "d.vw"], fast, f"{tag}.loss")
        runs[tag] = (tr, pr, bad_model, bad_k, loss,
                     (tmp_path / f"{tag}.train.p").read_bytes(), (tmp_path / f"{tag}.lt").read_bytes())
    fast, slow = runs["fast"], runs["click"]
    assert fast[0][0] == 0 and fast[1][0] == 0
    assert fast[2][0] == 2 and b"model file not found" in fast[2][2]
    assert fast[3][0] != 0 and fast[3][2].startswith(b"error: ")
    assert fast[4][0] == 0 and b"warning" not in fast[4][2]  # any loss is taken as asked
    for a, b in zip(fast, slow):
        assert a == b
