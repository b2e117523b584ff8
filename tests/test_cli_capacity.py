"""``-k`` as a capacity at the command line: a label the stream has not met yet, within -k,
arriving mid-stream or in a file that continues a model (``-i``), is learned and then predicted,
by every reduction, with integer labels and with ``--string-labels`` (a new name takes the next
free id); a label beyond -k is a one-line error naming the file and line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import cli, one_error

REDUCTIONS = ["oaa", "plt", "cpt", "lomtree", "filter", "rtree"]


def _lines(labels, named: bool, seed: int) -> list[str]:
    """Class c always has the feature ``c<c>`` (separable), plus one of a few noise features."""
    rng = np.random.default_rng(seed)
    return [f"{'c' if named else ''}{c} |a c{c} n{int(rng.integers(0, 6))}" for c in labels]


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def _hits(pred_path, lines, label: str) -> tuple[int, int]:
    """(right, all) predictions of the lines whose label is ``label``."""
    preds = pred_path.read_text().split()
    truth = [ln.split()[0] for ln in lines]
    on = [p for p, t in zip(preds, truth) if t == label]
    return sum(p == label for p in on), len(on)


@pytest.mark.parametrize("named", [False, True], ids=["int", "string"])
@pytest.mark.parametrize("r", REDUCTIONS)
def test_new_label_within_k_mid_stream_and_continued(tmp_path, r, named):
    five = [1 + i % 5 for i in range(150)]
    six = [1 + i % 6 for i in range(300)]
    sl = ["--string-labels"] if named else []
    six_name = "c6" if named else "6"
    # mid-stream: label 6 first at line 156 of a -k 10 run; predicted after it was learned
    # (--tree-buffer 0: plt's tree grows online, not from a buffer of the stream's first lines)
    lines = _lines(five + six, named, 0)
    stream = _write(tmp_path / "stream.vw", lines)
    extra = ["--tree-buffer", "0"] if r == "plt" else []
    code, _, err = cli("train", "-r", r, "-k", "10", *sl, *extra, stream, "-p", tmp_path / "p", "--quiet")
    assert code == 0, err
    preds = (tmp_path / "p").read_text().split()
    late = [p == ln.split()[0] for p, ln in zip(preds[-120:], lines[-120:]) if ln.split()[0] == six_name]
    assert len(late) == 20 and all(late), (r, named, late)
    # continued: a model that met labels 1..5 (of -k 10) goes on with a file that has a 6th
    first = _write(tmp_path / "five.vw", _lines(five, named, 1))
    code, _, err = cli("train", "-r", r, "-k", "10", *sl, first, "-f", tmp_path / "m5.lt", "--quiet")
    assert code == 0, err
    more = _lines(six, named, 2)
    second = _write(tmp_path / "six.vw", more)
    code, _, err = cli("train", "-i", tmp_path / "m5.lt", second, "-f", tmp_path / "m6.lt", "--quiet")
    assert code == 0, err
    code, _, err = cli("predict", "-i", tmp_path / "m6.lt", second, "-p", tmp_path / "p6", "--quiet")
    assert code == 0, err
    right, n = _hits(tmp_path / "p6", more, six_name)
    assert n == 50 and right == n, (r, named, right, n)


@pytest.mark.parametrize("named", [False, True], ids=["int", "string"])
@pytest.mark.parametrize("r", REDUCTIONS)
def test_label_beyond_k_is_one_error_with_file_and_line(tmp_path, r, named):
    sl = ["--string-labels"] if named else []
    lines = _lines([1 + i % 5 for i in range(20)] + [6], named, 0)
    path = _write(tmp_path / "six.vw", lines)
    code, _, err = cli("train", "-r", r, "-k", "5", *sl, path, "--quiet")
    msg = one_error(code, err, 1)
    assert "six.vw:21:" in msg and "outside 1..5" in msg, msg
    # and continuing a -k 5 model on it: the model's -k is the capacity
    code, _, err = cli("train", "-r", r, "-k", "5", *sl, _write(tmp_path / "five.vw", lines[:20]), "-f",
                       tmp_path / "m.lt", "--quiet")
    assert code == 0, err
    code, _, err = cli("train", "-i", tmp_path / "m.lt", path, "--quiet")
    msg = one_error(code, err, 1)
    assert "six.vw:21:" in msg and "outside 1..5" in msg, msg
