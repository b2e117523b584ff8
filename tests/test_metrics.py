"""The progressive-validation table (docs/ALGORITHMS.md §4.2)."""

import io

import numpy as np

from lomtree_cli.metrics import HEADER, Progress, format_row


def test_first_line_matches_spec_vector():
    assert format_row(1.0, 1.0, 1, 1.0, 3, 1, 5) == \
        "1.000000 1.000000            1            1.0              3              1        5"


def test_header_is_verbatim():
    assert HEADER.splitlines()[0].startswith("average  since         example")


def test_doubling_points_and_averages():
    out = io.StringIO()
    pr = Progress(out)
    n = 10
    labels = np.arange(1, n + 1, dtype=np.int64)
    preds = labels.copy()
    preds[::2] = 0
    losses = (preds != labels).astype(float)
    pr.add_batch(labels, np.ones(n), preds, losses, np.full(n, 3), np.zeros(n, bool))
    rows = out.getvalue().splitlines()[2:]
    assert [int(r.split()[2]) for r in rows] == [1, 2, 4, 8]
    assert pr.average_loss == 0.5
    assert rows[0].startswith("1.000000 1.000000")


def test_unlabeled_examples_show_unknown_and_na():
    out = io.StringIO()
    pr = Progress(out)
    pr.add_batch(np.zeros(1, np.int64), np.ones(1), np.ones(1, np.int64), np.zeros(1), np.ones(1, np.int64),
                 np.zeros(1, bool))
    assert "unknown" in out.getvalue() and "n.a." in out.getvalue()


def test_table_names_labels_as_the_input_wrote_them(tmp_path):
    """String labels and 0-based XMC labels: the table's label and prediction columns are the
    input's names, as the predictions are, not the internal class ids."""
    from click.testing import CliRunner

    from lomtree_cli.cli import main

    data = tmp_path / "s.vw"
    data.write_text("".join(f"{lab} |f {lab}\n" for lab in ["cat", "dog"] * 4))
    r = CliRunner().invoke(main, ["train", "-r", "oaa", "-k", "2", "--named-labels", "cat,dog", str(data), "-P", "1"])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines() if line[:1].isdigit() or line.startswith("n.a.")]
    assert rows and all(row[4] in ("cat", "dog") and row[5] in ("cat", "dog") for row in rows[:8]), r.output
    xmc = tmp_path / "x.txt"
    xmc.write_text("4 2 3\n0 0:1\n2 1:1\n0 0:1\n2 1:1\n")  # labels 0 and 2 (0-based), 3 labels
    r = CliRunner().invoke(main, ["train", "-r", "oaa", "--format", "xmc", str(xmc), "-P", "1"])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines() if line[:1].isdigit() or line.startswith("n.a.")]
    assert [row[4] for row in rows] == ["0", "2", "0", "2"], r.output
    assert all(row[5] in ("0", "1", "2") for row in rows), r.output
